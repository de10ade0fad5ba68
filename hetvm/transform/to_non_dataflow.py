"""ToNonDataflow: dataflow blocks become plain blocks, DataflowVars become Vars.

Lowering passes after this one insert impure calls (allocation, kernels,
kills) that dataflow blocks may not hold.
"""

from __future__ import annotations

from ..ir import expr as E
from ..ir.module import IRModule
from ..ir.visitor import ExprMutator
from .pass_infra import FunctionPass, PassContext


class _ToNonDataflow(ExprMutator):
    def visit_var_def(self, var: E.Var) -> E.Var:
        if isinstance(var, E.DataflowVar):
            new = E.Var(var.name_hint, struct_info=var.struct_info, span=var.span)
            self.var_remap[var] = new
            return new
        return var

    def visit_binding_block(self, block: E.BindingBlock) -> E.BindingBlock:
        new = super().visit_binding_block(block)
        if isinstance(new, E.DataflowBlock):
            return E.BindingBlock(new.bindings, span=new.span)
        return new


class ToNonDataflow(FunctionPass):
    def __init__(self) -> None:
        super().__init__("ToNonDataflow")

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        return _ToNonDataflow(mod).visit_expr(func)  # type: ignore[return-value]
