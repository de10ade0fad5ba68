"""Layer normalisation and softmax over the trailing axes as direct Numba loops
(``_norm_jit``), one call over the rows instead of NumPy's passes.

Why: on a transformer's small rows (the exported corpus: (1, 8, 32), (2, 9,
64)) the NumPy kernels spend most of their time in ufunc and reduction call
overhead -- layer norm makes seven passes (two sums, a subtract, a square, a
sqrt, the scale and shift), softmax four plus a max -- and on large ones (the
encoder's (1, 128, 256), ViT's (1, 12, 197, 197)) in passes over memory and
a per-row max and sum NumPy does not vectorise well. The float32 loops
vectorise every pass (int32-key max, float64-lane sums, a libm-free float32
exp: see ``_norm_jit``'s doc for their accuracy), so they are taken at any
size. Measured one thread, CPU time, min of 15, float32, last axis, NumPy
kernel / direct (whole kernel call, us):

=================  ===========  ===========
shape              layer norm   softmax
=================  ===========  ===========
(1, 8, 32)         10.4 / 3.7   8.1 / 1.7
(2, 9, 64)         12.1 / 4.1   10.6 / 2.2
(1, 4, 128, 128)   107 / 27     133 / 36
(1, 12, 197, 197)  893 / 201    798 / 267
(1, 128, 256)      55 / 14      60 / 18
(1, 197, 768)      220 / 44     211 / 73
(4, 128, 768)      673 / 152    611 / 221
=================  ===========  ===========

float64 keeps the earlier loops (float64 sums, libm's exp, one element at a
time), which NumPy's SIMD passes beat from about 50,000 elements ((1, 12, 64,
64): layer norm 99 / 118 us, softmax 144 / 221), so they are taken up to
:data:`SMALL` elements only.

Threads: a float32 call of at least :data:`SOFTMAX_PARALLEL_MIN` /
:data:`LAYER_NORM_PARALLEL_MIN` elements shares its rows out over Numba's
threads (one block of rows per thread) when the thread budget allows it
(``runtime.threads.numba_parallel_ok``, Numba's per-call thread count above
one, no other parallel loop running). Measured at 2 threads, wall time,
serial / parallel: softmax 4,096 elements 2.5 / 2.8 us, 8,192 4.7 / 4.0,
16,384 9.0 / 6.7 (rows of 768: 8.6 / 6.3), 65,536 34 / 20; layer norm 8,192
3.4 / 3.5, 16,384 6.6 / 5.3 (rows of 768: 4.9 / 4.3), 32,768 12.7 / 8.4
(9.7 / 6.8), 65,536 23 / 13. The thresholds are where the parallel loop is
1.35x or more, with room for a waking pool on a loaded machine.

Taken where Numba is available and on (``HETVM_NUMBA`` not ``0``), the arrays
are NumPy's, ``x`` and ``out`` of one dtype, float32 (any size) or float64
(at most :data:`SMALL` elements), both C-contiguous, and the normalised axes
are the trailing ones in order (layer norm; ``gamma`` / ``beta`` of x's dtype
and one value per normalised item) or the last axis (softmax). Everything
else -- float16, integer outputs, strided inputs, other axes -- keeps the
NumPy kernels, which stay the reference.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..runtime.threads import numba_parallel_ok
from . import codegen_numba

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_F32 = np.dtype(np.float32)
#: the most elements the float64 loops are taken for (see the module doc's figures)
SMALL = 4096
#: the fewest elements for which a float32 softmax / layer norm shares its rows
#: out over Numba's threads (see the module doc's figures)
SOFTMAX_PARALLEL_MIN = 1 << 14
LAYER_NORM_PARALLEL_MIN = 1 << 15
_UNUSED32 = np.zeros(0, np.float32)  # gamma / beta of a layer norm that does not scale / centre


def _loops() -> Any:
    return codegen_numba.package_module("_norm_jit")


def precompile(dtype: str, kind: str, parallel: bool = False) -> int:
    """Compiles (or loads from the disk cache) the ``"layer_norm"`` or
    ``"softmax"`` loop for ``dtype`` (float32 or float64) with the argument
    types :func:`layer_norm` / :func:`softmax` pass, ahead of a run;
    ``parallel`` (float32) also the threaded loop. Returns how many it compiled."""
    nb = codegen_numba._numba
    elem = nb.from_dtype(np.dtype(dtype))
    a2, a1 = nb.types.Array(elem, 2, "C"), nb.types.Array(elem, 1, "C")
    jit = _loops()
    if np.dtype(dtype) != _F32:
        if kind == "softmax":
            jit.softmax.compile((a2, a2))
        else:
            jit.layer_norm.compile((a2, a1, a1, nb.types.float64, a2))
        return 1
    if kind == "softmax":
        serial, threaded, sig = jit.softmax32, jit.softmax32_parallel, (a2, a2)
    else:
        flag = nb.types.boolean
        serial, threaded = jit.layer_norm32, jit.layer_norm32_parallel
        sig = (a2, a1, a1, nb.types.float64, flag, flag, a2)
    serial.compile(sig)
    if parallel:
        threaded.compile((*sig, nb.types.int64))
    return 2 if parallel else 1


def limit(dtype: Any) -> int | None:
    """The most elements a call of ``dtype`` is taken for (None: any number)."""
    return None if np.dtype(dtype) == _F32 else SMALL


def _rows(xp: Any, x: Any, out: Any) -> bool:
    """NumPy arrays of one float dtype, both C-contiguous, float64 ones small, Numba on."""
    return (
        xp is np
        and x.dtype in _FLOATS
        and (x.dtype == _F32 or x.size <= SMALL)
        and out.dtype == x.dtype
        and x.shape == out.shape
        and x.flags.c_contiguous
        and out.flags.c_contiguous
        and codegen_numba.available()
    )


def parallel_min(kind: str) -> int:
    """The fewest elements of a float32 ``"softmax"`` / ``"layer_norm"`` call that
    may take the parallel loop."""
    return SOFTMAX_PARALLEL_MIN if kind == "softmax" else LAYER_NORM_PARALLEL_MIN


def _run(serial: Any, parallel: Any, least: int, x2: Any, *args: Any) -> None:
    """``serial(x2, *args)``, or ``parallel(x2, *args, threads)`` where the call
    has ``least`` elements or more and more than one row, the thread budget
    allows it (``numba_parallel_ok``, Numba's thread count above one) and no
    other parallel loop runs (Numba's pool is entered from one thread at a time)."""
    lock = codegen_numba._PARALLEL_LOCK
    if x2.size >= least and x2.shape[0] > 1 and numba_parallel_ok():
        threads = codegen_numba._numba.get_num_threads()
        if threads > 1 and lock.acquire(blocking=False):
            try:
                parallel(x2, *args, threads)
            finally:
                lock.release()
            return
    serial(x2, *args)


def _param(p: Any, dtype: Any, size: int, used: bool) -> bool:
    return not used or (p.dtype == dtype and p.size == size)


def layer_norm_applies(
    xp: Any,
    x: Any,
    out: Any,
    axes: tuple[int, ...],
    gamma: Any,
    beta: Any,
    scale: bool,
    center: bool,
) -> bool:
    """Whether :func:`layer_norm` covers the call (``axes`` already non-negative)."""
    k = len(axes)
    if k == 0 or axes != tuple(range(x.ndim - k, x.ndim)):
        return False
    cols = math.prod(x.shape[x.ndim - k :])
    return (
        _param(gamma, x.dtype, cols, scale)
        and _param(beta, x.dtype, cols, center)
        and _rows(xp, x, out)
    )


def layer_norm(
    x: Any, gamma: Any, beta: Any, k: int, eps: float, scale: bool, center: bool, out: Any
) -> None:
    """Normalises ``x`` over its last ``k`` axes into ``out`` (see module doc)."""
    if x.size == 0:
        return
    cols = math.prod(x.shape[x.ndim - k :])
    x2, o2 = x.reshape(-1, cols), out.reshape(-1, cols)
    jit = _loops()
    if x.dtype == _F32:
        g = np.ascontiguousarray(gamma).reshape(cols) if scale else _UNUSED32
        b = np.ascontiguousarray(beta).reshape(cols) if center else _UNUSED32
        _run(jit.layer_norm32, jit.layer_norm32_parallel, LAYER_NORM_PARALLEL_MIN, x2, g, b, float(eps),
             bool(scale), bool(center), o2)  # fmt: skip
        return
    empty = np.zeros(0, x.dtype)
    g = np.ascontiguousarray(gamma).reshape(cols) if scale else empty
    b = np.ascontiguousarray(beta).reshape(cols) if center else empty
    jit.layer_norm(x2, g, b, float(eps), o2)


def softmax_applies(xp: Any, x: Any, out: Any, axis: int) -> bool:
    """Whether :func:`softmax` covers the call: the last axis, see :func:`_rows`."""
    return x.ndim > 0 and axis % x.ndim == x.ndim - 1 and _rows(xp, x, out)


def softmax(x: Any, out: Any) -> None:
    """Softmax of ``x`` over its last axis into ``out``."""
    if x.size == 0:
        return
    cols = x.shape[-1]
    x2, o2 = x.reshape(-1, cols), out.reshape(-1, cols)
    jit = _loops()
    if x.dtype == _F32:
        _run(jit.softmax32, jit.softmax32_parallel, SOFTMAX_PARALLEL_MIN, x2, o2)
    else:
        jit.softmax(x2, o2)
