"""Numba code generation for ``fused_elementwise`` programs on the CPU.

Why: the NumPy runner makes one pass and one temporary per step (a sigmoid
alone is five); a generated loop computes the whole program per element in
registers, vectorised by LLVM, split over threads for large tensors.

What is generated comes only from a validated program (see
:mod:`.fused_program`): each step's op is looked up in :data:`_SCALAR`, a
fixed table of expression templates; refs become local names (``x0``,
``t3``); numbers are written with ``repr`` of a Python float, int or bool;
dtypes are names from a fixed set. Nothing taken from an input file is ever
written into the source verbatim.

Shapes: the inputs are broadcast to the output's shape and adjacent
dimensions are merged where every operand allows it, so a kernel is generated
per (program, merged rank, which inputs broadcast along which merged
dimension); the loop nest reads a broadcast input at index 0 of that
dimension. Inputs that are not C-contiguous are copied first. Each source is
written to the kernel cache directory (``HETVM_KERNEL_CACHE``, default
``~/.cache/hetvm/kernels``) under its hash and imported from there, so
Numba's own disk cache (``cache=True``) keeps the machine code across runs.

Semantics follow the NumPy kernels: NaN propagates through ``maximum``,
``minimum``, ``clip`` and ``relu``; division by zero gives inf or NaN
(``error_model="numpy"``); each step's result is cast to its dtype, so
integers wrap where NumPy's do (signed add, subtract, multiply and negative are
computed in uint64, see :data:`_WRAPPING`); an integer ``clip`` (float bounds) runs in
float64 as NumPy's does. A float-to-int32/int64 ``astype`` of a step casts as
NumPy does on this machine, NaN and out-of-range included (:func:`float_to_int`).
Steps whose NumPy meaning is awkward in a scalar loop (integer ``divide``,
``floor_divide``, ``power`` and ``reciprocal``; float-to-integer ``astype`` of
an input, or to another integer dtype; ``negative`` of bool) are not covered:
such a program runs on the NumPy runner.

Threads: a parallel variant (``prange`` over the outermost merged dimension)
runs for outputs of at least :data:`PARALLEL_MIN` elements, one call at a time
(Numba's default thread pool must not be entered from two threads at once);
a call that finds it busy runs the serial variant.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import logging
import math
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..runtime.threads import numba_parallel_ok
from . import math32, program_interp
from .fused_program import STEP_OPS, NumpyRunner, check_broadcast, parse_ref

__all__ = ["available", "mode", "prefers_generated", "LIBM_BOUND", "LIBM_FREE32", "LIBM_SMALL", "generated_kernel", "covers",
           "compile_stats", "count_compiled", "package_module", "kernel_source", "prelude_import", "PARALLEL_MIN", "float_to_int"]

log = logging.getLogger("hetvm.codegen")

PARALLEL_MIN = 1 << 17
_PARALLEL_LOCK = threading.Lock()

# op -> expression template over its operands a, b, c and params p0, p1
_SCALAR: dict[str, str] = {
    "add": "{a} + {b}", "subtract": "{a} - {b}", "multiply": "{a} * {b}",
    "divide": "{a} / {b}", "floor_divide": "np.floor({a} / {b})", "power": "np.power({a}, {b})",
    "maximum": "np.maximum({a}, {b})", "minimum": "np.minimum({a}, {b})",
    "equal": "{a} == {b}", "not_equal": "{a} != {b}", "less": "{a} < {b}",
    "less_equal": "{a} <= {b}", "greater": "{a} > {b}", "greater_equal": "{a} >= {b}",
    "logical_and": "(({a} != 0) and ({b} != 0))", "logical_or": "(({a} != 0) or ({b} != 0))",
    "logical_not": "({a} == 0)",
    "negative": "-{a}", "abs": "np.abs({a})", "floor": "np.floor({a})", "ceil": "np.ceil({a})",
    "round": "np.rint({a})", "sign": "np.sign({a})", "reciprocal": "1.0 / {a}",
    "nn.relu": "np.maximum({a}, {zero})",
    "exp": "np.exp({a})", "log": "np.log({a})", "sqrt": "np.sqrt({a})", "rsqrt": "1.0 / np.sqrt({a})",
    "tanh": "np.tanh({a})", "sin": "np.sin({a})", "cos": "np.cos({a})", "erf": "math.erf({a})",
    "sigmoid": "_sigmoid({a})", "nn.silu": "{a} * _sigmoid({a})",
    "nn.gelu": "0.5 * {a} * (1.0 + math.erf({a} * 0.7071067811865476))",
    "nn.gelu_tanh": "0.5 * {a} * (1.0 + np.tanh(0.7978845608028654 * ({a} + 0.044715 * {a} * {a} * {a})))",
    "nn.leakyrelu": "({a} if {a} > 0 else {a} * {p0})",
    "clip": "np.minimum(np.maximum({a}, {p0}), {p1})",
    "astype": "{a}",
    "where": "({b} if {a} else {c})",
}  # fmt: skip

#: float32 steps with a template of their own (:mod:`.math32`, ``_sigmoid32``):
#: libm's expf is one call per element, which keeps a loop scalar (7x slower on
#: EfficientNet's SiLU, 4x on the encoder's erf-GELU in a segment)
_SCALAR32: dict[str, str] = {"sigmoid": "_sigmoid32({a})", "nn.silu": "_silu32({a})",
                             "exp": "_exp32({a})", "tanh": "_tanh32({a})", "erf": "_erf32({a})",
                             "nn.gelu": "_gelu32({a})", "nn.gelu_tanh": "_gelu_tanh32({a})"}  # fmt: skip

_FLOAT = ("float32", "float64")

#: integer steps whose signed form LLVM may assume never overflows: Numba emits
#: signed add, sub and mul with ``nsw``, so a later compare of a wrapped result
#: can be folded as if it had not wrapped (``x + 1 > x`` becomes true for the
#: largest int64). In uint64 the same bits come out with no such assumption,
#: and the cast back to the step's dtype gives NumPy's wrapped value.
_WRAPPING = {"add": "{a} + {b}", "subtract": "{a} - {b}", "multiply": "{a} * {b}", "negative": "np.uint64(0) - {a}"}
_SIGNED = frozenset({"int8", "int16", "int32", "int64"})
_INT_ONLY_FLOAT = frozenset({"divide", "floor_divide", "power", "reciprocal"})

_PRELUDE = '''\
import math

import numba
import numpy as np


@numba.njit(cache=True, inline="always", error_model="numpy")
def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return 1.0 / (1.0 + e) if x >= 0 else e / (1.0 + e)


@numba.njit(cache=True, inline="always", error_model="numpy")
def _exp_neg32(x):
    # exp(-|x|) of a float32 in float32 without libm, as (m, k) with the value
    # m * k: exp(-|x|) = 2**n * exp(r), |r| <= ln(2)/2, exp(r) = 1 + r + r*r*q(r)
    # with q a degree-4 fit (1.1 ulp); 2**n (n reaches -159, past the least
    # normal power) in two halves built from their bits, so m stays normal and
    # a caller can scale by k last. Straight-line float32: a loop of it
    # vectorises at twice the float64 width. NaN gives NaN.
    f = np.float32
    a = np.abs(x)
    c = a if a < f(110.0) else f(110.0)  # 110 * exp(-110) is 0 in float32; NaN goes here too
    n = np.floor(c * f(-1.442695) + f(0.5))
    r = (n * f(-0.693359375) - c) + n * f(2.1219444e-4)  # -c - n ln2, ln2 in two parts
    q = f(0.49999991) + r * (f(0.16666542) + r * (f(0.041669209) + r * (f(0.0083661368) + r * f(0.0013752977))))
    h = np.floor(n * f(0.5))
    lo = np.int32((h + f(127.0)) * f(8388608.0)).view(np.float32)
    k = np.int32((n - h + f(127.0)) * f(8388608.0)).view(np.float32)
    return (f(1.0) + r + r * r * q) * lo, k


@numba.njit(cache=True, inline="always", error_model="numpy")
def _sigmoid32(x):
    # within 2.8 ulp of the float64 formula; the tail scaled last (denormals)
    m, k = _exp_neg32(x)
    d = np.float32(1.0) / (np.float32(1.0) + m * k)
    s = d if x >= np.float32(0.0) else (m * d) * k
    return s if x == x else x


@numba.njit(cache=True, inline="always", error_model="numpy")
def _silu32(x):
    # x * sigmoid(x), within 3.2 ulp: for x < 0, x * exp(-|x|) / (1 + exp(-|x|))
    # with the tail's scale applied last, so a result near the normal range keeps its bits
    m, k = _exp_neg32(x)
    d = np.float32(1.0) / (np.float32(1.0) + m * k)
    s = x * d if x >= np.float32(0.0) else ((x * m) * d) * k
    if np.abs(x) >= np.float32(110.0):  # x * exp(-|x|) is 0: x * 0 or x (-inf * 0 is NaN, as x * sigmoid(x))
        s = x * np.float32(0.0) if x < np.float32(0.0) else x
    return s if x == x else x


''' + math32.SOURCE

_numba: Any = None
_checked = False
_stats = {"kernels": 0, "compile_seconds": 0.0}


#: steps whose NumPy kernel is one SIMD pass (NumPy's own vectorised exp, log,
#: tanh, sin, cos) or a polynomial NumPy runs faster than libm's scalar call
#: (erf and the GELUs): a generated loop calls libm per element for them (Numba
#: without SVML) and lost to the NumPy runner from 4,096 elements up
LIBM_BOUND = frozenset({"exp", "log", "tanh", "sin", "cos", "erf", "nn.gelu", "nn.gelu_tanh"})
#: float32 steps of :data:`LIBM_BOUND` that are not: their generated form is
#: :mod:`.math32`'s libm-free code, which vectorises and beats NumPy's passes
#: (float32 exp and tanh are libm-free too, but NumPy's single SIMD pass of
#: either is still 1.5-5x faster than the float64 polynomial loop)
LIBM_FREE32 = frozenset({"erf", "nn.gelu", "nn.gelu_tanh"})
#: below this many output elements a libm-bound program is generated all the same:
#: there the NumPy runner's per-step calls cost more than libm (erf-GELU 4.4x,
#: tanh-GELU 1.4x faster generated at 256 elements; 0.95x and 0.29x at 4,096)
LIBM_SMALL = 1024


def mode() -> str:
    """``HETVM_NUMBA``: ``"0"`` off, ``"1"`` every covered program generated,
    anything else (the default) ``"auto"``: generated where :func:`prefers_generated` says."""
    value = os.environ.get("HETVM_NUMBA", "auto")
    return {"0": "off", "1": "all"}.get(value, "auto")


def _libm_bound(step: Sequence[Any]) -> bool:
    return step[0] in LIBM_BOUND and not (step[1] == "float32" and step[0] in LIBM_FREE32)


def prefers_generated(program: Sequence[Sequence[Any]], size: int | None = None) -> bool:
    """The rule of ``auto``: generated unless a step is :data:`LIBM_BOUND` (and
    not a float32 step of :data:`LIBM_FREE32`) and the output has ``size`` >=
    :data:`LIBM_SMALL` elements (None: any size).

    Measured one thread, CPU time, float32, NumPy runner / generated
    (``benchmarks/fused_numba_vs_numpy.py``): arithmetic, relu, clip (HardSwish),
    sigmoid and silu programs 1.2-12x faster generated at 256 to 2^20 elements
    (NumPy's sigmoid is five passes); float32 erf 1.6-4.9x, tanh-GELU 0.93-2.6x,
    erf-GELU 0.74-4.6x (below 1 at 16,384-65,536 elements only, where NumPy's
    passes stay in cache); float32 exp and tanh 0.2-0.67x, and float64 exp, tanh,
    erf and GELU programs 0.1-0.95x from 4,096 elements (libm per element)."""
    if size is not None and size < LIBM_SMALL:
        return True
    return not any(_libm_bound(step) for step in program)


def available() -> bool:
    """Whether generated kernels can run: Numba importable and ``HETVM_NUMBA`` not
    ``0`` (checked once). Which programs get one is :func:`mode`'s choice."""
    global _numba, _checked
    if not _checked:
        _checked = True
        _numba = None
        if mode() != "off":
            try:
                import numba  # noqa: F401

                _numba = numba
            except ImportError:  # the NumPy runner stays
                _numba = None
    return _numba is not None


def compile_stats() -> dict:
    """How many kernels this process compiled or loaded, and the seconds it took."""
    return dict(_stats)


def count_compiled(kernels: int, seconds: float) -> None:
    """Adds kernels compiled (or loaded) outside this module -- the direct loops --
    to :func:`compile_stats`."""
    _stats["kernels"] += kernels
    _stats["compile_seconds"] += seconds


def covers(program: Sequence[Sequence[Any]], input_dtypes: Sequence[str]) -> bool:
    """Whether every step of ``program`` has a generated form (see module doc)."""
    dtypes: list[str] = []
    for step in program:
        op, dtype = step[0], step[1]
        if op == "const":
            dtypes.append(dtype)
            continue
        if op not in _SCALAR:
            return False
        n_refs = STEP_OPS[op][0]
        src = [input_dtypes[i] if kind == "x" else dtypes[i] for kind, i in map(parse_ref, step[2 : 2 + n_refs])]
        if op in _INT_ONLY_FLOAT and dtype not in _FLOAT:
            return False
        if op == "astype" and src[0] in _FLOAT and dtype not in _FLOAT and dtype != "bool":
            # a step's float (its dtype is in the program, so the text can name it) to an
            # integer of the cast NumPy does here; an input's float keeps the NumPy runner
            if parse_ref(step[2])[0] == "x" or float_to_int(step[2], dtype) is None:  # type: ignore[index]
                return False
        if dtype == "bool" and STEP_OPS[op][2] not in ("bool", "not", "where") and op != "astype":
            return False
        if op == "where" and dtype == "bool":
            return False
        if op == "clip" and dtype not in _FLOAT and _int_clip(dtype, step[3:], "x", 0) is None:
            return False
        dtypes.append(dtype)
    return True


#: the floats that truncate into each integer dtype, as two comparisons of
#: ``{v}`` (both bounds exact in float64; a float32 compares as its float64
#: value), written alike in Python and C++ (``codegen_cuda`` joins them with ``&&``)
INT_TRUNCATES = {"int32": ("{v} > -2147483649.0", "{v} < 2147483648.0"),
                 "int64": ("{v} >= -9223372036854775808.0", "{v} < 9223372036854775808.0")}  # fmt: skip
_INVALID_CAST: dict[str, int | None] = {}


def invalid_cast(dtype: str) -> int | None:
    """The one value NumPy's cast gives NaN, infinities and out-of-range floats
    here (x86: the "integer indefinite", the dtype's minimum), probed once; None
    where it gives several (then no float-to-``dtype`` cast is generated: C leaves
    it undefined, and NumPy does what the machine does)."""
    if dtype not in _INVALID_CAST:
        bad = [np.nan, np.inf, -np.inf, 1e30, -1e30, 2.0**63, -(2.0**64), 2.0**31 if dtype == "int32" else 2.0**70]
        seen = set()
        with np.errstate(invalid="ignore"):
            for ftype in (np.float32, np.float64):
                for n in (1, 7, 67):  # one element, and NumPy's vector loops with their tails
                    seen.update(np.array(bad * n, ftype).astype(dtype).tolist())
        _INVALID_CAST[dtype] = seen.pop() if len(seen) == 1 else None
    return _INVALID_CAST[dtype]


def float_to_int(expr: str, dtype: str) -> str | None:
    """The expression casting the float ``expr`` (a name) to integer ``dtype``
    exactly as NumPy's ``astype`` does here: truncation in range, the probed value
    for NaN, infinities and out of range (where Numba's cast is undefined); None
    for a dtype or machine not covered."""
    invalid = invalid_cast(dtype) if dtype in INT_TRUNCATES else None
    if invalid is None:
        return None
    in_range = " and ".join(c.format(v=expr) for c in INT_TRUNCATES[dtype])
    return f"(np.{dtype}({expr}) if {in_range} else np.{dtype}({invalid}))"


def _int_clip(dtype: str, params: Sequence[Any], a: str, k: int) -> list[str] | None:
    """The statements of ``clip`` of integer step ``k`` of operand ``a`` (bounds:
    the program's floats), or None. NumPy clips an integer array by Python floats
    in float64 (NEP 50) and the kernel stores the result into the integer output:
    so does this, with :func:`float_to_int`'s exact cast for int32 / int64, plain
    truncation for other dtypes where both bounds lie in the dtype's range (the
    result then does too)."""
    if len(params) != 2 or dtype not in _INT_DTYPES:
        return None
    lo, hi = (float_text(float(p)) for p in params)
    clipped = f"c{k} = np.minimum(np.maximum(np.float64({a}), np.float64({lo})), np.float64({hi}))"
    cast = float_to_int(f"c{k}", dtype) if dtype in INT_TRUNCATES else None
    if cast is not None:
        return [clipped, f"t{k} = {cast}"]
    info = np.iinfo(dtype)
    if not all(info.min <= float(p) <= info.max for p in params):
        return None
    return [clipped, f"t{k} = np.{dtype}(c{k})"]


_INT_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})


