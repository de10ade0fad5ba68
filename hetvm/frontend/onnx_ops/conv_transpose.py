"""ONNX ConvTranspose (opsets 1, 11, 22) as ``nn.conv2d_transpose`` /
``nn.conv1d_transpose`` (+ ``add`` for the bias).

Per spatial axis the result is the window ``[begin, begin + out)`` of the full
transposed convolution (length ``full = (in - 1) * stride + (k - 1) * dilation +
1``, zero outside it). With ``total = full + output_padding - out``:

* ``output_shape`` given: ``out`` is that; ``auto_pad=SAME_UPPER`` starts at
  ``total // 2``, NOTSET, VALID and SAME_LOWER at ``total - total // 2`` (the
  specification's split; explicit ``pads`` are recomputed, as it says). For
  NOTSET/VALID a longer output (``total <= 0``) starts at 0 instead and may be at
  most ``stride - 1`` longer; anything longer is rejected.
* else explicit ``pads`` give ``begin = pad_begin`` and ``out = full + output_padding
  - pad_begin - pad_end``, whatever ``auto_pad`` says;
* else SAME_UPPER/SAME_LOWER give ``out = in * stride`` split as above;
* else (NOTSET, VALID) ``begin = 0`` and ``out = full + output_padding``.

The sources disagree on some of these, so where they do: a negative ``total`` is
split with floor division, as ``onnx.reference`` does (the specification does
not say how to halve it; ONNX Runtime 1.32 starts at 0); NOTSET with an
``output_shape`` the full result does not reach starts at 0 (reference and
ONNX Runtime; the floor split would start before the result), and one shorter
than it follows the specification and ONNX Runtime (the reference rejects it),
as do explicit ``pads`` beside an ``output_shape`` (the reference keeps their
begin). The conformance cases lie where all three agree.

``output_padding`` must be smaller than ``max(stride, dilation)`` (PyTorch's rule,
and the one ONNX Runtime states; the reference and ONNX Runtime's kernel compute
only less than the stride). Past the full result the output is zero.

hetvm's op takes non-negative pads and ``output_padding < stride`` (TVM's rule), so
the window becomes (pad_begin, pad_end, output_padding) and, where the window
starts before the full result or ends more than ``stride - 1`` past it, an
``nn.pad`` with zeros. The bias is added last (the reference adds it to every
output position, padded ones included).
"""

from __future__ import annotations

from typing import Any, Sequence

from ...ir import expr as E
from ...ir import prim as P
from ..onnx_context import ConvertContext, NodeView
from .nn import _channel_param, _spatial_rank
from .registry import converter


def _ints(ctx: ConvertContext, node: NodeView, key: str, k: int, default: int) -> list[int]:
    values = node.attr(key)
    if values is None:
        return [default] * k
    values = [int(v) for v in values]
    if len(values) != k:
        raise ctx.error(f"'{key}' needs {k} values for a {k}-D input, got {values}")
    return values


def _static(ctx: ConvertContext, dims: Sequence[P.PrimExpr], why: str) -> list[int]:
    values = [P.const_value(d) for d in dims]
    if any(v is None for v in values):
        raise ctx.error(f"{why} needs static spatial dims, got {ctx.describe_inputs()}")
    return values  # type: ignore[return-value]


