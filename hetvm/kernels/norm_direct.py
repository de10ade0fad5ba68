"""Layer normalisation and softmax over the trailing axes as direct Numba loops
(``_norm_jit``), one call over the rows instead of NumPy's passes.

Why: on a transformer's small rows (the exported corpus: (1, 8, 32), (2, 9,
64)) the NumPy kernels spend most of their time in ufunc and reduction call
overhead -- layer norm makes seven passes (two sums, a subtract, a square, a
sqrt, the scale and shift), softmax four plus a max -- not in arithmetic. The
loop reads a row while it is in cache and stores once. Sums run in float64, so
float32 results can differ from NumPy's float32 sums in the last bits.
Measured one thread, CPU time, float32, last axis, NumPy / direct (whole
kernel call): layer norm (1, 8, 32) 9.3 / 4.2 us, (2, 9, 64) 11.1 / 6.3,
(1, 4, 32, 32) 19.8 / 13.9; softmax 7.6 / 2.5, 9.9 / 6.6, 24.6 / 20.2. From
about 50,000 elements NumPy's SIMD passes win (the loop's float64 sums and
scalar libm exp do not vectorise without SVML): (1, 12, 64, 64) layer norm
99 / 118 us, softmax 144 / 221 -- so the loop is taken up to :data:`SMALL`
elements only.

Taken where Numba is available and on (``HETVM_NUMBA`` not ``0``), the arrays
are NumPy's, ``x`` and ``out`` of one dtype, float32 or float64, both
C-contiguous, at most :data:`SMALL` elements, and the normalised axes are the trailing ones in order (layer
norm; ``gamma`` / ``beta`` of x's dtype and one value per normalised item) or
the last axis (softmax). Everything else -- float16, integer outputs, strided
inputs, other axes -- keeps the NumPy kernels, which stay the reference.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import codegen_numba

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
#: the most elements the loops are taken for (see the module doc's figures)
SMALL = 4096


def _loops() -> Any:
    return codegen_numba.package_module("_norm_jit")


def precompile(dtype: str, kind: str) -> int:
    """Compiles (or loads from the disk cache) the ``"layer_norm"`` or
    ``"softmax"`` loop for ``dtype`` (float32 or float64) with the argument
    types :func:`layer_norm` / :func:`softmax` pass, ahead of a run. Returns
    how many it compiled (1)."""
    nb = codegen_numba._numba
    elem = nb.from_dtype(np.dtype(dtype))
    a2 = nb.types.Array(elem, 2, "C")
    if kind == "softmax":
        _loops().softmax.compile((a2, a2))
    else:
        a1 = nb.types.Array(elem, 1, "C")
        _loops().layer_norm.compile((a2, a1, a1, nb.types.float64, a2))
    return 1


def _rows(xp: Any, x: Any, out: Any) -> bool:
    """Small NumPy arrays of one float dtype, both C-contiguous, Numba on."""
    return (
        xp is np
        and x.size <= SMALL
        and x.dtype in _FLOATS
        and out.dtype == x.dtype
        and x.shape == out.shape
        and x.flags.c_contiguous
        and out.flags.c_contiguous
        and codegen_numba.available()
    )


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
    empty = np.zeros(0, x.dtype)
    g = np.ascontiguousarray(gamma).reshape(cols) if scale else empty
    b = np.ascontiguousarray(beta).reshape(cols) if center else empty
    _loops().layer_norm(x.reshape(-1, cols), g, b, float(eps), out.reshape(-1, cols))


def softmax_applies(xp: Any, x: Any, out: Any, axis: int) -> bool:
    """Whether :func:`softmax` covers the call: the last axis, see :func:`_rows`."""
    return x.ndim > 0 and axis % x.ndim == x.ndim - 1 and _rows(xp, x, out)


def softmax(x: Any, out: Any) -> None:
    """Softmax of ``x`` over its last axis into ``out``."""
    if x.size == 0:
        return
    cols = x.shape[-1]
    _loops().softmax(x.reshape(-1, cols), out.reshape(-1, cols))
