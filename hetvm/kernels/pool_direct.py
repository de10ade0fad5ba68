"""Max and average pooling as direct Numba loops (``_pool_jit``), bias and
ReLU fused into max pooling.

Why: the NumPy folds (``pool.py``) make one ufunc pass over the tensor per
window row and column plus passes for the edges, the bias and the ReLU; the
direct loop folds every tap of a plane while it is in cache and stores once.
Measured one thread, CPU time, float32, NumPy folds / direct: max 3x3/2 with
bias and ReLU 64x112x112 1061 / 390 us, 192x56x56 790 / 229, 24x112x112
302 / 130; average 3x3/2 136x28x28 118 / 53, 24x56x56 82 / 34; average 3x3/1
256x28x28 382 / 145.

Taken where Numba is available and on (``HETVM_NUMBA`` not ``0``), the arrays
are NumPy's, 4-D and all float32 or all float64; other dtypes keep the folds.
NaN propagates through max as with ``maximum``; padding is the lowest value
for max and is not counted by the average, exactly as in the folds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import codegen_numba

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _loops() -> Any:
    return codegen_numba.package_module("_pool_jit")


def precompile(dtype: str, is_max: bool) -> int:
    """Compiles (or loads from the disk cache) the loop for ``dtype`` (float32
    or float64) with the argument types :func:`run` passes for max pooling or
    for the average (whose count map is ``pool``'s read-only cached one), ahead
    of a run. Returns how many it compiled (1)."""
    nb = codegen_numba._numba
    elem = nb.from_dtype(np.dtype(dtype))
    a4, a1 = nb.types.Array(elem, 4, "C"), nb.types.Array(elem, 1, "C")
    count = nb.types.Array(elem, 2, "C", readonly=not is_max)
    ints = [nb.types.int64] * 10
    _loops().pool.compile((a4, a4, *ints, nb.types.boolean, nb.types.float64, a1, nb.types.boolean, count))
    return 1


def applies(xp: Any, x: Any, out: Any, bias: Any = None) -> bool:
    """NumPy 4-D arrays of one float dtype (and a bias of it), Numba on."""
    if (
        xp is not np
        or x.ndim != 4
        or out.ndim != 4
        or x.dtype not in _FLOATS
        or out.dtype != x.dtype
    ):
        return False
    if bias is not None and (bias.dtype != x.dtype or bias.shape != (x.shape[1],)):
        return False
    return codegen_numba.available()


def run(x: Any, out: Any, kernel: tuple[int, int], strides: tuple[int, int], dilation: tuple[int, int],
        pads: tuple[int, int, int, int], is_max: bool, bias: Any = None, relu: bool = False,
        count: Any = None) -> None:  # fmt: skip
    """Pools ``x`` into ``out``; ``pads`` include ceil_mode's overhang (see
    ``pool._geometry``), ``count`` is the average's (OH, OW) divisor map."""
    if out.size == 0:
        return
    n, c, h, w = x.shape
    pt, pl, pb, pr = pads
    hp = pt + h + pb
    wp = -(-(pl + w + pr) // strides[1]) * strides[1]  # a multiple of the stride: see _pool_jit
    fill = -np.inf if is_max else 0.0
    empty = np.zeros(0, x.dtype)
    b = np.ascontiguousarray(bias) if bias is not None else empty
    cnt = (
        np.ascontiguousarray(count, dtype=x.dtype)
        if count is not None
        else np.zeros((0, 0), x.dtype)
    )
    dst = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
    _loops().pool(np.ascontiguousarray(x), dst, kernel[0], kernel[1], strides[0], strides[1], dilation[0],
                  dilation[1], pt, pl, hp, wp, is_max, fill, b, bool(relu), cnt)  # fmt: skip
    if dst is not out:
        out[...] = dst