def float_text(value: Any) -> str:
    """Source text of a float, NaN and infinities included (``repr`` writes
    ``nan`` and ``inf``, which are no names in generated code)."""
    v = float(value)
    if math.isnan(v):
        return "np.nan"
    if math.isinf(v):
        return "np.inf" if v > 0 else "-np.inf"
    return repr(v)


def _literal(value: Any, dtype: str) -> str:
    if dtype == "bool":
        return repr(bool(value))
    if dtype in _FLOAT:
        return f"np.{dtype}({float_text(value)})"
    return f"np.{dtype}({int(value)!r})"


def _cast(expr: str, dtype: str) -> str:
    return f"({expr})" if dtype == "bool" else f"np.{dtype}({expr})"


def step_template(op: str, dtype: str) -> str:
    """The expression of one step of ``op`` in ``dtype`` over ``{a}``, ``{b}``,
    ``{c}``, ``{p0}``, ``{p1}`` and ``{zero}`` (before the cast to ``dtype``);
    shared with :mod:`.program_interp`, whose steps then compute the same."""
    return _SCALAR32.get(op, _SCALAR[op]) if dtype == "float32" else _SCALAR[op]


def _body(program: Sequence[Sequence[Any]]) -> tuple[list[str], list[str]]:
    """Module-level constants and the per-element statements (result in ``t<last>``)."""
    consts: list[str] = []
    lines: list[str] = []
    for k, step in enumerate(program):
        op, dtype = step[0], step[1]
        n_refs = STEP_OPS[op][0]
        refs, params = step[2 : 2 + n_refs], step[2 + n_refs :]
        if op == "const":
            consts.append(f"t{k} = {_literal(params[0], dtype)}")
            continue
        names = {}
        for key, ref in zip("abc", refs):
            kind, i = parse_ref(ref)  # type: ignore[misc]
            names[key] = f"{kind}{i}"
        if op == "clip" and dtype not in _FLOAT:
            clip = _int_clip(dtype, params, names["a"], k)
            if clip is None:
                raise ValueError(f"step {k}: clip of {dtype} by {params} is not covered")
            lines.extend(clip)
            continue
        if op == "astype" and dtype == "bool":
            lines.append(f"t{k} = {names['a']} != 0")  # NumPy's: nonzero, NaN included, is True
            continue
        src = refs[0] if op == "astype" else None
        if src is not None and src[0] == "t" and program[int(src[1:])][1] in _FLOAT and dtype not in _FLOAT:
            lines.append(f"t{k} = {float_to_int(names['a'], dtype)}")  # (covers: a step's float)
            continue
        # params are in the step's dtype (clip's bounds, leakyrelu's slope), as
        # NumPy converts a Python float against a float32 array
        for i, p in enumerate(params):
            names[f"p{i}"] = _literal(p, dtype)
        names["zero"] = _literal(0, dtype)
        template = step_template(op, dtype)
        if dtype in _SIGNED and op in _WRAPPING:
            template = _WRAPPING[op]
            names.update({key: f"np.uint64({name})" for key, name in names.items() if key in "abc"})
        lines.append(f"t{k} = {_cast(template.format(**names), dtype)}")
    return consts, lines


