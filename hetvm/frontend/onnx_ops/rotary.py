"""ONNX ``RotaryEmbedding`` (opset 23+), decomposed into slices and multiply-adds.

hetvm has no rotary op, so the converter spells out the specification's
algorithm (``onnx/reference/ops/op_rotary_embedding.py``) on the input's own
layout, without the reference's transposes:

* a 4-D input ``(batch, heads, seq, head_size)`` stays as it is, with the caches
  as ``(batch, 1, seq, rot/2)``; a 3-D input ``(batch, seq, heads*head_size)``
  is reshaped to ``(batch, seq, heads, head_size)``, with the caches as
  ``(batch, seq, 1, rot/2)``, and reshaped back at the end;
* with ``position_ids`` the caches ``(max_position, rot/2)`` are gathered
  (``take``) at them, giving ``(batch, seq, rot/2)``; without them the caches
  are that shape already;
* the first ``rot = rotary_embedding_dim`` (default: the head size) channels are
  split into halves -- or into even and odd channels when ``interleaved`` -- and
  rotated: ``real = cos*x1 - sin*x2``, ``imag = sin*x1 + cos*x2`` (the reference's
  order, so float16 rounds alike); the rest pass through unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir import expr as E
from ...ir import prim as P
from ..onnx_context import ConvertContext, NodeView
from .registry import converter

_FLOATS = ("float16", "float32", "float64")




def _cache(ctx: ConvertContext, node: NodeView, index: int, what: str, half: int, heads_axis: int) -> E.Expr:
    """Cache ``index`` (cos or sin) as ``(batch, seq, rot/2)`` with a unit heads axis
    inserted at ``heads_axis``; gathered at ``position_ids`` when those are given."""
    positions = node.input(3)
    rank = ctx.rank(node.input(index))
    want = 2 if positions is not None else 3
    if rank != want:
        layout = "(max_position, rot/2) with position_ids" if positions is not None else (
            "(batch, seq, rot/2) without position_ids"
        )
        raise ctx.error(f"{what} must be {want}-D {layout}, got rank {rank}")
    last = ctx.static_dim(ctx.known_shape(node.input(index), what)[-1], f"the last dim of {what}")
    if last != half:
        raise ctx.error(f"the last dim of {what} ({last}) does not match rotary_embedding_dim/2 ({half})")
    cache, pos = ctx.folded(index), ctx.folded(3) if positions is not None else None
    if cache is not None and (positions is None or pos is not None):  # known: gather with NumPy
        arr = cache if positions is None else cache[pos]
        return ctx.const(np.expand_dims(arr, heads_axis))
    c = ctx.tensor(index, what)
    if positions is not None:
        p = ctx.tensor(3, "position_ids")
        if ctx.rank(p) != 2:
            raise ctx.error(f"position_ids must be 2-D (batch, seq), got rank {ctx.rank(p)}")
        c = ctx.call("take", c, p, 0)
    return ctx.call("expand_dims", c, heads_axis)


def _last(ctx: ConvertContext, x: E.Expr, begin: int, end: int, step: int = 1) -> E.Expr:
    return ctx.call("strided_slice", x, [3], [begin], [end], [step])


@converter("RotaryEmbedding", since=23)
def _rotary_embedding(ctx: ConvertContext, node: NodeView) -> Any:
    """Rotary position embedding; see the module docstring for the decomposition."""
    x = ctx.tensor(0, "X")
    dtype = ctx.dtype(x)
    if dtype not in _FLOATS:
        raise ctx.error(f"unsupported dtype '{dtype}' of X (float16, float32 or float64)")
    for index, what in ((1, "cos_cache"), (2, "sin_cache")):
        if node.input(index) is None:
            raise ctx.error(f"input {index} ({what}) is missing")
        if ctx.dtype(node.input(index)) != dtype:
            raise ctx.error(f"{what} has dtype {ctx.dtype(node.input(index))}, X has {dtype}; they must be equal")
    positions = node.input(3)
    if positions is not None and ctx.dtype(positions) not in ("int64", "int32"):
        raise ctx.error(f"position_ids must be int64, got {ctx.dtype(positions)}")
    interleaved = bool(node.attr("interleaved", 0))
    num_heads = int(node.attr("num_heads", 0) or 0)

    rank = ctx.rank(x)
    shape = ctx.known_shape(x, "X")
    if rank == 4:
        head = ctx.static_dim(shape[3], "the head size")
        x4, heads_axis = x, 1
    elif rank == 3:
        if num_heads <= 0:
            raise ctx.error("a 3-D input needs the num_heads attribute")
        hidden = ctx.static_dim(shape[2], "the hidden size")
        if hidden % num_heads:
            raise ctx.error(f"the hidden size {hidden} is not divisible by num_heads {num_heads}")
        head = hidden // num_heads
        x4 = ctx.call("reshape", x, (shape[0], shape[1], P.IntImm(num_heads), P.IntImm(head)))
        heads_axis = 2
    else:
        raise ctx.error(f"X must be 3-D (batch, seq, hidden) or 4-D (batch, heads, seq, head_size), got rank {rank}")
    rot = int(node.attr("rotary_embedding_dim", 0) or 0) or head
    if rot % 2 or not 0 < rot <= head:
        raise ctx.error(f"rotary_embedding_dim {rot} must be even and in (0, {head}] (the head size)")
    half = rot // 2

    cos = _cache(ctx, node, 1, "cos_cache", half, heads_axis)
    sin = _cache(ctx, node, 2, "sin_cache", half, heads_axis)
    if interleaved:
        x1, x2 = _last(ctx, x4, 0, rot, 2), _last(ctx, x4, 1, rot, 2)
    else:
        x1, x2 = _last(ctx, x4, 0, half), _last(ctx, x4, half, rot)
    real = ctx.call("subtract", ctx.call("multiply", cos, x1), ctx.call("multiply", sin, x2))
    imag = ctx.call("add", ctx.call("multiply", sin, x1), ctx.call("multiply", cos, x2))
    if interleaved:  # real/imag back to the even/odd channels
        pairs = ctx.call("concat", E.Tuple((ctx.call("expand_dims", real, 4), ctx.call("expand_dims", imag, 4))), 4)
        dims = ctx.known_shape(x4, "X")
        rotated = ctx.call("reshape", pairs, (*dims[:3], P.IntImm(rot)))
    else:
        rotated = ctx.call("concat", E.Tuple((real, imag)), 3)
    y = rotated if rot == head else ctx.call("concat", E.Tuple((rotated, _last(ctx, x4, rot, head))), 3)
    if rank == 3:
        y = ctx.call("reshape", y, shape)
    return y
