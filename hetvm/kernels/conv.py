"""2-D convolution, NCHW data and OIHW weights: im2col by stride tricks, one
matrix product per group, no Python loop over pixels."""

from __future__ import annotations

from typing import Any

from .common import as_ints, store
from .registry import register_kernel


def windows(xp: Any, x: Any, oh: int, ow: int, kh: int, kw: int, strides, dilation) -> Any:
    """A (N, C, OH, OW, KH, KW) strided view of the padded input ``x`` (no copy)."""
    sn, sc, sh, sw = x.strides
    shape = (x.shape[0], x.shape[1], oh, ow, kh, kw)
    st = (sn, sc, sh * strides[0], sw * strides[1], sh * dilation[0], sw * dilation[1])
    return xp.lib.stride_tricks.as_strided(x, shape=shape, strides=st)


@register_kernel("nn.conv2d")
def conv2d(xp: Any, attrs: dict, data: Any, weight: Any, out: Any) -> None:
    for key, want in (("data_layout", "NCHW"), ("kernel_layout", "OIHW")):
        if attrs.get(key, want) != want:
            raise ValueError(f"nn.conv2d kernel supports {key}={want}, got {attrs[key]}")
    if attrs.get("out_layout") not in (None, "NCHW"):
        raise ValueError(f"nn.conv2d kernel supports out_layout=NCHW, got {attrs['out_layout']}")
    strides = as_ints(attrs.get("strides", (1, 1)))
    dilation = as_ints(attrs.get("dilation", (1, 1)))
    pt, pl, pb, pr = as_ints(attrs.get("padding", (0, 0, 0, 0)))
    groups = int(attrs.get("groups", 1))
    n = data.shape[0]
    o, cg, kh, kw = weight.shape
    _, _, oh, ow = out.shape
    x = xp.pad(data, ((0, 0), (0, 0), (pt, pb), (pl, pr))) if (pt or pl or pb or pr) else data
    x = xp.ascontiguousarray(x)
    win = windows(xp, x, oh, ow, kh, kw, strides, dilation)
    og = o // groups
    acc = xp.result_type(data.dtype, weight.dtype)
    for g in range(groups):
        cols = win[:, g * cg : (g + 1) * cg]  # (N, Cg, OH, OW, KH, KW)
        cols = cols.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, cg * kh * kw)
        w = weight[g * og : (g + 1) * og].reshape(og, cg * kh * kw)
        res = (cols @ w.T).astype(acc, copy=False)  # (N*OH*OW, Og)
        store(out[:, g * og : (g + 1) * og], res.reshape(n, oh, ow, og).transpose(0, 3, 1, 2))
