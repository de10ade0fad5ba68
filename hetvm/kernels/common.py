"""Helpers shared by kernels."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["store", "same_shape", "same_buffer", "axes_or_none", "as_ints", "erf", "relu_into", "per_channel"]


def store(out: Any, value: Any) -> None:
    """Writes ``value`` into ``out``; a shape mismatch is an error, not a broadcast."""
    shape = getattr(value, "shape", ())
    if tuple(shape) != tuple(out.shape) and shape != ():
        raise ValueError(f"kernel result has shape {tuple(shape)}, output buffer {tuple(out.shape)}")
    out[...] = value


def same_buffer(x: Any, out: Any) -> bool:
    """Whether ``x`` and ``out`` are the same bytes seen the same way (a kernel
    asked to write over its own input, as LoopCarriedInPlace makes
    ``scatter_nd`` do): same start, shape, strides and dtype."""
    if x is out:
        return True
    if x.shape != out.shape or x.dtype != out.dtype or x.strides != out.strides:
        return False
    return _address(x) == _address(out)


def _address(a: Any) -> int:
    iface = getattr(a, "__array_interface__", None)
    if iface is not None:
        return iface["data"][0]
    return a.data.ptr  # CuPy


def same_shape(x: Any, out: Any) -> None:
    """For kernels writing with ``out=``: a ufunc would broadcast a smaller input
    into the buffer silently; a mismatch is an error, as in :func:`store`."""
    if x.shape != out.shape:
        raise ValueError(f"kernel result has shape {tuple(x.shape)}, output buffer {tuple(out.shape)}")


# NumPy iterates a broadcast operand through buffers of ``getbufsize()``
# (8192) elements when the rows it broadcasts over are shorter than that: a
# per-channel add over 3136-element rows ran 3x slower than over 12544-element
# rows (104 against 36 us for 3.2 MB, NumPy 2.4). A buffer no longer than a row
# lets the rows run directly; below ~512 elements the row overhead dominates
# and the buffered path is faster, so short rows keep it.
_FAST_ROW_MIN, _BUFSIZE = 512, 8192


def _row_call(row: int, ufunc: Any, a: Any, b: Any, out: Any) -> None:
    """``ufunc(a, b, out=out)`` with a buffer no longer than ``row`` when that is faster."""
    if _FAST_ROW_MIN <= row < _BUFSIZE:
        old = np.setbufsize(row - row % 16)
        try:
            ufunc(a, b, out=out)
        finally:
            np.setbufsize(old)
    else:
        ufunc(a, b, out=out)


# NumPy's ``maximum`` with a scalar operand runs a loop several times slower
# than with two arrays (measured with NumPy 2.4 on AVX-512: 245 against 60-80 us
# for 3.2 MB), so relu compares against a cached row of zeros broadcast over
# the outer rows instead. Rows are the trailing dimensions' product, capped so
# the cached rows stay small, and as long as NumPy's buffer (see ``_row_call``)
# where the array allows; tiny arrays keep the scalar form (call overhead wins).
_ZERO_ROWS: dict[tuple[int, Any], Any] = {}
_ROW_MAX = 1 << 16
_ROW_MIN = 64


def _zero_row(n: int, dtype: Any) -> Any:
    key = (n, dtype)
    row = _ZERO_ROWS.get(key)
    if row is None:
        row = np.zeros(n, dtype)
        row.flags.writeable = False
        _ZERO_ROWS[key] = row
    return row


def relu_into(xp: Any, x: Any, out: Any) -> None:
    """``out = max(x, 0)`` elementwise (``x`` may be ``out``); same shapes required.
    NaN stays NaN, as with ``maximum``."""
    if xp is np and x.flags.c_contiguous and out.flags.c_contiguous and x.dtype.kind == "f" and x.ndim:
        row = 1
        for dim in reversed(x.shape):
            if row >= _BUFSIZE or row * dim > _ROW_MAX:
                break
            row *= dim
        if row >= _ROW_MIN:  # (a whole tensor that fits one row too: one contiguous pair)
            zeros = _zero_row(row, x.dtype)
            _row_call(row, np.maximum, x.reshape(-1, row), zeros, out.reshape(-1, row))
            return
    xp.maximum(x, 0, out=out)


def per_channel(xp: Any, ufunc: Any, x: Any, values: Any, out: Any) -> None:
    """``out = ufunc(x, values)`` for NCHW-like ``x`` (channels on axis 1) and
    ``values`` with one entry per channel; ``x`` may be ``out``."""
    column = values.reshape((-1,) + (1,) * (x.ndim - 2)) if x.ndim > 2 else values
    if xp is np:
        _row_call(math.prod(x.shape[2:]), ufunc, x, column, out)
    else:
        ufunc(x, column, out=out)


def axes_or_none(axis: Any) -> Any:
    """An attr axis/axes value as NumPy wants it (None, an int, or a tuple)."""
    if axis is None:
        return None
    if isinstance(axis, (list, tuple)):
        return tuple(int(a) for a in axis)
    return int(axis)


def as_ints(values: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


# Abramowitz & Stegun 7.1.26: |error| < 1.5e-7, vectorised, no SciPy needed.
_P = 0.3275911
_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def erf(xp: Any, x: Any, out: Any = None) -> Any:
    """The error function, elementwise, in ``x``'s float precision (float64 for
    float64, else float32: the approximation's own error, 1.5e-7, is float32's
    resolution, so float64 work would only cost time). Written in place into
    ``out`` when given and of that dtype; returns the result."""
    dt = xp.float64 if x.dtype == xp.float64 else xp.float32
    direct = out is not None and out.dtype == dt and out.shape == x.shape and out is not x
    y = out if direct else xp.empty(x.shape, dt)
    a = xp.array(x, dtype=dt)  # a fresh array even when 0-d (0-d arithmetic gives scalars)
    xp.abs(a, out=a)
    xp.multiply(a, _P, out=y)  # y = t = 1 / (1 + p|x|)
    y += 1.0
    xp.reciprocal(y, out=y)
    poly = y * _A[4]  # Horner, in place
    for c in (_A[3], _A[2], _A[1], _A[0]):
        poly += c
        poly *= y
    xp.multiply(a, a, out=a)  # exp(-x^2)
    xp.negative(a, out=a)
    xp.exp(a, out=a)
    poly *= a
    xp.subtract(1.0, poly, out=y)
    xp.copysign(y, x, out=y)
    if out is not None and y is not out:
        store(out, y.astype(out.dtype, copy=False))
        return out
    return y