def _windows(ctx: ConvertContext, node: NodeView, x: E.Expr, kernel: list[int], k: int) -> list[tuple[int, int, int]]:
    """Per spatial axis (pad_begin, pad_end, output_padding) in ONNX's terms: the
    output is ``[pad_begin, full + output_padding - pad_end)`` of the full result
    (a negative pad_begin starts before it)."""
    strides = _ints(ctx, node, "strides", k, 1)
    dilations = _ints(ctx, node, "dilations", k, 1)
    opad = _ints(ctx, node, "output_padding", k, 0)
    pads = node.attr("pads")
    auto_pad = node.attr("auto_pad", "NOTSET") or "NOTSET"
    if auto_pad not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise ctx.error(f"unknown auto_pad '{auto_pad}'")
    same = auto_pad in ("SAME_UPPER", "SAME_LOWER")
    out_shape = node.attr("output_shape")
    if out_shape is not None:
        out_shape = [int(v) for v in out_shape]
        if len(out_shape) == k + 2:  # a full N, C, spatial... shape: its spatial part
            out_shape = out_shape[2:]
        if len(out_shape) != k or any(v <= 0 for v in out_shape):
            raise ctx.error(f"'output_shape' needs {k} positive spatial values, got {out_shape}")
    if pads is not None:
        pads = [int(p) for p in pads]
        if len(pads) != 2 * k:
            raise ctx.error(f"'pads' needs {2 * k} values, got {pads}")
    if any(s <= 0 for s in strides) or any(d <= 0 for d in dilations):
        raise ctx.error(f"strides {strides} and dilations {dilations} must be positive")
    if any(not 0 <= p < max(s, d) for p, s, d in zip(opad, strides, dilations)):
        raise ctx.error(f"'output_padding' {opad} must be non-negative and smaller than max(stride, dilation) "
                        f"per axis (strides {strides}, dilations {dilations})")  # fmt: skip

    def split(total: int) -> tuple[int, int]:
        begin = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        return begin, total - begin

    if out_shape is None:
        if pads is not None:
            return [(pads[a], pads[a + k], opad[a]) for a in range(k)]
        if same:  # out = in * stride: total = full + output_padding - out, whatever the input size
            return [(*split((kernel[a] - 1) * dilations[a] + 1 + opad[a] - strides[a]), opad[a]) for a in range(k)]
        return [(0, 0, opad[a]) for a in range(k)]
    sizes = _static(ctx, ctx.shape_of(x)[2:], "'output_shape'")
    out = []
    for a in range(k):
        full = (sizes[a] - 1) * strides[a] + (kernel[a] - 1) * dilations[a] + 1
        total = full + opad[a] - out_shape[a]
        if same or total > 0:
            begin = split(total)[0]
        elif -total < strides[a]:
            begin = 0  # NOTSET, a longer output: zeros at the end
        else:
            raise ctx.error(
                f"'output_shape' {out_shape} does not fit the input {sizes}: with auto_pad={auto_pad} "
                f"axis {a} can be at most {full + opad[a] + strides[a] - 1} long"
            )
        out.append((begin, total - begin, opad[a]))
    return out


def _op_geometry(
    windows: list[tuple[int, int, int]], strides: list[int]
) -> tuple[list[int], list[int], list[int]]:
    """(op padding [b0.., e0..], output_padding, nn.pad widths [before0, after0, ...]):
    ONNX's values where the op takes them (non-negative pads, output_padding <
    stride), else the same window through the op's end crop or output_padding and
    zeros added by nn.pad."""
    begins, ends, opads, extra = [], [], [], []
    for (begin, end, op_pad), s in zip(windows, strides):
        if not (0 <= op_pad < s and end >= 0):
            past = op_pad - end  # where the window ends, relative to the full result's end
            end, op_pad = max(0, -past), min(max(0, past), s - 1)
            after = max(0, past) - op_pad
        else:
            after = 0
        begins.append(max(0, begin))
        ends.append(end)
        opads.append(op_pad)
        extra += [max(0, -begin), after]
    return begins + ends, opads, extra


@converter("ConvTranspose")
def _conv_transpose(ctx: ConvertContext, node: NodeView) -> Any:
    x, w = ctx.tensor(0, "X"), ctx.tensor(1, "W")
    k = _spatial_rank(ctx, x)
    if ctx.rank(w) != k + 2:
        raise ctx.error(f"W must be {k + 2}-D for a {k}-D input, got rank {ctx.rank(w)}")
    kernel = _static(ctx, ctx.shape_of(w)[2:], "the kernel shape (W)")
    given = node.attr("kernel_shape")
    if given is not None and [int(v) for v in given] != kernel:
        raise ctx.error(f"'kernel_shape' {[int(v) for v in given]} differs from W's {kernel}")
    strides = _ints(ctx, node, "strides", k, 1)
    padding, opad, extra = _op_geometry(_windows(ctx, node, x, kernel, k), strides)
    op = "nn.conv2d_transpose" if k == 2 else "nn.conv1d_transpose"
    y = ctx.call(
        op,
        x,
        w,
        strides=strides,
        padding=padding,
        output_padding=opad,
        dilation=_ints(ctx, node, "dilations", k, 1),
        groups=int(node.attr("group", 1)),
    )
    if any(extra):
        y = ctx.call("nn.pad", y, [0, 0, 0, 0] + extra)
    if node.input(2) is not None:
        y = ctx.call("add", y, _channel_param(ctx, 2, k + 2, "B"))
    return y
