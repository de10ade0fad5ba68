"""Shape manipulation: reshape, permute_dims, expand_dims, squeeze, flatten,
broadcast_to, concat, split, shape_of."""

from __future__ import annotations

from typing import Any, Sequence

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from .attrs import as_int, as_shape_arg, as_tuple_arg, axes_tuple, opt_axes
from .base import (
    DeviceBehavior,
    common_vdevice,
    dims_conflict,
    fail,
    format_shape,
    make_call,
    norm_axes,
    norm_axis,
    register_op,
    shape_arg,
    shape_product,
    tensor_arg,
)
from .effects import NO_MEMORY, VIEW

__all__ = [
    "reshape",
    "permute_dims",
    "expand_dims",
    "squeeze",
    "flatten",
    "broadcast_to",
    "concat",
    "split",
    "shape_of",
    "shape_to_tensor",
]


# --------------------------------------------------------------------------
# reshape
# --------------------------------------------------------------------------


def _is_minus_one(d: P.PrimExpr) -> bool:
    return P.const_value(d) == -1


def _resolve_minus_one(
    data_shape: Sequence[P.PrimExpr] | None, values: Sequence[P.PrimExpr]
) -> tuple[P.PrimExpr, ...]:
    """``values`` with its single -1 replaced by what keeps the element count."""
    holes = [i for i, d in enumerate(values) if _is_minus_one(d)]
    if len(holes) > 1:
        raise fail("reshape", f"at most one -1 is allowed in the new shape {format_shape(values)}")
    if not holes or data_shape is None:
        return tuple(values)
    known = shape_product([d for d in values if not _is_minus_one(d)])
    total = shape_product(data_shape)
    kc, tc = P.const_value(known), P.const_value(total)
    if kc == 0:
        raise fail("reshape", f"cannot infer -1 in {format_shape(values)}: other dims multiply to 0")
    if kc is not None and tc is not None and tc % kc:
        raise fail(
            "reshape",
            f"cannot reshape {format_shape(data_shape)} ({tc} elements) to {format_shape(values)}",
        )
    out = list(values)
    out[holes[0]] = P.floordiv(total, known)
    return tuple(out)


def _infer_reshape(call: E.Call) -> S.StructInfo:
    data = tensor_arg(call, 0, "data")
    values, ndim = shape_arg(call, 1, "shape")
    if values is None:
        return S.TensorStructInfo(None, data.dtype, ndim, data.vdevice)
    for d in values:
        c = P.const_value(d)
        if c is not None and c < -1:
            raise fail("reshape", f"new shape {format_shape(values)} has a negative dimension")
    values = _resolve_minus_one(data.shape, values)
    if any(_is_minus_one(d) for d in values):
        return S.TensorStructInfo(None, data.dtype, len(values), data.vdevice)
    if data.shape is not None:
        before, after = shape_product(data.shape), shape_product(values)
        if dims_conflict(before, after):
            raise fail(
                "reshape",
                f"cannot reshape {format_shape(data.shape)} ({P.to_str(before)} elements) to "
                f"{format_shape(values)} ({P.to_str(after)} elements)",
            )
    return S.TensorStructInfo(values, data.dtype, vdevice=data.vdevice)


def reshape(x: E.Expr, shape: Any) -> E.Call:
    """Reshape to ``shape`` (a tuple or ShapeExpr; one -1 is inferred when x's shape is known)."""
    arg = as_shape_arg("reshape", shape)
    if isinstance(arg, E.ShapeExpr) and any(_is_minus_one(d) for d in arg.values):
        sinfo = x.struct_info
        dshape = sinfo.shape if isinstance(sinfo, S.TensorStructInfo) else None
        resolved = _resolve_minus_one(dshape, arg.values)
        if not any(_is_minus_one(d) for d in resolved):
            arg = E.ShapeExpr(resolved)
    return make_call("reshape", [x, arg])


# --------------------------------------------------------------------------
# axes reordering and insertion
# --------------------------------------------------------------------------


