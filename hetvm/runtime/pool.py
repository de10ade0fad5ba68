"""The pooled allocator: best fit with splitting and coalescing, in a bounded footprint.

Why: a pool that keeps one list per exact size grows without limit when sizes
vary (a dynamic sequence length: every new length is a new size, and no freed
block is ever the right one). This one works as caching / BFC allocators do:

* memory comes from the device in **segments**, each exactly the size of the
  request that missed (so a capacity the plan fits exactly still fits);
* a segment is cut into **chunks**; a request takes the smallest free chunk
  that holds it (best fit), split when the rest is at least ``ALIGN`` bytes
  (chunks start at multiples of ``ALIGN``);
* a freed chunk merges with free neighbours in its segment (coalescing), so a
  segment whose tensors are all dead is one free chunk again;
* **bounded**: before a miss takes new memory, wholly free segments are given
  back (least recently used first) until the pool would hold at most
  ``LIMIT_FACTOR`` (2) times the high-water mark of bytes in use -- the largest
  call's peak -- so pool bytes stay within 2x that peak over any sequence of
  calls, whatever the sizes;
* **capped**: ``max_pool_bytes`` bounds the free bytes kept (None: no cap);
* **trimmed**: a wholly free segment not used during the last ``idle_calls``
  calls of the VM (``begin_call``) goes back to the device.

``stats()`` says what the pool holds (segments, free chunks, the largest) and
why (the high-water mark, the limit derived from it, bytes given back per
reason). Kept views (``Allocation.views``) stay with a chunk until it is split
or merged: a static program that gets the same chunks back on every call
reuses the views carved from them.
"""

from __future__ import annotations

import bisect
import itertools
import threading
import weakref
from typing import Any

from ..errors import HetvmRuntimeError
from .device import Device
from .memory import Allocation, Allocator

__all__ = ["PooledAllocator", "ALIGN", "LIMIT_FACTOR"]

ALIGN = 256  # chunk starts (and split sizes) are multiples of this
LIMIT_FACTOR = 2  # pool bytes at most this times the high-water mark of bytes in use
DEFAULT_IDLE_CALLS = 64


class _Segment:
    """One buffer from the device."""

    __slots__ = ("buffer", "nbytes", "used", "last_used", "first")

    def __init__(self, buffer: Any, nbytes: int, tick: int) -> None:
        self.buffer = buffer
        self.nbytes = nbytes
        self.used = 0  # chunks handed out
        self.last_used = tick
        self.first: _Chunk | None = None


class _Chunk:
    """A piece ``[offset, offset + size)`` of a segment, free or handed out."""

    __slots__ = ("segment", "offset", "size", "free", "prev", "next", "buffer", "views", "key")

    def __init__(self, segment: _Segment, offset: int, size: int, key: int) -> None:
        self.segment = segment
        self.offset = offset
        self.size = size
        self.free = True
        self.prev: _Chunk | None = None
        self.next: _Chunk | None = None
        if offset == 0 and size == segment.nbytes:
            self.buffer = segment.buffer
        else:
            self.buffer = segment.buffer[offset : offset + size]
        self.views: dict = {}
        self.key = key


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


