"""``nn.conv2d`` with strides, (top, left, bottom, right) padding, dilation, groups."""

from __future__ import annotations

from typing import Any

from ...ir import expr as E
from ...ir import prim as P
from ...ir import struct_info as S
from ..attrs import as_int, dtype_str, int_tuple, padding4
from ..base import (
    common_vdevice,
    dims_conflict,
    fail,
    format_shape,
    make_call,
    register_op,
    tensor_arg,
)
from .layout import arrange, check_layout, pick, window_out

__all__ = ["conv2d"]

OP = "nn.conv2d"
ATTRS = (
    "strides",
    "padding",
    "dilation",
    "groups",
    "data_layout",
    "kernel_layout",
    "out_layout",
    "out_dtype",
)


def _infer_conv2d(call: E.Call) -> S.StructInfo:
    data = tensor_arg(call, 0, "data")
    weight = tensor_arg(call, 1, "weight")
    at = call.attrs
    dl = check_layout(OP, "data_layout", at["data_layout"], "NCHW")
    kl = check_layout(OP, "kernel_layout", at["kernel_layout"], "OIHW")
    ol = check_layout(OP, "out_layout", at["out_layout"] or dl, "NCHW")
    dtype = at["out_dtype"]
    if dtype is None:
        if data.dtype is not None and weight.dtype is not None and data.dtype != weight.dtype:
            raise fail(OP, f"data is {data.dtype} but weight is {weight.dtype}; set out_dtype")
        dtype = data.dtype or weight.dtype
    vdev = common_vdevice([data, weight])
    for name, s in (("data", data), ("weight", weight)):
        if s.ndim not in (-1, 4):
            raise fail(OP, f"{name} must be 4-D, got {S.describe(s)}")
    if data.shape is None or weight.shape is None:
        return S.TensorStructInfo(None, dtype, 4, vdev)
    n, c, h, w = pick(data.shape, dl, "NCHW")
    o, i, kh, kw = pick(weight.shape, kl, "OIHW")
    groups = at["groups"]
    if groups <= 0:
        raise fail(OP, f"groups must be positive, got {groups}")
    if dims_conflict(c, P.mul(i, groups)):
        raise fail(
            OP,
            f"data channels {P.to_str(c)} (data {format_shape(data.shape)}) must equal weight "
            f"in-channels x groups = {P.to_str(i)} x {groups} (weight {format_shape(weight.shape)})",
        )
    oc = P.const_value(o)
    if oc is not None and oc % groups:
        raise fail(OP, f"weight out-channels {oc} are not divisible by groups {groups}")
    pt, pl, pb, pr = at["padding"]
    sh, sw = at["strides"]
    dh, dw = at["dilation"]
    oh = window_out(OP, "height", h, pt, pb, kh, sh, dh)
    ow = window_out(OP, "width", w, pl, pr, kw, sw, dw)
    return S.TensorStructInfo(arrange({"N": n, "C": o, "H": oh, "W": ow}, ol), dtype, vdevice=vdev)


register_op(OP, _infer_conv2d, num_inputs=2, attr_names=ATTRS, description="2-D convolution")


def conv2d(
    data: E.Expr,
    weight: E.Expr,
    strides: Any = (1, 1),
    padding: Any = (0, 0),
    dilation: Any = (1, 1),
    groups: int = 1,
    data_layout: str = "NCHW",
    kernel_layout: str = "OIHW",
    out_layout: str | None = None,
    out_dtype: Any = None,
) -> E.Call:
    """2-D convolution (cross-correlation) of NCHW data with OIHW weights.

    ``out_layout=None`` means "as ``data_layout``" and is stored as that layout,
    as TVM does, so a call built here and the one TVM prints
    (``out_layout="NCHW"``) are the same call.
    """
    attrs = conv2d_attrs(OP, strides, padding, dilation, groups, data_layout, kernel_layout, out_layout, out_dtype)
    return make_call(OP, [data, weight], attrs)


def conv2d_attrs(
    op: str,
    strides: Any,
    padding: Any,
    dilation: Any,
    groups: int,
    data_layout: str,
    kernel_layout: str,
    out_layout: str | None,
    out_dtype: Any,
) -> dict[str, Any]:
    """The normalised attrs of ``nn.conv2d`` (shared by the ops built on it);
    errors name ``op``."""
    return {
        "strides": int_tuple(op, "strides", strides, 2),
        "padding": padding4(op, padding),
        "dilation": int_tuple(op, "dilation", dilation, 2),
        "groups": as_int(op, "groups", groups),
        "data_layout": str(data_layout),
        "kernel_layout": str(kernel_layout),
        "out_layout": str(data_layout if out_layout is None else out_layout),
        "out_dtype": dtype_str(out_dtype),
    }
