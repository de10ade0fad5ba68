"""One VM called from several threads at once, with kernels failing on the way.

Faults are injected by wrapping the kernels the VM binds: a kernel fails when its
first input holds a marker value, so each call decides where (or whether) it
fails. Every successful call's result is checked, then kept and checked again
after the other threads' calls and failures: a failing call may free only its
own memory, and must free all of it at once (the garbage collector is off).
"""

from __future__ import annotations

import gc
import random
import threading

import numpy as np
import pytest

import hetvm
from hetvm.errors import HetvmRuntimeError
from hetvm.runtime import codegen
from hetvm.runtime.device import get_api
from hetvm.script.parser import from_source
from hetvm.transform import PassContext

SRC = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32"), y: R.Tensor(("n",), "float32")) -> R.Tensor(("n",), "float32"):
        n = T.int64()
        with R.dataflow():
            a = R.exp(x)
            b = R.tanh(a)
            c = R.add(b, y)
            R.output(c)
        return c
"""
KERNELS = ("exp", "tanh", "add")
# a kernel fails when element 0 of its first input is its marker (exp reads x,
# tanh reads exp(x), add reads tanh(exp(x)): markers chosen through x)
MARKERS = {"exp": -50.0, "tanh": float(np.exp(np.float32(3.0))), "add": float(np.tanh(np.exp(np.float32(-40.0))))}
X0 = {"exp": -50.0, "tanh": 3.0, "add": -40.0}


class Injected(RuntimeError):
    pass


@pytest.fixture
def faulty_vm(monkeypatch):
    """A VM whose kernels fail on their marker (KeyboardInterrupt for exp when the
    marker is followed by a second one)."""
    real = codegen.bind_kernel

    def bind(op, kind, xp, attrs):
        fn = real(op, kind, xp, attrs)
        marker = MARKERS.get(op)

        def kernel(*args):
            first = args[0]
            if first.size and first.flat[0] == np.float32(marker):
                if first.size > 1 and first.flat[1] == np.float32(-99.0):
                    raise KeyboardInterrupt
                raise Injected(f"injected fault in {op}")
            return fn(*args)

        return kernel

    monkeypatch.setattr(codegen, "bind_kernel", bind)
    # one kernel per op, so each can fail on its own (FuseOps would make them one)
    with PassContext(disabled_pass=["FuseOps"]):
        exe = hetvm.build(from_source(SRC))
    return hetvm.VirtualMachine(exe)


def _inputs(rng: random.Random, fail: str | None):
    n = rng.randint(1, 300)
    x = np.array([rng.uniform(-2, 2) for _ in range(n)], "float32")
    y = np.array([rng.uniform(-2, 2) for _ in range(n)], "float32")
    if fail is not None:
        x[0] = X0[fail]
    return x, y


def _expected(x, y):
    return np.tanh(np.exp(x)) + y


def _in_use(vm) -> int:
    return vm.memory_report()["cpu:0"]["bytes_in_use"]


def _outside_the_pool(vm) -> int:
    """Bytes on the host device not held by the VM's pool (parameters converted
    from NumPy, and whatever else the process holds)."""
    return get_api(hetvm.cpu(0)).allocated - vm.memory_report()["cpu:0"]["reserved_bytes"]


def _hammer(vm, threads: int, calls: int, fail_rate: float, seed: int) -> list[str]:
    problems: list[str] = []
    start = threading.Barrier(threads)

    def work(k: int) -> None:
        rng = random.Random(seed * 100 + k)
        kept = []
        start.wait()
        try:
            for i in range(calls):
                fail = rng.choice(KERNELS) if rng.random() < fail_rate else None
                x, y = _inputs(rng, fail)
                try:
                    out = vm["main"](x, y)
                except HetvmRuntimeError as exc:
                    if fail is None or f"injected fault in {fail}" not in str(exc):
                        problems.append(f"thread {k} call {i}: unexpected {exc}")
                    continue
                if fail is not None:
                    problems.append(f"thread {k} call {i}: the fault in {fail} did not fire")
                    continue
                if not np.allclose(out.numpy(), _expected(x, y), rtol=1e-5, atol=1e-6):
                    problems.append(f"thread {k} call {i}: wrong result")
                kept.append((out, x, y))
                if len(kept) > 8:
                    kept.pop(rng.randrange(len(kept)))
            for out, x, y in kept:  # after everyone else's calls and faults
                if not out.alive or not np.allclose(out.numpy(), _expected(x, y), rtol=1e-5, atol=1e-6):
                    problems.append(f"thread {k}: a kept result was freed or overwritten")
        except Exception as exc:  # reported, never lost in the thread
            problems.append(f"thread {k}: {type(exc).__name__}: {exc}")

    workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    gc.disable()
    try:
        for t in workers:
            t.start()
        for t in workers:
            t.join()
    finally:
        gc.enable()
    return problems


def test_threads_share_a_vm_while_kernels_fail(faulty_vm):
    assert _hammer(faulty_vm, threads=4, calls=25, fail_rate=0.3, seed=1) == []
    assert _in_use(faulty_vm) == 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_threads_share_a_vm_while_kernels_fail_long(faulty_vm, seed):
    assert _hammer(faulty_vm, threads=8, calls=300, fail_rate=0.25, seed=seed) == []
    assert _in_use(faulty_vm) == 0


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_kernel_fault_frees_the_calls_memory_at_once(faulty_vm, kernel):
    rng = random.Random(0)
    held = faulty_vm["main"](*_inputs(rng, None))  # another call's live result
    before = _in_use(faulty_vm)
    x, y = _inputs(rng, kernel)
    gc.disable()
    try:
        device_before = _outside_the_pool(faulty_vm)
        with pytest.raises(HetvmRuntimeError, match=f"injected fault in {kernel}") as info:
            faulty_vm["main"](x, y)
        assert _in_use(faulty_vm) == before  # while the exception still lives
        # the parameters converted from NumPy too (the error's look at the registers
        # kept them alive through the frame's snapshot of its locals)
        assert _outside_the_pool(faulty_vm) == device_before
        assert info.value is not None and held.alive
    finally:
        gc.enable()
    x, y = _inputs(rng, None)
    np.testing.assert_allclose(faulty_vm["main"](x, y).numpy(), _expected(x, y), rtol=1e-5)


def test_a_keyboard_interrupt_inside_a_call_still_cleans_up(faulty_vm):
    rng = random.Random(1)
    x, y = _inputs(rng, "exp")
    if x.size < 2:
        x, y = np.array([X0["exp"], 0.0], "float32"), np.zeros(2, "float32")
    x[1] = -99.0
    gc.disable()
    try:
        with pytest.raises(KeyboardInterrupt) as info:
            faulty_vm["main"](x, y)
        assert _in_use(faulty_vm) == 0  # while the interrupt (and its traceback) lives
        assert info.value.__traceback__ is not None
    finally:
        gc.enable()
    x, y = _inputs(rng, None)
    np.testing.assert_allclose(faulty_vm["main"](x, y).numpy(), _expected(x, y), rtol=1e-5)
