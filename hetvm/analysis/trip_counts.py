"""How many times a loop runs, when the program says so before it starts.

Why: device planning weighs a copy inside a loop body by the loop's
iterations, and ``explain`` reports them; both used a fixed guess (16). Many
loops have a count known at compile time: a ``Scan`` over a static sequence,
a ``Loop`` whose trip count is a constant. This reads it off the loop's form
(the one the ONNX importer makes and TVMScript spells: ``go = less(i, trips)``
[``and cond``], ``if go: ... f(i + 1, trips, ...)``), where every call from
outside passes constants for ``i`` and ``trips``.

A loop whose condition also has an ``and cond`` (ONNX ``Loop`` with both a trip
count and a condition) runs *at most* that many times: ``TripCount.exact`` is
False. Anything else -- a trip count that is a run-time value, callers that
disagree, another loop form -- is unknown (absent from the result).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import expr as E
from ..ir.module import IRModule
from .tail_calls import self_recursive, tail_calls

__all__ = ["TripCount", "trip_counts"]


@dataclass(frozen=True)
class TripCount:
    """``count`` iterations per entry of the loop (at most, when not ``exact``)."""

    count: int
    exact: bool

    def describe(self) -> str:
        n = f"{self.count:,} iteration{'s' if self.count != 1 else ''}"
        return n if self.exact else f"at most {n}"


def trip_counts(mod: IRModule) -> dict[str, TripCount]:
    """Loop function name -> its iterations per entry, for the loops whose
    count every caller fixes with constants."""
    funcs = {n: f for n, f in mod.functions.items() if isinstance(f, E.Function)}
    out: dict[str, TripCount] = {}
    for name, func in funcs.items():
        if not self_recursive(func, name):
            continue
        form = _loop_form(name, func)
        if form is None:
            continue
        counter, bound, exact = form
        counts = set()
        for caller_name, caller in funcs.items():
            if caller_name == name:
                continue
            for call in _calls_of(caller, name):
                start, stop = _int_const(call.args[counter]), _int_const(call.args[bound])
                counts.add(None if start is None or stop is None else max(stop - start, 0))
        if len(counts) == 1 and None not in counts:
            out[name] = TripCount(counts.pop(), exact)  # type: ignore[arg-type]
    return out


def _loop_form(name: str, func: E.Function) -> tuple[int, int, bool] | None:
    """(counter parameter, bound parameter, exact) when ``func`` runs while
    ``counter < bound`` (and, not exact, another condition) and passes on
    ``counter + 1`` and ``bound`` unchanged."""
    params = {p: k for k, p in enumerate(func.params)}
    top = {b.var: b.value for block in func.body.blocks for b in block.bindings if isinstance(b, E.VarBinding)}
    (call,) = [c for c in tail_calls(func).values() if c.op.name_hint == name] or [None]  # type: ignore[attr-defined]
    if call is None:
        return None
    ifs = [v for v in top.values() if isinstance(v, E.If) and _contains(v.true_branch, call)]
    if len(ifs) != 1 or not isinstance(ifs[0].cond, E.Var):
        return None
    cond, exact = top.get(ifs[0].cond), True
    if _op(cond) == "logical_and":
        parts = [top.get(a) if isinstance(a, E.Var) else None for a in cond.args]  # type: ignore[union-attr]
        less = [p for p in parts if _op(p) == "less"]
        cond, exact = (less[0] if len(less) == 1 else None), False
    if _op(cond) != "less":
        return None
    i, n = cond.args  # type: ignore[union-attr]
    if i not in params or n not in params:
        return None
    ci, cn = params[i], params[n]
    if call.args[cn] is not n:
        return None
    inner = {b.var: b.value for block in ifs[0].true_branch.blocks for b in block.bindings if isinstance(b, E.VarBinding)}
    step = inner.get(call.args[ci]) if isinstance(call.args[ci], E.Var) else None
    if _op(step) != "add":
        return None
    a, b = step.args  # type: ignore[union-attr]
    if not ((a is i and _int_const(b) == 1) or (b is i and _int_const(a) == 1)):
        return None
    return ci, cn, exact


def _op(value: object) -> str | None:
    if isinstance(value, E.Call) and isinstance(value.op, E.Op):
        return value.op.name
    return None


def _int_const(expr: E.Expr) -> int | None:
    if isinstance(expr, E.Constant) and expr.data.size == 1 and np.issubdtype(expr.data.dtype, np.integer):
        return int(expr.data.reshape(()))
    return None


def _contains(seq: E.SeqExpr, call: E.Call) -> bool:
    return any(b.value is call for block in seq.blocks for b in block.bindings)  # type: ignore[attr-defined]


def _calls_of(func: E.Function, name: str) -> list[E.Call]:
    out: list[E.Call] = []
    stack: list[E.Expr] = [func.body]
    while stack:
        e = stack.pop()
        if isinstance(e, E.SeqExpr):
            stack.extend(b.value for block in e.blocks for b in block.bindings)  # type: ignore[attr-defined]
        elif isinstance(e, E.If):
            stack.extend((e.true_branch, e.false_branch))
        elif isinstance(e, E.Call) and isinstance(e.op, E.GlobalVar) and e.op.name_hint == name:
            out.append(e)
    return out
