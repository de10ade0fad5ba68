"""N-d indexing and masks: ``gather_nd``, ``scatter_nd``, ``one_hot``, ``tril``, ``triu``.

Names, argument order and attrs follow TVM Relax (``R.gather_nd(data, indices,
batch_dims)``, ``R.scatter_nd(data, indices, updates, reduction)``,
``R.one_hot(indices, on_value, off_value, depth, axis)``, ``R.tril(x, k)``);
the semantics are ONNX's GatherND / ScatterND / OneHot / Trilu, which TVM's
follow. All are pure, run on the device of their inputs, and write a fresh
result (none is a view of its input). Shapes stay symbolic: only the last dim
of ``indices`` (how many leading data dims an index tuple addresses) must be
static.
"""

from __future__ import annotations

from typing import Any

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from .attrs import as_int, as_prim_arg
from .base import (
    common_vdevice,
    dims_conflict,
    fail,
    format_shape,
    make_call,
    norm_axis,
    op_name,
    register_op,
    tensor_arg,
)

__all__ = ["gather_nd", "scatter_nd", "one_hot", "tril", "triu", "topk", "SCATTER_REDUCTIONS"]

#: TVM's names (ONNX ScatterND's "none" is "update", "mul" is ONNX's "mul")
SCATTER_REDUCTIONS = ("update", "add", "mul", "min", "max")


def _int_indices(op: str, sinfo: S.TensorStructInfo) -> None:
    if sinfo.dtype is not None and not sinfo.dtype.startswith(("int", "uint")):
        raise fail(op, f"indices must be integers, got {sinfo.dtype}")


def _tuple_len(op: str, indices: S.TensorStructInfo) -> int | None:
    """The static last dim of ``indices`` (the length of one index tuple)."""
    if indices.shape is None:
        return None
    if not indices.shape:
        raise fail(op, "indices must have at least one dimension")
    m = P.const_value(indices.shape[-1])
    if m is None:
        raise fail(op, f"the last dim of indices {format_shape(indices.shape)} must be static")
    return m


def _check_batch(op: str, data: S.TensorStructInfo, indices: S.TensorStructInfo, b: int) -> None:
    if data.ndim != -1 and b > data.ndim or indices.ndim != -1 and b >= max(indices.ndim, 1):
        raise fail(op, f"batch_dims {b} must be below the rank of indices ({indices.ndim}) and data ({data.ndim})")
    if data.shape is not None and indices.shape is not None:
        for i in range(b):
            if dims_conflict(data.shape[i], indices.shape[i]):
                raise fail(
                    op,
                    f"the first {b} (batch) dims of data {format_shape(data.shape)} and indices "
                    f"{format_shape(indices.shape)} differ",
                )


# --------------------------------------------------------------------------
# gather_nd
# --------------------------------------------------------------------------


def _infer_gather_nd(call: E.Call) -> S.StructInfo:
    op = "gather_nd"
    data = tensor_arg(call, 0, "data")
    indices = tensor_arg(call, 1, "indices")
    _int_indices(op, indices)
    b = call.attrs["batch_dims"]
    vdev = common_vdevice([data, indices])
    _check_batch(op, data, indices, b)
    m = _tuple_len(op, indices)
    if m is None or data.ndim == -1:
        return S.TensorStructInfo(None, data.dtype, -1, vdev)
    if b + m > data.ndim:
        raise fail(
            op,
            f"index tuples of length {m} with batch_dims {b} address more dims than data has "
            f"({data.ndim})",
        )
    assert indices.shape is not None
    if data.shape is None:
        return S.TensorStructInfo(None, data.dtype, indices.ndim - 1 + data.ndim - b - m, vdev)
    out = [*indices.shape[:-1], *data.shape[b + m :]]
    return S.TensorStructInfo(out, data.dtype, vdevice=vdev)


def gather_nd(data: E.Expr, indices: E.Expr, batch_dims: int = 0) -> E.Call:
    """``out[i..., :] = data[batch..., *indices[i...]]`` (ONNX GatherND): the last
    dim of ``indices`` indexes the first dims of ``data`` after ``batch_dims``
    shared leading dims; negative indices count from the end."""
    b = as_int("gather_nd", "batch_dims", batch_dims)
    if b < 0:
        raise fail("gather_nd", f"batch_dims must be >= 0, got {b}")
    return make_call("gather_nd", [data, indices], {"batch_dims": b})


