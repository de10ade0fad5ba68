"""ONNX ``QuantizeLinear`` and ``DequantizeLinear`` (opsets 10-25), decomposed.

hetvm has no quantization ops, so both are spelled out with element-wise ops,
following the specification and ``onnx/reference/ops/op_(de)quantize_linear.py``::

    QuantizeLinear:   y = astype(clip(round(x / scale) + zero_point, lo, hi), T)
    DequantizeLinear: y = astype((astype(x) - zero_point) * scale, out)

* ``round`` is round-half-to-even (hetvm's ``round`` is NumPy's ``rint``); the
  saturation range is the output integer type's.
* The scale and zero point are per tensor (a scalar or one element), per axis
  (1-D along ``axis``, reshaped to broadcast) or blocked (``block_size``: repeated
  ``block_size`` times along ``axis`` and cut to the input's length). Constants
  are reshaped/repeated with NumPy at import time; run-time values with
  ``expand_dims``/``broadcast_to``/``reshape``/``strided_slice``.
* Arithmetic happens in the dtypes the reference's NumPy expressions give:
  ``x / scale`` in NumPy's promotion of the two (or in ``precision``), and
  DequantizeLinear in float32 (float64 with an int32 zero point), cast to
  ``output_dtype`` (default: the scale's dtype).
* The zero point is added and the sum clipped in float32 (float64 when the
  division ran in float64): exact for every sum below 2**24, and a larger one
  saturates whichever way it rounds. So quotients past int32's range (and
  infinities) saturate, as the specification says, where the reference's cast
  through int32 wraps them.

Types hetvm's runtime lacks (int4, uint4, int2, uint2, the float8 and float4
types, bfloat16) are rejected naming the node and the dtype; so is anything the
specification leaves undefined (mismatched zero point dtypes, block shapes outside
the accepted range).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...ir import expr as E
from ...ir import prim as P
from ..onnx_context import ConvertContext, NodeView, normalize_axis
from ..onnx_types import dtype_of
from .registry import converter

#: the integer types hetvm can quantize to, with their saturation ranges
_RANGES = {
    "int8": (-128, 127),
    "uint8": (0, 255),
    "int16": (-32768, 32767),
    "uint16": (0, 65535),
}
#: quantized types of the specification that hetvm's runtime has no dtype for
_LACKING = frozenset({
    "int4", "uint4", "int2", "uint2", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn",
    "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
    "bfloat16",
})  # fmt: skip
_FLOATS = ("float16", "float32", "float64")


def _lacking(ctx: ConvertContext, dtype: str, what: str) -> None:
    """Rejects a dtype the runtime has no type for (quoted, so the reason groups)."""
    if dtype in _LACKING or dtype.startswith(("float8", "float4", "float6", "int4", "uint4", "int2", "uint2")):
        raise ctx.error(f"unsupported dtype '{dtype}' of {what}: hetvm's runtime has no such type")




def _same(a: P.PrimExpr, b: P.PrimExpr) -> bool | None:
    """Whether two dims are equal (None when that cannot be decided)."""
    ca, cb = P.const_value(a), P.const_value(b)
    if ca is not None and cb is not None:
        return ca == cb
    return True if P.to_str(a) == P.to_str(b) else None


class _Granularity:
    """How a scale (and its zero point) maps onto the input: the kind, the axis and
    the block size, checked once against the shapes."""

    def __init__(self, ctx: ConvertContext, node: NodeView, x_shape: tuple[P.PrimExpr, ...]) -> None:
        self.x_shape = x_shape
        scale = node.input(1)
        if scale is None:
            raise ctx.error("input 1 (scale) is missing")
        s_shape = ctx.known_shape(scale, "the scale")
        zp = node.input(2)
        if zp is not None:
            z_shape = ctx.known_shape(zp, "the zero point")
            if len(z_shape) != len(s_shape) or any(_same(a, b) is False for a, b in zip(z_shape, s_shape)):
                raise ctx.error(
                    f"the zero point's shape {_dims(z_shape)} differs from the scale's {_dims(s_shape)}"
                )
        self.block = int(node.attr("block_size", 0) or 0) if node.opset >= 21 else 0
        if self.block < 0:
            raise ctx.error(f"block_size must be positive, got {self.block}")
        sizes = [P.const_value(d) for d in s_shape]
        rank = len(x_shape)
        self.kind = "tensor"
        self.axis = self.length = self.blocks = 0
        if len(s_shape) == 0 or (None not in sizes and math.prod(sizes) == 1):  # type: ignore[arg-type]
            return  # per tensor (a one-element scale is a scalar, as the reference reads it)
        self.axis = normalize_axis(ctx, int(node.attr("axis", 1)), rank)
        length = ctx.static_dim(x_shape[self.axis], f"the quantization axis {self.axis} of the input")
        self.length = length
        if not self.block:
            if len(s_shape) != 1:
                raise ctx.error(
                    f"the scale must be a scalar or 1-D without block_size, got shape {_dims(s_shape)}"
                )
            if ctx.static_dim(s_shape[0], "the scale's length") != length:
                raise ctx.error(
                    f"the per-axis scale has {P.to_str(s_shape[0])} values but axis {self.axis} of the "
                    f"input has {length}"
                )
            self.kind = "axis"
            return
        if len(s_shape) != rank:
            raise ctx.error(
                f"a blocked scale must have the input's rank {rank}, got shape {_dims(s_shape)}"
            )
        blocks = ctx.static_dim(s_shape[self.axis], "the scale's blocked dim")
        if blocks != -(-length // self.block):
            raise ctx.error(
                f"block_size {self.block} does not fit: axis {self.axis} of the input has {length} "
                f"elements, the scale {blocks} blocks (needs ceil({length} / {self.block}))"
            )
        for i, (a, b) in enumerate(zip(s_shape, x_shape)):
            if i != self.axis and _same(a, b) is False:
                raise ctx.error(
                    f"a blocked scale's shape {_dims(s_shape)} must equal the input's "
                    f"{_dims(x_shape)} but on axis {self.axis}"
                )
        self.kind = "block"
        self.blocks = blocks

    def expand(self, ctx: ConvertContext, index: int, dtype: str) -> E.Expr:
        """Input ``index`` (scale or zero point) in ``dtype``, broadcastable to the input."""
        const = ctx.folded(index)
        if const is not None:
            return ctx.const(self._expand_np(np.asarray(const)).astype(dtype))
        v = ctx.tensor(index, "scale" if index == 1 else "zero point")
        if ctx.dtype(v) != dtype:
            v = ctx.call("astype", v, dtype)
        rank = len(self.x_shape)
        if self.kind == "tensor":
            return v if ctx.rank(v) == 0 else ctx.call("reshape", v, ())
        if self.kind == "axis":
            dims = [P.IntImm(1)] * rank
            dims[self.axis] = P.IntImm(self.length)
            return ctx.call("reshape", v, tuple(dims))
        s_shape = list(ctx.known_shape(v, "the scale"))
        v = ctx.call("expand_dims", v, self.axis + 1)
        wide = [*s_shape[: self.axis + 1], P.IntImm(self.block), *s_shape[self.axis + 1 :]]
        v = ctx.call("broadcast_to", v, tuple(wide))
        merged = [*s_shape[: self.axis], P.IntImm(self.blocks * self.block), *s_shape[self.axis + 1 :]]
        v = ctx.call("reshape", v, tuple(merged))
        if self.blocks * self.block != self.length:
            v = ctx.call("strided_slice", v, [self.axis], [0], [self.length])
        return v

    def _expand_np(self, value: np.ndarray) -> np.ndarray:
        if self.kind == "tensor":
            return value.reshape(())
        if self.kind == "axis":
            dims = [1] * len(self.x_shape)
            dims[self.axis] = value.size
            return value.reshape(dims)
        value = np.repeat(value, self.block, axis=self.axis)
        return np.take(value, np.arange(self.length), axis=self.axis)


def _dims(shape: tuple[P.PrimExpr, ...] | list[P.PrimExpr]) -> str:
    return "(" + ", ".join(P.to_str(d) for d in shape) + ")"


def _all_zero(ctx: ConvertContext, index: int) -> bool:
    const = ctx.folded(index)
    return const is not None and not np.any(const)


def _cast(ctx: ConvertContext, x: E.Expr, dtype: str) -> E.Expr:
    return x if ctx.dtype(x) == dtype else ctx.call("astype", x, dtype)


@converter("QuantizeLinear", since=10)
def _quantize_linear(ctx: ConvertContext, node: NodeView) -> Any:
    """``saturate(round(x / scale) + zero_point)``; see the module docstring."""
    x = ctx.tensor(0, "x")
    x_dtype = ctx.dtype(x)
    zp = node.input(2)
    attr_out = int(node.attr("output_dtype", 0) or 0) if node.opset >= 21 else 0
    out = dtype_of(attr_out) if attr_out else None
    if zp is not None:
        zp_dtype = ctx.dtype(zp)
        _lacking(ctx, zp_dtype, "the zero point (the output type)")
        if out is not None and out != zp_dtype:
            raise ctx.error(f"output_dtype {out} differs from the zero point's dtype {zp_dtype}")
        out = zp_dtype
    out = out or "uint8"
    _lacking(ctx, out, "output_dtype")
    if out not in _RANGES:
        raise ctx.error(f"the output dtype {out} is not a quantized type (int8, uint8, int16 or uint16)")
    _lacking(ctx, x_dtype, "x")
    if x_dtype not in (*_FLOATS, "int32"):
        raise ctx.error(f"unsupported dtype {x_dtype} of x (float16, float32, float64 or int32)")
    scale = node.input(1)
    s_dtype = ctx.dtype(scale) if scale is not None else x_dtype
    _lacking(ctx, s_dtype, "the scale")
    precision = int(node.attr("precision", 0) or 0) if node.opset >= 23 else 0
    if precision:
        compute = dtype_of(precision)
        _lacking(ctx, compute, "precision")
        if compute not in _FLOATS:
            raise ctx.error(f"precision must be a float type (float16, float32 or float64), got {compute}")
    else:  # what NumPy's x / scale gives (int32 / float32 is float64)
        compute = str((np.zeros(1, x_dtype) / np.ones(1, s_dtype)).dtype)

    grain = _Granularity(ctx, node, ctx.known_shape(x, "x"))
    v = ctx.call("divide", _cast(ctx, x, compute), grain.expand(ctx, 1, compute))
    v = ctx.call("round", v)
    acc = "float64" if compute == "float64" else "float32"  # integers exact, float16 widened
    v = _cast(ctx, v, acc)
    if zp is not None and not _all_zero(ctx, 2):
        v = ctx.call("add", v, grain.expand(ctx, 2, acc))
    lo, hi = _RANGES[out]
    return ctx.call("astype", ctx.call("clip", v, lo, hi), out)


@converter("DequantizeLinear", since=10)
def _dequantize_linear(ctx: ConvertContext, node: NodeView) -> Any:
    """``(x - zero_point) * scale``; see the module docstring."""
    x = ctx.tensor(0, "x")
    x_dtype = ctx.dtype(x)
    _lacking(ctx, x_dtype, "x")
    if x_dtype not in (*_RANGES, "int32"):
        raise ctx.error(f"unsupported dtype {x_dtype} of x (int8, uint8, int16, uint16 or int32)")
    zp = node.input(2)
    if zp is not None and ctx.dtype(zp) != x_dtype:
        raise ctx.error(f"the zero point has dtype {ctx.dtype(zp)}, x has {x_dtype}; they must be equal")
    scale = node.input(1)
    s_dtype = ctx.dtype(scale) if scale is not None else "float32"
    _lacking(ctx, s_dtype, "the scale")
    if s_dtype not in _FLOATS:
        raise ctx.error(f"unsupported dtype {s_dtype} of the scale (float16, float32 or float64)")
    attr_out = int(node.attr("output_dtype", 0) or 0) if node.opset >= 23 else 0
    out = dtype_of(attr_out) if attr_out else s_dtype
    _lacking(ctx, out, "output_dtype")
    if out not in _FLOATS:
        raise ctx.error(f"output_dtype must be a float type (float16, float32 or float64), got {out}")

    # the reference's dtypes: x.astype(float32) [- zero_point] * scale
    with_zp = zp is not None and not _all_zero(ctx, 2)
    base = str(np.result_type(np.float32, x_dtype)) if with_zp else "float32"
    compute = str(np.result_type(base, s_dtype))
    grain = _Granularity(ctx, node, ctx.known_shape(x, "x"))
    v = _cast(ctx, _cast(ctx, x, "float32"), compute)
    if with_zp:
        v = ctx.call("subtract", v, grain.expand(ctx, 2, compute))
    v = ctx.call("multiply", v, grain.expand(ctx, 1, compute))
    return _cast(ctx, v, out)
