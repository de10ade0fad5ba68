"""Element-wise ONNX ops: arithmetic, comparisons, unary math, activations, Cast, Where."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..onnx_context import ConvertContext, NodeView
from ..onnx_types import dtype_of
from .registry import converter

# Broadcasting follows NumPy from opset 7; older opsets used a 'broadcast' attribute.
_BINARY = {
    "Add": "add",
    "Sub": "subtract",
    "Mul": "multiply",
    "Div": "divide",
    "Equal": "equal",
    "Less": "less",
    "Greater": "greater",
    "LessOrEqual": "less_equal",
    "GreaterOrEqual": "greater_equal",
    "And": "logical_and",
    "Or": "logical_or",
}

_UNARY = {
    "Sqrt": "sqrt",
    "Erf": "erf",
    "Exp": "exp",
    "Log": "log",
    "Neg": "negative",
    "Abs": "abs",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Floor": "floor",
    "Ceil": "ceil",
    "Reciprocal": "reciprocal",
    "Not": "logical_not",
    "Sin": "sin",
    "Cos": "cos",
    "Sign": "sign",
    "Round": "round",
    "Relu": "nn.relu",
}


@converter(*_BINARY, since=7)
def _binary(ctx: ConvertContext, node: NodeView) -> Any:
    # integer Div: ONNX truncates toward zero, as hetvm's (TVM's) integer divide does
    return ctx.call(_BINARY[node.op_type], ctx.tensor(0, "A"), ctx.tensor(1, "B"))


@converter(*_UNARY)
def _unary(ctx: ConvertContext, node: NodeView) -> Any:
    return ctx.call(_UNARY[node.op_type], ctx.tensor(0, "X"))


@converter("Pow", since=7)
def _pow(ctx: ConvertContext, node: NodeView) -> Any:
    base = ctx.tensor(0, "X")
    dtype = ctx.dtype(node.input(0))
    exp = node.input(1)
    if isinstance(exp, np.ndarray):
        exp_expr = ctx.const(exp.astype(dtype))  # ONNX allows a different exponent dtype
    else:
        exp_expr = ctx.tensor(1, "Y")
        if ctx.dtype(exp) != dtype:
            exp_expr = ctx.call("astype", exp_expr, dtype)
    return ctx.call("power", base, exp_expr)


@converter("Sum", "Max", "Min", "Mean")
def _variadic(ctx: ConvertContext, node: NodeView) -> Any:
    fn = {"Sum": "add", "Max": "maximum", "Min": "minimum", "Mean": "add"}[node.op_type]
    args = [ctx.tensor(i) for i, v in enumerate(node.inputs) if v is not None]
    if not args:
        raise ctx.error("needs at least one input")
    out = args[0]
    for a in args[1:]:
        out = ctx.call(fn, out, a)
    if node.op_type == "Mean" and len(args) > 1:
        out = ctx.call("divide", out, ctx.const(len(args), ctx.dtype(node.input(0))))
    return out


@converter("Identity")
def _identity(ctx: ConvertContext, node: NodeView) -> Any:
    return node.input(0)


@converter("Cast")
def _cast(ctx: ConvertContext, node: NodeView) -> Any:
    dtype = dtype_of(int(node.attr("to")))
    x = ctx.tensor(0, "input")
    if ctx.dtype(x) == dtype:
        return x
    return ctx.call("astype", x, dtype)


@converter("Where", since=9)
def _where(ctx: ConvertContext, node: NodeView) -> Any:
    return ctx.call("where", ctx.tensor(0, "condition"), ctx.tensor(1, "X"), ctx.tensor(2, "Y"))


@converter("Clip")
def _clip(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "input")
    dtype = ctx.dtype(x)
    if node.opset < 11:
        lo, hi = node.attr("min"), node.attr("max")
    else:
        lo, hi = node.input(1), node.input(2)
    if all(v is None or isinstance(v, (np.ndarray, float, int)) for v in (lo, hi)):
        info = np.finfo(dtype) if dtype.startswith("float") else np.iinfo(dtype)
        lo_f = float(info.min) if lo is None else float(np.asarray(lo).reshape(()))
        hi_f = float(info.max) if hi is None else float(np.asarray(hi).reshape(()))
        return ctx.call("clip", x, lo_f, hi_f)
    out = x
    if lo is not None:
        out = ctx.call("maximum", out, ctx.tensor(1, "min"))
    if hi is not None:
        out = ctx.call("minimum", out, ctx.tensor(2, "max"))
    return out


@converter("LeakyRelu")
def _leaky_relu(ctx: ConvertContext, node: NodeView) -> Any:
    return ctx.call("nn.leakyrelu", ctx.tensor(0, "X"), float(node.attr("alpha", 0.01)))


@converter("Gelu", since=20)
def _gelu(ctx: ConvertContext, node: NodeView) -> Any:
    approx = node.attr("approximate", "none")
    return ctx.call("nn.gelu_tanh" if approx == "tanh" else "nn.gelu", ctx.tensor(0, "X"))


@converter("CastLike", since=15)
def _cast_like(ctx: ConvertContext, node: NodeView) -> Any:
    """Cast to the dtype of the second input (only its dtype is read)."""
    x = ctx.tensor(0, "input")
    dtype = ctx.dtype(node.input(1))
    if ctx.dtype(x) == dtype:
        return x
    return ctx.call("astype", x, dtype)


@converter("Xor", since=7)
def _xor(ctx: ConvertContext, node: NodeView) -> Any:
    """Logical xor of two bool tensors is their inequality."""
    return ctx.call("not_equal", ctx.tensor(0, "A"), ctx.tensor(1, "B"))


_UNARY_EXTRA = {
    "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan", "Sinh": "sinh",
    "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh", "IsNaN": "isnan",
    "BitwiseNot": "bitwise_not",
}  # fmt: skip


@converter(*_UNARY_EXTRA)
def _unary_extra(ctx: ConvertContext, node: NodeView) -> Any:
    return ctx.call(_UNARY_EXTRA[node.op_type], ctx.tensor(0, "X"))


@converter("IsInf", since=10)
def _isinf(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "X")
    pos, neg = int(node.attr("detect_positive", 1)), int(node.attr("detect_negative", 1))
    inf = ctx.call("isinf", x)
    if pos and neg:
        return inf
    if not pos and not neg:
        return ctx.call("logical_and", inf, ctx.const(False))
    side = ctx.call("greater" if pos else "less", x, ctx.const(0, ctx.dtype(x)))
    return ctx.call("logical_and", inf, side)


@converter("Mod", since=10)
def _mod(ctx: ConvertContext, node: NodeView) -> Any:
    """fmod=1: C fmod (the dividend's sign) -> mod; fmod=0: the divisor's sign -> floor_mod."""
    fn = "mod" if int(node.attr("fmod", 0)) else "floor_mod"
    return ctx.call(fn, ctx.tensor(0, "A"), ctx.tensor(1, "B"))


_BITWISE = {"BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor"}


@converter(*_BITWISE, since=18)
def _bitwise(ctx: ConvertContext, node: NodeView) -> Any:
    return ctx.call(_BITWISE[node.op_type], ctx.tensor(0, "A"), ctx.tensor(1, "B"))


@converter("BitShift", since=11)
def _bitshift(ctx: ConvertContext, node: NodeView) -> Any:
    direction = node.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.error(f"direction must be LEFT or RIGHT, got {direction!r}")
    fn = "left_shift" if direction == "LEFT" else "right_shift"
    return ctx.call(fn, ctx.tensor(0, "X"), ctx.tensor(1, "Y"))
