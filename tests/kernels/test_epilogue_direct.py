"""The one-pass convolution epilogue (``hetvm/kernels/epilogue_direct.py``)
against the NumPy passes it replaces: bias, residual and ReLU, float32/float64,
NaN and inf, empty batches, non-contiguous residuals, and the calls it leaves
to the NumPy passes. The adds run in NumPy's order, so results are equal.
Skipped where Numba is not installed."""

import numpy as np
import pytest

from hetvm.kernels import codegen_numba as cg
from hetvm.kernels import epilogue_direct, get_kernel

pytest.importorskip("numba")


pytestmark = pytest.mark.usefixtures("numba_on")


def _numpy(bias, residual, relu, out):
    want = out.astype(np.float64).astype(out.dtype)
    if bias is not None:
        np.add(want, bias.reshape((-1,) + (1,) * (out.ndim - 2)), out=want)
    if residual is not None:
        np.add(want, residual, out=want)
    return np.maximum(want, 0) if relu else want


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("with_residual", [False, True])
@pytest.mark.parametrize("relu", [False, True])
def test_matches_the_numpy_passes(dtype, with_bias, with_residual, relu):
    rng = np.random.default_rng(1)
    out = rng.standard_normal((2, 5, 4, 3)).astype(dtype)
    out[0, 0, 0, 0], out[0, 1, 1, 1], out[1, 2, 3, 2] = np.nan, np.inf, -np.inf
    bias = rng.standard_normal(5).astype(dtype) if with_bias else None
    residual = rng.standard_normal((2, 5, 4, 3)).astype(dtype) if with_residual else None
    if with_residual:
        residual[1, 0, 0, 0], residual[1, 2, 3, 2] = -np.inf, np.inf  # -inf + inf: NaN
    want = _numpy(bias, residual, relu, out)
    assert epilogue_direct.run(np, out, bias, residual, relu)
    np.testing.assert_array_equal(out, want)


def test_non_contiguous_residual_and_other_ranks():
    rng = np.random.default_rng(2)
    out = rng.standard_normal((3, 4, 6)).astype("float32")
    residual = rng.standard_normal((3, 4, 12)).astype("float32")[..., ::2]
    bias = rng.standard_normal(4).astype("float32")
    want = _numpy(bias, residual, True, out)
    assert epilogue_direct.run(np, out, bias, residual, True)
    np.testing.assert_array_equal(out, want)
    out2 = rng.standard_normal((2, 3)).astype("float64")
    want2 = _numpy(None, None, True, out2)
    assert epilogue_direct.run(np, out2, None, None, True)
    np.testing.assert_array_equal(out2, want2)


def test_empty_batch():
    out = np.zeros((0, 3, 2, 2), "float32")
    assert epilogue_direct.run(np, out, np.ones(3, "float32"), None, True)


@pytest.mark.parametrize(
    "case", ["int", "mixed", "non_contiguous", "bias_shape", "residual_shape", "off"]
)
def test_calls_left_to_numpy(monkeypatch, case):
    out = np.ones((1, 2, 3, 3), "float32")
    bias, residual = np.ones(2, "float32"), None
    if case == "int":
        out = out.astype("int32")
        bias = bias.astype("int32")
    elif case == "mixed":
        bias = bias.astype("float64")
    elif case == "non_contiguous":
        out = np.ones((1, 2, 3, 6), "float32")[..., ::2]
    elif case == "bias_shape":
        bias = np.ones(3, "float32")
    elif case == "residual_shape":
        residual = np.ones((1, 2, 3, 1), "float32")
    else:
        monkeypatch.setenv("HETVM_NUMBA", "0")
        cg._checked = False
    before = out.copy()
    assert not epilogue_direct.run(np, out, bias, residual, True)
    np.testing.assert_array_equal(out, before)  # nothing written


@pytest.mark.parametrize("activation", ["none", "relu"])
def test_conv2d_bias_add_act_kernel(activation):
    """A 1x1 and a 3x3 convolution through the fused kernels, the epilogue in one pass."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 8, 6, 6)).astype("float32")
    for kernel, pad in ((1, 0), (3, 1)):
        w = rng.standard_normal((4, 8, kernel, kernel)).astype("float32")
        b = rng.standard_normal(4).astype("float32")
        r = rng.standard_normal((1, 4, 6, 6)).astype("float32")
        attrs = {
            "strides": (1, 1),
            "padding": (pad,) * 4,
            "dilation": (1, 1),
            "groups": 1,
            "activation": activation,
        }
        plain = np.empty((1, 4, 6, 6), "float32")
        get_kernel("nn.conv2d", "cpu")(np, attrs, x, w, plain)
        want = _numpy(b, r, activation == "relu", plain)
        out = np.empty_like(plain)
        get_kernel("nn.conv2d_bias_add_act", "cpu")(np, attrs, x, w, b, r, out)
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
        want = _numpy(b, None, activation == "relu", plain)
        get_kernel("nn.conv2d_bias_act", "cpu")(np, attrs, x, w, b, out)
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