def _infer_permute_dims(call: E.Call) -> S.StructInfo:
    data = tensor_arg(call, 0, "data")
    axes = call.attrs["axes"]
    ndim = data.ndim if axes is None else len(axes)
    if data.ndim != -1 and ndim != data.ndim:
        raise fail(
            "permute_dims", f"axes {axes} do not match a tensor of {data.ndim} dimension(s)"
        )
    if ndim == -1:
        return S.TensorStructInfo(None, data.dtype, -1, data.vdevice)
    order = tuple(reversed(range(ndim))) if axes is None else norm_axes("permute_dims", axes, ndim)
    if data.shape is None:
        return S.TensorStructInfo(None, data.dtype, ndim, data.vdevice)
    return S.TensorStructInfo([data.shape[a] for a in order], data.dtype, vdevice=data.vdevice)


def permute_dims(x: E.Expr, axes: Sequence[int] | None = None) -> E.Call:
    """Transpose: output axis i is input axis ``axes[i]`` (None reverses the axes)."""
    return make_call("permute_dims", [x], {"axes": opt_axes("permute_dims", "axes", axes)})


def _infer_expand_dims(call: E.Call) -> S.StructInfo:
    data = tensor_arg(call, 0, "data")
    axis = call.attrs["axis"]
    if data.ndim == -1:
        return S.TensorStructInfo(None, data.dtype, -1, data.vdevice)
    ndim = data.ndim + len(axis)
    new_axes = set(norm_axes("expand_dims", axis, ndim, "axis"))
    if data.shape is None:
        return S.TensorStructInfo(None, data.dtype, ndim, data.vdevice)
    rest = iter(data.shape)
    out = [P.IntImm(1) if i in new_axes else next(rest) for i in range(ndim)]
    return S.TensorStructInfo(out, data.dtype, vdevice=data.vdevice)


def expand_dims(x: E.Expr, axis: int | Sequence[int]) -> E.Call:
    """Inserts size-1 axes at ``axis`` (positions in the output)."""
    return make_call("expand_dims", [x], {"axis": axes_tuple("expand_dims", "axis", axis)})


def _infer_squeeze(call: E.Call) -> S.StructInfo:
    data = tensor_arg(call, 0, "data")
    axis = call.attrs["axis"]
    if data.ndim == -1:
        return S.TensorStructInfo(None, data.dtype, -1, data.vdevice)
    if axis is None:
        if data.shape is None or any(P.const_value(d) is None for d in data.shape):
            return S.TensorStructInfo(None, data.dtype, -1, data.vdevice)
        return S.TensorStructInfo(
            [d for d in data.shape if P.const_value(d) != 1], data.dtype, vdevice=data.vdevice
        )
    drop = set(norm_axes("squeeze", axis, data.ndim, "axis"))
    if data.shape is None:
        return S.TensorStructInfo(None, data.dtype, data.ndim - len(drop), data.vdevice)
    for a in sorted(drop):
        c = P.const_value(data.shape[a])
        if c is not None and c != 1:
            raise fail(
                "squeeze", f"axis {a} of {format_shape(data.shape)} has size {c}, not 1"
            )
    out = [d for i, d in enumerate(data.shape) if i not in drop]
    return S.TensorStructInfo(out, data.dtype, vdevice=data.vdevice)


def squeeze(x: E.Expr, axis: int | Sequence[int] | None = None) -> E.Call:
    """Removes size-1 axes (``axis`` None: every axis of constant size 1)."""
    return make_call("squeeze", [x], {"axis": opt_axes("squeeze", "axis", axis)})


def _infer_flatten(call: E.Call) -> S.StructInfo:
    data = tensor_arg(call, 0, "data")
    if data.shape is None:
        return S.TensorStructInfo(None, data.dtype, 1, data.vdevice)
    return S.TensorStructInfo([shape_product(data.shape)], data.dtype, vdevice=data.vdevice)


def flatten(x: E.Expr) -> E.Call:
    """Flattens to 1-D (TVM's R.flatten)."""
    return make_call("flatten", [x])


def _infer_broadcast_to(call: E.Call) -> S.StructInfo:
    data = tensor_arg(call, 0, "data")
    values, ndim = shape_arg(call, 1, "shape")
    if data.ndim != -1 and ndim != -1 and data.ndim > ndim:
        raise fail(
            "broadcast_to", f"cannot broadcast {S.describe(data)} to fewer dimensions ({ndim})"
        )
    if values is None:
        return S.TensorStructInfo(None, data.dtype, ndim, data.vdevice)
    if data.shape is not None:
        for i in range(1, len(data.shape) + 1):
            src, dst = data.shape[-i], values[-i]
            if P.const_value(src) != 1 and dims_conflict(src, dst):
                raise fail(
                    "broadcast_to",
                    f"cannot broadcast {format_shape(data.shape)} to {format_shape(values)}",
                )
    return S.TensorStructInfo(values, data.dtype, vdevice=data.vdevice)


