"""One thread budget for a VM call, shared by BLAS and the generated kernels.

Why: NumPy's BLAS (OpenBLAS, MKL) and Numba's parallel loops each start a
pool as large as the machine. Run one after the other they oversubscribe the
cores -- OpenBLAS's threads keep spinning after a matrix product while
Numba's wake up -- which made generated kernels slower than the NumPy runner
on a two-core machine. A budget of ``n`` threads caps Numba at ``n`` and
holds BLAS at one thread (its other threads are hetvm's, see below) for the
length of a call, and puts back what was there before.

BLAS libraries are found through threadpoolctl (the ``threads`` extra);
without it the BLAS pool is left as the process set it
(``OPENBLAS_NUM_THREADS`` and the like, read when NumPy loads) and
:func:`blas_control` says so. An OpenBLAS on its own pthreads pool is then set
through its C functions directly (:class:`BlasLibrary`): threadpoolctl (3.6
on) lets only the first Python thread that set it change it and silently
ignores the others, so a VM called from a server's worker thread ran its
products at OpenBLAS's full pool, against its budget. Numba's cap
(``numba.set_num_threads``) is per calling thread and at most the pool Numba
launched (``NUMBA_NUM_THREADS``); it is applied only where Numba is already
imported (no generated kernel can run otherwise).

Calls from several threads at once: the BLAS setting is one per process, so
the first call in applies its budget and the last one out restores it (a
count under a lock); calls that overlap run under the first one's BLAS budget.

Inside a budget BLAS runs at one thread whatever ``n`` is, and the budget's
other threads are hetvm's own (:mod:`.product_pool`): a large product is cut
into chunks that the caller and ``n - 1`` worker threads take as they run.
Why: OpenBLAS shares a product out statically and its threads spin at
barriers and keep polling for ~0.1 s after it (``OPENBLAS_THREAD_TIMEOUT``),
so on a shared machine a descheduled partner stalled every product (the
encoder at two threads 22.5 ms a call against 6.5 at one, under load), and
its polling took the core that Numba's loops needed next. hetvm's workers
block on a lock between products; nothing polls. On an idle machine, though,
OpenBLAS's spinning threads share a product better than chunks handed over
through the GIL (1.5-1.9x one thread against 1.0-1.7x), so a product first
runs on them (:func:`set_blas_threads`) while it keeps its best time, and
goes to hetvm's pool for a while once products come out slow
(:mod:`.product_pool`).

Numba's loops (libgomp under its ``omp`` layer) still spin for milliseconds
after a parallel loop without yielding, and a product shared out meanwhile
has its worker compete with the spinning thread for a core; the other way
round, OpenBLAS's partner thread spins for ~0.1 s after a product on BLAS's
threads, and a Numba parallel loop started then waits for a core at its
barrier (a SiLU of 131,072 elements 0.28 ms alone, 7.5 ms right after a
2-thread product, on 2 cores -- enough to make the next products look slow
and send them to the pool). So the two take turns (:func:`parallel_product`,
:func:`numba_parallel_ok`): for :data:`PRODUCTS_AWAKE_S` after a product
threaded either way, Numba's loops run serial.
A model of large products (ResNet) keeps its Numba loops serial, one of
small convolutions (ShuffleNet) runs them in parallel.
"""

from __future__ import annotations

import ctypes
import logging
import sys
import threading
import time
from typing import Any

from ..errors import HetvmRuntimeError

__all__ = ["ThreadBudget", "BlasLibrary", "check_threads", "blas_control", "budget_threads", "parallel_product", "set_blas_threads",
           "numba_parallel_ok", "PRODUCTS_AWAKE_S"]

log = logging.getLogger("hetvm.threads")

_LOCK = threading.Lock()
_no_threadpoolctl_logged = False
_active = 0  # calls inside a budget now (any thread)
_saved: list[tuple[BlasLibrary, int]] = []  # (BLAS library, threads it had) while active

#: seconds after a product shared out by hetvm's workers during which Numba's
#: loops run serial (see the module docstring)
PRODUCTS_AWAKE_S = 0.1

