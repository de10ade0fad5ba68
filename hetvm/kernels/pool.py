"""Pooling kernels (NCHW): max/avg with padding, dilation, ceil_mode; adaptive avg.

Why folds: reducing a (N, C, OH, OW, KH, KW) window view over its last two
axes makes NumPy walk a 6-D strided iterator with a KH*KW inner loop -- tens
of milliseconds for one ResNet pool. Instead the window is folded with one
ufunc call (``maximum`` / ``add`` with ``out=``) per window row and per window
column. Why flat: a ufunc over a strided view of short image rows (7-112
items) pays ~30 ns a row on top of the work, 2-4x the cost of one contiguous
loop over the same items, so the folds run over whole flattened tensors where
every tap is a fixed offset (``_fold_flat`` for stride 1, ``_fold_strided``
otherwise), and the few windows at the edges, whose taps would read a
neighbouring row or image, are folded separately (``_fold_axis``).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from . import codegen_cuda_window, pool_direct
from .common import as_ints, store
from .registry import register_kernel
from .scratch import scratch
from .views import padded


def _check_layout(attrs: dict, op: str) -> None:
    if attrs.get("layout", "NCHW") != "NCHW" or attrs.get("out_layout") not in (None, "NCHW"):
        raise ValueError(f"{op} kernel supports the NCHW layout only")


def _geometry(attrs: dict, x: Any, out: Any, op: str):
    """Kernel, strides, dilation, padding, and the extra bottom/right padding that
    ``ceil_mode`` windows may reach past the explicit padding."""
    k = as_ints(attrs.get("pool_size", (1, 1)))
    s = as_ints(attrs.get("strides", (1, 1)))
    d = as_ints(attrs.get("dilation", (1, 1)))
    pt, pl, pb, pr = as_ints(attrs.get("padding", (0, 0, 0, 0)))
    oh, ow = out.shape[2], out.shape[3]
    h, w = x.shape[2], x.shape[3]
    if oh < 1 or ow < 1 or tuple(out.shape[:2]) != tuple(x.shape[:2]):
        raise ValueError(f"{op}: output {tuple(out.shape)} does not match input {tuple(x.shape)}")
    need_h = (oh - 1) * s[0] + (k[0] - 1) * d[0] + 1
    need_w = (ow - 1) * s[1] + (k[1] - 1) * d[1] + 1
    extra_h = max(0, need_h - (h + pt + pb))
    extra_w = max(0, need_w - (w + pl + pr))
    return k, s, d, (pt, pl, pb + extra_h, pr + extra_w)


def _lowest(dtype: Any) -> Any:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return -np.inf
    if dt.kind == "b":
        return False
    return np.iinfo(dt).min


def _tap_span(out_len: int, tap: int, stride: int, size: int) -> tuple[int, int]:
    """Output positions [lo, hi) whose input ``o * stride + tap`` lies in [0, size)."""
    lo = max(0, -(tap // stride)) if tap < 0 else 0
    hi = min(out_len, (size - 1 - tap) // stride + 1) if tap < size else 0
    return lo, max(lo, hi)


def _fold_axis(xp: Any, ufunc: Any, x: Any, acc: Any, axis: int, k: int, s: int, d: int, pad: int,
               identity: Any) -> None:  # fmt: skip
    """``acc = ufunc over taps`` along ``axis`` (2 or 3) without a padded copy:
    each tap updates only the output positions whose input cell exists (padding
    is ``identity``: the lowest value for ``maximum``, 0 for ``add``). The first
    two taps that cover every position initialise ``acc`` in one call (one pass
    fewer than a copy and a fold: strided passes are what these folds cost); with
    one such tap it is copied, with none ``acc`` starts at ``identity``."""
    size, out_len = x.shape[axis], acc.shape[axis]
    spans = [(i * d - pad, *_tap_span(out_len, i * d - pad, s, size)) for i in range(k)]
    full = [t for t in spans if t[1] == 0 and t[2] == out_len][:2]

    def sl(arr, start, stop, step=1):
        index = [slice(None)] * 4
        index[axis] = slice(start, stop, step)
        return arr[tuple(index)]

    def whole(tap):
        return sl(x, tap[0], (out_len - 1) * s + tap[0] + 1, s)

    if len(full) == 2:
        ufunc(whole(full[0]), whole(full[1]), out=acc)
    elif full:
        acc[...] = whole(full[0])
    else:
        acc[...] = identity
    for tap in spans:
        off, lo, hi = tap
        if tap in full or hi <= lo:
            continue
        dst = sl(acc, lo, hi)
        ufunc(dst, sl(x, lo * s + off, (hi - 1) * s + off + 1, s), out=dst)


# input bytes pooled at once (a block of whole (image, channel) planes), so a
# block's input and its flat temporaries stay in cache between the passes
_POOL_BLOCK_BYTES = 1 << 22


def _interior(out_len: int, k: int, s: int, d: int, pad: int, size: int) -> tuple[int, int]:
    """Output positions [a, b) whose whole window lies in [0, size) of the input."""
    a = min(out_len, -(-pad // s))
    b = min(out_len, (size - 1 - (k - 1) * d + pad) // s + 1)
    return a, max(a, b)


def _fold_taps(ufunc: Any, src: Any, dst: Any, k: int, step: int) -> None:
    """``dst[t] = ufunc over i < k of src[t + i*step]`` for every t of the 1-D ``dst``
    (``k >= 2``; ``src`` reaches ``len(dst) + (k-1)*step``): one contiguous loop a tap."""
    m = dst.shape[0]
    ufunc(src[:m], src[step : step + m], out=dst)
    for i in range(2, k):
        ufunc(dst, src[i * step : i * step + m], out=dst)


def _subsample_columns(xp: Any, g: Any, out: Any, s: int) -> None:
    """``out (R, OW) = g (R, pitch)[:, ::s]``. Stride 2 on items of 1, 2 or 4 bytes
    reads each pair of items as one twice-as-wide unsigned integer and casts it
    down, which keeps the first item of the pair on a little-endian machine: one
    contiguous loop, 2-3x faster than NumPy's strided copy."""
    rows, ow = out.shape
    size = g.dtype.itemsize
    if s == 2 and size <= 4 and np.little_endian and out.flags.c_contiguous:
        pairs = g.reshape(-1).view(f"u{2 * size}").reshape(rows, -1)[:, :ow]
        xp.copyto(out.view(f"u{size}"), pairs, casting="unsafe")
    else:
        out[...] = g[:, : (ow - 1) * s + 1 : s]


