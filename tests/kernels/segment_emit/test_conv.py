"""Segment bodies of convolution and pooling against their NumPy kernels.

Each test compiles one segment of several calls (a compile is ~1 s), and no
two tests write the same segment source.
"""

import numpy as np
import pytest

from hetvm.kernels.registry import bind_kernel
from hetvm.kernels.segment_emit import conv as seg_conv
from hetvm.testing.segment_check import assert_segment_matches, compiled_calls, run_both, segment_of

pytest.importorskip("numba")

RNG = np.random.default_rng(7)


def _out_side(size: int, k: int, s: int, d: int, lo: int, hi: int) -> int:
    return (size + lo + hi - d * (k - 1) - 1) // s + 1


def conv_call(op, x, w, *, strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1, activation="none",
              bias=None, residual=False, dtype=None):  # fmt: skip
    dtype = dtype or x.dtype
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh = _out_side(h, kh, strides[0], dilation[0], padding[0], padding[2])
    ow = _out_side(wd, kw, strides[1], dilation[1], padding[1], padding[3])
    out = np.empty((n, o, oh, ow), dtype)
    attrs = {"strides": list(strides), "padding": list(padding), "dilation": list(dilation), "groups": groups,
             "data_layout": "NCHW", "kernel_layout": "OIHW", "out_layout": "NCHW", "out_dtype": None}  # fmt: skip
    args = [x, w]
    if op != "nn.conv2d":
        attrs["activation"] = activation
        args.append(RNG.standard_normal(o).astype(dtype) if bias is None else bias)
    if residual:
        args.append(RNG.standard_normal(out.shape).astype(dtype))
    return op, attrs, args + [out]


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def pool_attrs(k, s, p, d=(1, 1), ceil=False, include_pad=False):
    return {"pool_size": list(k), "strides": list(s), "padding": list(p), "dilation": list(d), "ceil_mode": ceil,
            "count_include_pad": include_pad, "layout": "NCHW", "out_layout": "NCHW"}  # fmt: skip


def test_convolutions_of_every_geometry_match_the_numpy_kernels(numba_on):
    x = rand(2, 8, 9, 7)
    x[0, 1, 2, 3] = np.nan
    x[1, 5, 0, 0] = np.inf
    calls = [
        # strided, asymmetric padding, dilated, ReLU
        conv_call("nn.conv2d_bias_act", x, rand(4, 8, 3, 3), strides=(2, 1), padding=(1, 2, 0, 1), dilation=(1, 2),
                  activation="relu"),  # fmt: skip
        # depthwise with a channel multiplier, no bias
        conv_call("nn.conv2d", x, rand(16, 1, 3, 3), padding=(1, 1, 1, 1), groups=8),
        # grouped 1x1 with a residual
        conv_call("nn.conv2d_bias_add_act", x, rand(6, 4, 1, 1), groups=2, activation="relu", residual=True),
        # stride 3 and a window larger than the padding needs
        conv_call("nn.conv2d_bias_act", x, rand(3, 8, 5, 4), strides=(3, 3), padding=(2, 0, 2, 3)),
        # strided 1x1 (ResNet's downsample) and a residual without activation
        conv_call("nn.conv2d_bias_add_act", x, rand(5, 8, 1, 1), strides=(2, 2), residual=True),
        # an empty batch
        conv_call("nn.conv2d_bias_act", rand(0, 8, 9, 7), rand(4, 8, 3, 3), padding=(1, 1, 1, 1), activation="relu"),
    ]
    seg = assert_segment_matches(calls, rtol=1e-4, atol=1e-5)
    assert [p[0] for p in seg.pieces] == ["g"]


