"""The ``image.resize2d`` kernel: separable resampling along H, then W.

Why separable: every method ONNX's Resize and TVM's resize2d define (nearest,
linear, cubic, with or without antialias) weights the input along each axis
independently, so a 2-D resize is two 1-D ones. Per output coordinate of an axis
the source taps (indices, clamped into the image as edge padding does) and their
weights are computed once with NumPy (``axis_taps``; cached per geometry); the
data pass is then one gather and one multiply-add per tap over whole arrays --
no Python loop over pixels.

The formulas are ONNX Resize's (its specification and ``onnx.reference``), in the
same floating-point order, so tap choices on ties (nearest rounding, a
coordinate landing exactly on a pixel) agree with the reference:

* source coordinate ``x`` per ``coordinate_transformation_mode``, using the
  scale (``attrs["scales"]``, else ``out / in``) and the unfloored output
  length ``scale * in``;
* linear and cubic: 2 or 4 taps from ``floor(x)`` (one less on a pixel), weighted
  by the ratio past the left tap, in ``(0, 1]`` (on a pixel: that pixel alone);
  nearest: the left or right one of 2 such taps by ``rounding_method``;
* antialias (downsampling linear/cubic): the filter stretched by ``1 / scale``
  and renormalised; ``cubic_exclude``: taps outside the image get weight 0 and
  the rest are renormalised;
* ``tf_crop_and_resize``: coordinates outside the image give
  ``extrapolation_value``.

Floating inputs are resampled in float32 (float64 stays float64); integer inputs
in float64, then rounded half to even and clipped to the dtype's range, as
ONNX's reference casts.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import numpy as np

from .common import store
from .registry import register_kernel

__all__ = ["axis_taps", "resize2d"]


class Taps(NamedTuple):
    """Sampling of one axis: ``out[i] = sum_t weights[i, t] * in[index[i, t]]``."""

    index: np.ndarray  # (n_out, taps) intp, clamped into [0, n_in)
    weights: np.ndarray | None  # (n_out, taps) float64; None: nearest (one tap, weight 1)
    outside: np.ndarray | None  # (n_out,) bool: outputs set to extrapolation_value, or None
    identity: bool  # the axis is unchanged (skipped)


def _source_coords(ctm: str, n_in: int, n_out: int, scale: float, lo: float, hi: float):
    """Source coordinates of the outputs, and for tf_crop_and_resize which fall
    outside the image (ONNX Resize's formulas, in its reference's order)."""
    y = np.arange(n_out, dtype=np.float64)
    length = scale * n_in  # ONNX's output_width: the output length before flooring
    outside = None
    if ctm == "align_corners":
        x = np.zeros(n_out) if length == 1 else y * (n_in - 1) / (length - 1)
    elif ctm == "asymmetric":
        x = y / scale
    elif ctm == "tf_half_pixel_for_nn":
        x = (y + 0.5) / scale
    elif ctm == "tf_crop_and_resize":
        # roi is float32 (TVM's attr type; ONNX models give float32): its arithmetic
        # stays float32 as in ONNX's reference, the rest is float64
        start, end = np.float32(lo), np.float32(hi)
        span = end - start
        if length == 1:
            x = np.full(n_out, float(span * (n_in - 1) / 2))
        else:
            x = y * span * (n_in - 1) / (length - 1)
        x = x + float(start * (n_in - 1))
        outside = (x < 0) | (x > n_in - 1)
    elif ctm == "pytorch_half_pixel":
        x = np.full(n_out, -0.5) if length == 1 else (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel_symmetric":
        offset = (n_in / 2) * (1 - n_out / length)
        x = offset + (y + 0.5) / scale - 0.5
    else:
        raise ValueError(f"image.resize2d: unknown coordinate_transformation_mode {ctm!r}")
    return x, outside


def _ratio(x: np.ndarray) -> np.ndarray:
    """The position of ``x`` past the left tap, in ``(0, 1]``: 1 on a pixel."""
    base = np.floor(x)
    return np.where(x == base, 1.0, x - base)


def _window_start(x: np.ndarray, taps: int) -> np.ndarray:
    """The first of ``taps`` (even) neighbours of ``x``: ``floor(x) - taps/2 + 1``,
    or one less on a pixel. Found, as ONNX's reference finds it, on ``x`` shifted
    by the edge padding: where that shift rounds away a fraction below one ulp
    (``3.0000000000000004 + 1 == 4.0``) the window is the on-pixel one, so results
    agree with the reference's there too."""
    pad = taps // 2
    shifted = x + pad
    whole = np.floor(shifted)
    start = whole.astype(np.int64) - pad + np.where(shifted == whole, 0, 1)
    return start - taps // 2


