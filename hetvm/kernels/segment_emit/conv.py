"""Segment bodies of 2-D convolution and pooling (NCHW data, OIHW weights):
direct loop nests, for the small CNNs of the exported corpus (a few thousand
to a few hundred thousand multiply-adds a layer, where the NumPy kernels'
im2col copies, BLAS call and epilogue passes cost more than the arithmetic).
A convolution larger than the loop pays for at the first call keeps its NumPy
kernel (:func:`conv_is_small`).

Covered: ``nn.conv2d``, ``nn.conv2d_bias_act`` and ``nn.conv2d_bias_add_act``
(activation none or relu) with any strides, padding, dilation and groups,
depthwise included; ``nn.max_pool2d`` and ``nn.avg_pool2d`` (padding,
dilation, ceil_mode's overhang, count_include_pad). Every array float32, or
every array float64; other dtypes, layouts and activations keep the NumPy
kernel (which raises where it does not support them).

What the NumPy kernels compute, and so the bodies: the convolution sums in the
arrays' dtype, then the bias is added, then the residual, then ReLU (NaN stays
NaN). Padding is zeros that are multiplied like any input (im2col copies them
into its columns): a non-finite weight meeting the padding makes the output
NaN; the loops run over zero-padded copies of the images, so theirs too. The
sums run in another order than BLAS's,
so results agree to rounding. An output that shares memory with an input gets
what the NumPy kernel writes (the memory planner never plans that; a caller may).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from . import FLOATS, Arg, Arr, Lines, literal, register

__all__ = ["CONV_LOOP_MAX", "CONV_POINTWISE_LOOP_MAX", "CONV_DEPTHWISE_LOOP_MAX", "STEM_IN", "STEM_OUT", "CONV_OPS", "ConvCall",
           "conv_call", "conv_checks", "conv_multiply_adds", "conv_is_small", "geometry", "ints", "unaliased"]

# multiply-adds up to which the direct loop beats the NumPy kernel, measured with
# benchmarks/segment_conv.py (1 thread, float32, the corpus's layers and the same
# scaled 2x and 4x): BLAS wins earliest on 1x1 kernels (no im2col to save: the
# loop took 0.5-0.8x its time up to 65536, 1.3x at 131072), depthwise layers not
# at all up to millions (0.7-0.8x at 2.4M: the NumPy side is a direct loop too)
#: a convolution's multiply-adds above which it keeps its NumPy kernel (0.2-0.9x
#: the NumPy kernel's time up to 301056, the ResNet stem; 1.0-1.6x at 3-6e5)
CONV_LOOP_MAX = 1 << 19
#: the same for 1x1 kernels: a call alone, the loop took 0.8-1.6x the NumPy
#: kernel's time from 65536 to 262144, but inside a model the NumPy call also
#: splits the segment around it and costs the VM a kernel call: same process,
#: 2 threads, 2^16 -> 2^18 took held-out RegNet 0.297 -> 0.198 ms, PoolFormer
#: 0.368 -> 0.324, MobileViT 1.06 -> 0.95, SegFormer 0.175 -> 0.135
CONV_POINTWISE_LOOP_MAX = 1 << 18
#: the same for depthwise layers (one input channel a group)
CONV_DEPTHWISE_LOOP_MAX = 1 << 21
#: image stems (at most STEM_IN input channels a group, at most STEM_OUT output
#: channels) take the loop at any size: BLAS gets a product of K = Cg*KH*KW <=
#: 4*49 and few columns, the im2col copy is most of its time, while the loop
#: keeps every tap of a few channels in one pass. Measured (benchmarks/
#: segment_conv.py --light, 224x224 input, stride 2) loop / NumPy kernel: 3x3
#: 3->16 0.76, 3->24 (ShuffleNet) 0.81, 3->32 0.90, 4->32 0.96, 7x7 3->16 0.74,
#: 3->32 1.04; beyond, 3x3 3->48 1.08, 3->64 (SqueezeNet) 0.98-1.17, 7x7 3->64
#: (ResNet-50, DenseNet, Inception) 1.39
STEM_IN = 4
STEM_OUT = 32

#: op -> (argument count, has a bias, has a residual)
CONV_OPS = {"nn.conv2d": (3, False, False), "nn.conv2d_bias_act": (4, True, False),
            "nn.conv2d_bias_add_act": (5, True, True)}  # fmt: skip


def conv_multiply_adds(weight_shape: Sequence[int], out_shape: Sequence[int]) -> int:
    """A convolution's multiply-adds: every output element sums Cg*KH*KW products."""
    return math.prod(out_shape) * math.prod(weight_shape[1:])


