"""Segment bodies of 2-D max and average pooling, and of max pooling with a
per-channel bias and ReLU (``nn.max_pool2d_bias_act``), NCHW.

Why: the general pooling body (``conv.py``) folds each output's window tap by
tap, computing the window's bounds per output: scalar code, 5-8x ONNX
Runtime's time on ShuffleNet's and SqueezeNet's pools. Here the window is
folded separably, rows first: for each output row, the window's input rows
are folded along their whole width into one row buffer (one pass with every
row where all lie in the image, literal taps; row by row at the top and
bottom edges), then the buffer's columns are folded into the output row
(``kw`` literal taps at the stride) with the bias and ReLU or the division by
the window's count. Only the few columns whose window crosses the image's
side fold with bounds checks. Folding columns first, over every input row,
did twice the strided reads (SqueezeNet's 128x55x55 max pool 169 against 142
us); one pass over the rows instead of one a row, 10-30% less again.

What the NumPy kernels (``pool.py``) compute, and so the bodies: padding and
ceil_mode's overhang are the identity; NaN propagates through max as with
``maximum``; the average divides by the cells that count (the input's, or
with ``count_include_pad`` also the explicit padding's, never the overhang;
at least one). float32 or float64, the sums in that dtype: results agree with
the NumPy kernels' to rounding (another summation order).
"""

from __future__ import annotations

from typing import Any, Sequence

from . import FLOATS, Arg, Arr, Lines, literal, register, specialise
from .conv import geometry, unaliased

__all__: list[str] = []

#: op -> (argument count, has a bias)
_OPS = {"nn.max_pool2d": (2, False), "nn.avg_pool2d": (2, False), "nn.max_pool2d_bias_act": (3, True)}


def _fold(is_max: bool, acc: str, value: str) -> str:
    """The fold of ``value`` into ``acc``: max where NaN wins (as ``maximum``,
    written as a select LLVM vectorises: 1.3x faster than ``np.maximum`` on
    SqueezeNet's pools) or the sum. ``value`` is read twice: a name or an
    indexing, never a call."""
    if is_max:
        return f"({value} if ({value} > {acc}) | ({value} != {value}) else {acc})"
    return f"{acc} + {value}"


