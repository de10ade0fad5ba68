"""``matmul``: NumPy matmul semantics (batch broadcasting, 1-D promotion)."""

from __future__ import annotations

from typing import Any

from ..errors import StructInfoError
from ..ir import expr as E
from ..ir import struct_info as S
from .attrs import dtype_str
from .base import (
    broadcast_shapes,
    common_vdevice,
    dims_conflict,
    fail,
    format_shape,
    make_call,
    register_op,
    tensor_arg,
)

__all__ = ["matmul", "det"]


def _infer_matmul(call: E.Call) -> S.StructInfo:
    a = tensor_arg(call, 0, "lhs")
    b = tensor_arg(call, 1, "rhs")
    out_dtype = call.attrs.get("out_dtype")
    if out_dtype is None:
        if a.dtype is not None and b.dtype is not None and a.dtype != b.dtype:
            raise fail("matmul", f"operand dtypes differ: lhs is {a.dtype}, rhs is {b.dtype}")
        out_dtype = a.dtype or b.dtype
    vdev = common_vdevice([a, b])
    for side, s in (("lhs", a), ("rhs", b)):
        if s.ndim == 0:
            raise fail("matmul", f"{side} must have at least one dimension, got a scalar")
    if a.ndim == -1 or b.ndim == -1:
        return S.TensorStructInfo(None, out_dtype, -1, vdev)
    if a.shape is None or b.shape is None:
        if a.ndim == 1 and b.ndim == 1:
            return S.TensorStructInfo(None, out_dtype, 0, vdev)
        ndim = max(a.ndim, b.ndim) - (1 if min(a.ndim, b.ndim) == 1 else 0)
        return S.TensorStructInfo(None, out_dtype, ndim, vdev)
    ashape = (1,) + tuple(a.shape) if a.ndim == 1 else tuple(a.shape)
    bshape = tuple(b.shape) + (1,) if b.ndim == 1 else tuple(b.shape)
    if dims_conflict(ashape[-1], bshape[-2]):
        raise fail(
            "matmul",
            f"inner dimensions differ: lhs {format_shape(a.shape)} vs rhs {format_shape(b.shape)}",
        )
    try:
        batch = broadcast_shapes("matmul", ashape[:-2], bshape[:-2])
    except StructInfoError:
        raise fail(
            "matmul",
            f"batch dimensions cannot be broadcast: lhs {format_shape(a.shape)} vs "
            f"rhs {format_shape(b.shape)}",
        ) from None
    out = list(batch)
    if a.ndim != 1:
        out.append(ashape[-2])
    if b.ndim != 1:
        out.append(bshape[-1])
    return S.TensorStructInfo(out, out_dtype, vdevice=vdev)


register_op(
    "matmul",
    _infer_matmul,
    num_inputs=2,
    attr_names=("out_dtype",),
    description="matrix product with NumPy matmul broadcasting",
)


def matmul(x1: E.Expr, x2: E.Expr, out_dtype: Any = None) -> E.Call:
    """Matrix product ``x1 @ x2`` (NumPy rules); ``out_dtype`` None keeps the input dtype."""
    return make_call("matmul", [x1, x2], {"out_dtype": dtype_str(out_dtype)})


def _infer_det(call: E.Call) -> S.StructInfo:
    x = tensor_arg(call, 0, "data")
    if x.dtype is not None and not x.dtype.startswith("float"):
        raise StructInfoError(f"op 'det': needs a floating-point tensor, got {x.dtype}")
    if x.ndim != -1 and x.ndim < 2:
        raise StructInfoError(f"op 'det': needs square matrices in the last two dims, got {S.describe(x)}")
    if x.shape is None:
        return S.TensorStructInfo(None, x.dtype, -1 if x.ndim == -1 else x.ndim - 2, x.vdevice)
    if dims_conflict(x.shape[-1], x.shape[-2]):
        raise StructInfoError(f"op 'det': the last two dims must be equal (square), got {S.describe(x)}")
    return S.TensorStructInfo(x.shape[:-2], x.dtype, vdevice=x.vdevice)


register_op("det", _infer_det, num_inputs=1, description="determinant of the matrices in the last two dims")


def det(data: E.Expr) -> E.Call:
    """The determinant of each square matrix in the last two dims (ONNX Det);
    hetvm-only (TVM Relax has no such op)."""
    return make_call("det", [data])
