"""Fused ops hetvm's passes build; the ONNX frontend never imports them.

* ``nn.conv2d_bias_act(data, weight, bias)``: a convolution, a per-output-channel
  bias and an activation. ``FuseConvEpilogue`` builds it from ``nn.conv2d`` +
  ``add`` of a per-channel constant + ``nn.relu`` so the three run as one kernel
  (the bias add and the activation in place on the conv's output).
* ``nn.conv2d_bias_add_act(data, weight, bias, residual)``: the same with a
  residual tensor of exactly the result's shape and dtype added before the
  activation (a ResNet block's ``relu(conv(x) + b + shortcut)``). A separate op
  rather than an optional argument so each op keeps one fixed arity and one
  plain destination-passing kernel signature.
* ``nn.max_pool2d_bias_act(data, bias)``: ``activation(max_pool2d(data) + bias[c])``.
  ``FusePoolEpilogue`` builds it from a convolution's bias and activation moved past
  the max pool that follows (both monotone, so they commute with the maximum), so
  they run in place on the pooled, smaller tensor.
* ``nn.scale_shift_act(data, scale, shift)``: ``activation(data * scale[c] +
  shift[c])`` with the channel on axis 1 of a tensor of rank 2 or more (NCHW,
  NCL, NC, ...). ``FuseChannelAffine`` builds it from a chain of ``multiply`` /
  ``add`` by per-channel constants (+ ``nn.relu``), e.g. DenseNet's batch norms
  after a concat, where FoldScaleAxis has no convolution to fold them into.

Struct info of the conv ops is ``nn.conv2d``'s, of ``nn.scale_shift_act``
``data``'s; ``bias``, ``scale`` and ``shift`` are 1-D tensors of one value per
channel in the result's dtype. Activations: ``"none"`` or ``"relu"``.
"""

from __future__ import annotations

from typing import Any

from ...errors import StructInfoError
from ...ir import expr as E
from ...ir import prim as P
from ...ir import struct_info as S
from ...ir.op_registry import get_op, infer_call
from ..base import (
    common_vdevice,
    dims_conflict,
    fail,
    format_shape,
    make_call,
    register_op,
    tensor_arg,
)
from .conv import ATTRS as CONV_ATTRS
from .conv import conv2d_attrs
from .pool import POOL_ATTRS, _infer_pool2d, _pool_attrs

__all__ = ["conv2d_bias_act", "conv2d_bias_add_act", "max_pool2d_bias_act", "scale_shift_act"]

OP = "nn.conv2d_bias_act"
OP_ADD = "nn.conv2d_bias_add_act"
OP_AFFINE = "nn.scale_shift_act"
OP_POOL = "nn.max_pool2d_bias_act"
ACTIVATIONS = ("none", "relu")
ATTRS = CONV_ATTRS + ("activation",)


def _check_activation(op: str, call: E.Call) -> None:
    activation = call.attrs.get("activation")
    if activation not in ACTIVATIONS:
        raise fail(op, f"activation must be one of {ACTIVATIONS}, got {activation!r}")


def _infer_conv_bias(op: str, call: E.Call) -> S.TensorStructInfo:
    """The conv's struct info, after checking the activation and the bias."""
    _check_activation(op, call)
    bias = tensor_arg(call, 2, "bias")
    conv_attrs = {k: call.attrs[k] for k in CONV_ATTRS}
    conv = E.Call(get_op("nn.conv2d"), tuple(call.args[:2]), E.Attrs(conv_attrs), ())
    try:
        out = infer_call(conv)
    except StructInfoError as err:  # name the op the user wrote
        raise fail(op, str(err).replace("op 'nn.conv2d': ", "the convolution: ", 1)) from None
    assert isinstance(out, S.TensorStructInfo)
    channels = out.shape[out_layout_channel(conv_attrs)] if out.shape is not None else None
    if bias.ndim not in (-1, 1):
        raise fail(op, f"bias must be 1-D (one value per output channel), got {S.describe(bias)}")
    if bias.dtype is not None and out.dtype is not None and bias.dtype != out.dtype:
        raise fail(op, f"bias is {bias.dtype} but the convolution's result is {out.dtype}")
    if bias.shape is not None and channels is not None:
        c, b = P.const_value(channels), P.const_value(bias.shape[0])
        if c is not None and b is not None and b != c:
            raise fail(op, f"bias has {b} values but the convolution has {c} output channels")
    return out


def _infer_conv2d_bias_act(call: E.Call) -> S.StructInfo:
    return _infer_conv_bias(OP, call)


def _infer_conv2d_bias_add_act(call: E.Call) -> S.StructInfo:
    out = _infer_conv_bias(OP_ADD, call)
    residual = tensor_arg(call, 3, "residual")
    if residual.dtype is not None and out.dtype is not None and residual.dtype != out.dtype:
        raise fail(OP_ADD, f"residual is {residual.dtype} but the convolution's result is {out.dtype}")
    if residual.ndim not in (-1, 4):
        raise fail(OP_ADD, f"residual must have the convolution's 4-D shape, got {S.describe(residual)}")
    if residual.shape is not None and out.shape is not None:
        if any(dims_conflict(a, b) for a, b in zip(residual.shape, out.shape)):
            raise fail(
                OP_ADD,
                f"residual {format_shape(residual.shape)} must have the convolution's shape "
                f"{format_shape(out.shape)} (no broadcasting)",
            )
    dtype = out.dtype or residual.dtype
    vdev = common_vdevice([call.args[0].struct_info, call.args[1].struct_info, residual])
    return S.TensorStructInfo(out.shape, dtype, out.ndim, vdev)


