"""Size (the element count of a run-time tensor, from its shape), LpPool
(``(sum |x|^p over the window)^(1/p)``: an average pool with the padding counted,
times the window size), CenterCropPad (slice + pad) and Det."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ...ir import prim as P
from ..fold import known
from ..onnx_context import ConvertContext, NodeView, normalize_axes
from .nn import _pool
from .registry import converter


@converter("Size")
def _size(ctx: ConvertContext, node: NodeView) -> Any:
    """The product of the input's dims: a constant, or a shape value on symbolic dims."""
    shape = ctx.known_shape(node.input(0), "input")
    total: P.PrimExpr = P.IntImm(1)
    for d in shape:
        total = P.mul(total, d)
    out = np.empty((), dtype=object)
    out[()] = total
    return known(out)


@converter("LpPool", since=2)
def _lp_pool(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "X")
    dtype = ctx.dtype(x)
    if not dtype.startswith("float"):
        raise ctx.error(f"needs a floating-point input, got {dtype}")
    p = int(node.attr("p", 2))
    if p <= 0:
        raise ctx.error(f"p must be positive, got {p}")
    powered = ctx.call("abs", x) if p == 1 else ctx.call("power", ctx.call("abs", x), ctx.const(p, dtype))
    view = dataclasses.replace(node, inputs=[powered, *node.inputs[1:]])
    outer, ctx.node = ctx.node, view
    try:
        mean = _pool(ctx, view, "nn.avg_pool2d", count_include_pad=True)
    finally:
        ctx.node = outer
    window = math.prod(int(k) for k in node.attr("kernel_shape"))
    total = ctx.call("multiply", mean, ctx.const(window, dtype))
    return total if p == 1 else ctx.call("power", total, ctx.const(1.0 / p, dtype))


@converter("CenterCropPad", since=18)
def _center_crop_pad(ctx: ConvertContext, node: NodeView) -> Any:
    """Per listed axis: a centred slice where the target is smaller (the extra
    element off the end), zero padding where it is larger (the extra one after)."""
    x = ctx.tensor(0, "input_data")
    shape = ctx.known_shape(x, "input_data")
    rank = len(shape)
    target = ctx.ints(node.input(1), "shape")
    axes = node.attr("axes")
    axes = list(range(rank)) if axes is None else normalize_axes(ctx, axes, rank)
    if target is None or len(target) != len(axes):
        raise ctx.error(f"shape needs one value per axis ({len(axes)}), got {target}")
    begin, end, crop_axes, pad_width = [], [], [], [0] * (2 * rank)
    for a, want in zip(axes, target):
        dim = ctx.static_dim(shape[a], f"dim {a} of the input")
        if want < dim:
            crop_axes.append(a)
            begin.append((dim - want) // 2)
            end.append((dim - want) // 2 + want)
        elif want > dim:
            pad_width[2 * a] = (want - dim) // 2
            pad_width[2 * a + 1] = want - dim - (want - dim) // 2
    y = ctx.call("strided_slice", x, crop_axes, begin, end) if crop_axes else x
    return ctx.call("nn.pad", y, pad_width, pad_mode="constant", pad_value=0.0) if any(pad_width) else y


@converter("Det", since=11)
def _det(ctx: ConvertContext, node: NodeView) -> Any:
    return ctx.call("det", ctx.tensor(0, "X"))
