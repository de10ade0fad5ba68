"""Kernels of fused ops: ``nn.conv2d_bias_act`` (conv, then bias and activation in place)."""

from __future__ import annotations

from typing import Any

from .common import relu_into
from .conv import conv2d
from .registry import register_kernel


@register_kernel("nn.conv2d_bias_act")
def conv2d_bias_act(xp: Any, attrs: dict, data: Any, weight: Any, bias: Any, out: Any) -> None:
    """The conv2d kernel writes ``out``; the per-channel bias is added and the
    activation applied in place, so no intermediate tensor is allocated."""
    activation = attrs.get("activation", "none")
    if activation not in ("none", "relu"):
        raise ValueError(f"nn.conv2d_bias_act kernel: unknown activation {activation!r}")
    conv2d(xp, attrs, data, weight, out)
    xp.add(out, bias.reshape(-1, 1, 1), out=out)
    if activation == "relu":
        relu_into(xp, out, out)
