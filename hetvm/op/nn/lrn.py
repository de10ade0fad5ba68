"""``nn.lrn``: local response normalisation across channels, as one op (hetvm-only).

``y = x / (bias + alpha / size * sum(x[c']^2 for c' in window(c))) ** beta`` with
the window ``c - (size - 1) // 2 .. c + ceil((size - 1) / 2)`` clipped to the
channels (ONNX's ``LRN``, Caffe's across-channel LRN). The channel is ``axis``
(1: NCHW). As one op it is one kernel and one planned buffer; composed from
element-wise ops and a band matmul it was six intermediates the size of the
input, and the planner had to hold several of them at once (AlexNet and ZFNet
planned 1.5x the ONNX-level bound, see ``benchmarks/memory_planning.py --light``).
Struct info is ``data``'s.
"""

from __future__ import annotations

import math

from ...ir import expr as E
from ...ir import struct_info as S
from ..attrs import as_int
from ..base import fail, is_float, make_call, norm_axis, register_op, tensor_arg

__all__ = ["lrn"]

OP = "nn.lrn"


def _infer_lrn(call: E.Call) -> S.StructInfo:
    data = tensor_arg(call, 0, "data")
    if data.dtype is not None and not is_float(data.dtype):
        raise fail(OP, f"needs a floating-point tensor, got {data.dtype}")
    size = call.attrs.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        raise fail(OP, f"size must be a positive integer, got {size!r}")
    for name in ("alpha", "beta", "bias"):
        value = call.attrs.get(name)
        if not isinstance(value, float) or not math.isfinite(value):
            raise fail(OP, f"{name} must be a finite float, got {value!r}")
    if data.ndim in (0, 1):
        raise fail(OP, f"data must have a channel axis (rank 2 or more), got {S.describe(data)}")
    if data.ndim != -1:
        norm_axis(OP, call.attrs["axis"], data.ndim)
    return data


register_op(OP, _infer_lrn, num_inputs=1, attr_names=("size", "alpha", "beta", "bias", "axis"),
            description="local response normalisation across channels (hetvm-only)")  # fmt: skip


def lrn(
    data: E.Expr, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0, axis: int = 1
) -> E.Call:
    """``data / (bias + alpha / size * window sum of data^2 over axis) ** beta``."""
    attrs = {
        "size": as_int(OP, "size", size),
        "alpha": float(alpha),
        "beta": float(beta),
        "bias": float(bias),
        "axis": as_int(OP, "axis", axis),
    }
    return make_call(OP, [data], attrs)
