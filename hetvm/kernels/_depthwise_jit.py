"""Numba loops of the direct depthwise convolution (imported only with Numba).

Kept apart from :mod:`.depthwise_direct` so that importing hetvm never imports
Numba; it is imported from its copy in the kernel cache directory
(``codegen_numba.package_module``), so ``cache=True`` keeps the machine code
there across runs, and ``hetvm.build`` compiles (or loads) the loops a
program takes (``backend/direct_kernels.py``).

Per (image, output channel): the input channel is copied into a padded plane
(zero borders), flattened with the padded width ``WP`` as its row pitch, so
every tap is one fixed offset and its contribution one long contiguous
multiply-add over the whole plane (stride 1: ``acc[p] += w * pad[p + off]``
for all ``OH * WP`` positions); strided layers run it per output row,
reading every s-th item. A last pass crops the padded width, adds the bias
and applies the activation while the plane is in cache. Padding is a zero of
the plane, as in the NumPy path's columns. The loops index slices from 0 with
their range variable: an index Numba cannot prove non-negative gets a
wraparound check that stops LLVM vectorising (measured 2x slower).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, inline="always")
def _axpy(dst, a, src):  # pragma: no cover - jitted
    for i in range(dst.shape[0]):
        dst[i] += a * src[i]


@numba.njit(cache=True, nogil=True, inline="always")
def _axpy2(dst, a, src):  # pragma: no cover - jitted
    for i in range(dst.shape[0]):
        dst[i] += a * src[2 * i]


@numba.njit(cache=True, nogil=True, inline="always")
def _copy(dst, src):  # pragma: no cover - jitted
    for i in range(dst.shape[0]):
        dst[i] = src[i]


@numba.njit(cache=True, nogil=True, inline="always")
def _fill(dst, value):  # pragma: no cover - jitted
    for i in range(dst.shape[0]):
        dst[i] = value


@numba.njit(cache=True, nogil=True, inline="always")
def _store(dst, src, start, relu):  # pragma: no cover - jitted
    for i in range(dst.shape[0]):
        v = src[i] + start
        if relu and v < 0:  # NaN stays NaN, as with maximum
            v = 0
        dst[i] = v


@numba.njit(cache=True, nogil=True, inline="always")
def _plane(
    x, w, bias, out, n, oc, ic, s0, s1, d0, d1, pt, pl, wp, has_bias, relu, pad, acc
):  # pragma: no cover
    """One output channel of one image; ``pad``'s borders are zero already
    (its interior is overwritten here, the borders never)."""
    h, wd = x.shape[2], x.shape[3]
    kh, kw = w.shape[1], w.shape[2]
    oh, ow = out.shape[2], out.shape[3]
    for iy in range(h):
        at = (pt + iy) * wp + pl
        _copy(pad[at : at + wd], x[n, ic, iy])
    _fill(acc, 0)
    if s0 == 1 and s1 == 1:
        length = oh * wp - (wp - ow)  # the last row needs only OW positions
        for ky in range(kh):
            for kx in range(kw):
                off = ky * d0 * wp + kx * d1
                _axpy(acc[:length], w[oc, ky, kx], pad[off : off + length])
    else:
        for oy in range(oh):
            row = acc[oy * wp : oy * wp + ow]
            for ky in range(kh):
                for kx in range(kw):
                    off = (oy * s0 + ky * d0) * wp + kx * d1
                    if s1 == 2:  # a constant stride LLVM vectorises
                        _axpy2(row, w[oc, ky, kx], pad[off : off + 2 * ow - 1])
                    else:
                        _axpy(row, w[oc, ky, kx], pad[off : off + (ow - 1) * s1 + 1 : s1])
    start = bias[oc] if has_bias else out.dtype.type(0)
    for oy in range(oh):
        _store(out[n, oc, oy], acc[oy * wp : oy * wp + ow], start, relu)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def serial(
    x, w, bias, out, mult, s0, s1, d0, d1, pt, pl, hp, wp, has_bias, relu
):  # pragma: no cover - jitted
    """Every (image, output channel) in turn; output channel ``oc`` reads input
    channel ``oc // mult``."""
    pad = np.zeros(hp * wp, x.dtype)
    acc = np.empty(out.shape[2] * wp, out.dtype)
    for n in range(out.shape[0]):
        for oc in range(out.shape[1]):
            _plane(
                x,
                w,
                bias,
                out,
                n,
                oc,
                oc // mult,
                s0,
                s1,
                d0,
                d1,
                pt,
                pl,
                wp,
                has_bias,
                relu,
                pad,
                acc,
            )


@numba.njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def parallel(
    x, w, bias, out, mult, s0, s1, d0, d1, pt, pl, hp, wp, has_bias, relu
):  # pragma: no cover - jitted
    """As :func:`serial`, the (image, channel) planes split over Numba's threads."""
    channels = out.shape[1]
    for job in numba.prange(out.shape[0] * channels):
        pad = np.zeros(hp * wp, x.dtype)
        acc = np.empty(out.shape[2] * wp, out.dtype)
        n, oc = job // channels, job % channels
        _plane(
            x, w, bias, out, n, oc, oc // mult, s0, s1, d0, d1, pt, pl, wp, has_bias, relu, pad, acc
        )
