"""DeadCodeElimination: drop pure bindings nobody reads, and unreachable functions.

Works backwards over each sequence with a live set, so a chain of dead
bindings goes in one pass. Impure bindings always stay. Functions that are
private (``attrs["private"]``) and never referenced are removed; public
functions are entry points and stay. A ``match_cast`` to a type with symbolic
dimensions stays even when its result is unread: it is where those variables
get their values, which later shapes may use (the long fuzz run found
``R.full(R.shape([d0]), ...)`` left with ``d0`` defined nowhere).
"""

from __future__ import annotations

from typing import Sequence

from ..analysis.reads import reads
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.module import IRModule
from ._util import is_pure
from .pass_infra import Pass, PassContext


def _has_symbols(sinfo: S.StructInfo | None) -> bool:
    """Whether a struct info mentions a symbolic variable (a match_cast to it may define one)."""
    if isinstance(sinfo, S.TensorStructInfo):
        return any(P.free_vars(d) for d in sinfo.shape or ())
    if isinstance(sinfo, S.ShapeStructInfo):
        return any(P.free_vars(d) for d in sinfo.values or ())
    if isinstance(sinfo, S.PrimStructInfo):
        return sinfo.value is not None and bool(P.free_vars(sinfo.value))
    if isinstance(sinfo, S.TupleStructInfo):
        return any(_has_symbols(f) for f in sinfo.fields)
    return False


def _dce_seq(seq: E.SeqExpr, mod: IRModule) -> tuple[E.SeqExpr, list[E.Var]]:
    """Returns the pruned sequence and the variables it reads from outside."""
    live: set[E.Var] = set(reads(seq.body))
    new_blocks: list[E.BindingBlock] = []
    changed = False
    for block in reversed(seq.blocks):
        kept: list[E.Binding] = []
        for b in reversed(block.bindings):
            value = b.value  # type: ignore[attr-defined]
            defines_symbols = isinstance(b, E.MatchCast) and _has_symbols(b.struct_info)
            if b.var not in live and is_pure(value, mod) and not defines_symbols:
                changed = True
                continue
            if isinstance(value, E.If):
                tb, _ = _dce_seq(value.true_branch, mod)
                fb, _ = _dce_seq(value.false_branch, mod)
                if tb is not value.true_branch or fb is not value.false_branch:
                    value = E.If(value.cond, tb, fb, struct_info=value.struct_info, span=value.span)
                    b = E.replace(b, value=value)
                    changed = True
            live.update(reads(value))
            kept.append(b)
        kept.reverse()
        if len(kept) != len(block.bindings):
            changed = True
        if kept:
            new_blocks.append(block if len(kept) == len(block.bindings) and not changed else type(block)(tuple(kept), span=block.span))
    new_blocks.reverse()
    if not changed:
        return seq, list(live)
    return E.SeqExpr(new_blocks, seq.body, struct_info=seq.struct_info, span=seq.span), list(live)


def _referenced_globals(func: E.Function) -> set[str]:
    from ..ir.visitor import post_order_visit

    names: set[str] = set()

    def visit(e: E.Expr) -> None:
        if isinstance(e, E.GlobalVar):
            names.add(e.name_hint)

    post_order_visit(func, visit)
    return names


class DeadCodeElimination(Pass):
    def __init__(self, entry_functions: Sequence[str] | None = None) -> None:
        """``entry_functions``: private functions kept as roots besides the public
        ones; None (TVM's default spelling) or empty means the public ones only."""
        super().__init__("DeadCodeElimination")
        self.entry_functions = tuple(entry_functions or ())

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        funcs: dict[str, E.Function] = {}
        changed = False
        for name, func in mod.functions.items():
            body, _ = _dce_seq(func.body, mod)
            if body is not func.body:
                func = E.replace(func, body=body)
                changed = True
            funcs[name] = func
        # reachability from entry points
        roots = [n for n, f in funcs.items() if not f.attrs.get("private") or n in self.entry_functions]
        reachable: set[str] = set()
        work = list(roots)
        while work:
            n = work.pop()
            if n in reachable or n not in funcs:
                continue
            reachable.add(n)
            work.extend(_referenced_globals(funcs[n]))
        if len(reachable) != len(funcs):
            funcs = {n: f for n, f in funcs.items() if n in reachable}
            changed = True
        return mod.with_functions(funcs) if changed else mod
