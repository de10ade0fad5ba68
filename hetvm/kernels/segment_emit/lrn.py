"""Segment body of ``nn.lrn`` (local response normalisation across channels).

Why: GoogLeNet's two LRNs (64 and 192 channels of 56x56) cost 2.3 ms of its
28 in the NumPy kernel's passes (a squared copy, a shifted add per window
position, then scale, shift, power and product, each over the whole tensor),
and split the segment. Here one loop per (outer index, channel) plane reads
the window's channel planes and writes the result: no scratch, one pass.

Arithmetic, as the NumPy kernel (``hetvm/kernels/nn.py``): the squares and
their window sum in the input's dtype, in the kernel's order (the channel
itself, then the ones below it nearest first, then the ones above), times
``alpha / size`` and plus ``bias`` in that dtype. ``x * d ** -beta`` is
written for the betas of the models that use LRN (0.75: AlexNet, GoogLeNet,
ZFNet; 0.5 and 1) as ``x`` divided by square roots of ``d`` in the input's
dtype, which vectorise where ``pow`` does not: a few roundings where the
kernel has two, so results agree within a few ulps (float64 square roots
were 2.7x slower). NaN, inf, zero and negative ``d`` give what ``power``
gives. Other betas keep the NumPy kernel.
Measured one thread, CPU time, beta 0.75, size 5, the body / the NumPy
kernel: (1, 64, 56, 56) 190 / 370 us, (1, 192, 56, 56) 570 / 1845. An input that shares
bytes with the output is read from a copy (the kernel, which reads ``x`` after
writing ``out``, needs them apart).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from . import FLOATS, Arg, Arr, Body, Lines, check_same_shape, literal, register
from .conv import unaliased
from .norm import FLAT_VIEW

__all__: list[str] = []

#: beta -> ``v * d ** -beta`` as source, in the input's dtype
_POWERS = {0.75: "v / (np.sqrt(d) * np.sqrt(np.sqrt(d)))", 0.5: "v / np.sqrt(d)", 1.0: "v / d"}


@register("nn.lrn")
def _lrn(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if len(args) != 2 or not all(isinstance(a, Arr) for a in args):
        return None
    x, out = args
    X, O = names
    dt = x.dtype  # type: ignore[union-attr]
    nd = x.ndim  # type: ignore[union-attr]
    if dt not in FLOATS or out.dtype != dt or nd < 2 or out.ndim != nd:  # type: ignore[union-attr]
        return None
    size, axis = attrs.get("size"), attrs.get("axis", 1)
    alpha, beta, bias = (attrs.get(k) for k in ("alpha", "beta", "bias"))
    if any(isinstance(v, bool) or not isinstance(v, int) for v in (size, axis)) or size < 1:  # type: ignore[operator]
        return None
    if not all(isinstance(v, float) and math.isfinite(v) for v in (alpha, beta, bias)):
        return None
    power = _POWERS.get(beta)  # type: ignore[arg-type]
    if power is None or not -nd <= axis < nd:  # type: ignore[operator]
        return None
    axis %= nd  # type: ignore[operator]
    lo = (size - 1) // 2  # type: ignore[operator]
    hi = size - 1 - lo  # type: ignore[operator]
    lines = check_same_shape(X, O, nd, "nn.lrn") + unaliased([("xs", X, nd)], O, nd)
    outer = " * ".join(f"{X}.shape[{d}]" for d in range(axis)) or "1"
    inner = " * ".join(f"{X}.shape[{d}]" for d in range(axis + 1, nd)) or "1"
    lines += [
        f"C = {X}.shape[{axis}]", f"outer = {outer}", f"inner = {inner}",
        "xf = np.ascontiguousarray(xs).ravel()",  # a view where xs is typed C-contiguous
        f"oko, of = _flat({O})",
        "if not oko:",
        f"    of = np.empty({X}.size, np.{dt})",
        f"scale = {literal(alpha / size, dt)}",  # type: ignore[operator]
        f"shift = {literal(bias, dt)}",
        "for n in range(outer):",
        "    for c in range(C):",
        "        base = (n * C + c) * inner",
        "        xc = xf[base:base + inner]",
        "        oc = of[base:base + inner]",
        "        for p in range(inner):",
        "            v = xc[p]",
        "            oc[p] = v * v",
    ]  # fmt: skip
    for k in range(1, lo + 1):
        lines += [f"        if c >= {k}:", f"            xk = xf[base - {k} * inner:base - {k - 1} * inner]",
                  "            for p in range(inner):", "                v = xk[p]", "                oc[p] += v * v"]
    for k in range(1, hi + 1):
        lines += [f"        if c + {k} < C:", f"            xk = xf[base + {k} * inner:base + {k + 1} * inner]",
                  "            for p in range(inner):", "                v = xk[p]", "                oc[p] += v * v"]
    lines += [
        "        for p in range(inner):",
        "            d = oc[p] * scale + shift",
        "            v = xc[p]",
        f"            oc[p] = {power}",
        "if not oko:",
        "    j = 0",
    ]
    pad = "    "
    for d in range(nd):
        lines.append(f"{pad}for i{d} in range({O}.shape[{d}]):")
        pad += "    "
    lines += [f"{pad}{O}[{', '.join(f'i{d}' for d in range(nd))}] = of[j]", f"{pad}j += 1"]
    return Body(lines, FLAT_VIEW)
