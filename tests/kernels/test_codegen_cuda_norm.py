"""Generated CUDA softmax, log-softmax, layer and RMS norm (codegen_cuda_norm)
against the NumPy kernels: NaN and infinities, rows wholly -inf, large values,
any axis, empty tensors, float32 and float64, dtypes left to the NumPy kernels,
a kernel that does not compile, and nvcc compiling every kernel made.

``cuda_xp`` (tests/kernels/conftest.py) is the CuPy stand-in, whose reduction
sums in order (a GPU sums in a tree: the tolerances allow for both), and CuPy
where a GPU is at hand."""

import numpy as np
import pytest

from hetvm.kernels import codegen_cuda_norm
from hetvm.kernels.registry import bind_kernel, get_kernel
from hetvm.testing.cuda_host import (
    NVCC,
    FakeCupy,
    RecordingCupy,
    UncompilableCupy,
    nvcc_check_kernels,
)

RNG = np.random.default_rng(7)
TOL = {"float32": {"rtol": 2e-5, "atol": 2e-6}, "float64": {"rtol": 1e-12, "atol": 1e-13}}


def _to(xp, a):
    return a if isinstance(xp, FakeCupy) else xp.asarray(a)


def _host(a):
    return np.asarray(a) if isinstance(a, np.ndarray) else a.get()


def _with_specials(x, shift=True):
    """Specials in rows of their own: a NaN, +inf, a row of -inf, and (``shift``)
    values whose exp overflows without the max shift (not for layer norm: a
    float32 mean of values near 1000 is only good to ~1e-4, in either order)."""
    x = x.copy()
    flat = x.reshape(-1, x.shape[-1])
    if flat.shape[0] >= 4:
        flat[0, -1] = np.nan
        flat[1, 0] = np.inf
        flat[2, :] = -np.inf
        if shift:
            flat[3, :] += 1000
    return x


def _run(xp, op, attrs, x, *params, out_dtype=None):
    """(generated output, NumPy kernel's output, the bound kernel)."""
    kernel = bind_kernel(op, "cuda", xp, attrs)
    got = xp.empty(x.shape, out_dtype or x.dtype)
    with np.errstate(all="ignore"):
        kernel(_to(xp, x), *(_to(xp, p) for p in params), got)
        want = np.empty(x.shape, out_dtype or x.dtype)
        get_kernel(op, "cpu")(np, attrs, x, *params, want)
    return _host(got), want, kernel


def _generated(kernel):
    return isinstance(kernel, codegen_cuda_norm._NormKernel) and any(kernel.first_launch.compiled.values())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ["nn.softmax", "nn.log_softmax"])
@pytest.mark.parametrize("shape, axis", [((6, 33), -1), ((2, 5, 7), 1), ((5, 3), 0), ((4, 1), -1), ((8, 300), -1)])
def test_softmax_matches_the_numpy_kernel(cuda_xp, op, dtype, shape, axis):
    x = _with_specials(RNG.standard_normal(shape).astype(dtype) * 4)
    got, want, kernel = _run(cuda_xp, op, {"axis": axis}, x)
    assert _generated(kernel)
    np.testing.assert_allclose(got, want, equal_nan=True, **TOL[dtype])
    assert np.array_equal(np.isnan(got), np.isnan(want))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axes, scale, center", [((-1,), True, True), ((1, 2), True, False), ((-1,), False, True),
                                                 ((2,), False, False), ((0, 2), True, True)])  # fmt: skip
def test_layer_norm_matches_the_numpy_kernel(cuda_xp, dtype, axes, scale, center):
    x = _with_specials(RNG.standard_normal((4, 6, 40)).astype(dtype) * 3 + 5, shift=False)
    norm_shape = tuple(x.shape[a] for a in sorted(a % 3 for a in axes))
    gamma, beta = (RNG.standard_normal(norm_shape).astype(dtype) for _ in range(2))
    attrs = {"axes": axes, "epsilon": 1e-5, "scale": scale, "center": center}
    got, want, kernel = _run(cuda_xp, "nn.layer_norm", attrs, x, gamma, beta)
    assert _generated(kernel)
    np.testing.assert_allclose(got, want, equal_nan=True, **TOL[dtype])


@pytest.mark.parametrize("dtypes", [("float32",) * 3, ("float64",) * 3, ("float32", "float64", "float32"),
                                    ("float64", "float32", "float32")])  # fmt: skip
