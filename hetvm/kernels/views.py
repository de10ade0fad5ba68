"""Strided views and padded copies of NCHW data, shared by the convolution,
depthwise and pooling kernels.

The "same-width" layout (``flat_with_margins``, ``zero_wrapped``) serves stride-1
convolutions whose output is as wide as the input: each image is flattened into
one row between zero margins, so tap (i, j) reads that row at one fixed offset
and every tap's columns are contiguous runs laid out on the output's own grid.
A window that leaves the image sideways has wrapped into the neighbouring image
row instead; ``zero_wrapped`` clears those column stripes. Compared with
windows of a padded copy: no 2-D padded copy (whose rows are short), copies
along whole images, and no crop."""

from __future__ import annotations

from typing import Any

import numpy as np

from .scratch import scratch


def strided(xp: Any, x: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int = 0) -> Any:
    """A read-only strided view of ``x``'s memory starting ``offset`` bytes in.
    For a C-contiguous NumPy array this wraps the memory with the ndarray
    constructor, which also checks that the view stays inside ``x`` and is 10x
    cheaper than ``as_strided`` (0.3 against 3 us a call: a model makes a few
    hundred). Otherwise ``as_strided``, which checks nothing: callers keep
    their views inside ``x`` (see ``_check_fits``)."""
    if xp is np and x.flags.c_contiguous:
        view = np.ndarray(shape, x.dtype, x.reshape(-1), offset, strides)
        view.flags.writeable = False
        return view
    if offset and not x.flags.c_contiguous:
        raise ValueError("a strided view with an offset needs a C-contiguous array")
    base = x.reshape(-1)[offset // x.itemsize :] if offset else x
    return xp.lib.stride_tricks.as_strided(base, shape=shape, strides=strides)


def padded(xp: Any, x: Any, pads: tuple[int, int, int, int], fill: Any = 0, copy: bool = False) -> Any:
    """``x`` (NCHW) with (top, left, bottom, right) borders of ``fill``; ``x`` itself
    when there are none (unless ``copy``: then always a new C-contiguous array).
    The result is the thread's ``"pad"`` scratch buffer (see ``scratch``): the
    borders are filled and the interior copied, one pass each (``xp.pad`` is a
    generic, slower routine)."""
    pt, pl, pb, pr = pads
    if not (pt or pl or pb or pr or copy):
        return x
    n, c, h, w = x.shape
    y = scratch(xp, "pad", (n, c, h + pt + pb, w + pl + pr), x.dtype)
    if pt:
        y[:, :, :pt] = fill
    if pb:
        y[:, :, pt + h :] = fill
    if pl:
        y[:, :, pt : pt + h, :pl] = fill
    if pr:
        y[:, :, pt : pt + h, pl + w :] = fill
    y[:, :, pt : pt + h, pl : pl + w] = x
    return y


def flat_with_margins(xp: Any, x: Any, kernel: tuple[int, int], dilation: tuple[int, int],
                      pads: tuple[int, int, int, int], out_h: int) -> Any:  # fmt: skip
    """``x`` (..., H, W) copied into the thread's ``"pad"`` scratch as (..., before +
    H*W + after) with zero margins: tap (i, j) of output position ``t`` (on the
    (out_h, W) grid) reads element ``t + i*d0*W + j*d1`` of a row."""
    *lead, h, w = x.shape
    before = pads[0] * w + pads[1]
    after = max(0, (kernel[0] - 1) * dilation[0] * w + (kernel[1] - 1) * dilation[1] + out_h * w - before - h * w)
    flat = scratch(xp, "pad", (*lead, before + h * w + after), x.dtype)
    flat[..., :before] = 0
    flat[..., before + h * w :] = 0
    flat[..., before : before + h * w] = x.reshape(*lead, h * w)
    return flat


def zero_wrapped(per_tap: Any, kw: int, dilation: int, pad_left: int, w: int) -> None:
    """Clears, in ``per_tap`` (..., KW, L) with L a multiple of ``w``, the output
    columns whose tap j read across the image's left or right edge."""
    for j in range(kw):
        dx = j * dilation - pad_left
        for col in range(min(w, -dx)) if dx < 0 else range(max(0, w - dx), w):
            per_tap[..., j, col::w] = 0
