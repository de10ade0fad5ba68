"""MatchJoinedShapes: give a tensor whose shape was lost at a join a shape again.

Why: when the branches of an ``If`` return tensors of different shapes --
``(n, 4)`` and ``(m, 4)`` -- the If's struct info keeps only the rank (as in
TVM Relax), and so does a call to a function declared to return
``R.Tensor(ndim=2)``. Nothing computed from such a value can be allocated,
so LegalizeOps would refuse the program. After such a binding this pass
inserts ::

    z1 = R.match_cast(z, R.Tensor((z_dim0, 4), dtype="float32"))

where a dimension both branches agree on is kept and every other one is a
fresh symbolic variable, bound and checked at run time exactly like a
parameter's shape; every later use of ``z`` reads ``z1``. Memory for values
of those shapes is then allocated at run time (the planner has no bound for
the fresh variables).

Applies to tensors of known rank and dtype bound to an ``If`` or to a call of
a module function; other values are left alone (an unknown dtype or rank is
still an error in LegalizeOps). The input module is never mutated, and a
second run changes nothing.
"""

from __future__ import annotations

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.visitor import ExprMutator, post_order_visit
from .pass_infra import FunctionPass, PassContext

__all__ = ["MatchJoinedShapes"]


def _lost_shape(sinfo: S.StructInfo | None) -> bool:
    return (
        isinstance(sinfo, S.TensorStructInfo)
        and sinfo.shape is None
        and sinfo.ndim >= 0
        and sinfo.dtype is not None
    )


def _branch_shape(seq: E.SeqExpr, ndim: int) -> tuple[P.PrimExpr, ...] | None:
    sinfo = seq.struct_info
    if isinstance(sinfo, S.TensorStructInfo) and sinfo.shape is not None and len(sinfo.shape) == ndim:
        return sinfo.shape
    return None


def _known_dims(value: E.Expr, ndim: int) -> list[P.PrimExpr | None]:
    """Per dimension, the extent every branch agrees on (None where they differ)."""
    if not isinstance(value, E.If):
        return [None] * ndim
    a = _branch_shape(value.true_branch, ndim)
    b = _branch_shape(value.false_branch, ndim)
    if a is None or b is None:
        return [None] * ndim
    return [x if P.const_value(x) is not None and P.prove_equal(x, y) else None for x, y in zip(a, b)]


def _scan(func: E.Function) -> tuple[set[str], set[E.Var]]:
    """Names of the function's symbolic variables, and the variables some
    match_cast already gives a full shape (so a second run adds nothing)."""
    names: set[str] = set()
    cast: set[E.Var] = set()

    def collect(sinfo: S.StructInfo | None) -> None:
        for v in S.definable_vars(sinfo):
            names.add(v.name)

    for p in func.params:
        collect(p.struct_info)

    def visit(node: E.Expr) -> None:
        if isinstance(node, E.SeqExpr):
            for block in node.blocks:
                for b in block.bindings:
                    collect(b.var.struct_info)
                    if isinstance(b, E.MatchCast):
                        collect(b.struct_info)
                        if isinstance(b.value, E.Var) and not _lost_shape(b.struct_info):
                            cast.add(b.value)

    post_order_visit(func, visit)
    return names, cast


class _Matcher(ExprMutator):
    def __init__(self, mod: IRModule, taken: set[str], already_cast: set[E.Var]) -> None:
        super().__init__(mod)
        self.taken = taken
        self.already_cast = already_cast

    def _fresh_dim(self, base: str, axis: int) -> P.PrimVar:
        name, k = f"{base}_dim{axis}", 1
        while name in self.taken:
            name, k = f"{base}_dim{axis}_{k}", k + 1
        self.taken.add(name)
        return P.PrimVar(name)

    def visit_var_binding(self, binding: E.VarBinding) -> None:
        super().visit_var_binding(binding)
        emitted = self._emitted[-1][-1]
        var, value = emitted.var, emitted.value  # type: ignore[attr-defined]
        sinfo = var.struct_info
        if binding.var in self.already_cast or not _lost_shape(sinfo) or not (
            isinstance(value, E.If) or (isinstance(value, E.Call) and isinstance(value.op, E.GlobalVar))
        ):
            return
        assert isinstance(sinfo, S.TensorStructInfo)
        dims = [d if d is not None else self._fresh_dim(var.name_hint, i)
                for i, d in enumerate(_known_dims(value, sinfo.ndim))]  # fmt: skip
        target = S.TensorStructInfo(dims, sinfo.dtype, vdevice=sinfo.vdevice)
        cast = type(var)(self.names.unique(var.name_hint), struct_info=target, span=var.span)
        self.emit_binding(E.MatchCast(cast, var, target, span=binding.span))
        self.var_remap[binding.var] = cast


class MatchJoinedShapes(FunctionPass):
    def __init__(self) -> None:
        super().__init__("MatchJoinedShapes")

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        return _Matcher(mod, *_scan(func)).visit_expr(func)  # type: ignore[return-value]
