"""Which fused programs get a generated kernel: ``HETVM_NUMBA`` (0 off, 1 every
covered program, else auto) and auto's per-program rule. Nothing is compiled."""

import numpy as np
import pytest

from hetvm.kernels import codegen_numba as cg

F32 = "float32"
ARITH = (("add", F32, "x0", "x1"), ("nn.relu", F32, "t0"))
SIGMOID = (("sigmoid", F32, "x0"), ("multiply", F32, "t0", "x0"))
TANH_GELU = (("nn.gelu_tanh", "float64", "x0"),)
ERF_GELU32 = (("add", F32, "x0", "x1"), ("nn.gelu", F32, "t0"), ("erf", F32, "t1"), ("nn.gelu_tanh", F32, "t2"))
EXP = (("subtract", F32, "x0", "x1"), ("exp", F32, "t0"))


@pytest.mark.parametrize(("value", "expected"), [("0", "off"), ("1", "all"), ("auto", "auto"), (None, "auto")])
def test_mode_follows_the_environment(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("HETVM_NUMBA", raising=False)
    else:
        monkeypatch.setenv("HETVM_NUMBA", value)
    assert cg.mode() == expected


def test_the_rule_keeps_large_libm_bound_programs_on_the_numpy_runner():
    assert cg.prefers_generated(ARITH) and cg.prefers_generated(SIGMOID)
    assert cg.prefers_generated(ARITH, 1 << 20)
    assert not cg.prefers_generated(TANH_GELU) and not cg.prefers_generated(EXP)
    assert not cg.prefers_generated(EXP, cg.LIBM_SMALL)
    assert cg.prefers_generated(EXP, cg.LIBM_SMALL - 1)  # small: generated all the same


def test_float32_erf_and_gelus_are_libm_free_but_float32_exp_is_not_preferred():
    assert cg.prefers_generated(ERF_GELU32, 1 << 20)
    assert not cg.prefers_generated(ERF_GELU32 + (("exp", F32, "t3"),), 1 << 20)
    assert not cg.prefers_generated((("erf", "float64", "x0"),), 1 << 20)


@pytest.fixture
def numba_mode(monkeypatch):
    pytest.importorskip("numba")

    def set_mode(value):
        monkeypatch.setenv("HETVM_NUMBA", value)
        cg._checked = False  # not monkeypatched: undoing it could restore a stale "checked"

    yield set_mode
    cg._checked = False


def test_auto_generates_only_where_the_rule_says(numba_mode, monkeypatch):
    numba_mode("auto")
    monkeypatch.setattr(cg, "_KERNELS", {})
    big, small = (64, 64), (4, 8)
    assert cg.generated_kernel(np, ARITH).generates([F32, F32], big)
    assert cg.generated_kernel(np, SIGMOID).generates([F32], big)
    assert not cg.generated_kernel(np, TANH_GELU).generates([F32], big)
    assert cg.generated_kernel(np, TANH_GELU).generates([F32], small)
    assert not cg.generated_kernel(np, EXP).generates([F32, F32], big)
    # a large call of a libm-bound program runs the NumPy runner, exactly
    x = np.linspace(-3, 3, 64 * 64, dtype=F32).reshape(big)
    out = np.empty(big, F32)
    cg.generated_kernel(np, TANH_GELU)(x, out)
    assert cg.generated_kernel(np, TANH_GELU).plans[((big,), big)] is False
    np.testing.assert_allclose(out, 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3))), rtol=1e-5)


def test_one_generates_every_covered_program_and_zero_none(numba_mode, monkeypatch):
    numba_mode("1")
    monkeypatch.setattr(cg, "_KERNELS", {})
    assert cg.generated_kernel(np, TANH_GELU).generates([F32], (64, 64))
    numba_mode("0")
    assert not cg.available()
    assert cg.generated_kernel(np, ARITH) is None


def test_large_outputs_stay_serial_after_a_shared_out_product(monkeypatch, numba_on):
    """Under a budget of 2, after a product shared out by hetvm's workers the
    serial variant runs even for a large output (see hetvm/runtime/threads.py)."""
    pytest.importorskip("numba")
    from hetvm.runtime import threads

    k = cg.generated_kernel(np, (("add", F32, "x0", "x1"),))
    taken = []

    class Recorder:  # stands in for the compiled module: which variant ran
        def serial(self, a, b, out):
            taken.append("serial")
            np.add(a, b, out=out)

        def parallel(self, a, b, out):
            taken.append("parallel")
            np.add(a, b, out=out)

    n = cg.PARALLEL_MIN
    monkeypatch.setattr(k, "plan", lambda shapes, out_shape, dtypes=(): ((n,), [(n,), (n,)], Recorder()))
    monkeypatch.setattr(threads, "_products_until", 0.0)
    x = np.arange(n, dtype=F32)
    got = np.empty(n, F32)
    with threads.ThreadBudget(2):
        k(x, x, got)
        threads.parallel_product()  # a product shared out by the workers
        k(x, x, got)
    np.testing.assert_array_equal(got, 2 * x)
    assert taken == ["parallel", "serial"]
