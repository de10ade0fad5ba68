"""Which calls of module functions are in tail position.

Why: a loop is a function that calls itself in tail position (as in TVM
Relax); the VM makes such a call after the caller's frame is gone
(``hetvm.runtime.codegen.TailCall``), so everything the caller held but did
not pass on is released *before* the next iteration, and what it passes on
lives in the callee. The memory planner (what it passes on outlives the
frame), the peak simulation and the reference interpreter must agree with
the VM about which calls those are, so they all ask this module.

A call binding ``r = f(...)`` of a module function is in tail position when,
from it to the function's result, there is nothing but names for ``r``
(``y = r``), kills of other values, and the ends of the ``If`` branches
whose result it is. That is exactly the bytecode pattern the VM turns into a
tail call (``codegen.tail_call_pcs``: the call, moves of its result, kills of
other registers, jumps, ``Ret``).
"""

from __future__ import annotations

from ..ir import expr as E
from ..op.effects import is_kill

__all__ = ["tail_calls", "self_recursive"]


def tail_calls(func: E.Function, functions: object = None) -> dict[E.Var, E.Call]:
    """Binding variable -> call, for every call of a module function (a
    ``GlobalVar``; ``functions``: names to accept, all when None) in tail
    position in ``func``."""
    out: dict[E.Var, E.Call] = {}
    body = func.body
    if isinstance(body, E.SeqExpr):
        _seq(body, out, functions)
    return out


def _seq(seq: E.SeqExpr, out: dict, functions: object) -> None:
    if not isinstance(seq.body, E.Var):
        return
    held = {seq.body}
    bindings = [b for block in seq.blocks for b in block.bindings]
    for b in reversed(bindings):
        value = b.value  # type: ignore[attr-defined]
        if b.var not in held:
            if is_kill(value) and not (isinstance(value.args[0], E.Var) and value.args[0] in held):
                continue
            if isinstance(value, E.Var) and not isinstance(b, E.MatchCast):
                continue  # a move of another value: no effect
            return
        if isinstance(b, E.MatchCast):
            return
        if isinstance(value, E.Var):
            held.add(value)
            continue
        if isinstance(value, E.Call) and isinstance(value.op, E.GlobalVar):
            if functions is None or value.op.name_hint in functions:  # type: ignore[operator]
                out[b.var] = value
            return
        if isinstance(value, E.If):
            _seq(value.true_branch, out, functions)
            _seq(value.false_branch, out, functions)
        return


def self_recursive(func: E.Function, name: str) -> bool:
    """True when ``func`` (named ``name``) calls itself in tail position: a loop."""
    return any(c.op.name_hint == name for c in tail_calls(func).values())  # type: ignore[attr-defined]
