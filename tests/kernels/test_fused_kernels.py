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


@pytest.mark.parametrize("strides", [(1, 1), (2, 2)])
@pytest.mark.parametrize("out_dtype", ["float32", "float64"])
@pytest.mark.parametrize("specialized", [False, True])
def test_depthwise_bias_in_the_final_copy(strides, out_dtype, specialized):
    """At stride 1 the depthwise path adds the bias while cropping its result (once,
    not twice); other strides and a float64 destination add it afterwards."""
    from hetvm.kernels.registry import bind_kernel

    attrs = {**CONV, "strides": strides, "groups": 6, "activation": "relu"}
    x, w, b = rand(2, 6, 7, 7), rand(12, 1, 3, 3), rand(12)
    ref = np.empty((2, 12) + ((7, 7) if strides == (1, 1) else (4, 4)), "float32")
    get_kernel("nn.conv2d", "cpu")(np, {**attrs}, x, w, ref)
    want = np.maximum(ref + b.reshape(-1, 1, 1), 0)
    out = np.full(ref.shape, 7, out_dtype)
    if specialized:
        bind_kernel("nn.conv2d_bias_act", "cpu", np, attrs)(x, w, b, out)
    else:
        get_kernel("nn.conv2d_bias_act", "cpu")(np, attrs, x, w, b, out)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_fused_kernel_errors():
    x, w, b = rand(1, 4, 6, 6), rand(5, 4, 3, 3), rand(5)
    out = np.empty((1, 5, 6, 6), "float32")
    kernel = get_kernel("nn.conv2d_bias_add_act", "cpu")
    with pytest.raises(ValueError, match="residual"):
        kernel(np, {**CONV, "activation": "none"}, x, w, b, rand(1, 5, 1, 6), out)
    with pytest.raises(ValueError, match="unknown activation"):
        kernel(np, {**CONV, "activation": "gelu"}, x, w, b, rand(1, 5, 6, 6), out)


# -- nn.scale_shift_act ---------------------------------------------------------------


def scale_shift(x, s, t, activation, out_dtype=None):
    out = np.full(x.shape, 7, out_dtype or x.dtype)
    get_kernel("nn.scale_shift_act", "cpu")(np, {"activation": activation}, x, s, t, out)
    return out


