"""Size (the element count of a run-time tensor, from its shape) and LpPool
(``(sum |x|^p over the window)^(1/p)``, an average pool with the padding counted,
times the window size)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ...ir import prim as P
from ..fold import known
from ..onnx_context import ConvertContext, NodeView
from . import converter
from .nn import _pool


@converter("Size")
def _size(ctx: ConvertContext, node: NodeView) -> Any:
    """The product of the input's dims: a constant, or a shape value on symbolic dims."""
    shape = ctx.known_shape(node.input(0), "input")
    total: P.PrimExpr = P.IntImm(1)
    for d in shape:
        total = P.mul(total, d)
    out = np.empty((), dtype=object)
    out[()] = total
    return known(out)


@converter("LpPool", since=2)
def _lp_pool(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "X")
    dtype = ctx.dtype(x)
    if not dtype.startswith("float"):
        raise ctx.error(f"needs a floating-point input, got {dtype}")
    p = int(node.attr("p", 2))
    if p <= 0:
        raise ctx.error(f"p must be positive, got {p}")
    powered = ctx.call("abs", x) if p == 1 else ctx.call("power", ctx.call("abs", x), ctx.const(p, dtype))
    view = dataclasses.replace(node, inputs=[powered, *node.inputs[1:]])
    outer, ctx.node = ctx.node, view
    try:
        mean = _pool(ctx, view, "nn.avg_pool2d", count_include_pad=True)
    finally:
        ctx.node = outer
    window = math.prod(int(k) for k in node.attr("kernel_shape"))
    total = ctx.call("multiply", mean, ctx.const(window, dtype))
    return total if p == 1 else ctx.call("power", total, ctx.const(1.0 / p, dtype))
