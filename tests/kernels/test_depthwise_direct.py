"""The direct Numba depthwise kernel (``hetvm/kernels/depthwise_direct.py``)
against a float64 reference and the NumPy path: random geometries (kernels 1-5,
strides 1-3, dilation, asymmetric padding, channel multipliers, batches), bias
and ReLU fused, NaN and inf, empty batches, non-contiguous arrays, and the
dtypes it leaves to the NumPy path. Skipped where Numba is not installed."""

import numpy as np
import pytest

from hetvm.kernels import codegen_numba as cg
from hetvm.kernels import depthwise_direct
from hetvm.kernels.conv import Geometry, convolve, convolve_direct
from hetvm.kernels.registry import get_kernel

from .test_depthwise_kernels import random_case, reference

pytest.importorskip("numba")


pytestmark = pytest.mark.usefixtures("numba_on")


def _numpy_path(monkeypatch, geo, x, w, bias=None, relu=False):
    """The same call on the NumPy depthwise path (Numba off)."""
    with monkeypatch.context() as m:
        m.setenv("HETVM_NUMBA", "0")
        cg._checked = False
        out = np.empty(_out_shape(geo, x, w), x.dtype)
        if not convolve(np, geo, x, w, out, bias) and bias is not None:
            out += bias.reshape(1, -1, 1, 1)
        if relu:
            np.maximum(out, 0, out=out)
    cg._checked = False
    return out


def _out_shape(geo, x, w):
    (s0, s1), (d0, d1), (pt, pl, pb, pr) = geo.strides, geo.dilation, geo.pads
    kh, kw = w.shape[2:]
    return (x.shape[0], w.shape[0], (x.shape[2] + pt + pb - d0 * (kh - 1) - 1) // s0 + 1,
            (x.shape[3] + pl + pr - d1 * (kw - 1) - 1) // s1 + 1)  # fmt: skip


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_direct_random_geometries(dtype):
    rng = np.random.default_rng(11)
    for _ in range(150):
        x_shape, w_shape, s, d, pads = random_case(rng)
        x = rng.standard_normal(x_shape).astype(dtype)
        w = rng.standard_normal(w_shape).astype(dtype)
        bias = rng.standard_normal(w_shape[0]).astype(dtype) if rng.random() < 0.5 else None
        relu = bool(rng.random() < 0.5)
        want = reference(x, w, s, d, pads, bias)
        want = np.maximum(want, 0) if relu else want
        out = np.full(want.shape, np.nan, dtype)
        geo = Geometry(s, d, pads, x_shape[1])
        assert depthwise_direct.applies(np, x, w, out, x_shape[1], bias)
        assert convolve_direct(np, geo, x, w, out, bias, relu)
        tol = 1e-4 if dtype == "float32" else 1e-10
        np.testing.assert_allclose(
            out, want, rtol=tol, atol=tol, err_msg=f"{x_shape} {w_shape} {s} {d} {pads}"
        )


def test_convolve_takes_the_direct_path_and_adds_the_bias():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 6, 9, 9)).astype("float32")
    w = rng.standard_normal((12, 1, 3, 3)).astype("float32")
    bias = rng.standard_normal(12).astype("float32")
    out = np.empty((2, 12, 5, 5), "float32")
    assert convolve(np, Geometry((2, 2), (1, 1), (1, 1, 1, 1), 6), x, w, out, bias)  # bias added
    np.testing.assert_allclose(
        out, reference(x, w, (2, 2), (1, 1), (1, 1, 1, 1), bias), rtol=1e-4, atol=1e-4
    )


