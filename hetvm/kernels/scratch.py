"""Reusable per-thread scratch buffers for kernels' temporaries.

Why: kernels need temporaries the memory plan does not see (a padded input,
im2col columns, a depthwise accumulator). A fresh NumPy array above glibc's
mmap threshold is mapped anew on each call and page-faulted in as it is first
written; on ShuffleNet's 14x14 depthwise convolution that fault cost was more
than half the kernel (422 us against 180 us with the temporaries reused).
So each thread keeps one byte buffer per *slot* name, grown to the largest
request seen, and hands out views of it.

Rules for kernels: a slot's view is valid until the next request of the same
slot in the same thread, so one kernel call must not hold two views of one
slot, and a view must never escape the kernel (it is not an output). Requests
above ``CACHE_LIMIT`` bytes are allocated fresh and not kept, so at most
``CACHE_LIMIT`` bytes per slot and thread stay held; :func:`release` drops a
thread's buffers, :func:`held_bytes` says how much is held. Other array
modules (CuPy) have their own memory pools: they get plain ``xp.empty``.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

__all__ = ["scratch", "release", "held_bytes", "CACHE_LIMIT"]

CACHE_LIMIT = 8 << 20

_local = threading.local()


def _buffers() -> dict[str, np.ndarray]:
    bufs = getattr(_local, "buffers", None)
    if bufs is None:
        bufs = _local.buffers = {}
    return bufs


def scratch(xp: Any, slot: str, shape: tuple[int, ...], dtype: Any) -> Any:
    """An uninitialised C-contiguous array of ``shape`` and ``dtype``, backed by
    this thread's buffer for ``slot`` when it is small enough to keep."""
    if xp is not np:
        return xp.empty(shape, dtype=dtype)
    dt = np.dtype(dtype)
    nbytes = math.prod(shape) * dt.itemsize
    if nbytes > CACHE_LIMIT:
        return np.empty(shape, dtype=dt)
    bufs = _buffers()
    buf = bufs.get(slot)
    if buf is None or buf.nbytes < nbytes:
        buf = bufs[slot] = np.empty(max(nbytes, 1), dtype=np.uint8)
    return buf[:nbytes].view(dt).reshape(shape)


def release() -> None:
    """Drops this thread's scratch buffers (they are rebuilt on demand)."""
    _buffers().clear()


def held_bytes() -> int:
    """Bytes of scratch this thread holds."""
    return sum(b.nbytes for b in _buffers().values())
