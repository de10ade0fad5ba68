"""Devices and their DeviceAPIs: where runtime memory lives and how it moves.

A :class:`Device` is an interned ``(kind, index)`` value, so the VM can test
"is this tensor on the kernel's device" with one identity comparison. Each
device has exactly one :class:`DeviceAPI`, which owns raw allocation, copies and
the device-wide byte count that a capacity limit is checked against.

Kinds:

* ``cpu`` -- NumPy buffers, readable by host code.
* ``sim`` -- a simulated accelerator for machines without one. Its buffers sit
  in a memory space host code may not read (``NDArray.numpy()`` refuses; only a
  copy brings data out), it may have a capacity in bytes and it may lack
  kernels for some ops. Several sim indices are distinct devices.
* ``cuda`` / ``rocm`` -- CuPy buffers; CuPy is imported only when first used.
"""

from __future__ import annotations

import threading
from typing import Any, Iterable

import numpy as np

from ..errors import HetvmRuntimeError
from ..ir.vdevice import runtime_kind

__all__ = ["Device", "DeviceAPI", "cpu", "device", "get_api", "copy_array", "KNOWN_KINDS"]

KNOWN_KINDS = ("cpu", "sim", "cuda", "rocm")
_KIND_ALIASES = {"gpu": "cuda", "host": "cpu"}


class Device:
    """A runtime device ``kind:index``; instances are interned per (kind, index)."""

    __slots__ = ("kind", "index", "__weakref__")
    _interned: dict[tuple[str, int], Device] = {}
    _lock = threading.Lock()

    kind: str
    index: int

    def __new__(cls, kind: str, index: int = 0) -> Device:
        kind = _normalise_kind(kind)
        index = int(index)
        if index < 0:
            raise HetvmRuntimeError(f"device index must be >= 0, got {kind}:{index}")
        key = (kind, index)
        found = cls._interned.get(key)
        if found is not None:
            return found
        with cls._lock:
            found = cls._interned.get(key)
            if found is None:
                found = object.__new__(cls)
                object.__setattr__(found, "kind", kind)
                object.__setattr__(found, "index", index)
                cls._interned[key] = found
        return found

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Device is immutable")

    def __reduce__(self):  # copy/deepcopy keep the interned instance
        return (Device, (self.kind, self.index))

    def __repr__(self) -> str:
        return f"{self.kind}({self.index})"

    def __str__(self) -> str:
        return f"{self.kind}:{self.index}"

    @property
    def api(self) -> DeviceAPI:
        """The DeviceAPI that manages this device's memory."""
        return get_api(self)


def _normalise_kind(kind: str) -> str:
    if not isinstance(kind, str):
        raise HetvmRuntimeError(f"device kind must be a string, got {kind!r}")
    kind = _KIND_ALIASES.get(kind, runtime_kind(kind))
    if kind not in KNOWN_KINDS:
        raise HetvmRuntimeError(
            f"unknown device kind '{kind}' (known: {', '.join(KNOWN_KINDS)}, "
            "or a target kind llvm/c)"
        )
    return kind


_UNSET: Any = object()


def cpu(index: int = 0) -> Device:
    """The host CPU device (NumPy)."""
    return Device("cpu", index)


def device(
    kind: str,
    index: int | None = None,
    *,
    capacity: int | None = _UNSET,
    missing_kernels: Iterable[str] = _UNSET,
) -> Device:
    """The device ``kind:index``; ``"sim:1"`` is accepted as ``kind``.

    ``capacity`` (bytes, None = unlimited) and ``missing_kernels`` (op names the
    device has no kernel for) configure the device when given; a call without
    them leaves an earlier configuration in place, so looking a device up never
    resets it.
    """
    if index is None:
        if isinstance(kind, str) and ":" in kind:
            kind, _, idx = kind.partition(":")
            try:
                index = int(idx)
            except ValueError:
                raise HetvmRuntimeError(f"bad device string '{kind}:{idx}'") from None
        else:
            index = 0
    dev = Device(kind, index)
    if capacity is not _UNSET or missing_kernels is not _UNSET:
        api = get_api(dev)
        if capacity is not _UNSET:
            if capacity is not None and (not isinstance(capacity, int) or capacity < 0):
                raise HetvmRuntimeError(
                    f"capacity of {dev} must be a non-negative int or None, got {capacity!r}"
                )
            api.capacity = capacity
        if missing_kernels is not _UNSET:
            if isinstance(missing_kernels, str):
                missing_kernels = (missing_kernels,)
            api.missing_kernels = frozenset(missing_kernels)
    return dev