def conv_is_small(weight_shape: Sequence[int], out_shape: Sequence[int]) -> bool:
    """Whether the direct loop beats the NumPy kernel, from the weight's (OIHW)
    and the output's (NCHW) shapes at the first call; where not, the emitter
    declines and the call keeps its NumPy kernel."""
    if len(weight_shape) != 4 or len(out_shape) != 4:
        return False
    macs = conv_multiply_adds(weight_shape, out_shape)
    if weight_shape[1] == 1:
        return macs <= CONV_DEPTHWISE_LOOP_MAX
    if weight_shape[2] == 1 and weight_shape[3] == 1:
        return macs <= CONV_POINTWISE_LOOP_MAX
    return macs <= CONV_LOOP_MAX or (weight_shape[1] <= STEM_IN and weight_shape[0] <= STEM_OUT)


def ints(value: Any, n: int) -> tuple[int, ...] | None:
    """``value`` as ``n`` ints, or None (the NumPy kernel then reports it)."""
    if not isinstance(value, (list, tuple)) or len(value) != n:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return None
    return tuple(int(v) for v in value)


def geometry(attrs: dict, pool: bool) -> tuple | None:
    """(window or None, strides, dilation, padding) as validated ints, or None."""
    if pool:
        if attrs.get("layout", "NCHW") != "NCHW" or attrs.get("out_layout") not in (None, "NCHW"):
            return None
    else:
        if attrs.get("data_layout", "NCHW") != "NCHW" or attrs.get("kernel_layout", "OIHW") != "OIHW":
            return None
        if attrs.get("out_layout") not in (None, "NCHW"):
            return None
    window = ints(attrs.get("pool_size", (1, 1)), 2) if pool else (0, 0)
    strides = ints(attrs.get("strides", (1, 1)), 2)
    dilation = ints(attrs.get("dilation", (1, 1)), 2)
    pads = ints(attrs.get("padding", (0, 0, 0, 0)), 4)
    if window is None or strides is None or dilation is None or pads is None:
        return None
    if min(strides + dilation) < 1 or min(pads) < 0 or (pool and min(window) < 1):
        return None
    return window if pool else None, strides, dilation, pads


def _span(name: str, ndim: int, tag: str) -> Lines:
    """Lines setting ``{tag}lo``/``{tag}hi``, the bytes an array of rank ``ndim``
    spans, and ``{tag}e``, whether it is empty."""
    lines = [f"{tag}lo = {name}.ctypes.data", f"{tag}hi = {tag}lo + {name}.itemsize", f"{tag}e = {name}.size == 0"]
    for d in range(ndim):
        lines += [f"st = {name}.strides[{d}] * ({name}.shape[{d}] - 1)",
                  "if st < 0:", f"    {tag}lo += st", "else:", f"    {tag}hi += st"]  # fmt: skip
    return lines


def unaliased(inputs: Sequence[tuple[str, str, int]], out: str, out_ndim: int = 4) -> Lines:
    """Lines binding each local name to its input, or to a copy of it where it
    shares bytes with ``out`` of rank ``out_ndim`` (the loops write ``out``
    while reading the inputs)."""
    lines = _span(out, out_ndim, "o")
    for k, (local, name, ndim) in enumerate(inputs):
        t = f"i{k}"
        lines += _span(name, ndim, t)
        lines.append(f"{local} = {name}.copy() if not ({t}e or oe) and {t}lo < ohi and olo < {t}hi else {name}")
    return lines


def fit_check(op: str, strides, dilation, pads, kh: str, kw: str) -> Lines:
    """The NumPy kernels' check that the last window lies in the padded input."""
    pt, pl, pb, pr = pads
    return [
        f"if OH < 1 or (OH - 1) * {strides[0]} + ({kh} - 1) * {dilation[0]} + 1 > H + {pt + pb}:",
        f"    raise ValueError('{op}: the output height does not fit the input, padding and kernel')",
        f"if OW < 1 or (OW - 1) * {strides[1]} + ({kw} - 1) * {dilation[1]} + 1 > W + {pl + pr}:",
        f"    raise ValueError('{op}: the output width does not fit the input, padding and kernel')",
    ]


