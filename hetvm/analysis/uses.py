"""Which bindings read each variable of a function.

Dead-code elimination, liveness and kill insertion all ask "who reads this
value?". A binding reads the variables of its value; a binding whose value is
an ``If`` also reads the condition and the results of both branches, while the
bindings inside the branches are recorded for what they read themselves. A
nested function's binding reads the function's free variables.
"""

from __future__ import annotations

from ..ir import expr as E
from .free_vars import free_vars


def _reads(value: E.Expr) -> list[E.Var]:
    """Variables a binding's value reads directly (branch bodies excluded)."""
    if isinstance(value, E.If):
        out = free_vars(value.cond)
        for branch in (value.true_branch, value.false_branch):
            out.extend(free_vars(branch.body))
        return list(dict.fromkeys(out))
    return free_vars(value)


def collect_uses(func: E.Function) -> dict[E.Var, list[E.Binding]]:
    """Maps every variable defined in ``func`` (params included) to its readers.

    Readers are listed in program order, each once. A variable read only by the
    function's result maps to an empty list: the result is not a binding (see
    ``free_vars(func.body.body)`` for what it reads).
    """
    uses: dict[E.Var, list[E.Binding]] = {p: [] for p in func.params}

    def seq(s: E.SeqExpr) -> None:
        for block in s.blocks:
            for b in block.bindings:
                value = b.value  # type: ignore[attr-defined]
                if isinstance(value, E.If):  # branch bindings run before the If completes
                    seq(value.true_branch)
                    seq(value.false_branch)
                for v in _reads(value):
                    readers = uses.setdefault(v, [])
                    if not readers or readers[-1] is not b:
                        readers.append(b)
                uses.setdefault(b.var, [])

    seq(func.body)
    return uses


__all__ = ["collect_uses"]
