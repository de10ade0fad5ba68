"""A run of consecutive kernel calls compiled into one Numba function.

Why: in the exported transformers a call is about a hundred kernels on tensors
of a few hundred elements; each NumPy kernel costs microseconds of Python and
dispatch around a few hundred flops, and ONNX Runtime was 3-6x faster. Here
the VM's generated code (:mod:`.codegen`) calls one :class:`Segment` where it
called a run of kernels; the segment's first call writes the Numba source of
each call (:mod:`hetvm.kernels.segment_emit`, specialised to the dtypes and
ranks it sees), compiles the covered calls into one function per stretch
(cached on disk with the other generated kernels) and runs the calls it does
not cover through their NumPy kernels, in order.

Later calls run the same plan. Numba checks each call's argument types: a call
whose dtypes, ranks or memory layouts differ from the first call's runs every
kernel through NumPy (never code written for other types). An error inside
compiled code re-runs the stretch kernel by kernel, so the error raised is the
NumPy kernel's, and the VM names that kernel's pc (``exc._hetvm_pc``).

Numba compiles at the first call (seconds for a large stretch, logged under
``hetvm.codegen``); the machine code is kept on disk, so a later process loads
it. An emitter may decline a call by its first call's size (a large matrix
product keeps BLAS: ``segment_emit/linalg.py``).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..kernels import codegen_numba
from ..kernels.segment_emit import Arg, Arr, ArrList, Imm, Val, emitter

__all__ = ["Slot", "SegmentCall", "Segment", "enabled", "slot_value", "MAX_STRETCH", "MAX_CALLS"]

log = logging.getLogger("hetvm.codegen")

#: the most calls one compiled function takes: Numba's time grows with the calls
#: of a function (about 15 ms each, and more than linearly in one body), so a longer
#: stretch compiles as several functions of at most this many
MAX_STRETCH = 256
#: a run of more kernel calls than this (a program of thousands of small ops in one
#: straight line) keeps its NumPy kernels: compiling it would cost minutes at the
#: first call for microseconds a call
MAX_CALLS = 2048

#: a slot of a kernel argument: ("a", k) the segment's argument k (an array, or a
#: value computed at run time: an int, float, bool or tuple of ints), ("l", (k, ...))
#: a list of arrays, ("i", value) an immediate
Slot = tuple


@dataclass
class SegmentCall:
    """One kernel call of a segment."""

    pc: int
    op: str
    attrs: dict
    kernel: Callable[..., Any]  # the bound NumPy-side kernel
    slots: tuple[Slot, ...]


def enabled() -> bool:
    """Segments compile where Numba is available and ``HETVM_NUMBA`` is not ``0``
    (the generated kernels' switch)."""
    return codegen_numba.available()


class Segment:
    """Callable of the segment's distinct array arguments, in slot order."""

    def __init__(self, calls: Sequence[SegmentCall], where: str) -> None:
        self.calls = list(calls)
        self.where = where
        #: ("k", call index, (), ()) a NumPy kernel, or ("g", compiled function,
        #: its argument indices, its call indices) a compiled stretch; made at the first call
        self.pieces: list[tuple[str, Any, tuple[int, ...], tuple[int, ...]]] | None = None
        self._lock = threading.Lock()
        self.whole: Any = None  # the compiled function when it is the whole segment

    # -- running ---------------------------------------------------------------
    def __call__(self, *args: Any) -> None:
        pieces = self.pieces
        if pieces is None:
            with self._lock:
                if self.pieces is None:
                    self.pieces = self._plan(args)
                    kind, fn, idx, _ = self.pieces[0]
                    if len(self.pieces) == 1 and kind == "g" and idx == tuple(range(len(args))):
                        self.whole = fn
            pieces = self.pieces
        for kind, fn, idx, ks in pieces:
            if kind == "k":
                self._kernel(fn, args)
                continue
            try:
                if fn is self.whole:  # every argument, in order
                    fn(*args)
                else:
                    fn(*[args[i] for i in idx])
            except TypeError as err:  # types not those compiled for: NumPy, call by call
                if "No matching definition" not in str(err):
                    raise
                for k in ks:
                    self._kernel(k, args)
            except Exception as err:
                for k in ks:  # raises the kernel's own error, with its pc
                    self._kernel(k, args)
                raise err

    def _kernel(self, k: int, args: tuple) -> None:
        call = self.calls[k]
        try:
            call.kernel(*[slot_value(s, args) for s in call.slots])
        except Exception as err:
            err._hetvm_pc = call.pc  # type: ignore[attr-defined]
            raise

    # -- planning (first call) ---------------------------------------------------
    def _plan(self, args: tuple) -> list[tuple[str, Any, tuple[int, ...], tuple[int, ...]]]:
        pieces: list[tuple[str, Any, tuple[int, ...], tuple[int, ...]]] = []
        stretch: list[tuple[int, list[str]]] = []

        def flush() -> None:
            if not stretch:
                return
            piece = self._compile(stretch, args)
            if piece is None:
                pieces.extend(("k", k, (), ()) for k, _ in stretch)
            else:
                pieces.append(piece)
            stretch.clear()

        if len(self.calls) > MAX_CALLS:
            log.info("segment of %d kernels (%s) runs its NumPy kernels: more than %d calls "
                     "would take minutes to compile", len(self.calls), self.where, MAX_CALLS)
            return [("k", k, (), ()) for k in range(len(self.calls))]
        for k, call in enumerate(self.calls):
            body = self._body(call, args)
            if body is None:
                flush()
                pieces.append(("k", k, (), ()))
            else:
                stretch.append((k, body))
                if len(stretch) == MAX_STRETCH:
                    flush()
        flush()
        return pieces

    def _body(self, call: SegmentCall, args: tuple) -> list[str] | None:
        emit = emitter(call.op)
        if emit is None:
            return None
        specs: list[Arg] = []
        names: list[Any] = []  # by position, so one body serves every call site alike
        for pos, (tag, value) in enumerate(call.slots):
            if tag == "a":
                a = args[value]
                spec = _value_spec(a) if not isinstance(a, np.ndarray) else Arr(str(a.dtype), a.ndim, a.shape)
                if spec is None or (isinstance(spec, Arr) and not _plain(a)):
                    return None
                specs.append(spec)
                names.append(f"a{pos}")
            elif tag == "l":
                items = [args[i] for i in value]
                if not all(_plain(a) for a in items):
                    return None
                specs.append(ArrList(tuple(Arr(str(a.dtype), a.ndim, a.shape) for a in items)))
                names.append([f"a{pos}_{j}" for j in range(len(items))])
            else:
                specs.append(Imm(value))
                names.append(None)
        try:
            return emit(call.attrs, specs, names)
        except Exception as err:  # noqa: BLE001 - an emitter's gap: the NumPy kernel is exact
            log.warning("segment emitter of '%s' failed (%s: %s); the call runs its NumPy kernel",
                        call.op, type(err).__name__, err)
            return None

    def _compile(self, stretch: list[tuple[int, list[str]]], args: tuple) -> tuple | None:
        if not codegen_numba.available():
            return None
        used: list[int] = []
        for k, _ in stretch:
            for tag, value in self.calls[k].slots:
                for i in (value,) if tag == "a" else value if tag == "l" else ():
                    if i not in used:
                        used.append(i)
        nb = codegen_numba._numba
        sig = tuple(_array_type(nb, args[i]) for i in used)
        start = time.perf_counter()
        try:
            kernels = [codegen_numba._load(_kernel_source(lines, _params(self.calls[k].slots))).__name__
                       for k, lines in stretch]
            # the argument types are part of the text: a module (and its dispatcher,
            # whose compiling stops below) serves exactly one signature
            types = ", ".join(str(t) for t in sig)
            mod = codegen_numba._load(_segment_source(self.calls, stretch, kernels, used) + f"# types: {types}\n")
            fn = mod.segment
            if fn._can_compile:  # else another segment of this text compiled it already
                fn.compile(sig)
                fn.disable_compile()
        except Exception as err:  # noqa: BLE001 - a compiler gap: the NumPy kernels are exact
            log.warning("segment of %d kernels (%s) failed to compile (%s); using the NumPy kernels",
                        len(stretch), self.where, str(err).splitlines()[0] if str(err) else type(err).__name__)
            return None
        elapsed = time.perf_counter() - start
        codegen_numba.count_compiled(1, elapsed)
        log.info("segment of %d kernels (%s) compiled in %.2f s", len(stretch), self.where, elapsed)
        return ("g", fn, tuple(used), tuple(k for k, _ in stretch))


def slot_value(slot: Slot, args: tuple) -> Any:
    """The kernel argument a slot stands for, given the segment's arguments."""
    tag, value = slot
    if tag == "a":
        return args[value]
    if tag == "l":
        return [args[i] for i in value]
    return value


def _value_spec(v: Any) -> Val | None:
    """The spec of a run-time value Numba takes as it is, or None."""
    if isinstance(v, bool):
        return Val("bool")
    if isinstance(v, int) and -(1 << 63) <= v < (1 << 63):
        return Val("int")
    if isinstance(v, float):
        return Val("float")
    if isinstance(v, tuple) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return Val("shape", len(v))
    return None


def _plain(a: Any) -> bool:
    """A NumPy array Numba takes as it is (native byte order, a dtype of the emitters)."""
    return isinstance(a, np.ndarray) and a.dtype.isnative and a.dtype.name in _DTYPES


_DTYPES = frozenset({"float32", "float64", "int8", "int16", "int32", "int64",
                     "uint8", "uint16", "uint32", "uint64", "bool"})  # fmt: skip


def _array_type(nb: Any, a: Any) -> Any:
    """Numba's type of an argument (an array or a run-time value)."""
    if not isinstance(a, np.ndarray):
        spec = _value_spec(a)
        assert spec is not None
        if spec.kind == "shape":
            return nb.types.UniTuple(nb.types.int64, spec.length) if spec.length else nb.types.Tuple(())
        return {"bool": nb.types.boolean, "int": nb.types.int64, "float": nb.types.float64}[spec.kind]
    layout = "C" if a.flags.c_contiguous else "F" if a.flags.f_contiguous and a.ndim > 1 else "A"
    return nb.types.Array(nb.from_dtype(a.dtype), a.ndim, layout, readonly=not a.flags.writeable)


def _params(slots: Sequence[Slot]) -> list[str]:
    """A body's parameters: its arrays by argument position (``a1``; ``a0_2`` the
    third array of list argument 0)."""
    out: list[str] = []
    for pos, (tag, value) in enumerate(slots):
        if tag == "a":
            out.append(f"a{pos}")
        elif tag == "l":
            out.extend(f"a{pos}_{j}" for j in range(len(value)))
    return out


def _kernel_source(lines: list[str], params: list[str]) -> str:
    """The module of one call's body, ``kernel``: the same text for every call
    of the op with the same attributes, dtypes and ranks, so it compiles once
    (and Numba's disk cache keeps it). A ``segment_emit.Body``'s helpers come
    before it; a contracting Body's kernel may fuse multiply-adds into FMAs
    (no other fast-math flag, ever)."""
    helpers = getattr(lines, "helpers", "")
    contract = ", fastmath={'contract'}" if getattr(lines, "contract", False) else ""
    return "\n".join([
        codegen_numba.prelude_import(),
        *([helpers] if helpers else []),
        f'@numba.njit(cache=True, error_model="numpy", nogil=True{contract})',
        f"def kernel({', '.join(params)}):",
        *("    " + line for line in lines or ["pass"]),
        "",
    ])


def _segment_source(calls: Sequence[SegmentCall], stretch: list[tuple[int, list[str]]], kernels: list[str],
                    used: list[int]) -> str:  # fmt: skip
    """The module of one stretch: ``segment`` calls each call's kernel module in order."""
    out = ["import sys", "", "import numba", ""]
    body = []
    for n, ((k, _), module) in enumerate(zip(stretch, kernels)):
        call = calls[k]
        out.append(f"_k{n} = sys.modules[{module!r}].kernel  # pc {call.pc}: {call.op}")
        arrays: list[str] = []
        for tag, value in call.slots:
            if tag == "a":
                arrays.append(f"a{value}")
            elif tag == "l":
                arrays.extend(f"a{i}" for i in value)
        body.append(f"    _k{n}({', '.join(arrays)})")
    out += ["", "", '@numba.njit(cache=True, error_model="numpy", nogil=True)',
            f"def segment({', '.join(f'a{i}' for i in used)}):", *body, ""]
    return "\n".join(out)