# --------------------------------------------------------------------------
# scatter_nd
# --------------------------------------------------------------------------


def _infer_scatter_nd(call: E.Call) -> S.StructInfo:
    op = "scatter_nd"
    data = tensor_arg(call, 0, "data")
    indices = tensor_arg(call, 1, "indices")
    updates = tensor_arg(call, 2, "updates")
    _int_indices(op, indices)
    if data.dtype is not None and updates.dtype is not None and data.dtype != updates.dtype:
        raise fail(op, f"updates ({updates.dtype}) must have the dtype of data ({data.dtype})")
    m = _tuple_len(op, indices)
    if m is not None and data.ndim != -1 and m > data.ndim:
        raise fail(op, f"index tuples of length {m} address more dims than data has ({data.ndim})")
    if m is not None and data.shape is not None and updates.shape is not None:
        assert indices.shape is not None
        want = (*indices.shape[:-1], *data.shape[m:])
        if len(want) != len(updates.shape) or any(dims_conflict(a, b) for a, b in zip(want, updates.shape)):
            raise fail(
                op,
                f"updates {format_shape(updates.shape)} must have shape indices.shape[:-1] + "
                f"data.shape[{m}:] = {format_shape(want)}",
            )
    return S.TensorStructInfo(data.shape, data.dtype, data.ndim, common_vdevice([data, indices, updates]))


def scatter_nd(data: E.Expr, indices: E.Expr, updates: E.Expr, reduction: str = "update") -> E.Call:
    """A copy of ``data`` with ``updates`` written (or combined by ``reduction``:
    "update", "add", "mul", "min", "max") at the index tuples in the last dim of
    ``indices`` (ONNX ScatterND); negative indices count from the end."""
    if reduction not in SCATTER_REDUCTIONS:
        raise fail("scatter_nd", f"reduction must be one of {SCATTER_REDUCTIONS}, got {reduction!r}")
    return make_call("scatter_nd", [data, indices, updates], {"reduction": reduction})


# --------------------------------------------------------------------------
# one_hot
# --------------------------------------------------------------------------


def _prim_dtype(call: E.Call, index: int, what: str) -> str:
    sinfo = call.args[index].struct_info
    if not isinstance(sinfo, S.PrimStructInfo):
        raise fail(op_name(call), f"{what} must be a PrimValue, got {S.describe(sinfo)}")  # type: ignore[arg-type]
    return sinfo.dtype


def _infer_one_hot(call: E.Call) -> S.StructInfo:
    op = "one_hot"
    indices = tensor_arg(call, 0, "indices")
    _int_indices(op, indices)
    on, off = _prim_dtype(call, 1, "on_value"), _prim_dtype(call, 2, "off_value")
    if on != off:
        raise fail(op, f"on_value ({on}) and off_value ({off}) must have one dtype")
    depth = call.attrs["depth"]
    if indices.ndim == -1:
        return S.TensorStructInfo(None, on, -1, indices.vdevice)
    axis = norm_axis(op, call.attrs["axis"], indices.ndim + 1)
    if indices.shape is None:
        return S.TensorStructInfo(None, on, indices.ndim + 1, indices.vdevice)
    out = list(indices.shape)
    out.insert(axis, P.IntImm(depth))
    return S.TensorStructInfo(out, on, vdevice=indices.vdevice)


def one_hot(indices: E.Expr, on_value: Any, off_value: Any, depth: int, axis: int = -1) -> E.Call:
    """``on_value`` where the new ``axis`` (of length ``depth``) equals the index,
    ``off_value`` elsewhere; an index in [-depth, 0) counts from the end, one
    outside [-depth, depth) gives a row of ``off_value`` (ONNX OneHot)."""
    d = as_int("one_hot", "depth", depth)
    if d < 0:
        raise fail("one_hot", f"depth must be >= 0, got {d}")
    attrs = {"depth": d, "axis": as_int("one_hot", "axis", axis)}
    on = as_prim_arg("one_hot", on_value, "on_value")
    off = as_prim_arg("one_hot", off_value, "off_value")
    return make_call("one_hot", [indices, on, off], attrs)


