"""Normalize: struct info everywhere and call arguments in A-normal form.

Nested non-leaf arguments (``add(exp(x), y)``) are bound to fresh variables
right before the binding that uses them, so later passes see one operation
per binding.
"""

from __future__ import annotations

from ..ir import expr as E
from ..ir.module import IRModule
from ..ir.visitor import ExprMutator
from .pass_infra import FunctionPass, PassContext


class _Normalizer(ExprMutator):
    def __init__(self, mod: IRModule) -> None:
        super().__init__(mod)
        self._dataflow = False

    def visit_binding_block(self, block: E.BindingBlock) -> E.BindingBlock:
        outer, self._dataflow = self._dataflow, isinstance(block, E.DataflowBlock)
        try:
            return super().visit_binding_block(block)
        finally:
            self._dataflow = outer

    def _flatten(self, expr: E.Expr) -> E.Expr:
        if E.is_leaf(expr) or isinstance(expr, (E.Function, E.SeqExpr)):
            return expr
        if isinstance(expr, E.Tuple):
            fields = tuple(self._flatten(f) for f in expr.fields)
            if all(a is b for a, b in zip(fields, expr.fields)):
                return expr
            return E.Tuple(fields, span=expr.span)
        inner = self._flatten_args(expr)
        return self.emit(inner, "lv", dataflow=self._dataflow)

    def _flatten_args(self, expr: E.Expr) -> E.Expr:
        if isinstance(expr, E.Call):
            args = tuple(self._flatten(a) for a in expr.args)
            if any(a is not b for a, b in zip(args, expr.args)):
                return self.normalize(E.replace(expr, args=args, struct_info=None))
        elif isinstance(expr, E.TupleGetItem):
            tup = self._flatten(expr.tuple_value)
            if tup is not expr.tuple_value:
                return self.normalize(E.TupleGetItem(tup, expr.index, span=expr.span))
        elif isinstance(expr, E.Tuple):
            return self._flatten(expr)
        return self.normalize(expr)

    def visit_call(self, call: E.Call) -> E.Expr:
        return self._flatten_args(super().visit_call(call))

    def visit_seq_expr(self, seq: E.SeqExpr) -> E.SeqExpr:
        """A sequence ends in a leaf: a computed result (``if c: f(x)``) is bound."""
        new = super().visit_seq_expr(seq)
        if E.is_leaf(new.body):
            return new
        self._emitted.append([])
        body = self._flatten(new.body)
        tail = self._emitted.pop()
        blocks = new.blocks + (E.BindingBlock(tuple(tail)),)
        return E.SeqExpr(blocks, body, span=new.span)

    def visit_tuple_get_item(self, node: E.TupleGetItem) -> E.Expr:
        return self._flatten_args(super().visit_tuple_get_item(node))


class Normalize(FunctionPass):
    def __init__(self) -> None:
        super().__init__("Normalize")

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        return _Normalizer(mod).visit_expr(func)  # type: ignore[return-value]