def _pool(op: str, attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    n_args, has_bias = _OPS[op]
    if len(args) != n_args or not all(isinstance(a, Arr) for a in args):
        return None
    dtype = args[0].dtype  # type: ignore[union-attr]
    if dtype not in FLOATS or any(a.dtype != dtype for a in args):  # type: ignore[union-attr]
        return None
    if [a.ndim for a in args] != ([4, 1, 4] if has_bias else [4, 4]):  # type: ignore[union-attr]
        return None
    geo = geometry(attrs, pool=True)
    activation = attrs.get("activation", "none") if has_bias else "none"
    if geo is None or activation not in ("none", "relu"):
        return None
    (kh, kw), (s0, s1), (d0, d1), (pt, pl, pb, pr) = geo
    X, out = names[0], names[-1]
    if out in names[:-1]:
        return None
    is_max = op != "nn.avg_pool2d"
    include_pad = bool(attrs.get("count_include_pad", False))
    ident = f"np.{dtype}(-np.inf)" if is_max else literal(0, dtype)
    lines = [
        f"N, C, H, W = {X}.shape",
        f"OH, OW = {out}.shape[2], {out}.shape[3]",
        f"if OH < 1 or OW < 1 or {out}.shape[0] != N or {out}.shape[1] != C:",
        f"    raise ValueError('{op}: the output does not match the input')",
    ]
    if has_bias:
        B = names[1]
        lines += [f"if {B}.shape[0] != C:", f"    raise ValueError('{op}: the bias needs one value per channel')",
                  f"b = {B}.copy()"]  # fmt: skip
    lines += unaliased([("x", X, 4)], out)
    lines += [
        # output columns whose window lies inside the row: [qlo, qhi)
        f"qlo = min(OW, {(pl + s1 - 1) // s1})",
        f"qe = W - {1 + (kw - 1) * d1 - pl}",
        f"qhi = max(qlo, min(OW, qe // {s1} + 1)) if qe >= 0 else qlo",
        f"vrow = np.empty(W, np.{dtype})",
    ]
    if not is_max:  # the count of a window: rows times columns that count
        lo_h, hi_h = ("0", f"H + {pt + pb}") if include_pad else (f"{pt}", f"H + {pt}")
        lo_w, hi_w = ("0", f"W + {pl + pr}") if include_pad else (f"{pl}", f"W + {pl}")
        lines += [
            "cw = np.zeros(OW, np.int64)",
            "for q in range(OW):",
            f"    for kx in range({kw}):",
            f"        cx = q * {s1} + kx * {d1}",
            f"        if cx >= {lo_w} and cx < {hi_w}:",
            "            cw[q] += 1",
        ]
    taps = [f"v = {_fold(is_max, 'v', f'xs[j * {s1} + {kx * d1}]')}" for kx in range(1, kw)]
    if is_max:
        store = (["v = v + bo"] if has_bias else []) + (
            ["if v < 0:  # NaN stays NaN", f"    v = {literal(0, dtype)}"] if activation == "relu" else [])
    else:
        store = ["v = v / {dt}(max(ch * cw[{q}], 1))"]
    lines += [
        "for n in range(N):",
        "    for c in range(C):",
        "        bo = b[c]" if has_bias else "",
        "        for oy in range(OH):",
        # the rows first, along whole input rows: the window's rows inside the
        # image in one pass where all are (the interior), else row by row
        f"            y0 = oy * {s0} - {pt}",
        f"            if y0 >= 0 and y0 + {(kh - 1) * d0} < H:",
        f"                ch = {kh}",
        *(f"                r{ky} = x[n, c, y0 + {ky * d0}]" for ky in range(kh)),
        "                for ix in range(W):",
        *(f"                    v = {'r0[ix]' if ky == 0 else _fold(is_max, 'v', f'r{ky}[ix]')}" for ky in range(kh)),
        "                    vrow[ix] = v",
        "            else:",
        "                first = True",
        "                ch = 0",
        f"                for ky in range({kh}):",
        f"                    iy = y0 + ky * {d0}",
    ]
    if not is_max:
        lines += [f"                    if iy + {pt} >= {lo_h} and iy + {pt} < {hi_h}:", "                        ch += 1"]
    lines += [
        "                    if iy < 0 or iy >= H:",
        "                        continue",
        "                    src = x[n, c, iy]",
        "                    if first:",
        "                        first = False",
        "                        for ix in range(W):",
        "                            vrow[ix] = src[ix]",
        "                    else:",
        "                        for ix in range(W):",
        f"                            vrow[ix] = {_fold(is_max, 'vrow[ix]', 'src[ix]')}",
        "                if first:  # the window's rows are all padding",
        "                    for ix in range(W):",
        f"                        vrow[ix] = {ident}",
        # then the columns, into the output row with the epilogue
        f"            orow = {out}[n, c, oy]",
        f"            xs = vrow[qlo * {s1} - {pl}:]",
        "            os_ = orow[qlo:]",
        "            for j in range(qhi - qlo):",
        f"                v = xs[j * {s1}]",
        *(f"                {t}" for t in taps),
        *(f"                {t.format(dt='np.' + dtype, q='qlo + j')}" for t in store),
        "                os_[j] = v",
    ]
    for span in ("range(qlo)", "range(qhi, OW)"):  # the columns whose window crosses a side
        lines += [
            f"            for q in {span}:",
            f"                v = {ident}",
            f"                for kx in range({kw}):",
            f"                    ix = q * {s1} + kx * {d1} - {pl}",
            "                    if ix >= 0 and ix < W:",
            f"                        v = {_fold(is_max, 'v', 'vrow[ix]')}",
            *(f"                {t.format(dt='np.' + dtype, q='q')}" for t in store),
            "                orow[q] = v",
        ]
    return [ln for ln in lines if ln]


for _op in ("nn.max_pool2d", "nn.avg_pool2d"):
    specialise(_op)(lambda attrs, args, names, _op=_op: _pool(_op, attrs, args, names))
register("nn.max_pool2d_bias_act")(lambda attrs, args, names: _pool("nn.max_pool2d_bias_act", attrs, args, names))
