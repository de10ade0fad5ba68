"""KillAfterLastUse: release every intermediate at the end of its live interval.

Semantics follow TVM's pass: bindings are canonicalised first (``y = x`` and
no-op match_casts are dropped, so uses through them count for ``x``); then a
value is killed right after the binding that reads it last -- storage with
``memory.kill_storage``, tensors with ``memory.kill_tensor``, other register
objects (tuples, opaque objects) with ``vm.kill_object``.

*Where* is not decided here: the kill point of each variable is the end of
the intervals of the locations it may be, from the liveness analysis
(:mod:`hetvm.analysis.liveness`) that the memory planner packs with, so the
two cannot disagree about when bytes are free. That analysis also says which
values are never killed (parameters, constants, returned values, values of an
enclosing frame, unread values, values whose bytes a later tensor may
already have). Other names for a killed object (a view, a match_cast, a
tuple field) have their registers cleared with ``vm.kill_object`` at the
same point. Values that already have a kill are left alone, so the pass is
idempotent.

Where hetvm differs from TVM 0.27: a function containing an ``If`` still
gets kills (values local to a branch are killed inside it, a branch's result
is killed by the frame that reads it), and aliases are tracked (TVM assumes
none).
"""

from __future__ import annotations

from ..analysis.liveness import Liveness, analyze_liveness
from ..ir import expr as E
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.op_registry import get_op
from .canonicalize_bindings import CanonicalizeBindings
from .pass_infra import FunctionPass, PassContext

UNIT = S.TupleStructInfo([])


def _kill_binding(op: str, var: E.Var) -> E.VarBinding:
    return E.VarBinding(E.Var("_", struct_info=UNIT), E.Call(get_op(op), (var,), struct_info=UNIT))


def _process_seq(seq: E.SeqExpr, live: Liveness) -> E.SeqExpr:
    kills_after = live.kills_in(seq)
    flat = [(bi, b) for bi, block in enumerate(seq.blocks) for b in block.bindings]
    new_blocks: list[list[E.Binding]] = [[] for _ in seq.blocks]
    for pos, (bi, b) in enumerate(flat):
        value = b.value  # type: ignore[attr-defined]
        if isinstance(value, E.If):
            tb = _process_seq(value.true_branch, live)
            fb = _process_seq(value.false_branch, live)
            if tb is not value.true_branch or fb is not value.false_branch:
                b = E.replace(b, value=E.If(value.cond, tb, fb, struct_info=value.struct_info, span=value.span))
        new_blocks[bi].append(b)
        new_blocks[bi].extend(_kill_binding(op, var) for op, var in kills_after.get(pos, ()))
    blocks = [type(block)(tuple(bs), span=block.span) for block, bs in zip(seq.blocks, new_blocks)]
    return E.SeqExpr(blocks, seq.body, struct_info=seq.struct_info, span=seq.span)


class KillAfterLastUse(FunctionPass):
    def __init__(self) -> None:
        super().__init__("KillAfterLastUse")

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        canon = CanonicalizeBindings().transform_function(func, mod, ctx)
        name = next((n for n, f in mod.functions.items() if f is func), None)
        live = analyze_liveness(canon, mod, name)
        body = _process_seq(canon.body, live)
        return E.replace(canon, body=body)