@pytest.mark.parametrize("shape", [(3, 6), (2, 6, 7), (2, 6, 56, 56), (1, 6, 2, 3, 4), (1, 6, 1, 1)])
@pytest.mark.parametrize("activation", ["none", "relu"])
def test_scale_shift_act_any_rank(shape, activation):
    x, s, t = rand(*shape), rand(6), rand(6)
    col = (-1,) + (1,) * (len(shape) - 2)
    want = x * s.reshape(col) + t.reshape(col)
    if activation == "relu":
        want = np.maximum(want, 0)
    x_before = x.copy()
    np.testing.assert_allclose(scale_shift(x, s, t, activation), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(x, x_before)


@pytest.mark.parametrize("activation", ["none", "relu"])
@pytest.mark.parametrize("ones,zeros", [(True, False), (False, True), (True, True)])
def test_scale_shift_act_identity_parts_are_skipped_exactly(activation, ones, zeros):
    x = rand(2, 4, 5, 5, dtype="float64")
    s = np.ones(4) if ones else rand(4, dtype="float64")
    t = np.zeros(4) if zeros else rand(4, dtype="float64")
    want = x * s.reshape(-1, 1, 1) + t.reshape(-1, 1, 1)
    if activation == "relu":
        want = np.maximum(want, 0)
    np.testing.assert_array_equal(scale_shift(x, s, t, activation), want)


def test_scale_shift_act_in_place_and_nan():
    x, s, t = rand(2, 4, 3, 3), rand(4), rand(4)
    want = np.maximum(x * s.reshape(-1, 1, 1) + t.reshape(-1, 1, 1), 0)
    get_kernel("nn.scale_shift_act", "sim")(np, {"activation": "relu"}, x, s, t, x)
    np.testing.assert_allclose(x, want, rtol=1e-6)
    s[1] = np.nan
    got = scale_shift(rand(1, 4, 2, 2), s, t, "relu")
    assert np.isnan(got[0, 1]).all() and not np.isnan(got[0, 0]).any()


def test_scale_shift_act_errors():
    kernel = get_kernel("nn.scale_shift_act", "cpu")
    x = rand(2, 4, 3)
    with pytest.raises(ValueError, match="one value per channel"):
        kernel(np, {"activation": "none"}, x, rand(3), rand(4), np.empty_like(x))
    with pytest.raises(ValueError, match="shape"):
        kernel(np, {"activation": "none"}, x, rand(4), rand(4), np.empty((2, 4, 1), "float32"))
    with pytest.raises(ValueError, match="unknown activation"):
        kernel(np, {"activation": "tanh"}, x, rand(4), rand(4), np.empty_like(x))


@pytest.mark.parametrize("groups", [1, 4])
def test_large_batches_run_image_by_image(monkeypatch, groups):
    """Outputs of at least ``_PER_IMAGE_BYTES`` an image are convolved and finished
    one image at a time; the result is the whole batch's."""
    from hetvm.kernels import fused

    monkeypatch.setattr(fused, "_PER_IMAGE_BYTES", 1)
    attrs = {**CONV, "groups": groups, "activation": "relu"}
    x, w, b, r = rand(3, 4, 6, 6), rand(8, 4 // groups, 3, 3), rand(8), rand(3, 8, 6, 6)
    whole = np.empty((3, 8, 6, 6), "float32")
    get_kernel("nn.conv2d", "cpu")(np, attrs, x, w, whole)
    out = np.empty_like(whole)
    get_kernel("nn.conv2d_bias_act", "cpu")(np, attrs, x, w, b, out)
    np.testing.assert_allclose(out, np.maximum(whole + b.reshape(-1, 1, 1), 0), rtol=1e-5, atol=1e-5)
    get_kernel("nn.conv2d_bias_add_act", "cpu")(np, attrs, x, w, b, r, out)
    np.testing.assert_allclose(out, np.maximum(whole + b.reshape(-1, 1, 1) + r, 0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("activation", ["none", "relu"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("k,s,p,ceil", [((3, 3), (2, 2), (0, 0, 0, 0), False), ((3, 3), (2, 2), (1, 1, 1, 1), False),
                                        ((2, 2), (2, 2), (0, 0, 1, 1), True), ((3, 3), (1, 1), (1, 1, 1, 1), False)])  # fmt: skip
def test_max_pool2d_bias_act_is_pool_then_bias_then_activation(activation, dtype, k, s, p, ceil):
    """The definition: activation(max_pool(x) + b). A window wholly in padding
    (the third geometry's last column) gives -inf from the pool, so 0 after relu."""
    x, b = rand(2, 5, 9, 8, dtype=dtype), rand(5, dtype=dtype)
    pool = {"pool_size": k, "strides": s, "padding": p, "dilation": (1, 1), "ceil_mode": ceil,
            "count_include_pad": False, "layout": "NCHW", "out_layout": "NCHW"}  # fmt: skip
    oh = (9 + p[0] + p[2] - k[0] + (s[0] - 1 if ceil else 0)) // s[0] + 1
    ow = (8 + p[1] + p[3] - k[1] + (s[1] - 1 if ceil else 0)) // s[1] + 1
    want = np.empty((2, 5, oh, ow), dtype)
    get_kernel("nn.max_pool2d", "cpu")(np, pool, x, want)
    want = want + b.reshape(-1, 1, 1)
    if activation == "relu":
        want = np.maximum(want, 0)
    out = np.full_like(want, 7)
    get_kernel("nn.max_pool2d_bias_act", "cpu")(np, {**pool, "activation": activation}, x, b, out)
    np.testing.assert_array_equal(out, want)
