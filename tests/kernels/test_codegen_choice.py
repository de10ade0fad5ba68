"""Which fused programs get a generated kernel: ``HETVM_NUMBA`` (0 off, 1 every
covered program, else auto) and auto's per-program rule. Nothing is compiled."""

import numpy as np
import pytest

from hetvm.kernels import codegen_numba as cg

F32 = "float32"
ARITH = (("add", F32, "x0", "x1"), ("nn.relu", F32, "t0"))
SIGMOID = (("sigmoid", F32, "x0"), ("multiply", F32, "t0", "x0"))
TANH_GELU = (("nn.gelu_tanh", F32, "x0"),)
EXP = (("subtract", F32, "x0", "x1"), ("exp", F32, "t0"))


@pytest.mark.parametrize(("value", "expected"), [("0", "off"), ("1", "all"), ("auto", "auto"), (None, "auto")])
def test_mode_follows_the_environment(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("HETVM_NUMBA", raising=False)
    else:
        monkeypatch.setenv("HETVM_NUMBA", value)
    assert cg.mode() == expected


def test_the_rule_keeps_libm_bound_programs_on_the_numpy_runner():
    assert cg.prefers_generated(ARITH) and cg.prefers_generated(SIGMOID)
    assert not cg.prefers_generated(TANH_GELU) and not cg.prefers_generated(EXP)


@pytest.fixture
def numba_mode(monkeypatch):
    pytest.importorskip("numba")

    def set_mode(value):
        monkeypatch.setenv("HETVM_NUMBA", value)
        monkeypatch.setattr(cg, "_checked", False)

    yield set_mode
    cg._checked = False


def test_auto_generates_only_where_the_rule_says(numba_mode):
    numba_mode("auto")
    assert cg.generated_kernel(np, ARITH) is not None
    assert cg.generated_kernel(np, SIGMOID) is not None
    assert cg.generated_kernel(np, TANH_GELU) is None
    assert cg.generated_kernel(np, EXP) is None


def test_one_generates_every_covered_program_and_zero_none(numba_mode):
    numba_mode("1")
    assert cg.generated_kernel(np, TANH_GELU) is not None
    numba_mode("0")
    assert not cg.available()
    assert cg.generated_kernel(np, ARITH) is None
