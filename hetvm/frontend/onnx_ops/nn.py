"""Neural-network ONNX ops: Conv, pools, normalisations, Softmax, Gemm/MatMul, Dropout, LRN.

hetvm's nn ops are 2-D (NCHW); 1-D convolutions and pools are run as 2-D ones
with a unit height (expand_dims -> op -> squeeze).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...ir import expr as E
from ...ir import prim as P
from ..onnx_context import ConvertContext, NodeView, normalize_axis
from .registry import converter

# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def _spatial_rank(ctx: ConvertContext, x: E.Expr) -> int:
    rank = ctx.rank(x)
    if rank not in (3, 4):
        raise ctx.error(f"only 1-D and 2-D spatial inputs are supported, got a rank-{rank} input")
    return rank - 2


def _check_window(ctx: ConvertContext, k: int, **attrs: Sequence[int]) -> None:
    """Each window attribute has one positive value per spatial axis."""
    for name, values in attrs.items():
        if len(values) != k:
            raise ctx.error(f"'{name}' needs {k} value(s) for a {k}-D input, got {list(values)}")
        if any(int(v) < 1 for v in values):
            raise ctx.error(f"'{name}' values must be positive, got {list(values)}")


def _pads(
    ctx: ConvertContext,
    node: NodeView,
    x: E.Expr,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
) -> list[int]:
    """ONNX pads ``[b0, b1, ..., e0, e1, ...]``, auto_pad resolved against x's shape."""
    k = len(kernel)
    auto_pad = node.attr("auto_pad", "NOTSET") or "NOTSET"
    if auto_pad == "NOTSET":
        pads = [int(p) for p in node.attr("pads", [0] * (2 * k))]
        if len(pads) != 2 * k:
            raise ctx.error(f"'pads' needs {2 * k} values, got {pads}")
        return pads
    if auto_pad == "VALID":
        return [0] * (2 * k)
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.error(f"unknown auto_pad '{auto_pad}'")
    shape = ctx.shape_of(x)
    spatial = [P.const_value(d) for d in shape[2:]] if shape is not None else [None]
    if any(d is None for d in spatial):
        raise ctx.error(f"auto_pad={auto_pad} needs static spatial dims, got {ctx.describe_inputs()}")
    begin, end = [], []
    for size, kk, s, d in zip(spatial, kernel, strides, dilations):
        out = -(-size // s)
        total = max((out - 1) * s + (kk - 1) * d + 1 - size, 0)
        small = total // 2
        begin.append(small if auto_pad == "SAME_UPPER" else total - small)
        end.append(total - small if auto_pad == "SAME_UPPER" else small)
    return begin + end


def _to_2d(ctx: ConvertContext, x: E.Expr, k: int) -> E.Expr:
    return x if k == 2 else ctx.call("expand_dims", x, [2])


def _from_2d(ctx: ConvertContext, y: E.Expr, k: int) -> E.Expr:
    return y if k == 2 else ctx.call("squeeze", y, [2])


def _pair(values: Sequence[int], k: int, pad_value: int) -> tuple[int, int]:
    """A 1-D window parameter as the 2-D (unit height, width) pair."""
    return (pad_value, int(values[0])) if k == 1 else (int(values[0]), int(values[1]))


def _padding4(pads: Sequence[int], k: int) -> tuple[int, int, int, int]:
    if k == 1:
        return (0, int(pads[0]), 0, int(pads[1]))
    return (int(pads[0]), int(pads[1]), int(pads[2]), int(pads[3]))


def _channel_param(ctx: ConvertContext, index: int, rank: int, what: str) -> E.Expr:
    """A per-channel vector shaped (C, 1, ..., 1) to broadcast against NC... data."""
    shape = (-1,) + (1,) * (rank - 2)
    arr = ctx.folded(index)
    if arr is not None:
        return ctx.const(arr.reshape(shape))
    return ctx.call("reshape", ctx.tensor(index, what), shape)


# --------------------------------------------------------------------------
# convolution and pooling
# --------------------------------------------------------------------------


@converter("Conv")
def _conv(ctx: ConvertContext, node: NodeView) -> Any:
    x, w = ctx.tensor(0, "X"), ctx.tensor(1, "W")
    k = _spatial_rank(ctx, x)
    wshape = ctx.shape_of(w)
    kernel = node.attr("kernel_shape") or (
        [P.const_value(d) for d in wshape[2:]] if wshape is not None else None
    )
    if kernel is None or any(d is None for d in kernel):
        raise ctx.error("the kernel shape must be static")
    strides = node.attr("strides", [1] * k)
    dilations = node.attr("dilations", [1] * k)
    _check_window(ctx, k, kernel_shape=kernel, strides=strides, dilations=dilations)
    pads = _pads(ctx, node, x, kernel, strides, dilations)
    if k == 1:
        warr = ctx.folded(1)
        w = ctx.const(warr[:, :, None, :]) if warr is not None else ctx.call("expand_dims", w, [2])
    y = ctx.call(
        "nn.conv2d",
        _to_2d(ctx, x, k),
        w,
        strides=_pair(strides, k, 1),
        padding=_padding4(pads, k),
        dilation=_pair(dilations, k, 1),
        groups=int(node.attr("group", 1)),
    )
    y = _from_2d(ctx, y, k)
    if node.input(2) is not None:
        y = ctx.call("add", y, _channel_param(ctx, 2, k + 2, "B"))
    return y


def _pool(ctx: ConvertContext, node: NodeView, op: str, **extra: Any) -> Any:
    x = ctx.tensor(0, "X")
    k = _spatial_rank(ctx, x)
    if node.attr("kernel_shape") is None:
        raise ctx.error("the required attribute 'kernel_shape' is missing")
    kernel = [int(v) for v in node.attr("kernel_shape")]
    strides = node.attr("strides", [1] * k)
    dilations = node.attr("dilations", [1] * k)
    _check_window(ctx, k, kernel_shape=kernel, strides=strides, dilations=dilations)
    pads = _pads(ctx, node, x, kernel, strides, dilations)
    y = ctx.call(
        op,
        _to_2d(ctx, x, k),
        pool_size=_pair(kernel, k, 1),
        strides=_pair(strides, k, 1),
        padding=_padding4(pads, k),
        dilation=_pair(dilations, k, 1),
        ceil_mode=bool(node.attr("ceil_mode", 0)),
        **extra,
    )
    return _from_2d(ctx, y, k)


@converter("MaxPool")
def _max_pool(ctx: ConvertContext, node: NodeView) -> Any:
    if node.num_outputs > 1:
        raise ctx.error("the Indices output of MaxPool is not supported")
    if node.attr("storage_order", 0):
        raise ctx.error("storage_order=1 is not supported")
    return _pool(ctx, node, "nn.max_pool2d")


@converter("AveragePool")
def _avg_pool(ctx: ConvertContext, node: NodeView) -> Any:
    return _pool(
        ctx, node, "nn.avg_pool2d", count_include_pad=bool(node.attr("count_include_pad", 0))
    )


@converter("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "X")
    rank = ctx.rank(x)
    fn = "mean" if node.op_type == "GlobalAveragePool" else "max"
    return ctx.call(fn, x, list(range(2, rank)), keepdims=True)


# --------------------------------------------------------------------------
# normalisation
# --------------------------------------------------------------------------


@converter("BatchNormalization")
def _batch_norm(ctx: ConvertContext, node: NodeView) -> Any:
    if node.attr("training_mode", 0) or (node.opset < 9 and not node.attr("spatial", 1)):
        raise ctx.error("only inference mode with spatial statistics is supported")
    if node.num_outputs > 1:
        raise ctx.error("running mean/var outputs (training mode) are not supported")
    x = ctx.tensor(0, "X")
    rank = ctx.rank(x)
    eps = float(node.attr("epsilon", 1e-5))
    params = [ctx.folded(i) for i in range(1, 5)]
    if all(p is not None for p in params):
        # Constant statistics: fold to one multiply and one add per channel.
        gamma, beta, mean, var = (np.asarray(p, dtype=np.float64) for p in params)
        scale = gamma / np.sqrt(var + eps)
        shift = beta - mean * scale
        dtype = ctx.dtype(x)
        shape = (-1,) + (1,) * (rank - 2)
        y = ctx.call("multiply", x, ctx.const(scale.reshape(shape), dtype))
        return ctx.call("add", y, ctx.const(shift.reshape(shape), dtype))
    args = [ctx.tensor(i) for i in range(1, 5)]
    out = ctx.call("nn.batch_norm", x, *args, axis=1, epsilon=eps, training=False)
    return ctx.emit(E.TupleGetItem(out, 0))


@converter("LayerNormalization", since=17)
def _layer_norm(ctx: ConvertContext, node: NodeView) -> Any:
    x = ctx.tensor(0, "X")
    rank = ctx.rank(x)
    axis = normalize_axis(ctx, int(node.attr("axis", -1)), rank)
    axes = list(range(axis, rank))
    gamma = ctx.tensor(1, "Scale")
    if node.num_outputs > 1:
        return _layer_norm_with_stats(ctx, node, x, axes, gamma)
    if node.input(2) is not None:
        beta = ctx.tensor(2, "B")
    else:
        gshape = ctx.shape_of(gamma)
        static = [P.const_value(d) for d in gshape] if gshape is not None else [None]
        if any(d is None for d in static):
            beta = ctx.call("zeros_like", gamma)
        else:
            beta = ctx.const(np.zeros(static, dtype=ctx.dtype(gamma)))
    return ctx.call("nn.layer_norm", x, gamma, beta, axes, epsilon=float(node.attr("epsilon", 1e-5)))


def _layer_norm_with_stats(
    ctx: ConvertContext, node: NodeView, x: E.Expr, axes: list[int], gamma: E.Expr
) -> list[Any]:
    """LayerNormalization with its Mean and InvStdDev outputs, composed (nn.layer_norm
    returns only the normalised tensor): mean, centred square mean, rsqrt."""
    dtype = ctx.dtype(x)
    eps = ctx.const(float(node.attr("epsilon", 1e-5)), dtype)
    mu = ctx.call("mean", x, axes, keepdims=True)
    d = ctx.call("subtract", x, mu)
    var = ctx.call("mean", ctx.call("multiply", d, d), axes, keepdims=True)
    inv = ctx.call("rsqrt", ctx.call("add", var, eps))
    y = ctx.call("multiply", ctx.call("multiply", d, inv), gamma)
    if node.input(2) is not None:
        y = ctx.call("add", y, ctx.tensor(2, "B"))
    return [y, mu, inv][: node.num_outputs]


@converter("LRN")
def _lrn(ctx: ConvertContext, node: NodeView) -> Any:
    """One ``nn.lrn`` (channel axis 1): one kernel and one buffer, where a
    composition of element-wise ops and a band matmul held several
    intermediates of the input's size."""
    x = ctx.tensor(0, "X")
    if ctx.rank(x) < 3:
        raise ctx.error("needs an input of known rank >= 3 (N, C, spatial...)")
    dtype = ctx.dtype(x)
    if dtype is not None and not str(dtype).startswith(("float", "bfloat")):
        raise ctx.error(f"needs a floating-point input, got {dtype}")
    size = int(node.attr("size"))
    if size <= 0:
        raise ctx.error(f"size must be positive, got {size}")
    alpha, beta, bias = (float(node.attr(a, d)) for a, d in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))
    return ctx.call("nn.lrn", x, size=size, alpha=alpha, beta=beta, bias=bias, axis=1)


# --------------------------------------------------------------------------
# softmax, dropout
# --------------------------------------------------------------------------


@converter("Softmax", "LogSoftmax")
def _softmax(ctx: ConvertContext, node: NodeView) -> Any:
    op = "nn.softmax" if node.op_type == "Softmax" else "nn.log_softmax"
    x = ctx.tensor(0, "input")
    rank = ctx.rank(x)
    if node.opset >= 13:
        return ctx.call(op, x, normalize_axis(ctx, int(node.attr("axis", -1)), rank))
    # Before opset 13 the input is coerced to 2-D at 'axis' and normalised per row.
    axis = normalize_axis(ctx, int(node.attr("axis", 1)), rank)
    if axis == rank - 1:
        return ctx.call(op, x, rank - 1)
    shape = ctx.shape_of(x)
    if shape is None:
        raise ctx.error("needs a known input shape for axis != last before opset 13")
    lead, tail = P.IntImm(1), P.IntImm(1)
    for d in shape[:axis]:
        lead = P.mul(lead, d)
    for d in shape[axis:]:
        tail = P.mul(tail, d)
    flat = ctx.call("reshape", x, (lead, tail))
    y = ctx.call(op, flat, 1)
    return ctx.call("reshape", y, tuple(shape))


@converter("Dropout")
def _dropout(ctx: ConvertContext, node: NodeView) -> Any:
    training = node.input(2) if node.opset >= 12 else None
    if training is not None and (not isinstance(training, np.ndarray) or bool(training.reshape(()))):
        raise ctx.error("training_mode must be a constant false (hetvm compiles for inference)")
    x = ctx.tensor(0, "data")
    if node.num_outputs < 2:
        return x
    shape = ctx.shape_of(x)
    if shape is None:
        raise ctx.error("the mask output needs a known input shape")
    static = [P.const_value(d) for d in shape]
    if all(d is not None for d in static):
        return [x, np.ones(static, dtype=bool)]
    return [x, ctx.call("ones", tuple(shape), "bool")]


# --------------------------------------------------------------------------
# dense
# --------------------------------------------------------------------------


@converter("MatMul")
def _matmul(ctx: ConvertContext, node: NodeView) -> Any:
    return ctx.call("matmul", ctx.tensor(0, "A"), ctx.tensor(1, "B"))


@converter("Gemm")
def _gemm(ctx: ConvertContext, node: NodeView) -> Any:
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    trans_a, trans_b = int(node.attr("transA", 0)), int(node.attr("transB", 0))
    a = ctx.tensor(0, "A")
    dtype = ctx.dtype(a)
    if trans_a:
        a = ctx.call("permute_dims", a, [1, 0])
    b_arr = ctx.folded(1)
    if b_arr is not None:
        # Constant weights: transpose and scale once, here.
        b_arr = b_arr.T if trans_b else b_arr
        if alpha != 1.0:
            b_arr = (b_arr * alpha).astype(b_arr.dtype)
            alpha = 1.0
        b = ctx.const(np.ascontiguousarray(b_arr))
    else:
        b = ctx.tensor(1, "B")
        if trans_b:
            b = ctx.call("permute_dims", b, [1, 0])
    y = ctx.call("matmul", a, b)
    if alpha != 1.0:
        y = ctx.call("multiply", y, ctx.const(alpha, dtype))
    if node.input(2) is not None and beta != 0.0:
        c_arr = ctx.folded(2)
        if c_arr is not None:
            c = ctx.const((c_arr * beta).astype(c_arr.dtype) if beta != 1.0 else c_arr)
        else:
            c = ctx.tensor(2, "C")
            if beta != 1.0:
                c = ctx.call("multiply", c, ctx.const(beta, dtype))
        y = ctx.call("add", y, c)
    return y


@converter("Einsum", since=12)
def _einsum(ctx: ConvertContext, node: NodeView) -> Any:
    equation = node.attr("equation")
    if isinstance(equation, bytes):
        equation = equation.decode()
    operands = [ctx.tensor(i, "Inputs") for i, v in enumerate(node.inputs) if v is not None]
    return ctx.call("einsum", operands, str(equation).replace(" ", ""))
