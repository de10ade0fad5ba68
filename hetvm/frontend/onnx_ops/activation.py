"""Activations composed from hetvm's element-wise ops.

Elu, Selu, Celu, HardSigmoid, HardSwish, Softplus, Softsign, Mish,
ThresholdedRelu, PRelu, Swish, Shrink and Hardmax have no hetvm op of their
own; each is an exact composition (the formulas of the ONNX specification).
Exponentials only ever see non-positive arguments, so nothing overflows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir import expr as E
from ...ir import prim as P
from ..onnx_context import ConvertContext, NodeView, normalize_axis
from .registry import converter


def _c(ctx: ConvertContext, value: float, x: E.Expr) -> E.Constant:
    """A scalar constant of ``x``'s dtype."""
    return ctx.const(value, ctx.dtype(x))


def _expm1_neg(ctx: ConvertContext, x: E.Expr) -> E.Expr:
    """exp(min(x, 0)) - 1: the negative branch of Elu-like ops, never overflowing."""
    neg = ctx.call("minimum", x, _c(ctx, 0.0, x))
    return ctx.call("subtract", ctx.call("exp", neg), _c(ctx, 1.0, x))


def softplus(ctx: ConvertContext, x: E.Expr) -> E.Expr:
    """log(1 + exp(x)) as relu(x) + log(1 + exp(-|x|)) (no overflow)."""
    tail = ctx.call("exp", ctx.call("negative", ctx.call("abs", x)))
    tail = ctx.call("log", ctx.call("add", tail, _c(ctx, 1.0, x)))
    return ctx.call("add", ctx.call("nn.relu", x), tail)


@converter("Elu")
def _elu(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "X")
    alpha = float(node.attr("alpha", 1.0))
    neg = ctx.call("multiply", _expm1_neg(ctx, x), _c(ctx, alpha, x))
    return ctx.call("where", ctx.call("greater", x, _c(ctx, 0.0, x)), x, neg)


@converter("Selu")
def _selu(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "X")
    alpha = float(node.attr("alpha", 1.67326319217681884765625))
    gamma = float(node.attr("gamma", 1.05070102214508056640625))
    neg = ctx.call("multiply", _expm1_neg(ctx, x), _c(ctx, alpha, x))
    y = ctx.call("where", ctx.call("greater", x, _c(ctx, 0.0, x)), x, neg)
    return ctx.call("multiply", y, _c(ctx, gamma, x))


@converter("Celu", since=12)
def _celu(ctx: ConvertContext, node: NodeView) -> Any:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    x = ctx.tensor(0, "X")
    alpha = float(node.attr("alpha", 1.0))
    scaled = ctx.call("divide", x, _c(ctx, alpha, x))
    neg = ctx.call("multiply", _expm1_neg(ctx, scaled), _c(ctx, alpha, x))
    return ctx.call("add", ctx.call("nn.relu", x), neg)


def _hard_sigmoid(ctx: ConvertContext, x: E.Expr, alpha: float, beta: float) -> E.Expr:
    lin = ctx.call("add", ctx.call("multiply", x, _c(ctx, alpha, x)), _c(ctx, beta, x))
    return ctx.call("clip", lin, 0.0, 1.0)


@converter("HardSigmoid")
def _hardsigmoid(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "X")
    return _hard_sigmoid(ctx, x, float(node.attr("alpha", 0.2)), float(node.attr("beta", 0.5)))


@converter("HardSwish", since=14)
def _hardswish(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "X")
    return ctx.call("multiply", x, _hard_sigmoid(ctx, x, 1.0 / 6.0, 0.5))


@converter("Softplus")
def _softplus(ctx: ConvertContext, node: NodeView) -> Any:
    return softplus(ctx, ctx.tensor(0, "X"))


@converter("Softsign")
def _softsign(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "input")
    den = ctx.call("add", ctx.call("abs", x), _c(ctx, 1.0, x))
    return ctx.call("divide", x, den)


@converter("Mish", since=18)
def _mish(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "X")
    return ctx.call("multiply", x, ctx.call("tanh", softplus(ctx, x)))


@converter("ThresholdedRelu", since=10)
def _thresholded_relu(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "X")
    alpha = float(node.attr("alpha", 1.0))
    return ctx.call("where", ctx.call("greater", x, _c(ctx, alpha, x)), x, _c(ctx, 0.0, x))


@converter("PRelu", since=7)
def _prelu(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "X")
    slope = ctx.tensor(1, "slope")
    neg = ctx.call("multiply", x, slope)
    return ctx.call("where", ctx.call("less", x, _c(ctx, 0.0, x)), neg, x)


@converter("Swish", since=24)
def _swish(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "X")
    alpha = float(node.attr("alpha", 1.0))
    arg = x if alpha == 1.0 else ctx.call("multiply", x, _c(ctx, alpha, x))
    return ctx.call("multiply", x, ctx.call("sigmoid", arg))


@converter("Shrink", since=9)
def _shrink(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "input")
    bias, lambd = float(node.attr("bias", 0.0)), float(node.attr("lambd", 0.5))
    low = ctx.call("less", x, _c(ctx, -lambd, x))
    high = ctx.call("greater", x, _c(ctx, lambd, x))
    inner = ctx.call("where", high, ctx.call("subtract", x, _c(ctx, bias, x)), _c(ctx, 0, x))
    return ctx.call("where", low, ctx.call("add", x, _c(ctx, bias, x)), inner)


@converter("Hardmax")
def _hardmax(ctx: ConvertContext, node: NodeView) -> Any:
    """one-hot of argmax along ``axis``: equal(argmax(x, keepdims), iota) cast to x's dtype
    (argmax picks the first maximum, as ONNX does). Before opset 13 the input is coerced
    to 2-D at ``axis``, as for Softmax."""
    x = ctx.tensor(0, "input")
    rank = ctx.rank(x)
    shape = ctx.shape_of(x)
    if shape is None:
        raise ctx.error("needs a known input shape")
    if node.opset >= 13:
        return _hardmax_axis(ctx, x, normalize_axis(ctx, int(node.attr("axis", -1)), rank), shape)
    axis = normalize_axis(ctx, int(node.attr("axis", 1)), rank)
    lead: P.PrimExpr = P.IntImm(1)
    tail: P.PrimExpr = P.IntImm(1)
    for d in shape[:axis]:
        lead = P.mul(lead, d)
    for d in shape[axis:]:
        tail = P.mul(tail, d)
    flat = ctx.call("reshape", x, (lead, tail))
    y = _hardmax_axis(ctx, flat, 1, ctx.shape_of(flat))
    return ctx.call("reshape", y, tuple(shape))


def _hardmax_axis(ctx: ConvertContext, x: E.Expr, axis: int, shape: Any) -> E.Expr:
    size = P.const_value(shape[axis])
    if size is None:
        raise ctx.error("the size of the reduced axis must be static")
    iota = np.arange(size, dtype=np.int64).reshape([-1] + [1] * (len(shape) - 1 - axis))
    idx = ctx.call("argmax", x, axis, keepdims=True)
    hot = ctx.call("equal", idx, ctx.const(iota))
    return ctx.call("astype", hot, ctx.dtype(x))
