"""Which variables an expression binds, reads without binding, or mentions.

Passes use these to decide what a rewritten expression depends on (free
variables), what it introduces (bound variables) and which symbolic shape
variables a function needs from outside (free symbolic vars). Every result is
a list in first-occurrence order, without duplicates, so output is stable.
"""

from __future__ import annotations

from typing import Iterable

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S


class _Collector:
    """One walk that records bound vars and uses (with what is in scope)."""

    def __init__(self) -> None:
        self.bound: dict[E.Var, None] = {}
        self.free: dict[E.Var, None] = {}
        self.seen: dict[E.Var, None] = {}

    def define(self, var: E.Var) -> None:
        self.bound.setdefault(var, None)
        self.seen.setdefault(var, None)

    def use(self, var: E.Var) -> None:
        self.seen.setdefault(var, None)
        if var not in self.bound:
            self.free.setdefault(var, None)

    def expr(self, e: E.Expr) -> None:
        if isinstance(e, E.Var):
            self.use(e)
        elif isinstance(e, E.Tuple):
            for f in e.fields:
                self.expr(f)
        elif isinstance(e, E.TupleGetItem):
            self.expr(e.tuple_value)
        elif isinstance(e, E.Call):
            self.expr(e.op)
            for a in e.args:
                self.expr(a)
        elif isinstance(e, E.If):
            self.expr(e.cond)
            self.expr(e.true_branch)
            self.expr(e.false_branch)
        elif isinstance(e, E.SeqExpr):
            for block in e.blocks:
                for b in block.bindings:
                    self.expr(b.value)  # type: ignore[attr-defined]
                    self.define(b.var)
            self.expr(e.body)
        elif isinstance(e, E.Function):
            for p in e.params:
                self.define(p)
            self.expr(e.body)


def free_vars(expr: E.Expr) -> list[E.Var]:
    """Variables read by ``expr`` that ``expr`` itself does not bind."""
    c = _Collector()
    c.expr(expr)
    return list(c.free)


def bound_vars(expr: E.Expr) -> list[E.Var]:
    """Variables ``expr`` binds: function parameters and binding variables."""
    c = _Collector()
    c.expr(expr)
    return list(c.bound)


def all_vars(expr: E.Expr) -> list[E.Var]:
    """Every variable that appears in ``expr``, bound or read."""
    c = _Collector()
    c.expr(expr)
    return list(c.seen)


# --------------------------------------------------------------------------
# symbolic (shape) variables
# --------------------------------------------------------------------------


def sinfo_symbolic_vars(
    sinfo: S.StructInfo | None, through_functions: bool = True
) -> list[P.PrimVar]:
    """Every symbolic variable mentioned in a struct info.

    ``through_functions=False`` skips the signatures of function struct infos
    (a callee's ``n`` is not the caller's).
    """
    out: dict[P.PrimVar, None] = {}
    for e in _sinfo_prims(sinfo, top_level_only=not through_functions):
        for v in P.free_vars(e):
            out.setdefault(v, None)
    return list(out)


def definable_symbolic_vars(sinfo: S.StructInfo | None) -> list[P.PrimVar]:
    """Symbolic vars a value of this struct info pins down by itself.

    Only a bare variable in a shape dimension (or a prim value) is definable:
    a parameter ``Tensor((n,))`` defines ``n``, ``Tensor((n + 1,))`` does not.
    """
    return S.definable_vars(sinfo)


def _sinfo_prims(
    sinfo: S.StructInfo | None, top_level_only: bool = False
) -> Iterable[P.PrimExpr]:
    """Shape dims and prim values of a struct info (function signatures unless
    ``top_level_only``)."""
    if isinstance(sinfo, S.TensorStructInfo):
        yield from sinfo.shape or ()
    elif isinstance(sinfo, S.ShapeStructInfo):
        yield from sinfo.values or ()
    elif isinstance(sinfo, S.PrimStructInfo):
        if sinfo.value is not None:
            yield sinfo.value
    elif isinstance(sinfo, S.TupleStructInfo):
        for f in sinfo.fields:
            yield from _sinfo_prims(f, top_level_only)
    elif isinstance(sinfo, S.FuncStructInfo) and not top_level_only:
        for p in sinfo.params or ():
            yield from _sinfo_prims(p)
        yield from _sinfo_prims(sinfo.ret)


def free_symbolic_vars(func: E.Function) -> list[P.PrimVar]:
    """Symbolic vars ``func`` uses that neither its parameters nor a match_cast define.

    A well-formed function has none; a pass that builds a function from parts
    of another uses this to find what it must still bind.
    """
    defined: set[P.PrimVar] = set()
    for p in func.params:
        defined.update(definable_symbolic_vars(p.struct_info))
    free: dict[P.PrimVar, None] = {}

    def need(sinfo: S.StructInfo | None, prims: Iterable[P.PrimExpr] = ()) -> None:
        for v in sinfo_symbolic_vars(sinfo):
            if v not in defined:
                free.setdefault(v, None)
        for e in prims:
            for v in P.free_vars(e):
                if v not in defined:
                    free.setdefault(v, None)

    def walk(e: E.Expr) -> None:
        if isinstance(e, (E.ShapeExpr, E.PrimValue)):
            need(None, e.values if isinstance(e, E.ShapeExpr) else [e.value])
        elif isinstance(e, E.Tuple):
            for f in e.fields:
                walk(f)
        elif isinstance(e, E.TupleGetItem):
            walk(e.tuple_value)
        elif isinstance(e, E.Call):
            for a in e.args:
                walk(a)
            for s in e.sinfo_args:
                need(s)
        elif isinstance(e, E.If):
            walk(e.cond)
            walk(e.true_branch)
            walk(e.false_branch)
        elif isinstance(e, E.SeqExpr):
            for block in e.blocks:
                for b in block.bindings:
                    walk(b.value)  # type: ignore[attr-defined]
                    if isinstance(b, E.MatchCast):
                        defined.update(definable_symbolic_vars(b.struct_info))
                        need(b.struct_info)
                    need(b.var.struct_info)
            walk(e.body)
        elif isinstance(e, E.Function):
            for p in e.params:
                defined.update(definable_symbolic_vars(p.struct_info))
            walk(e.body)

    for p in func.params:
        need(p.struct_info)
    walk(func.body)
    need(func.ret_struct_info)
    return list(free)


__all__ = [
    "free_vars",
    "bound_vars",
    "all_vars",
    "free_symbolic_vars",
    "sinfo_symbolic_vars",
    "definable_symbolic_vars",
]
