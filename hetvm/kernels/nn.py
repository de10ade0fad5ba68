"""Neural-network kernels: activations, softmax, normalisation, dropout, pad."""

from __future__ import annotations

import math
from typing import Any

from .common import as_ints, erf, store
from .registry import register_kernel


@register_kernel("nn.relu")
def relu(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    store(out, xp.maximum(x, 0))


@register_kernel("nn.leakyrelu")
def leakyrelu(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    alpha = float(attrs.get("alpha", 0.01))
    store(out, xp.where(x > 0, x, x * alpha).astype(out.dtype))


@register_kernel("nn.gelu")
def gelu(xp: Any, attrs: dict, x: Any, out: Any) -> None:
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


@register_kernel("nn.softmax")
def softmax(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    axis = int(attrs.get("axis", -1))
    e = xp.exp(x - xp.max(x, axis=axis, keepdims=True))
    store(out, (e / xp.sum(e, axis=axis, keepdims=True)).astype(out.dtype))


@register_kernel("nn.log_softmax")
def log_softmax(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    axis = int(attrs.get("axis", -1))
    shifted = x - xp.max(x, axis=axis, keepdims=True)
    store(out, (shifted - xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))).astype(out.dtype))


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
    y = (x - _along(use_mean, axis, x.ndim)) / xp.sqrt(_along(use_var, axis, x.ndim) + eps)
    if attrs.get("scale", True):
        y = y * _along(gamma, axis, x.ndim)
    if attrs.get("center", True):
        y = y + _along(beta, axis, x.ndim)
    store(outs[0], y.astype(outs[0].dtype))
    if len(outs) > 1:
        store(outs[1], new_mean.astype(outs[1].dtype))
    if len(outs) > 2:
        store(outs[2], new_var.astype(outs[2].dtype))


@register_kernel("nn.layer_norm")
def layer_norm(xp: Any, attrs: dict, x: Any, gamma: Any, beta: Any, out: Any) -> None:
    axes = tuple(a % x.ndim for a in as_ints(attrs.get("axes", (-1,))))
    eps = float(attrs.get("epsilon", 1e-5))
    mean = xp.mean(x, axis=axes, keepdims=True)
    var = xp.mean((x - mean) ** 2, axis=axes, keepdims=True)
    y = (x - mean) / xp.sqrt(var + eps)
    shape = [x.shape[i] if i in axes else 1 for i in range(x.ndim)]
    if attrs.get("scale", True):
        y = y * gamma.reshape(shape)
    if attrs.get("center", True):
        y = y + beta.reshape(shape)
    store(out, y.astype(out.dtype))


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
