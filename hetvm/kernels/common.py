"""Helpers shared by kernels."""

from __future__ import annotations

from typing import Any

__all__ = ["store", "axes_or_none", "as_ints", "erf"]


def store(out: Any, value: Any) -> None:
    """Writes ``value`` into ``out``; a shape mismatch is an error, not a broadcast."""
    shape = getattr(value, "shape", ())
    if tuple(shape) != tuple(out.shape) and shape != ():
        raise ValueError(f"kernel result has shape {tuple(shape)}, output buffer {tuple(out.shape)}")
    out[...] = value


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


def erf(xp: Any, x: Any) -> Any:
    """The error function, elementwise, in float64 then cast back to x's dtype."""
    v = x.astype(xp.float64)
    a = xp.abs(v)
    t = 1.0 / (1.0 + _P * a)
    poly = t * (_A[0] + t * (_A[1] + t * (_A[2] + t * (_A[3] + t * _A[4]))))
    y = 1.0 - poly * xp.exp(-a * a)
    return (xp.sign(v) * y).astype(x.dtype)