def kernel_source(program: Sequence[Sequence[Any]], n_inputs: int, rank: int,
                  broadcast: Sequence[Sequence[bool]]) -> str:  # fmt: skip
    """The module text of a program's kernels for one merged rank and broadcast
    pattern (``broadcast[i][d]``: input ``i`` has length 1 along dimension ``d``)."""
    consts, lines = _body(program)
    last = f"t{len(program) - 1}"
    args = ", ".join([f"a{i}" for i in range(n_inputs)] + ["out"])
    idx = [f"i{d}" for d in range(rank)]
    out = [prelude_import(), *consts, ""]
    for variant, parallel in (("serial", False), ("parallel", True)):
        out.append(f'@numba.njit(cache=True, parallel={parallel}, error_model="numpy", nogil=True)')
        out.append(f"def {variant}({args}):")
        out.append("    shape = out.shape")
        pad = "    "
        for d in range(rank):
            loop = "numba.prange" if parallel and d == 0 else "range"
            out.append(f"{pad}for i{d} in {loop}(shape[{d}]):")
            pad += "    "
        for i in range(n_inputs):
            at = ", ".join("0" if broadcast[i][d] else idx[d] for d in range(rank))
            out.append(f"{pad}x{i} = a{i}[{at}]")
        out.extend(pad + line for line in lines)
        out.append(f"{pad}out[{', '.join(idx)}] = {last}")
        out.append("")
        out.append("")
    return "\n".join(out)


