"""Fixtures of the kernel tests."""

import pytest

from hetvm.kernels import codegen_numba


@pytest.fixture
def numba_on(monkeypatch):
    """Generated and direct Numba kernels on for one test: the suite turns them off
    (compile time), and tests/conftest.py puts the switch back after each test."""
    monkeypatch.setenv("HETVM_NUMBA", "1")
    codegen_numba._checked = False


def _gpu_cupy():
    try:
        import cupy

        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # no CuPy, or no driver
        return None


@pytest.fixture(params=["host", "cupy"])
def cuda_xp(request):
    """The array modules a generated CUDA kernel can run on here: ``host`` (the
    CuPy stand-in, kernels compiled with the host's C++ compiler) and ``cupy``
    (a GPU); each skips where it is missing."""
    from hetvm.testing.cuda_host import CXX, RecordingCupy

    if request.param == "host":
        if CXX is None:
            pytest.skip("no host C++ compiler")
        return RecordingCupy()
    cupy = _gpu_cupy()
    if cupy is None:
        pytest.skip("no CuPy with a CUDA device")
    return cupy
