"""Kernels of the fused ops (hetvm/kernels/fused.py) against the unfused kernels."""

import numpy as np
import pytest

from hetvm.kernels import get_kernel

RNG = np.random.default_rng(0)
CONV = {"strides": (1, 1), "padding": (1, 1, 1, 1), "dilation": (1, 1), "groups": 1,
        "data_layout": "NCHW", "kernel_layout": "OIHW", "out_layout": "NCHW", "out_dtype": None}  # fmt: skip


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def conv(x, w, attrs=CONV):
    out = np.empty((x.shape[0], w.shape[0], x.shape[2], x.shape[3]), x.dtype)
    get_kernel("nn.conv2d", "cpu")(np, attrs, x, w, out)
    return out


@pytest.mark.parametrize("activation", ["none", "relu"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_conv2d_bias_add_act(activation, dtype):
    x, w = rand(2, 4, 6, 6, dtype=dtype), rand(5, 4, 3, 3, dtype=dtype)
    b, r = rand(5, dtype=dtype), rand(2, 5, 6, 6, dtype=dtype)
    want = conv(x, w) + b.reshape(-1, 1, 1) + r
    if activation == "relu":
        want = np.maximum(want, 0)
    out = np.full((2, 5, 6, 6), 7, dtype)
    r_before = r.copy()
    get_kernel("nn.conv2d_bias_add_act", "cpu")(np, {**CONV, "activation": activation}, x, w, b, r, out)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(r, r_before)  # the residual is only read
    if activation == "relu":
        assert out.min() == 0.0


def test_residual_sharing_the_output_buffer_is_still_right():
    """The planner never does this; the kernel copes anyway (it copies the residual)."""
    x, w, b = rand(1, 4, 6, 6), rand(5, 4, 3, 3), rand(5)
    buf = rand(1, 5, 6, 6)
    want = np.maximum(conv(x, w) + b.reshape(-1, 1, 1) + buf, 0)
    get_kernel("nn.conv2d_bias_add_act", "sim")(np, {**CONV, "activation": "relu"}, x, w, b, buf, buf)
    np.testing.assert_allclose(buf, want, rtol=1e-5, atol=1e-5)


def test_conv2d_bias_act_matches_conv_plus_bias():
    x, w, b = rand(2, 4, 6, 6), rand(5, 4, 3, 3), rand(5)
    for activation in ("none", "relu"):
        out = np.empty((2, 5, 6, 6), "float32")
        get_kernel("nn.conv2d_bias_act", "cpu")(np, {**CONV, "activation": activation}, x, w, b, out)
        want = conv(x, w) + b.reshape(-1, 1, 1)
        np.testing.assert_allclose(out, np.maximum(want, 0) if activation == "relu" else want, rtol=1e-5, atol=1e-5)


def test_fused_kernel_errors():
    x, w, b = rand(1, 4, 6, 6), rand(5, 4, 3, 3), rand(5)
    out = np.empty((1, 5, 6, 6), "float32")
    kernel = get_kernel("nn.conv2d_bias_add_act", "cpu")
    with pytest.raises(ValueError, match="residual"):
        kernel(np, {**CONV, "activation": "none"}, x, w, b, rand(1, 5, 1, 6), out)
    with pytest.raises(ValueError, match="unknown activation"):
        kernel(np, {**CONV, "activation": "gelu"}, x, w, b, rand(1, 5, 6, 6), out)
