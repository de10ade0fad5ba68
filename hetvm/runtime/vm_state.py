"""The two state objects that generated code and builtins work on.

Why two: a :class:`VirtualMachine` may be called from several threads at once,
so nothing a call changes may live on the VM. What is fixed once the VM is
loaded -- the executable, its devices and their allocators, the constants on
each device, the callables for function references -- is a :class:`VMState`,
shared by every call and only read by them. What one call changes -- the
blocks it allocated (given back if it fails), its trace events, where it is --
is a :class:`CallState`, made per outer call and passed to the generated code
as its first argument (``C``), and from there to the builtins that allocate.

Builtins and the code generator use only these two objects; they never reach
into the VM.

Reference counts (``Allocation.refs``) of a block two calls share (a constant,
or a caller's tensor passed to two calls) are changed by ``refs += 1`` /
``refs -= 1`` without a lock: under CPython's GIL a thread switch happens only
at calls and backward jumps, never inside one such statement. The allocators'
own books, which a free in one thread and an allocation in another change
together, take a lock.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import numpy as np

from .device import Device, device
from .memory import Allocation, Allocator, Storage
from .ndarray import NDArray
from .ndarray import array as nd_array
from .registry import get_global_func

__all__ = ["VMState", "CallState"]

# Enter = (function name, arguments, call state) -> result
Enter = Callable[[str, tuple, "CallState"], Any]


class VMState:
    """What every call of one VM reads: fixed after load (see the module docstring).

    ``devices`` are the runtime devices in executable order, ``allocators`` the
    allocator of each (by that index), ``trace`` / ``poison`` the VM's modes.
    """

    def __init__(
        self,
        exe: Any,
        devices: Sequence[Device],
        allocators: Sequence[Allocator],
        enter: Enter,
        *,
        trace: bool = False,
        poison: bool = False,
    ) -> None:
        self.exe = exe
        self.devices = list(devices)
        self.allocators = list(allocators)
        self.trace = trace
        self.poison = poison
        self._enter = enter
        self._consts: dict[tuple, NDArray] = {}
        self._refs: dict[str, Callable] = {}
        self._lock = threading.Lock()
        from .builtins import Builtins  # (builtins.py imports this module's CallState)

        self.builtins = Builtins(self)

    def device_of(self, index: int) -> Device:
        """The runtime device of executable device ``index``."""
        return self.devices[index]

    def constant(self, idx: int, dev_index: int | None) -> NDArray:
        """Constant ``idx`` on executable device ``dev_index`` (None: the host),
        copied there once and never released while the VM lives."""
        key = (idx, dev_index)
        arr = self._consts.get(key)
        if arr is None:
            with self._lock:
                arr = self._consts.get(key)
                if arr is None:
                    dev = self.devices[dev_index] if dev_index is not None else device("cpu", 0)
                    arr = nd_array(np.asarray(self.exe.constants[idx]), dev)
                    arr._killable = False
                    self._consts[key] = arr
        return arr

    def function_ref(self, name: str) -> Callable:
        """A callable ``ref(call, *args)`` running VM function ``name`` inside ``call``."""
        ref = self._refs.get(name)
        if ref is None:
            enter = self._enter

            def ref(call: CallState, *args: Any, _name: str = name) -> Any:
                return enter(_name, args, call)

            ref = self._refs.setdefault(name, ref)
        return ref

    @staticmethod
    def global_ref(name: str) -> Callable:
        """A callable for registered global function ``name`` (NumPy results wrapped)."""

        def call(*args: Any) -> Any:
            out = get_global_func(name)(*args)
            if isinstance(out, np.ndarray):
                out = nd_array(out)
            return out

        return call


class CallState:
    """One outer call's own facts (see the module docstring).

    ``blocks``: every block the call allocated, for the clean-up when it fails
    (freed ones are dropped as the list grows); ``events``: its trace
    (``trace=True``); ``where``: (function, pc) of the instruction running, kept
    up to date by generated code only when tracing.
    """

    __slots__ = ("state", "blocks", "events", "where", "_compact_at")

    def __init__(self, state: VMState) -> None:
        self.state = state
        self.blocks: list[Allocation] = []
        self.events: list[dict] = []
        self.where: tuple = (None, None)
        self._compact_at = 256

    def alloc(self, device_index: int, nbytes: int) -> Allocation:
        """A block of ``nbytes`` from executable device ``device_index``'s allocator,
        recorded as this call's."""
        block = self.state.allocators[device_index].alloc(nbytes)
        blocks = self.blocks
        blocks.append(block)
        if len(blocks) >= self._compact_at:  # a long loop: keep only the live ones
            blocks[:] = [b for b in blocks if not b.freed]
            self._compact_at = 2 * len(blocks) + 256
        return block

    def free_all(self) -> int:
        """Gives back every block of this call still held (whatever its count);
        returns the bytes freed. The clean-up after a failed call."""
        freed = 0
        for block in self.blocks:
            if not block.freed:
                freed += block.nbytes
                block.force_free()
        self.blocks.clear()
        return freed

    def event(self, kind: str, dev: Device, nbytes: int, **extra: Any) -> None:
        """Records a trace event (only when the VM traces)."""
        if self.state.trace:
            index = self.state.devices.index(dev) if dev in self.state.devices else None
            alloc = self.state.allocators[index] if index is not None else None
            self.events.append(
                {
                    "event": kind,
                    "device": str(dev),
                    "bytes": int(nbytes),
                    "function": self.where[0],
                    "pc": self.where[1],
                    "bytes_in_use": alloc.bytes_in_use if alloc is not None else None,
                    **extra,
                }
            )

    def kill(self, value: Any) -> None:
        """A Kill with trace events and poisoning; generated code calls
        ``codegen.kill_fast`` instead when the VM neither traces nor poisons."""
        state = self.state
        if value.__class__ is NDArray:
            if value._killable and not value._released:
                if state.trace:
                    self.event("kill", value.device, value.nbytes)
                if state.poison:
                    value._poison()
                value.release()
        elif value.__class__ is Storage:
            if state.trace and not value._released:
                self.event("kill", value.device, value.nbytes)
            value.release()
