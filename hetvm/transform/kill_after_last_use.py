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

from ..analysis.liveness import Liveness, analyze_liveness, kill_op_for
from ..ir import expr as E
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.op_registry import get_op
from ..op.effects import is_kill
from .canonicalize_bindings import CanonicalizeBindings
from .pass_infra import FunctionPass, PassContext

UNIT = S.TupleStructInfo([])


def _already_killed(seq: E.SeqExpr, out: set[E.Var]) -> set[E.Var]:
    for block in seq.blocks:
        for b in block.bindings:
            value = b.value  # type: ignore[attr-defined]
            if is_kill(value) and isinstance(value.args[0], E.Var):
                out.add(value.args[0])
            elif isinstance(value, E.If):
                _already_killed(value.true_branch, out)
                _already_killed(value.false_branch, out)
    return out


def _kill_binding(op: str, var: E.Var) -> E.VarBinding:
    return E.VarBinding(E.Var("_", struct_info=UNIT), E.Call(get_op(op), (var,), struct_info=UNIT))


def _process_seq(seq: E.SeqExpr, live: Liveness, killed: set[E.Var]) -> E.SeqExpr:
    values = live.values
    flat = [(bi, b) for bi, block in enumerate(seq.blocks) for b in block.bindings]
    kills_after: dict[int, list[E.Binding]] = {}
    for _, b in flat:
        var = b.var
        if var in killed or values.owner(var) is not var:
            continue
        op = kill_op_for(var, values.value_of.get(var))
        at = live.kill_point(var) if op is not None else None
        if op is None or at is None:
            continue
        clears = [
            _kill_binding("vm.kill_object", a) for a in live.aliases(var) if values.frame_of.get(a) is seq
        ]
        kills_after.setdefault(at, []).extend(clears + [_kill_binding(op, var)])
    new_blocks: list[list[E.Binding]] = [[] for _ in seq.blocks]
    for pos, (bi, b) in enumerate(flat):
        value = b.value  # type: ignore[attr-defined]
        if isinstance(value, E.If):
            tb = _process_seq(value.true_branch, live, killed)
            fb = _process_seq(value.false_branch, live, killed)
            if tb is not value.true_branch or fb is not value.false_branch:
                b = E.replace(b, value=E.If(value.cond, tb, fb, struct_info=value.struct_info, span=value.span))
        new_blocks[bi].append(b)
        new_blocks[bi].extend(kills_after.get(pos, ()))
    blocks = [type(block)(tuple(bs), span=block.span) for block, bs in zip(seq.blocks, new_blocks)]
    return E.SeqExpr(blocks, seq.body, struct_info=seq.struct_info, span=seq.span)


class KillAfterLastUse(FunctionPass):
    def __init__(self) -> None:
        super().__init__("KillAfterLastUse")

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        canon = CanonicalizeBindings().transform_function(func, mod, ctx)
        name = next((n for n, f in mod.functions.items() if f is func), None)
        live = analyze_liveness(canon, mod, name)
        body = _process_seq(canon.body, live, _already_killed(canon.body, set()))
        return E.replace(canon, body=body)
