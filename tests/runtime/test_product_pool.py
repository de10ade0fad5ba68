"""Products shared out by hetvm's workers (``runtime/product_pool.py``): the
result is np.matmul's (within float summation order), products that cannot be
cut run whole, a chunk's error reaches the caller, and products from several
threads at once each get their own right result."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from hetvm.runtime import product_pool as pp
from hetvm.runtime import threads as budget_mod
from hetvm.runtime.threads import ThreadBudget


@pytest.fixture
def cut_everything(monkeypatch):
    """Every product big enough to be shared out, in many small chunks, with two
    threads even on a one-core machine."""
    monkeypatch.setattr(pp, "PARALLEL_MIN", 1)
    monkeypatch.setattr(pp, "CHUNK_MIN", 1)
    monkeypatch.setattr(pp, "_CORES", 4)
    monkeypatch.setattr(pp, "_contended_until", float("inf"))  # the pool, never BLAS's threads


def _bound(a, b) -> np.ndarray:
    """How far two orders of summing a @ b may differ: 2 K eps (|a| @ |b|)."""
    k = a.shape[-1]
    eps = np.finfo(a.dtype).eps
    return 2 * k * eps * np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64)) + 1e-30


def _rand(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


SHAPES = [
    ((128, 256), (256, 1024)),  # the encoder's projection: cut along columns
    ((1000, 64), (64, 40)),  # many rows: cut along rows
    ((1, 300), (300, 2000)),  # one row
    ((37, 1), (1, 53)),  # K = 1
    ((3, 5), (5, 2)),  # tiny: fewer rows and columns than a chunk
    ((0, 5), (5, 70)),  # empty
    ((40, 0), (0, 70)),  # empty sum: zeros
    ((8, 33, 40), (8, 40, 70)),  # batched: cut along the batch
    ((1, 3, 64, 100), (3, 100, 500)),  # batch broadcast
    ((12, 1, 9), (1, 12, 9, 300)),  # depthwise-like: (G, 1, K) @ (N, G, K, P)
    ((6, 17, 40), (40, 33)),  # a stack times one matrix
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("sa,sb", SHAPES)
@pytest.mark.parametrize("threads", [2, 3])
def test_matches_numpy(cut_everything, sa, sb, dtype, threads):
    rng = np.random.default_rng(len(sa) + sa[-1] + sb[-1])
    a, b = _rand(rng, sa, dtype), _rand(rng, sb, dtype)
    want = np.matmul(a, b)
    out = np.full(want.shape, np.nan, dtype)
    with ThreadBudget(threads):
        pp.matmul_into(np, a, b, out)
    assert np.all(np.abs(out - want) <= _bound(a, b)), np.max(np.abs(out - want))


def test_nan_and_inf_propagate(cut_everything):
    rng = np.random.default_rng(3)
    a, b = _rand(rng, (64, 50), "float32"), _rand(rng, (50, 300), "float32")
    a[5, 7], b[3, 100], b[4, 250] = np.nan, np.inf, -np.inf
    out = np.empty((64, 300), "float32")
    with ThreadBudget(2):
        pp.matmul_into(np, a, b, out)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(a @ b))
    np.testing.assert_array_equal(np.isinf(out), np.isinf(a @ b))


def test_the_plan_cuts_large_products_and_leaves_the_rest_whole(cut_everything):
    f32 = np.zeros((64, 64), "float32")
    assert pp._plan(f32, f32, np.zeros((64, 64), "float32"), 2) is not None
    # integers, mixed dtypes, a vector, a non-contiguous last axis, an aliased output
    i32 = np.zeros((64, 64), "int32")
    assert pp._plan(i32, i32, np.zeros((64, 64), "int32"), 2) is None
    assert pp._plan(f32, f32.astype("float64"), np.zeros((64, 64), "float64"), 2) is None
    assert pp._plan(f32, np.zeros(64, "float32"), np.zeros(64, "float32"), 2) is None
    wide = np.zeros((64, 128), "float32")
    assert pp._plan(f32, wide[:, ::2], np.zeros((64, 64), "float32"), 2) is None
    assert pp._plan(f32, wide[:, :64], wide[:, 64:], 2) is None  # may share memory with b
    assert pp._plan(f32, f32, f32, 2) is None


def test_below_the_threshold_the_caller_runs_it_whole(monkeypatch):
    monkeypatch.setattr(pp, "_CORES", 4)
    a = np.ones((64, 64), "float32")
    assert 64**3 < pp.PARALLEL_MIN
    assert pp._plan(a, a, np.empty((64, 64), "float32"), 2) is None


def test_chunks_are_aligned_and_never_a_single_row():
    for length in (16, 17, 31, 100, 1024, 3137):
        for chunks in (1, 2, 6, 50):
            edges = pp._even(length, chunks, 16)
            parts = np.diff(edges)
            assert edges[0] == 0 and edges[-1] == length and len(parts) <= chunks
            assert all(e % 16 == 0 for e in edges[:-1]) and parts.min() >= min(16, length)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_products_run_whole_and_exact(cut_everything, dtype):
    rng = np.random.default_rng(1)
    a, b = rng.integers(-9, 9, (50, 40)).astype(dtype), rng.integers(-9, 9, (40, 300)).astype(dtype)
    out = np.empty((50, 300), dtype)
    with ThreadBudget(2):
        pp.matmul_into(np, a, b, out)
    np.testing.assert_array_equal(out, a @ b)


def test_non_contiguous_operands_and_output(cut_everything):
    rng = np.random.default_rng(2)
    big = _rand(rng, (200, 600), "float32")
    a, b = big[:64, :200], big[:, 250:550]  # row-major views with wider rows
    dst = np.zeros((64, 900), "float32")
    out = dst[:, 100:400]
    assert pp._plan(a, b, out, 2) is not None
    with ThreadBudget(2):
        pp.matmul_into(np, a, b, out)
        pp.matmul_into(np, a.T.T, b[:, ::-1], out[:, ::-1])  # negative strides: run whole
    assert np.all(np.abs(out[:, ::-1] - a @ b[:, ::-1]) <= _bound(a, b))
    assert not dst[:, :100].any() and not dst[:, 400:].any()  # nothing written outside


def test_outside_a_budget_nothing_is_shared_out(cut_everything, monkeypatch):
    calls = []
    monkeypatch.setattr(pp, "_plan", lambda *args: calls.append(args))
    a = np.ones((64, 64), "float32")
    out = np.empty((64, 64), "float32")
    pp.matmul_into(np, a, a, out)
    with ThreadBudget(1):
        pp.matmul_into(np, a, a, out)
    assert calls == []
    np.testing.assert_array_equal(out, a @ a)


def test_a_chunks_error_reaches_the_caller_and_the_pool_stays_usable(cut_everything, monkeypatch):
    rng = np.random.default_rng(4)
    a, b = _rand(rng, (64, 30), "float32"), _rand(rng, (30, 1000), "float32")
    out = np.empty((64, 1000), "float32")
    real = pp._plan
    ran = []

    def failing(a_, b_, out_, threads, macs=0):
        piece, count = real(a_, b_, out_, threads, macs)

        def chunk(i):
            ran.append(i)
            if i == count - 1:  # the last chunk: taken by the caller or a worker
                raise ValueError("chunk boom")
            return piece(i)

        return chunk, count

    monkeypatch.setattr(pp, "_plan", failing)
    with ThreadBudget(2):
        with pytest.raises(ValueError, match="chunk boom"):
            pp.matmul_into(np, a, b, out)
        monkeypatch.setattr(pp, "_plan", real)
        assert not pp._POOL_LOCK.locked()
        pp.matmul_into(np, a, b, out)
    assert np.all(np.abs(out - a @ b) <= _bound(a, b))


def test_an_error_in_a_worker_thread_reaches_the_caller(cut_everything, monkeypatch):
    caller = threading.get_ident()
    real = pp._plan
    a, b = np.ones((64, 30), "float32"), np.ones((30, 4000), "float32")
    out = np.empty((64, 4000), "float32")
    started = threading.Event()

    def failing(a_, b_, out_, threads, macs=0):
        piece, count = real(a_, b_, out_, threads, macs)

        def chunk(i):
            if threading.get_ident() == caller:
                started.wait(5)  # let a worker take a chunk
            elif not started.is_set():
                started.set()
                raise ValueError("worker boom")
            return piece(i)

        return chunk, count

    monkeypatch.setattr(pp, "_plan", failing)
    with ThreadBudget(2):
        with pytest.raises(ValueError, match="worker boom"):
            pp.matmul_into(np, a, b, out)
    assert not pp._POOL_LOCK.locked()


def test_products_from_several_threads_at_once(cut_everything):
    rng = np.random.default_rng(5)
    cases = [(_rand(rng, (96, 50), "float32"), _rand(rng, (50, 700), "float32")) for _ in range(4)]
    wants = [a @ b for a, b in cases]
    errors: list[BaseException] = []
    budget = ThreadBudget(2)

    def caller(i: int) -> None:
        a, b = cases[i]
        out = np.empty_like(wants[i])
        try:
            for _ in range(30):
                out[...] = np.nan
                with budget:
                    pp.matmul_into(np, a, b, out)
                assert np.all(np.abs(out - wants[i]) <= _bound(a, b))
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert budget_mod.budget_threads() == 0


def _a_product_holds_numbas_loops_back(monkeypatch) -> None:
    """Inside a budget of 2, Numba's loops may run parallel before a large
    product and run serial right after it."""
    monkeypatch.setattr(budget_mod, "_products_until", 0.0)
    a = np.ones((64, 64), "float32")
    out = np.empty((64, 64), "float32")
    with ThreadBudget(2):
        assert budget_mod.numba_parallel_ok()
        pp.matmul_into(np, a, a, out)
        assert not budget_mod.numba_parallel_ok()


def test_a_shared_out_product_holds_numbas_loops_back(cut_everything, monkeypatch):
    _a_product_holds_numbas_loops_back(monkeypatch)


def test_kernels_products_run_through_the_pool(cut_everything, monkeypatch):
    # the matmul and convolution kernels go through matmul_into: under a budget
    # a product is shared out and the result is the kernel's without one
    from hetvm.kernels.registry import get_kernel

    shared = []
    real = pp._plan
    monkeypatch.setattr(pp, "_plan", lambda *args: shared.append(1) or real(*args))
    rng = np.random.default_rng(6)
    x, w = _rand(rng, (1, 8, 20, 20), "float32"), _rand(rng, (16, 8, 3, 3), "float32")
    a, b = _rand(rng, (4, 30, 40), "float32"), _rand(rng, (40, 50), "float32")
    conv, mm = get_kernel("nn.conv2d", "cpu"), get_kernel("matmul", "cpu")
    attrs = {"padding": (1, 1, 1, 1)}
    want_c, want_m = np.empty((1, 16, 20, 20), "float32"), np.empty((4, 30, 50), "float32")
    conv(np, attrs, x, w, want_c)
    mm(np, {}, a, b, want_m)
    assert shared == []
    got_c, got_m = np.empty_like(want_c), np.empty_like(want_m)
    with ThreadBudget(2):
        conv(np, attrs, x, w, got_c)
        mm(np, {}, a, b, got_m)
    assert len(shared) >= 2
    np.testing.assert_allclose(got_c, want_c, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_m, want_m, rtol=1e-5, atol=1e-5)


def test_the_caller_redoes_a_late_workers_chunk_and_the_late_result_is_dropped(cut_everything, monkeypatch):
    # a worker held up inside its chunk (as by the scheduler) past the caller's
    # wait: the caller computes that chunk itself and returns; the worker's
    # result, when it comes, must not be written into `out`
    caller = threading.get_ident()
    real = pp._plan
    rng = np.random.default_rng(8)
    a, b = _rand(rng, (64, 30), "float32"), _rand(rng, (30, 1000), "float32")
    out = np.empty((64, 1000), "float32")
    worker_in, release, late_done = threading.Event(), threading.Event(), threading.Event()

    def slow(a_, b_, out_, threads, macs=0):
        piece, count = real(a_, b_, out_, threads, macs)

        def chunk(i):
            pa, pb, po = piece(i)
            if threading.get_ident() == caller:
                assert worker_in.wait(10)  # a worker has taken a chunk
                return pa, pb, po
            worker_in.set()
            release.wait(10)
            late_done.set()
            return pa * np.float32(0) + np.float32(7), pb, po  # a wrong result, if it landed

        return chunk, count

    monkeypatch.setattr(pp, "_plan", slow)
    with ThreadBudget(2):
        pp.matmul_into(np, a, b, out)
        got = out.copy()
        release.set()
        assert late_done.wait(10)
        time.sleep(0.05)  # the worker's copy, were it to happen
    assert np.all(np.abs(got - a @ b) <= _bound(a, b))
    np.testing.assert_array_equal(out, got)


def test_the_caller_finishes_alone_when_no_worker_runs(cut_everything, monkeypatch):
    # a worker that is never scheduled takes no chunk; the caller takes them all
    monkeypatch.setattr(pp, "_ensure_workers", lambda n: [])
    rng = np.random.default_rng(7)
    a, b = _rand(rng, (64, 30), "float32"), _rand(rng, (30, 1000), "float32")
    out = np.empty((64, 1000), "float32")
    with ThreadBudget(2):
        pp.matmul_into(np, a, b, out)
    assert np.all(np.abs(out - a @ b) <= _bound(a, b))


@pytest.fixture
def blas_first(monkeypatch):
    """Large products go to BLAS's threads first (as on an idle machine); records
    the thread counts set."""
    monkeypatch.setattr(pp, "PARALLEL_MIN", 1)
    monkeypatch.setattr(pp, "CHUNK_MIN", 1)
    monkeypatch.setattr(pp, "_CORES", 4)
    monkeypatch.setattr(pp, "_contended_until", 0.0)
    monkeypatch.setattr(pp, "_slow", 0)
    monkeypatch.setattr(pp, "_window", pp.CONTENDED_MIN_S)
    monkeypatch.setattr(pp, "_best", {})
    sets = []
    real = budget_mod.set_blas_threads
    monkeypatch.setattr(budget_mod, "set_blas_threads", lambda n: sets.append(n) or real(n))
    return sets


def _blas_libs():
    ctl = budget_mod.blas_control()
    return list(ctl.lib_controllers) if ctl is not None else []


def test_on_an_idle_machine_a_product_runs_on_blas_threads_then_blas_is_back_at_one(blas_first, monkeypatch):
    if not _blas_libs():
        pytest.skip("no BLAS library under threadpoolctl")
    pooled = []
    monkeypatch.setattr(pp, "_Job", lambda *a: pooled.append(a))
    rng = np.random.default_rng(9)
    a, b = _rand(rng, (64, 30), "float32"), _rand(rng, (30, 1000), "float32")
    out = np.empty((64, 1000), "float32")
    with ThreadBudget(2):
        pp.matmul_into(np, a, b, out)
        assert all(lib.num_threads == 1 for lib in _blas_libs())
    assert blas_first == [2, 1] and pooled == []
    np.testing.assert_array_equal(out, np.matmul(a, b))
    assert ((64, 30), (30, 1000), "f") in pp._best


def test_a_product_on_blas_threads_holds_numbas_loops_back_too(blas_first, monkeypatch):
    # BLAS's partner thread spins after the product: a Numba parallel loop then
    # waits for a core at its barrier, so the loops run serial for a while
    if not _blas_libs():
        pytest.skip("no BLAS library under threadpoolctl")
    _a_product_holds_numbas_loops_back(monkeypatch)
    assert blas_first == [2, 1]  # it ran on BLAS's threads, not the pool


def test_slow_products_in_a_row_send_the_next_ones_to_the_pool(blas_first, monkeypatch):
    if not _blas_libs():
        pytest.skip("no BLAS library under threadpoolctl")
    rng = np.random.default_rng(10)
    a, b = _rand(rng, (64, 30), "float32"), _rand(rng, (30, 1000), "float32")
    out = np.empty((64, 1000), "float32")
    key = (a.shape, b.shape, "f")
    plans = []
    real = pp._plan
    monkeypatch.setattr(pp, "_plan", lambda *args: plans.append(1) or real(*args))
    with ThreadBudget(2):
        pp.matmul_into(np, a, b, out)  # the first: sets the best
        pp._best[key] = 1e-12  # every later run is far slower than "its best"
        for _ in range(pp.SLOW_STREAK - 1):
            pp.matmul_into(np, a, b, out)
            assert pp._contended_until == 0.0  # one slow product alone is no verdict
        pp.matmul_into(np, a, b, out)
        assert pp._contended_until > time.perf_counter()
        calls = len(blas_first)
        pp.matmul_into(np, a, b, out)  # within CONTENDED_S: hetvm's pool, BLAS left at one thread
        assert len(blas_first) == calls
    assert np.all(np.abs(out - a @ b) <= _bound(a, b))


def test_a_busy_verdict_is_short_and_the_first_product_after_it_decides(blas_first, monkeypatch):
    # a transient marks the machine busy for CONTENDED_MIN_S only; the product
    # after it tries BLAS's threads: slow renews the verdict at twice the
    # length (one slow product suffices then), fast ends it
    if not _blas_libs():
        pytest.skip("no BLAS library under threadpoolctl")
    monkeypatch.setattr(pp, "_window", pp.CONTENDED_MIN_S)
    rng = np.random.default_rng(11)
    a, b = _rand(rng, (64, 30), "float32"), _rand(rng, (30, 1000), "float32")
    out = np.empty((64, 1000), "float32")
    key = (a.shape, b.shape, "f")

    def expire() -> None:
        pp._contended_until = 0.0  # as if the verdict's window had passed

    with ThreadBudget(2):
        pp.matmul_into(np, a, b, out)
        pp._best[key] = 1e-12  # slow from now on
        for _ in range(pp.SLOW_STREAK):
            pp.matmul_into(np, a, b, out)
        left = pp._contended_until - time.perf_counter()
        assert 0 < left <= pp.CONTENDED_MIN_S
        expire()
        pp.matmul_into(np, a, b, out)  # one slow product right after: renewed, longer
        left = pp._contended_until - time.perf_counter()
        assert pp.CONTENDED_MIN_S < left <= 2 * pp.CONTENDED_MIN_S
        for _ in range(12):  # renewed again and again: the window stops growing
            expire()
            pp.matmul_into(np, a, b, out)
        assert pp._window == pp.CONTENDED_S
        assert pp._contended_until - time.perf_counter() <= pp.CONTENDED_S
        expire()
        pp._best[key] = float("inf")  # fast again: the verdict ends, the window is short
        pp.matmul_into(np, a, b, out)
        assert pp._contended_until == 0.0 and pp._window == pp.CONTENDED_MIN_S
        pp._best[key] = 1e-12
        pp.matmul_into(np, a, b, out)  # one slow product alone is no verdict again
        assert pp._contended_until == 0.0
    np.testing.assert_array_equal(out, np.matmul(a, b))


def test_a_failing_product_on_blas_threads_puts_blas_back(blas_first, monkeypatch):
    if not _blas_libs():
        pytest.skip("no BLAS library under threadpoolctl")

    def failing(*args, **kwargs):
        raise MemoryError("matmul boom")

    monkeypatch.setattr(pp.np, "matmul", failing)
    a = np.ones((64, 30), "float32")
    with ThreadBudget(2):
        with pytest.raises(MemoryError, match="matmul boom"):
            pp.matmul_into(np, a, a.T.copy(), np.empty((64, 64), "float32"))
        assert blas_first == [2, 1]
        assert all(lib.num_threads == 1 for lib in _blas_libs())
        assert not pp._POOL_LOCK.locked()
