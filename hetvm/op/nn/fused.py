"""``nn.conv2d_bias_act``: a convolution, a per-output-channel bias and an activation in one op.

Not imported by the ONNX frontend; ``FuseConvEpilogue`` builds it from
``nn.conv2d`` + ``add`` of a per-channel constant + ``nn.relu`` so the three run
as one kernel (the bias add and the activation in place on the conv's output).
Struct info is ``nn.conv2d``'s; ``bias`` is a 1-D tensor of one value per output
channel in the result's dtype.
"""

from __future__ import annotations

from typing import Any

from ...ir import expr as E
from ...ir import prim as P
from ...ir import struct_info as S
from ...ir.op_registry import get_op, infer_call
from ..base import fail, make_call, register_op, tensor_arg
from .conv import ATTRS as CONV_ATTRS
from .conv import conv2d_attrs

__all__ = ["conv2d_bias_act"]

OP = "nn.conv2d_bias_act"
ACTIVATIONS = ("none", "relu")
ATTRS = CONV_ATTRS + ("activation",)


def _infer_conv2d_bias_act(call: E.Call) -> S.StructInfo:
    activation = call.attrs.get("activation")
    if activation not in ACTIVATIONS:
        raise fail(OP, f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    bias = tensor_arg(call, 2, "bias")
    conv_attrs = {k: call.attrs[k] for k in CONV_ATTRS}
    conv = E.Call(get_op("nn.conv2d"), tuple(call.args[:2]), E.Attrs(conv_attrs), ())
    out = infer_call(conv)
    assert isinstance(out, S.TensorStructInfo)
    if bias.ndim not in (-1, 1):
        raise fail(OP, f"bias must be 1-D (one value per output channel), got {S.describe(bias)}")
    if bias.dtype is not None and out.dtype is not None and bias.dtype != out.dtype:
        raise fail(OP, f"bias is {bias.dtype} but the convolution's result is {out.dtype}")
    if bias.shape is not None and out.shape is not None:
        c = P.const_value(out.shape[out_layout_channel(conv_attrs)])
        b = P.const_value(bias.shape[0])
        if c is not None and b is not None and b != c:
            raise fail(OP, f"bias has {b} values but the convolution has {c} output channels")
    return out


def out_layout_channel(attrs: dict) -> int:
    layout = attrs.get("out_layout") or attrs.get("data_layout") or "NCHW"
    return str(layout).index("C")


register_op(OP, _infer_conv2d_bias_act, num_inputs=3, attr_names=ATTRS,
            description="2-D convolution + per-channel bias + activation")  # fmt: skip


def conv2d_bias_act(
    data: E.Expr,
    weight: E.Expr,
    bias: E.Expr,
    strides: Any = (1, 1),
    padding: Any = (0, 0),
    dilation: Any = (1, 1),
    groups: int = 1,
    data_layout: str = "NCHW",
    kernel_layout: str = "OIHW",
    out_layout: str | None = None,
    out_dtype: Any = None,
    activation: str = "none",
) -> E.Call:
    """``activation(nn.conv2d(data, weight, ...) + bias[c])``; ``activation`` is
    ``"relu"`` or ``"none"``; the conv attrs are ``nn.conv2d``'s."""
    attrs = conv2d_attrs(OP, strides, padding, dilation, groups, data_layout, kernel_layout, out_layout, out_dtype)
    attrs["activation"] = str(activation)
    return make_call(OP, [data, weight, bias], attrs)
