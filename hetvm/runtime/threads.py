"""One thread budget for a VM call, shared by BLAS and the generated kernels.

Why: NumPy's BLAS (OpenBLAS, MKL) and Numba's parallel loops each start a
pool as large as the machine. Run one after the other they oversubscribe the
cores -- OpenBLAS's threads keep spinning after a matrix product while
Numba's wake up -- which made generated kernels slower than the NumPy runner
on a two-core machine. A budget of ``n`` threads caps both at ``n`` for the
length of a call and puts back what was there before.

BLAS is capped through threadpoolctl (the ``threads`` extra); without it the
BLAS pool is left as the process set it (``OPENBLAS_NUM_THREADS`` and the
like, read when NumPy loads) and :func:`blas_control` says so. Numba's cap
(``numba.set_num_threads``) is per calling thread and at most the pool Numba
launched (``NUMBA_NUM_THREADS``); it is applied only where Numba is already
imported (no generated kernel can run otherwise).

Calls from several threads at once: the BLAS setting is one per process, so
the first call in applies its budget and the last one out restores it (a
count under a lock); calls that overlap run under the first one's BLAS budget.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from ..errors import HetvmRuntimeError

__all__ = ["ThreadBudget", "check_threads", "blas_control"]

log = logging.getLogger("hetvm.threads")

_LOCK = threading.Lock()
_no_threadpoolctl_logged = False
_active = 0  # calls inside a budget now (any thread)
_saved: list[tuple[Any, int]] = []  # (BLAS library, threads it had) while active


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


class ThreadBudget:
    """``with budget:`` (or ``token = budget.apply()`` ... ``budget.restore(token)``)
    runs its body with BLAS and Numba capped at ``threads``.

    Cheap enough for every call (a few library calls): the libraries are found
    once, when the budget is made. Nesting is allowed (a budget inside a call
    that has one keeps the outer BLAS setting, see the module docstring)."""

    __slots__ = ("threads", "_libs", "_tokens")

    def __init__(self, threads: int) -> None:
        self.threads = check_threads(threads)
        ctl = blas_control()
        self._libs = list(ctl.lib_controllers) if ctl is not None else []
        self._tokens = threading.local()  # per thread: a stack for `with`

    def apply(self) -> int | None:
        """Caps the pools; returns what :meth:`restore` needs."""
        global _active
        with _LOCK:
            if _active == 0:
                _saved[:] = [(lib, lib.num_threads) for lib in self._libs]
                for lib, had in _saved:
                    if had != self.threads:
                        lib.set_num_threads(self.threads)
            _active += 1
        return _numba_enter(self.threads)

    def restore(self, token: int | None) -> None:
        """Puts back what :meth:`apply` changed (BLAS: when the last call leaves)."""
        global _active
        _numba_exit(token)
        with _LOCK:
            _active -= 1
            if _active == 0:
                for lib, had in _saved:
                    if lib.num_threads != had:
                        lib.set_num_threads(had)
                _saved.clear()

    def __enter__(self) -> ThreadBudget:
        stack = self._tokens.__dict__.setdefault("stack", [])
        stack.append(self.apply())
        return self

    def __exit__(self, *exc: Any) -> None:
        self.restore(self._tokens.stack.pop())

    def __repr__(self) -> str:
        return f"ThreadBudget({self.threads})"


def _numba_enter(threads: int) -> int | None:
    """Caps this thread's Numba parallel loops; returns what to restore (None: nothing)."""
    numba = sys.modules.get("numba")
    if numba is None or not hasattr(numba, "set_num_threads"):
        return None
    try:
        had = numba.get_num_threads()
        want = min(threads, numba.config.NUMBA_NUM_THREADS)
        if want != had:
            numba.set_num_threads(want)
        return had
    except Exception as err:  # noqa: BLE001 - no threading layer: generated kernels run serial
        log.info("numba thread cap not applied: %s", err)
        return None


def _numba_exit(had: int | None) -> None:
    if had is None:
        return
    numba = sys.modules.get("numba")
    if numba is not None and numba.get_num_threads() != had:
        numba.set_num_threads(had)
