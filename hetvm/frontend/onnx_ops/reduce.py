"""Reductions: ReduceMean/Sum/Max/Min/Prod, ArgMax/ArgMin, and the composed
ReduceL1/L2/LogSum/LogSumExp/SumSquare.

The axes moved from an attribute to an input in opset 13 (ReduceSum) and 18
(the others); both forms are read.
"""

from __future__ import annotations

from typing import Any

from ...ir import prim as P
from ..onnx_context import ConvertContext, NodeView, normalize_axes, normalize_axis
from .registry import converter

_REDUCE = {
    "ReduceMean": "mean",
    "ReduceSum": "sum",
    "ReduceMax": "max",
    "ReduceMin": "min",
    "ReduceProd": "prod",
}


def _axes(ctx: ConvertContext, node: NodeView, x: Any) -> tuple[list[int] | None, bool]:
    """(sorted axes or None for all, noop): the reduction's axes, attribute or input."""
    input_since = 13 if node.op_type == "ReduceSum" else 18
    if node.opset >= input_since:
        axes = ctx.ints(node.input(1), "axes")
    else:
        axes = node.attr("axes")
    if not axes:
        return None, bool(node.attr("noop_with_empty_axes", 0))
    return sorted(normalize_axes(ctx, [int(a) for a in axes], ctx.rank(x))), False


@converter(*_REDUCE)
def _reduce(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "data")
    axes, noop = _axes(ctx, node, x)
    if noop:
        return x
    return ctx.call(_REDUCE[node.op_type], x, axes, keepdims=bool(node.attr("keepdims", 1)))


@converter("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
def _reduce_composed(ctx: ConvertContext, node: NodeView) -> Any:
    """sum(|x|), sqrt(sum(x*x)), log(sum(x)), log(sum(exp(x - m))) + m with m the
    max (no overflow), sum(x*x)."""
    x = ctx.tensor(0, "data")
    axes, noop = _axes(ctx, node, x)
    keepdims = bool(node.attr("keepdims", 1))
    op = node.op_type
    if noop:  # the reduction of each single element
        if op == "ReduceL1":
            return ctx.call("abs", x)
        if op == "ReduceL2":
            return ctx.call("abs", x)
        if op == "ReduceSumSquare":
            return ctx.call("multiply", x, x)
        if op == "ReduceLogSum":
            return ctx.call("log", x)
        return x
    if op == "ReduceLogSumExp":
        rank = ctx.rank(x)
        m = ctx.call("max", x, axes, keepdims=True)
        s = ctx.call("sum", ctx.call("exp", ctx.call("subtract", x, m)), axes, keepdims=True)
        y = ctx.call("add", ctx.call("log", s), m)
        if not keepdims:
            y = ctx.call("squeeze", y, axes if axes is not None else list(range(rank)))
        return y
    if op == "ReduceL1":
        x = ctx.call("abs", x)
    elif op in ("ReduceL2", "ReduceSumSquare"):
        x = ctx.call("multiply", x, x)
    y = ctx.call("sum", x, axes, keepdims=keepdims)
    if op == "ReduceL2":
        y = ctx.call("sqrt", y)
    elif op == "ReduceLogSum":
        y = ctx.call("log", y)
    return y


@converter("ArgMax", "ArgMin")
def _arg(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "data")
    axis = normalize_axis(ctx, int(node.attr("axis", 0)), ctx.rank(x))
    fn = "argmax" if node.op_type == "ArgMax" else "argmin"
    keepdims = bool(node.attr("keepdims", 1))
    if not node.attr("select_last_index", 0):
        return ctx.call(fn, x, axis, keepdims=keepdims)
    # the last extreme: the first one of the reversed axis, counted from the end
    shape = ctx.shape_of(x)
    size = P.const_value(shape[axis]) if shape is not None else None
    if size is None:
        raise ctx.error("select_last_index=1 needs a static size of the reduced axis")
    flipped = ctx.call("strided_slice", x, [axis], [-1], [-(2**31)], [-1])
    idx = ctx.call(fn, flipped, axis, keepdims=keepdims)
    return ctx.call("subtract", ctx.const(size - 1, "int64"), idx)


@converter("CumSum", "CumProd", since=11)
def _cumulative(ctx: ConvertContext, node: NodeView) -> Any:
    """cumsum/cumprod along the constant ``axis`` input; ``reverse`` scans a reversed
    view (strided_slice with stride -1 before and after), ``exclusive`` maps to the
    op's attr."""
    x = ctx.tensor(0, "x")
    axis_in = ctx.ints(node.input(1), "axis")
    if not axis_in or len(axis_in) != 1:
        raise ctx.error(f"axis must be one integer, got {axis_in}")
    axis = normalize_axis(ctx, axis_in[0], ctx.rank(x))
    reverse = bool(node.attr("reverse", 0))
    fn = "cumsum" if node.op_type == "CumSum" else "cumprod"

    def flip(v: Any) -> Any:
        return ctx.call("strided_slice", v, [axis], [-1], [-(2**31)], [-1])

    if reverse:
        x = flip(x)
    y = ctx.call(fn, x, axis, exclusive=bool(node.attr("exclusive", 0)))
    return flip(y) if reverse else y
