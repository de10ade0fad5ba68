"""Large matrix products of a thread budget, shared out in chunks by hetvm's threads.

Why: OpenBLAS splits a product statically, one share per thread, and its
threads wait for each other at barriers by spinning. On a shared machine one
of them is descheduled and the call waits for the scheduler to give it a
core back: on two cores with other processes running, the encoder model took
22.5 ms a call at two threads against 6.5 at one, and a product started
while another library's pool still spun (ORT's, libgomp's) doubled too.
So inside a budget of ``n > 1`` threads BLAS runs at one thread
(:mod:`.threads`) and :func:`matmul_into` cuts a large product into more
chunks than threads (rows or columns of the output, or its leading batch
axis), which the caller and ``n - 1`` persistent worker threads take from one
shared counter, each running single-threaded BLAS on its chunk (NumPy
releases the GIL inside the product). The caller takes chunks too: a worker
that is not scheduled costs only the chunks it does not take. Once no chunk
is left, the caller waits about one chunk's time for those a worker started,
then computes any still missing itself: a worker the scheduler set aside in
mid-chunk stalls the call by at most that (workers write into scratch
arrays, copied in only while the chunk is still wanted, so a late one never
writes ``out`` after the caller has returned). Nothing polls: idle workers
block on a lock.

Results are those of one ``np.matmul``: no chunk splits the sum over K, and
chunk edges are multiples of :data:`_ALIGN` rows or columns, so each chunk's
BLAS tiles are the ones the whole product would use (checked bit for bit in
the tests). Products that cannot be cut so (another array library, dtypes
other than float32/float64 or mixed, a 1-D operand, an operand or output
whose last axis is not contiguous, an output that may overlap an operand)
and those below :data:`PARALLEL_MIN` multiply-adds run as one call on the
caller. One product at a time uses the workers; another one, from a VM
called on another thread meanwhile, runs on its own caller.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from typing import Any, Callable

import numpy as np

from . import threads as _threads

__all__ = ["matmul_into", "PARALLEL_MIN", "CHUNKS_PER_THREAD", "CHUNK_MIN"]

#: multiply-adds from which a product inside a budget is shared out
PARALLEL_MIN = 1 << 22
#: chunks per thread of the budget: spare chunks go to whoever is running
CHUNKS_PER_THREAD = 3
#: the fewest multiply-adds in a chunk (BLAS loses efficiency on smaller ones)
CHUNK_MIN = 1 << 20
#: chunk edges along rows or columns are multiples of this (BLAS's tile sizes divide it)
_ALIGN = 16

#: the least seconds the caller waits for a worker's chunk before doing it itself
_WAIT_MIN_S = 50e-6

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_POOL_LOCK = threading.Lock()  # held by the one product using the workers
_workers: list[_Worker] = []
_job: _Job | None = None  # the product the workers are to join


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


_CORES = _cores()


class _Job:
    """One product's chunks. ``next(taken)`` hands out chunk indices; ``piece(i)``
    is chunk i's (a, b, out) views. The caller writes its chunks into ``out``
    directly, a worker into a scratch array copied in under ``lock`` only if the
    chunk is not ``committed`` yet; so once the caller has marked a chunk
    committed no worker writes it, and the caller may redo a late worker's
    chunk itself and return without it. Whoever commits the last chunk sets
    ``done``."""

    __slots__ = ("piece", "count", "taken", "lock", "committed", "left", "done", "error")

    def __init__(self, piece: Callable[[int], tuple[Any, Any, Any]], count: int) -> None:
        self.piece = piece
        self.count = count
        self.taken = itertools.count()  # next() is atomic under the GIL
        self.lock = threading.Lock()
        self.committed = [False] * count
        self.left = count
        self.done = threading.Event()
        self.error: BaseException | None = None

    def _commit(self, i: int) -> None:  # under self.lock
        self.committed[i] = True
        self.left -= 1
        if self.left == 0:
            self.done.set()

    def caller_work(self) -> float:
        """The caller's share: chunks until none is left untaken; returns the
        longest one's seconds."""
        longest = 0.0
        while (i := next(self.taken)) < self.count:
            with self.lock:
                if self.committed[i]:
                    continue
                self.committed[i] = True  # claimed: no worker writes it now
            t0 = time.perf_counter()
            a, b, out = self.piece(i)
            np.matmul(a, b, out=out)
            longest = max(longest, time.perf_counter() - t0)
            with self.lock:
                self.left -= 1
                if self.left == 0:
                    self.done.set()
        return longest

    def redo_late(self) -> None:
        """The caller computes every chunk no worker has committed yet."""
        with self.lock:
            late = [i for i in range(self.count) if not self.committed[i]]
            for i in late:
                self.committed[i] = True
        for i in late:
            a, b, out = self.piece(i)
            np.matmul(a, b, out=out)

    def worker_work(self) -> None:
        """A worker's share: chunks into scratch, copied in if still wanted."""
        while (i := next(self.taken)) < self.count:
            if self.committed[i]:
                continue  # an unlocked read: the caller took it over already
            try:
                a, b, out = self.piece(i)
                part = np.empty(out.shape, out.dtype)
                np.matmul(a, b, out=part)
            except BaseException as err:  # noqa: BLE001 - re-raised on the caller
                self.error = err
                continue  # the caller redoes the chunk, then raises
            with self.lock:
                if not self.committed[i]:
                    np.copyto(out, part)
                    self._commit(i)