_PRELUDE_IMPORT: str | None = None


def prelude_import() -> str:
    """The head of a generated module: its imports, and :data:`_PRELUDE`'s
    functions taken from the prelude's own module, loaded once per process.

    Why: with the prelude's text in every module, each import compiled that
    text and made its 14 dispatchers again: 2.6 of a 20,000-binding DAG's 8.2 s
    warm build (901 kernels), 0.8 s once shared. The line names the prelude's module,
    whose name is its hash: a changed prelude changes every kernel's text,
    hence its file, so Numba's cache (which never looks into the functions a
    kernel inlines from another module) keeps no code of the old prelude."""
    global _PRELUDE_IMPORT
    if _PRELUDE_IMPORT is None:
        tree = ast.parse(_PRELUDE)
        names = sorted(n.name for n in tree.body if isinstance(n, ast.FunctionDef))
        module = _load(_PRELUDE).__name__
        _PRELUDE_IMPORT = f"import math\n\nimport numba\nimport numpy as np\n\nfrom {module} import {', '.join(names)}\n\n"
    return _PRELUDE_IMPORT


def _cache_dir() -> Path:
    root = os.environ.get("HETVM_KERNEL_CACHE")
    path = Path(root) if root else Path.home() / ".cache" / "hetvm" / "kernels"
    try:
        path.mkdir(parents=True, exist_ok=True)
        return path
    except OSError:
        import tempfile

        fallback = Path(tempfile.gettempdir()) / "hetvm-kernels"
        fallback.mkdir(parents=True, exist_ok=True)
        return fallback


