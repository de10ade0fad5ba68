"""Reductions: ReduceMean/Sum/Max/Min/Prod, ArgMax/ArgMin.

The axes moved from an attribute to an input in opset 13 (ReduceSum) and 18
(the others); both forms are read.
"""

from __future__ import annotations

from typing import Any

from ..onnx_context import ConvertContext, NodeView, normalize_axes, normalize_axis
from . import converter

_REDUCE = {
    "ReduceMean": "mean",
    "ReduceSum": "sum",
    "ReduceMax": "max",
    "ReduceMin": "min",
    "ReduceProd": "prod",
}


@converter(*_REDUCE)
def _reduce(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "data")
    input_since = 13 if node.op_type == "ReduceSum" else 18
    if node.opset >= input_since:
        axes = ctx.ints(node.input(1), "axes")
    else:
        axes = node.attr("axes")
    keepdims = bool(node.attr("keepdims", 1))
    if not axes:
        if node.attr("noop_with_empty_axes", 0):
            return x
        axes_arg = None
    else:
        axes_arg = sorted(normalize_axes(ctx, [int(a) for a in axes], ctx.rank(x)))
    return ctx.call(_REDUCE[node.op_type], x, axes_arg, keepdims=keepdims)


@converter("ArgMax", "ArgMin")
def _arg(ctx: ConvertContext, node: NodeView) -> Any:
    if node.attr("select_last_index", 0):
        raise ctx.error("select_last_index=1 is not supported")
    x = ctx.tensor(0, "data")
    axis = normalize_axis(ctx, int(node.attr("axis", 0)), ctx.rank(x))
    fn = "argmax" if node.op_type == "ArgMax" else "argmin"
    return ctx.call(fn, x, axis, keepdims=bool(node.attr("keepdims", 1)))