# --------------------------------------------------------------------------
# tril / triu
# --------------------------------------------------------------------------


def _infer_triangle(call: E.Call) -> S.StructInfo:
    op = op_name(call)
    x = tensor_arg(call, 0, "x")
    if len(call.args) != 2:
        raise fail(op, f"takes (x, k), got {len(call.args)} arguments")
    k = call.args[1].struct_info
    if not isinstance(k, S.PrimStructInfo) or not k.dtype.startswith("int"):
        raise fail(op, f"k must be an integer PrimValue, got {S.describe(k) if k else '?'}")
    if x.ndim != -1 and x.ndim < 2:
        raise fail(op, f"needs a tensor of rank >= 2, got rank {x.ndim}")
    return x


def _triangle_ctor(name: str, which: str) -> Any:
    def ctor(x: E.Expr, k: Any = 0) -> E.Call:
        return make_call(name, [x, as_prim_arg(name, k, "k")])

    ctor.__name__ = name
    ctor.__doc__ = (
        f"``x`` with the elements {which} the ``k``-th diagonal of its last two dims set to 0"
        " (k > 0: above the main diagonal; ONNX Trilu)."
    )
    return ctor


tril = _triangle_ctor("tril", "above")
triu = _triangle_ctor("triu", "below")

register_op("gather_nd", _infer_gather_nd, num_inputs=2, attr_names=("batch_dims",),
            description="data gathered at index tuples in the last dim of indices (ONNX GatherND)")  # fmt: skip
register_op("scatter_nd", _infer_scatter_nd, num_inputs=3, attr_names=("reduction",),
            description="a copy of data with updates scattered at index tuples (ONNX ScatterND)")  # fmt: skip
register_op("one_hot", _infer_one_hot, num_inputs=3, attr_names=("depth", "axis"),
            description="on_value where a new axis equals the index, off_value elsewhere")  # fmt: skip
register_op("tril", _infer_triangle, num_inputs=2, description="lower triangle of the last two dims")
register_op("triu", _infer_triangle, num_inputs=2, description="upper triangle of the last two dims")


# --------------------------------------------------------------------------
# topk
# --------------------------------------------------------------------------


def _infer_topk(call: E.Call) -> S.StructInfo:
    op = "topk"
    data = tensor_arg(call, 0, "data")
    at = call.attrs
    if at["ret_type"] not in ("both", "values", "indices"):
        raise fail(op, f"ret_type must be 'both', 'values' or 'indices', got {at['ret_type']!r}")
    shape = None
    if data.ndim == 0:
        raise fail(op, "data must have at least one dimension")
    if data.ndim != -1:
        axis = norm_axis(op, at["axis"], data.ndim)
        if data.shape is not None:
            shape = list(data.shape)
            dim = P.const_value(shape[axis])
            if dim is not None and at["k"] > dim:
                raise fail(op, f"k = {at['k']} is larger than the axis ({dim})")
            shape[axis] = P.IntImm(at["k"])
    values = S.TensorStructInfo(shape, data.dtype, data.ndim, data.vdevice)
    indices = S.TensorStructInfo(shape, at["dtype"], data.ndim, data.vdevice)
    if at["ret_type"] == "values":
        return values
    if at["ret_type"] == "indices":
        return indices
    return S.TupleStructInfo([values, indices])


def topk(
    data: E.Expr, k: int = 1, axis: int = -1, ret_type: str = "both", largest: bool = True, dtype: str = "int32"
) -> E.Call:
    """The ``k`` largest (or smallest) elements along ``axis``, sorted, and their
    indices; equal values keep their order (the lower index first), as ONNX TopK.
    ``ret_type`` "both" gives ``(values, indices)``."""
    kk = as_int("topk", "k", k)
    if kk < 0:
        raise fail("topk", f"k must be >= 0, got {kk}")
    attrs = {"k": kk, "axis": as_int("topk", "axis", axis), "ret_type": str(ret_type),
             "largest": bool(largest), "dtype": str(dtype)}  # fmt: skip
    return make_call("topk", [data], attrs)


register_op("topk", _infer_topk, num_inputs=1, attr_names=("k", "axis", "ret_type", "largest", "dtype"),
            description="the k largest or smallest elements along an axis and their indices")  # fmt: skip
