"""The depthwise convolution body against the NumPy kernels.

Each test compiles one segment (about a second) and writes its own source.
"""

import numpy as np
import pytest

from hetvm.kernels.registry import bind_kernel
from hetvm.kernels.segment_emit import Arr, emitter
from hetvm.kernels.segment_emit import depthwise as seg_dw
from hetvm.testing.segment_check import assert_segment_matches, compiled_calls, run_both, segment_of

pytest.importorskip("numba")

RNG = np.random.default_rng(11)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _side(size, k, s, d, lo, hi):
    return (size + lo + hi - d * (k - 1) - 1) // s + 1


def dw_call(op, x, w, *, strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=None, activation="none",
            residual=False):  # fmt: skip
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    out = np.empty((n, o, _side(h, kh, strides[0], dilation[0], padding[0], padding[2]),
                    _side(wd, kw, strides[1], dilation[1], padding[1], padding[3])), x.dtype)  # fmt: skip
    attrs = {"strides": list(strides), "padding": list(padding), "dilation": list(dilation),
             "groups": c if groups is None else groups, "data_layout": "NCHW", "kernel_layout": "OIHW",
             "out_layout": "NCHW", "out_dtype": None}  # fmt: skip
    args = [x, w]
    if op != "nn.conv2d":
        attrs["activation"] = activation
        args.append(rand(o, dtype=x.dtype))
    if residual:
        args.append(rand(*out.shape, dtype=x.dtype))
    return op, attrs, args + [out]


def _names(n):
    return [f"a{i}" for i in range(n)]


def test_the_specialised_body_takes_depthwise_calls_and_leaves_the_rest():
    op, attrs, args = dw_call("nn.conv2d_bias_act", rand(1, 6, 8, 8), rand(6, 1, 3, 3), padding=(1, 1, 1, 1))
    specs = [Arr(str(a.dtype), a.ndim, a.shape) for a in args]
    lines = seg_dw._conv(op, attrs, specs, _names(len(specs)))
    assert lines is not None and any("Pq" in ln for ln in lines)
    assert emitter(op)(attrs, specs, _names(len(specs))) == lines
    # a grouped convolution with two channels a group: the general body
    grouped = [Arr("float32", 4, (1, 6, 8, 8)), Arr("float32", 4, (6, 2, 3, 3)), specs[2], specs[3]]
    assert seg_dw._conv(op, {**attrs, "groups": 3}, grouped, _names(4)) is None
    assert emitter(op)({**attrs, "groups": 3}, grouped, _names(4)) is not None
    # one group, other activations, layouts: not this body
    assert seg_dw._conv(op, {**attrs, "groups": 1}, specs, _names(4)) is None
    assert seg_dw._conv(op, {**attrs, "activation": "sigmoid"}, specs, _names(4)) is None
    assert seg_dw._conv(op, {**attrs, "data_layout": "NHWC"}, specs, _names(4)) is None
    # larger than the size rule: the NumPy kernel's direct loop
    big = [Arr("float32", 4, (8, 256, 64, 64)), Arr("float32", 4, (256, 1, 3, 3)), specs[2],
           Arr("float32", 4, (8, 256, 64, 64))]  # fmt: skip
    assert seg_dw._conv(op, attrs, big, _names(4)) is None


def test_depthwise_geometries_match_the_numpy_kernels(numba_on):
    x = rand(2, 5, 11, 9)  # odd channels, a batch, non-square
    x[0, 1, 2, 3] = np.nan
    x[1, 4, 0, 0] = np.inf
    calls = [
        dw_call("nn.conv2d_bias_act", x, rand(5, 1, 3, 3), padding=(1, 1, 1, 1)),
        dw_call("nn.conv2d_bias_act", x, rand(5, 1, 3, 3), strides=(2, 2), padding=(1, 1, 1, 1), activation="relu"),
        # asymmetric stride and padding, dilation
        dw_call("nn.conv2d", x, rand(5, 1, 3, 3), strides=(2, 1), padding=(0, 2, 1, 0), dilation=(1, 2)),
        # a channel multiplier of 3 and stride 3
        dw_call("nn.conv2d_bias_act", x, rand(15, 1, 3, 3), strides=(3, 3), padding=(1, 1, 2, 2), activation="relu"),
        # 5x5 and 1x2 kernels: the tap-by-tap loop
        dw_call("nn.conv2d_bias_add_act", x, rand(5, 1, 5, 5), padding=(2, 2, 2, 2), activation="relu", residual=True),
        dw_call("nn.conv2d_bias_act", x, rand(5, 1, 1, 2), strides=(1, 2)),
    ]
    assert_segment_matches(calls, rtol=1e-4, atol=1e-5)


