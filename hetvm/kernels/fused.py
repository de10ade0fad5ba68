"""Kernels of fused ops: the first step writes the output (the convolution, or
the scale), then the rest (bias, residual, shift, activation) runs in place on
it, so no intermediate tensor is allocated."""

from __future__ import annotations

from typing import Any

from . import codegen_cuda_window, epilogue_direct
from .common import per_channel, relu_into, same_shape
from .conv import Geometry, convolve, convolve_direct, geometry
from .pool import max_pool2d, pool_direct_max
from .registry import register_kernel

ACTIVATIONS = ("none", "relu")


def _activation(op: str, attrs: dict) -> str:
    activation = attrs.get("activation", "none")
    if activation not in ACTIVATIONS:
        raise ValueError(f"{op} kernel: unknown activation {activation!r}")
    return activation


# a batch whose per-image output reaches this many bytes is convolved image by
# image, each image's epilogue running while its output is still in cache (the
# 7x7/2 stem at batch 8: 1.7 ms of bias and relu passes over 26 MB from memory)
_PER_IMAGE_BYTES = 512 << 10


def _images(xp: Any, data: Any, out: Any, *more: Any) -> Any:
    """``(data, out, *more)`` whole, or on the CPU one image at a time for large
    outputs (a GPU has no cache to keep an image in: one launch is better)."""
    n = out.shape[0] if out.ndim else 1
    if n <= 1 or out[0].nbytes < _PER_IMAGE_BYTES or codegen_cuda_window.applies(xp):
        return [(data, out, *more)]
    return [(data[i : i + 1], out[i : i + 1], *(m[i : i + 1] for m in more)) for i in range(n)]


def _bias_act(xp: Any, geo: Geometry, activation: str, data: Any, weight: Any, bias: Any, out: Any) -> None:
    if convolve_direct(xp, geo, data, weight, out, bias, activation == "relu"):
        return
    relu = activation == "relu"
    for x, y in _images(xp, data, out):
        added = convolve(xp, geo, x, weight, y, bias)
        if epilogue_direct.run(xp, y, None if added else bias, None, relu):
            continue
        if codegen_cuda_window.epilogue(xp, y, None if added else bias, None, relu):
            continue
        if not added:
            per_channel(xp, xp.add, y, bias, y)
        if relu:
            relu_into(xp, y, y)


def _bias_add_act(
    xp: Any, geo: Geometry, activation: str, data: Any, weight: Any, bias: Any, residual: Any, out: Any
) -> None:
    if residual.shape != out.shape:
        raise ValueError(
            f"nn.conv2d_bias_add_act kernel: residual {tuple(residual.shape)} is not the "
            f"output's shape {tuple(out.shape)}"
        )
    may_share = getattr(xp, "may_share_memory", None)
    if may_share is not None and may_share(out, residual):
        residual = residual.copy()
    relu = activation == "relu"
    for x, y, r in _images(xp, data, out, residual):
        added = convolve(xp, geo, x, weight, y, bias)
        if epilogue_direct.run(xp, y, None if added else bias, r, relu):
            continue
        if codegen_cuda_window.epilogue(xp, y, None if added else bias, r, relu):
            continue
        if not added:
            per_channel(xp, xp.add, y, bias, y)
        xp.add(y, r, out=y)
        if relu:
            relu_into(xp, y, y)


def _specialized(op: str, body: Any) -> Any:
    """A ``specialize`` hook: attributes are parsed once, at bind time."""

    def specialize(xp: Any, attrs: dict) -> Any:
        geo, activation = geometry(attrs), _activation(op, attrs)

        def run(*args: Any) -> None:
            body(xp, geo, activation, *args)

        return run

    return specialize


@register_kernel("nn.conv2d_bias_act", specialize=_specialized("nn.conv2d_bias_act", _bias_act))
def conv2d_bias_act(xp: Any, attrs: dict, data: Any, weight: Any, bias: Any, out: Any) -> None:
    """The convolution writes ``out`` (the depthwise path adds the bias in its
    final copy); otherwise the per-channel bias is added in place, then the
    activation applied in place."""
    _bias_act(xp, geometry(attrs), _activation("nn.conv2d_bias_act", attrs), data, weight, bias, out)


@register_kernel("nn.conv2d_bias_add_act", specialize=_specialized("nn.conv2d_bias_add_act", _bias_add_act))
def conv2d_bias_add_act(
    xp: Any, attrs: dict, data: Any, weight: Any, bias: Any, residual: Any, out: Any
) -> None:
    """As ``nn.conv2d_bias_act`` with ``out += residual`` before the activation.

    ``out`` is written before ``residual`` is read. The memory planner never lets
    an op's output share bytes with an input (the output is live from its
    allocation, before the call, the input until the call); a caller that passes
    overlapping buffers anyway gets a copy of the residual, not a wrong result."""
    _bias_add_act(xp, geometry(attrs), _activation("nn.conv2d_bias_add_act", attrs), data, weight, bias,
                  residual, out)  # fmt: skip


@register_kernel("nn.max_pool2d_bias_act")
def max_pool2d_bias_act(xp: Any, attrs: dict, data: Any, bias: Any, out: Any) -> None:
    """The pool writes ``out``; the per-channel bias and the activation then run in
    place on it while it is still in cache (a separate op on a fresh buffer cost a
    stem's pool 55-100 us more)."""
    activation = _activation("nn.max_pool2d_bias_act", attrs)
    if pool_direct_max(xp, attrs, data, bias, out, activation == "relu"):
        return
    if codegen_cuda_window.pool(xp, attrs, data, out, is_max=True, bias=bias, relu=activation == "relu"):
        return
    max_pool2d(xp, {k: v for k, v in attrs.items() if k != "activation"}, data, out)
    per_channel(xp, xp.add, out, bias, out)
    if activation == "relu":
        relu_into(xp, out, out)


@register_kernel("nn.scale_shift_act")
def scale_shift_act(xp: Any, attrs: dict, data: Any, scale: Any, shift: Any, out: Any) -> None:
    """``out = act(data * scale[c] + shift[c])`` with ``c`` on axis 1 (any rank >= 2).

    A scale of ones or a shift of zeros (a chain without ``multiply`` or without
    ``add``) is skipped: checking C values costs about a microsecond, a pass over
    the tensor far more."""
    activation = _activation("nn.scale_shift_act", attrs)
    same_shape(data, out)
    if data.ndim < 2 or scale.shape != (data.shape[1],) or shift.shape != (data.shape[1],):
        raise ValueError(
            f"nn.scale_shift_act kernel: scale {tuple(scale.shape)} and shift {tuple(shift.shape)} "
            f"need one value per channel of data {tuple(data.shape)} (axis 1)"
        )
    if codegen_cuda_window.scale_shift(xp, data, scale, shift, out, activation == "relu"):
        return  # one launch, and no device-to-host read of the scale and shift
    src = data
    if not bool((scale == 1).all()):
        per_channel(xp, xp.multiply, src, scale, out)
        src = out
    if bool(shift.any()):
        per_channel(xp, xp.add, src, shift, out)
        src = out
    if activation == "relu":
        relu_into(xp, src, out)
    elif src is data:
        xp.copyto(out, data)
