"""LowerAllocTensor: each remaining ``builtin.alloc_tensor`` gets its own storage.

``t = R.builtin.alloc_tensor(shape, dtype, dev)`` becomes

    storage = R.memory.alloc_storage(R.shape([nbytes]), dev, "global", dtype)
    t = R.memory.alloc_tensor(storage, 0, shape, dtype)

Allocations that StaticPlanBlockMemory planned into arenas are already in
this form; what is left is dynamic or deliberately unplanned (results).
"""

from __future__ import annotations

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.op_registry import get_op
from ..ir.visitor import ExprMutator
from .pass_infra import FunctionPass, PassContext

OBJECT = S.ObjectStructInfo()


def nbytes_expr(shape: tuple[P.PrimExpr, ...], dtype: str) -> P.PrimExpr:
    """Size in bytes of a tensor, symbolic when the shape is."""
    total: P.PrimExpr = P.IntImm(S.dtype_nbytes(dtype))
    for d in shape:
        total = total * d
    return total


def alloc_storage_call(nbytes: P.IntLike, dev: E.Expr, scope: str, dtype: str) -> E.Call:
    return E.Call(
        get_op("memory.alloc_storage"),
        (E.ShapeExpr((P.as_prim(nbytes),)), dev, E.StringImm(scope), E.DataTypeImm(dtype)),
        struct_info=OBJECT,
    )


def alloc_tensor_from_storage(
    storage: E.Var, offset: P.IntLike, sinfo: S.TensorStructInfo
) -> E.Call:
    assert sinfo.shape is not None and sinfo.dtype is not None
    return E.Call(
        get_op("memory.alloc_tensor"),
        (storage, E.PrimValue(offset), E.ShapeExpr(sinfo.shape), E.DataTypeImm(sinfo.dtype)),
        struct_info=sinfo,
    )


class _Lower(ExprMutator):
    def visit_binding(self, binding: E.Binding) -> None:
        value = getattr(binding, "value", None)
        if (
            isinstance(binding, E.VarBinding)
            and isinstance(value, E.Call)
            and isinstance(value.op, E.Op)
            and value.op.name == "builtin.alloc_tensor"
        ):
            shape_expr, dtype_imm, dev = value.args
            sinfo = binding.var.struct_info
            assert isinstance(sinfo, S.TensorStructInfo)
            assert isinstance(shape_expr, E.ShapeExpr) and isinstance(dtype_imm, E.DataTypeImm)
            nbytes = nbytes_expr(shape_expr.values, dtype_imm.value)
            storage = E.Var(self.names.unique("storage"), struct_info=OBJECT)
            self.emit_binding(
                E.VarBinding(storage, alloc_storage_call(nbytes, dev, "global", dtype_imm.value))
            )
            tensor = alloc_tensor_from_storage(storage, 0, sinfo)
            self.emit_binding(E.VarBinding(binding.var, tensor, span=binding.span))
            return
        super().visit_binding(binding)


class LowerAllocTensor(FunctionPass):
    def __init__(self) -> None:
        super().__init__("LowerAllocTensor")

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        return _Lower(mod).visit_expr(func)  # type: ignore[return-value]
