"""Segment bodies of 2-D convolutions on small output planes: one dot product
per output (its window's taps against the output channel's weights).

Why: the general body (``conv.py``) vectorises along the output plane, which
is a handful of items in a small CNN's last stages (a 3x3/2 layer with a 2x2
output: rows of 5), while each output sums hundreds of taps: 48->64 channels
at 4x4 -> 2x2 took 45 us for 110,592 multiply-adds (the NumPy kernel, im2col
and BLAS, 35 us; ONNX Runtime ~5). Here the taps of each output position are
copied into one contiguous row (im2col, zeros where the window leaves the
image) and each output is the dot product of that row with its channel's
weight row, which is contiguous in OIHW: no copy of the weights, and the loop
is as long as the window's taps.

The dot products run in a helper compiled with ``fastmath={"reassoc",
"contract"}`` (sums reassociated into vector lanes, multiply-adds fused),
four output channels and two positions a pass (on 64x576 weights and four
positions 34 GMAC/s against 19 for four channels and one position). The sums run
in another order than BLAS's or the general body's: results agree to
rounding. NaN and inf behave as IEEE says (no flag assumes them away);
padding is zeros multiplied like any input (a non-finite weight meeting it
gives NaN, as in the NumPy kernels); then the bias, the residual and ReLU,
in that order, as the NumPy kernels apply them.

Taken as a specialised emitter (``segment_emit.specialise``) where the first
call's output plane is small against its taps (:func:`dots_pay`) and the call
is within the general body's size rule (``conv.conv_is_small``); depthwise
layers keep their own body. The body is exact for any shapes of later calls.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from . import Arg, Body, Lines, literal, specialise
from .conv import CONV_OPS, conv_call, conv_checks, conv_is_small, unaliased

__all__ = ["DOTS_MAX_PLANE", "DOTS_MIN_TAPS", "DOTS_MIN_CHANNELS", "dots_pay"]

# measured with benchmarks/segment_conv.py --small (1 thread, float32): dot
# products / general body 0.14-0.40 on 3x3 layers of 32-64 channels at 2x2-4x4
# outputs, 0.25-0.31 on 1x1 layers of 64-256 channels at 2x2, 0.76-0.78 at
# 4x4 with 144-128 taps; 1.3-3.6 on 8x8 planes, windows of 16-48 taps or 8
# channels a group
#: output planes (OH * OW) up to which the dot products beat the general body
DOTS_MAX_PLANE = 16
#: taps a window (Cg * KH * KW) from which they do
DOTS_MIN_TAPS = 64
#: output channels a group from which they do (fewer: the general body's
#: passes are few and short, and each group's im2col serves few dot products)
DOTS_MIN_CHANNELS = 16


def dots_pay(weight_shape: Sequence[int], out_shape: Sequence[int], groups: int) -> bool:
    """Whether the first call's shapes favour the dot products: a small output
    plane, long windows and enough output channels a group."""
    if len(weight_shape) != 4 or len(out_shape) != 4 or groups < 1:
        return False
    return (math.prod(out_shape[2:]) <= DOTS_MAX_PLANE and math.prod(weight_shape[1:]) >= DOTS_MIN_TAPS
            and weight_shape[0] // groups >= DOTS_MIN_CHANNELS)  # fmt: skip


_DOTS = '''\
@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc", "contract"})
def _conv_dots(w, o0, cols, acc, zero):
    """acc[o, p] = sum over k of w[o0 + o, k] * cols[p, k]: four channels and two
    positions a pass, so each weight loaded serves two products and each tap four."""
    O, P, K = acc.shape[0], cols.shape[0], cols.shape[1]
    o = 0
    while o + 4 <= O:
        a, b, c, d = o0 + o, o0 + o + 1, o0 + o + 2, o0 + o + 3
        p = 0
        while p + 2 <= P:
            q = p + 1
            s0 = zero
            s1 = zero
            s2 = zero
            s3 = zero
            u0 = zero
            u1 = zero
            u2 = zero
            u3 = zero
            for k in range(K):
                t = cols[p, k]
                e = cols[q, k]
                wa = w[a, k]
                wb = w[b, k]
                wc = w[c, k]
                wd = w[d, k]
                s0 += wa * t
                s1 += wb * t
                s2 += wc * t
                s3 += wd * t
                u0 += wa * e
                u1 += wb * e
                u2 += wc * e
                u3 += wd * e
            acc[o, p] = s0
            acc[o + 1, p] = s1
            acc[o + 2, p] = s2
            acc[o + 3, p] = s3
            acc[o, q] = u0
            acc[o + 1, q] = u1
            acc[o + 2, q] = u2
            acc[o + 3, q] = u3
            p += 2
        if p < P:
            s0 = zero
            s1 = zero
            s2 = zero
            s3 = zero
            for k in range(K):
                t = cols[p, k]
                s0 += w[a, k] * t
                s1 += w[b, k] * t
                s2 += w[c, k] * t
                s3 += w[d, k] * t
            acc[o, p] = s0
            acc[o + 1, p] = s1
            acc[o + 2, p] = s2
            acc[o + 3, p] = s3
        o += 4
    while o < O:
        a = o0 + o
        for p in range(P):
            s = zero
            for k in range(K):
                s += w[a, k] * cols[p, k]
            acc[o, p] = s
        o += 1
'''


def _conv(op: str, attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    c = conv_call(op, attrs, args, names)
    if c is None:
        return None
    weight, out_arg = c.weight, c.out_arg
    if weight.shape is None or out_arg.shape is None or weight.shape[1] == 1 and c.groups > 1:
        return None  # no first-call size to go by, or depthwise: their own bodies
    if not dots_pay(weight.shape, out_arg.shape, c.groups) or not conv_is_small(weight.shape, out_arg.shape):
        return None
    dtype, activation = c.dtype, c.activation
    X, B, R, out = c.X, c.B, c.R, c.out
    (s0, s1), (d0, d1), (pt, pl, _, _) = c.strides, c.dilation, c.pads
    G = c.groups
    zero = literal(0, dtype)
    lines = conv_checks(c)
    # the output is written group by group while the data and weights are still
    # read: an input sharing its bytes is read from a copy (see conv.unaliased)
    ins = [("xd", X, 4), ("wk", c.Wt, 4)] + ([("b", B, 1)] if B else []) + ([("r", R, 4)] if R else [])
    lines += unaliased(ins, out)
    lines += [
        f"Og = O // {G}",
        "K = Cg * KH * KW",
        "P = OH * OW",
        "w2 = np.ascontiguousarray(wk).reshape(O, K)",
        f"cols = np.empty((P, K), np.{dtype})",
        f"acc = np.empty((Og, P), np.{dtype})",
        "for n in range(N):",
        f"    for g in range({G}):",
        "        c0 = g * Cg",
        "        for oy in range(OH):",
        "            for ox in range(OW):",
        "                row = oy * OW + ox",
        "                k = 0",
        "                for c in range(Cg):",
        "                    for ky in range(KH):",
        f"                        iy = oy * {s0} + ky * {d0} - {pt}",
        "                        for kx in range(KW):",
        f"                            ix = ox * {s1} + kx * {d1} - {pl}",
        "                            if iy >= 0 and iy < H and ix >= 0 and ix < W:",
        "                                cols[row, k] = xd[n, c0 + c, iy, ix]",
        "                            else:",
        f"                                cols[row, k] = {zero}",
        "                            k += 1",
        f"        _conv_dots(w2, g * Og, cols, acc, {zero})",
        "        for o in range(Og):",
        "            oo = g * Og + o",
        "            bo = b[oo]" if B else "",
        "            for oy in range(OH):",
        "                for ox in range(OW):",
        "                    v = acc[o, oy * OW + ox]",
        "                    v = v + bo" if B else "",
        "                    v = v + r[n, oo, oy, ox]" if R else "",
        "                    if v < 0:  # NaN stays NaN" if activation == "relu" else "",
        f"                        v = {zero}" if activation == "relu" else "",
        f"                    {out}[n, oo, oy, ox] = v",
    ]
    return Body([ln for ln in lines if ln], _DOTS)


for _op in CONV_OPS:
    specialise(_op)(lambda attrs, args, names, _op=_op: _conv(_op, attrs, args, names))
