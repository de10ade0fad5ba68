"""``hetvm.op.builtin``: ``R.builtin.alloc_tensor``, made by CallTIRRewrite."""

from __future__ import annotations

from typing import Any

from ..ir import expr as E
from ..ir import struct_info as S
from .attrs import as_dtype_arg, as_prim_arg, as_shape_arg, as_string_arg
from .base import DeviceBehavior, fail, make_call, register_op
from .memory_common import check_imm, check_prim, tensor_from

__all__ = ["alloc_tensor"]


def _infer_alloc_tensor(call: E.Call) -> S.StructInfo:
    if len(call.args) not in (3, 4):
        raise fail(
            "builtin.alloc_tensor",
            f"takes 3 or 4 arguments (shape, dtype, runtime_device_index[, storage_scope]), "
            f"got {len(call.args)}",
        )
    check_prim(call, 2, "runtime_device_index")
    if len(call.args) == 4:
        check_imm(call, 3, "storage_scope", E.StringImm)
    return tensor_from(call, 0, 1)


register_op(
    "builtin.alloc_tensor",
    _infer_alloc_tensor,
    pure=False,
    device_behavior=DeviceBehavior.MEMORY,
    description="allocate a fresh tensor on a runtime device",
)


def alloc_tensor(
    shape: Any, dtype: Any, runtime_device_index: Any, storage_scope: Any = None
) -> E.Call:
    """A fresh tensor of ``shape``/``dtype`` on runtime device ``runtime_device_index``.

    ``storage_scope`` (TVM's optional fourth argument, which TVM 0.27 prints as
    ``R.str("global")`` by default) is kept only when it is not ``"global"``, so
    both spellings give the same call.
    """
    op = "builtin.alloc_tensor"
    args = [as_shape_arg(op, shape), as_dtype_arg(op, dtype), as_prim_arg(op, runtime_device_index, "runtime_device_index")]
    if storage_scope is not None:
        scope = as_string_arg(op, storage_scope, "storage_scope")
        if not (isinstance(scope, E.StringImm) and scope.value == "global"):
            args.append(scope)
    return make_call(op, args)
