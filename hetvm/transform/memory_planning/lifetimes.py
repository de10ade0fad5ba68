"""The planner's view of liveness: which allocations live where, and which escape.

The facts themselves come from the one liveness analysis
(:mod:`hetvm.analysis.liveness`) that KillAfterLastUse also reads, so the
planner packs with exactly the intervals at whose ends the kills go; this
module only picks the allocations a caller plans (``is_root``: the
planner's ``builtin.alloc_tensor``, the overlap check's carved tensors) and
keys the facts by their variables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ...analysis.liveness import (
    BranchPath,
    Interval,
    analyze_liveness,
    exclusive,
    intervals_overlap,
    merge_intervals,
)
from ...ir import expr as E
from ...ir.module import IRModule

__all__ = [
    "Interval",
    "BranchPath",
    "FunctionLifetimes",
    "analyze_lifetimes",
    "merge_intervals",
    "intervals_overlap",
    "exclusive",
]

IsRoot = Callable[[E.Binding], bool]


@dataclass
class FunctionLifetimes:
    """Where each root (a planned allocation) of one function is live, and which escape.

    ``roots``: root variables in program order; ``binding_of``: their bindings;
    ``intervals``: root -> sorted inclusive position intervals; ``escaping``:
    roots the function's result may reach; ``num_positions``: positions used;
    ``path``: root -> branch path (see :func:`exclusive`).
    """

    roots: list[E.Var] = field(default_factory=list)
    binding_of: dict[E.Var, E.Binding] = field(default_factory=dict)
    intervals: dict[E.Var, tuple[Interval, ...]] = field(default_factory=dict)
    escaping: frozenset = frozenset()
    num_positions: int = 0
    path: dict[E.Var, BranchPath] = field(default_factory=dict)


def _bindings(seq: E.SeqExpr, out: dict[E.Var, E.Binding]) -> dict[E.Var, E.Binding]:
    for block in seq.blocks:
        for b in block.bindings:
            out[b.var] = b
            value = b.value  # type: ignore[attr-defined]
            if isinstance(value, E.If):
                _bindings(value.true_branch, out)
                _bindings(value.false_branch, out)
    return out


def analyze_lifetimes(
    func: E.Function, is_root: IsRoot, mod: IRModule | None = None, name: str | None = None
) -> FunctionLifetimes:
    """Lifetimes of the roots (bindings ``is_root`` accepts) of ``func``
    (``mod``: summaries of the module functions it calls)."""
    live = analyze_liveness(func, mod, name)
    bindings = _bindings(func.body, {})
    out = FunctionLifetimes(num_positions=live.num_positions)
    escaping = live.values.escaping()
    for loc in live.values.locs:
        var = loc.var
        binding = bindings.get(var)  # type: ignore[arg-type]
        if binding is None or not is_root(binding):
            continue
        out.roots.append(var)  # type: ignore[arg-type]
        out.binding_of[var] = binding  # type: ignore[index]
        out.intervals[var] = live.intervals[loc]  # type: ignore[index]
        out.path[var] = live.path.get(loc, ())  # type: ignore[index]
    out.escaping = frozenset(loc.var for loc in escaping if loc.var in out.binding_of)
    return out