class PooledAllocator(Allocator):
    """Best-fit pool with splitting, coalescing, a 2x-peak limit, a cap and
    idle trimming (see the module docstring)."""

    name = "pooled"

    def __init__(
        self,
        dev: Device,
        *,
        poison: bool = False,
        max_pool_bytes: int | None = None,
        idle_calls: int | None = DEFAULT_IDLE_CALLS,
    ) -> None:
        super().__init__(dev, poison=poison)
        for what, value in (("max_pool_bytes", max_pool_bytes), ("idle_calls", idle_calls)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise HetvmRuntimeError(f"{what} must be a non-negative int or None, got {value!r}")
        self.max_pool_bytes = max_pool_bytes
        self.idle_calls = idle_calls
        self.reserved_bytes = 0  # bytes of all segments (held from the device)
        self.high_water_bytes = 0  # the largest bytes_in_use ever
        self.trimmed = {"limit": 0, "cap": 0, "idle": 0, "release": 0}
        self._tick = 0
        self._next_idle_scan = 0  # the first tick a segment may have gone idle for idle_calls
        self._keys = itertools.count()
        self._free: list[tuple[int, int]] = []  # sorted (size, key) of free chunks
        self._by_key: dict[int, _Chunk] = {}
        self._segments: dict[int, _Segment] = {}
        # a dropped VM's pool goes back to the device (else its bytes count forever)
        fin = weakref.finalize(self, _free_segments, self.api, self._segments)
        fin.atexit = False

    # -- taking and giving back (the lock is held) ---------------------------
    def _take(self, nbytes: int) -> Allocation:
        free = self._free
        i = bisect.bisect_left(free, (nbytes, -1))
        if i < len(free):
            chunk = self._by_key.pop(free.pop(i)[1])
            self.pool_bytes -= chunk.size
            rest = chunk.size - _aligned(nbytes)
            if rest >= ALIGN:
                chunk = self._split(chunk, chunk.size - rest)
        else:
            self._make_room(nbytes)
            seg = _Segment(self._raw(nbytes), nbytes, self._tick)
            self._segments[id(seg)] = seg
            self.reserved_bytes += nbytes
            chunk = seg.first = _Chunk(seg, 0, nbytes, next(self._keys))
        chunk.free = False
        seg = chunk.segment
        seg.used += 1
        seg.last_used = self._tick
        in_use = self.bytes_in_use + nbytes
        if in_use > self.high_water_bytes:
            self.high_water_bytes = in_use
        buffer = chunk.buffer if chunk.size == nbytes else chunk.buffer[:nbytes]
        return Allocation(buffer, nbytes, self, chunk, chunk.views)

    def _split(self, chunk: _Chunk, size: int) -> _Chunk:
        """The first ``size`` bytes of free ``chunk`` as a chunk of their own; the
        rest goes back to the free list."""
        seg = chunk.segment
        head = _Chunk(seg, chunk.offset, size, next(self._keys))
        tail = _Chunk(seg, chunk.offset + size, chunk.size - size, next(self._keys))
        self._relink(chunk.prev, [head, tail], chunk.next)
        chunk.prev = chunk.next = None  # out of the list: no cycle left for the GC to find
        self._insert(tail)
        return head

    @staticmethod
    def _relink(before: _Chunk | None, chunks: list[_Chunk], after: _Chunk | None) -> None:
        """Puts ``chunks`` between ``before`` and ``after`` in their segment's list
        (in place of whatever was there)."""
        for a, b in zip(chunks, chunks[1:]):
            a.next, b.prev = b, a
        chunks[0].prev, chunks[-1].next = before, after
        if before is None:
            chunks[0].segment.first = chunks[0]
        else:
            before.next = chunks[0]
        if after is not None:
            after.prev = chunks[-1]

    def _insert(self, chunk: _Chunk) -> None:
        chunk.free = True
        bisect.insort(self._free, (chunk.size, chunk.key))
        self._by_key[chunk.key] = chunk
        self.pool_bytes += chunk.size

    def _remove(self, chunk: _Chunk) -> None:
        i = bisect.bisect_left(self._free, (chunk.size, chunk.key))
        del self._free[i]
        del self._by_key[chunk.key]
        self.pool_bytes -= chunk.size

    def _give_back(self, block: Allocation) -> None:
        chunk = block.chunk
        seg = chunk.segment
        seg.used -= 1
        seg.last_used = self._tick
        prev, nxt = chunk.prev, chunk.next
        if (prev is not None and prev.free) or (nxt is not None and nxt.free):
            start, end = chunk, chunk
            if prev is not None and prev.free:
                self._remove(prev)
                start = prev
            if nxt is not None and nxt.free:
                self._remove(nxt)
                end = nxt
            merged = _Chunk(seg, start.offset, end.offset + end.size - start.offset, next(self._keys))
            self._relink(start.prev, [merged], end.next)
            for gone in (start, chunk, end):  # out of the list: no cycle left for the GC
                gone.prev = gone.next = None
            chunk = merged
        self._insert(chunk)
        if self.max_pool_bytes is not None and self.pool_bytes > self.max_pool_bytes:
            self._give_segments_back("cap", lambda: self.pool_bytes > self.max_pool_bytes)

    # -- bounding the footprint ------------------------------------------------
    def _make_room(self, nbytes: int) -> None:
        """Before a miss takes ``nbytes`` more: gives wholly free segments back until
        the pool holds at most LIMIT_FACTOR x the high-water mark of bytes in use."""
        limit = LIMIT_FACTOR * max(self.high_water_bytes, self.bytes_in_use + nbytes)
        if self.reserved_bytes + nbytes > limit:
            self._give_segments_back("limit", lambda: self.reserved_bytes + nbytes > limit)

    def _give_segments_back(self, reason: str, more: Any, idle_before: int | None = None) -> None:
        """Frees wholly free segments, least recently used first, while ``more()``."""
        idle = [s for s in self._segments.values() if s.used == 0]
        idle.sort(key=lambda s: s.last_used)
        for seg in idle:
            if not more():
                break
            if idle_before is not None and seg.last_used >= idle_before:
                break
            self._remove(seg.first)
            del self._segments[id(seg)]
            self.reserved_bytes -= seg.nbytes
            self.trimmed[reason] += seg.nbytes
            self.api.raw_free(seg.buffer, seg.nbytes)
            seg.first = seg.buffer = None

    def _release_idle(self) -> None:
        self._give_segments_back("release", lambda: True)

    # -- public ---------------------------------------------------------------
    def release_all(self) -> None:
        """Returns every wholly free segment to the device."""
        self._locked(self._release_idle)

    def trim(self, keep_bytes: int = 0) -> None:
        """Gives wholly free segments back (least recently used first) until at most
        ``keep_bytes`` free bytes are kept."""
        self._locked(lambda: self._give_segments_back("release", lambda: self.pool_bytes > keep_bytes))

    def begin_call(self) -> None:
        """A VM call starts (the VM was idle): the report restarts, and segments
        idle for ``idle_calls`` calls go back to the device.

        The segments are scanned only from the first tick one of them could have
        expired at (the least ``last_used`` at the last scan, plus ``idle_calls``):
        ``last_used`` only grows and a new segment starts at the current tick, so
        no expiry is missed, and a call on a warm pool does not sort its
        segments (1-2 us a call)."""
        with self._lock:
            self._owner = threading.get_ident()
            try:
                self.reset_peak()
                self._tick += 1
                if self.idle_calls is not None and self._tick >= self._next_idle_scan:
                    before = self._tick - self.idle_calls
                    self._give_segments_back("idle", lambda: True, idle_before=before)
                    oldest = min((seg.last_used for seg in self._segments.values()), default=self._tick)
                    self._next_idle_scan = oldest + self.idle_calls
                while self._deferred:
                    self._free_locked(self._deferred.pop())
            finally:
                self._owner = None

    def _locked(self, fn: Any) -> None:
        with self._lock:
            self._owner = threading.get_ident()
            try:
                fn()
                while self._deferred:
                    self._free_locked(self._deferred.pop())
            finally:
                self._owner = None

    def stats(self) -> dict:
        """The allocator's figures, plus what the pool holds and why: ``reserved_bytes``
        (held from the device), ``segments``, ``free_chunks``, ``largest_free_chunk``,
        ``high_water_bytes`` (the largest bytes in use ever), ``limit_bytes`` (what a
        miss may grow the pool to: LIMIT_FACTOR x the high-water mark), ``max_pool_bytes``
        (the cap on free bytes), and ``trimmed`` (bytes given back, by reason: limit,
        cap, idle, release)."""
        with self._lock:
            out = super().stats()
            out.update(
                reserved_bytes=self.reserved_bytes,
                segments=len(self._segments),
                free_chunks=len(self._free),
                largest_free_chunk=self._free[-1][0] if self._free else 0,
                high_water_bytes=self.high_water_bytes,
                limit_bytes=LIMIT_FACTOR * self.high_water_bytes,
                max_pool_bytes=self.max_pool_bytes,
                trimmed=dict(self.trimmed),
            )
        return out


def _free_segments(api: Any, segments: dict[int, _Segment]) -> None:
    for seg in segments.values():
        api.raw_free(seg.buffer, seg.nbytes)
    segments.clear()