def _nearest_pick(ratio: np.ndarray, rounding: str) -> np.ndarray:
    """Which of the two neighbours (0: left, 1: right) nearest takes."""
    on_pixel = ratio == 1.0
    if rounding == "floor":
        right = on_pixel
    elif rounding == "ceil":
        right = np.ones(ratio.shape, bool)
    elif rounding == "round_prefer_floor":
        right = on_pixel | (ratio > 0.5)
    elif rounding in ("round", "round_prefer_ceil"):
        right = on_pixel | (ratio >= 0.5)
    else:
        raise ValueError(f"image.resize2d: unknown rounding_method {rounding!r}")
    return right.astype(np.int64)


def _cubic_weights(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel W(|t|) with coefficient ``a``."""
    t = np.abs(t)
    t2 = t * t
    t3 = t * t2
    near = (a + 2) * t3 - (a + 3) * t2 + 1
    far = a * t3 - 5 * a * t2 + 8 * a * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def _filter(method: str, ratio: np.ndarray, scale: float, alpha: float, antialias: bool) -> np.ndarray:
    """Weights (n_out, taps) of linear or cubic, for taps at ``1 - taps/2 ...
    taps/2`` from the left neighbour (``ratio`` past it)."""
    r = ratio[:, None]
    if not antialias:
        if method == "linear":
            return np.concatenate([1 - r, r], axis=1)
        a = alpha
        s = 1 - r  # ONNX's four cubic coefficients for the taps at -1, 0, 1, 2
        w = [
            ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
            ((a + 2) * r - (a + 3)) * r * r + 1,
            ((a + 2) * s - (a + 3)) * s * s + 1,
            ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a,
        ]
        return np.concatenate(w, axis=1)
    # antialias: the filter widened by 1/scale when downsampling, renormalised
    s = min(scale, 1.0)
    reach = 1 if method == "linear" else 2
    first = int(np.floor(-reach / s) + 1)
    offsets = np.arange(first, 2 - first)
    if method == "linear":
        w = np.clip(1 - np.abs((offsets[None, :] - r) * s), 0, 1)
    else:
        w = _cubic_weights(s * (offsets[None, :] - r), alpha)
    return w / w.sum(axis=1, keepdims=True)


@functools.lru_cache(maxsize=256)
def axis_taps(
    n_in: int,
    n_out: int,
    scale: float | None,
    method: str,
    ctm: str,
    rounding: str,
    alpha: float,
    exclude: bool,
    antialias: bool,
    lo: float,
    hi: float,
) -> Taps:
    """The taps of one axis resized from ``n_in`` to ``n_out`` (read-only arrays).

    ``scale`` None means ``n_out / n_in``; ``lo``/``hi`` are the axis's roi."""
    if scale is None:
        scale = n_out / n_in
    trivial_roi = ctm != "tf_crop_and_resize" or (lo == 0.0 and hi == 1.0)
    if n_out == n_in and math.isclose(scale, 1.0) and trivial_roi:
        return Taps(np.arange(n_in)[:, None], None, None, True)
    x, outside = _source_coords(ctm, n_in, n_out, scale, lo, hi)
    ratio = _ratio(x)
    if method == "nearest_neighbor":
        index = (_window_start(x, 2) + _nearest_pick(ratio, rounding))[:, None]
        weights = None
        dropped = (index < 0) | (index >= n_in)
        if exclude and dropped.any():  # a lone tap outside: weight 0, nothing to renormalise
            weights = np.where(dropped, 0.0, 1.0)
    else:
        weights = _filter(method, ratio, scale, alpha, antialias)
        taps = weights.shape[1]
        index = _window_start(x, taps)[:, None] + np.arange(taps)[None, :]
        if exclude:
            weights = np.where((index < 0) | (index >= n_in), 0.0, weights)
            total = weights.sum(axis=1, keepdims=True)
            weights = weights / np.where(total == 0, 1.0, total)
    index = np.clip(index, 0, n_in - 1).astype(np.intp)
    if outside is not None and not outside.any():
        outside = None
    for arr in (index, weights, outside):
        if arr is not None:
            arr.flags.writeable = False
    return Taps(index, weights, outside, False)


def _attr_float(value: Any) -> float:
    """A float attr; FloatImms (roi) arrive as such when a kernel is called on IR attrs."""
    return float(getattr(value, "value", value))


def _saturate(xp: Any, values: Any, dtype: Any) -> Any:
    """``values`` cast to ``dtype``; to an integer type rounded half to even and
    clipped to its range (ONNX's reference casts so)."""
    dt = np.dtype(dtype)
    if dt.kind in "iu" and np.dtype(values.dtype).kind == "f":
        info = np.iinfo(dt)
        values = xp.clip(xp.rint(values), info.min, info.max)
    return values.astype(dt, copy=False)


def _resample(xp: Any, x: Any, axis: int, taps: Taps, compute: Any, fill: float) -> Any:
    """One axis of the resize: a gather (nearest) or a weighted sum of gathers."""
    if taps.identity:
        return x
    index = xp.asarray(taps.index)
    if taps.weights is None:
        out = xp.take(x, index[:, 0], axis=axis)
    else:
        wshape = [1] * x.ndim
        wshape[axis] = -1
        weights = xp.asarray(taps.weights.astype(compute))
        src = x if x.dtype == compute else x.astype(compute)
        out = None
        for t in range(taps.index.shape[1]):
            term = xp.take(src, index[:, t], axis=axis)
            xp.multiply(term, weights[:, t].reshape(wshape), out=term)
            if out is None:
                out = term
            else:
                xp.add(out, term, out=out)
    if taps.outside is not None:
        where = [slice(None)] * x.ndim
        where[axis] = xp.asarray(taps.outside)
        out[tuple(where)] = _saturate(xp, xp.asarray(fill, dtype=np.float64), out.dtype)
    return out


@register_kernel("image.resize2d")
def resize2d(xp: Any, attrs: dict, x: Any, size: Any, out: Any) -> None:
    """Resizes H then W (see the module docstring); any layout that permutes NCHW."""
    layout = attrs.get("layout", "NCHW")
    if sorted(layout) != sorted("NCHW") or x.ndim != 4:
        raise ValueError(f"image.resize2d kernel needs 4-D data in a permutation of NCHW, got {layout!r}")
    ah, aw = layout.index("H"), layout.index("W")
    expect = list(x.shape)
    expect[ah], expect[aw] = (int(v) for v in size)
    if tuple(out.shape) != tuple(expect):
        raise ValueError(f"image.resize2d: output {tuple(out.shape)} does not match input {tuple(x.shape)} resized to {tuple(size)}")
    method = attrs.get("method", "linear")
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    roi = [_attr_float(v) for v in attrs.get("roi") or (0.0, 0.0, 0.0, 0.0)]
    scale_h, scale_w = (None, None) if attrs.get("scales") is None else map(float, attrs["scales"])
    common = (
        method,
        ctm,
        attrs.get("rounding_method", "round"),
        _attr_float(attrs.get("cubic_alpha", -0.75)),
        bool(attrs.get("cubic_exclude", 0)),
        bool(attrs.get("antialias", False)),
    )
    taps_h = axis_taps(x.shape[ah], out.shape[ah], scale_h, *common, roi[0], roi[2])
    taps_w = axis_taps(x.shape[aw], out.shape[aw], scale_w, *common, roi[1], roi[3])
    fill = _attr_float(attrs.get("extrapolation_value", 0.0))
    kind = np.dtype(x.dtype).kind
    if method == "nearest_neighbor" and taps_h.weights is None and taps_w.weights is None:
        compute = x.dtype  # a pure gather: exact in any dtype
    elif kind == "f" and np.dtype(x.dtype).itemsize <= 4:
        compute = np.dtype(np.float32)
    elif kind in "fiu":
        compute = np.dtype(np.float64)
    else:
        raise ValueError(f"image.resize2d: cannot interpolate {x.dtype} data with method {method!r}")
    y = _resample(xp, x, ah, taps_h, compute, fill)
    y = _resample(xp, y, aw, taps_w, compute, fill)
    store(out, _saturate(xp, y, out.dtype) if y.dtype != out.dtype else y)
