"""A convolution's epilogue -- per-channel bias, residual add, ReLU -- as one
Numba pass over the output (``_epilogue_jit``).

Why: the NumPy kernels make a pass per step (``per_channel`` add, ``add`` of the
residual, ``relu_into``), each reading and writing the whole output. Measured
one thread, CPU time, float32, bias + residual + ReLU, NumPy / one pass:
256x56x56 471 / 222 us, 512x28x28 191 / 101, 2048x7x7 53 / 13, 272x14x14
27 / 5. The sums are NumPy's (same order of the adds), so results are equal.

Taken where Numba is available and on (``HETVM_NUMBA`` not ``0``), the output
is a C-contiguous NumPy array of float32 or float64 with at least two
dimensions, and the bias (one per channel) and the residual (the output's
shape) are of its dtype; otherwise the caller's NumPy passes run.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import codegen_numba

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def run(xp: Any, out: Any, bias: Any = None, residual: Any = None, relu: bool = False) -> bool:
    """``out = act(out + bias[c] + residual)`` in place in one pass; False, with
    nothing written, where this kernel does not cover the call."""
    if xp is not np or out.ndim < 2 or out.dtype not in _FLOATS or not out.flags.c_contiguous:
        return False
    if bias is not None and (bias.dtype != out.dtype or bias.shape != (out.shape[1],)):
        return False
    if residual is not None and (residual.dtype != out.dtype or residual.shape != out.shape):
        return False
    if not codegen_numba.available():
        return False
    n, c, p = out.shape[0], out.shape[1], math.prod(out.shape[2:])
    flat = out.reshape(n, c, p)
    empty = np.zeros((0, 0, 0), out.dtype)
    res = np.ascontiguousarray(residual).reshape(n, c, p) if residual is not None else empty
    b = np.ascontiguousarray(bias) if bias is not None else np.zeros(0, out.dtype)
    _loops().bias_add_act(flat, b, res, bool(relu))
    return True


def _loops() -> Any:
    return codegen_numba.package_module("_epilogue_jit")


def precompile(dtype: str) -> int:
    """Compiles (or loads from the disk cache) the pass for ``dtype`` (float32 or
    float64) with the argument types :func:`run` passes, ahead of a run.
    Returns how many it compiled (1)."""
    nb = codegen_numba._numba
    elem = nb.from_dtype(np.dtype(dtype))
    a3 = nb.types.Array(elem, 3, "C")
    _loops().bias_add_act.compile((a3, nb.types.Array(elem, 1, "C"), a3, nb.types.boolean))
    return 1
