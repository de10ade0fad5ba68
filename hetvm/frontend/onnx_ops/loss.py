"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, composed.

loss[n, d...] = -input[n, target[n, d...], d...] * weight[target[n, d...]], with
the class picked by ``gather_elements`` along axis 1 and the weight by ``take``;
targets equal to ``ignore_index`` contribute 0 and weigh 0. ``mean`` divides the
summed loss by the summed weights (the count of non-ignored targets without a
weight input), as the ONNX specification says.
"""

from __future__ import annotations

from typing import Any

from ...ir import expr as E
from ..onnx_context import ConvertContext, NodeView
from .registry import converter


def _nll(ctx: ConvertContext, node: NodeView, logp: E.Expr, target: E.Expr, weight_index: int) -> E.Expr:
    dtype = ctx.dtype(logp)
    reduction = node.attr("reduction", "mean")
    if isinstance(reduction, bytes):
        reduction = reduction.decode()
    if reduction not in ("none", "sum", "mean"):
        raise ctx.error(f"reduction must be none, sum or mean, got {reduction!r}")
    ignore = node.attr("ignore_index")
    tdtype = ctx.dtype(target)
    mask = None
    if ignore is not None:
        mask = ctx.call("not_equal", target, ctx.const(int(ignore), tdtype))
        target = ctx.call("where", mask, target, ctx.const(0, tdtype))
    picked = ctx.call("gather_elements", logp, ctx.call("expand_dims", target, [1]), 1)
    picked = ctx.call("squeeze", picked, [1])
    weight = None
    if node.input(weight_index) is not None:
        weight = ctx.call("take", ctx.tensor(weight_index, "weight"), target, 0)
    if mask is not None:
        fmask = ctx.call("astype", mask, dtype)
        weight = fmask if weight is None else ctx.call("multiply", weight, fmask)
    loss = ctx.call("negative", picked)
    if weight is not None:
        loss = ctx.call("multiply", loss, weight)
    if reduction == "none":
        return loss
    total = ctx.call("sum", loss, None)
    if reduction == "sum":
        return total
    if weight is None:
        return ctx.call("mean", loss, None)
    return ctx.call("divide", total, ctx.call("sum", weight, None))


@converter("NegativeLogLikelihoodLoss", since=12)
def _nll_loss(ctx: ConvertContext, node: NodeView) -> Any:
    return _nll(ctx, node, ctx.tensor(0, "input"), ctx.tensor(1, "target"), 2)


@converter("SoftmaxCrossEntropyLoss", since=12)
def _softmax_ce_loss(ctx: ConvertContext, node: NodeView) -> Any:
    """NLL of log_softmax over the class axis (1); the optional second output is
    that log-probability."""
    scores = ctx.tensor(0, "scores")
    if ctx.rank(scores) < 2:
        raise ctx.error("scores need shape (N, C, ...)")
    logp = ctx.call("nn.log_softmax", scores, 1)
    loss = _nll(ctx, node, logp, ctx.tensor(1, "labels"), 2)
    return [loss, logp][: max(node.num_outputs, 1)]