def test_rms_norm_matches_the_numpy_kernel_in_float64(cuda_xp, dtypes):
    x_dtype, w_dtype, out_dtype = dtypes
    x = _with_specials(RNG.standard_normal((5, 3, 24)).astype(x_dtype), shift=False)
    weight = RNG.standard_normal(24).astype(w_dtype)
    got, want, kernel = _run(cuda_xp, "nn.rms_norm", {"axes": (-1,), "epsilon": 1e-6}, x, weight, out_dtype=out_dtype)
    assert _generated(kernel)
    np.testing.assert_allclose(got, want, equal_nan=True, **TOL[out_dtype])


def test_non_contiguous_and_broadcast_inputs(cuda_xp):
    x = np.ascontiguousarray(RNG.standard_normal((16, 9)).astype("float32")).T  # (9, 16), strided
    got, want, _ = _run(cuda_xp, "nn.softmax", {"axis": -1}, x)
    np.testing.assert_allclose(got, want, **TOL["float32"])
    got, want, _ = _run(cuda_xp, "nn.layer_norm", {"axes": (-1,), "epsilon": 1e-3}, x,
                        np.ones(16, "float32"), np.zeros(16, "float32"))  # fmt: skip
    np.testing.assert_allclose(got, want, **TOL["float32"])


def test_empty_tensors_launch_nothing(cuda_xp):
    for shape in [(0, 5), (3, 0)]:
        got, want, kernel = _run(cuda_xp, "nn.softmax", {"axis": -1}, np.zeros(shape, "float32"))
        assert got.shape == want.shape == shape and kernel.first_launch.compiled == {}


def test_uncovered_dtypes_run_the_numpy_kernels():
    xp = RecordingCupy()
    x = RNG.standard_normal((3, 8)).astype("float16")
    got, want, kernel = _run(xp, "nn.softmax", {"axis": -1}, x)
    np.testing.assert_array_equal(got, want)
    x = RNG.standard_normal((3, 8)).astype("float32")
    gamma = np.ones(8, "float64")  # gamma's dtype is not x's
    got, want, kernel = _run(xp, "nn.layer_norm", {"axes": (-1,)}, x, gamma, np.zeros(8, "float32"))
    np.testing.assert_array_equal(got, want)
    assert xp.made == [] and kernel.first_launch.compiled == {}


def test_numpy_arrays_keep_the_cpu_kernels():
    for op in ("nn.softmax", "nn.log_softmax", "nn.layer_norm", "nn.rms_norm"):
        assert not isinstance(bind_kernel(op, "cpu", np, {"axes": (-1,), "epsilon": 1e-5}),
                              codegen_cuda_norm._NormKernel)  # fmt: skip


def test_a_kernel_that_does_not_compile_falls_back_with_a_warning(caplog):
    x = _with_specials(RNG.standard_normal((6, 10)).astype("float32"))
    with caplog.at_level("WARNING", logger="hetvm.codegen"):
        got, want, kernel = _run(UncompilableCupy(), "nn.softmax", {"axis": -1}, x)
        kernel(x, np.empty_like(x))  # no second try, no second warning
    np.testing.assert_array_equal(got, want)
    assert kernel.first_launch.compiled == {"float32": False}
    assert [r.getMessage() for r in caplog.records if "failed to compile" in r.getMessage()] == [
        "generated CUDA kernel failed to compile (nvrtc: error: identifier is undefined); "
        "using the step-by-step kernels"
    ]


def test_every_kernel_compiles_for_the_gpu():
    if NVCC is None:
        pytest.skip("no nvcc")
    xp = RecordingCupy()
    x = RNG.standard_normal((3, 8))
    for dtype in ("float32", "float64"):
        xd = x.astype(dtype)
        for op in ("nn.softmax", "nn.log_softmax"):
            _run(xp, op, {"axis": -1}, xd)
        for scale, center in [(True, True), (False, False)]:
            _run(xp, "nn.layer_norm", {"axes": (-1,), "scale": scale, "center": center}, xd, xd[0], xd[0])
        _run(xp, "nn.rms_norm", {"axes": (-1,), "epsilon": 1e-6}, xd, xd[0])
    # per dtype: max, exp-sum, 2 finishes; mean, centred mean, 2 finishes; square mean, finish
    assert len(xp.made) == 2 * 10
    errors = nvcc_check_kernels(xp.made)
    assert errors == "", errors
