"""Small helpers shared by passes: purity and variable uses of expressions."""

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


def uses_of(expr: E.Expr, out: list[E.Var] | None = None) -> list[E.Var]:
    """Variables read by ``expr`` (free in it), in order, with repeats."""
    if out is None:
        out = []
    stack: list[E.Expr] = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, E.Var):
            out.append(e)
        elif isinstance(e, E.Call):
            stack.extend(reversed(e.args))
            if isinstance(e.op, E.Var):
                stack.append(e.op)
        elif isinstance(e, E.Tuple):
            stack.extend(reversed(e.fields))
        elif isinstance(e, E.TupleGetItem):
            stack.append(e.tuple_value)
        elif isinstance(e, E.If):
            stack.append(e.cond)
            for seq in (e.true_branch, e.false_branch):
                _seq_free_uses(seq, out)
        elif isinstance(e, E.SeqExpr):
            _seq_free_uses(e, out)
    return out


def _seq_free_uses(seq: E.SeqExpr, out: list[E.Var]) -> None:
    defined: set[E.Var] = set()
    inner: list[E.Var] = []
    for block in seq.blocks:
        for b in block.bindings:
            uses_of(b.value, inner)  # type: ignore[attr-defined]
            defined.add(b.var)
    uses_of(seq.body, inner)
    out.extend(v for v in inner if v not in defined)
