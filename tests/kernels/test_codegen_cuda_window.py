"""Generated CUDA pooling, depthwise convolution and conv epilogues
(codegen_cuda_window) against the NumPy kernels: padding, strides, dilation,
ceil_mode, count_include_pad, NaN, windows wholly in padding, infinite weights
meeting padding, bias and ReLU, integer max pooling, calls left to the NumPy
kernels, a kernel that does not compile, and nvcc compiling every kernel made.

``cuda_xp`` (tests/kernels/conftest.py) is the CuPy stand-in, and CuPy where a
GPU is at hand."""

import numpy as np
import pytest

from hetvm.kernels import codegen_cuda_window
from hetvm.kernels.registry import bind_kernel, get_kernel
from hetvm.testing.cuda_host import (
    NVCC,
    FakeCupy,
    RecordingCupy,
    UncompilableCupy,
    nvcc_check_kernels,
)

RNG = np.random.default_rng(11)
TOL = {"float32": {"rtol": 1e-5, "atol": 1e-5}, "float64": {"rtol": 1e-12, "atol": 1e-12}, "int32": {}}


def _to(xp, a):
    return a if isinstance(xp, FakeCupy) else xp.asarray(a)


def _host(a):
    return np.asarray(a) if isinstance(a, np.ndarray) else a.get()


def _run(xp, op, attrs, inputs, out_shape, dtype):
    """The generated kernel's output and the NumPy kernel's."""
    got = xp.full(out_shape, 7, dtype)
    with np.errstate(all="ignore"):
        bind_kernel(op, "cuda", xp, attrs)(*(_to(xp, a) for a in inputs), got)
        want = np.empty(out_shape, dtype)
        get_kernel(op, "cpu")(np, attrs, *inputs, want)
    return _host(got), want


def _launched(xp, name):
    """How many launches kernels named ``hetvm_<name>`` made (the stand-in only)."""
    if not isinstance(xp, RecordingCupy):
        return None
    return sum(k.calls for k in xp.made if k.name == f"hetvm_{name}")


def _image(dtype, shape=(2, 3, 9, 11)):
    x = RNG.standard_normal(shape).astype(dtype)
    if dtype.startswith("float"):
        x[0, 0, 2, 2] = np.nan
        x[1, 2, 0, 0] = np.inf
        x[1, 1, 4, 5] = -np.inf
    return x


