"""The dot-product body of small-plane convolutions against the NumPy kernels.

Each test compiles one segment (a compile is ~1 s); no two tests write the same
segment source.
"""

import numpy as np
import pytest

from hetvm.kernels.registry import bind_kernel
from hetvm.kernels.segment_emit import Arr, conv_dots, emitter
from hetvm.testing.segment_check import assert_segment_matches, compiled_calls, run_both, segment_of

from .test_conv import conv_call, rand

pytest.importorskip("numba")


def _takes_dots(op: str, attrs: dict, args: list) -> bool:
    """Whether the conv emitters give this call the dot-product body (its helper)."""
    descs = [Arr(a.dtype.name, a.ndim, a.shape) for a in args]
    body = emitter(op)(attrs, descs, [f"a{i}" for i in range(len(args))])
    return body is not None and "_conv_dots" in getattr(body, "helpers", "")


def test_small_planes_of_every_geometry_match_the_numpy_kernels(numba_on):
    x = rand(2, 24, 5, 6)
    x[0, 3, 1, 2] = np.nan
    x[1, 20, 4, 5] = np.inf
    calls = [
        # 3x3 stride 2, asymmetric padding, dilated, ReLU: 3x3 outputs (9: pairs
        # of positions and one left), 18 channels (four blocks of 4 and 2 left)
        conv_call("nn.conv2d_bias_act", x, rand(18, 24, 3, 3), strides=(2, 2), padding=(1, 2, 2, 1),
                  dilation=(1, 2), activation="relu"),  # fmt: skip
        # 1x1 with a residual, 2 groups of 16 outputs, over a strided (non-contiguous) input
        conv_call("nn.conv2d_bias_add_act", rand(2, 128, 4, 4)[:, :, ::2, ::2], rand(32, 64, 1, 1), groups=2,
                  activation="relu", residual=True),  # fmt: skip
        # no bias, a window wider than the image with padding around it (outputs 1x2)
        conv_call("nn.conv2d", x, rand(16, 24, 5, 5), strides=(3, 3), padding=(0, 1, 0, 1)),
        # an empty batch
        conv_call("nn.conv2d_bias_act", rand(0, 24, 4, 4), rand(16, 24, 3, 3), strides=(2, 2), padding=(1, 1, 1, 1)),
    ]
    assert all(_takes_dots(*c) for c in calls)
    seg = assert_segment_matches(calls, rtol=1e-4, atol=1e-5)
    assert [p[0] for p in seg.pieces] == ["g"]


def test_float64_and_a_non_finite_weight_meeting_the_padding_give_numpys_nans(numba_on):
    x = rand(1, 8, 3, 3, dtype=np.float64)
    w = rand(20, 8, 3, 3, dtype=np.float64)
    w[1, 0, 0, 0] = np.inf  # meets the top/left padding: NaN there, inf*x inside
    w[6, 5, 1, 1] = np.nan
    call = conv_call("nn.conv2d_bias_act", x, w, padding=(1, 1, 1, 1), activation="relu")
    assert _takes_dots(*call)
    got, want, _ = run_both([call])
    assert np.isnan(want[-1][0, 1, 0, 0]) and np.isnan(want[-1][0, 6]).all()
    np.testing.assert_allclose(got[-1], want[-1], rtol=1e-12, atol=1e-12, equal_nan=True)


def test_an_output_sharing_the_datas_bytes_gets_the_numpy_kernels_result(numba_on):
    # the output is written group by group while the data is still read for
    # the next group: data overlapping it (the planner never plans that) is read from a copy
    attrs = {"strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 2, "activation": "none"}
    buf = rand(1, 40, 2, 2)
    x, out = buf[:, :32], buf[:, 8:]
    w, b = rand(32, 16, 3, 3), rand(32)
    assert _takes_dots("nn.conv2d_bias_act", attrs, [x, w, b, out])
    want = np.empty(out.shape, np.float32)
    bind_kernel("nn.conv2d_bias_act", "cpu", np, dict(attrs))(x.copy(), w, b, want)
    seg, arrays = segment_of([("nn.conv2d_bias_act", attrs, [x, w, b, out])])
    seg(*arrays)
    assert compiled_calls(seg) == 1
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_a_later_call_with_other_shapes_is_still_exact(numba_on):
    attrs = {"strides": [2, 2], "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1, "activation": "relu"}
    first = [rand(1, 16, 4, 4), rand(16, 16, 3, 3), rand(16), np.empty((1, 16, 2, 2), np.float32)]
    assert _takes_dots("nn.conv2d_bias_act", attrs, first)
    seg, arrays = segment_of([("nn.conv2d_bias_act", attrs, first)])
    seg(*arrays)
    kernel = bind_kernel("nn.conv2d_bias_act", "cpu", np, dict(attrs))
    for c, o, k, side in [(16, 16, 3, 9), (3, 5, 5, 3), (20, 2, 1, 4)]:  # plane, channels, window
        h = (side - 1) * 2 + k - 2
        later = [rand(2, c, h, h), rand(o, c, k, k), rand(o), np.empty((2, o, side, side), np.float32)]
        want = np.empty_like(later[-1])
        kernel(*later[:-1], want)
        seg(*later)
        assert compiled_calls(seg) == 1
        np.testing.assert_allclose(later[-1], want, rtol=1e-4, atol=1e-5)


def test_the_rule_takes_small_planes_with_long_windows_and_enough_channels():
    assert conv_dots.dots_pay((64, 48, 3, 3), (1, 64, 2, 2), 1)  # a last stage's 3x3/2
    assert conv_dots.dots_pay((256, 64, 1, 1), (1, 256, 2, 2), 1)
    assert not conv_dots.dots_pay((32, 16, 3, 3), (1, 32, 8, 8), 1)  # a plane of 64: the general body
    assert not conv_dots.dots_pay((32, 16, 1, 1), (1, 32, 4, 4), 1)  # 16 taps
    assert not conv_dots.dots_pay((64, 8, 3, 3), (1, 64, 4, 4), 8)  # 8 outputs a group
    assert not conv_dots.dots_pay((64, 48, 3), (1, 64, 2, 2), 1)
    # depthwise layers keep their body, and a call above the size rule its NumPy kernel
    depthwise = conv_call("nn.conv2d_bias_act", rand(1, 64, 4, 4), rand(64, 1, 9, 9), padding=(4, 4, 4, 4), groups=64)
    assert not _takes_dots(*depthwise)
    large = conv_call("nn.conv2d_bias_act", rand(1, 512, 4, 4), rand(512, 512, 3, 3), padding=(1, 1, 1, 1))
    assert not _takes_dots(*large)
