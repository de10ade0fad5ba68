"""Element-wise ops: binary with NumPy broadcasting, unary math, comparisons."""

from __future__ import annotations

from typing import Any

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from .base import broadcast_shapes, common_vdevice, fail, make_call, register_op, tensor_arg

BINARY_ARITH = ("add", "subtract", "multiply", "divide", "floor_divide", "power", "maximum", "minimum")
COMPARISONS = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
LOGICAL = ("logical_and", "logical_or")
UNARY_MATH = (
    "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "negative", "abs",
    "sin", "cos", "floor", "ceil", "round", "sign", "reciprocal", "logical_not",
)  # fmt: skip


def _infer_binary(call: E.Call, result_dtype: str | None) -> S.StructInfo:
    op = call.op.name  # type: ignore[attr-defined]
    a = _operand(call, 0, "lhs")
    b = _operand(call, 1, "rhs")
    if a is None and b is None:
        raise fail(op, "needs a tensor operand (both operands are prim values)")
    a = b if a is None else a  # a prim value broadcasts as a 0-d tensor of its dtype
    b = a if b is None else b
    if a.dtype is not None and b.dtype is not None and a.dtype != b.dtype:
        raise fail(op, f"operand dtypes differ: lhs is {a.dtype}, rhs is {b.dtype}")
    dtype = result_dtype if result_dtype is not None else (a.dtype or b.dtype)
    vdev = common_vdevice([a, b])
    if a.shape is not None and b.shape is not None:
        return S.TensorStructInfo(broadcast_shapes(op, a.shape, b.shape), dtype, vdevice=vdev)
    ndim = max(a.ndim, b.ndim) if a.ndim != -1 and b.ndim != -1 else -1
    return S.TensorStructInfo(None, dtype, ndim, vdev)


def _operand(call: E.Call, index: int, what: str) -> S.TensorStructInfo | None:
    """A tensor operand's struct info; None for a prim value (``R.add(x, y)`` with
    ``y: R.Prim("float32")``, as TVM allows), after checking its dtype."""
    sinfo = call.args[index].struct_info if index < len(call.args) else None
    if isinstance(sinfo, S.PrimStructInfo):
        other = call.args[1 - index].struct_info if len(call.args) == 2 else None
        if isinstance(other, S.TensorStructInfo) and other.dtype is not None and other.dtype != sinfo.dtype:
            op = call.op.name  # type: ignore[attr-defined]
            raise fail(op, f"operand dtypes differ: {what} is the prim value {sinfo.dtype}, "
                           f"the tensor is {other.dtype}")
        return None
    return tensor_arg(call, index, what)


def _infer_unary(call: E.Call) -> S.StructInfo:
    op = call.op.name  # type: ignore[attr-defined]
    x = tensor_arg(call, 0, "data")
    if op in ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "sin", "cos") and x.dtype:
        if not (x.dtype.startswith("float") or x.dtype == "bfloat16"):
            raise fail(op, f"needs a floating-point tensor, got {x.dtype}")
    if op == "logical_not":
        return S.TensorStructInfo(x.shape, "bool", x.ndim, x.vdevice)
    return x


def _infer_clip(call: E.Call) -> S.StructInfo:
    x = tensor_arg(call, 0, "data")
    for key in ("min", "max"):
        if key not in call.attrs:
            raise fail("clip", f"missing attribute '{key}'")
    return x


for _name in BINARY_ARITH:
    register_op(_name, lambda c: _infer_binary(c, None), num_inputs=2,
                description="element-wise with NumPy broadcasting")  # fmt: skip
for _name in COMPARISONS + LOGICAL:
    register_op(_name, lambda c: _infer_binary(c, "bool"), num_inputs=2,
                description="element-wise comparison, result is bool")  # fmt: skip
for _name in UNARY_MATH:
    register_op(_name, _infer_unary, num_inputs=1, description="element-wise unary")
register_op("clip", _infer_clip, num_inputs=1, attr_names=("min", "max"))


def _binary_ctor(name: str):
    def ctor(lhs: E.Expr, rhs: E.Expr) -> E.Call:
        return make_call(name, [lhs, rhs])

    ctor.__name__ = name
    ctor.__doc__ = f"Element-wise ``{name}`` with NumPy broadcasting."
    return ctor


def _unary_ctor(name: str):
    def ctor(data: E.Expr) -> E.Call:
        return make_call(name, [data])

    ctor.__name__ = name
    ctor.__doc__ = f"Element-wise ``{name}``."
    return ctor


add = _binary_ctor("add")
subtract = _binary_ctor("subtract")
multiply = _binary_ctor("multiply")
divide = _binary_ctor("divide")
floor_divide = _binary_ctor("floor_divide")
power = _binary_ctor("power")
maximum = _binary_ctor("maximum")
minimum = _binary_ctor("minimum")
equal = _binary_ctor("equal")
not_equal = _binary_ctor("not_equal")
less = _binary_ctor("less")
less_equal = _binary_ctor("less_equal")
greater = _binary_ctor("greater")
greater_equal = _binary_ctor("greater_equal")
logical_and = _binary_ctor("logical_and")
logical_or = _binary_ctor("logical_or")
exp = _unary_ctor("exp")
log = _unary_ctor("log")
sqrt = _unary_ctor("sqrt")
rsqrt = _unary_ctor("rsqrt")
tanh = _unary_ctor("tanh")
sigmoid = _unary_ctor("sigmoid")
erf = _unary_ctor("erf")
negative = _unary_ctor("negative")
abs = _unary_ctor("abs")  # noqa: A001 - mirrors R.abs
sin = _unary_ctor("sin")
cos = _unary_ctor("cos")
floor = _unary_ctor("floor")
ceil = _unary_ctor("ceil")
round = _unary_ctor("round")  # noqa: A001 - mirrors R.round
sign = _unary_ctor("sign")
reciprocal = _unary_ctor("reciprocal")
logical_not = _unary_ctor("logical_not")


def _bound(name: str, value: Any) -> float:
    """A clip bound as a float. TVM passes bounds as prim values and prints them
    as ``T.float64(0.5)`` (or a bare int), so those spellings are read too."""
    if isinstance(value, E.PrimValue):
        value = value.value
    if isinstance(value, (P.IntImm, P.FloatImm)):
        value = value.value
    try:
        return float(value)
    except (TypeError, ValueError):
        raise fail("clip", f"{name} must be a number, got {value!r}") from None


def clip(data: E.Expr, min: float, max: float) -> E.Call:  # noqa: A002 - TVM's names
    """Clamps every element into [min, max]."""
    return make_call("clip", [data], {"min": _bound("min", min), "max": _bound("max", max)})
