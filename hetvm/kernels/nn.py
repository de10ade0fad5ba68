"""Neural-network kernels: activations, softmax, normalisation, dropout, pad."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import codegen_cuda_norm, norm_direct
from .common import as_ints, erf, relu_into, same_shape, store
from .registry import register_kernel
from .scratch import scratch


def _relu_specialize(xp: Any, attrs: dict) -> Any:
    if xp is not np:
        return None

    def relu_np(x: Any, out: Any) -> None:
        if x.shape != out.shape:
            same_shape(x, out)
        relu_into(np, x, out)

    return relu_np


@register_kernel("nn.relu", specialize=_relu_specialize)
def relu(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    """One ufunc call into the output (bound without the generic wrapper on NumPy)."""
    same_shape(x, out)
    relu_into(xp, x, out)


@register_kernel("nn.leakyrelu")
def leakyrelu(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    alpha = float(attrs.get("alpha", 0.01))
    store(out, xp.where(x > 0, x, x * alpha).astype(out.dtype))


@register_kernel("nn.gelu")
def gelu(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    """0.5 x (1 + erf(x / sqrt 2)) in x's float precision, in place where it can."""
    same_shape(x, out)
    if out.dtype == x.dtype and x.dtype.kind == "f":
        erf(xp, x * (1.0 / math.sqrt(2.0)), out)
        out += 1.0
        out *= x
        out *= 0.5
        return
    store(out, (0.5 * x * (1.0 + erf(xp, x / math.sqrt(2.0)))).astype(out.dtype))


@register_kernel("nn.gelu_tanh")
def gelu_tanh(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)
    store(out, (0.5 * x * (1.0 + xp.tanh(inner))).astype(out.dtype))


