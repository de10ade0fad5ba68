"""``nn.pad``: constant / reflect / edge / wrap padding of every axis."""

from __future__ import annotations

from typing import Any, Sequence

from ...ir import expr as E
from ...ir import prim as P
from ...ir import struct_info as S
from ..attrs import axes_tuple
from ..base import fail, format_shape, make_call, register_op, tensor_arg

__all__ = ["pad"]

PAD_MODES = ("constant", "reflect", "edge", "wrap")


def _infer_pad(call: E.Call) -> S.StructInfo:
    data = tensor_arg(call, 0, "data")
    width = call.attrs["pad_width"]
    if data.ndim != -1 and len(width) != 2 * data.ndim:
        raise fail(
            "nn.pad",
            f"pad_width needs 2 values per axis ({2 * data.ndim} for {S.describe(data)}), "
            f"got {len(width)}",
        )
    if data.shape is None:
        return S.TensorStructInfo(None, data.dtype, len(width) // 2, data.vdevice)
    if call.attrs["pad_mode"] == "reflect":
        for axis, d in enumerate(data.shape):
            c = P.const_value(d)
            if c is not None and max(width[2 * axis], width[2 * axis + 1]) >= c:
                raise fail(
                    "nn.pad",
                    f"reflect padding {width[2 * axis : 2 * axis + 2]} must be smaller than "
                    f"axis {axis} of {format_shape(data.shape)}",
                )
    out = [P.add(d, width[2 * i] + width[2 * i + 1]) for i, d in enumerate(data.shape)]
    return S.TensorStructInfo(out, data.dtype, vdevice=data.vdevice)


register_op(
    "nn.pad",
    _infer_pad,
    num_inputs=1,
    attr_names=("pad_width", "pad_mode", "pad_value"),
    description="pads every axis (before_i, after_i)",
)


def pad(
    data: E.Expr,
    pad_width: Sequence[int],
    pad_mode: str = "constant",
    pad_value: Any = 0.0,
) -> E.Call:
    """Pads ``data``; ``pad_width`` is (before0, after0, before1, after1, ...)."""
    width = axes_tuple("nn.pad", "pad_width", pad_width)
    if any(w < 0 for w in width):
        raise fail("nn.pad", f"pad_width must be non-negative, got {width}")
    if pad_mode not in PAD_MODES:
        raise fail("nn.pad", f"pad_mode must be one of {PAD_MODES}, got {pad_mode!r}")
    attrs = {"pad_width": width, "pad_mode": pad_mode, "pad_value": float(pad_value)}
    return make_call("nn.pad", [data], attrs)
