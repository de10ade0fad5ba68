"""Who reads what: the variables an expression reads, and each variable's readers.

One definition for every pass that asks "who reads this value?" (dead-code
elimination, liveness and kill insertion, ConcatInPlace): a binding reads the
variables of its value; an ``If`` also reads what its branches read from
outside them (their own bindings' variables are not free); a nested
function reads its free variables.
"""

from __future__ import annotations

from ..ir import expr as E

__all__ = ["reads", "collect_uses"]


def reads(expr: E.Expr, out: list[E.Var] | None = None) -> list[E.Var]:
    """Variables read by ``expr`` (free in it), in order, with repeats."""
    if out is None:
        out = []
    stack: list[E.Expr] = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, E.Var):
            out.append(e)
        elif isinstance(e, E.Call):
            stack.extend(reversed(e.args))
            if isinstance(e.op, E.Var):
                stack.append(e.op)
        elif isinstance(e, E.Tuple):
            stack.extend(reversed(e.fields))
        elif isinstance(e, E.TupleGetItem):
            stack.append(e.tuple_value)
        elif isinstance(e, E.If):
            stack.append(e.cond)
            for seq in (e.true_branch, e.false_branch):
                _seq_free_reads(seq, out)
        elif isinstance(e, E.SeqExpr):
            _seq_free_reads(e, out)
        elif isinstance(e, E.Function):
            params = set(e.params)
            out.extend(v for v in reads(e.body) if v not in params)
    return out


def _seq_free_reads(seq: E.SeqExpr, out: list[E.Var]) -> None:
    defined: set[E.Var] = set()
    inner: list[E.Var] = []
    for block in seq.blocks:
        for b in block.bindings:
            reads(b.value, inner)  # type: ignore[attr-defined]
            defined.add(b.var)
    reads(seq.body, inner)
    out.extend(v for v in inner if v not in defined)


def _direct_reads(value: E.Expr) -> list[E.Var]:
    """What a binding's value reads itself: an If its condition and branch results."""
    if isinstance(value, E.If):
        return reads(value.cond) + reads(value.true_branch.body) + reads(value.false_branch.body)
    return reads(value)


def collect_uses(func: E.Function) -> dict[E.Var, list[E.Binding]]:
    """Maps every variable defined in ``func`` (params included) to its readers.

    Readers are listed in program order, each once. Here an ``If`` binding
    reads its condition and its branches' results, and the bindings inside
    the branches are listed for what they read themselves (before the ``If``,
    which completes after them). A variable read only by the function's result maps to an empty
    list: the result is not a binding (``reads(func.body.body)`` says what it
    reads).
    """
    uses: dict[E.Var, list[E.Binding]] = {p: [] for p in func.params}

    def seq(s: E.SeqExpr) -> None:
        for block in s.blocks:
            for b in block.bindings:
                value = b.value  # type: ignore[attr-defined]
                if isinstance(value, E.If):
                    seq(value.true_branch)
                    seq(value.false_branch)
                for v in dict.fromkeys(_direct_reads(value)):
                    readers = uses.setdefault(v, [])
                    if not readers or readers[-1] is not b:
                        readers.append(b)
                uses.setdefault(b.var, [])

    seq(func.body)
    return uses