def _fold_strided(xp: Any, ufunc: Any, identity: Any, x: Any, out: Any, k, s, d, pads) -> None:
    """Strided pooling of the unpadded input, a block of (image, channel) planes
    at a time. NumPy's loops over short image rows are what strided views cost
    (30 ns a row on top of the work), so each pass runs over whole flattened
    blocks instead, at input resolution, and results are subsampled afterwards:

    1. window rows: every tap is a fixed offset ``i*d0*W`` in the flat block
       (a few rows more work than needed, but contiguous); the output rows
       whose window lies inside the input are copied out into ``R`` (B, OH,
       pitch) whose rows carry the left and right padding as ``identity``
       columns, the others (in the top/bottom padding) are folded directly;
    2. window columns: the same over ``R`` flattened, taps ``j*d1`` apart, then
       every ``s1``-th column is kept (``_subsample_columns``); the last output
       columns whose taps would run past ``pitch`` (into the next row) are
       folded directly from ``R``.

    Inception's 3x3/2 stem pool: 0.21 ms instead of 0.38."""
    n, c, h, w = x.shape
    oh, ow = out.shape[2], out.shape[3]
    pt, pl = pads[0], pads[1]
    planes = n * c
    x3 = xp.ascontiguousarray(x).reshape(planes, h, w)
    dst = out if out.flags.c_contiguous else xp.empty(out.shape, dtype=out.dtype)
    out3 = dst.reshape(planes, oh, ow)
    # R's row: padded columns [0, pitch): at least every output's first tap, and
    # every input column some window reads; a multiple of s1 so that output
    # column q is R column q*s1 of the same flat row
    needed = (ow - 1) * s[1] + (k[1] - 1) * d[1] + 1
    pitch = -(-max(ow * s[1], min(needed, pl + w)) // s[1]) * s[1]
    lo_c, hi_c = min(pl, pitch), min(pl + w, pitch)
    a0, b0 = _interior(oh, k[0], s[0], d[0], pt, h)
    b1 = min(ow, max(0, (pitch - 1 - (k[1] - 1) * d[1]) // s[1] + 1))  # columns inside R's row
    block = max(1, min(planes, _POOL_BLOCK_BYTES // max(1, h * w * x.dtype.itemsize)))
    rows_buf = scratch(xp, "rows", (block, oh, pitch), out.dtype)
    flat_buf = scratch(xp, "acc", (max(block * h * w, block * oh * pitch),), out.dtype)
    for p0 in range(0, planes, block):
        p1 = min(planes, p0 + block)
        nb = p1 - p0
        xb = x3[p0:p1]
        r = rows_buf[:nb]
        r[:, :, :lo_c] = identity
        r[:, :, hi_c:] = identity
        data = r[:, :, lo_c:hi_c]
        if b0 > a0:  # window rows inside the input: flat fold, then every s0-th row
            if k[0] > 1:
                f = flat_buf[: nb * h * w]
                _fold_taps(ufunc, xb.reshape(-1), f[: nb * h * w - (k[0] - 1) * d[0] * w], k[0], d[0] * w)
                f = f.reshape(nb, h, w)
            else:
                f = xb
            first = a0 * s[0] - pt
            data[:, a0:b0] = f[:, first : first + (b0 - a0 - 1) * s[0] + 1 : s[0], : hi_c - lo_c]
        for o0, o1 in ((0, a0), (b0, oh)):  # windows reaching into the top/bottom padding
            if o1 > o0:
                _fold_axis(xp, ufunc, xb[None, :, :, : hi_c - lo_c], data[None, :, o0:o1], 2,
                           k[0], s[0], d[0], pt - o0 * s[0], identity)  # fmt: skip
        ob = out3[p0:p1]
        if k[1] > 1:
            g = flat_buf[: nb * oh * pitch]
            _fold_taps(ufunc, r.reshape(-1), g[: nb * oh * pitch - (k[1] - 1) * d[1]], k[1], d[1])
        else:
            g = r.reshape(-1)
        _subsample_columns(xp, g.reshape(nb * oh, pitch), ob.reshape(nb * oh, ow), s[1])
        if b1 < ow:  # taps past the row's end read the next row in the flat fold
            _fold_axis(xp, ufunc, r[None], ob[None, :, :, b1:], 3, k[1], s[1], d[1], -b1 * s[1], identity)
    if dst is not out:
        store(out, dst)


def _fold_flat(xp: Any, ufunc: Any, x: Any, k, d, divisor: Any = None) -> Any:
    """Stride 1: the same folds over the whole padded tensor ``x`` flattened to
    one row, so every ufunc call is one long contiguous loop (a tap is a fixed
    offset). Windows that run past an image's right or bottom edge land only on
    positions outside (OH, OW), which the caller crops from the returned
    (N, C, HP, WP) array. ``divisor`` (HP*WP values, or a scalar) divides the
    result before it is returned. About 2x faster than folds of strided views on
    Inception's 14x14 "same" pools, whose rows are too short for NumPy's loops."""
    n, c, hp, wp = x.shape
    flat = xp.ascontiguousarray(x).reshape(-1)
    rows_len = flat.size - (k[0] - 1) * d[0] * wp
    rows = flat[:rows_len]
    if k[0] > 1:
        rows = scratch(xp, "rows", (rows_len,), flat.dtype)
        ufunc(flat[:rows_len], flat[d[0] * wp : d[0] * wp + rows_len], out=rows)
        for i in range(2, k[0]):
            ufunc(rows, flat[i * d[0] * wp : i * d[0] * wp + rows_len], out=rows)
    acc_len = rows_len - (k[1] - 1) * d[1]
    full = scratch(xp, "acc", (flat.size,), flat.dtype)
    acc = full[:acc_len]
    if k[1] > 1:
        ufunc(rows[:acc_len], rows[d[1] : d[1] + acc_len], out=acc)
        for j in range(2, k[1]):
            ufunc(acc, rows[j * d[1] : j * d[1] + acc_len], out=acc)
    else:
        acc[...] = rows[:acc_len]
    if divisor is not None:
        images = full.reshape(n * c, hp * wp)
        xp.true_divide(images, divisor, out=images)
    return full.reshape(n, c, hp, wp)


def _whole_input(x: Any, out: Any, k, d, pads) -> bool:
    """One window that is exactly the input (Inception's final 7x7 average):
    one reduction over each image's H*W items, 2x faster than the folds."""
    return out.shape[2:] == (1, 1) and tuple(k) == tuple(x.shape[2:]) and d == (1, 1) and not any(pads)


@register_kernel("nn.max_pool2d")
def max_pool2d(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    """Padding (and ceil_mode's overhang) is the dtype's lowest value, so it never
    wins; a window wholly in padding gives that value (-inf for floats)."""
    _check_layout(attrs, "nn.max_pool2d")
    k, s, d, pads = _geometry(attrs, x, out, "nn.max_pool2d")
    if _whole_input(x, out, k, d, pads):
        store(out, x.max(axis=(2, 3), keepdims=True))
    elif pool_direct.applies(xp, x, out):
        pool_direct.run(x, out, k, s, d, pads, True)
    elif codegen_cuda_window.pool(xp, attrs, x, out, is_max=True):
        return
    elif s == (1, 1):
        xpad = padded(xp, x, pads, _lowest(x.dtype))
        store(out, _fold_flat(xp, xp.maximum, xpad, k, d)[:, :, : out.shape[2], : out.shape[3]])
    else:
        _fold_strided(xp, xp.maximum, _lowest(x.dtype), x, out, k, s, d, pads)


def _counts(out_len: int, k: int, s: int, d: int, lo: int, hi: int) -> Any:
    """Per output position along one axis: how many of the window's cells lie in
    [lo, hi) of the padded axis (the cells that count towards the average)."""
    starts = np.arange(out_len)[:, None] * s + np.arange(k)[None, :] * d
    return ((starts >= lo) & (starts < hi)).sum(axis=1)


@register_kernel("nn.avg_pool2d")
def avg_pool2d(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    """Sum of taps divided by the count of cells that count: the input cells, or
    with ``count_include_pad`` also the explicit padding (never ceil_mode's
    overhang). The count is separable -- rows times columns -- so it costs
    O(OH + OW) host work."""
    _check_layout(attrs, "nn.avg_pool2d")
    k, s, d, pads = _geometry(attrs, x, out, "nn.avg_pool2d")
    acc_dtype = np.float64 if x.dtype == np.float64 else np.float32
    xa = x if x.dtype == acc_dtype else x.astype(acc_dtype)
    oh, ow = out.shape[2], out.shape[3]
    if _whole_input(x, out, k, d, pads):
        n, c, h, w = x.shape
        total = x.reshape(n, c, h * w).sum(axis=2, dtype=acc_dtype, keepdims=True)
        store(out, (total / acc_dtype(h * w)).reshape(out.shape).astype(out.dtype, copy=False))
        return
    if codegen_cuda_window.pool(xp, attrs, x, out, is_max=False):
        return
    geometry = (x.shape[2], x.shape[3], oh, ow, k, s, d, as_ints(attrs.get("padding", (0, 0, 0, 0))),
                bool(attrs.get("count_include_pad", False)), acc_dtype)  # fmt: skip
    count = _count_map(*geometry)
    if pool_direct.applies(xp, x, out):
        pool_direct.run(x, out, k, s, d, pads, False, count=count)
        return
    uniform = count.min() == count.max()  # no border effects: one scalar division
    if s == (1, 1):
        xpad = padded(xp, xa, pads)
        if uniform:
            divisor = acc_dtype(count.flat[0])
        else:
            divisor = xp.asarray(_count_grid(geometry, xpad.shape[2], xpad.shape[3]))
        store(out, _fold_flat(xp, xp.add, xpad, k, d, divisor)[:, :, :oh, :ow])
        return
    acc = out if out.dtype == acc_dtype and out.flags.c_contiguous else xp.empty(out.shape, dtype=acc_dtype)
    _fold_strided(xp, xp.add, 0, xa, acc, k, s, d, pads)  # padding adds nothing
    xp.true_divide(acc, acc_dtype(count.flat[0]) if uniform else xp.asarray(count), out=acc)
    if acc is not out:
        store(out, acc.astype(out.dtype))


@functools.lru_cache(maxsize=256)
def _count_map(h: int, w: int, oh: int, ow: int, k, s, d, pads, include_pad: bool, dtype: Any) -> Any:
    """(OH, OW) cells per window that count towards the average (read-only;
    cached: models repeat a few pool geometries on every call)."""
    pt, pl, pb, pr = pads
    if include_pad:
        ch = _counts(oh, k[0], s[0], d[0], 0, h + pt + pb)
        cw = _counts(ow, k[1], s[1], d[1], 0, w + pl + pr)
    else:
        ch = _counts(oh, k[0], s[0], d[0], pt, pt + h)
        cw = _counts(ow, k[1], s[1], d[1], pl, pl + w)
    count = np.maximum(ch[:, None] * cw[None, :], 1).astype(dtype)
    count.flags.writeable = False
    return count


@functools.lru_cache(maxsize=256)
def _count_grid(geometry: tuple, hp: int, wp: int) -> Any:
    """The count map on the padded (HP, WP) grid, flattened, ones outside
    (OH, OW): ``_fold_flat`` divides on that grid before cropping."""
    count = _count_map(*geometry)
    grid = np.ones((hp, wp), dtype=count.dtype)
    grid[: count.shape[0], : count.shape[1]] = count
    grid = grid.reshape(-1)
    grid.flags.writeable = False
    return grid


@register_kernel("nn.adaptive_avg_pool2d")
def adaptive_avg_pool2d(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    """Bins [floor(i*H/OH), ceil((i+1)*H/OH)). Global pooling is one mean; bins
    that tile the input evenly are one reshape and one mean; otherwise rows then
    columns are averaged (separable: O(OH + OW) slices)."""
    _check_layout(attrs, "nn.adaptive_avg_pool2d")
    n, c, h, w = x.shape
    oh, ow = out.shape[2], out.shape[3]
    acc = xp.float64 if x.dtype == xp.float64 else xp.float32
    if h % oh == 0 and w % ow == 0:
        tiles = x.reshape(n, c, oh, h // oh, ow, w // ow)
        store(out, tiles.mean(axis=(3, 5), dtype=acc).astype(out.dtype, copy=False))
        return
    rows = xp.empty(x.shape[:2] + (oh, w), dtype=acc)
    for i in range(oh):
        a, b = (i * h) // oh, math.ceil((i + 1) * h / oh)
        rows[:, :, i, :] = x[:, :, a:b, :].mean(axis=2, dtype=acc)
    res = xp.empty(x.shape[:2] + (oh, ow), dtype=acc)
    for j in range(ow):
        a, b = (j * w) // ow, math.ceil((j + 1) * w / ow)
        res[:, :, :, j] = rows[:, :, :, a:b].mean(axis=3, dtype=acc)
    store(out, res.astype(out.dtype, copy=False))


def pool_direct_max(xp: Any, attrs: dict, x: Any, bias: Any, out: Any, relu: bool) -> bool:
    """``out = act(max_pool(x) + bias)`` in one direct kernel where one covers the
    call (see ``pool_direct``); False, with nothing written, where none does."""
    attrs = {key: v for key, v in attrs.items() if key != "activation"}
    _check_layout(attrs, "nn.max_pool2d")
    k, s, d, pads = _geometry(attrs, x, out, "nn.max_pool2d")
    if not pool_direct.applies(xp, x, out, bias):
        return False
    pool_direct.run(x, out, k, s, d, pads, True, bias, relu)
    return True