POOLS = [
    ({"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)}, (5, 6)),
    ({"pool_size": (2, 2), "strides": (2, 2), "ceil_mode": True}, (5, 6)),
    ({"pool_size": (3, 3), "strides": (1, 1), "padding": (1, 1, 1, 1), "dilation": (2, 2)}, (7, 9)),
    ({"pool_size": (3, 2), "strides": (2, 3), "padding": (1, 0, 2, 1)}, (6, 4)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("attrs, hw", POOLS)
@pytest.mark.parametrize("include_pad", [False, True])
def test_average_pooling(cuda_xp, dtype, attrs, hw, include_pad):
    attrs = {**attrs, "count_include_pad": include_pad}
    got, want = _run(cuda_xp, "nn.avg_pool2d", attrs, [_image(dtype)], (2, 3, *hw), dtype)
    np.testing.assert_allclose(got, want, equal_nan=True, **TOL[dtype])
    assert _launched(cuda_xp, "avg_pool2d") in (None, 1)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("attrs, hw", POOLS)
def test_max_pooling(cuda_xp, dtype, attrs, hw):
    got, want = _run(cuda_xp, "nn.max_pool2d", attrs, [_image(dtype) * (10 if dtype == "int32" else 1)],
                     (2, 3, *hw), dtype)  # fmt: skip
    np.testing.assert_array_equal(got, want)
    assert _launched(cuda_xp, "max_pool2d") in (None, 1)


def test_a_max_window_wholly_in_padding_is_the_lowest_value(cuda_xp):
    attrs = {"pool_size": (2, 2), "strides": (3, 3), "padding": (2, 2, 2, 2)}
    got, want = _run(cuda_xp, "nn.max_pool2d", attrs, [np.ones((1, 1, 2, 2), "float32")], (1, 1, 2, 2), "float32")
    np.testing.assert_array_equal(got, want)
    assert got[0, 0, 0, 0] == -np.inf


@pytest.mark.parametrize("relu", [False, True])
def test_max_pooling_with_bias_and_relu(cuda_xp, relu):
    attrs = {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1), "activation": "relu" if relu else "none"}
    bias = RNG.standard_normal(3).astype("float32")
    got, want = _run(cuda_xp, "nn.max_pool2d_bias_act", attrs, [_image("float32"), bias], (2, 3, 5, 6), "float32")
    np.testing.assert_allclose(got, want, equal_nan=True, **TOL["float32"])
    assert _launched(cuda_xp, "max_pool2d") in (None, 1)


DEPTHWISE = [
    ({"strides": (1, 1), "padding": (1, 1, 1, 1)}, 1, (3, 3), (9, 11)),
    ({"strides": (2, 2), "padding": (1, 1, 1, 1)}, 1, (3, 3), (5, 6)),
    ({"strides": (1, 1), "padding": (2, 2, 2, 2), "dilation": (2, 2)}, 2, (3, 3), (9, 11)),
    ({"strides": (2, 1), "padding": (2, 1, 2, 1)}, 1, (5, 3), (5, 11)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("attrs, mult, k, hw", DEPTHWISE)
@pytest.mark.parametrize("op", ["nn.conv2d", "nn.conv2d_bias_act"])
def test_depthwise_convolution(cuda_xp, dtype, attrs, mult, k, hw, op):
    x = RNG.standard_normal((2, 3, 9, 11)).astype(dtype)
    x[0, 1, 3, 3] = np.nan
    weight = RNG.standard_normal((3 * mult, 1, *k)).astype(dtype)
    weight[0, 0, 0, 0] = np.inf  # meets the padding: 0 * inf is NaN on every device
    attrs = {**attrs, "groups": 3}
    inputs = [x, weight]
    if op == "nn.conv2d_bias_act":
        attrs["activation"] = "relu"
        inputs.append(RNG.standard_normal(3 * mult).astype(dtype))
    got, want = _run(cuda_xp, op, attrs, inputs, (2, 3 * mult, *hw), dtype)
    np.testing.assert_allclose(got, want, equal_nan=True, **TOL[dtype])
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert _launched(cuda_xp, "depthwise_conv2d") in (None, 1)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("activation", ["none", "relu"])
def test_convolution_epilogues(cuda_xp, dtype, residual, activation):
    x = RNG.standard_normal((2, 3, 6, 7)).astype(dtype)
    weight = RNG.standard_normal((4, 3, 3, 3)).astype(dtype)
    bias = RNG.standard_normal(4).astype(dtype)
    attrs = {"strides": (1, 1), "padding": (1, 1, 1, 1), "groups": 1, "activation": activation}
    op, inputs = "nn.conv2d_bias_act", [x, weight, bias]
    if residual:
        op, inputs = "nn.conv2d_bias_add_act", inputs + [RNG.standard_normal((2, 4, 6, 7)).astype(dtype)]
    got, want = _run(cuda_xp, op, attrs, inputs, (2, 4, 6, 7), dtype)
    np.testing.assert_allclose(got, want, **TOL[dtype])
    assert _launched(cuda_xp, "epilogue") in (None, 1)


@pytest.mark.parametrize("activation", ["none", "relu"])
def test_scale_shift(cuda_xp, activation):
    x = _image("float32")
    scale, shift = (RNG.standard_normal(3).astype("float32") for _ in range(2))
    got, want = _run(cuda_xp, "nn.scale_shift_act", {"activation": activation}, [x, scale, shift], x.shape, "float32")
    np.testing.assert_allclose(got, want, equal_nan=True, **TOL["float32"])
    assert _launched(cuda_xp, "epilogue") in (None, 1)


@pytest.mark.parametrize("wide", [False, True])
def test_32_and_64_bit_indexing_agree(cuda_xp, monkeypatch, wide):
    if wide:  # as for a tensor of 2**31 elements or more
        monkeypatch.setattr(codegen_cuda_window, "_NARROW_MAX", 0)
    x = _image("float32")
    got, want = _run(cuda_xp, "nn.avg_pool2d", POOLS[0][0], [x], (2, 3, 5, 6), "float32")
    np.testing.assert_allclose(got, want, equal_nan=True, **TOL["float32"])
    weight = RNG.standard_normal((3, 1, 3, 3)).astype("float32")
    got, want = _run(cuda_xp, "nn.conv2d", {"strides": (2, 2), "padding": (1, 1, 1, 1), "groups": 3}, [x, weight],
                     (2, 3, 5, 6), "float32")  # fmt: skip
    np.testing.assert_allclose(got, want, equal_nan=True, **TOL["float32"])
    if isinstance(cuda_xp, RecordingCupy):
        assert all(("typedef long long hv_index;" if wide else "typedef int hv_index;") in k.operation
                   for k in cuda_xp.made)  # fmt: skip


def test_uncovered_calls_run_the_numpy_kernels():
    xp = RecordingCupy()
    x = RNG.integers(-9, 9, (1, 2, 6, 6)).astype("int32")  # integer average pooling
    got, want = _run(xp, "nn.avg_pool2d", {"pool_size": (2, 2), "strides": (2, 2)}, [x], (1, 2, 3, 3), "int32")
    np.testing.assert_array_equal(got, want)
    xh = RNG.standard_normal((1, 2, 6, 6)).astype("float16")  # half precision depthwise
    wh = RNG.standard_normal((2, 1, 3, 3)).astype("float16")
    got, want = _run(xp, "nn.conv2d", {"strides": (1, 1), "padding": (1, 1, 1, 1), "groups": 2}, [xh, wh],
                     (1, 2, 6, 6), "float16")  # fmt: skip
    np.testing.assert_array_equal(got, want)
    assert [k.name for k in xp.made] == []


def test_a_kernel_that_does_not_compile_falls_back_with_a_warning(caplog):
    attrs = {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)}
    xp = UncompilableCupy()
    with caplog.at_level("WARNING", logger="hetvm.codegen"):
        got, want = _run(xp, "nn.max_pool2d", attrs, [_image("float32")], (2, 3, 5, 6), "float32")
        again, _ = _run(xp, "nn.max_pool2d", attrs, [_image("float32")], (2, 3, 5, 6), "float32")
    np.testing.assert_array_equal(got, want)
    assert sum("failed to compile" in r.getMessage() for r in caplog.records) == 1


def test_every_kernel_compiles_for_the_gpu(monkeypatch):
    if NVCC is None:
        pytest.skip("no nvcc")
    xp = RecordingCupy()
    for dtype in ("float32", "float64"):
        x = _image(dtype)
        for attrs, hw in POOLS[:1]:
            for include_pad in (False, True):
                _run(xp, "nn.avg_pool2d", {**attrs, "count_include_pad": include_pad}, [x], (2, 3, *hw), dtype)
            _run(xp, "nn.max_pool2d", attrs, [x], (2, 3, *hw), dtype)
            _run(xp, "nn.max_pool2d_bias_act", {**attrs, "activation": "relu"}, [x, x[0, :, 0, 0]], (2, 3, *hw), dtype)
        w = RNG.standard_normal((3, 1, 3, 3)).astype(dtype)
        _run(xp, "nn.conv2d_bias_act", {"strides": (1, 1), "padding": (1, 1, 1, 1), "groups": 3, "activation": "relu"},
             [x, w, w[:, 0, 0, 0]], x.shape, dtype)  # fmt: skip
        _run(xp, "nn.conv2d_bias_add_act", {"strides": (1, 1), "padding": (1, 1, 1, 1), "groups": 1,
             "activation": "relu"}, [x, np.ones((3, 3, 3, 3), dtype), w[:, 0, 0, 0], x], x.shape, dtype)  # fmt: skip
        _run(xp, "nn.scale_shift_act", {"activation": "none"}, [x, w[:, 0, 0, 0], w[:, 0, 0, 1]], x.shape, dtype)
    _run(xp, "nn.max_pool2d", POOLS[0][0], [_image("int64")], (2, 3, 5, 6), "int64")
    monkeypatch.setattr(codegen_cuda_window, "_NARROW_MAX", 0)  # 64-bit indexing
    _run(xp, "nn.max_pool2d", POOLS[0][0], [_image("int64")], (2, 3, 5, 6), "int64")
    _run(xp, "nn.conv2d", {"strides": (1, 1), "padding": (1, 1, 1, 1), "groups": 3}, [x, w], x.shape, dtype)
    assert len(xp.made) == 2 * 7 + 3
    errors = nvcc_check_kernels(xp.made)
    assert errors == "", errors
