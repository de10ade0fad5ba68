"""``astype`` and ``where``: dtype conversion and element-wise selection."""

from __future__ import annotations

from typing import Any

from ..ir import expr as E
from ..ir import struct_info as S
from .attrs import dtype_str
from .base import (
    broadcast_shapes,
    common_vdevice,
    fail,
    make_call,
    register_op,
    tensor_arg,
)

__all__ = ["astype", "where"]


def _infer_astype(call: E.Call) -> S.StructInfo:
    data = tensor_arg(call, 0, "data")
    return S.TensorStructInfo(data.shape, call.attrs["dtype"], data.ndim, data.vdevice)


def astype(x: E.Expr, dtype: Any) -> E.Call:
    """Casts every element to ``dtype``."""
    name = dtype_str(dtype)
    if name is None:
        raise fail("astype", f"a target dtype is required, got {dtype!r}")
    return make_call("astype", [x], {"dtype": name})


def _infer_where(call: E.Call) -> S.StructInfo:
    cond = tensor_arg(call, 0, "condition")
    x1 = tensor_arg(call, 1, "x1")
    x2 = tensor_arg(call, 2, "x2")
    if cond.dtype is not None and cond.dtype != "bool":
        raise fail("where", f"condition must be bool, got {cond.dtype}")
    if x1.dtype is not None and x2.dtype is not None and x1.dtype != x2.dtype:
        raise fail("where", f"branch dtypes differ: x1 is {x1.dtype}, x2 is {x2.dtype}")
    dtype = x1.dtype or x2.dtype
    vdev = common_vdevice([cond, x1, x2])
    if cond.shape is None or x1.shape is None or x2.shape is None:
        ndims = [s.ndim for s in (cond, x1, x2)]
        ndim = -1 if -1 in ndims else max(ndims)
        return S.TensorStructInfo(None, dtype, ndim, vdev)
    shape = broadcast_shapes("where", broadcast_shapes("where", cond.shape, x1.shape), x2.shape)
    return S.TensorStructInfo(shape, dtype, vdevice=vdev)


def where(condition: E.Expr, x1: E.Expr, x2: E.Expr) -> E.Call:
    """x1 where condition holds, else x2 (all three broadcast together)."""
    return make_call("where", [condition, x1, x2])


register_op("astype", _infer_astype, num_inputs=1, attr_names=("dtype",))
register_op("where", _infer_where, num_inputs=3, description="select with broadcasting")
