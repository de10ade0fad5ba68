"""Choosing an allocator by name: above both kinds, so neither module imports the other's.

``memory`` holds the allocator interface, blocks, storages and the naive
allocator; ``pool`` builds the pooled allocator on them; this module picks one
for a VM or a graph executor.
"""

from __future__ import annotations

from typing import Any

from ..errors import HetvmRuntimeError
from .device import Device
from .memory import Allocator, NaiveAllocator
from .pool import PooledAllocator

__all__ = ["make_allocator"]


def make_allocator(kind: str, dev: Device, *, poison: bool = False, **options: Any) -> Allocator:
    """``kind`` is "naive" or "pooled"; ``options`` configure a pooled allocator
    (``max_pool_bytes``, ``idle_calls``: see :class:`~.pool.PooledAllocator`)."""
    if kind == "naive":
        if options:
            raise HetvmRuntimeError(f"the naive allocator takes no options ({', '.join(options)})")
        return NaiveAllocator(dev, poison=poison)
    if kind == "pooled":
        unknown = sorted(set(options) - {"max_pool_bytes", "idle_calls"})
        if unknown:
            raise HetvmRuntimeError(
                f"unknown pooled allocator option(s) {', '.join(unknown)} "
                "(known: max_pool_bytes, idle_calls)"
            )
        return PooledAllocator(dev, poison=poison, **options)
    raise HetvmRuntimeError(f"unknown allocator '{kind}' (use 'naive' or 'pooled')")
