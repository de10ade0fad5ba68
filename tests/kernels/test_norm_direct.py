"""The direct layer-norm and softmax loops (``hetvm/kernels/norm_direct.py``)
against the NumPy kernels they replace: random shapes, float32/float64, NaN and
inf, empty tensors, one or several trailing axes, no scale/centre, and the calls
left to NumPy (float16, strided inputs, other axes, large tensors, Numba off).
The loops sum in float64, so results agree to rounding, not bit for bit.
Skipped where Numba is not installed."""

import numpy as np
import pytest

from hetvm.kernels import codegen_numba as cg
from hetvm.kernels import get_kernel, norm_direct

pytest.importorskip("numba")


pytestmark = pytest.mark.usefixtures("numba_on")

_LN = get_kernel("nn.layer_norm", "cpu")
_SM = get_kernel("nn.softmax", "cpu")
_TOL = {"float32": 2e-6, "float64": 1e-13}


def _numpy_kernel(monkeypatch, fn):
    """``fn()`` run with Numba off: the NumPy kernel's result, the reference."""
    with monkeypatch.context() as m, np.errstate(invalid="ignore"):
        m.setenv("HETVM_NUMBA", "0")
        cg._checked = False
        result = fn()
    cg._checked = False
    return result


def _layer_norm(x, gamma, beta, attrs):
    out = np.empty_like(x)
    _LN(np, attrs, x, gamma, beta, out)
    return out


def _softmax(x, axis=-1):
    out = np.empty_like(x)
    _SM(np, {"axis": axis}, x, out)
    return out


def _close(got, want, dtype):
    np.testing.assert_allclose(got, want, rtol=_TOL[dtype], atol=_TOL[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("seed", range(4))
def test_layer_norm_matches_numpy(monkeypatch, dtype, seed):
    rng = np.random.default_rng(seed)
    ndim = int(rng.integers(1, 5))
    shape = tuple(int(d) for d in rng.integers(1, 9, ndim))
    k = int(rng.integers(1, ndim + 1))
    axes = tuple(range(ndim - k, ndim))
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    gamma = rng.standard_normal(shape[ndim - k :]).astype(dtype)
    beta = rng.standard_normal(shape[ndim - k :]).astype(dtype)
    attrs = {"axes": axes, "epsilon": 1e-5}
    assert norm_direct.layer_norm_applies(np, x, np.empty_like(x), axes, gamma, beta, True, True)
    want = _numpy_kernel(monkeypatch, lambda: _layer_norm(x, gamma, beta, attrs))
    _close(_layer_norm(x, gamma, beta, attrs), want, dtype)
    for scale, center in ((False, True), (True, False), (False, False)):
        attrs2 = dict(attrs, scale=scale, center=center)
        want = _numpy_kernel(monkeypatch, lambda a=attrs2: _layer_norm(x, gamma, beta, a))
        _close(_layer_norm(x, gamma, beta, attrs2), want, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("seed", range(4))
def test_softmax_matches_numpy(monkeypatch, dtype, seed):
    rng = np.random.default_rng(10 + seed)
    ndim = int(rng.integers(1, 5))
    shape = tuple(int(d) for d in rng.integers(1, 9, ndim))
    x = (rng.standard_normal(shape) * 10).astype(dtype)
    assert norm_direct.softmax_applies(np, x, np.empty_like(x), ndim - 1)
    want = _numpy_kernel(monkeypatch, lambda: _softmax(x))
    _close(_softmax(x), want, dtype)
    _close(_softmax(x, ndim - 1), want, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_and_inf_rows(monkeypatch, dtype):
    """A NaN or an inf poisons its row in both kernels; the other rows are untouched."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 7)).astype(dtype)
    x[0, 3], x[1, 0], x[2, 6], x[3, :] = np.nan, np.inf, -np.inf, -np.inf
    x[4, 2], x[4, 5] = np.inf, np.nan
    gamma, beta = np.ones(7, dtype), np.zeros(7, dtype)
    attrs = {"axes": (1,)}
    for fn in (lambda: _layer_norm(x, gamma, beta, attrs), lambda: _softmax(x)):
        want = _numpy_kernel(monkeypatch, fn)
        got = fn()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        _close(got, want, dtype)
        assert np.isfinite(got[5]).all()


def test_empty_tensors():
    for shape in ((0, 8), (2, 0, 4), (3, 0)):
        x = np.zeros(shape, "float32")
        gamma = np.ones(shape[-1], "float32")
        assert _layer_norm(x, gamma, gamma, {"axes": (-1,)}).shape == shape
        assert _softmax(x).shape == shape


def test_in_place():
    """``out`` may be ``x`` itself: every loop reads an item before writing it."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 16)).astype("float32")
    gamma, beta = (
        rng.standard_normal(16).astype("float32"),
        rng.standard_normal(16).astype("float32"),
    )
    want_ln, want_sm = _layer_norm(x, gamma, beta, {"axes": (1,)}), _softmax(x)
    y = x.copy()
    _LN(np, {"axes": (1,)}, y, gamma, beta, y)
    _close(y, want_ln, "float32")
    y = x.copy()
    _SM(np, {"axis": 1}, y, y)
    _close(y, want_sm, "float32")


@pytest.mark.parametrize(
    "case", ["float16", "strided", "not_trailing", "gamma_dtype", "large", "off"]
)
def test_calls_left_to_numpy(monkeypatch, case):
    """Each call the loops do not cover is declined, and the kernel still gives
    NumPy's answer through its own passes."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 8)).astype("float32")
    axes, axis = (2,), 2
    gamma = np.ones(8, "float32")
    if case == "float16":
        x = x.astype("float16")
        gamma = gamma.astype("float16")
    elif case == "strided":
        x = rng.standard_normal((2, 3, 16)).astype("float32")[..., ::2]
    elif case == "not_trailing":
        axes, axis = (1,), 1
        gamma = np.ones(3, "float32")
    elif case == "gamma_dtype":
        gamma = gamma.astype("float64")
    elif case == "large":
        x = rng.standard_normal((2, norm_direct.SMALL)).astype("float32")
        axes, axis = (1,), 1
        gamma = np.ones(norm_direct.SMALL, "float32")
    else:
        monkeypatch.setenv("HETVM_NUMBA", "0")
        cg._checked = False
    out = np.empty(x.shape, x.dtype)
    assert not norm_direct.layer_norm_applies(np, x, out, axes, gamma, gamma, True, True)
    if case != "gamma_dtype":
        assert not norm_direct.softmax_applies(np, x, out, axis)
    ref = x.astype("float64")
    mean = ref.mean(axis=axes, keepdims=True)
    want = (ref - mean) / np.sqrt(((ref - mean) ** 2).mean(axis=axes, keepdims=True) + 1e-5)
    _LN(np, {"axes": axes}, x, gamma, np.zeros_like(gamma), out)
    np.testing.assert_allclose(out, want, rtol=2e-3, atol=2e-3)
    e = np.exp(ref - ref.max(axis=axis, keepdims=True))
    _SM(np, {"axis": axis}, x, out)
    np.testing.assert_allclose(out, e / e.sum(axis=axis, keepdims=True), rtol=2e-3, atol=2e-3)


def test_strided_output_left_to_numpy():
    x = np.ones((2, 8), "float32")
    out = np.empty((2, 16), "float32")[:, ::2]
    assert not norm_direct.softmax_applies(np, x, out, 1)
    assert not norm_direct.layer_norm_applies(np, x, out, (1,), x[0], x[0], True, True)
