"""float32 exp, tanh, erf and GELUs without libm (``hetvm/kernels/math32.py``):
the committed coefficients are ``tools/fit_math32.py``'s fit, the polynomials
are as accurate as its docstring says, and the generated kernels are within one
float32 ulp of a float64 reference over a strided sweep of every float32 bit
pattern (subnormals, NaN, infinities, -0.0 included) and match the NumPy kernels."""

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from hetvm.kernels import math32

F32 = "float32"
_TOOL = Path(__file__).resolve().parents[2] / "tools" / "fit_math32.py"


def _fit_module():
    spec = importlib.util.spec_from_file_location("fit_math32", _TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_committed_coefficients_are_the_fit():
    tool = _fit_module()
    # the values, not the coefficients: a degree-20 fit's power coefficients move
    # by 1e-5 relative with the LAPACK build, its values by 1e-14
    t = np.linspace(-1.0, 1.0, 10_001)
    fitted, committed = (np.polynomial.polynomial.polyval(t, c) for c in (tool.fit(), math32.ERF_F))
    np.testing.assert_allclose(fitted, committed, rtol=1e-12)
    near, far = tool.fit_gelu()
    assert (tool.GELU_NEAR, tool.GELU_FAR) == (math32.GELU_NEAR, math32.GELU_FAR)
    # float32 values: equal, or one float32 rounding apart where the fit's last bits move
    np.testing.assert_allclose(near, math32.GELU_P, rtol=2e-7)
    np.testing.assert_allclose(far, math32.GELU_Q, rtol=2e-7)


def test_the_polynomials_are_as_accurate_as_documented():
    u = np.linspace(0.0, 16.0, 20_001)[1:]
    s = np.sqrt(u)
    f = np.polynomial.polynomial.polyval(u / 8.0 - 1.0, math32.ERF_F)
    ref = np.array([math.erf(x) / x for x in s])
    assert np.max(np.abs(f - ref) / ref) < 1e-10
    z = np.linspace(0.0, math32.GELU_NEAR, 20_001)[1:]
    p = np.polynomial.polynomial.polyval(z * z, math32.GELU_P)
    ref = np.array([math.erf(x) / x for x in z])
    assert np.max(np.abs(p - ref) / ref) < 1e-7  # float32 coefficients: about half an ulp
    w = np.linspace(math32.GELU_NEAR, math32.GELU_FAR, 20_001)
    t = 1.0 / (1.0 + 0.5 * w)
    q = t * np.polynomial.polynomial.polyval(t, math32.GELU_Q)
    ref = np.array([math.erfc(x) * math.exp(x * x) for x in w])
    assert np.max(np.abs(q - ref) / ref) < 1e-7


# -- generated kernels (Numba) ---------------------------------------------------------
def _sweep():
    """Every 4,099th float32 bit pattern (about a million, both signs, subnormals
    and NaNs among them), the specials, and dense stretches where each function
    is delicate: exp's subnormal and overflow edges, tanh and erf near 0, GELU's
    tail where 1 + erf would cancel."""
    bits = np.arange(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-38, 88.72283, 88.72284,
                        -87.33655, -103.27893, -103.97208, -104.0, 4.0, -4.0, 3.9999998, 9.0, 20.0], F32)  # fmt: skip
    dense = [np.linspace(-105, -85, 200_001), np.linspace(85, 90, 50_001), np.linspace(-1e-3, 1e-3, 20_001),
             np.linspace(-16, 6, 200_001)]  # fmt: skip
    return np.concatenate([bits, special, *(d.astype(F32) for d in dense)])


def _reference(op, x):
    """The float64 value of ``op`` at float32 ``x``, by forms without cancellation."""
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        if op == "exp":
            return np.exp(x64)
        if op == "tanh":
            return np.tanh(x64)
        if op == "erf":
            return np.array([math.erf(v) for v in x64])
        if op == "nn.gelu":  # 0.5 x erfc(-x / sqrt 2), NaN at -inf as NumPy's 0.5 x (1 + erf)
            return 0.5 * x64 * np.array([math.erfc(-v / math.sqrt(2.0)) for v in x64]) * np.where(x64 == -np.inf, np.nan, 1)
        u = math.sqrt(2.0 / math.pi) * (x64 + 0.044715 * x64**3)  # tanh-GELU as x sigmoid(2u)
        e = np.exp(-2.0 * np.abs(u))
        return x64 * np.where(u >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _ulps(got, want):
    """Distance in float32 ulps between ``got`` and ``want`` (NaN to NaN: 0, NaN to a number: huge)."""

    def ordered(a):
        i = a.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)

    d = np.abs(ordered(got) - ordered(want))
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    d[nan_g & nan_w] = 0
    d[nan_g ^ nan_w] = 1 << 40
    return d


