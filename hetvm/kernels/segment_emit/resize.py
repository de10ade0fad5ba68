"""Segment body of ``image.resize2d`` for the linear resizes of decoders
(segformer's upsampling of each stage to a common size): NCHW float data,
``linear`` without antialias or ``cubic_exclude``, the scale ``out / in``, and
the coordinate modes ``half_pixel``, ``pytorch_half_pixel``, ``asymmetric`` and
``align_corners``. Everything else keeps the NumPy kernel.

The body computes what :mod:`hetvm.kernels.resize` computes, in its order: per
axis the source coordinate, the left tap and the ratio past it in float64 (the
kernel's :func:`~hetvm.kernels.resize.axis_taps`), the two weights cast to the
data's dtype, then H and W each as ``term0 * w0 + term1 * w1`` in that dtype
(the kernel's gather, multiply and add), an axis of unchanged length copied.
"""

from __future__ import annotations

from typing import Any, Sequence

from . import FLOATS, Arg, Arr, Imm, Lines, Val, register

#: the source coordinate of output ``y`` (float64) per mode; ``s`` the scale,
#: ``n`` the input length, ``ln`` the unfloored output length ``s * n``
_COORD = {
    "half_pixel": "(y + 0.5) / s - 0.5",
    "pytorch_half_pixel": "-0.5 if ln == 1.0 else (y + 0.5) / s - 0.5",
    "asymmetric": "y / s",
    "align_corners": "0.0 if ln == 1.0 else y * (n - 1) / (ln - 1.0)",
}


def _taps(axis: str, n_in: str, n_out: str, ctm: str, dtype: str) -> Lines:
    """Lines filling ``i{axis}`` (int64, two taps) and ``w{axis}`` (the data's
    dtype) for each output of the axis, as the kernel's ``axis_taps``."""
    i, w = f"i{axis}", f"w{axis}"
    return [
        f"{i} = np.empty(({n_out}, 2), np.int64)",
        f"{w} = np.empty(({n_out}, 2), np.{dtype})",
        f"n = {n_in}",
        f"s = {n_out} / {n_in}",
        "ln = s * n",
        f"for o in range({n_out}):",
        "    y = float(o)",
        f"    x = {_COORD[ctm]}",
        "    base = np.floor(x)",
        "    r = 1.0 if x == base else x - base",
        "    shifted = x + 1.0",
        "    whole = np.floor(shifted)",
        "    start = np.int64(whole) - 1 + (0 if shifted == whole else 1) - 1",
        "    for t in range(2):",
        "        k = start + t",
        f"        {i}[o, t] = 0 if k < 0 else (n - 1 if k > n - 1 else k)",
        f"    {w}[o, 0] = np.{dtype}(1.0 - r)",
        f"    {w}[o, 1] = np.{dtype}(r)",
    ]


@register("image.resize2d")
def _resize2d(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if len(args) != 3 or not isinstance(args[0], Arr) or not isinstance(args[2], Arr):
        return None
    x, size, out = args
    if x.dtype not in FLOATS or out.dtype != x.dtype or x.ndim != 4 or out.ndim != 4:
        return None
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    plain = (attrs.get("layout", "NCHW") == "NCHW" and attrs.get("method", "linear") == "linear"
             and attrs.get("scales") is None and not attrs.get("antialias", False)
             and not attrs.get("cubic_exclude", 0) and isinstance(ctm, str) and ctm in _COORD)  # fmt: skip
    if not plain:
        return None
    if isinstance(size, Val) and size.kind == "shape" and size.length == 2:
        h, w = f"{names[1]}[0]", f"{names[1]}[1]"
    elif (isinstance(size, Imm) and isinstance(size.value, (tuple, list)) and len(size.value) == 2
          and all(isinstance(v, int) and not isinstance(v, bool) for v in size.value)):  # fmt: skip
        h, w = (repr(int(v)) for v in size.value)
    else:
        return None
    X, O, dt = names[0], names[2], x.dtype
    lines = [
        f"if {O}.shape[0] != {X}.shape[0] or {O}.shape[1] != {X}.shape[1] "
        f"or {O}.shape[2] != {h} or {O}.shape[3] != {w}:",
        "    raise ValueError('image.resize2d: the output does not match the input resized')",
        f"if {X}.shape[2] == 0 or {X}.shape[3] == 0:",  # the kernel's scale out / in divides by zero
        "    raise ZeroDivisionError('image.resize2d: an empty input axis')",
        f"H_in, W_in, H, W = {X}.shape[2], {X}.shape[3], {O}.shape[2], {O}.shape[3]",
        *_taps("h", "H_in", "H", ctm, dt),
        *_taps("w", "W_in", "W", ctm, dt),
        # H first, into a buffer of the input's width (the kernel's intermediate)
        f"tmp = np.empty(({X}.shape[0], {X}.shape[1], H, W_in), np.{dt})",
        f"for a in range({X}.shape[0]):",
        f"    for c in range({X}.shape[1]):",
        "        for o in range(H):",
        "            h0, h1, u0, u1 = ih[o, 0], ih[o, 1], wh[o, 0], wh[o, 1]",
        "            for q in range(W_in):",
        "                if H == H_in:",
        f"                    tmp[a, c, o, q] = {X}[a, c, o, q]",
        "                else:",
        f"                    tmp[a, c, o, q] = {X}[a, c, h0, q] * u0 + {X}[a, c, h1, q] * u1",
        "            for q in range(W):",
        "                if W == W_in:",
        f"                    {O}[a, c, o, q] = tmp[a, c, o, q]",
        "                else:",
        f"                    {O}[a, c, o, q] = tmp[a, c, o, iw[q, 0]] * ww[q, 0] + tmp[a, c, o, iw[q, 1]] * ww[q, 1]",
    ]
    return lines
