"""Depthwise-like convolution (one input channel per group), for ``conv.py``.

A product per group would be a (Og x KH*KW) @ (KH*KW x P) sliver -- one BLAS
call per channel. Instead, per block of channels (``_DEPTHWISE_COLS_BYTES`` of
columns, so they stay in cache), each channel's KH*KW tap windows are copied into
columns and one batched matmul contracts them with the taps: about 2.5x faster
than one broadcast multiply-add per tap (ShuffleNet's 7x7 to 28x28 maps), which
pays a NumPy call per tap and an inner loop per channel row (measured again:
per-tap passes, ``einsum`` over the tap views and K=KW products straight from
shifted copies of the input all came out 0-70% slower). What costs is how the
columns are copied: NumPy copies long contiguous runs at ~0.06 ns an element,
strided or short-row ones at ~0.25. So three layouts:

* ``depthwise_same`` (stride 1, output as wide as the input -- every stride-1
  depthwise layer of ShuffleNet or MobileNet): taps are fixed offsets of each
  flattened image between zero margins; no padded copy, no crop;
* strided, the input split by stride phase (``_phase_plan``: every stride-2
  layer of ShuffleNet or MobileNet): each phase is flattened the same way on
  the output's own grid, so a tap reads one contiguous run of its phase. The
  input is gathered with its stride once (instead of KH*KW/(s0*s1) = 2.25
  times its size, in the tap windows) and no padded copy is made: with bias and relu,
  112x56x56 -> 28x28 330 -> 250 us a call, 136x28x28 -> 14x14 134 -> 106,
  272x14x14 -> 7x7 107 -> 87;
* ``depthwise`` otherwise: windows of the padded input; at stride 1 computed
  on the padded width and cropped, the crop's copy adding the bias.

The bias is added by the caller's pass over the output where no copy is made
anyway: a row of ones in the columns cost more (ShuffleNet's stride-1 layers
with bias and relu without it: 272x14x14 109 -> 102 us, 136x28x28 182 -> 169,
544x7x7 97 -> 89).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..runtime.product_pool import matmul_into
from .scratch import scratch
from .views import flat_with_margins, padded, strided, zero_wrapped

# depthwise columns built at once: small enough to stay in L2 between the copy
# and the product (512 KiB measured best on ShuffleNet's maps, OpenBLAS 1 thread)
_DEPTHWISE_COLS_BYTES = 512 << 10
# phases and columns built at once on the strided path: unlike the columns above,
# larger blocks measured faster (ShuffleNet's 112x56x56 -> 28x28: 340 us in 512
# KiB blocks, 264 in 2 MiB, 243 whole), so only bounded by the scratch cache
_PHASED_BYTES = 8 << 20


def depthwise(xp: Any, x: Any, weight: Any, dst: Any, groups: int, strides: tuple[int, int],
              dilation: tuple[int, int], pads: tuple[int, int, int, int], bias: Any = None) -> bool:  # fmt: skip
    """One input channel per group: per block of channels, copy each channel's
    KH*KW tap windows into columns and contract them with the channel's taps in
    one batched product ``(G, Og, K) @ (N, G, K, P)``. Strided geometries
    that split into phases go to ``_by_phase`` (no bias added). At stride 1 a tap's
    window is a contiguous run of the flattened padded image, so the columns are
    built on the padded width (one long copy per tap) and cropped at the end."""
    n, c, h, w = x.shape
    o, _, kh, kw = weight.shape
    _, _, oh, ow = dst.shape
    if strides != (1, 1):
        plan = _phase_plan((h, w), (kh, kw), (oh, ow), strides, dilation, pads)
        if plan is not None:
            _by_phase(xp, x, weight, dst, groups, strides, plan)
            return False
    og, k = o // groups, kh * kw
    pt, pl, pb, pr = pads
    wp = w + pl + pr
    item = x.dtype.itemsize
    taps = weight.reshape(groups, og, k)
    if strides == (1, 1):
        length = oh * wp  # output positions on the padded width
        last = (kh - 1) * dilation[0] * wp + (kw - 1) * dilation[1] + length
        extra = max(0, -(-(last - (h + pt + pb) * wp) // wp))  # rows so the last tap's run fits
        flat = padded(xp, x, (pt, pl, pb + extra, pr), copy=True).reshape(n, groups, -1)
        sn, sc, _ = flat.strides
        view = strided(
            xp, flat, (n, groups, kh, kw, length), strides=(sn, sc, wp * dilation[0] * item, dilation[1] * item, item))
        out = scratch(xp, "acc", (n, groups, og, length), dst.dtype)
    else:
        xpad = xp.ascontiguousarray(padded(xp, x, pads))
        sn, sc, sh, sw = xpad.strides
        length = oh * ow
        view = strided(
            xp, xpad, (n, groups, kh, kw, oh, ow),
            strides=(sn, sc, sh * dilation[0], sw * dilation[1], sh * strides[0], sw * strides[1]))
        out = dst.reshape(n, groups, og, length)  # a view: dst is C-contiguous
    block = max(1, min(groups, _DEPTHWISE_COLS_BYTES // max(1, n * k * length * item)))
    buf = scratch(xp, "cols", (n * block * k * length,), x.dtype)
    for g0 in range(0, groups, block):
        g1 = min(groups, g0 + block)
        windows_ = view[:, g0:g1]
        cols = buf[: windows_.size].reshape(windows_.shape)
        cols[...] = windows_
        matmul_into(xp, taps[g0:g1], cols.reshape(n, g1 - g0, k, length), out[:, g0:g1])
    if strides != (1, 1):
        return False
    cropped = out.reshape(n, o, oh, wp)[..., :ow]
    if bias is None:
        dst[...] = cropped
        return False
    xp.add(cropped, bias.reshape(1, o, 1, 1), out=dst)  # the crop's copy adds the bias
    return True


def depthwise_same(xp: Any, x: Any, weight: Any, dst: Any, groups: int, dilation: tuple[int, int],
                   pads: tuple[int, int, int, int], bias: Any = None) -> bool:  # fmt: skip
    """Depthwise at stride 1 with the output as wide as the input ("same"
    padding: every depthwise layer of ShuffleNet or MobileNet), in the
    "same-width" layout of ``views.py``: all taps' columns are one strided copy
    on the output's own grid, and the product writes ``dst`` directly. Returns
    False: ``bias`` is left to the caller (see the module docstring)."""
    n, c, h, w = x.shape
    o, _, kh, kw = weight.shape
    oh = dst.shape[2]
    og, k = o // groups, kh * kw
    length = oh * w
    item = x.dtype.itemsize
    flat = flat_with_margins(xp, x.reshape(n, groups, h, w), (kh, kw), dilation, pads, oh)
    sn, sc, _ = flat.strides
    view = strided(xp, flat, (n, groups, kh, kw, length), (sn, sc, dilation[0] * w * item, dilation[1] * item, item))
    taps = weight.reshape(groups, og, k)
    block = max(1, min(groups, _DEPTHWISE_COLS_BYTES // max(1, n * k * length * item)))
    buf = scratch(xp, "cols", (n * block * k * length,), x.dtype)
    out = dst.reshape(n, groups, og, length)  # a view: dst is C-contiguous
    for g0 in range(0, groups, block):
        g1 = min(groups, g0 + block)
        cols = buf[: n * (g1 - g0) * k * length].reshape(n, g1 - g0, kh, kw, length)
        cols[...] = view[:, g0:g1]
        zero_wrapped(cols, kw, dilation[1], pads[1], w)
        matmul_into(xp, taps[g0:g1], cols.reshape(n, g1 - g0, k, length), out[:, g0:g1])
    return False


# -- strided, by phase ------------------------------------------------------------


class _Plan(NamedTuple):
    """Where each tap reads on the strided path: along each axis, tap t at output
    index o reads input index ``(o + shift) * stride + phase``; ``rows``/``cols``
    hold (phase, shift) per tap. Phase images are flattened on the output's grid
    (row pitch OW) after ``top`` zero rows and ``lead`` zero elements."""

    rows: list[tuple[int, int]]
    cols: list[tuple[int, int]]
    top: int
    lead: int
    flat: int  # elements per flattened phase image


def _taps(k: int, dilation: int, stride: int, pad: int) -> list[tuple[int, int]]:
    return [divmod(t * dilation - pad, stride)[::-1] for t in range(k)]


def _phase_plan(hw: tuple[int, int], kernel: tuple[int, int], out_hw: tuple[int, int], strides: tuple[int, int],
                dilation: tuple[int, int], pads: tuple[int, int, int, int]) -> _Plan | None:  # fmt: skip
    """The strided path's plan, or None where it does not apply: the input must
    split into equal phases exactly as wide as the output (``W == OW * s1``,
    ``H % s0 == 0``: every stride-2 layer with "same" padding), so that a tap
    reads one contiguous run of its phase and a read past a phase row's end is
    exactly a read of padding (cleared in the columns, as ``zero_wrapped``)."""
    (h, w), (oh, ow) = hw, out_hw
    if h % strides[0] or w != ow * strides[1]:
        return None
    rows = _taps(kernel[0], dilation[0], strides[0], pads[0])
    cols = _taps(kernel[1], dilation[1], strides[1], pads[1])
    top = max(0, -min(shift for _, shift in rows))
    starts = [(top + dr) * ow + dq for _, dr in rows for _, dq in cols]
    lead = max(0, -min(starts))
    flat = lead + max(max(starts) + oh * ow, (top + h // strides[0]) * ow)
    return _Plan(rows, cols, top, lead, flat)


def _progressions(taps: list[tuple[int, int]]) -> list[tuple[int, slice, int, int]]:
    """The taps of each phase, as (phase, taps slice, first shift, shift step):
    they are every p-th tap, their shifts an arithmetic progression."""
    out = []
    for phase in sorted({p for p, _ in taps}):
        idx = [t for t, (p, _) in enumerate(taps) if p == phase]
        step = idx[1] - idx[0] if len(idx) > 1 else 1
        shift_step = taps[idx[1]][1] - taps[idx[0]][1] if len(idx) > 1 else 0
        out.append((phase, slice(idx[0], idx[-1] + 1, step), taps[idx[0]][1], shift_step))
    return out


def _by_phase(xp: Any, x: Any, weight: Any, dst: Any, groups: int, strides: tuple[int, int], plan: _Plan) -> None:
    """Per block of channels: the input split by stride phase into flattened
    phase images (one strided copy), each phase's taps' columns one copy of
    contiguous runs, the wrapped reads cleared, and one batched product that
    writes ``dst``."""
    n, c, h, w = x.shape
    o, _, kh, kw = weight.shape
    _, _, oh, ow = dst.shape
    (s0, s1), item = strides, x.dtype.itemsize
    og, k, length = o // groups, kh * kw, oh * ow
    hq = h // s0
    body = plan.lead + plan.top * ow  # where each phase image's first row starts
    block = max(1, min(groups, _PHASED_BYTES // max(1, n * (k * length + s0 * s1 * plan.flat) * item)))
    phases = scratch(xp, "phases", (n, block, s0, s1, plan.flat), x.dtype)
    sn, sc, sa, sb, _ = phases.strides
    buf = scratch(xp, "cols", (n * block * k * length,), x.dtype)
    taps = weight.reshape(groups, og, k)
    out = dst.reshape(n, groups, og, length)  # a view: dst is C-contiguous
    row_groups, col_groups = _progressions(plan.rows), _progressions(plan.cols)
    for g0 in range(0, groups, block):
        g1 = min(groups, g0 + block)
        m = g1 - g0
        ph = phases[:, :m]
        ph[..., :body] = 0
        ph[..., body + hq * ow :] = 0
        # element (a, b, y, x) of a channel's phases is x[y*s0 + a, x*s1 + b]
        ph[..., body : body + hq * ow].reshape(n, m, s0, s1, hq, ow)[...] = (
            x[:, g0:g1].reshape(n, m, hq, s0, ow, s1).transpose(0, 1, 3, 5, 2, 4))
        cols = buf[: n * m * k * length].reshape(n, m, kh, kw, length)
        for a, ti, dr, dr_step in row_groups:
            for b, tj, dq, dq_step in col_groups:
                start = a * sa + b * sb + (plan.lead + (plan.top + dr) * ow + dq) * item
                runs = (n, m, len(range(kh)[ti]), len(range(kw)[tj]), length)
                cols[:, :, ti, tj] = strided(xp, phases, runs, (sn, sc, dr_step * ow * item, dq_step * item, item), start)
        for j, (_, dq) in enumerate(plan.cols):  # reads past a phase row's end: padding
            for col in range(min(ow, -dq)) if dq < 0 else range(max(0, ow - dq), ow):
                cols[:, :, :, j, col::ow] = 0
        matmul_into(xp, taps[g0:g1], cols.reshape(n, m, k, length), out[:, g0:g1])