_MODULES: dict[str, Any] = {}
_MODULES_LOCK = threading.Lock()


def _load(source: str) -> Any:
    """The module of ``source``, written once to the cache under its hash."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    with _MODULES_LOCK:
        mod = _MODULES.get(digest)
        if mod is not None:
            return mod
        path = _cache_dir() / f"k_{digest}.py"
        if not path.exists() or path.read_text() != source:
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(source)
            os.replace(tmp, path)
        name = f"hetvm_kernel_{digest}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)  # the generated file we just wrote, not input
        _MODULES[digest] = mod
        return mod


def package_module(name: str) -> Any:
    """hetvm's own Numba module ``hetvm/kernels/<name>.py`` (the direct loops),
    imported from its copy in the kernel cache directory.

    Why: Numba keeps a module's machine code next to its source file (or in a
    user-wide directory where the package is read-only); loaded from the copy,
    the direct loops' code lies in ``HETVM_KERNEL_CACHE`` with the generated
    kernels', one directory to keep or clear. The copy is rewritten only when
    the package's file changes, so Numba's cache stays valid across runs.
    Loaded once per process (:data:`_PACKAGE_MODULES`): kernels ask on every call."""
    mod = _PACKAGE_MODULES.get(name)
    if mod is None:
        mod = _PACKAGE_MODULES[name] = _load((Path(__file__).parent / f"{name}.py").read_text())
    return mod


#: hetvm's own Numba modules loaded so far, by name (see :func:`package_module`)
_PACKAGE_MODULES: dict[str, Any] = {}


def _merge(out_shape: tuple[int, ...], shapes: list[tuple[int, ...]]) -> tuple[tuple[int, ...], list[list[bool]]]:
    """Dimensions of length 1 dropped and neighbours merged where every input
    either spans both or broadcasts along both: the merged output shape and,
    per input, which merged dimensions it broadcasts along."""
    rank = len(out_shape)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    dims = [d for d in range(rank) if out_shape[d] != 1]
    merged: list[int] = []
    flags: list[list[bool]] = [[] for _ in shapes]
    for d in dims:
        bc = [p[d] == 1 for p in padded]
        if merged and all(f[-1] == b for f, b in zip(flags, bc)):
            merged[-1] *= out_shape[d]
        else:
            merged.append(out_shape[d])
            for f, b in zip(flags, bc):
                f.append(b)
    if not merged:
        return (1,), [[True] for _ in shapes]
    return tuple(merged), flags


class _Kernel:
    """A program's generated kernels, one per merged shape pattern, made on first use."""

    def __init__(self, program: tuple) -> None:
        self.program = program
        self.plans: dict[tuple, tuple[tuple[int, ...], list[tuple[int, ...]], Any]] = {}
        self.fallback: Callable[..., None] | None = None
        self.by_size = mode() == "auto" and not prefers_generated(program)

    def generates(self, dtypes: Sequence[str], out_shape: tuple[int, ...]) -> bool:
        """Whether a call of these input dtypes and output shape runs generated code
        (covered, and the ``auto`` rule's size test where it applies)."""
        if not covers(self.program, dtypes):
            return False
        return not self.by_size or prefers_generated(self.program, math.prod(out_shape))

    def plan(self, shapes: tuple, out_shape: tuple[int, ...], dtypes: Sequence[str] = ()) -> Any:
        """How a call of these shapes runs: the interpreter (small outputs of a
        program it covers, ``auto`` mode) or this program's own kernels."""
        if mode() == "auto" and math.prod(out_shape) < program_interp.SMALL and program_interp.covers(self.program, dtypes):
            return _Interpreted(self.program, len(shapes), dtypes[0])
        merged, flags = _merge(out_shape, list(shapes))
        in_shapes = [tuple(1 if f else n for f, n in zip(fl, merged)) for fl in flags]
        source = kernel_source(self.program, len(shapes), len(merged), flags)
        start = time.perf_counter()
        mod = _load(source)
        elapsed = time.perf_counter() - start
        _stats["kernels"] += 1
        _stats["compile_seconds"] += elapsed
        log.info("fused kernel for rank %d loaded in %.2f s", len(merged), elapsed)
        return merged, in_shapes, mod

    def compile_for(self, shapes: Sequence[tuple[int, ...]], dtypes: Sequence[str],
                    out_shape: tuple[int, ...], out_dtype: str) -> float | None:  # fmt: skip
        """Compiles (or loads from the disk cache) the serial and parallel kernels
        for these shapes ahead of a run; returns the seconds it took (None: these
        shapes run on the NumPy runner, nothing compiled)."""
        key = (tuple(shapes), out_shape)
        if not self.generates(dtypes, out_shape):
            self.plans[key] = False
            return None
        start = time.perf_counter()
        if not self.plans.get(key):
            self.plans[key] = self.plan(tuple(shapes), out_shape, dtypes)
        plan = self.plans[key]
        if isinstance(plan, _Interpreted):
            plan.compile()
            return time.perf_counter() - start
        merged, _, mod = plan
        nb = _numba
        sig = [nb.types.Array(nb.from_dtype(np.dtype(d)), len(merged), "C") for d in (*dtypes, out_dtype)]
        for fn in (mod.serial, mod.parallel) if int(np.prod(out_shape)) >= PARALLEL_MIN else (mod.serial,):
            fn.compile(tuple(sig))
        elapsed = time.perf_counter() - start
        _stats["compile_seconds"] += elapsed
        return elapsed

    def interpreted(self, shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...]) -> str | None:
        """The dtype of the interpreter that runs these shapes (after
        :meth:`compile_for`), or None where this program's own kernel does."""
        plan = self.plans.get((tuple(shapes), out_shape))
        return str(plan.dtype) if isinstance(plan, _Interpreted) else None

    def __call__(self, *args: Any) -> None:
        out = args[-1]
        inputs = args[:-1]
        key = (tuple(a.shape for a in inputs), out.shape)
        plan = self.plans.get(key)
        if plan is None:
            check_broadcast(inputs, out)
            if not self.generates([str(a.dtype) for a in inputs], out.shape):
                plan = self.plans[key] = False
            else:
                plan = self.plans[key] = self.plan(key[0], out.shape, [str(a.dtype) for a in inputs])
        if plan is False:
            if self.fallback is None:
                self.fallback = NumpyRunner(np, self.program)
            self.fallback(*args)
            return
        if out.size == 0:
            return
        try:
            if isinstance(plan, _Interpreted):
                plan(inputs, out)
            else:
                self._run_own(plan, inputs, out)
        except _numba.core.errors.NumbaError as err:  # a compiler gap: the NumPy runner is exact
            log.warning("generated kernel failed to compile (%s); using the NumPy kernels", str(err).splitlines()[0])
            self.plans[key] = False
            self(*args)

    @staticmethod
    def _run_own(plan: tuple, inputs: Sequence[np.ndarray], out: np.ndarray) -> None:
        """Runs the program's own kernel (serial or parallel variant) on merged views."""
        merged, in_shapes, mod = plan
        views = []
        for a, s in zip(inputs, in_shapes):
            if not a.flags.c_contiguous:
                a = np.ascontiguousarray(a)
            views.append(a.reshape(s))
        dst = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
        flat = dst.reshape(merged)
        if out.size >= PARALLEL_MIN and numba_parallel_ok() and _PARALLEL_LOCK.acquire(blocking=False):
            try:
                mod.parallel(*views, flat)
            finally:
                _PARALLEL_LOCK.release()
        else:
            mod.serial(*views, flat)
        if dst is not out:
            out[...] = dst


