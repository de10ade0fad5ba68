"""``nn.conv2d_transpose`` and ``nn.conv1d_transpose``: transposed convolution
("deconvolution"), the gradient of a convolution with respect to its data.

TVM Relax's signatures, attrs and defaults: weights are IOHW / IOW
``(in_channels, out_channels / groups, kernel...)``; the result has
``out_channels = weight.O * groups`` channels and, per spatial axis,

    out = (in - 1) * stride - pad_begin - pad_end + dilation * (k - 1) + output_padding + 1

``output_padding`` adds rows at the end (it picks one of the input sizes a
strided convolution maps to the same output size), so as in TVM it must be
smaller than the stride.
"""

from __future__ import annotations

from typing import Any

from ...errors import StructInfoError
from ...ir import expr as E
from ...ir import prim as P
from ...ir import struct_info as S
from ..attrs import as_int, dtype_str, int_tuple, padding4
from ..base import (
    dims_conflict,
    fail,
    format_shape,
    make_call,
    register_op,
)
from .conv import conv_operands
from .layout import arrange, pick

__all__ = ["conv1d_transpose", "conv2d_transpose", "transpose_out"]

OP2 = "nn.conv2d_transpose"
OP1 = "nn.conv1d_transpose"
ATTRS = (
    "strides",
    "padding",
    "output_padding",
    "dilation",
    "groups",
    "data_layout",
    "kernel_layout",
    "out_layout",
    "out_dtype",
)
#: per op: (spatial letters, canonical data layout, canonical kernel layout)
_FORMS = {OP2: ("HW", "NCHW", "IOHW"), OP1: ("W", "NCW", "IOW")}
_AXIS_NAMES = {"H": "height", "W": "width"}


def transpose_out(
    size: P.IntLike, kernel: P.IntLike, stride: int, pad_begin: int, pad_end: int, dilation: int, output_padding: int
) -> P.PrimExpr:
    """One spatial output length (the formula in the module docstring)."""
    full = P.add(P.add(P.mul(P.sub(size, 1), stride), P.mul(P.sub(kernel, 1), dilation)), 1)
    return P.add(P.sub(full, pad_begin + pad_end), output_padding)


def _check_attrs(op: str, at: E.Attrs) -> None:
    """Attr rules that hold whatever the shapes (TVM's, plus non-negative pads)."""
    groups = at["groups"]
    if groups <= 0:
        raise fail(op, f"groups must be positive, got {groups}")
    strides, dilation, opad, pad = at["strides"], at["dilation"], at["output_padding"], at["padding"]
    if any(s <= 0 for s in strides) or any(d <= 0 for d in dilation):
        raise fail(op, f"strides and dilation must be positive, got strides {strides}, dilation {dilation}")
    if any(p < 0 for p in pad) or any(p < 0 for p in opad):
        raise fail(op, f"padding and output_padding must be non-negative, got padding {pad}, "
                       f"output_padding {opad}")  # fmt: skip
    if any(p >= s for p, s in zip(opad, strides)):
        raise fail(op, f"output_padding {opad} must be smaller than strides {strides}")


def _infer(call: E.Call) -> S.StructInfo:
    op = call.op.name  # type: ignore[attr-defined]
    spatial, data_letters, kernel_letters = _FORMS[op]
    nd = len(spatial)
    at = call.attrs
    x = conv_operands(op, call, data_letters, kernel_letters)
    _check_attrs(op, at)
    data, weight, dtype, vdev = x.data, x.weight, x.dtype, x.vdevice
    if data.shape is None or weight.shape is None:
        return S.TensorStructInfo(None, dtype, nd + 2, vdev)
    dl, kl, ol = x.data_layout, x.kernel_layout, x.out_layout
    n, c, *sizes = pick(data.shape, dl, data_letters)
    i, o, *kernel = pick(weight.shape, kl, kernel_letters)
    groups = at["groups"]
    if dims_conflict(c, i):
        raise fail(
            op,
            f"data channels {P.to_str(c)} (data {format_shape(data.shape)}) must equal weight "
            f"in-channels {P.to_str(i)} (weight {format_shape(weight.shape)}, layout {kl})",
        )
    ic = P.const_value(i)
    if ic is not None and ic % groups:
        raise fail(op, f"weight in-channels {ic} are not divisible by groups {groups}")
    pad = at["padding"]
    dims: dict[str, P.PrimExpr] = {"N": n, "C": P.mul(o, groups)}
    for axis, letter in enumerate(spatial):
        out = transpose_out(sizes[axis], kernel[axis], at["strides"][axis], pad[axis], pad[axis + nd],
                            at["dilation"][axis], at["output_padding"][axis])  # fmt: skip
        value = P.const_value(out)
        if value is not None and value <= 0:
            raise fail(
                op,
                f"output {_AXIS_NAMES[letter]} would be {value}: input {P.to_str(sizes[axis])}, kernel "
                f"{P.to_str(kernel[axis])}, stride {at['strides'][axis]}, dilation {at['dilation'][axis]}, "
                f"padding ({pad[axis]}, {pad[axis + nd]}), output_padding {at['output_padding'][axis]}",
            )
        dims[letter] = out
    return S.TensorStructInfo(arrange(dims, ol), dtype, vdevice=vdev)


