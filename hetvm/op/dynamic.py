"""Ops whose result length is computed: ``arange``, ``range_length``,
``tensor_to_shape`` and ``nonzero``.

Why these shapes stay honest: ``arange(start, end, step)`` takes PrimValues, so
with symbolic bounds (a dim of another tensor, ``arange(0, n)``) its length is
the shape expression ``max(ceil((end - start) / step), 0)``. A length that only
a tensor's *values* decide (ONNX Range of run-time tensors, NonZero) has no
such expression: the program computes it as a small int64 tensor
(``range_length``, or a sum of a mask), ``tensor_to_shape`` reads it into a
shape, and ``R.match_cast(s, R.Shape([n]))`` binds a fresh symbolic dim ``n``
at run time, as a parameter's shape is bound. ``nonzero(x, R.shape([n]))``
then has the static-rank shape ``(ndim, n)`` that destination passing needs.
None of these is a view of its input.
"""

from __future__ import annotations

import math
from typing import Any

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from .attrs import as_prim_arg, as_shape_arg, dtype_str
from .base import (
    DeviceBehavior,
    common_vdevice,
    fail,
    make_call,
    op_name,
    register_op,
    shape_arg,
    tensor_arg,
)
from .effects import NO_MEMORY, declare_builtin

__all__ = ["arange", "range_length", "tensor_to_shape", "nonzero", "unique_count", "unique", "arange_length"]