class DeviceAPI:
    """Raw memory of one device: allocate, free, copy, synchronise, statistics.

    ``allocated`` counts the bytes of every live raw buffer on the device (all
    allocators together); the capacity is checked against it.
    """

    host_readable = True

    def __init__(self, dev: Device) -> None:
        self.device = dev
        self.capacity: int | None = None
        self.missing_kernels: frozenset[str] = frozenset()
        self.allocated = 0
        self.peak_allocated = 0
        self.raw_alloc_calls = 0

    @property
    def xp(self) -> Any:
        """The array module kernels use on this device (numpy or cupy)."""
        return np

    def fits(self, nbytes: int) -> bool:
        """Whether ``nbytes`` more fit under the capacity."""
        return self.capacity is None or self.allocated + nbytes <= self.capacity

    def raw_alloc(self, nbytes: int) -> Any:
        """A fresh uint8 buffer of ``nbytes``; the caller checked ``fits``."""
        buf = self._new_buffer(nbytes)
        self.allocated += nbytes
        self.raw_alloc_calls += 1
        if self.allocated > self.peak_allocated:
            self.peak_allocated = self.allocated
        return buf

    def raw_free(self, buffer: Any, nbytes: int) -> None:
        """Gives a buffer back to the device."""
        self.allocated -= nbytes

    def _new_buffer(self, nbytes: int) -> Any:
        return np.empty(nbytes, dtype=np.uint8)

    def to_host(self, array: Any) -> np.ndarray:
        """A host NumPy array with the contents of a device array (may alias)."""
        return array

    def from_host(self, host: np.ndarray, dst: Any) -> None:
        """Writes a host array into a device array of the same shape."""
        np.copyto(dst, host, casting="no")

    def synchronize(self) -> None:
        """Waits until the device is idle (a no-op for synchronous kinds)."""

    def stats(self) -> dict:
        """Device-wide statistics (all allocators together)."""
        return {
            "device": str(self.device),
            "allocated_bytes": self.allocated,
            "peak_allocated_bytes": self.peak_allocated,
            "raw_alloc_calls": self.raw_alloc_calls,
            "capacity": self.capacity,
            "missing_kernels": sorted(self.missing_kernels),
        }


class CpuAPI(DeviceAPI):
    """The host: NumPy buffers."""


class SimAPI(DeviceAPI):
    """A simulated accelerator: NumPy buffers that host code must not read."""

    host_readable = False


class CupyAPI(DeviceAPI):
    """CUDA/ROCm through CuPy, imported on first use."""

    def __init__(self, dev: Device) -> None:
        super().__init__(dev)
        self._cp: Any = None

    @property
    def xp(self) -> Any:
        if self._cp is None:
            try:
                import cupy  # type: ignore[import-not-found]
            except ImportError as exc:
                raise HetvmRuntimeError(
                    f"device {self.device} needs CuPy, which is not installed"
                ) from exc
            self._cp = cupy
        return self._cp

    def _new_buffer(self, nbytes: int) -> Any:
        cp = self.xp
        with cp.cuda.Device(self.device.index):
            return cp.empty(nbytes, dtype=cp.uint8)

    def to_host(self, array: Any) -> np.ndarray:
        return self.xp.asnumpy(array)

    def from_host(self, host: np.ndarray, dst: Any) -> None:
        dst.set(np.asarray(host, order="C"))  # (ascontiguousarray makes 0-d 1-d)

    def synchronize(self) -> None:
        cp = self.xp
        with cp.cuda.Device(self.device.index):
            cp.cuda.Device(self.device.index).synchronize()


_APIS: dict[Device, DeviceAPI] = {}
_API_CLASSES = {"cpu": CpuAPI, "sim": SimAPI, "cuda": CupyAPI, "rocm": CupyAPI}


def get_api(dev: Device) -> DeviceAPI:
    """The (single) DeviceAPI of a device, created on first use."""
    api = _APIS.get(dev)
    if api is None:
        api = _APIS.setdefault(dev, _API_CLASSES[dev.kind](dev))
    return api


def copy_array(src_dev: Device, src: Any, dst_dev: Device, dst: Any) -> None:
    """Copies a device array into another of the same shape and dtype, any devices."""
    src_api, dst_api = get_api(src_dev), get_api(dst_dev)
    if tuple(src.shape) != tuple(dst.shape) or src.dtype != dst.dtype:
        raise HetvmRuntimeError(
            f"copy from {src_dev} to {dst_dev}: source is {tuple(src.shape)} {src.dtype}, "
            f"destination is {tuple(dst.shape)} {dst.dtype}"
        )
    if src_api.xp is np and dst_api.xp is np:
        np.copyto(dst, src, casting="no")
    elif src_api.xp is dst_api.xp:  # both CuPy: device-to-device
        dst[...] = src
    else:
        dst_api.from_host(src_api.to_host(src), dst)
