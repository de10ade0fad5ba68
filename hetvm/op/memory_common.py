"""Checks shared by the memory, vm and builtin allocation ops.

Their arguments are IR values (shapes, PrimValues, StringImm, DataTypeImm),
never attrs, as in TVM, so each check names the argument that is wrong.
"""

from __future__ import annotations

from ..ir import expr as E
from ..ir import struct_info as S
from .base import describe_arg, fail, op_name, shape_arg

EMPTY = S.TupleStructInfo([])


def check_prim(call: E.Call, index: int, what: str) -> None:
    """Argument ``index`` must be an integer PrimValue (or a Prim-typed value)."""
    arg = call.args[index]
    if not isinstance(arg.struct_info, S.PrimStructInfo) or not arg.struct_info.dtype.startswith(
        ("int", "uint")
    ):
        raise fail(op_name(call), f"{what} must be an integer PrimValue, got {describe_arg(arg)}")


def check_imm(call: E.Call, index: int, what: str, cls: type) -> str:
    """Argument ``index`` must be a ``cls`` immediate (StringImm / DataTypeImm)."""
    arg = call.args[index]
    if not isinstance(arg, cls):
        raise fail(
            op_name(call), f"{what} must be a {cls.__name__}, got {type(arg).__name__}"
        )
    return arg.value  # type: ignore[attr-defined]


def check_object(call: E.Call, index: int, what: str) -> None:
    """Argument ``index`` must be an object (storage) value."""
    arg = call.args[index]
    if not isinstance(arg.struct_info, S.ObjectStructInfo):
        raise fail(op_name(call), f"{what} must be a storage object, got {describe_arg(arg)}")


def check_shape(call: E.Call, index: int, what: str) -> tuple:
    return shape_arg(call, index, what)


def tensor_from(call: E.Call, shape_index: int, dtype_index: int) -> S.TensorStructInfo:
    """TensorStructInfo(shape, dtype) from a shape argument and a DataTypeImm argument."""
    values, ndim = shape_arg(call, shape_index, "shape")
    dtype = check_imm(call, dtype_index, "dtype", E.DataTypeImm)
    return S.TensorStructInfo(values, dtype, ndim)


def infer_alloc_tensor(call: E.Call) -> S.StructInfo:
    """``memory.alloc_tensor`` and ``vm.alloc_tensor``: (storage, offset, shape, dtype
    [, runtime_device_index]) -> a tensor of that shape and dtype."""
    op = call.op.name  # type: ignore[attr-defined]
    if len(call.args) not in (4, 5):
        raise fail(
            op,
            f"takes 4 or 5 arguments (storage, offset, shape, dtype[, runtime_device_index]), "
            f"got {len(call.args)}",
        )
    check_object(call, 0, "storage")
    check_prim(call, 1, "offset")
    return tensor_from(call, 2, 3)