@dataclass(frozen=True)
class ConvCall:
    """A convolution call every convolution body takes (see :func:`conv_call`)."""

    op: str
    dtype: str
    has_bias: bool
    has_residual: bool
    weight: Arr
    out_arg: Arr
    activation: str
    groups: int
    strides: tuple[int, int]
    dilation: tuple[int, int]
    pads: tuple[int, int, int, int]
    X: str
    Wt: str
    B: str | None
    R: str | None
    out: str


def conv_call(op: str, attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> ConvCall | None:
    """The call's operands and attributes where a convolution body may take it:
    arrays of one float dtype and the op's ranks, NCHW/OIHW, activation none or
    relu, whole-number groups, an output that is none of the inputs; None
    otherwise (the NumPy kernel then runs, and raises what it refuses)."""
    n_args, has_bias, has_residual = CONV_OPS[op]
    if len(args) != n_args or not all(isinstance(a, Arr) for a in args):
        return None
    dtype = args[0].dtype  # type: ignore[union-attr]
    if dtype not in FLOATS or any(a.dtype != dtype for a in args):  # type: ignore[union-attr]
        return None
    ranks = [4, 4] + ([1] if has_bias else []) + ([4] if has_residual else []) + [4]
    if [a.ndim for a in args] != ranks:  # type: ignore[union-attr]
        return None
    activation = attrs.get("activation", "none") if op != "nn.conv2d" else "none"
    if activation not in ("none", "relu"):
        return None
    geo = geometry(attrs, pool=False)
    groups = attrs.get("groups", 1)
    if geo is None or not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        return None
    _, strides, dilation, pads = geo
    out = names[-1]
    if out in names[:-1]:
        return None  # one buffer read and written: the NumPy kernel's business
    return ConvCall(op, dtype, has_bias, has_residual, args[1], args[-1], activation, int(groups),  # type: ignore[arg-type]
                    strides, dilation, pads, names[0], names[1], names[2] if has_bias else None,
                    names[3] if has_residual else None, out)  # fmt: skip


def conv_checks(c: ConvCall) -> Lines:
    """Lines binding N, C, H, W, O, Cg, KH, KW, OH, OW and raising what the
    NumPy kernel raises for shapes that do not match (groups, the window's fit,
    the bias's and residual's shapes)."""
    op, X, Wt, out, G = c.op, c.X, c.Wt, c.out, c.groups
    lines = [
        f"N, C, H, W = {X}.shape",
        f"O, Cg, KH, KW = {Wt}.shape",
        f"OH, OW = {out}.shape[2], {out}.shape[3]",
        f"if {out}.shape[0] != N or {out}.shape[1] != O or O % {G} != 0 or Cg * {G} != C:",
        f"    raise ValueError('{op}: data, weight and output shapes do not match (groups {G})')",
    ]
    lines += fit_check(op, c.strides, c.dilation, c.pads, "KH", "KW")
    if c.has_bias:
        lines += [f"if {c.B}.shape[0] != O:", f"    raise ValueError('{op}: the bias needs one value per output channel')"]
    if c.has_residual:
        R = c.R
        lines += [
            f"if {R}.shape[0] != N or {R}.shape[1] != O or {R}.shape[2] != OH or {R}.shape[3] != OW:",
            f"    raise ValueError('{op}: the residual is not the output shape')",
        ]
    return lines


def _conv(op: str, attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    c = conv_call(op, attrs, args, names)
    if c is None:
        return None
    weight, out_arg = c.weight, c.out_arg
    if weight.shape is not None and out_arg.shape is not None and not conv_is_small(weight.shape, out_arg.shape):
        return None  # the first call's size: the NumPy kernel (BLAS) is faster
    dtype, has_bias, has_residual, activation = c.dtype, c.has_bias, c.has_residual, c.activation
    strides, dilation, pads = c.strides, c.dilation, c.pads
    X, Wt, B, R, out = c.X, c.Wt, c.B, c.R, c.out
    s0, s1 = strides
    d0, d1 = dilation
    pt, pl, _, _ = pads
    zero = literal(0, dtype)
    G = c.groups
    lines = conv_checks(c)
    # the loops write the output per block of channels while still reading the
    # weights (and, unpadded, the data in place): an input that shares bytes with
    # the output (the planner never plans one, a caller may) is read from a copy,
    # so the output gets what NumPy's kernel writes
    direct = pads == (0, 0, 0, 0) and strides == (1, 1)
    ins = [("wk", Wt, 4)] + ([("xd", X, 4)] if direct else [])
    ins += ([("b", B, 1)] if has_bias else []) + ([("r", R, 4)] if has_residual else [])
    lines += unaliased(ins, out)
    pb, pr = pads[2], pads[3]
    # the images are copied into zero-padded planes per channel and stride phase
    # (padded cell (y, x) in phase (y % s0, x % s1) at (y // s0) * Wq + x // s1):
    # tap (ky, kx) then reads one phase at a fixed offset for every output,
    # output (oy, ox) sitting at oy * Wq + ox, so a tap is one contiguous
    # multiply-add loop over the plane (its columns past OW unused). The
    # padding zeros are multiplied as in the NumPy kernels (a non-finite weight
    # meeting them gives NaN there too). Unpadded with stride 1 the plane is the
    # image itself (no copy where it is C-contiguous).
    lines += [f"Og = O // {G}"]
    if direct:
        lines += ["Wq = W", "xq = np.ascontiguousarray(xd).reshape(N, C, 1, H * W)"]
    else:
        lines += [
            f"Hp, Wp = H + {pt + pb}, W + {pl + pr}",
            f"Hq, Wq = (Hp + {s0 - 1}) // {s0}, (Wp + {s1 - 1}) // {s1}",
            f"xq = np.zeros((N, C, {s0 * s1}, Hq * Wq), np.{dtype})",
            "for n in range(N):",
            "    for c in range(C):",
            "        xp = xq[n, c]",
            "        for iy in range(H):",
            f"            y = iy + {pt}",
            f"            ph = (y % {s0}) * {s1}",
            f"            ry = (y // {s0}) * Wq",
            f"            src = {X}[n, c, iy]",
        ]
        if s1 == 1:
            lines += [f"            dst = xp[ph, ry + {pl}:]", "            for ix in range(W):",
                      "                dst[ix] = src[ix]"]  # fmt: skip
        else:
            lines += ["            for ix in range(W):", f"                xx = ix + {pl}",
                      f"                xp[ph + xx % {s1}, ry + xx // {s1}] = src[ix]"]  # fmt: skip
    lines.append("L = (OH - 1) * Wq + OW")

    def epilogue(row: str, o: str, pad: str) -> Lines:
        """Output channel ``o`` from its sums ``row``: bias, residual, ReLU."""
        return [pad + ln for ln in [
            f"bo = b[{o}]" if has_bias else "",
            "for oy in range(OH):",
            f"    ar = {row}[oy * Wq:]",
            "    for ox in range(OW):",
            "        v = ar[ox]",
            "        v = v + bo" if has_bias else "",
            f"        v = v + r[n, {o}, oy, ox]" if has_residual else "",
            "        if v < 0:  # NaN stays NaN" if activation == "relu" else "",
            f"            v = {zero}" if activation == "relu" else "",
            f"        {out}[n, {o}, oy, ox] = v",
        ] if ln]  # fmt: skip

    lines += _tap_loops(G, strides, dilation, weight.shape, dtype, epilogue)  # type: ignore[union-attr]
    return [ln for ln in lines if ln]


#: taps unrolled into one loop over the plane: every (input channel, tap) of a
#: group where they are at most this many, else the window's taps where they are
#: at most UNROLL_TAPS, else one row of the window
UNROLL_ALL = 32
UNROLL_TAPS = 25
#: output channels accumulated together a pass (each input value loaded once for
#: them), fewer where their weights would pass WEIGHT_REGISTERS (108: four
#: channels of an RGB 3x3 stem's 27 taps, 0.90 -> 0.81 the NumPy kernel's time
#: on ShuffleNet's; 8 channels of 27 taps stop LLVM vectorising, 4-5x slower)
CHANNEL_BLOCK = 4
WEIGHT_REGISTERS = 108


def _tap_loops(G: int, strides, dilation, wshape: Sequence[int] | None, dtype: str,
               epilogue: Callable[[str, str, str], Lines]) -> Lines:  # fmt: skip
    """The loops summing every tap's products over the phase planes ``xq`` and
    writing each output channel through ``epilogue``.

    Why this shape: a tap's products are one contiguous multiply-add over the
    plane, but a loop per (output channel, input channel, tap) costs its set-up
    and its vector remainder on rows of a few hundred, and loads and stores the
    accumulator for one multiply each. So where the weight's shape is the first
    call's (another runs the plain loop at the end) the taps (every input
    channel's and tap's where few, else the window's or one row's) are written
    out inside one loop over the plane, for ``CHANNEL_BLOCK`` output channels at
    once: each input value is loaded once for all of them and each sum once for
    all taps, into a scratch of a few rows that stays in cache. The sums run in
    the plain loop's order (input channel, tap row, tap column), so both paths
    give the same bits."""
    s0, s1 = strides
    d0, d1 = dilation
    zero = literal(0, dtype)
    plain = [
        f"acc = np.zeros((N, O, L), np.{dtype})",
        "for n in range(N):",
        "    for o in range(O):",
        "        c0 = (o // Og) * Cg",
        "        ao = acc[n, o]",
        "        for c in range(Cg):",
        "            for ky in range(KH):",
        f"                ty = ky * {d0}",
        "                for kx in range(KW):",
        f"                    tx = kx * {d1}",
        "                    wv = wk[o, c, ky, kx]",
        # a slice: the loop's index is then provably >= 0, so no wraparound select stops vectorising
        f"                    xs = xq[n, c0 + c, (ty % {s0}) * {s1} + tx % {s1}, (ty // {s0}) * Wq + tx // {s1}:]",
        "                    for p in range(L):",
        "                        ao[p] += wv * xs[p]",
        *epilogue("ao", "o", "        "),
    ]
    if wshape is None or len(wshape) != 4 or min(wshape) < 1 or wshape[0] % G:
        return plain
    o0, cg0, kh0, kw0 = (int(v) for v in wshape)
    if cg0 * kh0 * kw0 <= UNROLL_ALL:
        level, guard = "all", f"Cg == {cg0} and KH == {kh0} and KW == {kw0}"
        taps = [(c, ky, kx) for c in range(cg0) for ky in range(kh0) for kx in range(kw0)]
    elif kh0 * kw0 <= UNROLL_TAPS:
        level, guard = "window", f"KH == {kh0} and KW == {kw0}"
        taps = [(None, ky, kx) for ky in range(kh0) for kx in range(kw0)]
    else:
        level, guard = "row", f"KW == {kw0}"
        taps = [(None, None, kx) for kx in range(kw0)]
    block = max(1, min(CHANNEL_BLOCK, o0 // G, WEIGHT_REGISTERS // len(taps)))

    def pass_of(ob: int) -> Lines:
        """One pass of ``ob`` output channels from ``o`` on."""
        body: Lines = []
        pad = ""
        if level != "all":
            body += [f"q[:{ob}] = {zero}", "for c in range(Cg):"]
            pad = "    "
        if level == "row":
            body += [pad + "for ky in range(KH):", pad + f"    ty = ky * {d0}"]
            pad += "    "
        for j, (c, ky, kx) in enumerate(taps):
            tx = kx * d1
            if ky is not None:
                ty = ky * d0
                plane, off = f"{(ty % s0) * s1 + tx % s1}", f"{ty // s0} * Wq + {tx // s1}"
            else:
                plane, off = f"(ty % {s0}) * {s1} + {tx % s1}", f"(ty // {s0}) * Wq + {tx // s1}"
            cc = "c" if c is None else f"{c}"
            body.append(pad + f"xs{j} = xq[n, c0 + {cc}, {plane}, {off}:]")
            body += [pad + f"w{k}_{j} = wk[o + {k}, {cc}, {'ky' if ky is None else ky}, {kx}]" for k in range(ob)]
        body.append(pad + "for p in range(L):")
        inner = [f"v{k} = {zero}" if level == "all" else f"v{k} = q{k}[p]" for k in range(ob)]
        for j in range(len(taps)):
            inner.append(f"t = xs{j}[p]")
            inner += [f"v{k} = v{k} + w{k}_{j} * t" for k in range(ob)]
        inner += [f"q{k}[p] = v{k}" for k in range(ob)]
        body += [pad + "    " + ln for ln in inner]
        body += ["for k in range(" + str(ob) + "):", "    qk = q[k]", "    ok = o + k"]
        body += epilogue("qk", "ok", "    ")
        return body + [f"o += {ob}"]

    lines = [
        f"if {guard}:",
        f"    q = np.empty(({block}, L), np.{dtype})",
        *(f"    q{k} = q[{k}]" for k in range(block)),
        "    for n in range(N):",
        f"        for g in range({G}):",
        "            c0 = g * Cg",
        "            o = g * Og",
        "            oe = o + Og",
    ]
    if block > 1:
        lines.append(f"            while o + {block} <= oe:")
        lines += ["                " + ln for ln in pass_of(block)]
    lines.append("            while o < oe:")
    lines += ["                " + ln for ln in pass_of(1)]
    lines.append("else:")
    lines += ["    " + ln for ln in plain]
    return lines


for _op in CONV_OPS:
    register(_op)(lambda attrs, args, names, _op=_op: _conv(_op, attrs, args, names))


def _pool(op: str, attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if len(args) != 2 or not all(isinstance(a, Arr) for a in args):
        return None
    x_arg, out_arg = args
    if x_arg.dtype not in FLOATS or out_arg.dtype != x_arg.dtype or x_arg.ndim != 4 or out_arg.ndim != 4:  # type: ignore[union-attr]
        return None
    geo = geometry(attrs, pool=True)
    if geo is None:
        return None
    (kh, kw), strides, dilation, pads = geo
    X, out = names
    if X == out:
        return None
    is_max = op == "nn.max_pool2d"
    include_pad = bool(attrs.get("count_include_pad", False))
    dtype = out_arg.dtype  # type: ignore[union-attr]
    s0, s1 = strides
    d0, d1 = dilation
    pt, pl, pb, pr = pads
    lines = [
        f"N, C, H, W = {X}.shape",
        f"OH, OW = {out}.shape[2], {out}.shape[3]",
        f"if OH < 1 or OW < 1 or {out}.shape[0] != N or {out}.shape[1] != C:",
        f"    raise ValueError('{op}: the output does not match the input')",
    ]
    lines += unaliased([("x", X, 4)], out)
    if not is_max:  # the cells that count: the input's, or also the explicit padding's
        lo_h, hi_h = (f"{-pt}", f"H + {pb}") if include_pad else ("0", "H")
        lo_w, hi_w = (f"{-pl}", f"W + {pr}") if include_pad else ("0", "W")
    lines += [
        "for n in range(N):",
        "    for c in range(C):",
        "        for oy in range(OH):",
    ]
    pad = "            "
    # taps of the output row inside the image: ky in [ky0, ky1)
    lines += [
        pad + f"base = oy * {s0} - {pt}",
        pad + f"ky0 = 0 if base >= 0 else min({kh}, (-base + {d0 - 1}) // {d0})",
        pad + f"ky1 = 0 if H - 1 - base < 0 else min({kh}, (H - 1 - base) // {d0} + 1)",
    ]
    if not is_max:
        lines += [
            pad + "ch = 0",
            pad + f"for ky in range({kh}):",
            pad + f"    iy = base + ky * {d0}",
            pad + f"    if iy >= {lo_h} and iy < {hi_h}:",
            pad + "        ch += 1",
        ]
    lines.append(pad + "for ox in range(OW):")
    pad += "    "
    lines += [
        pad + f"bx = ox * {s1} - {pl}",
        pad + f"kx0 = 0 if bx >= 0 else min({kw}, (-bx + {d1 - 1}) // {d1})",
        pad + f"kx1 = 0 if W - 1 - bx < 0 else min({kw}, (W - 1 - bx) // {d1} + 1)",
    ]
    if is_max:
        lines += [
            pad + f"m = np.{dtype}(-np.inf)",
            pad + "for ky in range(ky0, ky1):",
            pad + f"    iy = base + ky * {d0}",
            pad + "    for kx in range(kx0, kx1):",
            pad + f"        v = x[n, c, iy, bx + kx * {d1}]",
            pad + "        if v > m or v != v:",
            pad + "            m = v",
            pad + f"{out}[n, c, oy, ox] = m",
        ]
    else:
        lines += [
            pad + "cw = 0",
            pad + f"for kx in range({kw}):",
            pad + f"    ix = bx + kx * {d1}",
            pad + f"    if ix >= {lo_w} and ix < {hi_w}:",
            pad + "        cw += 1",
            pad + f"acc = np.{dtype}(0)",
            pad + "for ky in range(ky0, ky1):",
            pad + f"    iy = base + ky * {d0}",
            pad + "    for kx in range(kx0, kx1):",
            pad + f"        acc += x[n, c, iy, bx + kx * {d1}]",
            pad + f"{out}[n, c, oy, ox] = acc / np.{dtype}(max(ch * cw, 1))",
        ]
    return lines


for _op in ("nn.max_pool2d", "nn.avg_pool2d"):
    register(_op)(lambda attrs, args, names, _op=_op: _pool(_op, attrs, args, names))
