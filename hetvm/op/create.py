"""Tensor creation: zeros, ones, full and their ``*_like`` forms."""

from __future__ import annotations

from typing import Any

from ..ir import expr as E
from ..ir import struct_info as S
from .attrs import as_shape_arg, as_tensor_arg, dtype_str
from .base import fail, make_call, op_name, register_op, shape_arg, tensor_arg

__all__ = ["zeros", "ones", "full", "zeros_like", "ones_like", "full_like"]


def _from_shape(call: E.Call, dtype: str | None) -> S.StructInfo:
    values, ndim = shape_arg(call, 0, "shape")
    return S.TensorStructInfo(values, dtype, ndim)


def _fill_dtype(call: E.Call, index: int) -> str | None:
    """The dtype of the scalar fill value (a 0-d tensor or a PrimValue)."""
    op = op_name(call)
    sinfo = call.args[index].struct_info
    if isinstance(sinfo, S.PrimStructInfo):
        return sinfo.dtype
    if isinstance(sinfo, S.TensorStructInfo):
        if sinfo.ndim not in (-1, 0):
            raise fail(op, f"fill_value must be a scalar, got {S.describe(sinfo)}")
        return sinfo.dtype
    raise fail(op, f"fill_value must be a scalar tensor or PrimValue, got {S.describe(sinfo)}")  # type: ignore[arg-type]


def _infer_zeros_ones(call: E.Call) -> S.StructInfo:
    return _from_shape(call, call.attrs["dtype"])


def _infer_full(call: E.Call) -> S.StructInfo:
    fill = _fill_dtype(call, 1)
    return _from_shape(call, call.attrs["dtype"] or fill)


def _infer_like(call: E.Call) -> S.StructInfo:
    data = tensor_arg(call, 0, "x")
    if op_name(call) == "full_like":
        _fill_dtype(call, 1)
    dtype = call.attrs["dtype"] or data.dtype
    return S.TensorStructInfo(data.shape, dtype, data.ndim, data.vdevice)


for _name in ("zeros", "ones"):
    register_op(_name, _infer_zeros_ones, num_inputs=1, attr_names=("dtype",))
register_op("full", _infer_full, num_inputs=2, attr_names=("dtype",))
for _name in ("zeros_like", "ones_like"):
    register_op(_name, _infer_like, num_inputs=1, attr_names=("dtype",))
register_op("full_like", _infer_like, num_inputs=2, attr_names=("dtype",))


def _required_dtype(op: str, dtype: Any) -> str:
    name = dtype_str(dtype)
    if name is None:
        raise fail(op, f"a dtype is required, got {dtype!r}")
    return name


def zeros(shape: Any, dtype: Any) -> E.Call:
    """A tensor of ``shape`` filled with 0."""
    return make_call("zeros", [as_shape_arg("zeros", shape)], {"dtype": _required_dtype("zeros", dtype)})


def ones(shape: Any, dtype: Any) -> E.Call:
    """A tensor of ``shape`` filled with 1."""
    return make_call("ones", [as_shape_arg("ones", shape)], {"dtype": _required_dtype("ones", dtype)})


def _fill_arg(op: str, fill_value: Any, dtype: str | None) -> E.Expr:
    """The fill value as IR; a Python literal becomes a 0-d Constant of ``dtype``
    (or float32 / int64 / bool when no dtype is given)."""
    if isinstance(fill_value, E.Expr):
        return fill_value
    if dtype is None and isinstance(fill_value, (bool, int, float)):
        dtype = {bool: "bool", int: "int64", float: "float32"}[type(fill_value)]
    return as_tensor_arg(op, fill_value, dtype)


def full(shape: Any, fill_value: Any, dtype: Any = None) -> E.Call:
    """A tensor of ``shape`` filled with the scalar ``fill_value`` (cast to ``dtype``)."""
    name = dtype_str(dtype)
    args = [as_shape_arg("full", shape), _fill_arg("full", fill_value, name)]
    return make_call("full", args, {"dtype": name})


def zeros_like(x: E.Expr, dtype: Any = None) -> E.Call:
    """Zeros with x's shape (and dtype unless given)."""
    return make_call("zeros_like", [x], {"dtype": dtype_str(dtype)})


def ones_like(x: E.Expr, dtype: Any = None) -> E.Call:
    """Ones with x's shape (and dtype unless given)."""
    return make_call("ones_like", [x], {"dtype": dtype_str(dtype)})


def full_like(x: E.Expr, fill_value: Any, dtype: Any = None) -> E.Call:
    """``fill_value`` with x's shape (and dtype unless given)."""
    name = dtype_str(dtype)
    if name is None and isinstance(x.struct_info, S.TensorStructInfo):
        literal_dtype = x.struct_info.dtype
    else:
        literal_dtype = name
    args = [x, _fill_arg("full_like", fill_value, literal_dtype)]
    return make_call("full_like", args, {"dtype": name})