class _Interpreted:
    """A program run by :mod:`.program_interp`'s loop for its dtype."""

    def __init__(self, program: tuple, n_inputs: int, dtype: str) -> None:
        self.codes, self.params = program_interp.encode(program, n_inputs)
        self.dtype = np.dtype(dtype)
        self.run: Any = None

    def compile(self) -> None:
        """Loads the interpreter (compiled once per dtype, then from the disk cache)."""
        if self.run is None:
            self.run = _interpreter(str(self.dtype))

    def __call__(self, inputs: Sequence[np.ndarray], out: np.ndarray) -> None:
        self.compile()
        n = out.size
        shape = out.shape
        if all(a.shape == shape for a in inputs):
            ins = np.array(inputs).reshape(len(inputs), n)  # one copy of all (strided ones too)
        else:
            ins = np.empty((len(inputs), n), self.dtype)
            for i, a in enumerate(inputs):
                ins[i].reshape(shape)[...] = a  # broadcast (checked by the caller)
        tmp = np.empty((len(self.codes) - 1, n), self.dtype)  # the last step writes ``dst``
        dst = out.reshape(n) if out.flags.c_contiguous else np.empty(n, self.dtype)
        self.run(self.codes, self.params, ins, tmp, dst)
        if not out.flags.c_contiguous:
            out[...] = dst.reshape(out.shape)


