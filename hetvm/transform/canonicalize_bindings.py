"""CanonicalizeBindings: remove trivial re-bindings.

``y = x`` and a ``match_cast`` that changes nothing are dropped and every use
of ``y`` reads ``x``. A binding that would let a DataflowVar escape its block
(``gv = lv`` where ``gv`` is visible outside) is kept.
"""

from __future__ import annotations

from ..ir import expr as E
from ..ir.module import IRModule
from ..ir.structural import structural_equal
from ..ir.visitor import ExprMutator
from .pass_infra import FunctionPass, PassContext


def is_trivial_binding(binding: E.Binding, value: E.Expr) -> bool:
    """True for ``y = x`` and for a match_cast whose target equals x's struct info."""
    if not isinstance(value, E.Var):
        return False
    if isinstance(value, E.DataflowVar) and not isinstance(binding.var, E.DataflowVar):
        return False
    if isinstance(binding, E.MatchCast):
        return value.struct_info is not None and structural_equal(
            binding.struct_info, value.struct_info, map_free_vars=False
        )
    return True


class _Canonicalizer(ExprMutator):
    def visit_binding(self, binding: E.Binding) -> None:
        value = self.visit_expr(binding.value)  # type: ignore[attr-defined]
        if is_trivial_binding(binding, value):
            self.var_remap[binding.var] = value
            return
        if value is binding.value:  # type: ignore[attr-defined]
            self.emit_binding(binding)
        elif isinstance(binding, E.MatchCast):
            self.emit_binding(E.MatchCast(binding.var, value, binding.struct_info, span=binding.span))
        else:
            var = self._retype(binding.var, value)
            self.emit_binding(E.VarBinding(var, value, span=binding.span))


class CanonicalizeBindings(FunctionPass):
    def __init__(self) -> None:
        super().__init__("CanonicalizeBindings")

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        return _Canonicalizer(mod).visit_expr(func)  # type: ignore[return-value]
