"""Layout strings ("NCHW", "OIHW" ...) for the 2-D nn ops."""

from __future__ import annotations

from typing import Sequence

from ...ir import prim as P
from ..base import fail


def check_layout(op: str, name: str, layout: str, letters: str) -> str:
    """``layout`` must be a permutation of ``letters`` (e.g. NHWC of NCHW)."""
    if not isinstance(layout, str) or sorted(layout) != sorted(letters):
        raise fail(op, f"attribute '{name}' must be a permutation of '{letters}', got {layout!r}")
    return layout


def pick(shape: Sequence[P.PrimExpr], layout: str, letters: str) -> tuple[P.PrimExpr, ...]:
    """The dimensions named by ``letters`` from a shape in ``layout``."""
    return tuple(shape[layout.index(ch)] for ch in letters)


def arrange(dims: dict[str, P.PrimExpr], layout: str) -> tuple[P.PrimExpr, ...]:
    """A shape in ``layout`` from dimensions keyed by letter."""
    return tuple(dims[ch] for ch in layout)


def window_out(
    op: str,
    axis: str,
    size: P.PrimExpr,
    pad_lo: int,
    pad_hi: int,
    kernel: P.PrimExpr,
    stride: int,
    dilation: int,
    ceil_mode: bool = False,
) -> P.PrimExpr:
    """Output length of a sliding window: floor((in + pads - dilated kernel) / stride) + 1.

    With ``ceil_mode`` the division rounds up (TVM's rule). A provably empty
    output is an error naming the axis.
    """
    if stride <= 0 or dilation <= 0:
        raise fail(op, f"strides and dilation must be positive, got {stride} and {dilation}")
    extent = P.add(P.mul(P.sub(kernel, 1), dilation), 1)
    numer = P.sub(P.add(size, pad_lo + pad_hi), extent)
    if ceil_mode:
        numer = P.add(numer, stride - 1)
    out = P.add(P.floordiv(numer, stride), 1)
    value = P.const_value(out)
    numer_value = P.const_value(numer)
    if (value is not None and value <= 0) or (numer_value is not None and numer_value < 0):
        raise fail(
            op,
            f"window of {P.to_str(extent)} (after dilation) does not fit {axis} = "
            f"{P.to_str(size)} with padding ({pad_lo}, {pad_hi})",
        )
    return out
