"""Pooling kernels (NCHW): max/avg with padding, dilation, ceil_mode; adaptive avg."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .common import as_ints, store
from .conv import windows
from .registry import register_kernel


def _check_layout(attrs: dict, op: str) -> None:
    if attrs.get("layout", "NCHW") != "NCHW" or attrs.get("out_layout") not in (None, "NCHW"):
        raise ValueError(f"{op} kernel supports the NCHW layout only")


def _geometry(attrs: dict, x: Any, out: Any):
    k = as_ints(attrs.get("pool_size", (1, 1)))
    s = as_ints(attrs.get("strides", (1, 1)))
    d = as_ints(attrs.get("dilation", (1, 1)))
    pt, pl, pb, pr = as_ints(attrs.get("padding", (0, 0, 0, 0)))
    oh, ow = out.shape[2], out.shape[3]
    h, w = x.shape[2], x.shape[3]
    # ceil_mode may need room past the explicit padding: pad the extra at the end
    need_h = (oh - 1) * s[0] + (k[0] - 1) * d[0] + 1
    need_w = (ow - 1) * s[1] + (k[1] - 1) * d[1] + 1
    extra_h = max(0, need_h - (h + pt + pb))
    extra_w = max(0, need_w - (w + pl + pr))
    return k, s, d, (pt, pl, pb, pr), (extra_h, extra_w), (oh, ow)


def _lowest(dtype: Any) -> Any:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return -np.inf
    if dt.kind == "b":
        return False
    return np.iinfo(dt).min


@register_kernel("nn.max_pool2d")
def max_pool2d(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    _check_layout(attrs, "nn.max_pool2d")
    k, s, d, (pt, pl, pb, pr), (eh, ew), (oh, ow) = _geometry(attrs, x, out)
    pads = ((0, 0), (0, 0), (pt, pb + eh), (pl, pr + ew))
    xpad = xp.ascontiguousarray(xp.pad(x, pads, constant_values=_lowest(x.dtype)))
    win = windows(xp, xpad, oh, ow, k[0], k[1], s, d)
    store(out, win.max(axis=(4, 5)))


@register_kernel("nn.avg_pool2d")
def avg_pool2d(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    _check_layout(attrs, "nn.avg_pool2d")
    k, s, d, (pt, pl, pb, pr), (eh, ew), (oh, ow) = _geometry(attrs, x, out)
    pads = ((0, 0), (0, 0), (pt, pb + eh), (pl, pr + ew))
    acc = xp.float64 if x.dtype == xp.float64 else xp.float32
    xpad = xp.ascontiguousarray(xp.pad(x.astype(acc), pads))
    total = windows(xp, xpad, oh, ow, k[0], k[1], s, d).sum(axis=(4, 5))
    # divisor: the cells of each window that count (input only, or input + padding)
    h, w = x.shape[2], x.shape[3]
    mask = xp.zeros((1, 1, h + pt + pb + eh, w + pl + pr + ew), dtype=acc)
    if attrs.get("count_include_pad", False):
        mask[:, :, : h + pt + pb, : w + pl + pr] = 1
    else:
        mask[:, :, pt : pt + h, pl : pl + w] = 1
    count = windows(xp, mask, oh, ow, k[0], k[1], s, d).sum(axis=(4, 5))
    store(out, (total / xp.maximum(count, 1)).astype(out.dtype))


@register_kernel("nn.adaptive_avg_pool2d")
def adaptive_avg_pool2d(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    _check_layout(attrs, "nn.adaptive_avg_pool2d")
    h, w = x.shape[2], x.shape[3]
    oh, ow = out.shape[2], out.shape[3]
    acc = xp.float64 if x.dtype == xp.float64 else xp.float32
    rows = xp.empty(x.shape[:2] + (oh, w), dtype=acc)
    for i in range(oh):  # separable: average rows, then columns (O(OH + OW) slices)
        a, b = (i * h) // oh, math.ceil((i + 1) * h / oh)
        rows[:, :, i, :] = x[:, :, a:b, :].mean(axis=2)
    res = xp.empty(x.shape[:2] + (oh, ow), dtype=acc)
    for j in range(ow):
        a, b = (j * w) // ow, math.ceil((j + 1) * w / ow)
        res[:, :, :, j] = rows[:, :, :, a:b].mean(axis=3)
    store(out, res.astype(out.dtype))