class _Worker:
    """A daemon thread that joins each product it is woken for."""

    __slots__ = ("wake", "thread")

    def __init__(self, index: int) -> None:
        self.wake = threading.Lock()
        self.wake.acquire()  # released by a product that wants this worker
        self.thread = threading.Thread(target=self._loop, name=f"hetvm-products-{index}", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            self.wake.acquire()
            job = _job
            if job is not None:  # one woken late finds its product's chunks all taken
                job.worker_work()

    def signal(self) -> None:
        if self.wake.locked():  # else woken already and not yet running
            self.wake.release()


def _ensure_workers(n: int) -> list[_Worker]:
    while len(_workers) < n:  # under _POOL_LOCK
        _workers.append(_Worker(len(_workers)))
    return _workers[:n]


def _unit_last(a: Any) -> bool:
    return a.shape[-1] <= 1 or a.strides[-1] == a.itemsize


def _shareable(a: Any, b: Any, out: Any) -> int:
    """The multiply-adds of ``out[...] = a @ b`` where it may be threaded (on
    BLAS's threads or cut into chunks, see the module docstring), else 0.
    Cheap checks only: it runs before every large product."""
    if a.ndim < 2 or b.ndim < 2 or out.ndim < 2:
        return 0
    if not (a.dtype == b.dtype == out.dtype and out.dtype in _FLOATS):
        return 0
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if b.shape[-2] != k or out.shape[-2:] != (m, n):
        return 0  # NumPy's error, from the plain call
    batch, a_lead, b_lead = out.shape[:-2], a.shape[:-2], b.shape[:-2]
    if not a_lead == b_lead == batch:  # the usual case, without NumPy's broadcasting call
        try:
            if np.broadcast_shapes(a_lead, b_lead) != batch:
                return 0
        except ValueError:
            return 0
    macs = m * n * k
    for d in batch:
        macs *= d
    if macs < PARALLEL_MIN or not (_unit_last(a) and _unit_last(b) and _unit_last(out)):
        return 0
    if np.may_share_memory(out, a) or np.may_share_memory(out, b):
        return 0
    return macs


def _plan(
    a: Any, b: Any, out: Any, threads: int, macs: int = 0
) -> tuple[Callable[[int], tuple[Any, Any, Any]], int] | None:
    """(chunk i's (a, b, out) views, chunk count) for ``out[...] = a @ b``, or
    None to run it whole. ``macs``: what :func:`_shareable` gave, when the
    caller has asked it already (0: asked here)."""
    macs = macs or _shareable(a, b, out)
    if not macs:
        return None
    m = a.shape[-2]
    n = b.shape[-1]
    batch = out.shape[:-2]
    chunks = min(threads * CHUNKS_PER_THREAD, macs // CHUNK_MIN)
    axis = max(range(len(batch)), key=batch.__getitem__, default=None)
    if axis is not None and batch[axis] >= chunks:  # whole matrices along the longest batch axis
        bounds = _even(batch[axis], chunks, 1)
        pick_a, pick_b, pick_out = (_along(x, axis - (out.ndim - x.ndim)) for x in (a, b, out))

        def piece(i: int) -> tuple[Any, Any, Any]:
            lo, hi = bounds[i], bounds[i + 1]
            return pick_a(lo, hi), pick_b(lo, hi), pick_out(lo, hi)

    # else along the longer of rows and columns: a column chunk packs A again, a row chunk B
    elif n >= m:
        bounds = _even(n, chunks, _ALIGN)

        def piece(i: int) -> tuple[Any, Any, Any]:
            lo, hi = bounds[i], bounds[i + 1]
            return a, b[..., lo:hi], out[..., lo:hi]
    else:
        bounds = _even(m, chunks, _ALIGN)

        def piece(i: int) -> tuple[Any, Any, Any]:
            lo, hi = bounds[i], bounds[i + 1]
            return a[..., lo:hi, :], b, out[..., lo:hi, :]

    if len(bounds) < 3:
        return None
    return piece, len(bounds) - 1


def _along(x: Any, axis: int) -> Callable[[int, int], Any]:
    """``x[..., lo:hi, ...]`` along ``axis`` (x itself where it broadcasts there)."""
    if axis < 0 or x.shape[axis] == 1:
        return lambda lo, hi: x
    head = (slice(None),) * axis
    return lambda lo, hi: x[head + (slice(lo, hi),)]


def _even(length: int, chunks: int, align: int) -> list[int]:
    """Edges of at most ``chunks`` near-equal parts of ``length``: inner edges at
    multiples of ``align``, so every part but the last has whole multiples of it
    and the last at least ``align`` (a part of one row would be a different BLAS
    call, a vector product, whose sums differ in the last bits)."""
    units = length // align
    chunks = max(1, min(chunks, units))
    edges = [(units * i // chunks) * align for i in range(chunks)]
    return edges + [length]


def matmul_into(xp: Any, a: Any, b: Any, out: Any) -> None:
    """``xp.matmul(a, b, out=out)``; inside a thread budget of more than one
    thread a large product is shared out in chunks (see the module docstring)."""
    global _job
    threads = min(_threads.budget_threads(), _CORES)
    if threads <= 1 or xp is not np:
        xp.matmul(a, b, out=out)
        return
    macs = _shareable(a, b, out)
    if macs and _blas_threaded(a, b, out, threads):
        return
    plan = _plan(a, b, out, threads, macs) if macs else None
    if plan is None or not _POOL_LOCK.acquire(blocking=False):
        xp.matmul(a, b, out=out)
        return
    try:
        _threads.parallel_product()
        job = _Job(*plan)
        _job = job
        for w in _ensure_workers(threads - 1):
            w.signal()
        try:
            longest = job.caller_work()
            # a worker's chunk started about when the caller's last one did: wait
            # about a chunk's time for it, then do it here rather than wait for a
            # worker the scheduler has set aside
            if not job.done.wait(max(longest, _WAIT_MIN_S)):
                job.redo_late()
        except BaseException:  # an interrupt: no worker may write `out` after we leave
            with job.lock:
                job.committed[:] = [True] * job.count
            raise
        finally:
            _job = None
    finally:
        _POOL_LOCK.release()
    if job.error is not None:
        raise job.error


#: a product on BLAS's threads this many times slower than its best is taken
#: for a busy machine (a partner thread descheduled at a barrier)
SLOW_FACTOR = 1.8
#: slow products in a row that mark the machine busy (one alone may be an interrupt)
SLOW_STREAK = 2
#: the first busy verdict's seconds of products on hetvm's pool; each verdict
#: that the first product after it renews doubles it, up to :data:`CONTENDED_S`
CONTENDED_MIN_S = 0.02
#: the longest a busy verdict lasts before a product tries BLAS's threads again
CONTENDED_S = 0.5
_best: dict[tuple, float] = {}  # (a's shape, b's shape, dtype) -> least seconds on BLAS's threads
_contended_until = 0.0
_window = CONTENDED_MIN_S  # the next verdict's length
_slow = 0  # slow products in a row


def _blas_threaded(a: Any, b: Any, out: Any, threads: int) -> bool:
    """The product on BLAS's own ``threads`` threads, timed; False where it is
    not run so (another product holds the pool, the machine was found busy
    within :data:`CONTENDED_S`, or no BLAS library is under the budget).

    Why both: on an idle machine OpenBLAS's threads, which spin at their
    barriers, share a product 1.5-1.9x faster than one thread, where hetvm's
    chunks, handed over through the GIL and locks, got 1.0-1.7x (Inception v2
    41 -> 25 ms a call at 2 threads); on a busy one a descheduled spinning
    partner stalls every product (the encoder 762 ms a call against 49 with
    the pool). A product that takes :data:`SLOW_FACTOR` times its best on
    BLAS's threads, :data:`SLOW_STREAK` times in a row, marks the machine
    busy, and the products of the next :data:`CONTENDED_MIN_S` seconds go to
    the pool. The first product after that tries BLAS's threads again: fast, and
    the verdict is over; slow, and it is renewed at twice the length, up to
    :data:`CONTENDED_S`. Why not one long verdict: a transient (another
    library's pool spinning down after its call, an interrupt) marked the
    machine busy for half a second of slower pooled products, which at 2
    threads on 2 cores was most of SqueezeNet's lead over the pool lost right
    after an ONNX Runtime call (7.0 -> 9.4-9.9 ms a call, median of rounds);
    a machine that stays busy pays one slow product per verdict, at most every
    :data:`CONTENDED_S` seconds."""
    global _contended_until, _slow, _window
    t0 = time.perf_counter()
    if t0 < _contended_until or not _POOL_LOCK.acquire(blocking=False):
        return False
    try:
        if not _threads.set_blas_threads(threads):
            return False
        # BLAS's partner thread now spins for ~0.1 s: a Numba parallel loop
        # started meanwhile waits for it at its barrier (a SiLU of 131,072
        # elements 0.28 -> 7.5 ms right after a 2-thread product, 2 cores), so
        # Numba's loops run serial for that long, as after a pooled product
        _threads.parallel_product()
        try:
            np.matmul(a, b, out=out)
        finally:
            _threads.set_blas_threads(1)
        took = time.perf_counter() - t0
        key = (a.shape, b.shape, a.dtype.char)
        best = _best.get(key)
        if best is None or took < best:
            if len(_best) > 4096:  # a long run of dynamic shapes: start over
                _best.clear()
            _best[key] = took
        slow = best is not None and took > SLOW_FACTOR * best
        if not slow:
            _slow, _window = 0, CONTENDED_MIN_S
            return True
        _slow += 1
        # right after a verdict (its window grown) one slow product renews it
        if _slow >= (1 if _window > CONTENDED_MIN_S else SLOW_STREAK):
            _slow = 0
            _contended_until = time.perf_counter() + _window
            _window = min(2 * _window, CONTENDED_S)
        return True
    finally:
        _POOL_LOCK.release()
