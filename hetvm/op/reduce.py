"""Reductions (sum, mean, max, min, prod) and arg-reductions (argmax, argmin)."""

from __future__ import annotations

from typing import Callable, Sequence

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from .attrs import as_int, opt_axes
from .base import fail, make_call, norm_axes, op_name, register_op, tensor_arg

__all__ = ["sum", "mean", "max", "min", "prod", "argmax", "argmin", "reduced_shape"]

REDUCTIONS = ("sum", "mean", "max", "min", "prod")


def reduced_shape(
    op: str, shape: Sequence[P.PrimExpr], axes: Sequence[int] | None, keepdims: bool
) -> list[P.PrimExpr]:
    """The shape left after reducing ``axes`` (None: all) of ``shape``."""
    ndim = len(shape)
    drop = set(range(ndim)) if axes is None else set(norm_axes(op, axes, ndim))
    if keepdims:
        return [P.IntImm(1) if i in drop else d for i, d in enumerate(shape)]
    return [d for i, d in enumerate(shape) if i not in drop]


def _out_ndim(op: str, ndim: int, axes: Sequence[int] | None, keepdims: bool) -> int:
    if ndim == -1:
        return -1
    if keepdims:
        return ndim
    return 0 if axes is None else ndim - len(norm_axes(op, axes, ndim))


def _infer_reduce(call: E.Call, out_dtype: str | None = None) -> S.StructInfo:
    op = op_name(call)
    data = tensor_arg(call, 0, "data")
    axes = call.attrs["axis"]
    if isinstance(axes, int):
        axes = (axes,)
    keepdims = call.attrs["keepdims"]
    dtype = out_dtype or data.dtype
    if data.ndim == 0 and axes:
        raise fail(op, f"axis {axes} given for a scalar")
    if data.shape is None:
        if data.ndim == -1 and keepdims is False and axes is None:
            return S.TensorStructInfo([], dtype, vdevice=data.vdevice)
        ndim = _out_ndim(op, data.ndim, axes, keepdims)
        return S.TensorStructInfo(None, dtype, ndim, data.vdevice)
    return S.TensorStructInfo(
        reduced_shape(op, data.shape, axes, keepdims), dtype, vdevice=data.vdevice
    )


for _name in REDUCTIONS:
    register_op(_name, _infer_reduce, num_inputs=1, attr_names=("axis", "keepdims"),
                description="reduction over axes")  # fmt: skip
for _name in ("argmax", "argmin"):
    register_op(_name, lambda c: _infer_reduce(c, "int64"), num_inputs=1,
                attr_names=("axis", "keepdims"), description="index of the extreme, int64")  # fmt: skip


def _reduce_ctor(name: str) -> Callable[..., E.Call]:
    def ctor(x: E.Expr, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> E.Call:
        attrs = {"axis": opt_axes(name, "axis", axis), "keepdims": bool(keepdims)}
        return make_call(name, [x], attrs)

    ctor.__name__ = name
    ctor.__doc__ = f"``{name}`` over ``axis`` (None: all axes)."
    return ctor


def _arg_ctor(name: str) -> Callable[..., E.Call]:
    def ctor(x: E.Expr, axis: int | None = None, keepdims: bool = False) -> E.Call:
        axis = None if axis is None else as_int(name, "axis", axis)
        return make_call(name, [x], {"axis": axis, "keepdims": bool(keepdims)})

    ctor.__name__ = name
    ctor.__doc__ = f"``{name}`` along ``axis`` (None: of the flattened tensor); int64 result."
    return ctor


sum = _reduce_ctor("sum")  # noqa: A001 - mirrors R.sum
mean = _reduce_ctor("mean")
max = _reduce_ctor("max")  # noqa: A001 - mirrors R.max
min = _reduce_ctor("min")  # noqa: A001 - mirrors R.min
prod = _reduce_ctor("prod")
argmax = _arg_ctor("argmax")
argmin = _arg_ctor("argmin")
