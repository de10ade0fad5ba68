"""The first-launch guard of generated CUDA kernels and the switch that turns
them off (hetvm/kernels/cuda_launch.py)."""

import numpy as np
import pytest

from hetvm.kernels import codegen_cuda_norm
from hetvm.kernels.cuda_launch import FirstLaunch, enabled
from hetvm.kernels.registry import bind_kernel
from hetvm.testing.cuda_host import CXX, RecordingCupy


def test_a_failed_first_launch_is_remembered_and_later_errors_are_raised(caplog):
    guard = FirstLaunch()
    calls = []

    def broken():
        calls.append("broken")
        raise RuntimeError("nvrtc: error")

    with caplog.at_level("WARNING", logger="hetvm.codegen"):
        assert guard.run("a", broken) is False
        assert guard.run("a", broken) is False  # not tried again
    assert calls == ["broken"] and guard.compiled == {"a": False}
    assert sum("failed to compile" in r.getMessage() for r in caplog.records) == 1

    state = {"fail": False}

    def flaky():
        if state["fail"]:
            raise MemoryError("out of device memory")

    assert guard.run("b", flaky) is True
    state["fail"] = True
    with pytest.raises(MemoryError):  # a kernel that compiled: its errors are real
        guard.run("b", flaky)


def test_the_switch_turns_every_generated_cuda_kernel_off(monkeypatch):
    if CXX is None:
        pytest.skip("no host C++ compiler")
    monkeypatch.setenv("HETVM_CUDA_CODEGEN", "0")
    assert not enabled()
    xp = RecordingCupy()
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype("float32")
    fused = bind_kernel("fused_elementwise", "cuda", xp, {"program": (("nn.silu", "float32", "x0"),)})
    softmax = bind_kernel("nn.softmax", "cuda", xp, {"axis": -1})
    assert not isinstance(softmax, codegen_cuda_norm._NormKernel)
    pool = bind_kernel("nn.max_pool2d", "cuda", xp, {"pool_size": (2, 2), "strides": (2, 2)})
    out = xp.empty(x.shape, "float32")
    fused(x, out)
    softmax(x, out)
    pool(x, xp.empty((2, 3, 4, 4), "float32"))
    assert xp.made == []  # every op ran step by step
    monkeypatch.setenv("HETVM_CUDA_CODEGEN", "1")
    bind_kernel("nn.max_pool2d", "cuda", xp, {"pool_size": (2, 2), "strides": (2, 2)})(
        x, xp.empty((2, 3, 4, 4), "float32"))  # fmt: skip
    assert [k.name for k in xp.made] == ["hetvm_max_pool2d"]
