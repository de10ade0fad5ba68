"""Numba source for one kernel call inside a segment (see ``hetvm/runtime/segments.py``).

Why: a small model's call is dozens of kernels of a few microseconds each, and
most of that is the Python and NumPy call around a few hundred flops. A run of
consecutive kernel calls compiled into one Numba function costs one call; for
that each op needs its body as Numba source, which the emitters here write.

An emitter is registered per op name (:func:`register`; a *specialised* one,
:func:`specialise`, is asked first and may return None to leave the call to
the op's general emitter): ``emit(attrs, args, names)`` gets the
call's attributes, an :class:`Arr` / :class:`ArrList` / :class:`Imm` /
:class:`Val` per argument (the output last, destination-passing as the NumPy
kernel), and the local names the body reads (``names[i]`` a string for an
array or a run-time value, a list of strings for a list of arrays, None for an
immediate, whose value the emitter writes into the source itself). It returns the body's lines (relative
indentation, four spaces a level), or None when it does not cover the call:
the call then runs its NumPy kernel outside the compiled function.

A body must compute exactly what the op's NumPy kernel computes (the tests
compare them) and must never read or write out of bounds: shapes are only
known at run time, so a body checks what its NumPy kernel would refuse and
raises ``ValueError`` (compiled code runs with bounds checks off). Source is
written only from validated attributes: numbers through :func:`literal`,
dtypes from :data:`DTYPES`, never text from an input file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..codegen_numba import float_text

__all__ = ["Arr", "ArrList", "Imm", "Val", "Arg", "Emitter", "register", "specialise", "emitter", "DTYPES", "FLOATS", "INTS",
           "literal", "index", "Lines", "Body", "check_same_shape", "broadcast_loop"]


@dataclass(frozen=True)
class Arr:
    """An array argument: its dtype name and rank. ``shape`` is the first call's,
    for an emitter's size rule only (declining a call that BLAS or a NumPy
    kernel runs faster at that size): later calls may have other shapes, so
    the body must not depend on it."""

    dtype: str
    ndim: int
    shape: tuple[int, ...] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ArrList:
    """A list of arrays (``concat``'s inputs)."""

    items: tuple[Arr, ...]


@dataclass(frozen=True)
class Imm:
    """An immediate: a Python int, float, bool, None, or a tuple/list of them."""

    value: Any


@dataclass(frozen=True)
class Val:
    """A value computed at run time, passed in as an argument (its name in
    ``names``): ``kind`` ``"int"`` (int64), ``"float"`` (float64), ``"bool"``, or
    ``"shape"``, a tuple of ``length`` int64 (a shape or a list of sizes)."""

    kind: str
    length: int = 0


Arg = Arr | ArrList | Imm | Val
Lines = list[str]


class Body(list):
    """A body's lines with module-level ``helpers``: Numba functions its kernel
    module defines before ``kernel``, for a loop compiled with other flags than
    the body's (a sum that may reassociate, so LLVM vectorises it). Helpers are
    written only from the emitter's own text, never from attributes.

    ``contract``: the kernel is compiled with ``fastmath={"contract"}`` (and no
    other flag), which lets LLVM fuse each ``a * b + c`` into one FMA. Only for
    a product's body (matmul's): its sums already run in another order than a
    single ``np.matmul``'s, within the summation error bound, which one rounding
    fewer per term keeps, and contraction changes no NaN or inf result;
    element-wise bodies must round as NumPy does, so they never set it."""

    def __init__(self, lines: Lines, helpers: str = "", *, contract: bool = False) -> None:
        super().__init__(lines)
        self.helpers = helpers
        self.contract = contract

Emitter = Callable[[dict, Sequence[Arg], Sequence[Any]], "Lines | None"]

DTYPES = frozenset({"float32", "float64", "int8", "int16", "int32", "int64",
                    "uint8", "uint16", "uint32", "uint64", "bool"})  # fmt: skip
FLOATS = frozenset({"float32", "float64"})
INTS = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})

_EMITTERS: dict[str, Emitter] = {}
#: per op, emitters asked before the general one, in registration order: a
#: faster body for the calls they cover (depthwise convolutions, pooling), the
#: general emitter for the rest
_SPECIAL: dict[str, list[Emitter]] = {}


def register(*ops: str) -> Callable[[Emitter], Emitter]:
    """Registers ``fn`` as the emitter of each op in ``ops``."""

    def do(fn: Emitter) -> Emitter:
        for op in ops:
            if op in _EMITTERS:
                raise ValueError(f"op '{op}' already has a segment emitter")
            _EMITTERS[op] = fn
        return fn

    return do


def specialise(*ops: str) -> Callable[[Emitter], Emitter]:
    """Registers ``fn`` as a specialised emitter of each op in ``ops``: asked
    before the op's general emitter, it returns None for a call it does not
    cover, which then goes to the general one."""

    def do(fn: Emitter) -> Emitter:
        for op in ops:
            _SPECIAL.setdefault(op, []).append(fn)
        return fn

    return do


