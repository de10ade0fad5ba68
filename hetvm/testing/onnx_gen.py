"""A Hypothesis strategy for random valid ONNX models of a few ops each.

The ONNX importer's single-node conformance is tested elsewhere; this module
makes *compositions*: a random DAG of 2-10 nodes (elementwise ops with
broadcasting, MatMul/Gemm, layout ops, reductions, Softmax, Where, Cast, Gather,
Clip, LayerNormalization ...) over small float32 tensors, with int64 and bool
where they arise naturally. The first input's leading dim is sometimes symbolic
("N"), and Reshape targets are sometimes computed with Shape -> Gather -> Concat,
so the importer's folding of shape arithmetic on symbolic dims is exercised.

``onnx_models()`` draws ``(model, feeds)``. Each drawn model passes
``onnx.checker.check_model(model, full_check=True)``; the generator tracks
every tensor's shape itself (a dim is static, affine in N, or opaque), so it
only emits nodes whose inputs it knows to be valid, and it feeds concrete
values. Values compared by a condition (Greater/Less) or cast to an integer are
always computed without rounding (inputs, layout ops, Abs, Max ...), so two
correct implementations agree on them exactly.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from hypothesis import strategies as st

__all__ = ["onnx_models", "OPS"]

_MAX_RANK = 4
_MAX_DIM = 5


# ----------------------------------------------------------------------------
# dims: a static int, a*N + b (affine in the symbolic input dim) or opaque
@dataclass(frozen=True)
class Dim:
    """One dim: ``value`` is its concrete size in the drawn feeds; ``key`` says
    what a static shape checker can know about it (None: a static size)."""

    value: int
    key: Any = None

    @property
    def static(self) -> bool:
        return self.key is None

    def same(self, other: Dim) -> bool:
        return self.key == other.key and self.value == other.value

    @property
    def is_n(self) -> bool:
        return self.key == ("N", 1, 0)


_OPAQUE = itertools.count(1)


def _opaque(value: int) -> Dim:
    return Dim(value, ("opaque", next(_OPAQUE)))


def _affine(value: int, a: int, b: int) -> Dim:
    return Dim(value) if a == 0 else Dim(value, ("N", a, b))


def _prod(dims: list[Dim]) -> Dim:
    value = int(np.prod([d.value for d in dims], dtype=np.int64)) if dims else 1
    static = int(np.prod([d.value for d in dims if d.static], dtype=np.int64)) if dims else 1
    dynamic = [d for d in dims if not d.static]
    if not dynamic:
        return Dim(value)
    if len(dynamic) == 1 and dynamic[0].key[0] == "N":
        _, a, b = dynamic[0].key
        return _affine(value, a * static, b * static)
    return _opaque(value)


def _div(d: Dim, k: int) -> Dim:
    if d.static:
        return Dim(d.value // k)
    if d.key[0] == "N" and d.key[1] % k == 0 and d.key[2] % k == 0:
        return _affine(d.value // k, d.key[1] // k, d.key[2] // k)
    return _opaque(d.value // k)


def _add(x: Dim, y: Dim) -> Dim:
    if x.static and y.static:
        return Dim(x.value + y.value)
    kx = ("N", 0, x.value) if x.static else x.key
    ky = ("N", 0, y.value) if y.static else y.key
    if kx[0] == "N" and ky[0] == "N":
        return _affine(x.value + y.value, kx[1] + ky[1], kx[2] + ky[2])
    return _opaque(x.value + y.value)


def _broadcast(xs: tuple[Dim, ...], ys: tuple[Dim, ...]) -> tuple[Dim, ...] | None:
    """The multidirectional broadcast of two shapes, or None where a static
    checker could not prove it valid."""
    out: list[Dim] = []
    for i in range(1, max(len(xs), len(ys)) + 1):
        x = xs[-i] if i <= len(xs) else Dim(1)
        y = ys[-i] if i <= len(ys) else Dim(1)
        if x.same(y):
            out.append(x)
        elif x.static and x.value == 1:
            out.append(y)
        elif y.static and y.value == 1:
            out.append(x)
        else:
            return None
    return tuple(reversed(out))


# ----------------------------------------------------------------------------
@dataclass
class T:
    """A tensor of the graph being built."""

    name: str
    dtype: str  # "float32" | "int64" | "bool"
    dims: tuple[Dim, ...]
    #: its values are computed without rounding (safe to compare or truncate)
    exact: bool = True
    #: a graph input (not a node's output)
    is_input: bool = False

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def all_static(self) -> bool:
        return all(d.static for d in self.dims)


_ONNX_TYPE = {"float32": 1, "int64": 7, "bool": 9}
_OPSET_CHOICES = (17, 18)


@dataclass
class _Builder:
    """Grows one graph; every choice is a Hypothesis draw (so examples shrink)."""

    draw: Callable[[Any], Any]
    rng: np.random.Generator
    opset: int
    n_value: int
    nodes: list[Any] = field(default_factory=list)
    inputs: list[Any] = field(default_factory=list)
    initializers: list[Any] = field(default_factory=list)
    feeds: dict[str, np.ndarray] = field(default_factory=dict)
    pool: list[T] = field(default_factory=list)
    counter: int = 0

    # -- names, values ----------------------------------------------------
    def fresh_name(self, prefix: str = "t") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def values(self, dtype: str, shape: tuple[int, ...], nonzero: bool = False) -> np.ndarray:
        if dtype == "float32":
            v = self.rng.uniform(-2.0, 2.0, size=shape).astype(np.float32)
            if nonzero:
                v = (np.sign(v) + (v == 0)) * (0.5 + np.abs(v) * 0.75)
            return np.asarray(v, dtype=np.float32)
        if dtype == "int64":
            v = self.rng.integers(-4, 5, size=shape).astype(np.int64)
            if nonzero:
                v[v == 0] = 1
            return v
        return self.rng.integers(0, 2, size=shape).astype(bool)

    def const(self, array: np.ndarray, as_node: bool | None = None) -> str:
        """A constant: an initializer, or sometimes a Constant node."""
        from onnx import helper, numpy_helper

        name = self.fresh_name("c")
        if as_node is None:
            as_node = self.draw(st.integers(0, 4)) == 0
        if as_node:
            self.nodes.append(helper.make_node("Constant", [], [name], name=f"n_{name}",
                                               value=numpy_helper.from_array(np.asarray(array), name)))  # fmt: skip
        else:
            self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def ints(self, values: list[int]) -> str:
        return self.const(np.asarray(values, dtype=np.int64))

    def fresh(self, dtype: str, dims: tuple[Dim, ...], nonzero: bool = False) -> T:
        """A new graph input or initializer of these dims (N dims need an input)."""
        from onnx import helper, numpy_helper

        shape = tuple(d.value for d in dims)
        data = self.values(dtype, shape, nonzero)
        all_static = all(d.static for d in dims)
        if all_static and self.draw(st.booleans()):
            name = self.fresh_name("w")
            self.initializers.append(numpy_helper.from_array(data, name))
            t = T(name, dtype, dims, exact=True, is_input=True)
        else:
            name = self.fresh_name("x")
            shape_proto = ["N" if d.is_n else d.value for d in dims]
            self.inputs.append(helper.make_tensor_value_info(name, _ONNX_TYPE[dtype], shape_proto))
            self.feeds[name] = data
            t = T(name, dtype, dims, exact=True, is_input=True)
        if not nonzero and self.draw(st.integers(0, 2)) == 0:
            self.pool.append(t)  # later nodes may read it too
        return t

    def node(self, op: str, ins: list[str], n_out: int = 1, **attrs: Any) -> list[str]:
        from onnx import helper

        outs = [self.fresh_name() for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, ins, outs, name=f"n{len(self.nodes)}_{op}", **attrs))
        return outs

    def add(self, t: T) -> T:
        self.pool.append(t)
        return t

    def initializer_names(self) -> set[str]:
        return {i.name for i in self.initializers}

    # -- picking ----------------------------------------------------------
    def pick(self, ok: Callable[[T], bool]) -> T | None:
        """A pool tensor satisfying ``ok`` (the most recent ones first, so
        examples shrink towards chains)."""
        cands = [t for t in reversed(self.pool) if ok(t)]
        if not cands:
            return None
        return self.draw(st.sampled_from(cands))

    def expressible(self, d: Dim) -> bool:
        return d.static or d.is_n

    def operand_for(self, x: T, dtype: str, nonzero: bool = False, exact: bool = False) -> tuple[T, tuple[Dim, ...]]:
        """A second operand broadcasting with ``x``: a pool tensor or a fresh one."""
        if not nonzero and self.draw(st.booleans()):
            def ok(t: T) -> bool:
                return (t.dtype == dtype and (t.exact or not exact)
                        and _broadcast(x.dims, t.dims) is not None)  # fmt: skip
            y = self.pick(ok)
            if y is not None:
                out = _broadcast(x.dims, y.dims)
                assert out is not None
                return y, out
        k = self.draw(st.integers(0, x.rank))
        dims: list[Dim] = []
        for d in x.dims[x.rank - k:]:
            if d.static and d.value == 1:
                dims.append(Dim(self.draw(st.sampled_from([1, 1, 2, 3]))))
            elif self.expressible(d) and self.draw(st.integers(0, 3)) > 0:
                dims.append(d)
            else:
                dims.append(Dim(1))
        if x.rank < _MAX_RANK and k == x.rank and self.draw(st.integers(0, 5)) == 0:
            dims.insert(0, Dim(self.draw(st.integers(1, 3))))
        y = self.fresh(dtype, tuple(dims), nonzero=nonzero)
        out = _broadcast(x.dims, y.dims)
        assert out is not None
        return y, out


# ----------------------------------------------------------------------------
# ops: each takes the builder and returns False when it does not apply
def _float(t: T) -> bool:
    return t.dtype == "float32"


def _numeric(t: T) -> bool:
    return t.dtype in ("float32", "int64")


def _binary(b: _Builder, op: str) -> bool:
    x = b.pick(_numeric if op != "Div" else _float)
    if x is None:
        return False
    y, dims = b.operand_for(x, x.dtype, nonzero=op == "Div")
    if op != "Div" and b.draw(st.booleans()):
        x, y = y, x
    (out,) = b.node(op, [x.name, y.name])
    b.add(T(out, x.dtype, dims, exact=x.dtype != "float32"))
    return True


def _unary(b: _Builder, op: str) -> bool:
    ok = _float if op in ("Sigmoid", "Tanh") else _numeric
    x = b.pick(ok)
    if x is None:
        return False
    (out,) = b.node(op, [x.name])
    b.add(T(out, x.dtype, x.dims, exact=x.exact and op in ("Relu", "Abs", "Neg")))
    return True


def _sqrt(b: _Builder) -> bool:
    x = b.pick(_float)
    if x is None:
        return False
    (a,) = b.node("Abs", [x.name])
    eps = b.const(np.asarray(1e-3, dtype=np.float32))
    (s,) = b.node("Add", [a, eps])
    (out,) = b.node("Sqrt", [s])
    b.add(T(out, "float32", x.dims, exact=False))
    return True


def _matmul(b: _Builder) -> bool:
    x = b.pick(lambda t: _float(t) and t.rank >= 1)
    if x is None:
        return False
    k = x.dims[-1]
    y: T | None = None
    if b.draw(st.booleans()):
        y = b.pick(lambda t: _float(t) and t.rank >= 2 and t.dims[-2].same(k)
                   and _broadcast(x.dims[:-2], t.dims[:-2]) is not None)  # fmt: skip
    if y is None:
        if not b.expressible(k):
            return False
        p = Dim(b.draw(st.integers(1, _MAX_DIM)))
        kind = b.draw(st.sampled_from(["2d", "1d", "batched"]))
        if kind == "1d":
            y = b.fresh("float32", (k,))
        elif kind == "batched" and x.rank >= 3:
            batch = tuple(d if (b.expressible(d) and b.draw(st.booleans())) else Dim(1) for d in x.dims[:-2])
            y = b.fresh("float32", batch + (k, p))
        else:
            y = b.fresh("float32", (k, p))
    if x.rank == 1 and y.rank == 1:
        dims: tuple[Dim, ...] = ()
    elif x.rank == 1:
        dims = y.dims[:-2] + (y.dims[-1],)
    elif y.rank == 1:
        dims = x.dims[:-1]
    else:
        batch = _broadcast(x.dims[:-2], y.dims[:-2])
        assert batch is not None
        dims = batch + (x.dims[-2], y.dims[-1])
    if len(dims) > _MAX_RANK:
        return False
    (out,) = b.node("MatMul", [x.name, y.name])
    b.add(T(out, "float32", dims, exact=False))
    return True


def _gemm(b: _Builder) -> bool:
    a = b.pick(lambda t: _float(t) and t.rank == 2)
    if a is None:
        # flatten a tensor of another rank first
        x = b.pick(lambda t: _float(t) and t.rank >= 1)
        if x is None:
            return False
        axis = b.draw(st.integers(0, x.rank))
        (flat,) = b.node("Flatten", [x.name], axis=axis)
        a = T(flat, "float32", (_prod(list(x.dims[:axis])), _prod(list(x.dims[axis:]))), exact=x.exact)
    trans_a = b.draw(st.integers(0, 1))
    trans_b = b.draw(st.integers(0, 1))
    m, k = (a.dims[1], a.dims[0]) if trans_a else a.dims
    if not b.expressible(k):
        return False
    p = Dim(b.draw(st.integers(1, _MAX_DIM)))
    w = b.fresh("float32", (p, k) if trans_b else (k, p))
    ins = [a.name, w.name]
    c_kind = b.draw(st.sampled_from(["none", "p", "1p", "mp", "m1", "scalar", "11"]))
    if c_kind in ("mp", "m1") and not b.expressible(m):
        c_kind = "p"
    if c_kind != "none":
        c_dims = {"p": (p,), "1p": (Dim(1), p), "mp": (m, p), "m1": (m, Dim(1)),
                  "scalar": (), "11": (Dim(1), Dim(1))}[c_kind]  # fmt: skip
        ins.append(b.fresh("float32", c_dims).name)
    attrs: dict[str, Any] = {}
    if trans_a:
        attrs["transA"] = 1
    if trans_b:
        attrs["transB"] = 1
    if b.draw(st.booleans()):
        attrs["alpha"] = b.draw(st.sampled_from([0.5, 2.0, -1.0]))
    if c_kind != "none" and b.draw(st.booleans()):
        attrs["beta"] = b.draw(st.sampled_from([0.5, 2.0, -1.0, 0.0]))
    (out,) = b.node("Gemm", ins, **attrs)
    b.add(T(out, "float32", (m, p), exact=False))
    return True


def _transpose(b: _Builder) -> bool:
    x = b.pick(lambda t: t.rank >= 1)
    if x is None:
        return False
    perm = b.draw(st.permutations(list(range(x.rank))))
    attrs = {} if (x.rank > 1 and b.draw(st.integers(0, 5)) == 0) else {"perm": list(perm)}
    if not attrs:
        perm = list(reversed(range(x.rank)))
    (out,) = b.node("Transpose", [x.name], **attrs)
    b.add(T(out, x.dtype, tuple(x.dims[p] for p in perm), exact=x.exact))
    return True


def _factor(b: _Builder, n: int, max_parts: int) -> list[int]:
    """Random factors whose product is ``n`` (at most ``max_parts``, >= 1 of them)."""
    parts: list[int] = []
    rest = n
    while len(parts) < max_parts - 1 and rest > 1 and b.draw(st.booleans()):
        divisors = [d for d in range(2, rest + 1) if rest % d == 0]
        d = b.draw(st.sampled_from(divisors))
        parts.append(d)
        rest //= d
    parts.append(rest)
    if b.draw(st.integers(0, 4)) == 0 and len(parts) < max_parts:
        parts.insert(b.draw(st.integers(0, len(parts))), 1)
    return parts


def _reshape_const(b: _Builder) -> bool:
    x = b.pick(lambda t: True)
    if x is None:
        return False
    keep = b.draw(st.integers(0, x.rank))  # leading dims copied with 0
    rest = list(x.dims[keep:])
    static = [d for d in rest if d.static]
    dynamic = [d for d in rest if not d.static]
    s = int(np.prod([d.value for d in static], dtype=np.int64)) if static else 1
    room = _MAX_RANK - keep
    if room <= 0 and rest:
        return False
    target: list[int] = [0] * keep
    dims = list(x.dims[:keep])
    if dynamic or (rest and b.draw(st.booleans())):
        # one -1 takes the dynamic dims and what the static factors leave
        divisors = [d for d in range(1, s + 1) if s % d == 0]
        shown = b.draw(st.sampled_from(divisors)) if divisors else 1
        factors = _factor(b, shown, max(1, room - 1)) if room > 1 else []
        if shown == 1 and b.draw(st.booleans()):
            factors = []
        pos = b.draw(st.integers(0, len(factors)))
        minus = _prod(dynamic + [Dim(s)])
        minus = _div(minus, int(np.prod(factors, dtype=np.int64)) if factors else 1)
        new = [Dim(f) for f in factors]
        new.insert(pos, minus)
        vals: list[int] = list(factors)
        vals.insert(pos, -1)
        target += vals
        dims += new
    elif rest:
        factors = _factor(b, s, room)
        target += factors
        dims += [Dim(f) for f in factors]
    if not target:
        # a scalar, or a reshape of a rank-0 tensor / to rank 0
        if x.rank == 0 or (all(d.static and d.value == 1 for d in x.dims)):
            target, dims = [], []
        else:
            return False
    if len(dims) > _MAX_RANK:
        return False
    (out,) = b.node("Reshape", [x.name, b.ints(target)])
    b.add(T(out, x.dtype, tuple(dims), exact=x.exact))
    return True


def _reshape_shape(b: _Builder) -> bool:
    """Reshape x to [dims of another tensor gathered from its Shape..., tail],
    the tail -1, a static size, or the product of x's other dims computed from
    its own Shape (Gather -> Mul -> Unsqueeze, as exported models do)."""
    x = b.pick(lambda t: t.rank >= 2)
    if x is None:
        return False
    k = b.draw(st.integers(1, x.rank - 1))
    lead = x.dims[:k]

    def has_all(t: T) -> bool:
        return all(any(e.same(d) for e in t.dims) for d in lead)

    src = b.pick(has_all)
    assert src is not None  # x itself qualifies
    idx = [b.draw(st.sampled_from([i for i, e in enumerate(src.dims) if e.same(d)])) for d in lead]
    (shape,) = b.node("Shape", [src.name])
    parts = []
    if b.draw(st.booleans()):
        parts += b.node("Gather", [shape, b.ints(idx)], axis=0)
    else:
        for i in idx:
            (dim,) = b.node("Gather", [shape, b.const(np.asarray(i - src.rank if b.draw(st.booleans()) else i))], axis=0)
            parts += b.node("Unsqueeze", [dim, b.ints([0])])
    kinds = ["-1", "product"] + (["static"] if k == x.rank - 1 and x.dims[-1].static else [])
    tail_kind = b.draw(st.sampled_from(kinds))
    if tail_kind == "-1":
        parts.append(b.ints([-1]))
    elif tail_kind == "static":
        parts.append(b.ints([x.dims[-1].value]))
    else:
        (own,) = b.node("Shape", [x.name])
        (acc,) = b.node("Gather", [own, b.const(np.asarray(k))], axis=0)
        for i in range(k + 1, x.rank):
            (dim,) = b.node("Gather", [own, b.const(np.asarray(i))], axis=0)
            (acc,) = b.node("Mul", [acc, dim])
        parts += b.node("Unsqueeze", [acc, b.ints([0])])
    (target,) = b.node("Concat", parts, axis=0) if len(parts) > 1 else parts
    (out,) = b.node("Reshape", [x.name, target])
    b.add(T(out, x.dtype, tuple(lead) + (_prod(list(x.dims[k:])),), exact=x.exact))
    return True


def _expand_as(b: _Builder) -> bool:
    """Expand x to the Shape of a tensor it broadcasts with."""
    x = b.pick(lambda t: True)
    if x is None:
        return False
    y = b.pick(lambda t: _broadcast(x.dims, t.dims) is not None)
    assert y is not None  # x itself
    dims = _broadcast(x.dims, y.dims)
    (shape,) = b.node("Shape", [y.name])
    (out,) = b.node("Expand", [x.name, shape])
    b.add(T(out, x.dtype, dims, exact=x.exact))
    return True


def _flatten(b: _Builder) -> bool:
    x = b.pick(lambda t: t.rank >= 1)
    if x is None:
        return False
    axis = b.draw(st.integers(-x.rank, x.rank))
    a = axis + x.rank if axis < 0 else axis
    (out,) = b.node("Flatten", [x.name], axis=axis)
    b.add(T(out, x.dtype, (_prod(list(x.dims[:a])), _prod(list(x.dims[a:]))), exact=x.exact))
    return True


def _concat(b: _Builder) -> bool:
    x = b.pick(lambda t: t.rank >= 1)
    if x is None:
        return False
    axis = b.draw(st.integers(-x.rank, x.rank - 1))
    a = axis % x.rank

    def fits(t: T) -> bool:
        return (t.dtype == x.dtype and t.rank == x.rank
                and all(t.dims[i].same(x.dims[i]) for i in range(x.rank) if i != a))  # fmt: skip

    parts = [x]
    for _ in range(b.draw(st.integers(1, 2))):
        y = b.pick(fits) if b.draw(st.booleans()) else None
        if y is None:
            if not all(b.expressible(d) for i, d in enumerate(x.dims) if i != a):
                y = x
            else:
                dims = list(x.dims)
                dims[a] = Dim(b.draw(st.integers(1, 3)))
                y = b.fresh(x.dtype, tuple(dims))
        parts.append(y)
    order = b.draw(st.permutations(parts))
    total = order[0].dims[a]
    for p in order[1:]:
        total = _add(total, p.dims[a])
    (out,) = b.node("Concat", [p.name for p in order], axis=axis)
    dims = list(x.dims)
    dims[a] = total
    b.add(T(out, x.dtype, tuple(dims), exact=all(p.exact for p in order)))
    return True


def _split(b: _Builder) -> bool:
    x = b.pick(lambda t: any(d.static and d.value >= 2 for d in t.dims))
    if x is None:
        return False
    a = b.draw(st.sampled_from([i for i, d in enumerate(x.dims) if d.static and d.value >= 2]))
    axis = a - x.rank if b.draw(st.booleans()) else a
    n = x.dims[a].value
    count = b.draw(st.integers(2, min(3, n)))
    ins = [x.name]
    attrs: dict[str, Any] = {"axis": axis}
    mode = b.draw(st.sampled_from(["sizes", "equal"]))
    if mode == "sizes":
        cuts = sorted(b.draw(st.permutations(range(1, n)))[: count - 1])
        sizes = [e - s for s, e in zip([0] + cuts, cuts + [n])]
        ins.append(b.ints(sizes))
    else:
        if b.opset >= 18:
            attrs["num_outputs"] = count
            chunk = -(-n // count)
            sizes = [min(chunk, n - i * chunk) for i in range(count)]
            if any(s <= 0 for s in sizes):
                return False
        else:
            if n % count:
                return False
            sizes = [n // count] * count
    outs = b.node("Split", ins, n_out=count, **attrs)
    for o, s in zip(outs, sizes):
        dims = list(x.dims)
        dims[a] = Dim(s)
        b.add(T(o, x.dtype, tuple(dims), exact=x.exact))
    return True


def _subset(b: _Builder, n: int) -> list[int]:
    """1 to n distinct indices below n, in a random order (never rejected)."""
    return list(b.draw(st.permutations(range(n))))[: b.draw(st.integers(1, n))]


def _slice(b: _Builder) -> bool:
    x = b.pick(lambda t: t.rank >= 1)
    if x is None:
        return False
    axes = _subset(b, x.rank)
    starts, ends, steps, dims = [], [], [], list(x.dims)
    for a in axes:
        n = x.dims[a].value
        step = b.draw(st.sampled_from([1, 1, 1, 2, -1, -2]))
        start = b.draw(st.integers(-n, n - 1))
        far = 2**31 - 1 if step > 0 else -(2**31)
        end = b.draw(st.sampled_from([start + step * k for k in (1, 2, 3)] + [far, far, -1, n, -n - 2]))
        if b.draw(st.integers(0, 5)) == 0:
            start = -far if b.draw(st.booleans()) else start + (n + 2 if step > 0 else -n - 2) * -1
        size = len(range(n)[slice(start, end, step)])
        if size == 0:
            return False
        starts.append(start)
        ends.append(end)
        steps.append(step)
        d = x.dims[a]
        dims[a] = Dim(size) if d.static else _opaque(size)
    ins = [x.name, b.ints(starts), b.ints(ends)]
    form = b.draw(st.sampled_from(["axes+steps", "axes", "neg-axes+steps", "none"]))
    if form == "none" and axes == list(range(len(axes))) and all(s == 1 for s in steps):
        pass
    elif form == "axes" and all(s == 1 for s in steps):
        ins.append(b.ints(axes))
    else:
        neg = form.startswith("neg")
        ins += [b.ints([a - x.rank if neg else a for a in axes]), b.ints(steps)]
    (out,) = b.node("Slice", ins)
    b.add(T(out, x.dtype, tuple(dims), exact=x.exact))
    return True


def _slice_to_shape(b: _Builder) -> bool:
    """x[..., start:d] on one axis, d a dim of another tensor read with Shape ->
    Gather (a symbolic end when that dim is N); d never exceeds the axis."""
    x = b.pick(lambda t: t.rank >= 1)
    if x is None:
        return False
    a = b.draw(st.integers(0, x.rank - 1))
    n = x.dims[a]

    def fits(t: T) -> bool:
        return any(1 <= d.value <= n.value and (d.same(n) or d.static or n.static) for d in t.dims)

    y = b.pick(fits)
    if y is None:
        return False
    j = b.draw(st.sampled_from([i for i, d in enumerate(y.dims)
                                if 1 <= d.value <= n.value and (d.same(n) or d.static or n.static)]))  # fmt: skip
    end = y.dims[j]
    start = b.draw(st.integers(0, end.value - 1)) if end.static else 0
    (shape,) = b.node("Shape", [y.name])
    (stop,) = b.node("Gather", [shape, b.ints([j])], axis=0)
    (out,) = b.node("Slice", [x.name, b.ints([start]), stop, b.ints([a - x.rank if b.draw(st.booleans()) else a])])
    dims = list(x.dims)
    dims[a] = Dim(end.value - start) if end.static else end
    b.add(T(out, x.dtype, tuple(dims), exact=x.exact))
    return True


def _squeeze(b: _Builder) -> bool:
    x = b.pick(lambda t: any(d.static and d.value == 1 for d in t.dims))
    if x is None:
        return False
    ones = [i for i, d in enumerate(x.dims) if d.static and d.value == 1]
    if x.all_static and b.draw(st.integers(0, 3)) == 0:
        (out,) = b.node("Squeeze", [x.name])
        drop = set(ones)
    else:
        drop = {ones[i] for i in _subset(b, len(ones))}
        axes = [a - x.rank if b.draw(st.booleans()) else a for a in sorted(drop)]
        (out,) = b.node("Squeeze", [x.name, b.ints(axes)])
    b.add(T(out, x.dtype, tuple(d for i, d in enumerate(x.dims) if i not in drop), exact=x.exact))
    return True


def _unsqueeze(b: _Builder) -> bool:
    x = b.pick(lambda t: t.rank < _MAX_RANK)
    if x is None:
        return False
    k = b.draw(st.integers(1, _MAX_RANK - x.rank))
    r = x.rank + k
    pos = sorted(b.draw(st.permutations(range(r)))[:k])
    axes = [p - r if b.draw(st.booleans()) else p for p in pos]
    (out,) = b.node("Unsqueeze", [x.name, b.ints(b.draw(st.permutations(axes)))])
    rest = iter(x.dims)
    b.add(T(out, x.dtype, tuple(Dim(1) if i in pos else next(rest) for i in range(r)), exact=x.exact))
    return True


def _reduce(b: _Builder, op: str) -> bool:
    x = b.pick(_float if op == "ReduceMean" else _numeric)
    if x is None:
        return False
    keep = b.draw(st.integers(0, 1))
    if b.opset >= 18 and b.draw(st.integers(0, 9)) == 0:
        # no axes with noop_with_empty_axes: the input as it is
        (out,) = b.node(op, [x.name], keepdims=keep, noop_with_empty_axes=1)
        b.add(T(out, x.dtype, x.dims, exact=x.exact))
        return True
    if x.rank == 0 or b.draw(st.integers(0, 4)) == 0:
        axes = None
        red = set(range(x.rank))
    else:
        axes = _subset(b, x.rank)
        red = set(axes)
        axes = [a - x.rank if b.draw(st.booleans()) else a for a in axes]
    ins, attrs = [x.name], {"keepdims": keep}
    if axes is not None:
        if op == "ReduceSum" or b.opset >= 18:
            ins.append(b.ints(axes))
        else:
            attrs["axes"] = axes
    (out,) = b.node(op, ins, **attrs)
    dims = tuple(Dim(1) if i in red else d for i, d in enumerate(x.dims) if keep or i not in red)
    b.add(T(out, x.dtype, dims, exact=x.exact and op == "ReduceMax"))
    return True


def _softmax(b: _Builder) -> bool:
    x = b.pick(lambda t: _float(t) and t.rank >= 1)
    if x is None:
        return False
    attrs = {} if b.draw(st.integers(0, 4)) == 0 else {"axis": b.draw(st.integers(-x.rank, x.rank - 1))}
    (out,) = b.node("Softmax", [x.name], **attrs)
    b.add(T(out, "float32", x.dims, exact=False))
    return True


def _where(b: _Builder) -> bool:
    x = b.pick(lambda t: t.dtype != "bool")
    if x is None:
        return False
    cond = b.pick(lambda t: t.dtype == "bool" and _broadcast(x.dims, t.dims) is not None)
    if cond is None or b.draw(st.booleans()):
        a = b.pick(lambda t: t.exact and _numeric(t) and _broadcast(x.dims, t.dims) is not None)
        if a is None:
            return False
        c, dims = b.operand_for(a, a.dtype, exact=True)
        if _broadcast(x.dims, dims) is None:
            return False
        (cname,) = b.node(b.draw(st.sampled_from(["Greater", "Less"])), [a.name, c.name])
        cond = b.add(T(cname, "bool", dims, exact=True))
    y, _ = b.operand_for(x, x.dtype)
    dims = _broadcast(cond.dims, x.dims)
    dims = None if dims is None else _broadcast(dims, y.dims)
    if dims is None:
        return False
    first, second = (x, y) if b.draw(st.booleans()) else (y, x)
    (out,) = b.node("Where", [cond.name, first.name, second.name])
    b.add(T(out, x.dtype, dims, exact=x.exact and y.exact))
    return True


def _cast(b: _Builder) -> bool:
    x = b.pick(lambda t: t.exact or t.dtype != "float32")
    if x is None:
        return False
    to = b.draw(st.sampled_from(["float32", "int64", "bool"]))
    (out,) = b.node("Cast", [x.name], to=_ONNX_TYPE[to])
    b.add(T(out, to, x.dims, exact=True))
    return True


def _expand(b: _Builder) -> bool:
    x = b.pick(lambda t: True)
    if x is None:
        return False
    target, dims = [], []
    for d in x.dims:
        if d.static and d.value == 1:
            v = b.draw(st.sampled_from([1, 2, 3]))
            target.append(v)
            dims.append(Dim(v))
        elif d.static and b.draw(st.booleans()):
            target.append(d.value)
            dims.append(d)
        else:
            target.append(1)
            dims.append(d)
    if target and b.draw(st.integers(0, 4)) == 0:
        # a shorter shape broadcasts from the right: leading dims stay as they are
        j = b.draw(st.integers(0, len(target)))
        target = target[j:]
        dims = list(x.dims[:j]) + dims[j:]
    else:
        for _ in range(b.draw(st.integers(0, _MAX_RANK - x.rank))):
            v = b.draw(st.integers(1, 3))
            target.insert(0, v)
            dims.insert(0, Dim(v))
    (out,) = b.node("Expand", [x.name, b.ints(target)])
    b.add(T(out, x.dtype, tuple(dims), exact=x.exact))
    return True


def _gather(b: _Builder) -> bool:
    x = b.pick(lambda t: any(d.static for d in t.dims))
    if x is None:
        return False
    a = b.draw(st.sampled_from([i for i, d in enumerate(x.dims) if d.static]))
    n = x.dims[a].value
    ishape = b.draw(st.sampled_from([(), (1,), (2,), (3,), (2, 2)]))
    if x.rank - 1 + len(ishape) > _MAX_RANK:
        ishape = ()
    idx = np.asarray(b.draw(st.lists(st.integers(-n, n - 1), min_size=int(np.prod(ishape, dtype=np.int64)),
                                     max_size=int(np.prod(ishape, dtype=np.int64)))), dtype=np.int64).reshape(ishape)  # fmt: skip
    axis = a - x.rank if b.draw(st.booleans()) else a
    (out,) = b.node("Gather", [x.name, b.const(idx)], axis=axis)
    dims = x.dims[:a] + tuple(Dim(s) for s in ishape) + x.dims[a + 1:]
    b.add(T(out, x.dtype, dims, exact=x.exact))
    return True


def _identity(b: _Builder) -> bool:
    x = b.pick(lambda t: True)
    if x is None:
        return False
    (out,) = b.node("Identity", [x.name])
    b.add(T(out, x.dtype, x.dims, exact=x.exact))
    return True


def _clip(b: _Builder) -> bool:
    x = b.pick(_numeric)
    if x is None:
        return False
    np_dtype = np.float32 if x.dtype == "float32" else np.int64
    lo = b.draw(st.sampled_from([None, -1, 0, -2]))
    hi = b.draw(st.sampled_from([None, 1, 2, 0]))
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    ins = [x.name, "" if lo is None else b.const(np.asarray(lo, dtype=np_dtype))]
    if hi is not None:
        ins.append(b.const(np.asarray(hi, dtype=np_dtype)))
    while ins and ins[-1] == "":
        ins.pop()
    (out,) = b.node("Clip", ins)
    b.add(T(out, x.dtype, x.dims, exact=x.exact))
    return True


def _layer_norm(b: _Builder) -> bool:
    x = b.pick(lambda t: _float(t) and t.rank >= 1 and t.dims[-1].static)
    if x is None:
        return False
    first = min(i for i in range(x.rank) if all(d.static for d in x.dims[i:]))
    a = b.draw(st.integers(first, x.rank - 1))
    normalized = x.dims[a:]
    ins = [x.name, b.fresh("float32", normalized).name]
    if b.draw(st.booleans()):
        ins.append(b.fresh("float32", normalized).name)
    attrs: dict[str, Any] = {"axis": a - x.rank if b.draw(st.booleans()) else a}
    if b.draw(st.booleans()):
        attrs["epsilon"] = b.draw(st.sampled_from([1e-5, 1e-3, 0.1]))
    (out,) = b.node("LayerNormalization", ins, **attrs)
    b.add(T(out, "float32", x.dims, exact=False))
    return True


#: op name -> (nodes it adds, emitter)
OPS: dict[str, tuple[int, Callable[[_Builder], bool]]] = {
    **{op: (1, functools.partial(_binary, op=op)) for op in ("Add", "Sub", "Mul", "Div")},
    **{op: (1, functools.partial(_unary, op=op)) for op in ("Relu", "Sigmoid", "Tanh", "Abs", "Neg")},
    "Sqrt": (3, _sqrt),
    "MatMul": (1, _matmul),
    "Gemm": (1, _gemm),
    "Transpose": (1, _transpose),
    "Reshape": (1, _reshape_const),
    "ReshapeFromShape": (4, _reshape_shape),
    "Flatten": (1, _flatten),
    "Concat": (1, _concat),
    "Split": (1, _split),
    "Slice": (1, _slice),
    "SliceToShape": (3, _slice_to_shape),
    "Squeeze": (1, _squeeze),
    "Unsqueeze": (1, _unsqueeze),
    **{op: (1, functools.partial(_reduce, op=op)) for op in ("ReduceMean", "ReduceSum", "ReduceMax")},
    "Softmax": (1, _softmax),
    "Where": (2, _where),
    "Cast": (1, _cast),
    "Expand": (1, _expand),
    "ExpandAs": (2, _expand_as),
    "Gather": (1, _gather),
    "Identity": (1, _identity),
    "Clip": (1, _clip),
    "LayerNormalization": (1, _layer_norm),
}


def _counted(nodes: list[Any]) -> int:
    return sum(1 for n in nodes if n.op_type != "Constant")


@st.composite
def onnx_models(
    draw: Callable[[Any], Any],
    min_nodes: int = 2,
    max_nodes: int = 10,
    ops: tuple[str, ...] | None = None,
) -> tuple[Any, dict[str, np.ndarray]]:
    """A random valid ONNX model (opset 17 or 18) and feeds for its inputs.

    ``ops`` restricts the op kinds (names of :data:`OPS`). Constant nodes are
    not counted in ``min_nodes``/``max_nodes``.
    """
    import onnx
    from hypothesis import reject
    from onnx import helper

    names = sorted(ops or OPS)
    symbolic = draw(st.integers(0, 2)) == 0
    b = _Builder(draw=draw, rng=np.random.default_rng(draw(st.integers(0, 2**32 - 1))),
                 opset=draw(st.sampled_from(_OPSET_CHOICES)), n_value=draw(st.integers(1, _MAX_DIM)))  # fmt: skip
    rank = draw(st.integers(1, _MAX_RANK))
    dims = [Dim(draw(st.integers(1, _MAX_DIM))) for _ in range(rank)]
    if symbolic:
        dims[0] = Dim(b.n_value, ("N", 1, 0))
    dtype = "int64" if draw(st.integers(0, 7)) == 0 else "float32"
    b.add(b.fresh(dtype, tuple(dims)) if not all(d.static for d in dims) else _first_input(b, dtype, tuple(dims)))
    target = draw(st.integers(min_nodes, max_nodes))
    attempts = 0
    while _counted(b.nodes) < target and attempts < 4 * max_nodes:
        attempts += 1
        room = target - _counted(b.nodes)
        fitting = [n for n in names if OPS[n][0] <= max(room, 1)]
        # the op kind is not shrunk (Hypothesis favours a list's first entry)
        name = fitting[int(b.rng.integers(len(fitting)))]
        OPS[name][1](b)
    produced = [t for t in b.pool if not t.is_input and t.name not in b.initializer_names()]
    if _counted(b.nodes) < min_nodes or not produced:
        reject()
    outputs = [produced[-1]]
    others = [t for t in produced[:-1]]
    if others:
        outputs += draw(st.lists(st.sampled_from(others), max_size=2, unique_by=lambda t: t.name))
    g_outputs = [helper.make_tensor_value_info(t.name, _ONNX_TYPE[t.dtype], _proto_shape(t.dims)) for t in outputs]
    graph = helper.make_graph(b.nodes, "generated", b.inputs, g_outputs, b.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", b.opset)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model, dict(b.feeds)


def _proto_shape(dims: tuple[Dim, ...]) -> list[Any]:
    """Static dims as values, N by name, the rest unknown (ONNX's inference checks them)."""
    return [d.value if d.static else ("N" if d.is_n else None) for d in dims]


def _first_input(b: _Builder, dtype: str, dims: tuple[Dim, ...]) -> T:
    """The first tensor is always a graph input (never an initializer)."""
    from onnx import helper

    name = b.fresh_name("x")
    b.inputs.append(helper.make_tensor_value_info(name, _ONNX_TYPE[dtype], [d.value for d in dims]))
    b.feeds[name] = b.values(dtype, tuple(d.value for d in dims))
    return T(name, dtype, dims, exact=True, is_input=True)