@register_kernel("nn.silu")
def silu(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    e = xp.exp(-xp.abs(x))
    sig = xp.where(x >= 0, 1 / (1 + e), e / (1 + e))
    store(out, (x * sig).astype(out.dtype))


def _float_work(xp: Any, x: Any, out: Any) -> Any:
    """Where a float kernel computes: ``out`` itself when it has x's float dtype
    (no temporaries, no final copy), else a scratch array of x's precision."""
    same_shape(x, out)
    if out.dtype == x.dtype and x.dtype.kind == "f":
        return out
    return xp.empty(x.shape, xp.float64 if x.dtype == xp.float64 else xp.float32)


def _finish(out: Any, work: Any) -> None:
    if work is not out:
        store(out, work.astype(out.dtype, copy=False))


@register_kernel("nn.softmax", specialize=codegen_cuda_norm.specializer("nn.softmax"))
def softmax(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    """Max-shifted, in four in-place passes over the output (shift, exp, sum,
    divide); only the per-row max and sum are temporaries. An empty tensor has
    an empty result (NumPy's max of an empty axis would raise)."""
    axis = int(attrs.get("axis", -1))
    if norm_direct.softmax_applies(xp, x, out, axis):
        norm_direct.softmax(x, out)
        return
    if x.size == 0:
        return
    work = _float_work(xp, x, out)
    xp.subtract(x, xp.max(x, axis=axis, keepdims=True), out=work)
    xp.exp(work, out=work)
    work /= xp.sum(work, axis=axis, keepdims=True)
    _finish(out, work)


@register_kernel("nn.log_softmax", specialize=codegen_cuda_norm.specializer("nn.log_softmax"))
def log_softmax(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    """x - max - log(sum(exp(x - max))), the exp in a scratch array; empty in,
    empty out."""
    axis = int(attrs.get("axis", -1))
    if x.size == 0:
        return
    work = _float_work(xp, x, out)
    xp.subtract(x, xp.max(x, axis=axis, keepdims=True), out=work)
    work -= xp.log(xp.sum(xp.exp(work), axis=axis, keepdims=True))
    _finish(out, work)


def _along(v: Any, axis: int, ndim: int) -> Any:
    """A 1-D per-channel vector reshaped to broadcast along ``axis``."""
    shape = [1] * ndim
    shape[axis] = -1
    return v.reshape(shape)


@register_kernel("nn.batch_norm")
def batch_norm(
    xp: Any, attrs: dict, x: Any, gamma: Any, beta: Any, mean: Any, var: Any, *outs: Any
) -> None:
    """Outputs (normalised, moving_mean, moving_var). ``training=False`` (inference)
    normalises with the moving statistics and passes them through; ``training=True``
    uses the batch statistics and returns the momentum-updated moving ones."""
    axis = int(attrs.get("axis", 1)) % x.ndim
    eps = float(attrs.get("epsilon", 1e-5))
    if attrs.get("training", False):
        red = tuple(i for i in range(x.ndim) if i != axis)
        use_mean, use_var = xp.mean(x, axis=red), xp.var(x, axis=red)
        m = float(attrs.get("momentum", 0.1))
        new_mean = (1 - m) * mean + m * use_mean
        new_var = (1 - m) * var + m * use_var
    else:
        use_mean, use_var, new_mean, new_var = mean, var, mean, var
    # fold into one per-channel scale and shift (tiny vectors), then two passes
    acc = xp.float64 if x.dtype == xp.float64 else xp.float32
    scale = 1.0 / xp.sqrt(use_var.astype(acc) + eps)
    if attrs.get("scale", True):
        scale = scale * gamma.astype(acc)
    shift = -use_mean.astype(acc) * scale
    if attrs.get("center", True):
        shift = shift + beta.astype(acc)
    work = _float_work(xp, x, outs[0])
    xp.multiply(x, _along(scale, axis, x.ndim), out=work)
    work += _along(shift, axis, x.ndim)
    _finish(outs[0], work)
    if len(outs) > 1:
        store(outs[1], new_mean.astype(outs[1].dtype))
    if len(outs) > 2:
        store(outs[2], new_var.astype(outs[2].dtype))


def _sum(xp: Any, x: Any, axes: tuple[int, ...], dtype: Any) -> Any:
    """``x`` summed over ``axes`` (kept as size-1 dims) in ``dtype``."""
    if xp is np:
        return np.add.reduce(x, axis=axes, keepdims=True, dtype=dtype)
    return xp.sum(x, axis=axes, keepdims=True, dtype=dtype)


@register_kernel("nn.layer_norm", specialize=codegen_cuda_norm.specializer("nn.layer_norm"))
def layer_norm(xp: Any, attrs: dict, x: Any, gamma: Any, beta: Any, out: Any) -> None:
    """Two-pass (centre, then mean of squares: no cancellation), centred in place
    in the output; one scratch array for the squares."""
    axes = tuple(a % x.ndim for a in as_ints(attrs.get("axes", (-1,))))
    eps = float(attrs.get("epsilon", 1e-5))
    scale, center = bool(attrs.get("scale", True)), bool(attrs.get("center", True))
    if norm_direct.layer_norm_applies(xp, x, out, axes, gamma, beta, scale, center):
        norm_direct.layer_norm(x, gamma, beta, len(axes), eps, scale, center, out)
        return
    work = _float_work(xp, x, out)
    if x.size == 0:
        return
    # the means as sums divided in place (what np.mean computes, without its
    # Python wrapper: half of this kernel's time on a transformer's small rows)
    count = math.prod(x.shape[a] for a in axes)
    mean = _sum(xp, x, axes, work.dtype)
    xp.true_divide(mean, count, out=mean)
    xp.subtract(x, mean, out=work)
    var = _sum(xp, xp.square(work), axes, work.dtype)
    xp.true_divide(var, count, out=var)
    var += eps
    work /= xp.sqrt(var, out=var)
    shape = [x.shape[i] if i in axes else 1 for i in range(x.ndim)]
    if scale:
        work *= gamma.reshape(shape)
    if center:
        work += beta.reshape(shape)
    _finish(out, work)


@register_kernel("nn.dropout")
def dropout(xp: Any, attrs: dict, x: Any, *outs: Any) -> None:
    """Inference: the output is the input and the mask is all ones."""
    store(outs[0], x)
    if len(outs) > 1:
        outs[1][...] = 1


@register_kernel("nn.pad")
def pad(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    width = as_ints(attrs.get("pad_width", ()))
    pairs = [(width[2 * i], width[2 * i + 1]) for i in range(len(width) // 2)]
    pairs += [(0, 0)] * (x.ndim - len(pairs))
    mode = attrs.get("pad_mode", "constant")
    if mode == "constant":
        y = xp.pad(x, pairs, mode="constant", constant_values=attrs.get("pad_value", 0.0))
    else:
        y = xp.pad(x, pairs, mode=mode)
    store(out, y)


@register_kernel("nn.lrn")
def lrn(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    """ONNX LRN in one pass over a squared copy: the window sum of squares is
    accumulated into ``out`` by shifted slices along the channel axis (one add
    per window position, no band matrix), then turned into the result there.
    Reads ``x`` after writing ``out``, so the two must not share bytes."""
    same_shape(x, out)
    axis = int(attrs["axis"]) % x.ndim
    size = int(attrs["size"])
    lo = (size - 1) // 2
    hi = size - 1 - lo
    channels = x.shape[axis]

    def along(start: int, stop: int) -> tuple:
        index = [slice(None)] * x.ndim
        index[axis] = slice(start, stop)
        return tuple(index)

    square = scratch(xp, "lrn_square", tuple(x.shape), x.dtype)
    xp.multiply(x, x, out=square)
    out[...] = square
    for k in range(1, min(lo, channels - 1) + 1):  # channel c - k
        out[along(k, channels)] += square[along(0, channels - k)]
    for k in range(1, min(hi, channels - 1) + 1):  # channel c + k
        out[along(0, channels - k)] += square[along(k, channels)]
    xp.multiply(out, float(attrs["alpha"]) / size, out=out)
    xp.add(out, float(attrs["bias"]), out=out)
    xp.power(out, -float(attrs["beta"]), out=out)
    xp.multiply(out, x, out=out)
