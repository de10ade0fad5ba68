"""Read-only facts about a function the printer needs before it prints a line:
how often each variable is used, whether a GlobalVar is referenced, and the
symbolic variables of the signature and of the body, in first-use order."""

from __future__ import annotations

from typing import Any

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S


class FunctionFacts:
    """Uses of variables (by id), GlobalVar references and symbolic variables."""

    def __init__(self, func: E.Function) -> None:
        self.uses: dict[int, int] = {}
        self.has_global_ref = False
        self.signature_vars: dict[int, P.PrimVar] = {}
        self.body_vars: dict[int, P.PrimVar] = {}
        for param in func.params:
            collect_prim_vars(param.struct_info, self.signature_vars)
        collect_prim_vars(func.ret_struct_info, self.signature_vars)
        self._seq(func.body)

    def use_count(self, var: E.Var) -> int:
        return self.uses.get(id(var), 0)

    def _body_prims(self, obj: Any) -> None:
        found: dict[int, P.PrimVar] = {}
        collect_prim_vars(obj, found)
        for key, var in found.items():
            if key not in self.signature_vars:
                self.body_vars.setdefault(key, var)

    def _seq(self, seq: E.SeqExpr) -> None:
        for block in seq.blocks:
            for binding in block.bindings:
                self._expr(binding.value)  # type: ignore[attr-defined]
                self._body_prims(binding.var.struct_info)
                if isinstance(binding, E.MatchCast):
                    self._body_prims(binding.struct_info)
        self._expr(seq.body)

    def _expr(self, e: E.Expr) -> None:
        if isinstance(e, E.Var):
            self.uses[id(e)] = self.uses.get(id(e), 0) + 1
        elif isinstance(e, E.GlobalVar):
            self.has_global_ref = True
        elif isinstance(e, E.Call):
            self._expr(e.op)
            for a in e.args:
                self._expr(a)
            self._body_prims(list(e.sinfo_args))
            self._body_prims(dict(e.attrs))
        elif isinstance(e, E.Tuple):
            for f in e.fields:
                self._expr(f)
        elif isinstance(e, E.TupleGetItem):
            self._expr(e.tuple_value)
        elif isinstance(e, E.If):
            self._expr(e.cond)
            self._seq(e.true_branch)
            self._seq(e.false_branch)
        elif isinstance(e, E.SeqExpr):
            self._seq(e)
        elif isinstance(e, (E.ShapeExpr, E.PrimValue)):
            self._body_prims(e.values if isinstance(e, E.ShapeExpr) else e.value)


def collect_prim_vars(obj: Any, out: dict[int, P.PrimVar]) -> None:
    """Adds the PrimVars inside ``obj`` (struct info, shapes, attrs) to ``out`` in order."""
    if obj is None:
        return
    if isinstance(obj, P.PrimExpr):
        for var in P.free_vars(obj):
            out.setdefault(id(var), var)
    elif isinstance(obj, S.TensorStructInfo):
        collect_prim_vars(obj.shape, out)
    elif isinstance(obj, S.ShapeStructInfo):
        collect_prim_vars(obj.values, out)
    elif isinstance(obj, S.PrimStructInfo):
        collect_prim_vars(obj.value, out)
    elif isinstance(obj, S.TupleStructInfo):
        collect_prim_vars(list(obj.fields), out)
    elif isinstance(obj, S.FuncStructInfo):
        collect_prim_vars(list(obj.params or ()), out)
        collect_prim_vars(obj.ret, out)
    elif isinstance(obj, dict):
        collect_prim_vars(list(obj.values()), out)
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            collect_prim_vars(item, out)
