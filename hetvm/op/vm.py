"""``hetvm.op.vm``: VM-level allocation (``R.vm.*``), made by LowerAllocTensor."""

from __future__ import annotations

from typing import Any

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from .attrs import as_dtype_arg, as_prim_arg, as_shape_arg, as_string_arg
from .base import DeviceBehavior, make_call, register_op
from .effects import CARVE, KILL, STORAGE
from .memory_common import (
    EMPTY,
    check_imm,
    check_prim,
    check_shape,
    infer_alloc_tensor,
)

__all__ = ["alloc_storage", "alloc_tensor", "kill_object"]


def _infer_alloc_storage(call: E.Call) -> S.StructInfo:
    check_shape(call, 0, "size")
    check_prim(call, 1, "runtime_device_index")
    check_imm(call, 2, "dtype", E.DataTypeImm)
    check_imm(call, 3, "storage_scope", E.StringImm)
    return S.ObjectStructInfo()


def _infer_kill_object(call: E.Call) -> S.StructInfo:
    return EMPTY


_MEM = {"pure": False, "device_behavior": DeviceBehavior.MEMORY}
register_op("vm.alloc_storage", _infer_alloc_storage, num_inputs=4, effects=STORAGE, **_MEM)  # type: ignore[arg-type]
register_op("vm.alloc_tensor", infer_alloc_tensor, num_inputs=-1, effects=CARVE, **_MEM)  # type: ignore[arg-type]
register_op("vm.kill_object", _infer_kill_object, num_inputs=1, effects=KILL, **_MEM)  # type: ignore[arg-type]


def alloc_storage(
    size: Any, runtime_device_index: Any, dtype: Any, storage_scope: Any = "global"
) -> E.Call:
    """A storage block of ``size`` bytes on runtime device ``runtime_device_index``."""
    op = "vm.alloc_storage"
    args = [
        as_shape_arg(op, size, "size"),
        as_prim_arg(op, runtime_device_index, "runtime_device_index"),
        as_dtype_arg(op, dtype),
        as_string_arg(op, storage_scope, "storage_scope"),
    ]
    return make_call(op, args)


def alloc_tensor(
    storage: E.Expr, offset: Any, shape: Any, dtype: Any, runtime_device_index: Any = None
) -> E.Call:
    """A tensor view of ``storage`` at byte ``offset``.

    TVM 0.27 prints a fifth argument, the runtime device index (default 0). As
    for ``memory.alloc_tensor``, the default is dropped so both spellings give
    the same call; another index is kept (the storage fixes the device anyway).
    """
    op = "vm.alloc_tensor"
    args = [storage, as_prim_arg(op, offset, "offset"), as_shape_arg(op, shape), as_dtype_arg(op, dtype)]
    if runtime_device_index is not None:
        index = as_prim_arg(op, runtime_device_index, "runtime_device_index")
        if not (isinstance(index, E.PrimValue) and P.const_value(index.value) == 0):
            args.append(index)
    return make_call(op, args)


def kill_object(obj: E.Expr) -> E.Call:
    """Clears the register holding ``obj`` (storage or tensor), freeing it now."""
    return make_call("vm.kill_object", [obj])
