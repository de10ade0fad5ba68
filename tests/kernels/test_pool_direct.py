"""The direct Numba pooling kernels (``hetvm/kernels/pool_direct.py``) against
the direct reference and the NumPy folds: random geometries (kernels, strides,
padding, dilation, ceil_mode's overhang, count_include_pad), float32/float64,
NaN and inf, empty batches, non-contiguous arrays, the bias and ReLU of
``nn.max_pool2d_bias_act``, and the dtypes left to the folds. Skipped where
Numba is not installed."""

import numpy as np
import pytest

from hetvm.kernels import codegen_numba as cg
from hetvm.kernels import get_kernel, pool_direct  # noqa: F401

from .test_kernels_numpy import pool_reference
from .test_pool_kernels import _attrs, _case

pytest.importorskip("numba")


pytestmark = pytest.mark.usefixtures("numba_on")


def _folds(monkeypatch, op, attrs, *args):
    """The same call on the NumPy folds (Numba off)."""
    with monkeypatch.context() as m:
        m.setenv("HETVM_NUMBA", "0")
        cg._checked = False
        get_kernel(op, "cpu")(np, attrs, *args)
    cg._checked = False


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_random_geometries(kind, dtype):
    rng = np.random.default_rng(50 + (kind == "avg"))
    for _ in range(150):
        k, s, d, p, h, w, ceil, oh, ow = _case(rng)
        n, c = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        include = bool(rng.integers(0, 2))
        x = rng.standard_normal((n, c, h, w)).astype(dtype)
        out = np.full((n, c, oh, ow), 7, dtype)
        assert pool_direct.applies(np, x, out)
        get_kernel(f"nn.{kind}_pool2d", "cpu")(np, _attrs(k, s, d, p, ceil, include), x, out)
        ref = pool_reference(x, k, s, p, d, oh, ow, kind, include)
        geometry = (k, s, d, p, h, w, ceil, include)
        if kind == "max":
            np.testing.assert_array_equal(out, ref.astype(dtype), err_msg=str(geometry))
        else:
            tol = 1e-5 if dtype == "float32" else 1e-12
            np.testing.assert_allclose(out, ref, rtol=tol, atol=tol, err_msg=str(geometry))


@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_nan_and_inf_match_the_folds(monkeypatch, kind, stride):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 9, 10)).astype("float32")
    x[0, 0, 0, 0], x[0, 1, 4, 4], x[1, 2, 8, 9], x[1, 0, 3, 3] = np.nan, np.inf, -np.inf, np.inf
    x[1, 0, 3, 4] = -np.inf  # inf - inf in a sum: NaN
    x[1, 1] = -np.inf  # a plane of -inf: max gives -inf, not the padding
    attrs = _attrs((3, 3), (stride, stride), (1, 1), (1, 1, 1, 1), True)
    oh = len(range(0, 9 + 2 - 3 + stride, stride))
    ow = len(range(0, 10 + 2 - 3 + stride, stride))
    want = np.empty((2, 3, oh, ow), "float32")
    _folds(monkeypatch, f"nn.{kind}_pool2d", attrs, x, want)
    out = np.empty_like(want)
    get_kernel(f"nn.{kind}_pool2d", "cpu")(np, attrs, x, out)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6, equal_nan=True)
    assert np.isnan(out).any() and np.isinf(out).any()


@pytest.mark.parametrize("activation", ["none", "relu"])
@pytest.mark.parametrize("stride", [1, 2])
def test_max_pool_bias_act(monkeypatch, activation, stride):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 5, 12, 11)).astype("float32")
    x[0, 0, 2, 2] = np.nan
    bias = rng.standard_normal(5).astype("float32")
    attrs = {
        **_attrs((3, 3), (stride, stride), (1, 1), (0, 0, 1, 1), False),
        "activation": activation,
    }
    oh, ow = (12 + 1 - 3) // stride + 1, (11 + 1 - 3) // stride + 1
    want = np.empty((2, 5, oh, ow), "float32")
    _folds(monkeypatch, "nn.max_pool2d_bias_act", attrs, x, bias, want)
    out = np.empty_like(want)
    get_kernel("nn.max_pool2d_bias_act", "cpu")(np, attrs, x, bias, out)
    np.testing.assert_array_equal(out, want)
    assert np.isnan(out).any()  # NaN stays NaN through bias and ReLU


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_non_contiguous_input_and_output(kind):
    rng = np.random.default_rng(9)
    base = rng.standard_normal((2, 6, 13, 16))
    x = base[:, ::2, 1:, ::-1]
    out_base = np.full((2, 3, 6, 8, 2), 5.0)
    out = out_base[..., 0]
    get_kernel(f"nn.{kind}_pool2d", "cpu")(
        np, _attrs((3, 3), (2, 2), (1, 1), (0, 1, 0, 1), False), x, out
    )
    ref = pool_reference(x, (3, 3), (2, 2), (0, 1, 0, 1), (1, 1), 6, 8, kind, False)
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)
    assert (out_base[..., 1] == 5.0).all()  # nothing written beside the view


def test_empty_batch():
    x = np.zeros((0, 3, 6, 6), "float32")
    out = np.zeros((0, 3, 3, 3), "float32")
    assert pool_direct.applies(np, x, out)
    get_kernel("nn.max_pool2d", "cpu")(
        np, _attrs((2, 2), (2, 2), (1, 1), (0, 0, 0, 0), False), x, out
    )


@pytest.mark.parametrize("dtype", ["int32", "uint8", "float16"])
def test_other_dtypes_keep_the_folds(dtype):
    rng = np.random.default_rng(10)
    x = rng.integers(0, 100, (1, 2, 7, 7)).astype(dtype)
    out = np.empty((1, 2, 4, 4), dtype)
    assert not pool_direct.applies(np, x, out)
    get_kernel("nn.max_pool2d", "cpu")(
        np, _attrs((3, 3), (2, 2), (1, 1), (1, 1, 1, 1), False), x, out
    )
    ref = pool_reference(x, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 4, 4, "max", False)
    np.testing.assert_array_equal(out, ref.astype(dtype))


def test_off_when_numba_mode_is_off(monkeypatch):
    monkeypatch.setenv("HETVM_NUMBA", "0")
    cg._checked = False
    x = np.ones((1, 2, 4, 4), "float32")
    assert not pool_direct.applies(np, x, np.ones((1, 2, 2, 2), "float32"))
