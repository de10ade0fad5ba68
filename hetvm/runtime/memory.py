"""Storage, reference counting, the allocator interface and the naive allocator
(the pooled one is in ``pool``, the choice by name in ``allocators``).

An :class:`Allocation` is one block handed out by an allocator; it counts its
references. A :class:`Storage` (what ``alloc_storage`` puts in a register)
holds one reference, and every NDArray view carved out of the block holds one
more. A reference is dropped explicitly (a ``Kill``) or when its Python object
is garbage-collected (``__del__``); a released flag on the object makes that
happen at most once, so a release is idempotent. When the count reaches zero the block goes back
to its allocator at once; that is what makes ``KillAfterLastUse`` real even
when a storage is killed right after the tensor carved from it.
"""

from __future__ import annotations

import atexit
import threading
from typing import Any, Callable

from ..errors import HetvmRuntimeError, OutOfMemoryError
from .device import Device, get_api

__all__ = [
    "Allocation",
    "Storage",
    "Allocator",
    "NaiveAllocator",
    "default_allocator",
]

EventSink = Callable[[str, Device, int], None]
POISON_BYTE = 0xFF
MAX_ALLOC_BYTES = 2**63 - 1  # what NumPy's intp (and any device's size_t) can count

# [False] once the interpreter exits: ``__del__`` of a Storage or NDArray then
# releases nothing. A list bound as a default argument, so that it is still
# there when module globals are torn down.
RUNNING = [True]


@atexit.register
def _exiting() -> None:
    RUNNING[0] = False


#: the ``chunk`` of a block over the caller's bytes (:meth:`Allocator.adopt`)
ADOPTED = "adopted"


class Allocation:
    """One allocated block of ``nbytes`` on a device, with a reference count."""

    __slots__ = ("buffer", "nbytes", "refs", "allocator", "freed", "chunk", "views", "__weakref__")

    def __init__(
        self, buffer: Any, nbytes: int, allocator: Allocator, chunk: Any = None,
        views: dict | None = None,
    ) -> None:
        self.buffer = buffer
        self.nbytes = nbytes
        self.refs = 0
        self.allocator = allocator
        self.freed = False
        self.chunk = chunk  # where a pooled allocator carved it from (see .pool)
        # Backend arrays over ``buffer`` made by the VM's specialised builtins, by
        # instruction (see ``builtins.static_alloc_tensor``). A pooled buffer keeps
        # them across calls, so a call that gets the buffer back reuses its views
        # instead of slicing them again; None where nothing is kept (naive).
        self.views = views

    @property
    def device(self) -> Device:
        return self.allocator.device

    def retain(self) -> None:
        self.refs += 1

    def release(self) -> None:
        """Drops one reference; the last one gives the block back."""
        if self.freed:
            return
        self.refs -= 1
        if self.refs <= 0:
            self.allocator.free(self)

    def force_free(self) -> None:
        """Gives the block back whatever its count (error clean-up)."""
        if not self.freed:
            self.refs = 0
            self.allocator.free(self)


class BlockHolder:
    """An object holding one counted reference to an ``Allocation`` (``allocation``),
    dropped once: by ``release()`` (a Kill) or, failing that, at garbage collection.

    Why ``__del__`` and not ``weakref.finalize``: a finalizer costs more to make
    and to run than the rest of a tensor, and the VM makes one tensor per
    instruction. ``_released`` makes the release happen at most once. Nothing is
    released once the interpreter is exiting (as finalizers with ``atexit=False``
    did): the allocators may be half torn down by then.
    """

    __slots__ = ()
    allocation: Allocation
    _released: bool

    def release(self) -> None:
        """Drops this object's reference to its block (idempotent)."""
        if not self._released:
            self._released = True
            self.allocation.release()

    def __del__(self, _running: list = RUNNING) -> None:
        try:
            if self._released:
                return
        except AttributeError:  # __init__ failed before the reference was counted
            return
        self._released = True
        if _running[0]:
            self.allocation.release()


