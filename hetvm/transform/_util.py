"""Small helpers shared by passes: purity of expressions (who reads what:
``hetvm.analysis.reads``)."""

from __future__ import annotations

from ..ir import expr as E
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.op_registry import op_info


def is_pure(expr: E.Expr, mod: IRModule | None = None) -> bool:
    """True when evaluating ``expr`` has no side effects (safe to drop or move)."""
    if isinstance(expr, E.Call):
        if isinstance(expr.op, E.Op):
            return op_info(expr.op).pure
        if isinstance(expr.op, E.ExternFunc):
            sinfo = expr.op.struct_info
            return isinstance(sinfo, S.FuncStructInfo) and sinfo.purity
        if isinstance(expr.op, E.GlobalVar) and mod is not None and expr.op.name_hint in mod:
            return mod[expr.op.name_hint].is_pure
        return False
    if isinstance(expr, E.If):
        return all(
            is_pure(b.value, mod)  # type: ignore[attr-defined]
            for seq in (expr.true_branch, expr.false_branch)
            for block in seq.blocks
            for b in block.bindings
        )
    return True