def _check_channel_vector(op: str, vec: S.TensorStructInfo, what: str, data: S.TensorStructInfo) -> None:
    """``vec`` holds one value per channel (axis 1) of ``data``, in its dtype."""
    channels = data.shape[1] if data.shape is not None else None
    if vec.ndim not in (-1, 1):
        raise fail(op, f"{what} must be 1-D (one value per channel), got {S.describe(vec)}")
    if vec.dtype is not None and data.dtype is not None and vec.dtype != data.dtype:
        raise fail(op, f"{what} is {vec.dtype} but data is {data.dtype}")
    if vec.shape is not None and channels is not None and dims_conflict(vec.shape[0], channels):
        raise fail(
            op,
            f"{what} has {P.to_str(vec.shape[0])} values but data {format_shape(data.shape)} "
            f"has {P.to_str(channels)} channels on axis 1",
        )


def _infer_max_pool2d_bias_act(call: E.Call) -> S.StructInfo:
    _check_activation(OP_POOL, call)
    out = _infer_pool2d(call)
    assert isinstance(out, S.TensorStructInfo)
    bias = tensor_arg(call, 1, "bias")
    _check_channel_vector(OP_POOL, bias, "bias", tensor_arg(call, 0, "data"))
    vdev = common_vdevice([a.struct_info for a in call.args])
    return S.TensorStructInfo(out.shape, out.dtype, out.ndim, vdev)


def _infer_scale_shift_act(call: E.Call) -> S.StructInfo:
    _check_activation(OP_AFFINE, call)
    data = tensor_arg(call, 0, "data")
    if data.ndim in (0, 1):
        raise fail(OP_AFFINE, f"data must have a channel axis 1 (rank 2 or more), got {S.describe(data)}")
    for index, what in ((1, "scale"), (2, "shift")):
        _check_channel_vector(OP_AFFINE, tensor_arg(call, index, what), what, data)
    vdev = common_vdevice([a.struct_info for a in call.args])
    return S.TensorStructInfo(data.shape, data.dtype, data.ndim, vdev)


def out_layout_channel(attrs: dict) -> int:
    layout = attrs.get("out_layout") or attrs.get("data_layout") or "NCHW"
    return str(layout).index("C")


# ``fused_from``: the ops whose work a fused op does. A device configured without
# a kernel for one of them has none for the fused op either (see
# ``op_registry.fused_parts``), so a missing kernel is respected after fusion.
register_op(OP, _infer_conv2d_bias_act, num_inputs=3, attr_names=ATTRS,
            description="2-D convolution + per-channel bias + activation",
            fused_from=("nn.conv2d", "add", "nn.relu"))  # fmt: skip
register_op(OP_ADD, _infer_conv2d_bias_add_act, num_inputs=4, attr_names=ATTRS,
            description="2-D convolution + per-channel bias + residual tensor + activation",
            fused_from=("nn.conv2d", "add", "nn.relu"))  # fmt: skip
register_op(OP_POOL, _infer_max_pool2d_bias_act, num_inputs=2, attr_names=POOL_ATTRS + ("activation",),
            description="2-D max pooling + per-channel bias + activation",
            fused_from=("nn.max_pool2d", "add", "nn.relu"))  # fmt: skip
register_op(OP_AFFINE, _infer_scale_shift_act, num_inputs=3, attr_names=("activation",),
            description="per-channel (axis 1) scale and shift + activation",
            fused_from=("multiply", "add", "nn.relu"))  # fmt: skip


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


def conv2d_bias_add_act(
    data: E.Expr,
    weight: E.Expr,
    bias: E.Expr,
    residual: E.Expr,
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
    """``activation(nn.conv2d(data, weight, ...) + bias[c] + residual)`` with
    ``residual`` of exactly the convolution's shape and dtype (no broadcasting)."""
    attrs = conv2d_attrs(OP_ADD, strides, padding, dilation, groups, data_layout, kernel_layout, out_layout, out_dtype)
    attrs["activation"] = str(activation)
    return make_call(OP_ADD, [data, weight, bias, residual], attrs)


def scale_shift_act(data: E.Expr, scale: E.Expr, shift: E.Expr, activation: str = "none") -> E.Call:
    """``activation(data * scale[c] + shift[c])``, ``c`` the index on axis 1;
    ``activation`` is ``"relu"`` or ``"none"``."""
    return make_call(OP_AFFINE, [data, scale, shift], {"activation": str(activation)})


def max_pool2d_bias_act(
    data: E.Expr,
    bias: E.Expr,
    pool_size: Any = (1, 1),
    strides: Any = (1, 1),
    padding: Any = (0, 0),
    dilation: Any = (1, 1),
    ceil_mode: bool = False,
    count_include_pad: bool = False,
    layout: str = "NCHW",
    out_layout: str | None = None,
    activation: str = "none",
) -> E.Call:
    """``activation(nn.max_pool2d(data, ...) + bias[c])``; the pool attrs are
    ``nn.max_pool2d``'s."""
    attrs = _pool_attrs(OP_POOL, pool_size, strides, padding, dilation, ceil_mode, count_include_pad,
                        layout, out_layout)  # fmt: skip
    attrs["activation"] = str(activation)
    return make_call(OP_POOL, [data, bias], attrs)
