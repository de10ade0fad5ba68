"""The runtime: devices, storage and tensors, allocators, the VM and artifacts."""

from . import debug_funcs as _debug_funcs  # noqa: F401  (relax.run.print / assert_op)
from . import nd
from .device import Device, DeviceAPI, cpu, device, get_api
from .memory import Allocator, NaiveAllocator, Storage
from .ndarray import NDArray, ShapeTuple
from .pool import PooledAllocator
from .registry import get_global_func, list_global_funcs, register_func

__all__ = [
    "nd",
    "Device",
    "DeviceAPI",
    "cpu",
    "device",
    "get_api",
    "Allocator",
    "NaiveAllocator",
    "PooledAllocator",
    "Storage",
    "NDArray",
    "ShapeTuple",
    "get_global_func",
    "list_global_funcs",
    "register_func",
]
