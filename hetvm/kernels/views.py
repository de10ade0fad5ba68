"""Strided views and padded copies of NCHW data, shared by the convolution,
depthwise and pooling kernels."""

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