def broadcast_to(x: E.Expr, shape: Any) -> E.Call:
    """Broadcasts ``x`` to ``shape`` (NumPy rules)."""
    return make_call("broadcast_to", [x, as_shape_arg("broadcast_to", shape)])


# --------------------------------------------------------------------------
# concat / split
# --------------------------------------------------------------------------


def _infer_concat(call: E.Call) -> S.StructInfo:
    tup = call.args[0].struct_info
    if not isinstance(tup, S.TupleStructInfo):
        raise fail("concat", f"tensors must be a tuple, got {S.describe(tup)}")  # type: ignore[arg-type]
    if not tup.fields:
        raise fail("concat", "needs at least one tensor")
    fields = []
    for i, f in enumerate(tup.fields):
        if not isinstance(f, S.TensorStructInfo):
            raise fail("concat", f"tensors[{i}] must be a tensor, got {S.describe(f)}")
        fields.append(f)
    dtypes = {f.dtype for f in fields if f.dtype is not None}
    if len(dtypes) > 1:
        raise fail("concat", f"tensors have different dtypes {sorted(dtypes)}")
    dtype = dtypes.pop() if dtypes else None
    vdev = common_vdevice(fields)
    axis = call.attrs["axis"]
    if axis is None:  # flatten, then concatenate
        if any(f.shape is None for f in fields):
            return S.TensorStructInfo(None, dtype, 1, vdev)
        total = P.IntImm(0)
        for f in fields:
            total = P.add(total, shape_product(f.shape))  # type: ignore[arg-type]
        return S.TensorStructInfo([total], dtype, vdevice=vdev)
    ndims = {f.ndim for f in fields if f.ndim != -1}
    if len(ndims) > 1:
        raise fail("concat", f"tensors have different ranks {sorted(ndims)}: "
                   + ", ".join(S.describe(f) for f in fields))  # fmt: skip
    if not ndims:
        return S.TensorStructInfo(None, dtype, -1, vdev)
    ndim = ndims.pop()
    if ndim == 0:
        raise fail("concat", "cannot concatenate scalars")
    ax = norm_axis("concat", axis, ndim)
    if any(f.shape is None for f in fields):
        return S.TensorStructInfo(None, dtype, ndim, vdev)
    first = fields[0].shape
    assert first is not None
    out = list(first)
    for f in fields[1:]:
        assert f.shape is not None
        for i in range(ndim):
            if i != ax and dims_conflict(first[i], f.shape[i]):
                raise fail(
                    "concat",
                    f"shapes {format_shape(first)} and {format_shape(f.shape)} differ "
                    f"outside axis {ax}",
                )
        out[ax] = P.add(out[ax], f.shape[ax])
    return S.TensorStructInfo(out, dtype, vdevice=vdev)


def concat(tensors: Any, axis: int | None = 0) -> E.Call:
    """Concatenates a tuple of tensors along ``axis`` (None: flattened first)."""
    axis = None if axis is None else as_int("concat", "axis", axis)
    return make_call("concat", [as_tuple_arg("concat", tensors)], {"axis": axis})


def split_sizes(
    dim: P.PrimExpr, indices_or_sections: int | tuple[int, ...]
) -> list[P.PrimExpr]:
    """Sizes of the pieces along the split axis.

    Sections: every piece has ceil(dim / n) elements except the last, which
    has the rest (TVM's and ONNX's rule; the kernel splits at multiples of
    ceil(dim / n)). Indices: pieces [0:i0], [i0:i1], ... [ik:], clamped like NumPy.
    """
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        if n < 1:
            raise fail("split", f"needs at least one section, got {n}")
        chunk = P.floordiv(P.add(dim, n - 1), n)
        last = P.sub(dim, P.mul(chunk, n - 1))
        c = P.const_value(last)
        if c is not None and c < 0:
            raise fail("split", f"cannot split an axis of {P.to_str(dim)} into {n} sections")
        return [chunk] * (n - 1) + [last]
    cdim = P.const_value(dim)
    bounds = [0, *indices_or_sections]
    sizes: list[P.PrimExpr] = []
    for lo, hi in zip(bounds, bounds[1:]):
        if cdim is not None:
            sizes.append(P.IntImm(max(0, min(hi, cdim) - min(lo, cdim))))
        else:
            sizes.append(P.IntImm(max(0, hi - lo)))
    last_lo = bounds[-1]
    if cdim is not None:
        sizes.append(P.IntImm(max(0, cdim - min(last_lo, cdim))))
    else:
        sizes.append(P.sub(dim, last_lo))
    return sizes