class Storage(BlockHolder):
    """A device allocation of ``nbytes`` bytes that tensors are carved from.

    The Storage object itself holds one reference to its block; ``release()``
    (a Kill) or garbage collection drops it.
    """

    __slots__ = ("allocation", "scope", "_released", "__weakref__")

    def __init__(self, allocation: Allocation, scope: str = "global") -> None:
        self.allocation = allocation
        self.scope = scope
        allocation.retain()
        self._released = False

    @property
    def device(self) -> Device:
        return self.allocation.allocator.device

    @property
    def nbytes(self) -> int:
        return self.allocation.nbytes

    @property
    def alive(self) -> bool:
        return not self._released and not self.allocation.freed

    def __repr__(self) -> str:
        state = "" if self.alive else ", released"
        return f"Storage({self.nbytes} bytes on {self.device}{state})"


class Allocator:
    """Hands out blocks on one device and counts what it hands out.

    ``bytes_in_use``: bytes of live blocks; ``peak_bytes``: the high-water mark
    since the last ``reset_peak``; ``pool_bytes``: freed bytes kept for reuse;
    ``alloc_calls``: allocation requests; ``raw_allocs``: requests that reached
    the device. ``poison`` fills freed memory with 0xFF (NaN for floats).

    Thread safety: ``alloc`` and ``free`` hold the allocator's lock. A free that
    happens inside ``alloc`` on the same thread (a garbage-collected tensor) is
    deferred to the end of that ``alloc``, so the books are never changed
    halfway through another change.
    """

    name = "base"

    def __init__(self, dev: Device, *, poison: bool = False) -> None:
        self.device = dev
        self.api = get_api(dev)
        self.poison = poison
        self.bytes_in_use = 0
        self.peak_bytes = 0
        self.pool_bytes = 0
        self.alloc_calls = 0
        self.raw_allocs = 0
        self.on_event: EventSink | None = None
        self._lock = threading.Lock()
        self._owner: int | None = None  # the thread inside alloc/free
        self._deferred: list[Allocation] = []

    # -- public -----------------------------------------------------------
    def alloc(self, nbytes: int) -> Allocation:
        """A block of exactly ``nbytes`` bytes (reference count 0)."""
        nbytes = int(nbytes)
        if nbytes < 0:
            raise HetvmRuntimeError(f"negative allocation of {nbytes} bytes on {self.device}")
        if nbytes > MAX_ALLOC_BYTES:
            raise OutOfMemoryError(
                f"cannot allocate {nbytes} bytes on {self.device}: more than any allocation "
                f"can hold ({MAX_ALLOC_BYTES} bytes, 2**63 - 1)"
            )
        return self._counted(nbytes, self._take)

    def adopt(self, buffer: Any) -> Allocation:
        """A block over bytes the caller owns (``buffer``: a 1-D uint8 array), for
        a NumPy input that the VM reads in place instead of copying: counted as
        the copy was (``bytes_in_use``, ``peak_bytes``, an ``alloc`` event), but
        never pooled, poisoned or given to the device when it is freed."""
        nbytes = buffer.nbytes
        if self.on_event is not None:  # tracing: the books with the event, re-entry safe
            return self._counted(nbytes, lambda n: Allocation(buffer, n, self, ADOPTED))
        block = Allocation(buffer, nbytes, self, ADOPTED)
        with self._lock:  # _counted's books, written out: one per NumPy input of every call
            self.alloc_calls += 1
            self.bytes_in_use += nbytes
            if self.bytes_in_use > self.peak_bytes:
                self.peak_bytes = self.bytes_in_use
        return block

    def _counted(self, nbytes: int, make: Callable[[int], Allocation]) -> Allocation:
        """``make(nbytes)`` under the lock, with the books (calls, bytes in use,
        peak, the event) kept."""
        with self._lock:
            self._owner = threading.get_ident()
            try:
                self.alloc_calls += 1
                block = make(nbytes)
                self.bytes_in_use += nbytes
                if self.bytes_in_use > self.peak_bytes:
                    self.peak_bytes = self.bytes_in_use
                if self.on_event is not None:
                    self.on_event("alloc", self.device, nbytes)
                while self._deferred:
                    self._free_locked(self._deferred.pop())
            finally:
                self._owner = None
        return block

    def free(self, block: Allocation) -> None:
        """Takes a block back (called when its reference count reaches zero)."""
        if block.freed:
            return
        if self._owner == threading.get_ident():  # re-entered from inside alloc/free
            self._deferred.append(block)
            return
        with self._lock:
            self._owner = threading.get_ident()
            try:
                self._free_locked(block)
                while self._deferred:
                    self._free_locked(self._deferred.pop())
            finally:
                self._owner = None

    def _free_locked(self, block: Allocation) -> None:
        if block.freed:
            return
        block.freed = True
        self.bytes_in_use -= block.nbytes
        if block.chunk is not ADOPTED:  # the caller's bytes stay as they are
            if self.poison:
                poison_buffer(block.buffer)
            self._give_back(block)
        block.buffer = block.views = None
        if self.on_event is not None:
            self.on_event("free", self.device, block.nbytes)

    def release_all(self) -> None:
        """Returns every pooled block to the device."""

    def begin_call(self) -> None:
        """A VM call starts on an idle VM: the report's figures restart."""
        self.reset_peak()

    def reset_peak(self) -> None:
        self.peak_bytes = self.bytes_in_use
        self.alloc_calls = 0
        self.raw_allocs = 0

    def stats(self) -> dict:
        return {
            "peak_bytes": self.peak_bytes,
            "bytes_in_use": self.bytes_in_use,
            "pool_bytes": self.pool_bytes,
            "alloc_calls": self.alloc_calls,
            "raw_allocs": self.raw_allocs,
        }

    # -- for subclasses ----------------------------------------------------
    def _raw(self, nbytes: int) -> Any:
        if not self.api.fits(nbytes):
            self._release_idle()
            if not self.api.fits(nbytes):
                raise OutOfMemoryError(
                    f"out of memory on {self.device}: requested {nbytes} bytes with "
                    f"{self.api.allocated} bytes in use (this allocator: {self.bytes_in_use}), "
                    f"capacity {self.api.capacity} bytes"
                )
        try:
            buf = self.api.raw_alloc(nbytes)
        except (MemoryError, ValueError, OverflowError) as exc:  # the host (or library) refused it
            if isinstance(exc, OutOfMemoryError):
                raise
            self._release_idle()  # pooled blocks are bytes the next try may get
            try:
                buf = self.api.raw_alloc(nbytes)
            except (MemoryError, ValueError, OverflowError):
                raise OutOfMemoryError(
                    f"out of memory on {self.device}: the system refused {nbytes} bytes with "
                    f"{self.api.allocated} bytes in use (this allocator: {self.bytes_in_use})"
                ) from None
        self.raw_allocs += 1
        return buf

    def _release_idle(self) -> None:
        """Gives idle pooled memory back to the device (the lock is held)."""

    def _take(self, nbytes: int) -> Allocation:
        return Allocation(self._raw(nbytes), nbytes, self)

    def _give_back(self, block: Allocation) -> None:
        self.api.raw_free(block.buffer, block.nbytes)


class NaiveAllocator(Allocator):
    """Every request goes to the device and every free returns at once."""

    name = "naive"


def poison_buffer(buffer: Any) -> None:
    """Fills a byte buffer with 0xFF, which reads back as NaN in floats."""
    if buffer is not None:
        buffer[...] = POISON_BYTE


_DEFAULT: dict[Device, Allocator] = {}


def default_allocator(dev: Device) -> Allocator:
    """The naive allocator used outside a VM (``nd.array``, constants)."""
    alloc = _DEFAULT.get(dev)
    if alloc is None:
        alloc = _DEFAULT.setdefault(dev, NaiveAllocator(dev))
    return alloc

