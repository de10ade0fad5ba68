"""Normalisations composed from reductions and element-wise ops.

InstanceNormalization, GroupNormalization, LpNormalization,
MeanVarianceNormalization, RMSNormalization and GlobalLpPool: each follows the
formula of the ONNX specification (and of its reference tests) with hetvm's
``mean``/``sum`` reductions, so symbolic batch and spatial dims stay symbolic.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...ir import expr as E
from ...ir import prim as P
from ..onnx_context import ConvertContext, NodeView, normalize_axes, normalize_axis
from .registry import converter


def _c(ctx: ConvertContext, value: float, x: E.Expr) -> E.Constant:
    return ctx.const(value, ctx.dtype(x))


def _normalize(ctx: ConvertContext, x: E.Expr, axes: Sequence[int], eps: float) -> E.Expr:
    """(x - mean) / sqrt(var + eps) over ``axes`` (biased variance)."""
    mu = ctx.call("mean", x, list(axes), keepdims=True)
    d = ctx.call("subtract", x, mu)
    var = ctx.call("mean", ctx.call("multiply", d, d), list(axes), keepdims=True)
    inv = ctx.call("rsqrt", ctx.call("add", var, _c(ctx, eps, x)))
    return ctx.call("multiply", d, inv)


def _per_channel(ctx: ConvertContext, index: int, rank: int, what: str, dtype: str) -> E.Expr:
    """A (C,) input shaped (C, 1, ..., 1) to broadcast against (N, C, ...) data."""
    shape = (-1,) + (1,) * (rank - 2)
    arr = ctx.folded(index)
    if arr is not None:
        return ctx.const(np.asarray(arr).reshape(shape).astype(dtype))
    v = ctx.tensor(index, what)
    return ctx.call("reshape", v, shape)


@converter("InstanceNormalization", since=6)
def _instance_norm(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "input")
    rank = ctx.rank(x)
    if rank < 3:
        raise ctx.error(f"needs an input of rank >= 3 (N, C, spatial...), got rank {rank}")
    dtype = ctx.dtype(x)
    y = _normalize(ctx, x, range(2, rank), float(node.attr("epsilon", 1e-5)))
    y = ctx.call("multiply", y, _per_channel(ctx, 1, rank, "scale", dtype))
    return ctx.call("add", y, _per_channel(ctx, 2, rank, "B", dtype))


@converter("GroupNormalization", since=18)
def _group_norm(ctx: ConvertContext, node: NodeView) -> Any:
    """Statistics per (sample, group of C/G channels); scale and bias are per group
    before opset 21 and per channel from 21 on."""
    x = ctx.tensor(0, "X")
    shape = ctx.shape_of(x)
    if shape is None or len(shape) < 2:
        raise ctx.error("needs an input of known rank >= 2 (N, C, ...)")
    rank = len(shape)
    groups = int(node.attr("num_groups"))
    channels = P.const_value(shape[1])
    if channels is None:
        raise ctx.error("the channel count must be static")
    if groups <= 0 or channels % groups:
        raise ctx.error(f"num_groups={groups} does not divide the {channels} channels")
    dtype = ctx.dtype(x)
    grouped = ctx.call("reshape", x, (shape[0], groups, channels // groups, *shape[2:]))
    y = _normalize(ctx, grouped, range(2, rank + 1), float(node.attr("epsilon", 1e-5)))
    if node.opset >= 21:
        y = ctx.call("reshape", y, tuple(shape))
        y = ctx.call("multiply", y, _per_channel(ctx, 1, rank, "scale", dtype))
        return ctx.call("add", y, _per_channel(ctx, 2, rank, "bias", dtype))
    y = ctx.call("multiply", y, _per_channel(ctx, 1, rank + 1, "scale", dtype))
    y = ctx.call("add", y, _per_channel(ctx, 2, rank + 1, "bias", dtype))
    return ctx.call("reshape", y, tuple(shape))


@converter("LpNormalization")
def _lp_norm(ctx: ConvertContext, node: NodeView) -> Any:
    """x / ||x||_p along ``axis`` (p = 1 or 2); a zero norm gives 0, as the reference."""
    x = ctx.tensor(0, "input")
    axis = normalize_axis(ctx, int(node.attr("axis", -1)), ctx.rank(x))
    p = int(node.attr("p", 2))
    if p == 1:
        norm = ctx.call("sum", ctx.call("abs", x), [axis], keepdims=True)
    elif p == 2:
        norm = ctx.call("sqrt", ctx.call("sum", ctx.call("multiply", x, x), [axis], keepdims=True))
    else:
        raise ctx.error(f"p must be 1 or 2, got {p}")
    zero = ctx.call("equal", norm, _c(ctx, 0.0, x))
    safe = ctx.call("where", zero, _c(ctx, 1.0, x), norm)
    return ctx.call("where", zero, _c(ctx, 0.0, x), ctx.call("divide", x, safe))


@converter("MeanVarianceNormalization", since=9)
def _mvn(ctx: ConvertContext, node: NodeView) -> Any:
    """(x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over ``axes`` (default 0, 2, 3)."""
    x = ctx.tensor(0, "X")
    axes = normalize_axes(ctx, node.attr("axes", [0, 2, 3]), ctx.rank(x))
    mu = ctx.call("mean", x, axes, keepdims=True)
    sq_mean = ctx.call("mean", ctx.call("multiply", x, x), axes, keepdims=True)
    std = ctx.call("sqrt", ctx.call("subtract", sq_mean, ctx.call("multiply", mu, mu)))
    den = ctx.call("add", std, _c(ctx, 1e-9, x))
    return ctx.call("divide", ctx.call("subtract", x, mu), den)


@converter("RMSNormalization", since=23)
def _rms_norm(ctx: ConvertContext, node: NodeView) -> Any:
    """x / sqrt(mean(x^2 over axis..last) + epsilon) * scale."""
    x = ctx.tensor(0, "X")
    rank = ctx.rank(x)
    axis = normalize_axis(ctx, int(node.attr("axis", -1)), rank)
    axes = list(range(axis, rank))
    ms = ctx.call("mean", ctx.call("multiply", x, x), axes, keepdims=True)
    inv = ctx.call("rsqrt", ctx.call("add", ms, _c(ctx, float(node.attr("epsilon", 1e-5)), x)))
    return ctx.call("multiply", ctx.call("multiply", x, inv), ctx.tensor(1, "scale"))


@converter("GlobalLpPool", since=2)
def _global_lp_pool(ctx: ConvertContext, node: NodeView) -> Any:
    """(sum over the spatial axes of |x|^p)^(1/p), keepdims."""
    x = ctx.tensor(0, "X")
    axes = list(range(2, ctx.rank(x)))
    p = float(node.attr("p", 2))
    if p == 2.0:
        return ctx.call("sqrt", ctx.call("sum", ctx.call("multiply", x, x), axes, keepdims=True))
    if p == 1.0:
        return ctx.call("sum", ctx.call("abs", x), axes, keepdims=True)
    powered = ctx.call("power", ctx.call("abs", x), _c(ctx, p, x))
    return ctx.call("power", ctx.call("sum", powered, axes, keepdims=True), _c(ctx, 1.0 / p, x))