_INTERPRETERS: dict[str, Any] = {}


def _interpreter(dtype: str) -> Any:
    """The compiled interpreter of ``dtype`` (see :mod:`.program_interp`)."""
    run = _INTERPRETERS.get(dtype)
    if run is None:
        start = time.perf_counter()
        run = _load(program_interp.interpreter_source(dtype)).run
        array = _numba.types.Array
        item = _numba.from_dtype(np.dtype(dtype))
        run.compile((array(_numba.int64, 2, "C"), array(_numba.float64, 2, "C"), array(item, 2, "C"),
                     array(item, 2, "C"), array(item, 1, "C")))  # fmt: skip
        _INTERPRETERS[dtype] = run
        _stats["kernels"] += 1
        _stats["compile_seconds"] += time.perf_counter() - start
    return run


_KERNELS: dict[tuple, _Kernel] = {}


def generated_kernel(xp: Any, program: tuple) -> Any:
    """A kernel of ``program`` (``fn(*inputs, out)``) that runs generated code
    where it covers the call's dtypes (and, ``auto``, where the rule prefers it
    for the call's size) and the NumPy runner elsewhere; None where Numba is
    absent or off, or the arrays are not NumPy's."""
    if xp is not np or not available():
        return None
    kernel = _KERNELS.get(program)
    if kernel is None:
        kernel = _KERNELS[program] = _Kernel(program)
    return kernel
