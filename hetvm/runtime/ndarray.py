"""NDArray: a typed view (storage block, byte offset, shape, dtype) on a device.

``hetvm.nd.array(np_array, device)`` makes one; ``.numpy()`` reads it back
(refused on devices host code cannot read, such as ``sim``, where only a copy
brings data out). Each live NDArray holds one reference to its block, dropped by
``release()`` (a Kill) or, failing that, when the object is garbage-collected.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import HetvmRuntimeError
from .device import Device, copy_array, cpu, get_api
from .memory import POISON_BYTE, Allocation, Allocator, BlockHolder, default_allocator

__all__ = ["NDArray", "ShapeTuple", "array", "empty", "view", "np_dtype", "nbytes_of"]


class ShapeTuple(tuple):
    """A runtime shape value (what ``R.shape`` / ``shape_of`` produce)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"ShapeTuple({tuple.__repr__(self)})"


def np_dtype(dtype: Any) -> np.dtype:
    """The NumPy dtype for a hetvm dtype string; an error names unsupported ones."""
    try:
        return _checked_dtype(dtype)
    except TypeError:  # unhashable: not a dtype name or object
        return _check_dtype(dtype)


@functools.lru_cache(maxsize=64)
def _checked_dtype(dtype: Any) -> np.dtype:
    """Cached: tensors are made on every VM instruction from a few dtypes."""
    return _check_dtype(dtype)


def _check_dtype(dtype: Any) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise HetvmRuntimeError(f"unsupported dtype {dtype!r}") from None
    if dt.kind not in "biuf" or dt.hasobject:
        raise HetvmRuntimeError(f"unsupported dtype {dtype!r}")
    return dt


def nbytes_of(shape: Sequence[int], dtype: Any) -> int:
    """Bytes needed by a dense tensor."""
    n = np_dtype(dtype).itemsize
    for d in shape:
        if int(d) < 0:
            raise HetvmRuntimeError(f"negative dimension in shape {tuple(shape)}")
        n *= int(d)
    return n


class NDArray(BlockHolder):
    """A dense tensor living in a device block.

    ``_data`` is the backend array (NumPy or CuPy) that kernels receive; the
    VM reads it directly, so the attribute names are part of the runtime.
    """

    __slots__ = ("_data", "device", "allocation", "offset", "_released", "_killable", "__weakref__")

    def __init__(self, data: Any, dev: Device, allocation: Allocation, offset: int) -> None:
        self._data = data
        self.device = dev
        self.allocation = allocation
        self.offset = offset
        self._killable = True
        allocation.refs += 1  # Allocation.retain, inlined: one per VM instruction
        self._released = False

    def __copy__(self) -> NDArray:
        """Another view of the same bytes, holding its own reference."""
        self._check_alive("copy")
        return NDArray(self._data, self.device, self.allocation, self.offset)

    def __deepcopy__(self, memo: dict) -> NDArray:
        """A copy of the contents in a block of its own, on the same device."""
        return self.copyto(self.device)

    # -- inspection ---------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape)

    @property
    def dtype(self) -> str:
        return str(self._data.dtype)

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def nbytes(self) -> int:
        return int(self._data.nbytes)

    @property
    def alive(self) -> bool:
        return not self._released and not self.allocation.freed

    def numpy(self) -> np.ndarray:
        """A host copy of the contents, from any device (as TVM's and CuPy's arrays
        give): an explicit request to read is a copy, not a device mismatch. The
        strictness about where data lives is the kernels' (a kernel never reads a
        tensor on another device)."""
        self._check_alive("numpy()")
        return np.array(get_api(self.device).to_host(self._data), copy=True)

    def copyto(self, target: Device | NDArray) -> NDArray:
        """A copy on another device (or into an existing NDArray, returned)."""
        self._check_alive("copyto()")
        if isinstance(target, NDArray):
            copy_array(self.device, self._data, target.device, target._data)
            return target
        out = empty(self.shape, self.dtype, target)
        copy_array(self.device, self._data, target, out._data)
        return out

    def _check_alive(self, what: str) -> None:
        if not self.alive:
            raise HetvmRuntimeError(
                f"{what} on a released NDArray {self.shape} {self.dtype} on {self.device}"
            )

    def _poison(self) -> None:
        if self.alive and self._data.size:
            start = self.offset
            self.allocation.buffer[start : start + self._data.nbytes] = POISON_BYTE

    def __repr__(self) -> str:
        state = "" if self.alive else ", released"
        return f"NDArray(shape={self.shape}, dtype={self.dtype}, device={self.device}{state})"

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.numpy()
        return out if dtype is None else out.astype(dtype)


