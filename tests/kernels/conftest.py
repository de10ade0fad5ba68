"""Fixtures of the kernel tests."""

import pytest

from hetvm.kernels import codegen_numba


@pytest.fixture
def numba_on(monkeypatch):
    """Generated and direct Numba kernels on for one test: the suite turns them off
    (compile time), and tests/conftest.py puts the switch back after each test."""
    monkeypatch.setenv("HETVM_NUMBA", "1")
    codegen_numba._checked = False
