"""Leaks over many calls, one executable run from eight threads, and a kernel that raises."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import hetvm
from hetvm import ir
from hetvm import op as R
from hetvm.errors import HetvmRuntimeError
from hetvm.ir import struct_info as S

from .conftest import FACTOR


def _mlp() -> ir.IRModule:
    x = ir.Var("x", struct_info=S.TensorStructInfo((4, 8), "float32"))
    w = ir.Var("w", struct_info=S.TensorStructInfo((8, 8), "float32"))
    bb = ir.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            h = bb.emit(R.matmul(x, w))
            h = bb.emit(R.nn.relu(h))
            h = bb.emit(R.add(h, x))
            out = bb.emit_output(R.tanh(h))
        bb.emit_func_output(out)
    return bb.get()


def _want(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.tanh(np.maximum(x @ w, 0) + x)


def test_thousand_calls_on_a_pooled_allocator_do_not_leak():
    vm = hetvm.VirtualMachine(hetvm.build(_mlp()), allocator="pooled")
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 8)).astype("float32")
    x = rng.standard_normal((4, 8)).astype("float32")
    baseline = vm.memory_report()["cpu:0"]["bytes_in_use"]
    pool_after_first = None
    for i in range(1000 * FACTOR):
        out = vm["main"](x, w)
        if i % 97 == 0:
            np.testing.assert_allclose(out.numpy(), _want(x, w), rtol=1e-5)
        del out
        stats = vm.memory_report()["cpu:0"]
        assert stats["bytes_in_use"] == baseline, f"call {i}: {stats}"
        if pool_after_first is None:
            pool_after_first = stats["pool_bytes"]
        assert stats["pool_bytes"] <= pool_after_first, f"the pool grew at call {i}: {stats}"


def test_eight_threads_one_executable_one_vm_each():
    exe = hetvm.build(_mlp())
    rng = np.random.default_rng(1)
    w = rng.standard_normal((8, 8)).astype("float32")
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def worker(seed: int) -> None:
        try:
            vm = hetvm.VirtualMachine(exe)
            x = np.full((4, 8), seed / 8, dtype="float32")
            barrier.wait()
            for _ in range(50):
                out = vm["main"](x, w)
                np.testing.assert_allclose(out.numpy(), _want(x, w), rtol=1e-5)
                del out
                assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 0
            peak = vm.memory_report()["cpu:0"]["peak_bytes"]
            assert peak > 0
        except BaseException as err:  # reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_kernel_raising_mid_call_names_it_and_frees_the_call(monkeypatch):
    from hetvm.kernels import codegen_numba, registry

    # the registry's kernels, not a generated one, whatever earlier tests left set
    monkeypatch.setenv("HETVM_NUMBA", "0")
    monkeypatch.setattr(codegen_numba, "_checked", False)
    monkeypatch.setattr(codegen_numba, "_numba", codegen_numba._numba)  # put back after
    original = registry.get_kernel("tanh", "cpu")

    def failing(xp, attrs, *args):
        raise ValueError("injected fault")

    monkeypatch.setitem(registry._KERNELS, ("tanh", "cpu"), failing)
    vm = hetvm.VirtualMachine(hetvm.build(_mlp()))
    x = np.ones((4, 8), "float32")
    w = np.ones((8, 8), "float32")
    before = vm.memory_report()["cpu:0"]["bytes_in_use"]
    with pytest.raises(HetvmRuntimeError) as info:
        vm["main"](x, w)
    assert "tanh" in str(info.value) and "pc" in str(info.value)
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == before
    monkeypatch.setitem(registry._KERNELS, ("tanh", "cpu"), original)
    vm2 = hetvm.VirtualMachine(vm.exe)  # a fresh VM binds the restored kernel
    np.testing.assert_allclose(vm2["main"](x, w).numpy(), _want(x, w), rtol=1e-5)
