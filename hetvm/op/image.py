"""Image ops (``R.image.*``): ``image.resize2d``.

``resize2d(data, size, roi, layout, method, coordinate_transformation_mode,
rounding_method, cubic_alpha, cubic_exclude, extrapolation_value, out_dtype)`` is
TVM Relax's signature: ``size`` (the output height and width) is an IR argument, a
2-D shape; everything else is an attr, printed in that order. ``roi`` is TVM's
``(start_h, start_w, end_h, end_w)``, stored as ``float32`` FloatImms as TVM stores
it (so it prints as TVM prints it, ``T.float32(0.0)``).

Two attrs are hetvm's own, for ONNX's Resize, which TVM's op cannot express:

* ``scales`` -- the (height, width) scale factors the coordinate transformation
  divides by. ONNX uses the given scale, not ``out / in``: a scale of 0.6 on 4 rows
  gives 2 rows sampled at ``(y + 0.5) / 0.6 - 0.5``, not ``(y + 0.5) / 0.5 - 0.5``.
  None (the default) means ``out / in``, TVM's rule.
* ``antialias`` -- ONNX's antialias (opset 18): when downsampling, linear and cubic
  filters are widened by ``1 / scale`` and renormalised.

At their defaults (None, False) the printer leaves them out, so every call TVM can
express prints as TVM prints it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from .attrs import as_shape_arg, dtype_str
from .base import describe_arg, fail, format_shape, make_call, op_name, register_op, tensor_arg
from .nn.layout import check_layout

__all__ = ["resize2d"]

OP = "image.resize2d"

METHODS = ("nearest_neighbor", "linear", "cubic")
COORDINATE_MODES = (
    "half_pixel",
    "align_corners",
    "asymmetric",
    "pytorch_half_pixel",
    "tf_half_pixel_for_nn",
    "tf_crop_and_resize",
    "half_pixel_symmetric",
)
#: "round" is TVM's default: half away from zero (for the clamped, non-negative
#: coordinates that is "round_prefer_ceil")
ROUNDING_METHODS = ("round", "round_prefer_floor", "round_prefer_ceil", "floor", "ceil")

ATTR_NAMES = (
    "roi",
    "layout",
    "method",
    "coordinate_transformation_mode",
    "rounding_method",
    "cubic_alpha",
    "cubic_exclude",
    "extrapolation_value",
    "out_dtype",
    "scales",
    "antialias",
)
#: hetvm's attrs and the values that mean "as TVM": the printer omits them there
HETVM_ONLY_ATTRS = {"scales": None, "antialias": False}


def _infer_resize2d(call: E.Call) -> S.StructInfo:
    op = op_name(call)
    data = tensor_arg(call, 0, "data")
    size = call.args[1].struct_info
    if not isinstance(size, S.ShapeStructInfo):
        raise fail(op, f"size must be a shape of 2 values (height, width), got {describe_arg(call.args[1])}")
    if size.ndim not in (-1, 2):
        raise fail(op, f"size must have 2 values (height, width), got {size.ndim}: {describe_arg(call.args[1])}")
    layout = check_layout(op, "layout", call.attrs["layout"], "NCHW")
    if data.ndim not in (-1, 4):
        raise fail(op, f"data must be 4-D ({layout}), got {S.describe(data)}")
    dtype = call.attrs["out_dtype"] or data.dtype
    if size.values is not None:
        for what, dim in zip(("height", "width"), size.values):
            value = P.const_value(dim)
            if value is not None and value <= 0:
                raise fail(op, f"output {what} must be positive, got size {format_shape(size.values)}")
    if data.shape is None or size.values is None:
        return S.TensorStructInfo(None, dtype, 4, data.vdevice)
    dims = dict(zip(layout, data.shape))
    dims["H"], dims["W"] = size.values
    return S.TensorStructInfo(tuple(dims[ch] for ch in layout), dtype, vdevice=data.vdevice)


register_op(
    OP,
    _infer_resize2d,
    num_inputs=2,
    attr_names=ATTR_NAMES,
    description="2-D image resize (nearest, linear, cubic) over the H and W axes",
    hetvm_only_attrs=HETVM_ONLY_ATTRS,
)


def _float(value: Any) -> float:
    return float(value.value) if isinstance(value, (P.FloatImm, P.IntImm)) else float(value)


def _roi(value: Any) -> tuple[P.FloatImm, ...]:
    if value is None:
        items = [0.0] * 4
    elif isinstance(value, (int, float, np.integer, np.floating, P.FloatImm)):
        items = [_float(value)] * 4
    elif isinstance(value, (tuple, list)) and len(value) == 4:
        items = [_float(v) for v in value]
    else:
        raise fail(OP, f"roi must be None, a float or 4 floats (start_h, start_w, end_h, end_w), got {value!r}")
    return tuple(P.FloatImm(float(np.float32(v)), "float32") for v in items)


def _scales(value: Any) -> tuple[float, float] | None:
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise fail(OP, f"scales must be None or 2 floats (height, width), got {value!r}")
    out = tuple(_float(v) for v in value)
    if not all(math.isfinite(s) and s > 0 for s in out):
        raise fail(OP, f"scales must be positive, got {out}")
    return out  # type: ignore[return-value]


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise fail(OP, f"{name} must be one of {', '.join(allowed)}; got {value!r}")
    return str(value)


def resize2d(
    data: E.Expr,
    size: Any,
    roi: Any = None,
    layout: str = "NCHW",
    method: str = "linear",
    coordinate_transformation_mode: str = "half_pixel",
    rounding_method: str = "round",
    cubic_alpha: float = -0.75,
    cubic_exclude: int = 0,
    extrapolation_value: float = 0.0,
    out_dtype: Any = None,
    scales: Any = None,
    antialias: bool = False,
) -> E.Call:
    """Resizes the H and W axes of ``data`` to ``size`` (an int, (h, w) or a shape).

    Coordinates map back by ``coordinate_transformation_mode`` (ONNX Resize's
    formulas), then ``method`` samples: nearest (``rounding_method``), linear, or
    cubic (``cubic_alpha``; ``cubic_exclude`` drops taps outside the image and
    renormalises). ``tf_crop_and_resize`` samples inside ``roi`` and writes
    ``extrapolation_value`` where a coordinate falls outside the image.
    """
    if isinstance(size, (int, np.integer, P.PrimExpr)) and not isinstance(size, bool):
        size = (size, size)
    if isinstance(size, (tuple, list)) and len(size) == 1:
        size = (size[0], size[0])
    if isinstance(size, (tuple, list)) and len(size) != 2:
        raise fail(OP, f"size needs 1 or 2 values (height, width), got {tuple(size)}")
    layout = check_layout(OP, "layout", layout, "NCHW")
    method = _choice("method", method, METHODS)
    ctm = _choice("coordinate_transformation_mode", coordinate_transformation_mode, COORDINATE_MODES)
    rounding = _choice("rounding_method", rounding_method, ROUNDING_METHODS)
    exclude = int(cubic_exclude)
    if exclude not in (0, 1):
        raise fail(OP, f"cubic_exclude must be 0 or 1, got {cubic_exclude!r}")
    if antialias and method == "nearest_neighbor":
        raise fail(OP, "antialias applies to the linear and cubic methods only, not nearest_neighbor")
    attrs = {
        "roi": _roi(roi),
        "layout": layout,
        "method": method,
        "coordinate_transformation_mode": ctm,
        "rounding_method": rounding,
        "cubic_alpha": _float(cubic_alpha),
        "cubic_exclude": exclude,
        "extrapolation_value": _float(extrapolation_value),
        "out_dtype": dtype_str(out_dtype),
        "scales": _scales(scales),
        "antialias": bool(antialias),
    }
    return make_call(OP, [data, as_shape_arg(OP, size, "size")], attrs)