def _kernel(op):
    from hetvm.kernels import codegen_numba as cg

    kernel = cg.generated_kernel(np, ((op, F32, "x0"),))
    assert kernel is not None
    return kernel


#: float32 ulps from the float64 value: float64 arithmetic gives one, the
#: erf-GELU's float32 arithmetic (twice the vector width) up to 7
_ULPS = {"exp": 1, "tanh": 1, "erf": 1, "nn.gelu": 7, "nn.gelu_tanh": 1}


@pytest.mark.parametrize("op", ["exp", "tanh", "erf", "nn.gelu", "nn.gelu_tanh"])
def test_within_its_ulps_of_the_float64_value_over_the_float32_range(numba_on, op):
    pytest.importorskip("numba")
    x = _sweep()
    got = np.empty_like(x)
    _kernel(op)(x, got)
    with np.errstate(all="ignore"):
        want = _reference(op, x).astype(np.float32)  # rounded once: within half an ulp
    d = _ulps(got, want)
    worst = int(np.argmax(d))
    assert d[worst] <= _ULPS[op], f"{op}({x[worst]!r}) = {got[worst]!r}, float64 {want[worst]!r}"
    # the signs of zeros and the specials exactly
    for v in (0.0, -0.0, np.inf, -np.inf):
        i = np.flatnonzero((x == v) & (np.signbit(x) == np.signbit(v)))[0]
        assert got[i] == want[i] or (np.isnan(got[i]) and np.isnan(want[i]))
        assert np.signbit(got[i]) == np.signbit(want[i]) or np.isnan(want[i])


def test_exp_matches_numpys_float32_exp(numba_on):
    pytest.importorskip("numba")
    x = _sweep()
    got = np.empty_like(x)
    _kernel("exp")(x, got)
    with np.errstate(all="ignore"):
        numpy_exp, rounded = np.exp(x), np.exp(x.astype(np.float64)).astype(np.float32)
    # NumPy's SIMD exp is itself up to 2 ulps off the rounded value: never further
    # from it than that plus one; overflow, underflow and NaN exactly where NumPy's
    assert np.all(_ulps(got, numpy_exp) <= _ulps(numpy_exp, rounded) + 1)
    for cls in (np.isinf, np.isnan, lambda a: a == 0):
        np.testing.assert_array_equal(cls(got), cls(numpy_exp))


@pytest.mark.parametrize("op", ["exp", "tanh", "erf", "nn.gelu", "nn.gelu_tanh"])
def test_broadcast_non_contiguous_and_empty_calls_match_the_numpy_kernels(numba_on, op):
    pytest.importorskip("numba")
    from hetvm.kernels.fused_program import run_numpy

    rng = np.random.default_rng(3)
    base = (rng.standard_normal((6, 10)) * 4).astype(F32)
    base[0, :5] = [np.nan, np.inf, -np.inf, -0.0, -30.0]
    bias = rng.standard_normal(5).astype(F32)
    program = (("add", F32, "x0", "x1"), (op, F32, "t0"))
    for x, b in ((base[::2, ::2], bias), (base.T[:, :5], bias), (np.zeros((0, 5), F32), bias)):
        got, want = np.empty(x.shape, F32), np.empty(x.shape, F32)
        _kernel_program(program)(x, b, got)
        with np.errstate(all="ignore"):
            run_numpy(np, program, (x, b), want)
        # the NumPy erf is an approximation good to 1.5e-7 (absolute)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6, equal_nan=True)


def _kernel_program(program):
    from hetvm.kernels import codegen_numba as cg

    return cg.generated_kernel(np, program)