def emitter(op: str) -> Emitter | None:
    """The emitter of ``op``, or None (the op always runs its NumPy kernel)."""
    _ensure_loaded()
    general = _EMITTERS.get(op)
    special = _SPECIAL.get(op)
    if not special:
        return general

    def chained(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
        for fn in special:
            lines = fn(attrs, args, names)
            if lines is not None:
                return lines
        return general(attrs, args, names) if general is not None else None

    return chained


_loaded = False


def _ensure_loaded() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        from . import (  # noqa: F401  (register)
            conv,
            conv_dots,
            depthwise,
            elementwise,
            linalg,
            lrn,
            movement,
            norm,
            pool,
            reduce,
            resize,
        )


def literal(value: Any, dtype: str | None = None) -> str:
    """Source text of a number (``dtype``: as that NumPy scalar type)."""
    if isinstance(value, bool) or dtype == "bool":
        return repr(bool(value))
    if dtype is None:
        if isinstance(value, int):
            return repr(int(value))
        return float_text(value)
    if dtype not in DTYPES:
        raise ValueError(f"no literal of dtype {dtype!r}")
    if dtype in FLOATS:
        return f"np.{dtype}({float_text(value)})"
    return f"np.{dtype}({int(value)!r})"


def index(name: str, idx: Sequence[str]) -> str:
    """``name[i0, i1]``; ``name[()]`` for a rank-0 array."""
    return f"{name}[{', '.join(idx)}]" if idx else f"{name}[()]"


def check_same_shape(a: str, b: str, ndim: int, what: str) -> Lines:
    """Lines raising ValueError unless arrays ``a`` and ``b`` have equal shapes."""
    if ndim == 0:
        return []
    cond = " or ".join(f"{a}.shape[{d}] != {b}.shape[{d}]" for d in range(ndim))
    return [f"if {cond}:", f"    raise ValueError('{what}: shapes differ')"]


def broadcast_loop(out: str, out_ndim: int, inputs: Sequence[tuple[str, int]], body: Callable[[list[str]], Lines],
                   what: str, versioned: bool = False) -> Lines:  # fmt: skip
    """A loop nest over ``out``'s shape reading each input broadcast NumPy's way
    (trailing dimensions aligned, length 1 repeated), after checking that each
    input's dimension is 1 or the output's. ``body(values)`` gets the source of
    each input's element at the current index and returns the lines that write
    ``out`` there.

    ``versioned``: a second nest, taken where no input broadcasts along the last
    dimension (a bias of the output's last length, the common case), reads
    there at the plain index: a run-time stride of 0 or 1 keeps LLVM from
    vectorising the inner loop (a GELU after a bias add ran 4x slower)."""
    lines: Lines = []
    reads = []
    plain = []
    for k, (name, nd) in enumerate(inputs):
        if nd > out_ndim:
            raise ValueError(f"{what}: input {k} has rank {nd} > the output's {out_ndim}")
        at = []
        for d in range(nd):
            od = out_ndim - nd + d
            flag = f"s{k}_{d}"
            lines.append(f"{flag} = 0 if {name}.shape[{d}] == 1 else 1")
            lines.append(f"if {name}.shape[{d}] != 1 and {name}.shape[{d}] != {out}.shape[{od}]:")
            lines.append(f"    raise ValueError('{what}: input {k} does not broadcast to the output')")
            at.append(f"i{od} * {flag}")
        reads.append(index(name, at))
        plain.append(index(name, at[:-1] + [f"i{out_ndim - 1}"]) if nd else reads[-1])
    inner = [f"s{k}_{nd - 1} == 1" for k, (_, nd) in enumerate(inputs) if nd]
    if not versioned or not inner:
        return lines + _nest_lines(out, out_ndim, body(reads))
    # an input that is the output itself (the planner's in-place steps) is read
    # through the output's name: two names of one buffer look like an overlap
    # to LLVM, which then runs the loop scalar
    same = [k for k, (_, nd) in enumerate(inputs) if nd == out_ndim][:_ALIAS_VARIANTS]
    at_out = index(out, [f"i{d}" for d in range(out_ndim)])
    versions = []
    for k in same:
        name = inputs[k][0]
        cond = f"{name}.ctypes.data == {out}.ctypes.data and {name}.shape == {out}.shape and {name}.strides == {out}.strides"
        versions.append((cond, [at_out if i == k else r for i, r in enumerate(plain)]))
    unit: Lines = []
    for n, (cond, rd) in enumerate(versions):
        unit += [f"{'if' if n == 0 else 'elif'} {cond}:", *("    " + ln for ln in _nest_lines(out, out_ndim, body(rd)))]
    nest = _nest_lines(out, out_ndim, body(plain))
    unit += (["else:"] + ["    " + ln for ln in nest]) if versions else nest
    return lines + [f"if {' and '.join(inner)}:", *("    " + ln for ln in unit), "else:",
                    *("    " + ln for ln in _nest_lines(out, out_ndim, body(reads)))]  # fmt: skip


#: inputs of the output's rank that get a nest reading them through the output's name
_ALIAS_VARIANTS = 2


def _nest_lines(out: str, out_ndim: int, inner: Lines) -> Lines:
    lines: Lines = []
    pad = ""
    for d in range(out_ndim):
        lines.append(f"{pad}for i{d} in range({out}.shape[{d}]):")
        pad += "    "
    return lines + [pad + line for line in inner]
