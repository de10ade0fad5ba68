"""TVM Relax nn ops TVM's own test modules use: ``nn.conv1d``, ``nn.rms_norm``,
``nn.group_norm``, with TVM's signatures and attrs."""

from __future__ import annotations

from typing import Any, Sequence

from ...ir import expr as E
from ...ir import prim as P
from ...ir import struct_info as S
from ..attrs import as_int, axes_tuple, dtype_str, int_tuple
from ..base import (
    common_vdevice,
    dims_conflict,
    fail,
    format_shape,
    is_float,
    make_call,
    norm_axes,
    norm_axis,
    register_op,
    tensor_arg,
)
from .conv import infer_conv

__all__ = ["conv1d", "rms_norm", "group_norm"]

CONV1D_ATTRS = ("strides", "padding", "dilation", "groups", "data_layout", "kernel_layout", "out_layout", "out_dtype")


def _infer_conv1d(call: E.Call) -> S.StructInfo:
    return infer_conv(call, "NCW", "OIW")


def _norm_params(op: str, call: E.Call, data: S.TensorStructInfo, names: Sequence[str], shape: Any) -> list:
    params = [tensor_arg(call, i + 1, name) for i, name in enumerate(names)]
    for name, p in zip(names, params):
        if data.dtype is not None and p.dtype is not None and p.dtype != data.dtype:
            raise fail(op, f"{name} is {p.dtype} but data is {data.dtype}")
        if shape is not None and p.shape is not None:
            if len(p.shape) != len(shape) or any(dims_conflict(a, b) for a, b in zip(p.shape, shape)):
                raise fail(op, f"{name} has shape {format_shape(p.shape)}, data needs {format_shape(shape)}")
    return params


def _infer_rms_norm(call: E.Call) -> S.StructInfo:
    op = "nn.rms_norm"
    data = tensor_arg(call, 0, "data")
    if data.dtype is not None and not is_float(data.dtype):
        raise fail(op, f"needs a floating-point tensor, got {data.dtype}")
    shape = None
    if data.ndim != -1:
        axes = norm_axes(op, call.attrs["axes"], data.ndim)
        if data.shape is not None:
            shape = tuple(data.shape[a] for a in axes)
    params = _norm_params(op, call, data, ("weight",), shape)
    return S.TensorStructInfo(data.shape, data.dtype, data.ndim, common_vdevice([data, *params]))


def _infer_group_norm(call: E.Call) -> S.StructInfo:
    op = "nn.group_norm"
    data = tensor_arg(call, 0, "data")
    if data.dtype is not None and not is_float(data.dtype):
        raise fail(op, f"needs a floating-point tensor, got {data.dtype}")
    groups = call.attrs["num_groups"]
    if groups <= 0:
        raise fail(op, f"num_groups must be positive, got {groups}")
    shape = None
    if data.ndim != -1:
        ch = norm_axis(op, call.attrs["channel_axis"], data.ndim)
        axes = norm_axes(op, call.attrs["axes"], data.ndim)
        if ch in axes:
            raise fail(op, f"channel_axis {ch} cannot be one of the reduced axes {axes}")
        if data.shape is not None:
            c = P.const_value(data.shape[ch])
            if c is not None and c % groups:
                raise fail(op, f"channels {c} are not divisible by num_groups {groups}")
            shape = (data.shape[ch],)
    params = _norm_params(op, call, data, ("gamma", "beta"), shape)
    return S.TensorStructInfo(data.shape, data.dtype, data.ndim, common_vdevice([data, *params]))


register_op("nn.conv1d", _infer_conv1d, num_inputs=2, attr_names=CONV1D_ATTRS, description="1-D convolution")
register_op("nn.rms_norm", _infer_rms_norm, num_inputs=2, attr_names=("axes", "epsilon"),
            description="x / sqrt(mean(x^2 over axes) + epsilon) * weight")  # fmt: skip
register_op("nn.group_norm", _infer_group_norm, num_inputs=3,
            attr_names=("num_groups", "channel_axis", "axes", "epsilon", "center", "scale"),
            description="normalisation over groups of channels and axes, then gamma/beta per channel")  # fmt: skip


def _pad2(op: str, value: Any) -> tuple[int, int]:
    if isinstance(value, (tuple, list)):
        items = tuple(as_int(op, "padding", v) for v in value)
        if len(items) == 1:
            return (items[0], items[0])
        if len(items) == 2:
            return items  # type: ignore[return-value]
        raise fail(op, f"attribute 'padding' needs 1 or 2 values, got {items}")
    p = as_int(op, "padding", value)
    return (p, p)


def conv1d(
    data: E.Expr,
    weight: E.Expr,
    strides: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
    data_layout: str = "NCW",
    kernel_layout: str = "OIW",
    out_layout: str | None = None,
    out_dtype: Any = None,
) -> E.Call:
    """1-D convolution (cross-correlation) of NCW data with OIW weights; padding is
    (left, right). ``out_layout=None`` is stored as ``data_layout``, as TVM does."""
    op = "nn.conv1d"
    attrs = {
        "strides": int_tuple(op, "strides", strides, 1),
        "padding": _pad2(op, padding),
        "dilation": int_tuple(op, "dilation", dilation, 1),
        "groups": as_int(op, "groups", groups),
        "data_layout": str(data_layout),
        "kernel_layout": str(kernel_layout),
        "out_layout": str(data_layout if out_layout is None else out_layout),
        "out_dtype": dtype_str(out_dtype),
    }
    return make_call(op, [data, weight], attrs)


def rms_norm(data: E.Expr, weight: E.Expr, axes: int | Sequence[int] = -1, epsilon: float = 1e-5) -> E.Call:
    """Root-mean-square normalisation over ``axes``, scaled by ``weight``."""
    attrs = {"axes": axes_tuple("nn.rms_norm", "axes", axes), "epsilon": float(epsilon)}
    return make_call("nn.rms_norm", [data, weight], attrs)


def group_norm(
    data: E.Expr,
    gamma: E.Expr,
    beta: E.Expr,
    num_groups: int,
    channel_axis: int,
    axes: int | Sequence[int],
    epsilon: float = 1e-5,
    center: bool = True,
    scale: bool = True,
) -> E.Call:
    """Group normalisation: the channels split into ``num_groups`` groups, each
    normalised over its channels and ``axes``; then ``gamma`` / ``beta`` per channel."""
    op = "nn.group_norm"
    attrs = {
        "num_groups": as_int(op, "num_groups", num_groups),
        "channel_axis": as_int(op, "channel_axis", channel_axis),
        "axes": axes_tuple(op, "axes", axes),
        "epsilon": float(epsilon),
        "center": bool(center),
        "scale": bool(scale),
    }
    return make_call(op, [data, gamma, beta], attrs)