_budget_threads = 0  # the threads of the budget applied now (0: none applied)
_products_until = 0.0  # perf_counter() until which Numba's loops run serial


def check_threads(threads: Any, where: str = "threads") -> int | None:
    """``threads`` as a positive int (None: no budget); a clear error otherwise."""
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise HetvmRuntimeError(f"{where} must be a positive whole number of threads, got {threads!r}")
    return threads


def blas_control() -> Any:
    """threadpoolctl's controller of the BLAS libraries loaded *now*; None where
    threadpoolctl is not installed (the budget then leaves BLAS as it is).

    Scanned afresh on every call (about 0.1 ms, once per budget made): a BLAS
    loaded after the first budget -- SciPy brings its own OpenBLAS -- must be
    capped too, and a controller cached at the first budget missed it."""
    global _no_threadpoolctl_logged
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        if not _no_threadpoolctl_logged:
            _no_threadpoolctl_logged = True
            log.info("threadpoolctl is not installed: a thread budget leaves BLAS's pool as it is")
        return None
    return ThreadpoolController().select(user_api="blas")


class BlasLibrary:
    """One BLAS library's thread count, read and set from any thread.

    An OpenBLAS on its own pthreads pool through its C functions
    ``openblas_get_num_threads`` / ``openblas_set_num_threads`` (the pool is
    one per process; :class:`ThreadBudget` counts overlapping calls under a
    lock). Why not threadpoolctl's controller: from version 3.6 its
    ``set_num_threads`` on such an OpenBLAS does nothing unless the calling
    Python thread is the first that set it, and each call looks its symbol up
    again (2-4 us a budget). Other libraries (MKL, BLIS, an OpenMP OpenBLAS,
    whose setting is per thread) go through the controller."""

    __slots__ = ("controller", "get", "set")

    def __init__(self, controller: Any) -> None:
        self.controller = controller
        raw = _openblas_functions(controller)
        if raw is not None:
            self.get, self.set = raw
        else:
            self.get = lambda: controller.num_threads
            self.set = lambda threads: controller.set_num_threads(threads)

    def __repr__(self) -> str:
        return f"BlasLibrary({getattr(self.controller, 'filepath', self.controller)!r})"


def _openblas_functions(controller: Any) -> tuple[Any, Any] | None:
    """(get, set) C functions of an OpenBLAS on its own pthreads pool; None for
    anything else, or where the symbols are not found."""
    if getattr(controller, "internal_api", None) != "openblas":
        return None
    if getattr(controller, "threading_layer", None) != "pthreads":
        return None
    dynlib = getattr(controller, "dynlib", None)
    if dynlib is None:
        return None
    for prefix in ("", "scipy_"):
        for suffix in ("", "64_", "_64"):
            try:
                get = getattr(dynlib, f"{prefix}openblas_get_num_threads{suffix}")
                put = getattr(dynlib, f"{prefix}openblas_set_num_threads{suffix}")
            except AttributeError:
                continue
            get.restype, get.argtypes = ctypes.c_int, []
            put.restype, put.argtypes = None, [ctypes.c_int]
            return get, put
    return None


