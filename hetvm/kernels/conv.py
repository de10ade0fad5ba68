"""2-D convolution, NCHW data and OIHW weights, as few large matrix products.

Why this shape: NumPy only, so speed comes from BLAS and from copying memory
in long contiguous runs. Four paths, picked per call from the shapes:

* **pointwise** (1x1 kernel): the input *is* the column matrix, so one
  (batched) product ``W (G, Og, Cg) @ x (N, G, Cg, H*W)`` writes the output in
  place -- no im2col at all.
* **depthwise-like** (one input channel per group): a direct Numba loop with
  the bias (and, through ``convolve_direct``, the ReLU) fused where Numba is
  available (``depthwise_direct.py``); else tap columns and one batched matmul
  per block of channels (``depthwise.py``).
* **few output channels** (3x3 and larger, stride 1, one group, at most
  ``_KN2ROW_MAX_OUT`` output channels and at most half as many as inputs --
  DenseNet's 128 -> 32): "kn2row". One product ``W' (KH*KW*O, C) @ x_pad
  (C, Hp*Wp)`` computes every tap's contribution at every padded position,
  then KH*KW shifted views of it are summed into the output. It copies
  KH*KW*O values per position where im2col copies KH*KW*C, and its product has
  KH*KW*O rows where im2col's has O (BLAS is slow below ~64 rows): about 1.4x
  faster on DenseNet's layers, slower once O is large (measured on OpenBLAS, 1 thread).
* **general**: im2col per image, in blocks of output rows (at most
  ``_COLS_BYTES`` of columns), laid out (G, Cg, KH, KW, rows, OW) so the copy's
  inner loop runs along the image row and one batched product over the groups
  writes straight into the output's NCHW rows. A bounded block keeps the columns
  in cache and memory bounded (VGG's first layer would need 115 MB of columns
  per image unblocked) at no BLAS cost as long as a block keeps
  ``_MIN_COLS`` columns.

Accumulation is in ``result_type(data, weight)`` (float32 stays float32).
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple

import numpy as np

from ..runtime.product_pool import matmul_into
from . import codegen_cuda_window, depthwise_direct
from .common import as_ints, store
from .depthwise import depthwise, depthwise_same
from .registry import register_kernel
from .scratch import scratch
from .views import flat_with_margins, padded, strided, zero_wrapped

# bytes of im2col columns built at once, and the least columns per block (BLAS
# efficiency drops below a few hundred columns); measured on OpenBLAS, 1 thread.
# 1 MiB keeps a block in L2 from its copy to its product: with the caches cold,
# as inside a model, the 7x7 stem convolution of ResNet and Inception v2 takes
# 2.2 ms with 4 MiB blocks and 1.8 with 1 MiB. At least 1024 columns, though:
# VGG's 64-channel 224x224 layer (2 rows = 448 columns a block at 1 MiB) takes
# 25.4 ms with 256 and 23.5 with 1024 (its block then grows to 2.6 MiB)
_COLS_BYTES = 1 << 20
_MIN_COLS = 1024
# kn2row pays off while im2col's product has few rows (output channels)
_KN2ROW_MAX_OUT = 64
def _check_layouts(attrs: dict) -> None:
    for key, want in (("data_layout", "NCHW"), ("kernel_layout", "OIHW")):
        if attrs.get(key, want) != want:
            raise ValueError(f"nn.conv2d kernel supports {key}={want}, got {attrs[key]}")
    if attrs.get("out_layout") not in (None, "NCHW"):
        raise ValueError(f"nn.conv2d kernel supports out_layout=NCHW, got {attrs['out_layout']}")


def _check_fits(shape, out_shape, kernel, strides, dilation, pads) -> None:
    """The last window must lie inside the padded input: the strided views below
    are built with ``as_strided``, which does not check bounds."""
    pt, pl, pb, pr = pads
    for axis, size, lo, hi, o, k, s, d in (("height", shape[2], pt, pb, out_shape[2], kernel[0],
                                            strides[0], dilation[0]),
                                           ("width", shape[3], pl, pr, out_shape[3], kernel[1],
                                            strides[1], dilation[1])):  # fmt: skip
        if o < 1 or (o - 1) * s + (k - 1) * d + 1 > size + lo + hi:
            raise ValueError(f"output {axis} {o} does not fit input {size} with padding ({lo}, {hi}), "
                             f"kernel {k}, stride {s}, dilation {d}")


def _destination(xp: Any, out: Any, dtype: Any) -> Any:
    """``out`` itself when products can be written into it (accumulator dtype and
    C-contiguous, so every reshape below is a view), else a scratch array."""
    if out.dtype == dtype and out.flags.c_contiguous:
        return out
    return xp.empty(out.shape, dtype=dtype)


def _pointwise(xp, x, weight, dst, groups, strides) -> None:
    n, c = x.shape[:2]
    o = weight.shape[0]
    _, _, oh, ow = dst.shape
    if strides != (1, 1):
        x = x[:, :, : (oh - 1) * strides[0] + 1 : strides[0], : (ow - 1) * strides[1] + 1 : strides[1]]
    x = xp.ascontiguousarray(x[:, :, :oh, :ow])
    og, cg = o // groups, c // groups
    w = weight.reshape(groups, og, cg)
    matmul_into(xp, w, x.reshape(n, groups, cg, oh * ow), dst.reshape(n, groups, og, oh * ow))


def _kn2row(xp, x, weight, dst, dilation, pads) -> None:
    """Stride 1, one group: all taps in one product over the padded image, then
    the taps' shifted windows of that product summed into ``dst``."""
    n, c, h, w = x.shape
    o, _, kh, kw = weight.shape
    _, _, oh, ow = dst.shape
    pt, pl, pb, pr = pads
    hp, wp = h + pt + pb, w + pl + pr
    taps = xp.ascontiguousarray(weight.transpose(2, 3, 0, 1)).reshape(kh * kw * o, c)
    xpad = scratch(xp, "pad", (c, hp, wp), x.dtype)
    xpad[...] = 0  # borders; the interior is overwritten per image
    prod = scratch(xp, "prod", (kh * kw * o, hp * wp), dst.dtype)
    per_tap = prod.reshape(kh, kw, o, hp, wp)
    for b in range(n):
        xpad[:, pt : pt + h, pl : pl + w] = x[b]
        matmul_into(xp, taps, xpad.reshape(c, hp * wp), prod)
        out = dst[b]
        for i in range(kh):
            for j in range(kw):
                h0, w0 = i * dilation[0], j * dilation[1]
                window = per_tap[i, j, :, h0 : h0 + oh, w0 : w0 + ow]
                if i == 0 and j == 0:
                    out[...] = window
                else:
                    xp.add(out, window, out=out)