register_op(OP2, _infer, num_inputs=2, attr_names=ATTRS, description="2-D transposed convolution")
register_op(OP1, _infer, num_inputs=2, attr_names=ATTRS, description="1-D transposed convolution")


def _attrs(
    op: str,
    nd: int,
    strides: Any,
    padding: Any,
    output_padding: Any,
    dilation: Any,
    groups: int,
    data_layout: str,
    kernel_layout: str,
    out_layout: str | None,
    out_dtype: Any,
) -> dict[str, Any]:
    """Normalised attrs, as TVM stores them: 1-D padding (left, right), 2-D
    padding (top, left, bottom, right); out_layout None stored as data_layout."""
    if nd == 2:
        pads = padding4(op, padding)
    else:
        pads = int_tuple(op, "padding", padding, 2)
    return {
        "strides": int_tuple(op, "strides", strides, nd),
        "padding": pads,
        "output_padding": int_tuple(op, "output_padding", output_padding, nd),
        "dilation": int_tuple(op, "dilation", dilation, nd),
        "groups": as_int(op, "groups", groups),
        "data_layout": str(data_layout),
        "kernel_layout": str(kernel_layout),
        "out_layout": str(data_layout if out_layout is None else out_layout),
        "out_dtype": dtype_str(out_dtype),
    }


def conv2d_transpose(
    data: E.Expr,
    weight: E.Expr,
    strides: Any = (1, 1),
    padding: Any = (0, 0),
    output_padding: Any = (0, 0),
    dilation: Any = (1, 1),
    groups: int = 1,
    data_layout: str = "NCHW",
    kernel_layout: str = "IOHW",
    out_layout: str | None = None,
    out_dtype: Any = None,
) -> E.Call:
    """2-D transposed convolution of NCHW data with IOHW weights (TVM Relax's
    ``R.nn.conv2d_transpose``); ``padding`` crops the full result, 1, 2 or 4 values."""
    try:
        attrs = _attrs(OP2, 2, strides, padding, output_padding, dilation, groups, data_layout,
                       kernel_layout, out_layout, out_dtype)  # fmt: skip
    except StructInfoError as err:
        raise _named(err, OP2) from None
    return make_call(OP2, [data, weight], attrs)


def conv1d_transpose(
    data: E.Expr,
    weight: E.Expr,
    strides: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
    data_layout: str = "NCW",
    kernel_layout: str = "IOW",
    out_layout: str | None = None,
    out_dtype: Any = None,
) -> E.Call:
    """1-D transposed convolution of NCW data with IOW weights (TVM Relax's
    ``R.nn.conv1d_transpose``); ``padding`` is 1 or 2 values (left, right)."""
    try:
        attrs = _attrs(OP1, 1, strides, padding, output_padding, dilation, groups, data_layout,
                       kernel_layout, out_layout, out_dtype)  # fmt: skip
    except StructInfoError as err:
        raise _named(err, OP1) from None
    return make_call(OP1, [data, weight], attrs)


def _named(err: StructInfoError, op: str) -> StructInfoError:
    """``err`` with the op named (``dtype_str`` does not know which op asked)."""
    text = str(err)
    return err if text.startswith(f"op '{op}'") else StructInfoError(f"op '{op}': {text}")
