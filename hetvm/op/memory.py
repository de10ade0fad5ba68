"""``hetvm.op.memory``: planned storage (``R.memory.*``), made by StaticPlanBlockMemory."""

from __future__ import annotations

from typing import Any

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from .attrs import as_dtype_arg, as_prim_arg, as_shape_arg, as_string_arg
from .base import DeviceBehavior, make_call, register_op, tensor_arg
from .effects import CARVE, KILL, STORAGE
from .memory_common import (
    EMPTY,
    check_imm,
    check_object,
    check_prim,
    check_shape,
    infer_alloc_tensor,
)

__all__ = ["alloc_storage", "alloc_tensor", "kill_storage", "kill_tensor"]


def _infer_alloc_storage(call: E.Call) -> S.StructInfo:
    check_shape(call, 0, "size")
    check_prim(call, 1, "virtual_device_index")
    check_imm(call, 2, "storage_scope", E.StringImm)
    check_imm(call, 3, "dtype", E.DataTypeImm)
    return S.ObjectStructInfo()


def _infer_kill_storage(call: E.Call) -> S.StructInfo:
    check_object(call, 0, "storage")
    return EMPTY


def _infer_kill_tensor(call: E.Call) -> S.StructInfo:
    tensor_arg(call, 0, "tensor")
    return EMPTY


_MEM = {"pure": False, "device_behavior": DeviceBehavior.MEMORY}
register_op("memory.alloc_storage", _infer_alloc_storage, num_inputs=4, effects=STORAGE, **_MEM)  # type: ignore[arg-type]
register_op("memory.alloc_tensor", infer_alloc_tensor, num_inputs=-1, effects=CARVE, **_MEM)  # type: ignore[arg-type]
register_op("memory.kill_storage", _infer_kill_storage, num_inputs=1, effects=KILL, **_MEM)  # type: ignore[arg-type]
register_op("memory.kill_tensor", _infer_kill_tensor, num_inputs=1, effects=KILL, **_MEM)  # type: ignore[arg-type]


def alloc_storage(size: Any, virtual_device_index: Any, storage_scope: Any, dtype: Any) -> E.Call:
    """A storage block of ``size`` bytes (a 1-D shape) on vdevice ``virtual_device_index``."""
    op = "memory.alloc_storage"
    args = [
        as_shape_arg(op, size, "size"),
        as_prim_arg(op, virtual_device_index, "virtual_device_index"),
        as_string_arg(op, storage_scope, "storage_scope"),
        as_dtype_arg(op, dtype),
    ]
    return make_call(op, args)


def alloc_tensor(
    storage: E.Expr, offset: Any, shape: Any, dtype: Any, runtime_device_index: Any = None
) -> E.Call:
    """A tensor view of ``storage`` at byte ``offset``.

    TVM 0.27 prints a fifth argument, the runtime device index, usually its
    default 0; a non-default one is kept (the storage already fixes the device,
    so hetvm never needs it), the default is dropped so both spellings agree.
    """
    op = "memory.alloc_tensor"
    args = [storage, as_prim_arg(op, offset, "offset"), as_shape_arg(op, shape), as_dtype_arg(op, dtype)]
    if runtime_device_index is not None:
        index = as_prim_arg(op, runtime_device_index, "runtime_device_index")
        if not (isinstance(index, E.PrimValue) and P.const_value(index.value) == 0):
            args.append(index)
    return make_call(op, args)


def kill_storage(storage: E.Expr) -> E.Call:
    """Releases a storage block now."""
    return make_call("memory.kill_storage", [storage])


def kill_tensor(tensor: E.Expr) -> E.Call:
    """Ends a tensor's lifetime now."""
    return make_call("memory.kill_tensor", [tensor])