@pytest.mark.parametrize("stride", [1, 2])
def test_nan_and_inf_match_the_numpy_path(monkeypatch, stride):
    """NaN and inf in the input (at the borders too), and an infinite weight that
    meets the padding: both paths multiply padding by zero, so both give NaN."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 4, 8, 8)).astype("float32")
    x[0, 0, 0, 0], x[0, 1, 3, 4], x[0, 2, 7, 7], x[0, 3, 2, 2] = np.nan, np.inf, -np.inf, np.inf
    x[0, 3, 2, 3] = -np.inf  # inf - inf: NaN
    w = rng.standard_normal((4, 1, 3, 3)).astype("float32")
    w[3, 0, 0, 0] = np.inf
    bias = rng.standard_normal(4).astype("float32")
    geo = Geometry((stride, stride), (1, 1), (1, 1, 1, 1), 4)
    for relu in (False, True):
        want = _numpy_path(monkeypatch, geo, x, w, bias, relu)
        out = np.empty(want.shape, "float32")
        assert convolve_direct(np, geo, x, w, out, bias, relu)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5, equal_nan=True)
        assert np.isnan(out).any() and np.isinf(out).any()


def test_relu_keeps_nan():
    x = np.full((1, 2, 3, 3), np.nan, "float32")
    w = np.ones((2, 1, 1, 1), "float32")
    out = np.zeros((1, 2, 3, 3), "float32")
    assert convolve_direct(np, Geometry((1, 1), (1, 1), (0, 0, 0, 0), 2), x, w, out, None, True)
    assert np.isnan(out).all()


def test_non_contiguous_input_and_output():
    rng = np.random.default_rng(4)
    base = rng.standard_normal((2, 10, 12, 14)).astype("float64")
    x = base[:, ::2, 1:, ::-1]  # strided channels, offset rows, reversed columns
    w = rng.standard_normal((10, 2, 3, 3))[:, :1]  # a sliced weight
    bias = rng.standard_normal(10)
    want = np.maximum(reference(x, w, (1, 1), (1, 1), (1, 1, 1, 1), bias), 0)
    out_base = np.full((2, 10, 11, 14, 2), np.nan)
    out = out_base[..., 0]
    assert convolve_direct(np, Geometry((1, 1), (1, 1), (1, 1, 1, 1), 5), x, w, out, bias, True)
    np.testing.assert_allclose(out, want, rtol=1e-10, atol=1e-10)
    assert np.isnan(out_base[..., 1]).all()  # nothing written beside the view


def test_empty_batch():
    x = np.zeros((0, 3, 5, 5), "float32")
    w = np.ones((3, 1, 3, 3), "float32")
    out = np.zeros((0, 3, 5, 5), "float32")
    assert convolve_direct(np, Geometry((1, 1), (1, 1), (1, 1, 1, 1), 3), x, w, out, None, False)


@pytest.mark.parametrize(
    "dtypes", [("int32", "int32"), ("float32", "float64"), ("float16", "float16")]
)
def test_other_dtypes_keep_the_numpy_path(dtypes):
    rng = np.random.default_rng(5)
    x = rng.integers(-5, 5, (1, 3, 6, 6)).astype(dtypes[0])
    w = rng.integers(-3, 3, (3, 1, 3, 3)).astype(dtypes[1])
    geo = Geometry((1, 1), (1, 1), (1, 1, 1, 1), 3)
    acc = np.result_type(x, w)
    out = np.empty((1, 3, 6, 6), acc)
    assert not convolve_direct(np, geo, x, w, out, None, False)
    convolve(np, geo, x, w, out)
    np.testing.assert_array_equal(out, reference(x, w, (1, 1), (1, 1), (1, 1, 1, 1)).astype(acc))


def test_off_without_numba_mode(monkeypatch):
    monkeypatch.setenv("HETVM_NUMBA", "0")
    cg._checked = False
    x = np.ones((1, 2, 4, 4), "float32")
    assert not depthwise_direct.applies(
        np, x, np.ones((2, 1, 3, 3), "float32"), np.ones((1, 2, 4, 4), "float32"), 2
    )


@pytest.mark.parametrize("activation", ["none", "relu"])
def test_conv2d_bias_act_kernel(activation):
    rng = np.random.default_rng(6)
    x, w, b = (
        rng.standard_normal(s).astype("float32") for s in ((1, 16, 14, 14), (16, 1, 3, 3), (16,))
    )
    attrs = {
        "strides": (1, 1),
        "padding": (1, 1, 1, 1),
        "dilation": (1, 1),
        "groups": 16,
        "activation": activation,
    }
    want = reference(x, w, (1, 1), (1, 1), (1, 1, 1, 1), b)
    want = np.maximum(want, 0) if activation == "relu" else want
    out = np.empty(want.shape, "float32")
    get_kernel("nn.conv2d_bias_act", "cpu")(np, attrs, x, w, b, out)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_parallel_variant(monkeypatch):
    """The threaded loop (compiled only here: several seconds) gives the serial result."""
    import numba

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one Numba thread")
    monkeypatch.setattr(depthwise_direct, "PARALLEL_MIN", 1)
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 8, 10, 10)).astype("float32")
    w = rng.standard_normal((16, 1, 3, 3)).astype("float32")
    b = rng.standard_normal(16).astype("float32")
    had = numba.get_num_threads()
    numba.set_num_threads(2)
    try:
        out = np.empty((2, 16, 5, 5), "float32")
        assert convolve_direct(np, Geometry((2, 2), (1, 1), (1, 1, 1, 1), 8), x, w, out, b, True)
    finally:
        numba.set_num_threads(had)
    want = np.maximum(reference(x, w, (2, 2), (1, 1), (1, 1, 1, 1), b), 0)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_the_parallel_loop_waits_after_a_shared_out_product(monkeypatch):
    """Under a budget of 2, a product shared out by hetvm's workers keeps the
    next depthwise call on the serial loop (see hetvm/runtime/threads.py);
    PRODUCTS_AWAKE_S later the parallel loop is taken again. Same result
    either way."""
    import numba

    from hetvm.runtime import threads

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one Numba thread")
    jit = depthwise_direct._loops()
    taken = []

    def parallel(*args):  # the serial loop, recorded (the threaded one compiles for seconds)
        taken.append("parallel")
        jit.serial(*args)

    monkeypatch.setattr(jit, "parallel", parallel)
    monkeypatch.setattr(depthwise_direct, "PARALLEL_MIN", 1)
    monkeypatch.setattr(threads, "_products_until", 0.0)
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 4, 6, 6)).astype("float32")
    w = rng.standard_normal((4, 1, 3, 3)).astype("float32")
    want = reference(x, w, (1, 1), (1, 1), (1, 1, 1, 1))
    geo = Geometry((1, 1), (1, 1), (1, 1, 1, 1), 4)
    with threads.ThreadBudget(2):
        for awake in (True, False):
            if awake:
                threads.parallel_product()  # a product is shared out
            else:
                monkeypatch.setattr(threads, "_products_until", 0.0)  # ... PRODUCTS_AWAKE_S ago
            out = np.empty((1, 4, 6, 6), "float32")
            assert convolve_direct(np, geo, x, w, out, None, False)
            np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
            assert taken == ([] if awake else ["parallel"])
