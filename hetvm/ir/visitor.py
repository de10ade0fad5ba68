"""Visitor and mutator bases that walk functions, blocks and bindings.

A pass subclasses :class:`ExprMutator` and overrides only the node kinds it
changes; the base rebuilds parents when a child changed, re-infers struct info
and gives a binding a fresh variable when its struct info changed (uses are
remapped). Unchanged subtrees are returned as the same objects, so a pass that
changes nothing returns its input.
"""

from __future__ import annotations

from typing import Callable

from . import expr as E
from . import struct_info as S
from .block_builder import NameTable, normalize
from .module import IRModule
from .structural import structural_equal


class ExprVisitor:
    """Read-only walk; override ``visit_*`` methods and call ``super()``."""

    def visit_expr(self, expr: E.Expr) -> None:
        method = _VISIT_DISPATCH.get(type(expr))
        if method is None:
            for cls in type(expr).__mro__:
                if cls in _VISIT_DISPATCH:
                    method = _VISIT_DISPATCH[cls]
                    break
        getattr(self, method)(expr)  # type: ignore[arg-type]

    # leaves
    def visit_var(self, var: E.Var) -> None:
        pass

    def visit_global_var(self, gvar: E.GlobalVar) -> None:
        pass

    def visit_leaf(self, expr: E.Expr) -> None:
        pass

    def visit_var_def(self, var: E.Var) -> None:
        pass

    # composites
    def visit_tuple(self, tup: E.Tuple) -> None:
        for f in tup.fields:
            self.visit_expr(f)

    def visit_tuple_get_item(self, node: E.TupleGetItem) -> None:
        self.visit_expr(node.tuple_value)

    def visit_call(self, call: E.Call) -> None:
        self.visit_expr(call.op)
        for a in call.args:
            self.visit_expr(a)

    def visit_if(self, node: E.If) -> None:
        self.visit_expr(node.cond)
        self.visit_expr(node.true_branch)
        self.visit_expr(node.false_branch)

    def visit_seq_expr(self, seq: E.SeqExpr) -> None:
        for block in seq.blocks:
            self.visit_binding_block(block)
        self.visit_expr(seq.body)

    def visit_binding_block(self, block: E.BindingBlock) -> None:
        for binding in block.bindings:
            self.visit_binding(binding)

    def visit_binding(self, binding: E.Binding) -> None:
        if isinstance(binding, E.MatchCast):
            self.visit_match_cast(binding)
        else:
            self.visit_var_binding(binding)  # type: ignore[arg-type]

    def visit_var_binding(self, binding: E.VarBinding) -> None:
        self.visit_expr(binding.value)
        self.visit_var_def(binding.var)

    def visit_match_cast(self, binding: E.MatchCast) -> None:
        self.visit_expr(binding.value)
        self.visit_var_def(binding.var)

    def visit_function(self, func: E.Function) -> None:
        for p in func.params:
            self.visit_var_def(p)
        self.visit_expr(func.body)


_VISIT_DISPATCH: dict[type, str] = {
    E.Var: "visit_var",
    E.DataflowVar: "visit_var",
    E.GlobalVar: "visit_global_var",
    E.Op: "visit_leaf",
    E.ExternFunc: "visit_leaf",
    E.Constant: "visit_leaf",
    E.ShapeExpr: "visit_leaf",
    E.PrimValue: "visit_leaf",
    E.StringImm: "visit_leaf",
    E.DataTypeImm: "visit_leaf",
    E.Tuple: "visit_tuple",
    E.TupleGetItem: "visit_tuple_get_item",
    E.Call: "visit_call",
    E.If: "visit_if",
    E.SeqExpr: "visit_seq_expr",
    E.Function: "visit_function",
}


