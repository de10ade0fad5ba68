"""Transposed convolution (``nn.conv2d_transpose``, ``nn.conv1d_transpose``) as one
matrix product and a col2im scatter-add.

Why this shape: every input pixel adds ``x[c] * w[c, o, i, j]`` at output
position ``pixel * stride + tap * dilation - pad_begin``. So one (batched, per
group) product ``W^T (G, Og*KH*KW, Cg) @ x (G, Cg, H*W)`` computes every tap's
contribution at every input pixel -- the work goes to BLAS -- and then each of
the KH*KW taps is a single strided add of an (N, O, H, W) plane into the output:
NumPy calls per tap, never per pixel. The padding crop is folded into each
tap's slice (only the input rows and columns that land inside the output are
added), so no padded buffer is built; positions no tap reaches (past the full
result, through ``output_padding``) stay zero. The 1-D op runs as the 2-D one
with a unit height.

Accumulation is in ``result_type(data, weight)``; the columns of at most
``_COLS_BYTES`` are built at once (blocks of whole images).
"""

from __future__ import annotations

from typing import Any

from ..runtime.product_pool import matmul_into
from .common import as_ints, store
from .registry import register_kernel
from .scratch import scratch

_COLS_BYTES = 8 << 20  # columns per block: fits the scratch cache (scratch.CACHE_LIMIT)

__all__ = ["conv2d_transpose", "conv1d_transpose"]


def _span(start: int, size: int, stride: int, pad: int, out: int) -> tuple[int, int, int]:
    """For a tap at full-result offset ``start``: (first input index, count, first
    output index) of the input positions ``y`` whose ``start + y * stride - pad``
    lies in ``[0, out)``."""
    lo = max(0, -(-(pad - start) // stride))  # ceil
    hi = min(size - 1, (pad + out - 1 - start) // stride)
    count = max(0, hi - lo + 1)
    return lo, count, start + lo * stride - pad


def _check(attrs: dict, op: str, data_layout: str, kernel_layout: str) -> None:
    for key, want in (("data_layout", data_layout), ("kernel_layout", kernel_layout)):
        if attrs.get(key, want) != want:
            raise ValueError(f"{op} kernel supports {key}={want}, got {attrs[key]}")
    if attrs.get("out_layout") not in (None, data_layout):
        raise ValueError(f"{op} kernel supports out_layout={data_layout}, got {attrs['out_layout']}")


def _expected(shape, kernel, strides, pads, dilation, opad) -> tuple[int, int]:
    return tuple(  # type: ignore[return-value]
        (shape[2 + a] - 1) * strides[a] - pads[a] - pads[a + 2] + dilation[a] * (kernel[a] - 1) + opad[a] + 1
        for a in range(2)
    )


def _transpose2d(xp: Any, attrs: dict, data: Any, weight: Any, out: Any, op: str, one_d: bool = False) -> None:
    strides = as_ints(attrs["strides"])
    pads = as_ints(attrs["padding"])
    dilation = as_ints(attrs["dilation"])
    opad = as_ints(attrs["output_padding"])
    groups = int(attrs.get("groups", 1))
    n, c, h, w = data.shape
    cin, og, kh, kw = weight.shape
    oh, ow = out.shape[2:]
    o = og * groups
    want = _expected(data.shape, (kh, kw), strides, pads, dilation, opad)
    if cin != c or c % groups or out.shape[:2] != (n, o) or (oh, ow) != want:
        shapes = [tuple(a.shape) for a in (data, weight, out)] + [(n, o, *want)]
        if one_d:  # the caller's shapes, without the unit height
            shapes = [s[:2] + s[3:] for s in shapes]
        raise ValueError(
            f"{op}: data {shapes[0]}, weight {shapes[1]} and groups {groups} give {shapes[3]}, "
            f"output buffer {shapes[2]}"
        )
    acc = xp.result_type(data.dtype, weight.dtype)
    dst = out if out.dtype == acc else xp.empty(out.shape, dtype=acc)
    dst[...] = 0
    cg = c // groups
    # W^T per group: (G, Og*KH*KW, Cg); the product's rows are (o within group, i, j)
    wt = weight.astype(acc, copy=False).reshape(groups, cg, og * kh * kw).transpose(0, 2, 1)
    x = data.astype(acc, copy=False).reshape(n, groups, cg, h * w)
    spans_h = [_span(i * dilation[0], h, strides[0], pads[0], oh) for i in range(kh)]
    spans_w = [_span(j * dilation[1], w, strides[1], pads[1], ow) for j in range(kw)]
    per_image = o * kh * kw * h * w * acc.itemsize
    block = max(1, min(n, _COLS_BYTES // max(1, per_image)))
    for b0 in range(0, n, block):
        nb = min(block, n - b0)
        cols = scratch(xp, "cols", (nb, groups, og * kh * kw, h * w), acc)
        matmul_into(xp, wt, x[b0 : b0 + nb], cols)
        taps = cols.reshape(nb, o, kh, kw, h, w)
        target = dst[b0 : b0 + nb]
        for i, (y0, ny, q0) in enumerate(spans_h):
            if not ny:
                continue
            rows = slice(q0, q0 + (ny - 1) * strides[0] + 1, strides[0])
            for j, (x0, nx, r0) in enumerate(spans_w):
                if not nx:
                    continue
                cols_ = slice(r0, r0 + (nx - 1) * strides[1] + 1, strides[1])
                view = target[:, :, rows, cols_]
                xp.add(view, taps[:, :, i, j, y0 : y0 + ny, x0 : x0 + nx], out=view)
    if dst is not out:
        store(out, dst.astype(out.dtype, copy=False))


@register_kernel("nn.conv2d_transpose")
def conv2d_transpose(xp: Any, attrs: dict, data: Any, weight: Any, out: Any) -> None:
    """NCHW data, IOHW weights: strides, (top, left, bottom, right) padding,
    output_padding, dilation and groups; the output shape is the buffer's, checked
    against the attrs."""
    _check(attrs, "nn.conv2d_transpose", "NCHW", "IOHW")
    _transpose2d(xp, attrs, data, weight, out, "nn.conv2d_transpose")


@register_kernel("nn.conv1d_transpose")
def conv1d_transpose(xp: Any, attrs: dict, data: Any, weight: Any, out: Any) -> None:
    """NCW data, IOW weights, run as the 2-D kernel on a unit height (views only:
    the result lands in ``out``)."""
    _check(attrs, "nn.conv1d_transpose", "NCW", "IOW")
    pl, pr = as_ints(attrs["padding"])
    attrs2 = {
        "strides": (1, *as_ints(attrs["strides"])),
        "padding": (0, pl, 0, pr),
        "dilation": (1, *as_ints(attrs["dilation"])),
        "output_padding": (0, *as_ints(attrs["output_padding"])),
        "groups": attrs.get("groups", 1),
    }
    _transpose2d(xp, attrs2, data[:, :, None, :], weight[:, :, None, :], out[:, :, None, :],
                 "nn.conv1d_transpose", one_d=True)  # fmt: skip