def _im2col(xp, x, weight, dst, groups, strides, dilation, pads) -> None:
    """im2col in blocks of output rows, for any geometry. With padding, the
    windows are read from each image flattened between zero margins
    (``flat_with_margins``, as in ``_im2col_same``) at the padded strides of the
    unpadded width: rows above and below the image fall in the margins, and a
    window column that left the image sideways read the neighbouring row
    instead, so those column stripes are cleared. The flat copy runs along whole
    images where a padded copy runs along image rows (128x56x56: 33 against 54
    us; 3x3/2 layers 1.5-2.6% faster a call). Without padding the image is read
    as it is; large strided kernels copy from stride phases of a padded copy
    (see ``_phases``)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = weight.shape
    _, _, oh, ow = dst.shape
    og = o // groups
    k = cg * kh * kw
    w = weight.reshape(groups, og, k)
    item = x.dtype.itemsize
    rows = max(-(-_MIN_COLS // ow), _COLS_BYTES // max(1, groups * k * ow * item))
    rows = min(oh, rows)
    buf = scratch(xp, "cols", (groups * k * rows * ow,), x.dtype)
    # phases pay when many taps share each phase (7x7/2: 49 taps, 4 phases); a
    # 3x3/2 layer lost 5-15% to the extra pass over its input
    by_phase = strides != (1, 1) and dilation == (1, 1) and kh * kw >= 4 * strides[0] * strides[1]
    flat = not by_phase and any(pads)
    wrapped = []  # (tap column, first and end output column inside the image)
    if not flat:
        x = xp.ascontiguousarray(padded(xp, x, pads))
    else:  # margins cover the last window and one item more (see _gather)
        reach = strides[0] * (oh - 1) + -(-(strides[1] * (ow - 1) + 2) // wd)
        for j in range(kw):
            dx = j * dilation[1] - pads[1]  # input column = output column * stride + dx
            lo, hi = max(0, -(dx // strides[1])), max(0, -((dx - wd) // strides[1]))
            if lo > 0 or hi < ow:
                wrapped.append((j, lo, hi))
    for b in range(n):
        image = flat_with_margins(xp, x[b], (kh, kw), dilation, pads, reach) if flat else x[b]
        phases = _phases(xp, image, strides) if by_phase else None
        sc, sh, sw = (image.strides[0], wd * item, item) if flat else image.strides
        st = (cg * sc, sc, sh * dilation[0], sw * dilation[1], sh * strides[0], sw * strides[1])
        for r0 in range(0, oh, rows):
            r = min(rows, oh - r0)
            cols = buf[: groups * k * r * ow].reshape(groups, cg, kh, kw, r, ow)
            if by_phase:
                _copy_from_phases(xp, phases, cols, r0)
            else:
                _gather(xp, image, cols, st, r0 * strides[0] * sh, strides[1])
                for j, lo, hi in wrapped:
                    cols[:, :, :, j, :, :lo] = 0
                    cols[:, :, :, j, :, hi:] = 0
            out_rows = dst[b, :, r0 : r0 + r].reshape(groups, og, r * ow)  # a view
            matmul_into(xp, w, cols.reshape(groups, k, r * ow), out_rows)


# unsigned integers by size, for moving items as raw bits
_UINTS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
# the least output width copied by item pairs (see _gather)
_PAIRED_MIN_ROW = 64


def _gather(xp, image, cols, st, offset: int, step: int) -> None:
    """``cols[...] = strided(image, cols.shape, st, offset)``, for windows whose
    last axis steps ``step`` items. At stride 2 a window row is every other
    item of the image row; NumPy copies such short strided rows slowly, so
    each tap column's rows are read as contiguous runs of item pairs (one
    integer twice the item's size) and narrowed to their first item (the low
    half, little-endian) by a truncating cast. Only on long rows: 1 thread,
    SqueezeNet's 3x224x224 stem (rows of 111) 88 -> 46 us of copying, its
    convolution 430 -> 395 us hot and 487 -> 463 with the caches flushed
    first (as in a model); 128x56x56 3x3/2 (rows of 28) gained 4% hot but lost
    8% flushed (1504 -> 1625 us)."""
    item = image.itemsize
    wide = _UINTS.get(step * item)
    if (xp is not np or step == 1 or wide is None or item not in _UINTS or sys.byteorder != "little"
            or not image.flags.c_contiguous or cols.shape[-1] < _PAIRED_MIN_ROW):  # fmt: skip
        cols[...] = strided(xp, image, cols.shape, st, offset)
        return
    groups, cg, kh, kw, r, ow = cols.shape
    shape, wst = (groups, cg, kh, r, ow), (st[0], st[1], st[2], st[4], st[5])
    extent = sum((d - 1) * s for d, s in zip(shape, wst)) + step * item  # bytes a pair view spans
    flat = image.reshape(-1)
    narrow = cols.view(_UINTS[item])
    for j in range(kw):
        start = offset + j * st[3]
        if start + extent <= flat.nbytes:
            pairs = np.ndarray(shape, wide, flat, start, wst)
            np.copyto(narrow[:, :, :, j], pairs, casting="unsafe")
        else:  # the last pair would end past the image
            cols[:, :, :, j] = strided(xp, image, shape, wst, start)


def _phases(xp, image, strides) -> Any:
    """The padded ``image`` (C, Hp, Wp) split by stride phase: element (a, b, c, y, x)
    is ``image[c, y*s0 + a, x*s1 + b]`` (zeros past the edge). At stride s, tap (i, j)
    reads phase (i % s0, j % s1) at offset (i // s0, j // s1) with stride 1, so
    the columns are copied along contiguous rows instead of gathered every s-th
    element: ResNet's and Inception v2's 7x7/2 stem 462 -> 210 us of copying."""
    s0, s1 = strides
    c, hp, wp = image.shape
    hq, wq = -(-hp // s0), -(-wp // s1)
    out = scratch(xp, "phases", (s0, s1, c, hq, wq), image.dtype)
    for a in range(s0):
        for b in range(s1):
            part = image[:, a::s0, b::s1]
            out[a, b, :, : part.shape[1], : part.shape[2]] = part
            out[a, b, :, part.shape[1] :] = 0
            out[a, b, :, :, part.shape[2] :] = 0
    return out


def _copy_from_phases(xp, phases, cols, r0: int) -> None:
    """``cols`` (G, Cg, KH, KW, r, OW) for output rows from ``r0``: the taps of each
    phase pair in one strided copy (their offsets in the phase are consecutive)."""
    s0, s1 = phases.shape[:2]
    groups, cg, kh, kw, r, ow = cols.shape
    for a in range(min(s0, kh)):
        for b in range(min(s1, kw)):
            base = phases[a, b]
            sc, sh, sw = base.strides
            ni, nj = len(range(a, kh, s0)), len(range(b, kw, s1))
            cols[:, :, a::s0, b::s1] = strided(xp, base, (groups, cg, ni, nj, r, ow),
                                               (cg * sc, sc, sh, sw, sh, sw), r0 * sh)  # fmt: skip


def _im2col_same(xp, x, weight, dst, groups, dilation, pads) -> None:
    """im2col at stride 1 when the output is as wide as the input ("same"
    padding: most 3x3 layers), in the "same-width" layout of ``views.py``: per
    image and block of output rows, all taps' columns are one strided copy of
    contiguous runs, and the product writes the output rows directly. The
    window copy of ``_im2col`` runs along output rows (28 elements on a 28x28
    map) after a padded copy; this one along whole blocks: on Inception's
    64-channel 28x28 layer 491 -> ~440 us a call."""
    n, c, h, w = x.shape
    o, cg, kh, kw = weight.shape
    oh = dst.shape[2]
    og, k = o // groups, cg * kh * kw
    wmat = weight.reshape(groups, og, k)
    item = x.dtype.itemsize
    rows = min(oh, max(-(-_MIN_COLS // w), _COLS_BYTES // max(1, groups * k * w * item)))
    buf = scratch(xp, "cols", (groups * k * rows * w,), x.dtype)
    for b in range(n):
        flat = flat_with_margins(xp, x[b], (kh, kw), dilation, pads, oh)
        sc = flat.strides[0]
        for r0 in range(0, oh, rows):
            length = min(rows, oh - r0) * w
            runs = strided(xp, flat, (c, kh, kw, length), (sc, dilation[0] * w * item, dilation[1] * item, item),
                           r0 * w * item)  # fmt: skip
            cols = buf[: c * kh * kw * length].reshape(c, kh, kw, length)
            cols[...] = runs
            zero_wrapped(cols, kw, dilation[1], pads[1], w)
            out_rows = dst[b, :, r0 : r0 + length // w].reshape(groups, og, length)  # a view
            matmul_into(xp, wmat, cols.reshape(groups, k, length), out_rows)


class Geometry(NamedTuple):
    """nn.conv2d's attributes, parsed once per bound instruction."""

    strides: tuple[int, int]
    dilation: tuple[int, int]
    pads: tuple[int, int, int, int]
    groups: int


def geometry(attrs: dict) -> Geometry:
    _check_layouts(attrs)
    return Geometry(as_ints(attrs.get("strides", (1, 1))), as_ints(attrs.get("dilation", (1, 1))),
                    as_ints(attrs.get("padding", (0, 0, 0, 0))), int(attrs.get("groups", 1)))  # fmt: skip


def convolve(xp: Any, geo: Geometry, data: Any, weight: Any, out: Any, bias: Any = None) -> bool:
    """Writes the convolution into ``out``; returns whether it also added the
    per-channel ``bias`` (a path that copies its result into ``out`` anyway
    adds it in that copy; the caller adds it otherwise)."""
    strides, dilation, pads, groups = geo
    _, cg, kh, kw = weight.shape
    _check_fits(data.shape, out.shape, (kh, kw), strides, dilation, pads)
    acc = xp.result_type(data.dtype, weight.dtype)
    dst = _destination(xp, out, acc)
    x = data if data.dtype == acc else data.astype(acc)
    w = weight if weight.dtype == acc else weight.astype(acc)
    added = False
    if kh == 1 and kw == 1 and not any(pads):
        _pointwise(xp, x, w, dst, groups, strides)
    elif cg == 1 and codegen_cuda_window.depthwise(xp, x, w, dst, geo, bias if dst is out else None):
        added = bias is not None and dst is out
    elif cg == 1 and depthwise_direct.applies(xp, x, w, dst, groups, bias if dst is out else None):
        added = bias is not None and dst is out
        depthwise_direct.run(x, w, dst, strides, dilation, pads, bias if added else None)
    elif cg == 1 and groups > 1 and strides == (1, 1) and out.shape[3] == data.shape[3]:
        added = depthwise_same(xp, x, w, dst, groups, dilation, pads, bias if dst is out else None)
    elif cg == 1 and groups > 1:
        added = depthwise(xp, x, w, dst, groups, strides, dilation, pads, bias if dst is out else None)
    elif groups == 1 and strides == (1, 1) and w.shape[0] <= min(_KN2ROW_MAX_OUT, cg // 2):
        _kn2row(xp, x, w, dst, dilation, pads)
    elif strides == (1, 1) and out.shape[3] == data.shape[3]:
        _im2col_same(xp, x, w, dst, groups, dilation, pads)
    else:
        _im2col(xp, x, w, dst, groups, strides, dilation, pads)
    if dst is not out:
        store(out, dst.astype(out.dtype, copy=False))
    return added


def convolve_direct(xp: Any, geo: Geometry, data: Any, weight: Any, out: Any, bias: Any, relu: bool) -> bool:
    """``out = act(conv(data, weight) + bias)`` in one direct kernel where one
    covers the call (depthwise: see ``depthwise_direct``); False, with nothing
    written, where none does."""
    _, cg, kh, kw = weight.shape
    if cg != 1:
        return False
    if codegen_cuda_window.applies(xp):
        _check_fits(data.shape, out.shape, (kh, kw), geo.strides, geo.dilation, geo.pads)
        return codegen_cuda_window.depthwise(xp, data, weight, out, geo, bias, relu)
    if not depthwise_direct.applies(xp, data, weight, out, geo.groups, bias):
        return False
    _check_fits(data.shape, out.shape, (kh, kw), geo.strides, geo.dilation, geo.pads)
    depthwise_direct.run(data, weight, out, geo.strides, geo.dilation, geo.pads, bias, relu)
    return True


def _specialize(xp: Any, attrs: dict) -> Any:
    geo = geometry(attrs)

    def run(data: Any, weight: Any, out: Any) -> None:
        convolve(xp, geo, data, weight, out)

    return run


@register_kernel("nn.conv2d", specialize=_specialize)
def conv2d(xp: Any, attrs: dict, data: Any, weight: Any, out: Any) -> None:
    """Cross-correlation with strides, (top, left, bottom, right) padding, dilation
    and groups; the output shape is the buffer's (the op inferred it)."""
    convolve(xp, geometry(attrs), data, weight, out)