class ThreadBudget:
    """``with budget:`` (or ``token = budget.apply()`` ... ``budget.restore(token)``)
    runs its body with BLAS at one thread, Numba capped at ``threads`` and
    hetvm's product workers (:mod:`.product_pool`) sharing out large products.

    Cheap enough for every call (a few library calls): the libraries are found
    once, when the budget is made. Nesting is allowed (a budget inside a call
    that has one keeps the outer BLAS setting, see the module docstring)."""

    __slots__ = ("threads", "_libs", "_tokens")

    def __init__(self, threads: int) -> None:
        self.threads = check_threads(threads)
        ctl = blas_control()
        self._libs = [BlasLibrary(lib) for lib in ctl.lib_controllers] if ctl is not None else []
        self._tokens = threading.local()  # per thread: a stack for `with`

    def apply(self) -> int | None:
        """Caps the pools; returns what :meth:`restore` needs."""
        global _active, _budget_threads
        with _LOCK:
            if _active == 0:
                _saved[:] = [(lib, lib.get()) for lib in self._libs]
                for lib, had in _saved:
                    if had != 1:
                        lib.set(1)
                _budget_threads = self.threads
            _active += 1
        return _numba_enter(self.threads)

    def restore(self, token: int | None) -> None:
        """Puts back what :meth:`apply` changed (BLAS: when the last call leaves)."""
        global _active, _budget_threads
        _numba_exit(token)
        with _LOCK:
            _active -= 1
            if _active == 0:
                _budget_threads = 0
                for lib, had in _saved:
                    if had != 1:
                        lib.set(had)
                _saved.clear()

    def __enter__(self) -> ThreadBudget:
        stack = self._tokens.__dict__.setdefault("stack", [])
        stack.append(self.apply())
        return self

    def __exit__(self, *exc: Any) -> None:
        self.restore(self._tokens.stack.pop())

    def __repr__(self) -> str:
        return f"ThreadBudget({self.threads})"


def set_blas_threads(threads: int) -> bool:
    """Sets the BLAS libraries the applied budget holds at one thread to
    ``threads`` (1: back to the budget's setting); False, with nothing set,
    outside every budget or without threadpoolctl. For :mod:`.product_pool`,
    which lets BLAS thread one product at a time while the machine is quiet."""
    libs = [lib for lib, _ in _saved]
    if not libs:
        return False
    for lib in libs:
        lib.set(threads)
    return True


def budget_threads() -> int:
    """The threads of the budget applied now (0 outside every budget)."""
    return _budget_threads


def parallel_product() -> None:
    """Called by :mod:`.product_pool` as it threads a product (on its pool or
    on BLAS's threads): Numba's loops run serial for :data:`PRODUCTS_AWAKE_S`
    (see the module docstring)."""
    global _products_until
    _products_until = time.perf_counter() + PRODUCTS_AWAKE_S


def numba_parallel_ok() -> bool:
    """Whether a Numba kernel may enter its parallel loop now: not inside a
    budget within :data:`PRODUCTS_AWAKE_S` of a shared-out product (see the
    module docstring). The kernel still checks its own size threshold and
    Numba's thread count."""
    return _budget_threads <= 1 or time.perf_counter() >= _products_until


def _numba_enter(threads: int) -> int | None:
    """Caps this thread's Numba parallel loops; returns what to restore (None: nothing)."""
    pair = _numba_pair()
    if pair is None:
        return None
    get, put, most = pair
    want = min(threads, most)
    had = get()
    if want == had:
        return None  # nothing to put back
    put(want)
    return had


def _numba_exit(had: int | None) -> None:
    if had is None:
        return
    pair = _numba_pair()
    if pair is not None and pair[0]() != had:
        pair[1](had)


_numba_fast: tuple | None = None  # (get, set, NUMBA_NUM_THREADS) once Numba's pool is up


def _numba_pair() -> tuple | None:
    """This thread's Numba thread count getter and setter, and the pool's size;
    None where Numba is not imported or has no threading layer.

    Why not ``numba.get_num_threads`` / ``set_num_threads``: each takes two
    locks to check that the pool was launched and validates its argument, and
    with four of them a budget cost a call 10 us (a small model's call is
    about 100). Once the pool is launched, the layer's own per-thread getter and
    setter are what those call; they are looked up once."""
    global _numba_fast
    if _numba_fast is not None:
        return _numba_fast
    numba = sys.modules.get("numba")
    if numba is None or not hasattr(numba, "set_num_threads"):
        return None
    try:
        numba.get_num_threads()  # launches the pool (once)
        from numba.np.ufunc import parallel

        get, put = parallel._get_num_threads, parallel._set_num_threads
        most = int(numba.config.NUMBA_NUM_THREADS)
        if not (callable(get) and callable(put)):
            raise RuntimeError("the threading layer has no thread count functions")
    except Exception as err:  # noqa: BLE001 - no threading layer: generated kernels run serial
        log.info("numba thread cap not applied: %s", err)
        return None
    _numba_fast = (get, put, most)
    return _numba_fast
