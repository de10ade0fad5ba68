"""Data-movement ops composed from reshape, broadcast_to, permute_dims and where:
Tile, DepthToSpace, SpaceToDepth, and EyeLike (a constant of the input's
static shape)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir import prim as P
from ..onnx_context import ConvertContext, NodeView
from ..onnx_types import dtype_of
from .registry import converter


def _shape(ctx: ConvertContext, x: Any) -> tuple[P.PrimExpr, ...]:
    shape = ctx.shape_of(x)
    if shape is None:
        raise ctx.error("needs an input of known shape")
    return shape


@converter("Tile", since=6)
def _tile(ctx: ConvertContext, node: NodeView) -> Any:
    """x (d0, d1, ...) repeated (r0, r1, ...): reshape to (1, d0, 1, d1, ...),
    broadcast to (r0, d0, r1, d1, ...), reshape to (r0*d0, r1*d1, ...)."""
    x = ctx.tensor(0, "input")
    shape = _shape(ctx, x)
    # repeats may be shape values (DeBERTa tiles by batch // heads): symbolic is fine
    reps = ctx.dims(node.input(1), "repeats")
    if reps is None or len(reps) != len(shape):
        shown = None if reps is None else [P.to_str(r) for r in reps]
        raise ctx.error(f"repeats needs one value per input dim ({len(shape)}), got {shown}")
    consts = [P.const_value(r) for r in reps]
    if any(c is not None and c < 0 for c in consts):
        raise ctx.error(f"repeats must be non-negative, got {[P.to_str(r) for r in reps]}")
    if all(c == 1 for c in consts):
        return x
    inter = [d for dim in shape for d in (P.IntImm(1), dim)]
    target = [d for r, dim in zip(reps, shape) for d in (r, dim)]
    y = ctx.call("reshape", x, tuple(inter))
    y = ctx.call("broadcast_to", y, tuple(target))
    return ctx.call("reshape", y, tuple(P.mul(r, dim) for r, dim in zip(reps, shape)))


@converter("DepthToSpace")
def _depth_to_space(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "input")
    shape = _shape(ctx, x)
    if len(shape) != 4:
        raise ctx.error(f"needs an NCHW input, got rank {len(shape)}")
    b = int(node.attr("blocksize"))
    n, c, h, w = shape
    c_out = P.floordiv(c, b * b)
    if node.attr("mode", "DCR") == "CRD":
        y = ctx.call("reshape", x, (n, c_out, b, b, h, w))
        y = ctx.call("permute_dims", y, [0, 1, 4, 2, 5, 3])
    else:
        y = ctx.call("reshape", x, (n, b, b, c_out, h, w))
        y = ctx.call("permute_dims", y, [0, 3, 4, 1, 5, 2])
    return ctx.call("reshape", y, (n, c_out, P.mul(h, b), P.mul(w, b)))


@converter("SpaceToDepth")
def _space_to_depth(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "input")
    shape = _shape(ctx, x)
    if len(shape) != 4:
        raise ctx.error(f"needs an NCHW input, got rank {len(shape)}")
    b = int(node.attr("blocksize"))
    n, c, h, w = shape
    hb, wb = P.floordiv(h, b), P.floordiv(w, b)
    y = ctx.call("reshape", x, (n, c, hb, b, wb, b))
    # DCR: the block offsets outermost in the new channel axis; CRD (mode attribute of
    # newer opsets): the old channel outermost, as DepthToSpace's CRD inverts
    perm = [0, 1, 3, 5, 2, 4] if node.attr("mode", "DCR") == "CRD" else [0, 3, 5, 1, 2, 4]
    y = ctx.call("permute_dims", y, perm)
    return ctx.call("reshape", y, (n, P.mul(c, b * b), hb, wb))


@converter("EyeLike", since=9)
def _eye_like(ctx: ConvertContext, node: NodeView) -> Any:
    """Depends only on the input's (static) shape: an import-time constant."""
    x = node.input(0)
    shape = ctx.shape_of(x)
    static = [P.const_value(d) for d in shape] if shape is not None else None
    if static is None or len(static) != 2 or any(d is None for d in static):
        raise ctx.error("needs a 2-D input of static shape")
    to = node.attr("dtype")
    dtype = dtype_of(int(to)) if to is not None else ctx.dtype(x)
    return np.eye(static[0], static[1], k=int(node.attr("k", 0)), dtype=dtype)


@converter("GatherElements", since=11)
def _gather_elements(ctx: ConvertContext, node: NodeView) -> Any:
    data = ctx.tensor(0, "data")
    axis = int(node.attr("axis", 0))
    return ctx.call("gather_elements", data, ctx.tensor(1, "indices"), axis)
