"""Segment bodies of depthwise 2-D convolutions (NCHW data, OIHW weights, one
input channel per group), with bias, residual and ReLU as the conv ops have.

Why: the general convolution body (``conv.py``) pads the whole input by
stride phase and accumulates every output channel's taps into a whole-tensor
accumulator, both fresh zeroed arrays of the tensor's size, then crops in a
last pass: 2-3x the time of a loop that keeps one channel's padded plane and
accumulator in L1 (ShuffleNet's 272x14x14 3x3 layer 97 against 42 us, one
thread). Here each (image, output channel) copies its input channel into one
padded plane per stride phase (zero borders written once a call; padded cell
(y, x) in phase (y % s0, x % s1) at (y // s0) * Wq + x // s1), so tap (ky, kx)
reads one phase at a fixed offset for every output and output (oy, ox) sits at
oy * Wq + ox: all taps of a plane are one contiguous loop (3x3 kernels unrolled
in it, others tap by tap over the L1-resident accumulator), and the epilogue
crops, adds the bias and the residual and applies ReLU while the plane is in
cache.

Taken as a specialised emitter (``segment_emit.specialise``) for calls whose
first weight has one input channel and whose groups are more than one, up to
the general body's size rule (``conv.conv_is_small``: above it the NumPy
kernel's direct loop runs, over threads where there are); the general body
covers the rest. The body stays exact for any shapes of later
calls: a weight with more input channels a group sums them too.

What the NumPy kernels compute, and so the bodies: the sum in the arrays'
dtype, then the bias, the residual, ReLU (NaN stays NaN); padding is zeros
multiplied like any input (a non-finite weight meeting it gives NaN). Results
agree to rounding (another summation order).
"""

from __future__ import annotations

from typing import Any, Sequence

from . import Arg, Lines, literal, specialise
from .conv import CONV_OPS, conv_call, conv_checks, conv_is_small, unaliased

__all__: list[str] = []


def _conv(op: str, attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    c = conv_call(op, attrs, args, names)
    if c is None or c.groups < 2:
        return None
    weight, out_arg = c.weight, c.out_arg
    if weight.shape is None or weight.shape[1] != 1:
        return None  # not depthwise at the first call: the general body
    if out_arg.shape is not None and not conv_is_small(weight.shape, out_arg.shape):
        return None  # the NumPy kernel's direct loop, parallel over planes where threads are free
    dtype, has_bias, has_residual, activation = c.dtype, c.has_bias, c.has_residual, c.activation
    X, Wt, B, R, out = c.X, c.Wt, c.B, c.R, c.out
    (s0, s1), (d0, d1), (pt, pl, pb, pr) = c.strides, c.dilation, c.pads
    G = c.groups
    zero = literal(0, dtype)
    lines = conv_checks(c)
    if has_bias:
        lines.append(f"b = {B}.copy()")
    lines += unaliased([("x", X, 4), ("wt", Wt, 4)] + ([("r", R, 4)] if has_residual else []), out)
    # one padded plane per stride phase, borders zero for the whole call (every
    # channel writes the same interior cells); phase (a, b) at (a * s1 + b) * Pq
    lines += [
        f"Hq, Wq = (H + {pt + pb + s0 - 1}) // {s0}, (W + {pl + pr + s1 - 1}) // {s1}",
        "Pq = Hq * Wq",
        f"xq = np.zeros({s0 * s1} * Pq, np.{dtype})",
        "L = (OH - 1) * Wq + OW",
        f"acc = np.empty(L, np.{dtype})",
        "Og = O // " + str(G),
        "t3 = KH == 3 and KW == 3",
        "for n in range(N):",
        "    for o in range(O):",
        "        if Cg == 0:",
        "            for p in range(L):",
        f"                acc[p] = {zero}",
        "        for ci in range(Cg):",
        "            c = (o // Og) * Cg + ci",
        "            for iy in range(H):",
        f"                y = iy + {pt}",
        f"                prow = xq[((y % {s0}) * {s1}) * Pq + (y // {s0}) * Wq:]",
        "                src = x[n, c, iy]",
    ]
    if s1 == 1:
        lines += [f"                pr_ = prow[{pl}:]", "                for ix in range(W):", "                    pr_[ix] = src[ix]"]
    else:  # item by item: a strided slice loop of a few items cost 4x more (272x14x14 3x3/2)
        lines += [
            "                for ix in range(W):",
            f"                    xx = ix + {pl}",
            f"                    prow[(xx % {s1}) * Pq + xx // {s1}] = src[ix]",
        ]

    def tap(ky: str, kx: str) -> str:
        """The phase slice tap (ky, kx) reads (source text)."""
        ty, tx = f"({ky}) * {d0}", f"({kx}) * {d1}"
        return f"xq[(({ty}) % {s0} * {s1} + ({tx}) % {s1}) * Pq + (({ty}) // {s0}) * Wq + ({tx}) // {s1}:]"

    # all nine taps of a 3x3 kernel in one pass; other kernels tap by tap
    lines += ["            if t3:"]
    lines += [f"                w{ky}{kx} = wt[o, ci, {ky}, {kx}]" for ky in range(3) for kx in range(3)]
    lines += [f"                p{ky}{kx} = {tap(str(ky), str(kx))}" for ky in range(3) for kx in range(3)]
    terms = " + ".join(f"w{ky}{kx} * p{ky}{kx}[p]" for ky in range(3) for kx in range(3))
    lines += [
        "                if ci == 0:",
        "                    for p in range(L):",
        f"                        acc[p] = {terms}",
        "                else:",
        "                    for p in range(L):",
        f"                        acc[p] += {terms}",
        "            else:",
        "                if ci == 0:",
        "                    for p in range(L):",
        f"                        acc[p] = {zero}",
        "                for ky in range(KH):",
        "                    for kx in range(KW):",
        "                        wv = wt[o, ci, ky, kx]",
        f"                        ps = {tap('ky', 'kx')}",
        "                        for p in range(L):",
        "                            acc[p] += wv * ps[p]",
        "        bo = b[o]" if has_bias else "",
        "        for oy in range(OH):",
        "            ar = acc[oy * Wq:]",
        f"            orow = {out}[n, o, oy]",
        "            rrow = r[n, o, oy]" if has_residual else "",
        "            for ox in range(OW):",
        "                v = ar[ox]",
        "                v = v + bo" if has_bias else "",
        "                v = v + rrow[ox]" if has_residual else "",
        "                if v < 0:  # NaN stays NaN" if activation == "relu" else "",
        f"                    v = {zero}" if activation == "relu" else "",
        "                orow[ox] = v",
    ]
    return [ln for ln in lines if ln]


for _op in CONV_OPS:
    specialise(_op)(lambda attrs, args, names, _op=_op: _conv(_op, attrs, args, names))
