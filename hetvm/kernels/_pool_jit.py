"""Numba loops of max and average pooling (imported only with Numba, from its
copy in the kernel cache directory: see ``_depthwise_jit``).

Per (image, channel) plane, as in ``_depthwise_jit``: the plane is copied into
a padded plane whose borders hold the fold's identity (the lowest value for
max, zero for the sum), flattened with the padded width as its row pitch. The
window is folded separably -- KW column taps, then KH row taps, instead of
KH*KW -- and each fold is one long loop over the whole flattened plane: the
column fold reads every s-th item (stride 2 as a constant stride LLVM
vectorises) into rows of pitch ``WP / s``, so the row fold's taps are fixed
offsets on that grid. Folding per output row instead (loops of OW items)
lost to NumPy's folds on 56x56 maps and smaller (short loops' overhead). The final store adds a bias and applies ReLU (max) or
divides by the window's count (average) while the plane is in cache.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, inline="always")
def _fold(dst, src, step, is_max):  # pragma: no cover - jitted
    """``dst[i] = max(dst[i], src[i * step])`` (NaN wins, as with ``maximum``) or ``+=``."""
    if is_max:
        if step == 1:
            for i in range(dst.shape[0]):
                v = src[i]
                if v > dst[i] or v != v:
                    dst[i] = v
        elif step == 2:
            for i in range(dst.shape[0]):
                v = src[2 * i]
                if v > dst[i] or v != v:
                    dst[i] = v
        else:
            for i in range(dst.shape[0]):
                v = src[i * step]
                if v > dst[i] or v != v:
                    dst[i] = v
    elif step == 1:
        for i in range(dst.shape[0]):
            dst[i] += src[i]
    elif step == 2:
        for i in range(dst.shape[0]):
            dst[i] += src[2 * i]
    else:
        for i in range(dst.shape[0]):
            dst[i] += src[i * step]


@numba.njit(cache=True, nogil=True, inline="always")
def _first(dst, src, step):  # pragma: no cover - jitted
    if step == 1:
        for i in range(dst.shape[0]):
            dst[i] = src[i]
    elif step == 2:
        for i in range(dst.shape[0]):
            dst[i] = src[2 * i]
    else:
        for i in range(dst.shape[0]):
            dst[i] = src[i * step]


@numba.njit(cache=True, nogil=True, inline="always")
def _copy(dst, src):  # pragma: no cover - jitted
    for i in range(dst.shape[0]):
        dst[i] = src[i]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def pool(
    x, out, kh, kw, s0, s1, d0, d1, pt, pl, hp, wp, is_max, fill, bias, relu, count
):  # pragma: no cover
    """Every (image, channel) plane in turn. ``wp`` is a multiple of ``s1``.
    ``bias`` (one per channel, or empty) and ``relu`` apply to max; ``count``
    ((OH, OW), or empty) divides the sums."""
    n_, c_, h, wd = x.shape
    oh, ow = out.shape[2], out.shape[3]
    wq = wp // s1  # the pitch of the column folds: padded row r, output column q at r * wq + q
    pitch = s0 * wq  # the pitch of the row folds: output row oy at oy * pitch
    pad = np.full(hp * wp, fill, x.dtype)
    hlen = (hp - 1) * wq + ow  # the last padded row needs only OW columns
    hbuf = np.empty(hlen, out.dtype)
    vlen = (oh - 1) * pitch + ow
    acc = np.empty(vlen, out.dtype)
    has_bias = bias.shape[0] > 0
    has_count = count.shape[0] > 0
    for n in range(n_):
        for c in range(c_):
            for iy in range(h):
                at = (pt + iy) * wp + pl
                _copy(pad[at : at + wd], x[n, c, iy])
            # columns: hbuf[r * wq + q] = fold over kx of pad[r * wp + q * s1 + kx * d1]
            _first(hbuf, pad, s1)
            for kx in range(1, kw):
                _fold(hbuf, pad[kx * d1 :], s1, is_max)
            # rows: acc[oy * pitch + q] = fold over ky of hbuf[(oy * s0 + ky * d0) * wq + q]
            _copy(acc, hbuf)
            for ky in range(1, kh):
                _fold(acc, hbuf[ky * d0 * wq :], 1, is_max)
            b = bias[c] if has_bias else out.dtype.type(0)
            for oy in range(oh):
                dst = out[n, c, oy]
                src = acc[oy * pitch : oy * pitch + ow]
                for ox in range(ow):
                    v = src[ox]
                    if has_count:
                        v = v / count[oy, ox]
                    elif has_bias:
                        v = v + b
                    if relu and v < 0:  # NaN stays NaN
                        v = 0
                    dst[ox] = v
