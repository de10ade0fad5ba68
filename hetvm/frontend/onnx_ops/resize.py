"""ONNX Resize (opsets 10-19) and Upsample (7, 9) as ``image.resize2d``.

What is read at import time: ``roi``, ``scales`` and ``sizes`` (constants,
initializers or values folded from them; ``sizes`` may also be a shape value
derived from input shapes). What is supported: 4-D inputs resizing two axes --
H and W of NCHW, or of NHWC (the axes 1 and 2) -- with the other two unchanged;
every mode, coordinate transformation, nearest mode, ``cubic_coeff_a``,
``exclude_outside``, ``extrapolation_value``, ``antialias``, ``axes`` and
``keep_aspect_ratio_policy``. The output size from ``scales`` is
``floor(in * scale)``, a shape expression on symbolic dims, and the coordinate transformation uses the given scale
(hetvm's ``scales`` attr when it is not ``out / in``), as ONNX's reference does.

Resize-10 and Upsample have no attributes but ``mode``: ``asymmetric`` coordinates,
and nearest takes the pixel below when upsampling and above when downsampling
(ONNX Runtime's rule; the specification leaves it open).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Sequence

import numpy as np

from ...ir import expr as E
from ...ir import prim as P
from ..fold import SymArray
from ..onnx_context import ConvertContext, NodeView, normalize_axes
from .registry import converter

_METHODS = {"nearest": "nearest_neighbor", "linear": "linear", "cubic": "cubic"}
_POLICIES = ("stretch", "not_larger", "not_smaller")


def _floats(ctx: ConvertContext, node: NodeView, index: int, what: str) -> list[float] | None:
    """A float input known at import time as a list; None when omitted or empty."""
    value = node.input(index)
    if value is None:
        return None
    if isinstance(value, E.Expr):
        raise ctx.error(
            f"input {index} ({what}) is computed at run time; hetvm needs it known at import "
            "time (a constant or an initializer)"
        )
    arr = np.asarray(value.data if isinstance(value, SymArray) else value)
    if arr.size == 0:
        return None
    return [float(v) for v in arr.reshape(-1)]  # a float32 value exactly, as a Python float


def _sizes(ctx: ConvertContext, node: NodeView, index: int) -> list[P.PrimExpr] | None:
    value = node.input(index)
    if value is None or (isinstance(value, np.ndarray) and value.size == 0):
        return None
    if isinstance(value, E.Expr):
        # fresh dims bound at run time would hide which axes are resized (and the
        # kernel's layout): sizes from tensor values are refused, as scales are
        raise ctx.error(
            f"input {index} (sizes) is computed at run time; hetvm needs it known at import "
            "time (a constant, an initializer, or derived from input shapes)"
        )
    return ctx.dims(value, f"input {index} (sizes)")


def _per_axis(ctx: ConvertContext, values: Sequence[Any], axes: list[int], fill: list[Any], what: str) -> list[Any]:
    """``values`` given for ``axes`` spread over all axes (the rest from ``fill``)."""
    if len(values) != len(axes):
        raise ctx.error(f"{what} has {len(values)} value(s) for {len(axes)} axes")
    out = list(fill)
    for axis, v in zip(axes, values):
        out[axis] = v
    return out


def _static(ctx: ConvertContext, dims: Sequence[P.PrimExpr], what: str) -> list[int]:
    values = [P.const_value(d) for d in dims]
    if any(v is None for v in values):
        raise ctx.error(f"{what} needs static input dims, got {ctx.describe_inputs()}")
    return values  # type: ignore[return-value]


def _dims(dims: Sequence[P.PrimExpr]) -> str:
    return "[" + ", ".join(P.to_str(d) for d in dims) + "]"


def _layout(ctx: ConvertContext, resized: list[int], detail: str) -> str:
    """The layout naming the resized axes H and W (NCHW, or NHWC for axes 1 and 2)."""
    if set(resized) <= {2, 3}:
        return "NCHW"
    if set(resized) <= {1, 2}:
        return "NHWC"
    raise ctx.error(
        f"resizes axes {resized} ({detail}); hetvm resizes two axes of a 4-D input, "
        "H and W of NCHW (axes 2, 3) or of NHWC (axes 1, 2), with the other two unchanged"
    )


def _resize_2d(ctx: ConvertContext, x: E.Expr, mode: str, out: list[P.PrimExpr],
               scales: list[float] | None, roi: list[float] | None, ctm: str, rounding: str,
               **attrs: Any) -> E.Expr:  # fmt: skip
    """Emits image.resize2d for the full-rank output dims ``out``; ``scales`` are
    ONNX's scale factors (None: ``out / in``). Checks that two axes at most change."""
    shape = ctx.shape_of(x)
    assert shape is not None
    plain_roi = [roi is None or ctm != "tf_crop_and_resize" or (roi[i] == 0 and roi[i + 4] == 1) for i in range(4)]
    resized = [
        i for i in range(4)
        if not P.prove_equal(out[i], shape[i]) or (scales is not None and scales[i] != 1.0) or not plain_roi[i]
    ]  # fmt: skip
    if not resized:
        return x  # nothing changes: Resize is the identity
    what = f"output dims {_dims(out)}" + (f", scales {scales}" if scales else "")
    layout = _layout(ctx, resized, f"{what} for input dims {_dims(shape)}")
    ah, aw = layout.index("H"), layout.index("W")
    hw_scales = None
    if scales is not None:
        pair = (scales[ah], scales[aw])
        dims = [P.const_value(d) for d in (shape[ah], shape[aw], out[ah], out[aw])]
        # the kernel's default is out / in; ONNX's scale is passed where it differs,
        # and always on symbolic dims (where out / in is only known at run time)
        if any(d is None for d in dims) or any(s != o / d for s, o, d in zip(pair, dims[2:], dims[:2])):
            hw_scales = pair
    hw_roi = None
    if ctm == "tf_crop_and_resize" and roi is not None:
        hw_roi = (roi[ah], roi[aw], roi[ah + 4], roi[aw + 4])
    return ctx.call(
        "image.resize2d",
        x,
        (out[ah], out[aw]),
        roi=hw_roi,
        layout=layout,
        method=_METHODS[mode],
        coordinate_transformation_mode=ctm,
        rounding_method=rounding,
        scales=hw_scales,
        **attrs,
    )


