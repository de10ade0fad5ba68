"""More TVM Relax ops that TVM's own test modules use: ``tile``, ``flip``,
``repeat``, ``scatter_elements``, ``variance``, ``std``.

Names, argument order and attrs follow TVM Relax (``R.tile(data, repeats)``,
``R.flip(data, axis)``, ``R.repeat(data, repeats, axis=None)``,
``R.scatter_elements(data, indices, updates, axis=0, reduction="update")``,
``R.variance(x, axis=None, keepdims=False)``). All are pure and run on the
device of their inputs.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from .attrs import as_int, axes_tuple, opt_axes
from .base import (
    common_vdevice,
    dims_conflict,
    fail,
    format_shape,
    is_float,
    make_call,
    norm_axis,
    register_op,
    shape_product,
    tensor_arg,
)
from .reduce import _infer_reduce

__all__ = ["tile", "flip", "repeat", "scatter_elements", "variance", "std"]

SCATTER_REDUCTIONS = ("update", "add", "mul", "mean", "max", "min")


def _infer_tile(call: E.Call) -> S.StructInfo:
    x = tensor_arg(call, 0, "data")
    reps = tuple(call.attrs["repeats"])
    if any(r < 0 for r in reps):
        raise fail("tile", f"repeats must be non-negative, got {reps}")
    if x.shape is None:
        ndim = max(x.ndim, len(reps)) if x.ndim != -1 else -1
        return S.TensorStructInfo(None, x.dtype, ndim, x.vdevice)
    n = max(len(x.shape), len(reps))
    shape = (P.IntImm(1),) * (n - len(x.shape)) + tuple(x.shape)
    reps = (1,) * (n - len(reps)) + reps
    return S.TensorStructInfo([P.mul(d, r) for d, r in zip(shape, reps)], x.dtype, vdevice=x.vdevice)


def _infer_flip(call: E.Call) -> S.StructInfo:
    x = tensor_arg(call, 0, "data")
    if x.ndim != -1:
        norm_axis("flip", call.attrs["axis"], x.ndim)
    return x


def _infer_repeat(call: E.Call) -> S.StructInfo:
    x = tensor_arg(call, 0, "data")
    reps = call.attrs["repeats"]
    axis = call.attrs["axis"]
    if reps < 0:
        raise fail("repeat", f"repeats must be non-negative, got {reps}")
    if axis is None:
        if x.shape is None:
            return S.TensorStructInfo(None, x.dtype, 1, x.vdevice)
        return S.TensorStructInfo([P.mul(shape_product(x.shape), reps)], x.dtype, vdevice=x.vdevice)
    if x.ndim == -1:
        return S.TensorStructInfo(None, x.dtype, -1, x.vdevice)
    ax = norm_axis("repeat", axis, x.ndim)
    if x.shape is None:
        return S.TensorStructInfo(None, x.dtype, x.ndim, x.vdevice)
    shape = list(x.shape)
    shape[ax] = P.mul(shape[ax], reps)
    return S.TensorStructInfo(shape, x.dtype, vdevice=x.vdevice)


def _infer_scatter_elements(call: E.Call) -> S.StructInfo:
    op = "scatter_elements"
    data = tensor_arg(call, 0, "data")
    indices = tensor_arg(call, 1, "indices")
    updates = tensor_arg(call, 2, "updates")
    if call.attrs["reduction"] not in SCATTER_REDUCTIONS:
        raise fail(op, f"reduction must be one of {', '.join(SCATTER_REDUCTIONS)}, got {call.attrs['reduction']!r}")
    if indices.dtype is not None and not indices.dtype.startswith(("int", "uint")):
        raise fail(op, f"indices must be integers, got {indices.dtype}")
    if data.dtype is not None and updates.dtype is not None and data.dtype != updates.dtype:
        raise fail(op, f"updates are {updates.dtype} but data is {data.dtype}")
    for name, s in (("indices", indices), ("updates", updates)):
        if data.ndim != -1 and s.ndim not in (-1, data.ndim):
            raise fail(op, f"{name} must have data's rank {data.ndim}, got {S.describe(s)}")
    if indices.shape is not None and updates.shape is not None:
        if any(dims_conflict(a, b) for a, b in zip(indices.shape, updates.shape)):
            raise fail(op, f"indices {format_shape(indices.shape)} and updates {format_shape(updates.shape)} differ")
    if data.ndim != -1:
        norm_axis(op, call.attrs["axis"], data.ndim)
    return S.TensorStructInfo(data.shape, data.dtype, data.ndim, common_vdevice([data, indices, updates]))


def _infer_moment(call: E.Call) -> S.StructInfo:
    x = tensor_arg(call, 0, "data")
    if x.dtype is not None and not is_float(x.dtype):
        raise fail(call.op.name, f"needs a floating-point tensor, got {x.dtype}")  # type: ignore[attr-defined]
    return _infer_reduce(call)


register_op("tile", _infer_tile, num_inputs=1, attr_names=("repeats",),
            description="repeats the whole tensor along each axis")  # fmt: skip
register_op("flip", _infer_flip, num_inputs=1, attr_names=("axis",), description="reverses one axis")
register_op("repeat", _infer_repeat, num_inputs=1, attr_names=("repeats", "axis"),
            description="repeats each element along an axis (None: of the flattened tensor)")  # fmt: skip
register_op("scatter_elements", _infer_scatter_elements, num_inputs=3, attr_names=("axis", "reduction"),
            description="data with updates written (or reduced) at indices along an axis")  # fmt: skip
for _name in ("variance", "std"):
    register_op(_name, _infer_moment, num_inputs=1, attr_names=("axis", "keepdims"),
                description="population variance / standard deviation over axes")  # fmt: skip


def tile(data: E.Expr, repeats: int | Sequence[int]) -> E.Call:
    """The tensor repeated ``repeats[i]`` times along axis i (NumPy's ``tile``)."""
    reps = axes_tuple("tile", "repeats", repeats)
    return make_call("tile", [data], {"repeats": reps})


def flip(data: E.Expr, axis: int) -> E.Call:
    """The tensor with ``axis`` reversed."""
    return make_call("flip", [data], {"axis": as_int("flip", "axis", axis)})


def repeat(data: E.Expr, repeats: int, axis: int | None = None) -> E.Call:
    """Each element repeated ``repeats`` times along ``axis`` (NumPy's ``repeat``)."""
    attrs: dict[str, Any] = {
        "repeats": as_int("repeat", "repeats", repeats),
        "axis": None if axis is None else as_int("repeat", "axis", axis),
    }
    return make_call("repeat", [data], attrs)


def scatter_elements(
    data: E.Expr, indices: E.Expr, updates: E.Expr, axis: int = 0, reduction: str = "update"
) -> E.Call:
    """``data`` with ``updates[i, j, ...]`` written at ``indices[i, j, ...]`` along ``axis``
    (ONNX ScatterElements; negative indices count from the end)."""
    attrs = {"axis": as_int("scatter_elements", "axis", axis), "reduction": str(reduction)}
    return make_call("scatter_elements", [data, indices, updates], attrs)


def variance(x: E.Expr, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> E.Call:
    """Population variance over ``axis`` (None: all axes)."""
    return make_call("variance", [x], {"axis": opt_axes("variance", "axis", axis), "keepdims": bool(keepdims)})


def std(x: E.Expr, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> E.Call:
    """Population standard deviation over ``axis`` (None: all axes)."""
    return make_call("std", [x], {"axis": opt_axes("std", "axis", axis), "keepdims": bool(keepdims)})
