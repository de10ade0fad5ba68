"""Activations: relu, leakyrelu, gelu, gelu_tanh, silu, softmax, log_softmax."""

from __future__ import annotations

from ...ir import expr as E
from ...ir import struct_info as S
from ..attrs import as_int
from ..base import fail, is_float, make_call, norm_axis, op_name, register_op, tensor_arg

__all__ = ["relu", "leakyrelu", "gelu", "gelu_tanh", "silu", "softmax", "log_softmax"]

_FLOAT_ONLY = ("nn.gelu", "nn.gelu_tanh", "nn.silu", "nn.softmax", "nn.log_softmax")


def _infer_activation(call: E.Call) -> S.StructInfo:
    op = op_name(call)
    x = tensor_arg(call, 0, "data")
    if op in _FLOAT_ONLY and x.dtype is not None and not is_float(x.dtype):
        raise fail(op, f"needs a floating-point tensor, got {x.dtype}")
    if "axis" in call.attrs:
        if x.ndim == 0:
            raise fail(op, "data must have at least one dimension, got a scalar")
        if x.ndim != -1:
            norm_axis(op, call.attrs["axis"], x.ndim)
    return x


for _name in ("nn.relu", "nn.gelu", "nn.gelu_tanh", "nn.silu"):
    register_op(_name, _infer_activation, num_inputs=1, description="element-wise activation")
register_op("nn.leakyrelu", _infer_activation, num_inputs=1, attr_names=("alpha",))
for _name in ("nn.softmax", "nn.log_softmax"):
    register_op(_name, _infer_activation, num_inputs=1, attr_names=("axis",),
                description="normalised exponential along one axis")  # fmt: skip


def relu(data: E.Expr) -> E.Call:
    """max(data, 0)."""
    return make_call("nn.relu", [data])


def leakyrelu(data: E.Expr, alpha: float = 0.01) -> E.Call:
    """data where positive, alpha * data elsewhere."""
    return make_call("nn.leakyrelu", [data], {"alpha": float(alpha)})


def gelu(data: E.Expr) -> E.Call:
    """Exact GELU: 0.5 * x * (1 + erf(x / sqrt(2)))."""
    return make_call("nn.gelu", [data])


def gelu_tanh(data: E.Expr) -> E.Call:
    """GELU with the tanh approximation."""
    return make_call("nn.gelu_tanh", [data])


def silu(data: E.Expr) -> E.Call:
    """x * sigmoid(x)."""
    return make_call("nn.silu", [data])


def softmax(data: E.Expr, axis: int = -1) -> E.Call:
    """exp(x) / sum(exp(x)) along ``axis``."""
    return make_call("nn.softmax", [data], {"axis": as_int("nn.softmax", "axis", axis)})


def log_softmax(data: E.Expr, axis: int = -1) -> E.Call:
    """log(softmax(x)) along ``axis``."""
    return make_call("nn.log_softmax", [data], {"axis": as_int("nn.log_softmax", "axis", axis)})