def arange_length(start: P.PrimExpr, end: P.PrimExpr, step: P.PrimExpr) -> P.PrimExpr:
    """``len(range(start, end, step))`` as a shape expression (exact for floats
    only when all three are constants)."""
    values = [_number(v) for v in (start, end, step)]
    if all(v is not None for v in values):
        a, b, s = values
        if s == 0:
            raise fail("arange", "step must be nonzero")
        if all(isinstance(v, int) for v in values):
            return P.IntImm(max(-((a - b) // s), 0))  # type: ignore[operator]
        return P.IntImm(max(math.ceil((b - a) / s), 0))  # type: ignore[operator]
    if any(isinstance(v, P.FloatImm) for v in (start, end, step)):
        raise fail("arange", "symbolic bounds must be integers (a float bound is only allowed with constants)")
    s = P.const_value(step)
    if s == 0:
        raise fail("arange", "step must be nonzero")
    # ceil(d / s) == -floor(-d / s) for any nonzero s
    count = P.sub(0, P.floordiv(P.sub(start, end), step))
    if s is not None and s > 0:
        count = P.floordiv(P.add(P.sub(end, start), s - 1), s)
    elif s is not None:
        count = P.floordiv(P.add(P.sub(start, end), -s - 1), -s)
    return P.max_(count, 0)


def _number(v: P.PrimExpr) -> int | float | None:
    if isinstance(v, P.FloatImm):
        return v.value
    return P.const_value(v)


def _prim(call: E.Call, index: int, what: str) -> S.PrimStructInfo:
    sinfo = call.args[index].struct_info
    if not isinstance(sinfo, S.PrimStructInfo):
        raise fail("arange", f"{what} must be a PrimValue, got {S.describe(sinfo) if sinfo else '?'}")
    return sinfo


def _infer_arange(call: E.Call) -> S.StructInfo:
    if len(call.args) != 3:
        raise fail("arange", f"takes (start, end, step), got {len(call.args)} arguments")
    parts = [_prim(call, i, w) for i, w in enumerate(("start", "end", "step"))]
    dtype = call.attrs["dtype"]
    if dtype is None:
        dtype = "float32" if any(p.dtype.startswith("float") for p in parts) else "int64"
    if any(p.value is None for p in parts):
        return S.TensorStructInfo(None, dtype, 1)
    length = arange_length(*(p.value for p in parts))  # type: ignore[arg-type]
    return S.TensorStructInfo((length,), dtype)


def arange(start: Any, end: Any = None, step: Any = 1, dtype: Any = None) -> E.Call:
    """``[start, start + step, ...)`` up to ``end`` (NumPy ``arange``; with one
    bound, ``range(0, start)``); the bounds are PrimValues, symbolic or not.
    ``dtype`` None: float32 when a bound is a float, else int64."""
    if end is None:
        start, end = 0, start
    args = [as_prim_arg("arange", v, w) for v, w in ((start, "start"), (end, "end"), (step, "step"))]
    return make_call("arange", args, {"dtype": dtype_str(dtype)})


def _infer_range_length(call: E.Call) -> S.StructInfo:
    parts = [tensor_arg(call, i, w) for i, w in enumerate(("start", "limit", "delta"))]
    if len(call.args) != 3:
        raise fail("range_length", f"takes (start, limit, delta), got {len(call.args)} arguments")
    for p, w in zip(parts, ("start", "limit", "delta")):
        if p.shape is not None and any(P.const_value(d) != 1 for d in p.shape):
            raise fail("range_length", f"{w} must hold one value, got {S.describe(p)}")
    return S.TensorStructInfo((1,), "int64", vdevice=common_vdevice(parts))


def range_length(start: E.Expr, limit: E.Expr, delta: E.Expr) -> E.Call:
    """``[max(ceil((limit - start) / delta), 0)]`` as an int64 tensor of shape (1,)
    from three one-element tensors (the length of ONNX Range); a delta of 0 is a
    run-time error naming the op. hetvm-only (TVM has no such op)."""
    return make_call("range_length", [start, limit, delta])


def _infer_tensor_to_shape(call: E.Call) -> S.StructInfo:
    x = tensor_arg(call, 0, "expr")
    if x.dtype is not None and not x.dtype.startswith(("int", "uint")):
        raise fail("tensor_to_shape", f"needs an integer tensor, got {x.dtype}")
    if x.ndim not in (-1, 1):
        raise fail("tensor_to_shape", f"needs a 1-D tensor, got {S.describe(x)}")
    n = P.const_value(x.shape[0]) if x.shape is not None else None
    return S.ShapeStructInfo(None, -1 if n is None else n)


def tensor_to_shape(expr: E.Expr) -> E.Call:
    """The values of a 1-D integer tensor as a shape (TVM's ``R.tensor_to_shape``);
    ``R.match_cast`` of the result binds its values to symbolic variables."""
    return make_call("tensor_to_shape", [expr])


def _infer_nonzero(call: E.Call) -> S.StructInfo:
    x = tensor_arg(call, 0, "x")
    if len(call.args) > 2:
        raise fail("nonzero", f"takes (x[, count]), got {len(call.args)} arguments")
    ndim = x.ndim
    if len(call.args) == 1:
        return S.TensorStructInfo(None, "int64", 2, x.vdevice)
    values, count_ndim = shape_arg(call, 1, "count")
    if count_ndim not in (-1, 1):
        raise fail("nonzero", f"count must be a shape of one value, got ndim {count_ndim}")
    if ndim == -1 or values is None:
        return S.TensorStructInfo(None, "int64", 2, x.vdevice)
    return S.TensorStructInfo((max(ndim, 1), values[0]), "int64", vdevice=x.vdevice)


def nonzero(x: E.Expr, count: Any = None) -> E.Call:
    """The indices of the nonzero elements of ``x``, shape ``(ndim, count)``, in
    row-major order (ONNX NonZero; a 0-d ``x`` counts as 1-D). ``count`` (a
    one-value shape, ``R.shape([n])``) gives the result its length; without
    it the result is ``R.Tensor(ndim=2)`` as in TVM, which cannot be
    allocated. The kernel checks that ``x`` has exactly ``count`` nonzeros."""
    args = [x] if count is None else [x, as_shape_arg("nonzero", count, "count")]
    return make_call("nonzero", args)


def _unique_axis(call: E.Call, x: S.TensorStructInfo) -> int | None:
    axis = call.attrs["axis"]
    if axis is None or x.ndim == -1:
        return axis
    if not -x.ndim <= axis < max(x.ndim, 1):
        raise fail(op_name(call), f"axis {axis} is out of range for a tensor of {x.ndim} dimension(s)")
    return axis % x.ndim


def _infer_unique_count(call: E.Call) -> S.StructInfo:
    x = tensor_arg(call, 0, "x")
    _unique_axis(call, x)
    return S.TensorStructInfo((1,), "int64", vdevice=x.vdevice)


def unique_count(x: E.Expr, axis: int | None = None) -> E.Call:
    """How many distinct elements (or slices along ``axis``) ``x`` has, as an int64
    tensor of shape (1,): the length ``unique`` needs. hetvm-only."""
    return make_call("unique_count", [x], {"axis": None if axis is None else int(axis)})


def _infer_unique(call: E.Call) -> S.StructInfo:
    x = tensor_arg(call, 0, "x")
    if len(call.args) > 2:
        raise fail("unique", f"takes (x[, count]), got {len(call.args)} arguments")
    axis = _unique_axis(call, x)
    values, count_ndim = shape_arg(call, 1, "count") if len(call.args) == 2 else (None, -1)
    if len(call.args) == 2 and count_ndim not in (-1, 1):
        raise fail("unique", f"count must be a shape of one value, got ndim {count_ndim}")
    u = values[0] if values is not None else None
    vdev = x.vdevice
    if axis is None:
        y = S.TensorStructInfo(None if u is None else (u,), x.dtype, 1, vdev)
        total = None if x.shape is None else _product(x.shape)
        inverse = S.TensorStructInfo(None if total is None else (total,), "int64", 1, vdev)
    else:
        shape = None if u is None or x.shape is None else tuple(u if i == axis else d for i, d in enumerate(x.shape))
        y = S.TensorStructInfo(shape, x.dtype, x.ndim, vdev)
        inverse = S.TensorStructInfo(None if x.shape is None else (x.shape[axis],), "int64", 1, vdev)
    per_value = S.TensorStructInfo(None if u is None else (u,), "int64", 1, vdev)
    return S.TupleStructInfo([y, per_value, inverse, per_value])


def _product(dims: Any) -> P.PrimExpr:
    out: P.PrimExpr = P.IntImm(1)
    for d in dims:
        out = P.mul(out, d)
    return out


def unique(x: E.Expr, count: Any = None, sorted: bool = True, axis: int | None = None) -> E.Call:  # noqa: A002
    """``(values, first_indices, inverse_indices, counts)`` of the distinct elements
    of ``x`` (flattened) or slices along ``axis`` (ONNX Unique): sorted, or in order
    of first occurrence. ``count`` (``R.shape([n])``, from ``unique_count`` and
    ``match_cast``) sizes the results, as ``nonzero``'s does."""
    args = [x] if count is None else [x, as_shape_arg("unique", count, "count")]
    return make_call("unique", args, {"sorted": bool(sorted), "axis": None if axis is None else int(axis)})


register_op("arange", _infer_arange, num_inputs=3, attr_names=("dtype",),
            description="evenly spaced values in [start, end) (NumPy arange)")  # fmt: skip
register_op("range_length", _infer_range_length, num_inputs=3,
            description="length of ONNX Range as an int64 (1,) tensor, from run-time bounds")  # fmt: skip
register_op("tensor_to_shape", _infer_tensor_to_shape, num_inputs=1,
            device_behavior=DeviceBehavior.HOST_ONLY, effects=NO_MEMORY,
            description="a 1-D integer tensor's values as a shape (read on the host)")  # fmt: skip
register_op("unique_count", _infer_unique_count, num_inputs=1, attr_names=("axis",),
            description="the number of distinct elements (or slices) as an int64 (1,) tensor")  # fmt: skip
register_op("unique", _infer_unique, num_inputs=-1, attr_names=("sorted", "axis"),
            description="distinct elements, first indices, inverse indices and counts")  # fmt: skip
register_op("nonzero", _infer_nonzero, num_inputs=-1,
            description="indices of the nonzero elements, (ndim, count)")  # fmt: skip
# the VM reads the tensor on the host and makes a shape: no memory of its own
declare_builtin("vm.builtin.tensor_to_shape", NO_MEMORY)