def _from_scales(ctx: ConvertContext, x: E.Expr, scales: list[float]) -> list[P.PrimExpr]:
    """ONNX's output dims from scales: ``floor(in * scale)`` (the float32 scale times
    the dim in float64, as its reference computes it). A symbolic dim gets the
    exact expression ``in * p // q`` with ``scale == p / q`` (a float is a dyadic
    rational, so this is exact: ``H * 3 // 2`` for 1.5)."""
    shape = ctx.shape_of(x)
    assert shape is not None
    out: list[P.PrimExpr] = []
    for scale, dim in zip(scales, shape):
        static = P.const_value(dim)
        if static is not None:
            out.append(P.IntImm(int(scale * static)))
            continue
        ratio = Fraction(scale)
        scaled = P.mul(dim, ratio.numerator)
        out.append(scaled if ratio.denominator == 1 else P.floordiv(scaled, ratio.denominator))
    if any(P.const_value(o) == 0 for o in out):
        raise ctx.error(f"scales {scales} give an empty output for input dims {_dims(shape)}")
    return out


def _mode(ctx: ConvertContext, node: NodeView, allowed: Sequence[str]) -> str:
    mode = node.attr("mode", "nearest")
    if mode not in allowed:
        raise ctx.error(f"mode '{mode}' is not supported (supported: {', '.join(allowed)})")
    return mode


def _input_4d(ctx: ConvertContext) -> E.Expr:
    x = ctx.tensor(0, "X")
    rank = ctx.rank(x)
    if rank != 4:
        raise ctx.error(f"only 4-D inputs are supported (N, C, H, W or N, H, W, C), got rank {rank}")
    if ctx.shape_of(x) is None:
        raise ctx.error("needs an input of known shape")
    return x


