"""Depthwise-like convolution (one input channel per group), for ``conv.py``.

A product per group would be a (Og x KH*KW) @ (KH*KW x P) sliver -- one BLAS
call per channel. Instead, per block of channels (``_DEPTHWISE_COLS_BYTES`` of
columns, so they stay in cache), each channel's KH*KW tap windows are copied into
columns and one batched matmul contracts them with the taps: about 2.5x faster
than one broadcast multiply-add per tap (ShuffleNet's 7x7 to 28x28 maps), which
pays a NumPy call per tap and an inner loop per channel row. Two layouts of the
columns:

* ``depthwise_same`` (stride 1, output as wide as the input -- every depthwise
  layer of ShuffleNet or MobileNet): taps are fixed offsets of each flattened
  image between zero margins; no padded copy, no crop, the bias from the product;
* ``depthwise`` (any other geometry): windows of the padded input; at stride 1
  computed on the padded width and cropped, the crop's copy adding the bias.
"""

from __future__ import annotations

from typing import Any

from .scratch import scratch
from .views import flat_with_margins, padded, strided, zero_wrapped

# depthwise columns built at once: small enough to stay in L2 between the copy
# and the product (512 KiB measured best on ShuffleNet's maps, OpenBLAS 1 thread)
_DEPTHWISE_COLS_BYTES = 512 << 10


def depthwise(xp: Any, x: Any, weight: Any, dst: Any, groups: int, strides: tuple[int, int],
              dilation: tuple[int, int], pads: tuple[int, int, int, int], bias: Any = None) -> bool:  # fmt: skip
    """One input channel per group: per block of channels, copy each channel's
    KH*KW tap windows into columns and contract them with the channel's taps in
    one batched product ``(G, Og, K) @ (N, G, K, P)``. At stride 1 a tap's
    window is a contiguous run of the flattened padded image, so the columns are
    built on the padded width (one long copy per tap) and cropped at the end."""
    n, c, h, w = x.shape
    o, _, kh, kw = weight.shape
    _, _, oh, ow = dst.shape
    og, k = o // groups, kh * kw
    pt, pl, pb, pr = pads
    wp = w + pl + pr
    item = x.dtype.itemsize
    taps = weight.reshape(groups, og, k)
    if strides == (1, 1):
        length = oh * wp  # output positions on the padded width
        last = (kh - 1) * dilation[0] * wp + (kw - 1) * dilation[1] + length
        extra = max(0, -(-(last - (h + pt + pb) * wp) // wp))  # rows so the last tap's run fits
        flat = padded(xp, x, (pt, pl, pb + extra, pr), copy=True).reshape(n, groups, -1)
        sn, sc, _ = flat.strides
        view = strided(
            xp, flat, (n, groups, kh, kw, length), strides=(sn, sc, wp * dilation[0] * item, dilation[1] * item, item))
        out = scratch(xp, "acc", (n, groups, og, length), dst.dtype)
    else:
        xpad = xp.ascontiguousarray(padded(xp, x, pads))
        sn, sc, sh, sw = xpad.strides
        length = oh * ow
        view = strided(
            xp, xpad, (n, groups, kh, kw, oh, ow),
            strides=(sn, sc, sh * dilation[0], sw * dilation[1], sh * strides[0], sw * strides[1]))
        out = dst.reshape(n, groups, og, length)  # a view: dst is C-contiguous
    block = max(1, min(groups, _DEPTHWISE_COLS_BYTES // max(1, n * k * length * item)))
    buf = scratch(xp, "cols", (n * block * k * length,), x.dtype)
    for g0 in range(0, groups, block):
        g1 = min(groups, g0 + block)
        windows_ = view[:, g0:g1]
        cols = buf[: windows_.size].reshape(windows_.shape)
        cols[...] = windows_
        xp.matmul(taps[g0:g1], cols.reshape(n, g1 - g0, k, length), out=out[:, g0:g1])
    if strides != (1, 1):
        return False
    cropped = out.reshape(n, o, oh, wp)[..., :ow]
    if bias is None:
        dst[...] = cropped
        return False
    xp.add(cropped, bias.reshape(1, o, 1, 1), out=dst)  # the crop's copy adds the bias
    return True


def depthwise_same(xp: Any, x: Any, weight: Any, dst: Any, groups: int, dilation: tuple[int, int],
                   pads: tuple[int, int, int, int], bias: Any = None) -> bool:  # fmt: skip
    """Depthwise at stride 1 with the output as wide as the input ("same"
    padding: every depthwise layer of ShuffleNet or MobileNet), in the
    "same-width" layout of ``views.py``: all taps' columns are one strided copy
    on the output's own grid. With ``bias`` a row of ones in the columns makes
    the product add it. Returns whether it did."""
    n, c, h, w = x.shape
    o, _, kh, kw = weight.shape
    oh = dst.shape[2]
    og, k = o // groups, kh * kw
    length = oh * w
    item = x.dtype.itemsize
    flat = flat_with_margins(xp, x.reshape(n, groups, h, w), (kh, kw), dilation, pads, oh)
    sn, sc, _ = flat.strides
    view = strided(xp, flat, (n, groups, kh, kw, length), (sn, sc, dilation[0] * w * item, dilation[1] * item, item))
    taps = weight.reshape(groups, og, k)
    rows = k
    if bias is not None:
        taps = xp.concatenate([taps, bias.reshape(groups, og, 1).astype(taps.dtype, copy=False)], axis=2)
        rows = k + 1
    block = max(1, min(groups, _DEPTHWISE_COLS_BYTES // max(1, n * rows * length * item)))
    buf = scratch(xp, "cols", (n * block * rows * length,), x.dtype)
    out = dst.reshape(n, groups, og, length)  # a view: dst is C-contiguous
    for g0 in range(0, groups, block):
        g1 = min(groups, g0 + block)
        cols = buf[: n * (g1 - g0) * rows * length].reshape(n, g1 - g0, rows, length)
        per_tap = cols[:, :, :k].reshape(n, g1 - g0, kh, kw, length)
        per_tap[...] = view[:, g0:g1]
        zero_wrapped(per_tap, kw, dilation[1], pads[1], w)
        if bias is not None:
            cols[:, :, k] = 1
        xp.matmul(taps[g0:g1], cols, out=out[:, g0:g1])
    return bias is not None