def test_float64_non_finite_weights_meet_the_padding_as_in_numpy(numba_on):
    x = rand(1, 3, 6, 7, dtype=np.float64)
    w = rand(3, 1, 3, 3, dtype=np.float64)
    w[0, 0, 0, 0] = np.inf  # meets the top/left padding: NaN there
    w[1, 0, 1, 1] = np.nan
    w[2, 0, 2, 2] = -np.inf
    calls = [dw_call("nn.conv2d_bias_act", x, w, padding=(1, 1, 1, 1), activation="relu"),
             dw_call("nn.conv2d", x, w, strides=(2, 2), padding=(1, 1, 1, 1))]  # fmt: skip
    _, want, _ = run_both(calls[:1])
    assert np.isnan(want[-1][0, 0, 0]).all()
    assert_segment_matches(calls, rtol=1e-12, atol=1e-12)


def test_an_empty_batch_and_non_contiguous_inputs(numba_on):
    base = rand(2, 8, 14, 12)
    x = base[:, ::2, ::2, 1::2]  # (2, 4, 7, 6), strided in every axis
    w = rand(8, 4, 3, 3)[:, 1:2]  # (8, 1, 3, 3), not contiguous
    calls = [
        dw_call("nn.conv2d_bias_act", x, w, padding=(1, 1, 1, 1), activation="relu"),
        dw_call("nn.conv2d_bias_act", rand(0, 4, 7, 6), rand(4, 1, 3, 3), padding=(1, 1, 1, 1)),
    ]
    assert_segment_matches(calls, rtol=1e-4, atol=1e-5)


def test_an_output_sharing_the_inputs_bytes_gets_what_numpy_writes(numba_on):
    attrs = {"strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 4, "activation": "none"}
    x, w, b = rand(1, 4, 8, 8), rand(4, 1, 3, 3), rand(4)
    out = x[:, :, :, :]  # another array over the input's bytes (the planner never plans it; a caller may)
    want = np.empty_like(x)
    bind_kernel("nn.conv2d_bias_act", "cpu", np, dict(attrs))(x.copy(), w, b, want)
    seg, arrays = segment_of([("nn.conv2d_bias_act", attrs, [x, w, b, out])])
    seg(*arrays)
    assert compiled_calls(seg) == 1
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_a_later_call_with_more_channels_a_group_still_sums_them(numba_on):
    op, attrs, args = dw_call("nn.conv2d_bias_act", rand(1, 4, 6, 6), rand(4, 1, 3, 3), padding=(1, 1, 1, 1),
                              groups=2)  # fmt: skip
    args = [rand(1, 2, 6, 6), args[1], args[2], args[3]]  # first call: 2 channels, groups 2, multiplier 2
    seg, arrays = segment_of([(op, attrs, args)])
    seg(*arrays)
    assert compiled_calls(seg) == 1
    # the same compiled body, now with 2 input channels a group (4 channels, groups 2)
    x, w, b = rand(1, 4, 6, 6), rand(4, 2, 3, 3), rand(4)
    got, want = np.empty((1, 4, 6, 6), np.float32), np.empty((1, 4, 6, 6), np.float32)
    seg(x, w, b, got)
    seg.calls[0].kernel(x, w, b, want)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_shapes_that_do_not_fit_raise_the_numpy_kernels_error(numba_on):
    op, attrs, args = dw_call("nn.conv2d_bias_act", rand(1, 3, 5, 5), rand(3, 1, 3, 3))
    args[-1] = np.empty((1, 3, 4, 3), np.float32)  # 3x3 on 5x5 without padding gives 3x3
    with pytest.raises(ValueError, match="does not fit"):
        run_both([(op, attrs, args)])
