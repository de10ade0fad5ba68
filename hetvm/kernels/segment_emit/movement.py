"""Segment bodies of the data-movement and indexing ops (``permute_dims``,
``take``, ``broadcast_to``, ``concat``, ``strided_slice``, ``split``, gathers,
creation ops, ``cumsum``): loop nests that copy elements, for the small tensors
of the exported transformers, where the NumPy call costs more than the copy.

Each body mirrors its NumPy kernel (``hetvm/kernels/manipulate.py``,
``index_nd.py``, ``extra.py``): the same argument list, the same index rules
(negative indices, wrap/clip modes, slice clamping) and an error wherever the
kernel raises, so that the segment's re-run of the kernels reports the kernel's
own error. What a kernel would cast on the way (an output dtype other than the
input's) is declined rather than re-derived.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from . import (
    DTYPES,
    FLOATS,
    INTS,
    Arg,
    Arr,
    ArrList,
    Imm,
    Lines,
    Val,
    broadcast_loop,
    index,
    literal,
    register,
)

#: bounds beyond any extent an array can have: slice bounds are clamped to them
#: at emit time (an ONNX Slice ends at INT64_MAX), which leaves their meaning as is
_BIG = 1 << 62
#: integer dtypes an index array may have (NumPy casts bool and unsigned to intp too)
_INDEX_DTYPES = INTS | {"bool"}


def _arrays(args: Sequence[Arg], n: int) -> bool:
    return len(args) == n and all(isinstance(a, Arr) for a in args)


def _int(value: Any) -> int | None:
    """``value`` as a Python int when it is an integer (not a float, not text)."""
    if isinstance(value, (bool, int, np.integer)):
        return int(value)
    return None


def _axis(value: Any, ndim: int) -> int | None:
    """An axis attribute in ``[-ndim, ndim)``, counted from the front; None when
    it is not one (the NumPy kernel raises, so the call keeps it)."""
    a = _int(value)
    if a is None or not -ndim <= a < ndim:
        return None
    return a % ndim


def _value_literal(value: Any, dtype: str) -> str:
    """A scalar of ``dtype`` in source; NaN and infinities as NumPy names."""
    if dtype in FLOATS:
        f = float(value)
        if math.isnan(f):
            return f"np.{dtype}(np.nan)"
        if math.isinf(f):
            return f"np.{dtype}({'' if f > 0 else '-'}np.inf)"
    return literal(value, dtype)


def _cast(expr: str, dtype: str) -> str:
    """``expr`` (an int64 or float64 value) converted as NumPy's ``astype`` would."""
    if dtype == "bool":
        return f"({expr} != 0)"
    return f"np.{dtype}({expr})"


def _nest(shape_of: str, dims: Sequence[int], body: Lines, var: str = "i", first: int = 0) -> Lines:
    """A loop nest around ``body``: ``{var}{first + k}`` runs over ``shape_of.shape[dims[k]]``."""
    lines: Lines = []
    pad = ""
    for k, d in enumerate(dims):
        lines.append(f"{pad}for {var}{first + k} in range({shape_of}.shape[{d}]):")
        pad += "    "
    return lines + [pad + line for line in body]


def _loops(shape_of: str, ndim: int, body: Lines, var: str = "i") -> Lines:
    """A loop nest over ``shape_of``'s whole shape, ``{var}{d}`` the index of dim d."""
    return _nest(shape_of, range(ndim), body, var)


def _raise_unless(cond: str, op: str, what: str) -> Lines:
    return [f"if not ({cond}):", f"    raise ValueError({f'{op}: {what}'!r})"]


def _dims_equal(a: str, a_dims: Sequence[int], b: str, b_dims: Sequence[int]) -> str:
    """Condition: ``a.shape[a_dims[k]] == b.shape[b_dims[k]]`` for every k."""
    terms = [f"{a}.shape[{p}] == {b}.shape[{q}]" for p, q in zip(a_dims, b_dims)]
    return " and ".join(terms) if terms else "True"


# -- permute_dims, broadcast_to ---------------------------------------------------


