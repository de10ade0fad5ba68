"""Numba loops of layer normalisation and softmax over rows (imported only with
Numba, from its copy in the kernel cache directory: see ``_depthwise_jit``):
see :mod:`.norm_direct`."""

from __future__ import annotations

import math

import numba


@numba.njit(cache=True, nogil=True, error_model="numpy")
def layer_norm(x, gamma, beta, eps, out):  # pragma: no cover - jitted
    """Each row of (R, C) ``x`` centred, divided by sqrt(mean square + eps) and
    scaled / shifted by ``gamma`` / ``beta`` (an empty one is skipped), into
    ``out``. Sums in float64, two passes (centre first: no cancellation)."""
    cols = x.shape[1]
    scale = gamma.shape[0] > 0
    center = beta.shape[0] > 0
    for r in range(x.shape[0]):
        row = x[r]
        dst = out[r]
        total = 0.0
        for i in range(cols):
            total += row[i]
        mean = total / cols
        squares = 0.0
        for i in range(cols):
            d = row[i] - mean
            squares += d * d
        inv = 1.0 / math.sqrt(squares / cols + eps)
        for i in range(cols):
            v = (row[i] - mean) * inv
            if scale:
                v = v * gamma[i]
            if center:
                v = v + beta[i]
            dst[i] = v


@numba.njit(cache=True, nogil=True, error_model="numpy")
def softmax(x, out):  # pragma: no cover - jitted
    """Each row of (R, C) ``x`` max-shifted, exponentiated and divided by its sum,
    into ``out``; the exps in x's dtype (as NumPy's), their sum in float64. A NaN anywhere in a row
    makes the whole row NaN, as in the NumPy passes."""
    cols = x.shape[1]
    for r in range(x.shape[0]):
        row = x[r]
        dst = out[r]
        top = row[0]
        for i in range(1, cols):
            v = row[i]
            if v > top or v != v:
                top = v
                if v != v:
                    break
        total = 0.0
        for i in range(cols):
            e = math.exp(row[i] - top)
            dst[i] = e
            total += e
        for i in range(cols):
            dst[i] = dst[i] / total