class ExprMutator:
    """Rewriting walk. Bindings are re-emitted through :meth:`emit_binding`, so
    an override of :meth:`visit_binding` may drop a binding or emit several."""

    def __init__(self, mod: IRModule | None = None) -> None:
        self.mod = mod
        self.var_remap: dict[E.Var, E.Expr] = {}
        self._emitted: list[list[E.Binding]] = []
        self.names = NameTable()

    # -- entry points --------------------------------------------------------
    def visit_expr(self, expr: E.Expr) -> E.Expr:
        method = _MUTATE_DISPATCH.get(type(expr))
        if method is None:
            for cls in type(expr).__mro__:
                if cls in _MUTATE_DISPATCH:
                    method = _MUTATE_DISPATCH[cls]
                    break
        return getattr(self, method)(expr)  # type: ignore[arg-type]

    def normalize(self, expr: E.Expr) -> E.Expr:
        return normalize(expr, self.mod)

    # -- leaves ------------------------------------------------------------
    def visit_var(self, var: E.Var) -> E.Expr:
        # follow chains: a definition renamed by visit_var_def and then re-typed
        # by _retype is remapped twice (old -> renamed -> re-typed)
        new = self.var_remap.get(var, var)
        while isinstance(new, E.Var) and new is not var and new in self.var_remap:
            var, new = new, self.var_remap[new]
        return new

    def visit_global_var(self, gvar: E.GlobalVar) -> E.Expr:
        return gvar

    def visit_leaf(self, expr: E.Expr) -> E.Expr:
        return expr

    def visit_var_def(self, var: E.Var) -> E.Var:
        """Called where a variable is defined; may return a replacement."""
        return var

    # -- composites ----------------------------------------------------------
    def visit_tuple(self, tup: E.Tuple) -> E.Expr:
        fields = tuple(self.visit_expr(f) for f in tup.fields)
        if all(a is b for a, b in zip(fields, tup.fields)):
            return tup
        return E.Tuple(fields, span=tup.span)

    def visit_tuple_get_item(self, node: E.TupleGetItem) -> E.Expr:
        tup = self.visit_expr(node.tuple_value)
        if tup is node.tuple_value:
            return node
        if isinstance(tup, E.Tuple):
            return tup.fields[node.index]
        return E.TupleGetItem(tup, node.index, span=node.span)

    def visit_call(self, call: E.Call) -> E.Expr:
        op = self.visit_expr(call.op)
        args = tuple(self.visit_expr(a) for a in call.args)
        if op is call.op and all(a is b for a, b in zip(args, call.args)):
            return call
        return self.normalize(E.replace(call, op=op, args=args, struct_info=None))

    def visit_if(self, node: E.If) -> E.Expr:
        cond = self.visit_expr(node.cond)
        tb = self.visit_seq_expr(node.true_branch)
        fb = self.visit_seq_expr(node.false_branch)
        if cond is node.cond and tb is node.true_branch and fb is node.false_branch:
            return node
        return self.normalize(E.If(cond, tb, fb, span=node.span))  # type: ignore[arg-type]

    def visit_seq_expr(self, seq: E.SeqExpr) -> E.SeqExpr:
        blocks = [self.visit_binding_block(b) for b in seq.blocks]
        blocks = [b for b in blocks if b.bindings]
        body = self.visit_expr(seq.body)
        if (
            len(blocks) == len(seq.blocks)
            and all(a is b for a, b in zip(blocks, seq.blocks))
            and body is seq.body
        ):
            return seq
        sinfo = None
        if body.struct_info is not None and seq.struct_info is not None:
            # the dims the old result kept were defined outside the scope: they still are
            sinfo = E.scope_struct_info(blocks, body.struct_info, S.mentioned_vars(seq.struct_info))
        return E.SeqExpr(blocks, body, struct_info=sinfo, span=seq.span)  # type: ignore[return-value]

    def visit_binding_block(self, block: E.BindingBlock) -> E.BindingBlock:
        self._emitted.append([])
        for binding in block.bindings:
            self.visit_binding(binding)
        out = self._emitted.pop()
        if len(out) == len(block.bindings) and all(a is b for a, b in zip(out, block.bindings)):
            return block
        return type(block)(tuple(out), span=block.span)

    def rebuild_block(self, block: E.BindingBlock, handled: Callable[[E.Binding], bool]) -> E.BindingBlock:
        """``block`` re-emitted binding by binding: ``handled(binding)`` may emit a
        replacement itself (or nothing, to drop the binding) and return True;
        bindings it returns False for are visited as usual. For passes that plan
        a block's rewrites first and then emit them in place."""
        self._emitted.append([])
        for binding in block.bindings:
            if not handled(binding):
                self.visit_binding(binding)
        out = self._emitted.pop()
        return type(block)(tuple(out), span=block.span)

    def emit_binding(self, binding: E.Binding) -> None:
        """Adds a binding to the block being rebuilt."""
        self._emitted[-1].append(binding)

    def emit(self, value: E.Expr, name_hint: str = "lv", dataflow: bool | None = None) -> E.Var:
        """Binds a new value in the block being rebuilt and returns its variable."""
        value = self.normalize(value)
        use_df = dataflow if dataflow is not None else False
        cls = E.DataflowVar if use_df else E.Var
        var = cls(self.names.unique(name_hint), struct_info=value.struct_info)
        self.emit_binding(E.VarBinding(var, value, span=value.span))
        return var

    def visit_binding(self, binding: E.Binding) -> None:
        if isinstance(binding, E.MatchCast):
            self.visit_match_cast(binding)
        else:
            self.visit_var_binding(binding)  # type: ignore[arg-type]

    def visit_var_binding(self, binding: E.VarBinding) -> None:
        value = self.visit_expr(binding.value)
        var = self.visit_var_def(binding.var)
        if value is binding.value and var is binding.var:
            self.emit_binding(binding)
            return
        var = self._retype(var, value)
        self.emit_binding(E.VarBinding(var, value, span=binding.span))

    def visit_match_cast(self, binding: E.MatchCast) -> None:
        value = self.visit_expr(binding.value)
        var = self.visit_var_def(binding.var)
        if value is binding.value and var is binding.var:
            self.emit_binding(binding)
            return
        self.emit_binding(E.MatchCast(var, value, binding.struct_info, span=binding.span))

    def _retype(self, var: E.Var, value: E.Expr) -> E.Var:
        """A fresh var when the value's struct info no longer matches the var's.

        A vdevice the var was annotated with (a user's pin, a planned placement)
        is kept: the value's inferred struct info only says where its inputs are,
        and a rebuilt input upstream must not move this value."""
        new_sinfo = value.struct_info
        if new_sinfo is None or var.struct_info is None or new_sinfo is var.struct_info:
            return var
        old = var.struct_info
        if (isinstance(old, S.TensorStructInfo) and old.vdevice is not None
                and isinstance(new_sinfo, S.TensorStructInfo) and new_sinfo.vdevice != old.vdevice):  # fmt: skip
            new_sinfo = S.TensorStructInfo(new_sinfo.shape, new_sinfo.dtype, new_sinfo.ndim, old.vdevice)
        if new_sinfo == var.struct_info:  # value equality (symbolic vars by identity)
            return var
        if structural_equal(var.struct_info, new_sinfo, map_free_vars=False):
            return var
        fresh = type(var)(var.name_hint, struct_info=new_sinfo, span=var.span)
        self.var_remap[var] = fresh
        return fresh

    def visit_function(self, func: E.Function) -> E.Expr:
        outer_names = self.names  # a nested function must not reset the outer table
        self.names = NameTable()
        try:
            params = tuple(self.visit_var_def(p) for p in func.params)
            for p in params:
                self.names.reserve(p.name_hint)
            _reserve_names(func.body, self.names)
            body = self.visit_seq_expr(func.body)
        finally:
            self.names = outer_names
        if body is func.body and all(a is b for a, b in zip(params, func.params)):
            return func
        ret = func.ret_struct_info
        if ret is not None and body.struct_info is not None:
            # keep the declared signature unless it no longer admits the body or
            # names symbolic vars the (new) params do not define; then re-derive it
            defined = [v for p in params for v in S.definable_vars(p.struct_info)]
            if not S.is_base_of(ret, body.struct_info, check_vdevice=False) or (
                S.erase_to_well_defined(ret, defined) is not ret
            ):
                ret = None
        return E.Function(params, body, ret, func.is_pure, func.attrs, span=func.span)

    # -- module -------------------------------------------------------------
    def visit_module(self, mod: IRModule) -> IRModule:
        """Rewrites every function; returns ``mod`` itself when nothing changed."""
        self.mod = mod
        changed = False
        funcs: dict[str, E.Function] = {}
        for name, func in mod.functions.items():
            new = self.visit_expr(func)
            changed |= new is not func
            funcs[name] = new  # type: ignore[assignment]
        return mod.with_functions(funcs) if changed else mod


def _reserve_names(seq: E.SeqExpr, names: NameTable) -> None:
    for block in seq.blocks:
        for b in block.bindings:
            names.reserve(b.var.name_hint)
            if isinstance(b.value, E.If):  # type: ignore[attr-defined]
                _reserve_names(b.value.true_branch, names)  # type: ignore[attr-defined]
                _reserve_names(b.value.false_branch, names)  # type: ignore[attr-defined]


_MUTATE_DISPATCH: dict[type, str] = dict(_VISIT_DISPATCH)


def post_order_visit(expr: E.Expr, fn: Callable[[E.Expr], None]) -> None:
    """Calls ``fn`` on every expression under ``expr``, children first."""

    class _V(ExprVisitor):
        def visit_expr(self, e: E.Expr) -> None:
            super().visit_expr(e)
            fn(e)

    _V().visit_expr(expr)
