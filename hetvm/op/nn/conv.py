"""``nn.conv2d`` with strides, (top, left, bottom, right) padding, dilation, groups."""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class ConvOperands:
    """What every convolution's struct-info rule reads first: both operands,
    the three layouts checked against the canonical letters, the result dtype
    and the common vdevice."""

    data: S.TensorStructInfo
    weight: S.TensorStructInfo
    data_layout: str
    kernel_layout: str
    out_layout: str
    dtype: str | None
    vdevice: Any


def conv_operands(op: str, call: E.Call, data_letters: str, kernel_letters: str) -> ConvOperands:
    """Check and collect the operands of a convolution-like call (``nn.conv1d``,
    ``nn.conv2d`` and the transposed ones); errors name ``op``."""
    data = tensor_arg(call, 0, "data")
    weight = tensor_arg(call, 1, "weight")
    at = call.attrs
    dl = check_layout(op, "data_layout", at["data_layout"], data_letters)
    kl = check_layout(op, "kernel_layout", at["kernel_layout"], kernel_letters)
    ol = check_layout(op, "out_layout", at["out_layout"] or dl, data_letters)
    dtype = at["out_dtype"]
    if dtype is None:
        if data.dtype is not None and weight.dtype is not None and data.dtype != weight.dtype:
            raise fail(op, f"data is {data.dtype} but weight is {weight.dtype}; set out_dtype")
        dtype = data.dtype or weight.dtype
    for name, s in (("data", data), ("weight", weight)):
        if s.ndim not in (-1, len(data_letters)):
            raise fail(op, f"{name} must be {len(data_letters)}-D, got {S.describe(s)}")
    return ConvOperands(data, weight, dl, kl, ol, dtype, common_vdevice([data, weight]))


_AXIS_NAMES = {"D": "depth", "H": "height", "W": "width"}


def infer_conv(call: E.Call, data_letters: str, kernel_letters: str) -> S.StructInfo:
    """Struct info of an N-d convolution: data ``N C <spatial>``, weight
    ``O I <spatial>``, padding all begins then all ends (TVM's order)."""
    op = call.op.name  # type: ignore[attr-defined]
    x = conv_operands(op, call, data_letters, kernel_letters)
    if x.data.shape is None or x.weight.shape is None:
        return S.TensorStructInfo(None, x.dtype, len(data_letters), x.vdevice)
    n, c, *sizes = pick(x.data.shape, x.data_layout, data_letters)
    o, i, *kernel = pick(x.weight.shape, x.kernel_layout, kernel_letters)
    at = call.attrs
    groups = at["groups"]
    if groups <= 0:
        raise fail(op, f"groups must be positive, got {groups}")
    if dims_conflict(c, P.mul(i, groups)):
        raise fail(
            op,
            f"data channels {P.to_str(c)} (data {format_shape(x.data.shape)}) must equal weight "
            f"in-channels x groups = {P.to_str(i)} x {groups} (weight {format_shape(x.weight.shape)})",
        )
    oc = P.const_value(o)
    if oc is not None and oc % groups:
        raise fail(op, f"weight out-channels {oc} are not divisible by groups {groups}")
    spatial = data_letters[2:]
    pad, nd = at["padding"], len(spatial)
    dims: dict[str, P.PrimExpr] = {"N": n, "C": o}
    for axis, letter in enumerate(spatial):
        dims[letter] = window_out(op, _AXIS_NAMES[letter], sizes[axis], pad[axis], pad[axis + nd], kernel[axis],
                                  at["strides"][axis], at["dilation"][axis])  # fmt: skip
    return S.TensorStructInfo(arrange(dims, x.out_layout), x.dtype, vdevice=x.vdevice)


def _infer_conv2d(call: E.Call) -> S.StructInfo:
    return infer_conv(call, "NCHW", "OIHW")


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
