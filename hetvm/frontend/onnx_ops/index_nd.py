"""GatherND, ScatterND, OneHot, Trilu, Range and NonZero, with dynamic shapes kept
dynamic.

Range with bounds known at import time (constants, or shape values such as
``Shape(x)[1]``) becomes ``arange`` whose length is a shape expression; with
run-time bounds, and NonZero, the length is computed as a tensor, read into a
shape (``tensor_to_shape``) and bound to a fresh symbolic dim by ``match_cast``
(see :mod:`hetvm.op.dynamic`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir import expr as E
from ...ir import prim as P
from ...ir import struct_info as S
from ..fold import SymArray
from ..onnx_context import ConvertContext, NodeView
from ..onnx_types import ident
from .registry import converter

_REDUCTIONS = {"none": "update", "add": "add", "mul": "mul", "min": "min", "max": "max"}


@converter("GatherND", since=11)
def _gather_nd(ctx: ConvertContext, node: NodeView) -> Any:
    data = ctx.tensor(0, "data")
    indices = ctx.tensor(1, "indices")
    return ctx.call("gather_nd", data, indices, int(node.attr("batch_dims", 0)))


@converter("ScatterND", since=11)
def _scatter_nd(ctx: ConvertContext, node: NodeView) -> Any:
    reduction = node.attr("reduction", "none")
    reduction = reduction.decode() if isinstance(reduction, bytes) else str(reduction)
    if reduction not in _REDUCTIONS:
        raise ctx.error(f"reduction must be one of {sorted(_REDUCTIONS)}, got {reduction!r}")
    data, indices, updates = ctx.tensor(0, "data"), ctx.tensor(1, "indices"), ctx.tensor(2, "updates")
    return ctx.call("scatter_nd", data, indices, updates, _REDUCTIONS[reduction])


@converter("Trilu", since=14)
def _trilu(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "input")
    k_in = node.input(1)
    if isinstance(k_in, SymArray):
        (k,) = k_in.prims()
    else:
        ks = ctx.ints(k_in, "k")
        k = int(ks[0]) if ks else 0
    return ctx.call("triu" if node.attr("upper", 1) else "tril", x, k)


@converter("OneHot", since=9)
def _one_hot(ctx: ConvertContext, node: NodeView) -> Any:
    """``where(one_hot(indices) != 0, values[1], values[0])``: the values may be
    run-time tensors of any dtype; indices of a float type are truncated."""
    indices = ctx.tensor(0, "indices")
    depth_in = node.input(1)
    if not isinstance(depth_in, np.ndarray) or depth_in.size != 1:
        raise ctx.error("depth must be one value known at import time")
    depth = int(np.asarray(depth_in).reshape(-1)[0])
    if depth < 0:
        raise ctx.error(f"depth must be >= 0, got {depth}")
    if not ctx.dtype(indices).startswith(("int", "uint")):
        indices = ctx.call("astype", indices, "int64")
    values = ctx.tensor(2, "values")
    vshape = ctx.shape_of(values)
    if vshape is None or len(vshape) != 1 or P.const_value(vshape[0]) != 2:
        raise ctx.error(f"values must be a tensor of 2 elements [off, on], got {ctx.describe_inputs()}")
    rank = ctx.rank(indices)
    axis = int(node.attr("axis", -1))
    if not -rank - 1 <= axis <= rank:
        raise ctx.error(f"axis {axis} is out of range for an output of rank {rank + 1}")
    hot = ctx.call("one_hot", indices, 1, 0, depth, axis)
    on = ctx.call("take", values, ctx.const(1, "int64"), None)
    off = ctx.call("take", values, ctx.const(0, "int64"), None)
    return ctx.call("where", ctx.call("astype", hot, "bool"), on, off)


def _fresh_dim(ctx: ConvertContext, hint: str) -> P.PrimVar:
    """A symbolic dim with a name no variable of the function uses."""
    return P.PrimVar(ctx.names.unique(ident(hint)))


def _bind_length(ctx: ConvertContext, length: Any, hint: str) -> tuple[Any, P.PrimVar]:
    """Binds the value of a (1,) int64 tensor to a fresh symbolic dim at run time:
    ``match_cast(tensor_to_shape(length), R.Shape([n]))``; returns (shape, n)."""
    shape = ctx.call("tensor_to_shape", length)
    dim = _fresh_dim(ctx, hint)
    var = ctx.bb.match_cast(shape, S.ShapeStructInfo([dim]), ctx.names.unique(ident(hint + "_shape")))
    if ctx.node is not None:
        ctx.node_of[var.name_hint] = (ctx.node.name, ctx.node.op_type)
    return var, dim


@converter("NonZero", since=9)
def _non_zero(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "X")
    mask = x if ctx.dtype(x) == "bool" else ctx.call("astype", x, "bool")
    count = ctx.call("sum", ctx.call("astype", mask, "int64"))
    shape, _ = _bind_length(ctx, ctx.call("reshape", count, (1,)), f"{node.output_names[0]}_count")
    return ctx.call("nonzero", x, shape)


def _known_scalar(value: Any) -> P.PrimExpr | float | None:
    """An import-time bound as a PrimExpr (ints, shape values) or a float."""
    if isinstance(value, SymArray):
        prims = value.prims()
        return prims[0] if len(prims) == 1 else None
    if isinstance(value, np.ndarray) and value.size == 1:
        v = value.reshape(-1)[0]
        return float(v) if value.dtype.kind == "f" else P.IntImm(int(v))
    return None


@converter("Range", since=11)
def _range(ctx: ConvertContext, node: NodeView) -> Any:
    ins = [node.input(i) for i in range(3)]
    if any(v is None for v in ins):
        raise ctx.error("start, limit and delta are all required")
    dtypes = {ctx.dtype(v) for v in ins if not isinstance(v, SymArray)}
    dtype = dtypes.pop() if len(dtypes) == 1 else "int64"
    if len(dtypes) > 1:
        raise ctx.error(f"start, limit and delta must have one dtype, got {sorted(dtypes | {dtype})}")
    known = [_known_scalar(v) for v in ins]
    is_float = dtype.startswith("float")
    if all(k is not None for k in known) and not (is_float and any(isinstance(v, SymArray) for v in ins)):
        if P.const_value(known[2]) == 0 or known[2] == 0.0:
            raise ctx.error("delta must be nonzero")
        return ctx.call("arange", *known, dtype=dtype)
    # run-time bounds: length as a tensor, bound to a fresh dim
    start, limit, delta = (_one_element(ctx, v, dtype, w) for v, w in zip(ins, ("start", "limit", "delta")))
    length = ctx.call("range_length", start, limit, delta)
    _, n = _bind_length(ctx, length, f"{node.output_names[0]}_len")
    steps = ctx.call("arange", 0, n, 1, dtype="int64")
    if dtype != "int64":
        steps = ctx.call("astype", steps, dtype)
    scalar = ()
    return ctx.call("add", ctx.call("reshape", start, scalar), ctx.call("multiply", steps, ctx.call("reshape", delta, scalar)))


def _one_element(ctx: ConvertContext, value: Any, dtype: str, what: str) -> Any:
    """A bound as a (1,) tensor of ``dtype`` (a shape value via shape_to_tensor)."""
    if isinstance(value, SymArray):
        if value.data.size != 1:
            raise ctx.error(f"{what} must be a scalar, got shape {value.shape}")
        t = ctx.call("shape_to_tensor", E.ShapeExpr(tuple(value.prims())))
        return t if dtype == "int64" else ctx.call("astype", t, dtype)
    t = ctx.tensor(value, what)
    shape = ctx.shape_of(t)
    if shape is not None and any(P.const_value(d) != 1 for d in shape):
        raise ctx.error(f"{what} must be a scalar, got {S.describe(ctx.sinfo(t))}")
    return ctx.call("reshape", t, (1,))


@converter("TopK", since=1)
def _top_k(ctx: ConvertContext, node: NodeView) -> Any:
    """topk returning (values, int64 indices); K is an attribute before opset 10,
    then an input that must be known at import time."""
    x = ctx.tensor(0, "X")
    if node.opset < 10:
        k = int(node.attr("k"))
    else:
        ks = ctx.ints(node.input(1), "K")
        if not ks or len(ks) != 1:
            raise ctx.error(f"K must be one integer, got {ks}")
        k = ks[0]
    largest = bool(node.attr("largest", 1))
    call = ctx.call("topk", x, k, int(node.attr("axis", -1)), "both", largest, "int64")
    return [ctx.emit(E.TupleGetItem(call, 0)), ctx.emit(E.TupleGetItem(call, 1))]


@converter("Compress", since=9)
def _compress(ctx: ConvertContext, node: NodeView) -> Any:
    """take(x, nonzero(condition)[0], axis): the slices where condition is true
    (the count bound to a fresh dim at run time); no axis: of the flattened x."""
    x = ctx.tensor(0, "input")
    cond = ctx.tensor(1, "condition")
    if ctx.rank(cond) != 1:
        raise ctx.error(f"condition must be 1-D, got rank {ctx.rank(cond)}")
    mask = cond if ctx.dtype(cond) == "bool" else ctx.call("astype", cond, "bool")
    count = ctx.call("sum", ctx.call("astype", mask, "int64"))
    shape, _ = _bind_length(ctx, ctx.call("reshape", count, (1,)), f"{node.output_names[0]}_count")
    where = ctx.call("nonzero", mask, shape)
    picked = ctx.call("reshape", where, (shape.struct_info.values[0],))
    axis = node.attr("axis")
    if axis is None:
        return ctx.call("take", ctx.call("flatten", x), picked, 0)
    rank = ctx.rank(x)
    if not -rank <= int(axis) < rank:
        raise ctx.error(f"axis {axis} is out of range for rank {rank}")
    return ctx.call("take", x, picked, int(axis) % rank)


@converter("ReverseSequence", since=10)
def _reverse_sequence(ctx: ConvertContext, node: NodeView) -> Any:
    """gather_elements along the time axis at ``L - 1 - t`` where ``t < L`` (the
    batch entry's length), ``t`` elsewhere."""
    x = ctx.tensor(0, "input")
    lens = ctx.tensor(1, "sequence_lens")
    shape = ctx.known_shape(x, "input")
    rank = len(shape)
    if rank < 2:
        raise ctx.error(f"needs an input of rank >= 2, got rank {rank}")
    t_axis, b_axis = int(node.attr("time_axis", 0)), int(node.attr("batch_axis", 1))
    if {t_axis, b_axis} != {0, 1}:
        raise ctx.error(f"time_axis and batch_axis must be 0 and 1, got {t_axis} and {b_axis}")
    t = ctx.call("arange", 0, shape[t_axis], 1, dtype="int64")
    lens = ctx.call("astype", lens, "int64") if ctx.dtype(lens) != "int64" else lens
    grid = (shape[t_axis], 1) if t_axis == 0 else (1, shape[t_axis])
    t = ctx.call("reshape", t, grid)
    lens = ctx.call("reshape", lens, (1, shape[b_axis]) if t_axis == 0 else (shape[b_axis], 1))
    flipped = ctx.call("subtract", ctx.call("subtract", lens, ctx.const(1, "int64")), t)
    idx = ctx.call("where", ctx.call("less", t, lens), flipped, t)
    idx = ctx.call("reshape", idx, tuple(shape[:2]) + (1,) * (rank - 2))
    idx = ctx.call("broadcast_to", idx, tuple(shape))
    return ctx.call("gather_elements", x, idx, t_axis)


@converter("Unique", since=11)
def _unique(ctx: ConvertContext, node: NodeView) -> Any:
    """unique_count, bound to a fresh dim at run time, then unique's four results."""
    x = ctx.tensor(0, "X")
    axis = node.attr("axis")
    if axis is not None:
        rank = ctx.rank(x)
        if not -rank <= int(axis) < rank:
            raise ctx.error(f"axis {axis} is out of range for rank {rank}")
        axis = int(axis) % rank
    count = ctx.call("unique_count", x, axis)
    shape, _ = _bind_length(ctx, count, f"{node.output_names[0]}_count")
    call = ctx.call("unique", x, shape, bool(node.attr("sorted", 1)), axis)
    return [ctx.emit(E.TupleGetItem(call, i)) for i in range(4)]