def view(allocation: Allocation, offset: int, shape: Sequence[int], dtype: Any) -> NDArray:
    """An NDArray over ``allocation`` at byte ``offset``; bounds are checked."""
    if allocation.freed:
        raise HetvmRuntimeError(
            f"alloc_tensor on a released storage ({allocation.nbytes} bytes on "
            f"{allocation.device})"
        )
    dt = np_dtype(dtype)
    shape = tuple(map(int, shape))
    if min(shape, default=0) < 0:
        raise HetvmRuntimeError(f"negative dimension in shape {shape}")
    size = math.prod(shape) * dt.itemsize
    offset = int(offset)
    if offset < 0 or offset + size > allocation.nbytes:
        raise HetvmRuntimeError(
            f"tensor {shape} {dt} at offset {offset} ({size} bytes) does not fit in a storage "
            f"of {allocation.nbytes} bytes on {allocation.device}"
        )
    data = allocation.buffer[offset : offset + size].view(dt).reshape(shape)
    return NDArray(data, allocation.device, allocation, offset)


def empty(
    shape: Sequence[int], dtype: Any, dev: Device | None = None, allocator: Allocator | None = None
) -> NDArray:
    """An uninitialised tensor with its own block."""
    dev = dev if dev is not None else cpu(0)
    allocator = allocator if allocator is not None else default_allocator(dev)
    block = allocator.alloc(nbytes_of(shape, dtype))
    return view(block, 0, shape, dtype)


def adopt(host: np.ndarray, dev: Device, allocator: Allocator | None = None) -> NDArray | None:
    """An NDArray over ``host``'s own bytes on a CPU device, or None where the
    array cannot be read in place (not C-contiguous, misaligned, foreign byte
    order, a subclass, a dtype hetvm does not know): then it is copied.

    Why: the VM never writes its parameters (in-place rewrites only take the
    function's own allocations, and a loop copies a parameter it carries), so
    copying a NumPy input cost a call microseconds per input for nothing. A
    result that would be those bytes is copied at return instead (see
    ``vm._owned``): results never alias inputs."""
    if dev.kind != "cpu" or type(host) is not np.ndarray:
        return None
    try:
        np_dtype(host.dtype)
    except HetvmRuntimeError:
        return None
    return adopt_checked(host, dev, allocator)


def adopt_checked(host: np.ndarray, dev: Device, allocator: Allocator | None = None) -> NDArray | None:
    """:func:`adopt` for an array whose dtype hetvm knows and a CPU ``dev``
    (the caller checked both): None unless it is C-contiguous, aligned and in
    native byte order."""
    flags = host.flags
    if not (flags.c_contiguous and flags.aligned) or not host.dtype.isnative:
        return None
    allocator = allocator if allocator is not None else default_allocator(dev)
    buffer = host.reshape(-1).view(np.uint8) if host.size else np.empty(0, np.uint8)
    return NDArray(host, dev, allocator.adopt(buffer), 0)


def adopter_for(dev: Device) -> Callable[[np.ndarray], NDArray | None]:
    """:func:`adopt_checked` for one CPU device, its allocator looked up once
    (a parameter's check at VM load): what every call does per NumPy input."""
    allocator = default_allocator(dev)
    counted = allocator.adopt

    def adopt_on(host: np.ndarray) -> NDArray | None:
        flags = host.flags
        if not (flags.c_contiguous and flags.aligned) or not host.dtype.isnative:
            return None
        buffer = host.reshape(-1).view(np.uint8) if host.size else np.empty(0, np.uint8)
        return NDArray(host, dev, counted(buffer), 0)

    return adopt_on


def array(data: Any, dev: Device | None = None) -> NDArray:
    """A tensor on ``dev`` (default cpu:0) holding a copy of ``data``."""
    if isinstance(data, NDArray):
        return data.copyto(dev if dev is not None else data.device)
    host = np.asarray(data)
    np_dtype(host.dtype)
    out = empty(host.shape, host.dtype, dev)
    get_api(out.device).from_host(np.asarray(host, order="C"), out._data)  # keeps 0-d
    return out