def _legacy(ctx: ConvertContext, node: NodeView, scales: list[float] | None) -> E.Expr:
    """Resize-10 and Upsample: scales only, asymmetric coordinates."""
    x = _input_4d(ctx)
    mode = _mode(ctx, node, ("nearest", "linear"))
    if scales is None or len(scales) != 4:
        raise ctx.error(f"scales needs 4 values (one per axis), got {scales}")
    if any(not s > 0 for s in scales):
        raise ctx.error(f"scales must be positive, got {scales}")
    ups, downs = any(s > 1 for s in scales), any(s < 1 for s in scales)
    if mode == "nearest" and ups and downs:
        raise ctx.error(
            f"nearest with scales {scales} both up- and downsamples; its rounding (floor up, "
            "ceil down) is defined per resize, not per axis"
        )
    rounding = "ceil" if downs else "floor"
    return _resize_2d(ctx, x, mode, _from_scales(ctx, x, scales), scales, None, "asymmetric", rounding)


@converter("Upsample", since=7)
def _upsample(ctx: ConvertContext, node: NodeView) -> Any:
    if node.opset < 9:
        scales = node.attr("scales")
        scales = None if scales is None else [float(np.float32(s)) for s in scales]
    else:
        scales = _floats(ctx, node, 1, "scales")
    return _legacy(ctx, node, scales)


@converter("Resize", since=10)
def _resize(ctx: ConvertContext, node: NodeView) -> Any:
    if node.opset < 11:
        return _legacy(ctx, node, _floats(ctx, node, 1, "scales"))
    x = _input_4d(ctx)
    mode = _mode(ctx, node, tuple(_METHODS))
    roi = _floats(ctx, node, 1, "roi")
    scales = _floats(ctx, node, 2, "scales")
    sizes = _sizes(ctx, node, 3)
    if (scales is None) == (sizes is None):
        raise ctx.error(f"needs exactly one of scales and sizes, got {'both' if scales else 'neither'}")
    axes = node.attr("axes")
    axes = list(range(4)) if axes is None else normalize_axes(ctx, axes, 4)
    if len(set(axes)) != len(axes):
        raise ctx.error(f"axes {node.attr('axes')} repeat an axis")
    shape = list(ctx.shape_of(x) or ())
    if roi is not None:
        roi = _per_axis(ctx, roi, axes + [a + 4 for a in axes], [0.0] * 4 + [1.0] * 4, "roi")
    policy = node.attr("keep_aspect_ratio_policy", "stretch")
    if policy not in _POLICIES:
        raise ctx.error(f"unknown keep_aspect_ratio_policy '{policy}'")
    if scales is not None:
        scales = _per_axis(ctx, scales, axes, [1.0] * 4, "scales")
        if any(not s > 0 for s in scales):
            raise ctx.error(f"scales must be positive, got {scales}")
        out = _from_scales(ctx, x, scales)
    else:
        out = _per_axis(ctx, sizes, axes, shape, "sizes")
        if policy != "stretch":
            # one scale for all of ``axes`` (the smallest or largest out / in) and
            # round(scale * in) on them, as ONNX's reference computes them
            what = f"keep_aspect_ratio_policy={policy}"
            dims, wanted = _static(ctx, shape, what), _static(ctx, out, what)
            ratios = [wanted[a] / dims[a] for a in axes]
            scale = min(ratios) if policy == "not_larger" else max(ratios)
            out = [P.IntImm(int(scale * d + 0.5)) if a in axes else out[a] for a, d in enumerate(dims)]
            scales = [scale if a in axes else 1.0 for a in range(4)]
    ctm = node.attr("coordinate_transformation_mode", "half_pixel")
    rounding = node.attr("nearest_mode", "round_prefer_floor")
    return _resize_2d(
        ctx, x, mode, out, scales, roi, ctm, rounding,
        cubic_alpha=float(node.attr("cubic_coeff_a", -0.75)),
        cubic_exclude=int(node.attr("exclude_outside", 0)),
        extrapolation_value=float(node.attr("extrapolation_value", 0.0)),
        antialias=bool(node.attr("antialias", 0)),
    )  # fmt: skip
