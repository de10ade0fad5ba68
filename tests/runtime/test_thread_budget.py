"""The thread budget: ``VirtualMachine(threads=n)`` holds BLAS at one thread (as
threadpoolctl reports it) and caps Numba inside a call and puts both back after
it; bad budgets are refused with a clear error."""

import threading

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


def test_a_call_from_another_thread_gets_its_blas_budget_too(blas_at_two):
    # threadpoolctl lets only its first controlling thread set OpenBLAS's pool
    # (here the test's thread, through the fixture) and ignores the others: a
    # VM called from a server's worker thread must still run BLAS at one thread
    seen = []
    register_func("test_threads.probe_other", lambda t: seen.append(_blas_threads()) or t, override=True)
    vm = hetvm.VirtualMachine(_probe_exe("test_threads.probe_other"), threads=2)
    errors = []

    def serve() -> None:
        try:
            vm["main"](np.ones(2, "float32"))
        except BaseException as err:  # noqa: BLE001 - reported by the test's thread
            errors.append(err)

    try:
        worker = threading.Thread(target=serve)
        worker.start()
        worker.join(30)
    finally:
        remove_global_func("test_threads.probe_other")
    assert errors == [] and len(seen) == 1
    assert set(seen[0]) == {1}
    assert set(_blas_threads()) == {2}  # put back after the call


def test_blas_libraries_are_set_from_any_thread(blas_at_two):
    # each library's setter works from a thread threadpoolctl does not let control it
    libs = ThreadBudget(2)._libs
    done = []

    def set_and_restore() -> None:
        for lib in libs:
            lib.set(1)
        done.append(_blas_threads())
        for lib in libs:
            lib.set(2)

    worker = threading.Thread(target=set_and_restore)
    worker.start()
    worker.join(30)
    assert [set(d) for d in done] == [{1}]
    assert set(_blas_threads()) == {2}
    assert all(lib.get() == 2 for lib in libs)


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
    assert [lib.controller for lib in ThreadBudget(1)._libs] == ["openblas-a"]
    loaded[0] = ["openblas-a", "scipy-openblas"]
    assert [lib.controller for lib in ThreadBudget(1)._libs] == ["openblas-a", "scipy-openblas"]


# -- inside a budget: BLAS at one thread, Numba's loops after shared-out products ---------


@pytest.fixture
def pools_reset(monkeypatch):
    """No shared-out product left over from an earlier test."""
    monkeypatch.setattr(budget_mod, "_products_until", 0.0)


def test_blas_runs_at_one_thread_inside_any_budget(blas_at_two):
    for n in (1, 2, 3):
        with ThreadBudget(n):
            assert set(_blas_threads()) == {1}
            assert budget_mod.budget_threads() == n
        assert set(_blas_threads()) == {2}
        assert budget_mod.budget_threads() == 0


def test_the_budget_restores_a_blas_setting_of_three():
    if not _blas_threads():
        pytest.skip("no BLAS library that threadpoolctl can control")
    with threadpoolctl.threadpool_limits(limits=3, user_api="blas"):
        with ThreadBudget(2):
            assert set(_blas_threads()) == {1}
        assert set(_blas_threads()) == {3}


def test_numba_loops_wait_after_a_shared_out_product(pools_reset, monkeypatch):
    with ThreadBudget(2):
        assert budget_mod.numba_parallel_ok()
        budget_mod.parallel_product()
        assert not budget_mod.numba_parallel_ok()
        monkeypatch.setattr(budget_mod, "_products_until", 0.0)  # PRODUCTS_AWAKE_S later
        assert budget_mod.numba_parallel_ok()
        budget_mod.parallel_product()
    assert budget_mod.numba_parallel_ok()  # outside the budget: not held back
    with ThreadBudget(1):
        assert budget_mod.numba_parallel_ok()  # one thread: nothing to take turns with


def test_a_vm_call_runs_its_products_with_blas_at_one_thread(blas_at_two, pools_reset):
    # a 1x1 convolution of 4 -> 8 channels on a 4x4 map, inside a call of budget 2
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 4, 4, 4)).astype("float32")
    w = rng.standard_normal((8, 4, 1, 1)).astype("float32")
    seen = []

    @register_func("test_threads.conv_probe", override=True)
    def probe(t):
        from hetvm.kernels.registry import get_kernel

        out = np.empty((1, 8, 4, 4), "float32")
        get_kernel("nn.conv2d", "cpu")(np, {}, x, w, out)
        seen.append((_blas_threads(), out))
        return t

    try:
        vm = hetvm.VirtualMachine(_probe_exe("test_threads.conv_probe"), threads=2)
        vm["main"](np.ones(2, "float32"))
    finally:
        remove_global_func("test_threads.conv_probe")
    threads, out = seen[0]
    assert set(threads) == {1}  # inside the call, after the product
    assert set(_blas_threads()) == {2}  # after the call
    want = np.einsum("oc,nchw->nohw", w[:, :, 0, 0].astype(np.float64), x)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
