"""2-D pooling: ``nn.max_pool2d``, ``nn.avg_pool2d``, ``nn.adaptive_avg_pool2d``."""

from __future__ import annotations

from typing import Any

from ...ir import expr as E
from ...ir import struct_info as S
from ..attrs import int_tuple, padding4
from ..base import fail, make_call, op_name, register_op, tensor_arg
from .layout import arrange, check_layout, pick, window_out

__all__ = ["max_pool2d", "avg_pool2d", "adaptive_avg_pool2d"]

POOL_ATTRS = (
    "pool_size",
    "strides",
    "padding",
    "dilation",
    "ceil_mode",
    "count_include_pad",
    "layout",
    "out_layout",
)


def _data_4d(call: E.Call) -> tuple[S.TensorStructInfo, str, str]:
    op = op_name(call)
    data = tensor_arg(call, 0, "data")
    layout = check_layout(op, "layout", call.attrs["layout"], "NCHW")
    out_layout = check_layout(op, "out_layout", call.attrs["out_layout"] or layout, "NCHW")
    if data.ndim not in (-1, 4):
        raise fail(op, f"data must be 4-D, got {S.describe(data)}")
    return data, layout, out_layout


def _infer_pool2d(call: E.Call) -> S.StructInfo:
    op = op_name(call)
    data, layout, out_layout = _data_4d(call)
    if data.shape is None:
        return S.TensorStructInfo(None, data.dtype, 4, data.vdevice)
    at = call.attrs
    n, c, h, w = pick(data.shape, layout, "NCHW")
    kh, kw = at["pool_size"]
    pt, pl, pb, pr = at["padding"]
    sh, sw = at["strides"]
    dh, dw = at["dilation"]
    ceil = at["ceil_mode"]
    oh = window_out(op, "height", h, pt, pb, kh, sh, dh, ceil)
    ow = window_out(op, "width", w, pl, pr, kw, sw, dw, ceil)
    shape = arrange({"N": n, "C": c, "H": oh, "W": ow}, out_layout)
    return S.TensorStructInfo(shape, data.dtype, vdevice=data.vdevice)


def _infer_adaptive(call: E.Call) -> S.StructInfo:
    data, layout, out_layout = _data_4d(call)
    if data.shape is None:
        return S.TensorStructInfo(None, data.dtype, 4, data.vdevice)
    n, c, h, w = pick(data.shape, layout, "NCHW")
    size = call.attrs["output_size"]
    oh, ow = (h, w) if size is None else size
    shape = arrange({"N": n, "C": c, "H": oh, "W": ow}, out_layout)
    return S.TensorStructInfo(shape, data.dtype, vdevice=data.vdevice)


for _name in ("nn.max_pool2d", "nn.avg_pool2d"):
    register_op(_name, _infer_pool2d, num_inputs=1, attr_names=POOL_ATTRS, description="2-D pooling")
register_op(
    "nn.adaptive_avg_pool2d",
    _infer_adaptive,
    num_inputs=1,
    attr_names=("output_size", "layout", "out_layout"),
    description="average pooling to a fixed output size",
)


def _pool_attrs(op: str, pool_size, strides, padding, dilation, ceil_mode, count_include_pad,
                layout, out_layout) -> dict[str, Any]:  # fmt: skip
    """The attrs of a 2-D pooling call; ``out_layout=None`` is stored as ``layout``
    (TVM's normal form, so TVM's printed text and a built call agree)."""
    return {
        "pool_size": int_tuple(op, "pool_size", pool_size, 2),
        "strides": int_tuple(op, "strides", strides, 2),
        "padding": padding4(op, padding),
        "dilation": int_tuple(op, "dilation", dilation, 2),
        "ceil_mode": bool(ceil_mode),
        "count_include_pad": bool(count_include_pad),
        "layout": str(layout),
        "out_layout": str(layout if out_layout is None else out_layout),
    }


def max_pool2d(
    data: E.Expr,
    pool_size: Any = (1, 1),
    strides: Any = (1, 1),
    padding: Any = (0, 0),
    dilation: Any = (1, 1),
    ceil_mode: bool = False,
    count_include_pad: bool = False,
    layout: str = "NCHW",
    out_layout: str | None = None,
) -> E.Call:
    """Max pooling over H and W windows (padding never wins the max)."""
    attrs = _pool_attrs("nn.max_pool2d", pool_size, strides, padding, dilation, ceil_mode,
                        count_include_pad, layout, out_layout)  # fmt: skip
    return make_call("nn.max_pool2d", [data], attrs)


def avg_pool2d(
    data: E.Expr,
    pool_size: Any = (1, 1),
    strides: Any = (1, 1),
    padding: Any = (0, 0),
    dilation: Any = (1, 1),
    ceil_mode: bool = False,
    count_include_pad: bool = False,
    layout: str = "NCHW",
    out_layout: str | None = None,
) -> E.Call:
    """Average pooling; ``count_include_pad`` says whether padding counts in the divisor."""
    attrs = _pool_attrs("nn.avg_pool2d", pool_size, strides, padding, dilation, ceil_mode,
                        count_include_pad, layout, out_layout)  # fmt: skip
    return make_call("nn.avg_pool2d", [data], attrs)


def adaptive_avg_pool2d(
    data: E.Expr,
    output_size: Any = None,
    layout: str = "NCHW",
    out_layout: str | None = None,
) -> E.Call:
    """Average pooling to ``output_size`` (None keeps H and W; an int means square).

    ``out_layout=None`` is stored as ``layout``, as TVM does."""
    op = "nn.adaptive_avg_pool2d"
    size = None if output_size is None else int_tuple(op, "output_size", output_size, 2)
    if size is not None and min(size) <= 0:
        raise fail(op, f"output_size must be positive, got {size}")
    attrs = {
        "output_size": size,
        "layout": str(layout),
        "out_layout": str(layout if out_layout is None else out_layout),
    }
    return make_call(op, [data], attrs)