@register("permute_dims")
def _permute_dims(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if not _arrays(args, 2):
        return None
    x, out = args  # type: ignore[misc]
    n = x.ndim
    if out.dtype != x.dtype or out.ndim != n:
        return None
    axes = attrs.get("axes")
    if axes is None:
        perm = list(range(n))[::-1]
    else:
        ints = [_int(a) for a in axes]
        if any(a is None or not -n <= a < n for a in ints):
            return None
        perm = [a % n for a in ints]  # type: ignore[operator]
    if sorted(perm) != list(range(n)):
        return None
    X, O = names
    inv = [perm.index(k) for k in range(n)]
    lines = _raise_unless(_dims_equal(O, range(n), X, perm), "permute_dims", "output shape is not the permuted input's")
    at_out = [f"i{d}" for d in range(n)]
    at_x = [f"i{inv[k]}" for k in range(n)]
    return lines + _loops(O, n, [f"{index(O, at_out)} = {index(X, at_x)}"])


@register("broadcast_to")
def _broadcast_to(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if len(args) != 3 or not isinstance(args[0], Arr) or not isinstance(args[2], Arr):
        return None
    x, out = args[0], args[2]
    if out.dtype != x.dtype or x.ndim > out.ndim:
        return None
    at = index(names[2], [f"i{d}" for d in range(out.ndim)])
    return broadcast_loop(names[2], out.ndim, [(names[0], x.ndim)], lambda r: [f"{at} = {r[0]}"], "broadcast_to")


# -- take -------------------------------------------------------------------------


def _take_index(expr: str, dim: str, mode: str) -> Lines:
    """Lines setting ``j`` to the position ``expr`` addresses on an axis of ``dim``
    elements (``dim`` > 0), as ``numpy.take`` with ``mode`` reads it; raise mode's
    range was checked before."""
    if mode == "raise":
        return [f"j = np.int64({expr})", "if j < 0:", f"    j += {dim}"]
    if mode == "wrap":
        return [f"j = np.int64({expr}) % {dim}", "if j < 0:", f"    j += {dim}"]
    return [f"j = np.int64({expr})", "if j < 0:", "    j = 0", f"elif j >= {dim}:", f"    j = {dim} - 1"]


@register("take")
def _take(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if not _arrays(args, 3):
        return None
    x, ind, out = args  # type: ignore[misc]
    if out.dtype != x.dtype or ind.dtype not in _INDEX_DTYPES:
        return None
    mode = {"wrap": "wrap", "clip": "clip"}.get(attrs.get("mode", "fast"), "raise")
    X, I, O = names
    axis_attr = attrs.get("axis")
    if axis_attr is None:  # x flattened: a flat position, unravelled on x's shape
        if out.ndim != ind.ndim:
            return None
        lines = [f"dim = {X}.size", "outer = 1"]
        ax, before, after = 0, 0, 0
    else:
        if x.ndim == 0:
            return None
        ax = _axis(axis_attr, x.ndim)
        if ax is None or out.ndim != x.ndim - 1 + ind.ndim:
            return None
        before, after = ax, x.ndim - ax - 1
        lines = [f"dim = {X}.shape[{ax}]", "outer = 1"] + [f"outer *= {X}.shape[{d}]" for d in range(ax)]
        want = list(range(ax)) + list(range(ax + 1, x.ndim))
        got = list(range(ax)) + list(range(ax + ind.ndim, out.ndim))
        lines += _raise_unless(_dims_equal(O, got, X, want), "take", "output shape does not match the input's")
    lines += _raise_unless(_dims_equal(O, range(before, before + ind.ndim), I, range(ind.ndim)), "take",
                           "output shape does not match the indices'")  # fmt: skip
    # numpy.take: no take from an empty axis into a non-empty output; in raise
    # mode every index is checked once there is an outer row to take for
    lines += _raise_unless(f"dim > 0 or {O}.size == 0", "take", "a non-empty take from an empty axis")
    i_at = [f"k{d}" for d in range(ind.ndim)]
    if mode == "raise":
        check = [f"v = np.int64({index(I, i_at)})", "if v < -dim or v >= dim:",
                 "    raise ValueError('take: index out of range')"]  # fmt: skip
        lines += ["if outer > 0:"] + ["    " + s for s in _loops(I, ind.ndim, check, "k")]
    o_at = [f"i{d}" for d in range(before)] + i_at + [f"i{before + 1 + d}" for d in range(after)]
    if axis_attr is None:
        unravel = ["f = j"]
        for d in range(x.ndim - 1, 0, -1):
            unravel += [f"c{d} = f % {X}.shape[{d}]", f"f //= {X}.shape[{d}]"]
        unravel += ["c0 = f"] if x.ndim else []
        read = index(X, [f"c{d}" for d in range(x.ndim)])
        inner = _take_index(index(I, i_at), "dim", mode) + unravel + [f"{index(O, o_at)} = {read}"]
        return lines + _loops(I, ind.ndim, inner, "k")
    x_at = [f"i{d}" for d in range(before)] + ["j"] + [f"i{before + 1 + d}" for d in range(after)]
    copy = [f"{index(O, o_at)} = {index(X, x_at)}"]
    tail = _nest(X, range(ax + 1, x.ndim), copy, first=before + 1)
    inner = _take_index(index(I, i_at), "dim", mode) + tail
    body = _loops(I, ind.ndim, inner, "k")
    return lines + _nest(X, range(ax), body)


# -- concat -----------------------------------------------------------------------


@register("concat")
def _concat(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if len(args) != 2 or not isinstance(args[0], ArrList) or not isinstance(args[1], Arr):
        return None
    items, out = args[0].items, args[1]
    if not items or any(t.dtype != out.dtype for t in items):
        return None
    ins, O = names[0], names[1]
    axis_attr = attrs.get("axis", 0)
    lines: Lines = []
    if axis_attr is None:  # each input flattened, one after another
        if out.ndim != 1:
            return None
        lines += ["total = 0"] + [f"total += {t}.size" for t in ins]
        lines += _raise_unless(f"total == {O}.shape[0]", "concat", "output length is not the inputs' total")
        lines.append("off = 0")
        for t, spec in zip(ins, items):
            lines += _loops(t, spec.ndim, [f"{O}[off] = {index(t, [f'i{d}' for d in range(spec.ndim)])}",
                                           "off += 1"])  # fmt: skip
        return lines
    n = out.ndim
    if n == 0 or any(t.ndim != n for t in items):
        return None
    ax = _axis(axis_attr, n)
    if ax is None:
        return None
    others = [d for d in range(n) if d != ax]
    lines.append("total = 0")
    for t in ins:
        lines += _raise_unless(_dims_equal(t, others, O, others), "concat", "input shapes differ off the axis")
        lines.append(f"total += {t}.shape[{ax}]")
    lines += _raise_unless(f"total == {O}.shape[{ax}]", "concat", "output extent is not the inputs' total")
    lines.append("off = 0")
    at_t = [f"i{d}" for d in range(n)]
    at_o = [f"off + i{d}" if d == ax else f"i{d}" for d in range(n)]
    for t in ins:
        lines += _loops(t, n, [f"{index(O, at_o)} = {index(t, at_t)}"])
        lines.append(f"off += {t}.shape[{ax}]")
    return lines


# -- strided_slice, split -----------------------------------------------------------


def _slice_lines(k: int, dim: str, begin: int, end: int, step: int) -> Lines:
    """Lines setting ``st{k}`` and ``ln{k}``, the first position and the length of
    ``slice(begin, end, step)`` on an axis of ``dim`` elements (``slice.indices``'s
    clamping; the bounds are known here, the extent only at run time)."""
    begin, end, step = (max(-_BIG, min(_BIG, v)) for v in (begin, end, step))
    if step > 0:
        lo, hi = "0", dim
    else:
        lo, hi = "-1", f"{dim} - 1"

    def bound(v: int) -> str:
        return f"max({v} + {dim}, {lo})" if v < 0 else f"min({v}, {hi})"

    lines = [f"st{k} = {bound(begin)}", f"sp{k} = {bound(end)}"]
    if step > 0:
        lines.append(f"ln{k} = max(0, (sp{k} - st{k} + {step - 1}) // {step})")
    else:
        lines.append(f"ln{k} = max(0, (st{k} - sp{k} + {-step - 1}) // {-step})")
    return lines


def _window_copy(src: str, dst: str, ndim: int, starts: dict[int, str], steps: dict[int, int]) -> Lines:
    """A loop nest over ``dst`` reading ``src`` at ``start + i * step`` on the given dims."""
    at_dst = [f"i{d}" for d in range(ndim)]
    at_src = []
    for d in range(ndim):
        if d not in starts:
            at_src.append(f"i{d}")
        elif steps.get(d, 1) == 1:
            at_src.append(f"{starts[d]} + i{d}")
        else:
            at_src.append(f"{starts[d]} + i{d} * {steps[d]}")
    return _loops(dst, ndim, [f"{index(dst, at_dst)} = {index(src, at_src)}"])


@register("strided_slice")
def _strided_slice(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if len(args) < 2 or not isinstance(args[0], Arr) or not isinstance(args[-1], Arr):
        return None
    x, out = args[0], args[-1]
    n = x.ndim
    if out.dtype != x.dtype or out.ndim != n:
        return None
    axes = attrs.get("axes")
    begin, end = attrs.get("begin"), attrs.get("end")
    if not all(isinstance(v, (list, tuple)) for v in (axes, begin, end)):
        return None
    strides = attrs.get("strides") or (1,) * len(axes)
    bounds: dict[int, tuple[int, int, int]] = {}
    for a, b, e, s in zip(axes, begin, end, strides):
        a, b, e, s = _int(a), _int(b), _int(e), _int(s)
        if a is None or not -n <= a < n or b is None or e is None or s is None or s == 0:
            return None  # a symbolic bound: the kernel's window rule stays with it
        bounds[a % n] = (b, e, s)  # the last one for an axis wins, as in the kernel
    X, O = names[0], names[-1]
    lines: Lines = []
    for d, (b, e, s) in sorted(bounds.items()):
        lines += _slice_lines(d, f"{X}.shape[{d}]", b, e, s)
        lines += _raise_unless(f"{O}.shape[{d}] == ln{d}", "strided_slice", "output extent is not the slice's")
    others = [d for d in range(n) if d not in bounds]
    lines += _raise_unless(_dims_equal(O, others, X, others), "strided_slice", "output shape is not the input's")
    starts = {d: f"st{d}" for d in bounds}
    steps = {d: s for d, (_, _, s) in bounds.items()}
    return lines + _window_copy(X, O, n, starts, steps)


@register("split")
def _split(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if len(args) < 2 or not all(isinstance(a, Arr) for a in args):
        return None
    x, outs = args[0], args[1:]
    n = x.ndim
    if n == 0 or any(o.dtype != x.dtype or o.ndim != n for o in outs):  # type: ignore[union-attr]
        return None
    a = _int(attrs.get("axis", 0))
    if a is None:
        return None
    ax = a % n
    ios = attrs.get("indices_or_sections", len(outs))
    X = names[0]
    lines = [f"dim = {X}.shape[{ax}]"]
    if isinstance(ios, (list, tuple)):
        cuts = [_int(v) for v in ios]
        if any(c is None for c in cuts) or len(cuts) + 1 != len(outs):
            return None
        lo_hi = [str(max(-_BIG, min(_BIG, c))) for c in cuts]  # type: ignore[type-var]
        bounds = ["0", *lo_hi, "dim"]
    else:
        sections = _int(ios)
        if sections is None or sections <= 0 or sections != len(outs):
            return None
        lines.append("chunk = -(-dim // " + str(sections) + ")")
        bounds = [f"{k} * chunk" for k in range(sections)] + ["dim"]
    others = [d for d in range(n) if d != ax]
    for k, O in enumerate(names[1:]):
        # the kernel's cut [lo, hi) clamped to the axis, then read as a Python slice
        lines += [f"lo = min({bounds[k]}, dim)", f"hi = max(lo, min({bounds[k + 1]}, dim))",
                  "st = max(lo + dim, 0) if lo < 0 else lo", "sp = max(hi + dim, 0) if hi < 0 else hi",
                  "ln = sp - st if sp > st else 0"]  # fmt: skip
        lines += _raise_unless(f"{O}.shape[{ax}] == ln", "split", f"output {k} extent is not its piece's")
        lines += _raise_unless(_dims_equal(O, others, X, others), "split", f"output {k} shape is not the input's")
        lines += _window_copy(X, O, n, {ax: "st"}, {})
    return lines


# -- gathers ---------------------------------------------------------------------


@register("gather_elements")
def _gather_elements(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if not _arrays(args, 3):
        return None
    data, ind, out = args  # type: ignore[misc]
    n = data.ndim
    if n == 0 or ind.ndim != n or out.ndim != n or out.dtype != data.dtype or ind.dtype not in _INDEX_DTYPES:
        return None
    a = _int(attrs.get("axis", 0))
    if a is None:
        return None
    ax = a % n
    D, I, O = names
    others = [d for d in range(n) if d != ax]
    lines = [f"dim = {D}.shape[{ax}]"]
    lines += _raise_unless(" and ".join([f"{I}.shape[{d}] <= {D}.shape[{d}]" for d in others] or ["True"]),
                           "gather_elements", "indices shape exceeds the data's")  # fmt: skip
    lines += _raise_unless(_dims_equal(O, range(n), I, range(n)), "gather_elements", "output shape is not the indices'")
    at = [f"i{d}" for d in range(n)]
    read_at = ["j" if d == ax else f"i{d}" for d in range(n)]
    body = [f"j = np.int64({index(I, at)})", "if j < 0:", "    j += dim",
            "if j < 0 or j >= dim:", "    raise ValueError('gather_elements: index out of range')",
            f"{index(O, at)} = {index(D, read_at)}"]  # fmt: skip
    return lines + _loops(I, n, body)


@register("gather_nd")
def _gather_nd(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if not _arrays(args, 3):
        return None
    data, ind, out = args  # type: ignore[misc]
    b = _int(attrs.get("batch_dims", 0))
    if out.dtype != data.dtype or ind.dtype not in INTS or b is None or b < 0 or ind.ndim < b + 1:
        return None
    m = ind.ndim - 1 + data.ndim - b - out.ndim  # index tuple length, fixed by the ranks
    if m < 0 or b + m > data.ndim:
        return None
    D, I, O = names
    nk = ind.ndim - 1 - b  # index dims after the batch
    rest = data.ndim - b - m
    lines = _raise_unless(f"{I}.shape[{ind.ndim - 1}] == {m}", "gather_nd", "index tuples of another length")
    lines += _raise_unless(_dims_equal(I, range(b), D, range(b)), "gather_nd", "batch dims of data and indices differ")
    lines += _raise_unless(_dims_equal(O, range(ind.ndim - 1), I, range(ind.ndim - 1)), "gather_nd",
                           "output shape is not the indices'")  # fmt: skip
    lines += _raise_unless(_dims_equal(O, range(ind.ndim - 1, out.ndim), D, range(b + m, data.ndim)), "gather_nd",
                           "output shape is not the data's slices'")  # fmt: skip
    lead = [f"i{d}" for d in range(b + nk)]
    body: Lines = []
    for j in range(m):
        dim = f"{D}.shape[{b + j}]"
        body += [f"p{j} = np.int64({index(I, lead + [str(j)])})", f"if p{j} < -{dim} or p{j} >= {dim}:",
                 "    raise ValueError('gather_nd: index out of range')", f"if p{j} < 0:", f"    p{j} += {dim}"]  # fmt: skip
    r_at = [f"r{d}" for d in range(rest)]
    copy = [f"{index(O, lead + r_at)} = {index(D, lead[:b] + [f'p{j}' for j in range(m)] + r_at)}"]
    body += _nest(D, range(b + m, data.ndim), copy, "r")
    return lines + _loops(I, b + nk, body)


# -- creation -----------------------------------------------------------------------


@register("full")
def _full(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if len(args) != 3 or not isinstance(args[2], Arr):
        return None
    fill, out = args[1], args[2]
    O = names[2]
    at = index(O, [f"i{d}" for d in range(out.ndim)])
    if isinstance(fill, Arr):  # a tensor fill value, broadcast into the output
        if fill.dtype != out.dtype or fill.ndim > out.ndim:
            return None
        return broadcast_loop(O, out.ndim, [(names[1], fill.ndim)], lambda r: [f"{at} = {r[0]}"], "full")
    if isinstance(fill, Val):
        return _full_value(fill, names[1], out, O)
    if not isinstance(fill, Imm) or isinstance(fill.value, (str, bytes)) or out.dtype not in DTYPES:
        return None
    cell = np.empty((), out.dtype)
    try:  # the kernel's own assignment, so the value is the one it stores
        with np.errstate(all="raise"):
            cell[...] = fill.value
    except Exception:  # noqa: BLE001 - whatever the kernel would raise, it raises itself
        return None
    return _loops(O, out.ndim, [f"{at} = {_value_literal(cell.item(), out.dtype)}"])


def _int_fits(name: str, dtype: str, op: str) -> Lines:
    """Lines raising unless the int64 ``name`` fits ``dtype`` (NumPy refuses to
    store a Python int that does not; a float takes any)."""
    if dtype not in INTS or dtype == "int64":
        return []
    info = np.iinfo(dtype)
    lo, hi = int(info.min), min(int(info.max), (1 << 63) - 1)
    return _raise_unless(f"{lo} <= {name} <= {hi}", op, f"a value does not fit {dtype}")


def _from_int(name: str, dtype: str) -> str:
    """A Python int stored into ``dtype`` (a float through float64, as NumPy's
    assignment and ``asarray`` convert it)."""
    return f"np.{dtype}(np.float64({name}))" if dtype in FLOATS else f"np.{dtype}({name})"


def _full_value(fill: Val, name: str, out: Arr, O: str) -> Lines | None:
    """``full`` of a value known at run time, stored as NumPy's assignment does."""
    at = index(O, [f"i{d}" for d in range(out.ndim)])
    if fill.kind == "bool":
        value = name if out.dtype == "bool" else f"np.{out.dtype}(1 if {name} else 0)"
        return _loops(O, out.ndim, [f"{at} = {value}"])
    if fill.kind == "int" and out.dtype in INTS | FLOATS:
        return _int_fits(name, out.dtype, "full") + _loops(O, out.ndim, [f"{at} = {_from_int(name, out.dtype)}"])
    if fill.kind == "float" and out.dtype in FLOATS:
        return _loops(O, out.ndim, [f"{at} = np.{out.dtype}({name})"])
    return None  # a float into integers or bools: NumPy's conversion rules, not repeated here


@register("shape_to_tensor")
def _shape_to_tensor(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if len(args) != 2 or not isinstance(args[1], Arr):
        return None
    shape, out, O = args[0], args[1], names[1]
    if out.ndim != 1 or out.dtype not in (INTS | FLOATS):
        return None
    if isinstance(shape, Val):  # known at run time: each dim converted, refused where it does not fit
        if shape.kind != "shape":
            return None
        S = names[0]
        lines = _raise_unless(f"{O}.shape[0] == {shape.length}", "shape_to_tensor", "output length is not the rank")
        for k in range(shape.length):
            lines += _int_fits(f"{S}[{k}]", out.dtype, "shape_to_tensor")
            lines.append(f"{O}[{k}] = {_from_int(f'{S}[{k}]', out.dtype)}")
        return lines
    if not isinstance(shape, Imm) or not isinstance(shape.value, (list, tuple)):
        return None
    dims = [_int(d) for d in shape.value]
    if any(d is None for d in dims):
        return None
    try:
        values = np.asarray(dims, dtype=out.dtype)  # the kernel's conversion (out of range: it raises)
    except (OverflowError, ValueError):
        return None
    lines = _raise_unless(f"{O}.shape[0] == {len(dims)}", "shape_to_tensor", "output length is not the rank")
    return lines + [f"{O}[{k}] = {_value_literal(v, out.dtype)}" for k, v in enumerate(values.tolist())]


def _arange_operand(arg: Arg, name: Any) -> tuple[str, Any] | None:
    """How the kernel reads one of arange's operands: ("int", value) an integer
    immediate, ("float", value) a float one, ("int-val", source) / ("float-val",
    source) a value known at run time, ("array", source) a rank-0 array (read
    through ``float()``, so on the float path); None: not covered."""
    if isinstance(arg, Imm):
        if isinstance(arg.value, (bool, int, np.integer)):
            return "int", int(arg.value)
        if isinstance(arg.value, (float, np.floating)):
            return "float", float(arg.value)
        return None
    if isinstance(arg, Val):
        if arg.kind in ("int", "bool"):
            return "int-val", f"np.int64({name})"
        if arg.kind == "float":
            return "float-val", f"np.float64({name})"
        return None
    if isinstance(arg, Arr) and arg.ndim == 0:
        return "array", f"np.float64({name}[()])"
    return None


@register("arange")
def _arange(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if len(args) != 4 or not isinstance(args[3], Arr) or args[3].ndim != 1:
        return None
    out, O = args[3], names[3]
    start, end, step = (_arange_operand(args[k], names[k]) for k in range(3))
    if start is None or step is None:
        return None
    at = f"{O}[i]"
    if all(v is not None and v[0] in ("int", "int-val") for v in (start, end, step)):
        # the kernel's integer path: int64 start + step * i (wrapping), then cast
        if any(v[0] == "int" and not -(1 << 63) <= v[1] < (1 << 63) for v in (start, step)):
            return None
        lines = [f"s0 = {_int_source(start)}", f"ds = {_int_source(step)}"]
        return lines + [f"for i in range({O}.shape[0]):", f"    {at} = {_cast('s0 + ds * np.int64(i)', out.dtype)}"]
    # the kernel's float path: float64 start + step * i, then cast
    if out.dtype not in FLOATS:
        return None  # a float to integer cast of a value not known here: NumPy's rules differ from LLVM's
    lines = [f"s0 = {_float_source(start)}", f"ds = {_float_source(step)}"]
    return lines + [f"for i in range({O}.shape[0]):", f"    {at} = np.{out.dtype}(s0 + ds * np.float64(i))"]


def _int_source(v: tuple[str, Any]) -> str:
    return f"np.int64({int(v[1])})" if v[0] == "int" else v[1]


def _float_source(v: tuple[str, Any]) -> str:
    if v[0] in ("int", "float"):
        return _value_literal(float(v[1]), "float64")
    if v[0] == "int-val":
        return f"np.float64({v[1]})"
    return v[1]


# -- cumsum ------------------------------------------------------------------------


@register("cumsum")
def _cumsum(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if not _arrays(args, 2):
        return None
    x, out = args  # type: ignore[misc]
    if out.dtype == "bool" or (x.dtype in FLOATS and out.dtype not in FLOATS):
        return None  # logical-or sums, and float to integer casts, stay with NumPy
    X, O = names
    exclusive = bool(attrs.get("exclusive"))
    zero = literal(0, out.dtype)

    def step(read: str, write: str) -> Lines:
        # the sum runs in the output dtype, element by element (NumPy's accumulate)
        v = f"np.{out.dtype}({read})"
        if exclusive:
            return [f"v = {v}", f"{write} = acc", f"acc = np.{out.dtype}(acc + v)"]
        return [f"acc = np.{out.dtype}(acc + {v})", f"{write} = acc"]

    if attrs.get("axis") is None:  # x flattened in C order
        if out.ndim != 1:
            return None
        at = index(X, [f"i{d}" for d in range(x.ndim)])
        lines = _raise_unless(f"{O}.shape[0] == {X}.size", "cumsum", "output length is not the input's size")
        lines += [f"acc = {zero}", "f = 0"]
        return lines + _loops(X, x.ndim, step(at, f"{O}[f]") + ["f += 1"])
    a = _int(attrs.get("axis"))
    if a is None or x.ndim == 0 or out.ndim != x.ndim:
        return None
    n = x.ndim
    ax = a % n
    lines = _raise_unless(_dims_equal(O, range(n), X, range(n)), "cumsum", "output shape is not the input's")
    others = [d for d in range(n) if d != ax]
    at = [f"i{d}" for d in range(n)]
    inner = [f"acc = {zero}", f"for i{ax} in range({X}.shape[{ax}]):"]
    inner += ["    " + s for s in step(index(X, at), index(O, at))]
    pad = ""
    nest: Lines = []
    for d in others:
        nest.append(f"{pad}for i{d} in range({X}.shape[{d}]):")
        pad += "    "
    return lines + nest + [pad + s for s in inner]