def _infer_split(call: E.Call) -> S.StructInfo:
    data = tensor_arg(call, 0, "data")
    ios = call.attrs["indices_or_sections"]
    count = ios if isinstance(ios, int) else len(ios) + 1
    if data.ndim == 0:
        raise fail("split", "cannot split a scalar")
    if data.ndim != -1:
        axis = norm_axis("split", call.attrs["axis"], data.ndim)
    if data.shape is None:
        piece = S.TensorStructInfo(None, data.dtype, data.ndim, data.vdevice)
        return S.TupleStructInfo([piece] * count)
    pieces = []
    for size in split_sizes(data.shape[axis], ios):
        shape = list(data.shape)
        shape[axis] = size
        pieces.append(S.TensorStructInfo(shape, data.dtype, vdevice=data.vdevice))
    return S.TupleStructInfo(pieces)


def split(
    x: E.Expr, indices_or_sections: int | Sequence[int], axis: int = 0
) -> E.Call:
    """Splits along ``axis`` into n sections or at the given indices; a Tuple result."""
    if isinstance(indices_or_sections, (list, tuple)):
        ios: Any = tuple(as_int("split", "indices_or_sections", i) for i in indices_or_sections)
        if list(ios) != sorted(ios) or any(i < 0 for i in ios):
            raise fail("split", f"indices must be non-negative and ascending, got {ios}")
    else:
        ios = as_int("split", "indices_or_sections", indices_or_sections)
        if ios <= 0:
            raise fail("split", f"the number of sections must be positive, got {ios}")
    attrs = {"indices_or_sections": ios, "axis": as_int("split", "axis", axis)}
    return make_call("split", [x], attrs)


# --------------------------------------------------------------------------
# shape_of
# --------------------------------------------------------------------------


def _infer_shape_of(call: E.Call) -> S.StructInfo:
    data = tensor_arg(call, 0, "data")
    if data.shape is not None:
        return S.ShapeStructInfo(data.shape)
    return S.ShapeStructInfo(None, data.ndim)


def shape_of(expr: E.Expr) -> E.Call:
    """The shape of a tensor as a shape value (computed on the host)."""
    return make_call("shape_of", [expr])


def _infer_shape_to_tensor(call: E.Call) -> S.StructInfo:
    values, ndim = shape_arg(call, 0, "expr")
    return S.TensorStructInfo(None if ndim == -1 else (ndim,), "int64", 1)


def shape_to_tensor(expr: E.Expr) -> E.Call:
    """A shape value as a 1-D int64 tensor (on the host)."""
    return make_call("shape_to_tensor", [expr])


register_op("reshape", _infer_reshape, num_inputs=2, description="reshape to a new shape", effects=VIEW)
register_op("permute_dims", _infer_permute_dims, num_inputs=1, attr_names=("axes",))
register_op("expand_dims", _infer_expand_dims, num_inputs=1, attr_names=("axis",), effects=VIEW)
register_op("squeeze", _infer_squeeze, num_inputs=1, attr_names=("axis",), effects=VIEW)
register_op("flatten", _infer_flatten, num_inputs=1, description="flatten to 1-D", effects=VIEW)
register_op("broadcast_to", _infer_broadcast_to, num_inputs=2)
register_op("concat", _infer_concat, num_inputs=1, attr_names=("axis",))
register_op("split", _infer_split, num_inputs=1, attr_names=("indices_or_sections", "axis"))
register_op(
    "shape_of",
    _infer_shape_of,
    num_inputs=1,
    device_behavior=DeviceBehavior.HOST_ONLY,
    description="the shape of a tensor, on the host",
    effects=NO_MEMORY,
)
register_op(
    "shape_to_tensor",
    _infer_shape_to_tensor,
    num_inputs=1,
    device_behavior=DeviceBehavior.HOST_ONLY,
    description="a shape value as a 1-D int64 tensor, on the host",
)