def test_float64_and_a_non_finite_weight_meeting_the_padding_give_numpys_nans(numba_on):
    x = rand(1, 3, 6, 6, dtype=np.float64)
    w = rand(4, 3, 3, 3, dtype=np.float64)
    w[1, 0, 0, 0] = np.inf  # meets the top/left padding: NaN there, inf*x inside
    w[2, 2, 1, 1] = np.nan
    call = conv_call("nn.conv2d_bias_act", x, w, padding=(1, 1, 1, 1), activation="relu")
    got, want, _ = run_both([call])
    assert np.isnan(want[-1][0, 1, 0, :]).all() and np.isnan(want[-1][0, 2]).all()
    dw = rand(3, 1, 3, 3, dtype=np.float64)
    dw[0, 0, 2, 2] = -np.inf
    assert_segment_matches([
        call,
        conv_call("nn.conv2d_bias_act", x, dw, strides=(2, 2), padding=(1, 1, 1, 1), groups=3),
    ], rtol=1e-12, atol=1e-12)  # fmt: skip


def test_a_non_contiguous_input_and_an_output_sharing_the_residuals_bytes(numba_on):
    base = rand(1, 4, 10, 12)
    x = base[:, :, ::2, 1::2]  # (1, 4, 5, 6), strided
    w, b = rand(4, 4, 3, 3), rand(4)
    buf = rand(1, 4, 6, 6)
    residual, out = buf[:, :, :5], buf[:, :, 1:]  # one row apart in one buffer (the planner never does this)
    attrs = {"strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1, "activation": "relu"}
    want = np.empty(out.shape, np.float32)
    bind_kernel("nn.conv2d_bias_add_act", "cpu", np, dict(attrs))(x, w, b, residual.copy(), want)
    seg, arrays = segment_of([("nn.conv2d_bias_add_act", attrs, [x, w, b, residual, out])])
    seg(*arrays)
    assert compiled_calls(seg) == 1
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_every_unrolled_form_and_channel_remainder_match_the_numpy_kernels(numba_on):
    # the loops unroll every (input channel, tap) of a group where few, else the
    # window, else one row of it, for blocks of output channels with a remainder
    x = rand(2, 6, 11, 10)
    x[1, 2, 3, 4] = np.nan
    calls = [
        # a 7x7 window (unrolled a row at a time), strided and dilated: 11 output
        # channels are two blocks and a remainder of 3
        conv_call("nn.conv2d_bias_act", x, rand(11, 6, 7, 7), strides=(2, 1), padding=(3, 3, 2, 4),
                  dilation=(1, 2), activation="relu"),  # fmt: skip
        # a 3x3 window over 6 channels (54 taps: the window unrolled), 5 outputs, residual
        conv_call("nn.conv2d_bias_add_act", x, rand(5, 6, 3, 3), padding=(1, 1, 1, 1), residual=True,
                  activation="relu"),  # fmt: skip
        # 1x1 without padding, stride 1: the image itself is the plane; 7 outputs
        conv_call("nn.conv2d_bias_act", x, rand(7, 6, 1, 1)),
        # 2x2 over 3 channels a group, no padding, 2 groups of 5 outputs
        conv_call("nn.conv2d", x, rand(10, 3, 2, 2), groups=2),
        # depthwise 5x5 stride 2 (25 taps, all unrolled)
        conv_call("nn.conv2d_bias_act", x, rand(6, 1, 5, 5), strides=(2, 2), padding=(2, 2, 2, 2), groups=6),
    ]
    assert_segment_matches(calls, rtol=1e-4, atol=1e-5)


def test_a_later_call_with_another_weight_shape_runs_the_plain_loop(numba_on):
    attrs = {"strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1, "activation": "relu"}
    first = [rand(1, 4, 6, 6), rand(4, 4, 3, 3), rand(4), np.empty((1, 4, 6, 6), np.float32)]
    seg, arrays = segment_of([("nn.conv2d_bias_act", attrs, first)])
    seg(*arrays)
    assert compiled_calls(seg) == 1
    kernel = bind_kernel("nn.conv2d_bias_act", "cpu", np, dict(attrs))
    for c, o, k, side in [(4, 4, 5, 4), (3, 6, 3, 5), (8, 2, 1, 6)]:  # window, channels, both
        h = side - 2 + k - 1  # padding 1 a side
        later = [rand(2, c, h, h), rand(o, c, k, k), rand(o), np.empty((2, o, side, side), np.float32)]
        want = np.empty_like(later[-1])
        kernel(*later[:-1], want)
        seg(*later)
        np.testing.assert_allclose(later[-1], want, rtol=1e-4, atol=1e-5)


def test_an_output_sharing_the_data_or_the_weights_bytes_gets_the_numpy_kernels_result(numba_on):
    # unpadded stride 1 reads the image in place while writing the output per
    # block of channels; the weights are read all along: either overlapping the
    # output (the planner never plans that) is read from a copy
    attrs = {"strides": [1, 1], "padding": [0, 0, 0, 0], "dilation": [1, 1], "groups": 1, "activation": "none"}
    kernel = bind_kernel("nn.conv2d_bias_act", "cpu", np, dict(attrs))
    buf = rand(1, 10, 5, 5)
    x, out = buf[:, :8], buf[:, 2:]  # channels 2..7 shared
    w, b = rand(8, 8, 1, 1), rand(8)
    want = np.empty(out.shape, np.float32)
    kernel(x.copy(), w, b, want)
    seg, arrays = segment_of([("nn.conv2d_bias_act", attrs, [x, w, b, out])])
    seg(*arrays)
    assert compiled_calls(seg) == 1
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    wbuf = rand(1, 4, 4, 4)
    x2, out2 = rand(1, 4, 4, 4), wbuf
    w2 = wbuf.reshape(4, 4, 4, 1)[:, :, :1]  # (4, 4, 1, 1), strided, inside the output's bytes
    want2 = np.empty(out2.shape, np.float32)
    kernel(x2, w2.copy(), b[:4], want2)
    seg2, arrays2 = segment_of([("nn.conv2d_bias_act", attrs, [x2, w2, b[:4].copy(), out2])])
    seg2(*arrays2)
    assert compiled_calls(seg2) == 1
    np.testing.assert_allclose(out2, want2, rtol=1e-4, atol=1e-5)


def test_pools_match_the_numpy_kernels(numba_on):
    x = rand(2, 3, 9, 8)
    x[0, 0, 1, 1] = np.nan
    x[1, 2, 4, 4] = -np.inf
    calls = []
    for op, attrs in [
        ("nn.max_pool2d", pool_attrs((3, 3), (2, 2), (1, 1, 1, 1))),
        ("nn.max_pool2d", pool_attrs((2, 3), (1, 2), (0, 1, 2, 0), d=(2, 1))),
        ("nn.avg_pool2d", pool_attrs((3, 3), (2, 2), (1, 1, 1, 1))),
        ("nn.avg_pool2d", pool_attrs((3, 2), (2, 2), (1, 0, 1, 1), include_pad=True)),
        ("nn.avg_pool2d", pool_attrs((2, 2), (1, 1), (0, 0, 0, 0), d=(2, 2))),
    ]:
        k, s, p, d = attrs["pool_size"], attrs["strides"], attrs["padding"], attrs["dilation"]
        oh, ow = _out_side(9, k[0], s[0], d[0], p[0], p[2]), _out_side(8, k[1], s[1], d[1], p[1], p[3])
        calls.append((op, attrs, [x, np.empty((2, 3, oh, ow), np.float32)]))
    # ceil mode: one more output row and column, whose windows overhang the padding;
    # and a padding wider than the window (its first windows wholly in padding)
    calls.append(("nn.max_pool2d", pool_attrs((3, 3), (2, 2), (0, 0, 0, 0), ceil=True), [x, np.empty((2, 3, 5, 4), np.float32)]))
    calls.append(("nn.avg_pool2d", pool_attrs((3, 3), (2, 2), (1, 1, 1, 1), ceil=True, include_pad=True),
                  [x, np.empty((2, 3, 6, 5), np.float32)]))  # fmt: skip
    calls.append(("nn.max_pool2d", pool_attrs((2, 2), (2, 2), (3, 3, 3, 3)), [x, np.empty((2, 3, 7, 7), np.float32)]))
    got, want, _ = run_both(calls[-1:])
    assert np.isneginf(want[-1][:, :, 0]).all()
    assert_segment_matches(calls)


def test_an_output_that_does_not_fit_raises_the_numpy_kernels_error(numba_on):
    x = rand(1, 2, 5, 5)
    op, attrs, args = conv_call("nn.conv2d_bias_act", x, rand(2, 2, 3, 3))
    args[-1] = np.empty((1, 2, 4, 3), np.float32)  # 3x3 on 5x5 without padding gives 3x3
    with pytest.raises(ValueError, match="does not fit"):
        run_both([(op, attrs, args)])


def test_mixed_and_integer_dtypes_keep_their_numpy_kernels(numba_on):
    x = rand(1, 2, 5, 5)
    mixed = conv_call("nn.conv2d", x, rand(2, 2, 3, 3, dtype=np.float64), dtype=np.float64)
    xi = RNG.integers(-50, 50, (1, 2, 5, 5)).astype(np.int32)
    pool = ("nn.max_pool2d", pool_attrs((2, 2), (2, 2), (0, 0, 0, 0)), [xi, np.empty((1, 2, 2, 2), np.int32)])
    assert_segment_matches([mixed, pool], compiled=False)


def test_a_convolution_too_large_for_the_loop_keeps_its_numpy_kernel(numba_on):
    call = conv_call("nn.conv2d_bias_act", rand(1, 64, 16, 16), rand(64, 64, 3, 3), padding=(1, 1, 1, 1))
    assert_segment_matches([call], compiled=False)


def test_an_image_stem_above_the_size_rule_takes_the_loop_and_matches_the_numpy_kernel(numba_on):
    # 3 -> 22 channels, 3x3 stride 2 (27 taps all unrolled, blocks of 4 and a
    # remainder of 2), 663k multiply-adds: above CONV_LOOP_MAX, a stem at any size
    x = rand(1, 3, 64, 64)
    x[0, 1, 10, 20] = np.inf
    w = rand(22, 3, 3, 3)
    call = conv_call("nn.conv2d_bias_act", x, w, strides=(2, 2), padding=(1, 1, 1, 1), activation="relu")
    assert seg_conv.conv_multiply_adds(w.shape, call[2][-1].shape) > seg_conv.CONV_LOOP_MAX
    assert_segment_matches([call], rtol=1e-4, atol=1e-5)


def test_the_size_rule_by_kind_of_convolution():
    assert seg_conv.conv_is_small((8, 3, 7, 7), (1, 8, 16, 16))  # the ResNet stem: 301056
    assert not seg_conv.conv_is_small((64, 64, 3, 3), (1, 64, 16, 16))
    assert seg_conv.conv_is_small((16, 8, 1, 1), (1, 16, 16, 16))
    assert seg_conv.conv_is_small((32, 64, 1, 1), (1, 32, 8, 8))  # 131072 on a 1x1 kernel
    assert not seg_conv.conv_is_small((64, 64, 1, 1), (1, 64, 16, 16))  # 1048576 on a 1x1 kernel
    assert seg_conv.conv_is_small((64, 1, 3, 3), (1, 64, 32, 32))  # depthwise
    assert not seg_conv.conv_is_small((8, 3, 7), (1, 8, 16, 16))
    assert seg_conv.conv_is_small((24, 3, 3, 3), (1, 24, 112, 112))  # an image stem: any size
    assert not seg_conv.conv_is_small((64, 3, 3, 3), (1, 64, 111, 111))  # more outputs than STEM_OUT
    assert not seg_conv.conv_is_small((32, 5, 3, 3), (1, 32, 112, 112))  # more inputs than STEM_IN
