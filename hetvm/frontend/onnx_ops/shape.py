"""Shape and layout ONNX ops: Reshape, Transpose, Concat, Split, Slice, Gather, ...

Shape-like inputs (Reshape's shape, Slice's starts, Expand's shape ...) must be
known at import time: constants, or values derived from input shapes, which
may hold symbolic dimensions (see :class:`..fold.SymArray`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ...ir import expr as E
from ...ir import prim as P
from ...ir import struct_info as S
from ..fold import SymArray, known, reshape_target
from ..onnx_context import ConvertContext, NodeView, normalize_axes, normalize_axis
from ..onnx_types import ident
from .registry import converter

_BIG = 2**31 - 1
#: Slice bounds at or past this mean "to the end" (or "from the start"): exporters
#: write INT64_MAX, 2**31-1 or 1e9 (paddle2onnx, some torch idioms) for "all of it".
#: A dim this long (4 GB of float32 per element of the other dims) is not supported
#: with such a bound; any bound below it is clamped exactly as ONNX says.
SLICE_PAST_ANY_DIM = 10**9


def _axes_of(ctx: ConvertContext, node: NodeView, input_since: int, index: int = 1) -> list[int] | None:
    """Axes from the attribute (older opsets) or from input ``index``."""
    if node.opset >= input_since:
        return ctx.ints(node.input(index), "axes")
    axes = node.attr("axes")
    return None if axes is None else [int(a) for a in axes]


@converter("Reshape")
def _reshape(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "data")
    if node.opset >= 5:
        target = ctx.dims(node.input(1), "the target shape")
    else:
        target = [P.IntImm(int(v)) for v in node.attr("shape")]
    raw = [P.const_value(t) if P.const_value(t) is not None else t for t in target]
    shape = ctx.shape_of(x)
    allowzero = bool(node.attr("allowzero", 0))
    if shape is None:
        if any(t == 0 for t in raw if isinstance(t, int)) and not allowzero:
            raise ctx.error("a 0 in the target shape needs a known input shape")
        return ctx.call("reshape", x, tuple(raw))
    return ctx.call("reshape", x, tuple(reshape_target(shape, raw, allowzero)))


@converter("Flatten")
def _flatten(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "input")
    shape = ctx.shape_of(x)
    if shape is None:
        raise ctx.error("needs a known input shape")
    axis = int(node.attr("axis", 1))
    axis = axis + len(shape) if axis < 0 else axis
    lead, tail = P.IntImm(1), P.IntImm(1)
    for d in shape[:axis]:
        lead = P.mul(lead, d)
    for d in shape[axis:]:
        tail = P.mul(tail, d)
    return ctx.call("reshape", x, (lead, tail))


@converter("Transpose")
def _transpose(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "data")
    perm = node.attr("perm")
    return ctx.call("permute_dims", x, None if perm is None else [int(p) for p in perm])


@converter("Concat", since=4)
def _concat(ctx: ConvertContext, node: NodeView) -> Any:
    parts = [ctx.tensor(i) for i, v in enumerate(node.inputs) if v is not None]
    axis = normalize_axis(ctx, int(node.attr("axis")), ctx.rank(parts[0]))
    return ctx.call("concat", E.Tuple(tuple(parts)), axis)


@converter("Split", since=2)
def _split(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "input")
    rank = ctx.rank(x)
    axis = normalize_axis(ctx, int(node.attr("axis", 0)), rank)
    sizes = ctx.ints(node.input(1), "split") if node.opset >= 13 else node.attr("split")
    count = len(node.output_names)
    if sizes:
        if len(sizes) != count or any(int(s) < 0 for s in sizes):
            raise ctx.error(f"'split' needs {count} non-negative sizes (one per output), got {list(sizes)}")
        indices, acc = [], 0
        for s in list(sizes)[:-1]:
            acc += int(s)
            indices.append(acc)
        ios: Any = indices
    else:
        ios = int(node.attr("num_outputs", count))
        if ios != count:
            raise ctx.error(f"num_outputs={ios}, but the node has {count} output(s)")
    tup = ctx.call("split", x, ios, axis)
    return [ctx.emit(E.TupleGetItem(tup, i), out or None) for i, out in enumerate(node.output_names)]


@converter("Slice")
def _slice(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "data")
    rank = ctx.rank(x)
    if node.opset >= 10 and all(isinstance(node.input(i), E.Expr) for i in (1, 2)):
        return _slice_at_run_time(ctx, node, x, rank)
    if node.opset >= 10:
        starts = ctx.dims(node.input(1), "starts")
        ends = ctx.dims(node.input(2), "ends")
        axes = ctx.ints(node.input(3), "axes")
        steps = ctx.ints(node.input(4), "steps")
    else:
        starts = [P.IntImm(int(v)) for v in node.attr("starts")]
        ends = [P.IntImm(int(v)) for v in node.attr("ends")]
        axes, steps = node.attr("axes"), None
    assert starts is not None and ends is not None
    axes = list(range(len(starts))) if axes is None else normalize_axes(ctx, axes, rank)
    steps = [1] * len(starts) if steps is None else [int(s) for s in steps]
    begin = [_clamp(b) for b in starts]
    end = [_clamp(e) for e in ends]
    return ctx.call("strided_slice", x, axes, begin, end, steps)


def _slice_at_run_time(ctx: ConvertContext, node: NodeView, x: Any, rank: int) -> Any:
    """A Slice whose starts and ends are both computed at run time (a loop body
    slicing at its iteration counter): the strided_slice kernel cannot locate a
    window with neither bound known, so each axis becomes a ``take`` of the
    indices ``arange(start, end, step)``, the bounds clamped as ONNX says."""
    starts, ends = (ctx.tensor(i, w) for i, w in ((1, "starts"), (2, "ends")))
    count = ctx.known_shape(starts, "starts")[0]
    n = ctx.static_dim(count, "the number of starts")
    axes = ctx.ints(node.input(3), "axes")
    steps = ctx.ints(node.input(4), "steps") or [1] * n
    axes = list(range(n)) if axes is None else normalize_axes(ctx, axes, rank)
    i64 = "int64"
    starts, ends = (v if ctx.dtype(v) == i64 else ctx.call("astype", v, i64) for v in (starts, ends))
    shape = ctx.known_shape(x, "data")
    for k, (axis, step) in enumerate(zip(axes, steps)):
        if step == 0:
            raise ctx.error("a step of 0")
        at = ctx.const(np.array([k], dtype=np.int64))
        b, e = ctx.call("take", starts, at, axis=0), ctx.call("take", ends, at, axis=0)
        dim_value = P.const_value(shape[axis])
        if dim_value is not None:
            dim: Any = ctx.const(np.array([int(dim_value)], dtype=np.int64))
        else:
            sizes = ctx.call("shape_to_tensor", ctx.call("shape_of", x))
            dim = ctx.call("take", sizes, ctx.const(np.array([axis], dtype=np.int64)), axis=0)
        low, high = (0, 0) if step > 0 else (-1, -1)  # clamp to [0, dim] or [-1, dim - 1]
        zero = ctx.const(np.array([0], dtype=np.int64))
        bounds = []
        for v in (b, e):
            v = ctx.call("where", ctx.call("less", v, zero), ctx.call("add", v, dim), v)
            top = dim if high == 0 else ctx.call("subtract", dim, ctx.const(np.array([1], dtype=np.int64)))
            v = ctx.call("minimum", ctx.call("maximum", v, ctx.const(np.array([low], dtype=np.int64))), top)
            bounds.append(v)
        delta = ctx.const(np.array([step], dtype=np.int64))
        length = ctx.call("range_length", bounds[0], bounds[1], delta)
        sizes_of = ctx.call("tensor_to_shape", length)
        m = P.PrimVar(ctx.names.unique(ident(f"{node.output_names[0] or 'slice'}_len")))
        ctx.bb.match_cast(sizes_of, S.ShapeStructInfo([m]), ctx.names.unique("slice_len_shape"))
        offsets = ctx.call("arange", 0, m, 1, dtype=i64)
        first = ctx.call("reshape", bounds[0], ())
        indices = ctx.call("add", ctx.call("multiply", offsets, ctx.const(np.array(step, dtype=np.int64))), first)
        x = ctx.call("take", x, indices, axis=axis)
    return x


def _clamp(v: P.PrimExpr) -> int | P.PrimExpr:
    """A constant bound at or past SLICE_PAST_ANY_DIM becomes strided_slice's
    sentinel (so the slice's length is ``n - start``, not ``min(n, 1e9) - start``,
    which memory planning would size at 1e9)."""
    c = P.const_value(v)
    if c is None:
        return v
    if c >= SLICE_PAST_ANY_DIM:
        return _BIG
    if c <= -SLICE_PAST_ANY_DIM:
        return -_BIG
    return int(c)


@converter("Squeeze")
def _squeeze(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "data")
    axes = _axes_of(ctx, node, 13)
    if axes is None:
        return ctx.call("squeeze", x, None)
    return ctx.call("squeeze", x, normalize_axes(ctx, axes, ctx.rank(x)))


@converter("Unsqueeze")
def _unsqueeze(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "data")
    axes = _axes_of(ctx, node, 13)
    if axes is None:
        raise ctx.error("needs axes")
    out_rank = ctx.rank(x) + len(axes)
    return ctx.call("expand_dims", x, sorted(normalize_axes(ctx, axes, out_rank)))


@converter("Shape")
def _shape(ctx: ConvertContext, node: NodeView) -> Any:
    x = node.input(0)
    shape = ctx.shape_of(x) if x is not None else None
    if shape is None:
        if not ctx.has_op("shape_to_tensor"):
            raise ctx.error("the input's shape is unknown at import time")
        s = ctx.call("shape_of", ctx.tensor(0))
        return ctx.call("shape_to_tensor", s)
    start, end = node.attr("start", 0), node.attr("end")
    dims = np.empty(len(shape), dtype=object)
    dims[:] = list(shape)
    return known(dims[start:end])


@converter("Gather")
def _gather(ctx: ConvertContext, node: NodeView) -> Any:
    data = node.input(0)
    if isinstance(data, SymArray):
        raise ctx.error("gathering from a symbolic shape value with run-time indices")
    x = ctx.tensor(0, "data")
    rank = ctx.rank(x)
    axis = normalize_axis(ctx, int(node.attr("axis", 0)), rank)
    idx = node.input(1)
    if isinstance(idx, np.ndarray):
        shape = ctx.shape_of(x)
        dim = P.const_value(shape[axis]) if shape is not None else None
        arr = idx.astype(np.int64)
        if (arr < 0).any():
            if dim is None:
                raise ctx.error("negative indices need a static dimension on the gather axis")
            arr = np.where(arr < 0, arr + dim, arr)
        indices: E.Expr = ctx.const(arr)
    else:
        indices = ctx.tensor(1, "indices")
    return ctx.call("take", x, indices, axis)


@converter("Expand", since=8)
def _expand(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "input")
    target = ctx.dims(node.input(1), "the shape")
    shape = ctx.shape_of(x)
    if shape is None:
        raise ctx.error("needs a known input shape")
    assert target is not None
    n = max(len(shape), len(target))
    a = [P.IntImm(1)] * (n - len(shape)) + list(shape)
    b = [P.IntImm(1)] * (n - len(target)) + list(target)
    return ctx.call("broadcast_to", x, tuple(_expanded_dim(x_d, t_d) for x_d, t_d in zip(a, b)))


def _expanded_dim(x_d: P.PrimExpr, t_d: P.PrimExpr) -> P.PrimExpr:
    """One dim of Expand's bidirectional broadcast: a target dim of 1 keeps the
    input's, and so does a static input dim above 1 (a symbolic target dim must
    then be 1 or equal to it, and either way the result is the input's: a dim
    taken from a Shape that is 1 at run time must not shrink the tensor)."""
    x_value = P.const_value(x_d)
    if P.const_value(t_d) == 1 or (x_value is not None and x_value > 1 and P.const_value(t_d) is None):
        return x_d
    return t_d


@converter("ConstantOfShape", since=9)
def _constant_of_shape(ctx: ConvertContext, node: NodeView) -> Any:
    dims = ctx.dims(node.input(0), "the shape")
    value = node.attr("value")
    fill = np.asarray(value).reshape(-1)[:1].reshape(()) if value is not None else np.float32(0)
    fill = np.asarray(fill)
    dtype = "bool" if fill.dtype == np.bool_ else str(fill.dtype)
    return ctx.call("full", tuple(dims or ()), ctx.const(fill), dtype)


@converter("Pad", since=2)
def _pad(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "data")
    rank = ctx.rank(x)
    mode = node.attr("mode", "constant")
    if node.opset >= 11:
        pads = ctx.ints(node.input(1), "pads")
        value = node.input(2)
        if value is not None and not isinstance(value, np.ndarray):
            if mode != "constant":
                return _pad(ctx, dataclasses.replace(node, inputs=node.inputs[:2] + [None] + node.inputs[3:]))
            return _pad_with_run_time_value(ctx, node, x, value)
        value = 0.0 if value is None else float(np.asarray(value).reshape(()))
        axes = ctx.ints(node.input(3), "axes")
    else:
        pads = [int(p) for p in node.attr("pads")]
        value, axes = float(node.attr("value", 0.0)), None
    assert pads is not None
    axes = list(range(rank)) if axes is None else normalize_axes(ctx, axes, rank)
    width = [0] * (2 * rank)
    for i, a in enumerate(axes):
        width[a], width[rank + a] = pads[i], pads[len(axes) + i]
    if any(w < 0 for w in width):
        raise ctx.error(f"negative pads are not supported, got {pads}")
    if not any(width):
        return x
    # hetvm (after TVM) orders pad_width as (before0, after0, before1, after1, ...)
    pad_width = [v for a in range(rank) for v in (width[a], width[rank + a])]
    return ctx.call("nn.pad", x, pad_width, pad_mode=mode, pad_value=value)


def _pad_with_run_time_value(ctx: ConvertContext, node: NodeView, x: Any, value: Any) -> Any:
    """Pad by a constant computed at run time: zero padding, then ``value`` where a
    padded mask (ones padded with zeros) is 0."""
    zero_pad = dataclasses.replace(node, inputs=node.inputs[:2] + [None] + node.inputs[3:])
    padded = _pad(ctx, zero_pad)
    if padded is x:
        return x
    # the converter reads its data from the node being converted: the mask's view
    ones = dataclasses.replace(zero_pad, inputs=[ctx.call("ones_like", x), *zero_pad.inputs[1:]])
    outer, ctx.node = ctx.node, ones
    try:
        mask = _pad(ctx, ones)
    finally:
        ctx.node = outer
    fill = ctx.call("reshape", ctx.tensor(value, "constant_value"), ())
    if ctx.dtype(fill) != ctx.dtype(x):
        fill = ctx.call("astype", fill, ctx.dtype(x))
    return ctx.call("where", ctx.call("astype", mask, "bool"), padded, fill)
