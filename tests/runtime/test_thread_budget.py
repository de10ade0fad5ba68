"""The thread budget: ``VirtualMachine(threads=n)`` caps BLAS (as threadpoolctl
reports it) and Numba inside a call and puts both back after it; bad budgets
are refused with a clear error."""

import numpy as np
import pytest

import hetvm
from hetvm.errors import HetvmRuntimeError
from hetvm.runtime import threads as budget_mod
from hetvm.runtime.bytecode import Call, Executable, Ret, VMFunction
from hetvm.runtime.registry import register_func, remove_global_func
from hetvm.runtime.threads import ThreadBudget

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]


def _probe_exe(name: str) -> Executable:
    """main(x) calls global function ``name`` with x and returns what it returns."""
    info = {"kind": "tensor", "shape": [2], "dtype": "float32", "device": 0}
    main = VMFunction("main", ["x"], [info], 2, [Call(1, name, (("r", 0),)), Ret(1)], {})
    return Executable([{"kind": "cpu", "index": 0, "memory_scope": "global"}], [], {"main": main})


@pytest.fixture
def blas_at_two():
    """BLAS set to 2 threads around the test, whatever the process had (restored)."""
    # a budget left applied (a call that never restored) would keep the next one from applying
    assert budget_mod._active == 0, f"{budget_mod._active} thread budget(s) still applied: {threadpoolctl.threadpool_info()}"
    if not _blas_threads():
        pytest.skip("no BLAS library that threadpoolctl can control")
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        yield


def test_vm_call_runs_under_the_budget_and_restores_it(blas_at_two):
    seen = []

    @register_func("test_threads.probe", override=True)
    def probe(t):
        seen.append(_blas_threads())
        return t

    try:
        vm = hetvm.VirtualMachine(_probe_exe("test_threads.probe"), threads=1)
        before = _blas_threads()
        out = vm["main"](np.ones(2, "float32"))
        np.testing.assert_array_equal(out.numpy(), [1.0, 1.0])
        info = threadpoolctl.threadpool_info()
        assert before == [2] * len(before), info
        assert seen == [[1] * len(before)], info  # inside the call: the budget
        assert _blas_threads() == before  # after it: what was there
    finally:
        remove_global_func("test_threads.probe")


def test_budget_is_restored_when_the_call_fails(blas_at_two):
    @register_func("test_threads.fail", override=True)
    def fail(t):
        raise ValueError("boom")

    try:
        vm = hetvm.VirtualMachine(_probe_exe("test_threads.fail"), threads=1)
        with pytest.raises(Exception, match="boom"):
            vm["main"](np.ones(2, "float32"))
        assert _blas_threads() == [2] * len(_blas_threads())
    finally:
        remove_global_func("test_threads.fail")


def test_no_budget_leaves_blas_alone(blas_at_two):
    seen = []

    @register_func("test_threads.probe2", override=True)
    def probe(t):
        seen.append(_blas_threads())
        return t

    try:
        hetvm.VirtualMachine(_probe_exe("test_threads.probe2"))["main"](np.ones(2, "float32"))
        assert seen == [[2] * len(seen[0])]
    finally:
        remove_global_func("test_threads.probe2")


def test_nested_budgets_keep_the_outer_blas_setting_until_the_last_leaves(blas_at_two):
    outer, inner = ThreadBudget(1), ThreadBudget(2)
    with outer:
        assert set(_blas_threads()) == {1}, (budget_mod._saved, threadpoolctl.threadpool_info())
        with inner:
            assert set(_blas_threads()) == {1}
        assert set(_blas_threads()) == {1}
    assert set(_blas_threads()) == {2}


def test_numba_threads_are_capped_and_restored():
    numba = pytest.importorskip("numba")
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba launched a single thread")
    had = numba.get_num_threads()
    with ThreadBudget(1):
        assert numba.get_num_threads() == 1
    assert numba.get_num_threads() == had
    with ThreadBudget(10_000):  # more than Numba's pool: capped at the pool
        assert numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS
    assert numba.get_num_threads() == had


@pytest.mark.parametrize("bad", [0, -2, 1.5, "2", True])
def test_bad_budget_is_refused(bad):
    with pytest.raises(HetvmRuntimeError, match="positive whole number of threads"):
        hetvm.VirtualMachine(_probe_exe("x.y"), threads=bad)


def test_without_threadpoolctl_the_budget_still_runs(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # import fails
    assert budget_mod.blas_control() is None
    vm = hetvm.VirtualMachine(_probe_exe("test_threads.identity"), threads=1)
    register_func("test_threads.identity", lambda t: t, override=True)
    try:
        np.testing.assert_array_equal(vm["main"](np.ones(2, "float32")).numpy(), [1.0, 1.0])
    finally:
        remove_global_func("test_threads.identity")


def test_each_budget_finds_the_blas_libraries_loaded_by_then(monkeypatch):
    # a BLAS loaded after the first budget (SciPy's own OpenBLAS) must be capped by
    # later budgets: the libraries are looked up when a budget is made, not cached
    loaded = [["openblas-a"]]

    class FakeController:
        def __init__(self):
            self.lib_controllers = list(loaded[0])

        def select(self, user_api):
            assert user_api == "blas"
            return self

    monkeypatch.setattr(threadpoolctl, "ThreadpoolController", FakeController)
    assert ThreadBudget(1)._libs == ["openblas-a"]
    loaded[0] = ["openblas-a", "scipy-openblas"]
    assert ThreadBudget(1)._libs == ["openblas-a", "scipy-openblas"]
