"""Lifetimes of the tensors a function allocates: positions, aliases, escapes.

Why this is its own module: the planner (which tensors may share bytes) and the
overlap checker (did the planner get it right) must agree on one definition of
"live", and both need the same alias facts.

Positions are program order. Every binding of a ``SeqExpr`` takes one position;
an ``If`` binding takes a *range*: its true branch is numbered first, then its
false branch, then the ``If`` itself (where its variable is bound). A branch's
result is read at its own position after the branch's last binding. So the
branches of one ``If`` occupy disjoint ranges and a tensor that lives only in
one branch never overlaps one that lives only in the other: mutually exclusive
allocations may share bytes.

A variable is live in the frame (``SeqExpr``) that binds it from its binding to
the last binding of that frame that reads it; a read anywhere inside a nested
``If`` counts as a read by the whole ``If`` (that is also where
KillAfterLastUse puts the kill). An ``If`` result that a branch may take from
a value of the same frame ends at its own last read: KillAfterLastUse never
kills such a result later than that (it leaves it alone instead), so a branch's
own allocation it may be is free after it. A *root* (a tensor with its own bytes: an
allocation) is live wherever any variable that may point to it is live:
reshape and ``view_at`` views, tuple fields, ``TupleGetItem``, match_cast, ``If`` results, and
-- conservatively -- results of calls that may return an argument (module
functions, packed functions other than kernels).

Each root also records its *branch path*: the (If, branch) pairs it was
allocated under. Two roots allocated in different branches of the same ``If``
never exist in the same call, so they never conflict, even where an ``If``
result makes both look live after the ``If``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Union

from ...ir import expr as E
from ...ir import struct_info as S
from ...op.effects import symbol_effects
from .._util import uses_of

__all__ = [
    "Interval",
    "FunctionLifetimes",
    "analyze_lifetimes",
    "merge_intervals",
    "intervals_overlap",
    "exclusive",
]

Interval = tuple[int, int]  # inclusive (first, last) positions
BranchPath = tuple[tuple[int, int], ...]  # ((if id, 0 true / 1 false), ...), outermost first
# What a value may point to: a set of roots, or per-field facts for a tuple.
PointsTo = Union[frozenset, tuple]
EMPTY: frozenset = frozenset()

IsRoot = Callable[[E.Binding], bool]


def flatten(pts: PointsTo) -> frozenset:
    """Every root a value may reach, tuple structure forgotten."""
    if isinstance(pts, frozenset):
        return pts
    out: set = set()
    for p in pts:
        out |= flatten(p)
    return frozenset(out)


def merge_points_to(a: PointsTo, b: PointsTo) -> PointsTo:
    """Facts for a value that is ``a`` or ``b`` (the two branches of an If)."""
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return tuple(merge_points_to(x, y) for x, y in zip(a, b))
    return flatten(a) | flatten(b)


def merge_intervals(intervals: Iterable[Interval]) -> tuple[Interval, ...]:
    """Sorted, with overlapping or adjacent intervals joined."""
    out: list[list[int]] = []
    for lo, hi in sorted(intervals):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def intervals_overlap(a: tuple[Interval, ...], b: tuple[Interval, ...]) -> bool:
    """True when two sorted interval lists share a position."""
    i = j = 0
    while i < len(a) and j < len(b):
        (alo, ahi), (blo, bhi) = a[i], b[j]
        if alo <= bhi and blo <= ahi:
            return True
        if ahi < bhi:
            i += 1
        else:
            j += 1
    return False


def exclusive(a: BranchPath, b: BranchPath) -> bool:
    """True when roots with these branch paths can never exist in the same call."""
    for (ia, ba), (ib, bb) in zip(a, b):
        if ia != ib:
            return False
        if ba != bb:
            return True
    return False


def _may_hold_tensor(sinfo: S.StructInfo | None) -> bool:
    if sinfo is None or isinstance(sinfo, (S.TensorStructInfo, S.ObjectStructInfo)):
        return True
    if isinstance(sinfo, S.TupleStructInfo):
        return any(_may_hold_tensor(f) for f in sinfo.fields)
    return False


@dataclass
class FunctionLifetimes:
    """Where each root of one function is live, and which roots escape it.

    ``roots``: root variables in program order; ``binding_of``: their bindings;
    ``intervals``: root -> sorted inclusive position intervals; ``escaping``:
    roots the function's result may reach; ``num_positions``: positions used;
    ``path``: root -> branch path (see :func:`exclusive`).
    """

    roots: list[E.Var] = field(default_factory=list)
    binding_of: dict[E.Var, E.Binding] = field(default_factory=dict)
    intervals: dict[E.Var, tuple[Interval, ...]] = field(default_factory=dict)
    escaping: frozenset = EMPTY
    num_positions: int = 0
    path: dict[E.Var, BranchPath] = field(default_factory=dict)


class _Analyzer:
    def __init__(self, is_root: IsRoot) -> None:
        self.is_root = is_root
        self.counter = 0
        self.pts: dict[E.Var, PointsTo] = {}
        self.def_pos: dict[E.Var, int] = {}
        self.end_pos: dict[E.Var, int] = {}
        self.result = FunctionLifetimes()
        self.branch: list[tuple[int, int]] = []
        self.num_ifs = 0

    # -- points-to of expressions ----------------------------------------
    def expr_pts(self, expr: E.Expr) -> PointsTo:
        if isinstance(expr, E.Var):
            return self.pts.get(expr, EMPTY)
        if isinstance(expr, E.Tuple):
            return tuple(self.expr_pts(f) for f in expr.fields)
        if isinstance(expr, E.TupleGetItem):
            inner = self.expr_pts(expr.tuple_value)
            if isinstance(inner, tuple):
                return inner[expr.index] if -len(inner) <= expr.index < len(inner) else flatten(inner)
            return inner
        return EMPTY

    def value_pts(self, binding: E.Binding, value: E.Expr) -> PointsTo:
        if self.is_root(binding):
            self.result.roots.append(binding.var)
            self.result.binding_of[binding.var] = binding
            self.result.path[binding.var] = tuple(self.branch)
            return frozenset((binding.var,))
        if isinstance(value, E.Call):
            op = value.op
            if isinstance(op, E.ExternFunc):
                eff = symbol_effects(op.global_symbol)
                if eff.is_alias(len(value.args)):  # a view: its source's bytes
                    return flatten(self.expr_pts(value.args[eff.source]))
            if not _may_hold_tensor(value.struct_info):
                return EMPTY
            # A call that returns a tensor may return (part of) an argument.
            out: set = set()
            for a in value.args:
                out |= flatten(self.expr_pts(a))
            return frozenset(out)
        return self.expr_pts(value)

    # -- walking -----------------------------------------------------------
    def _use(self, var: E.Var, pos: int) -> None:
        if var in self.end_pos and self.end_pos[var] < pos:
            self.end_pos[var] = pos

    def seq(self, seq: E.SeqExpr) -> PointsTo:
        for block in seq.blocks:
            for binding in block.bindings:
                value = binding.value  # type: ignore[attr-defined]
                if isinstance(value, E.If):
                    if_id = self.num_ifs
                    self.num_ifs += 1
                    self.branch.append((if_id, 0))
                    t = self.seq(value.true_branch)
                    self.branch[-1] = (if_id, 1)
                    f = self.seq(value.false_branch)
                    self.branch.pop()
                    pos = self.counter
                    self.counter += 1
                    pts = merge_points_to(t, f)
                else:
                    pos = self.counter
                    self.counter += 1
                    pts = self.value_pts(binding, value)
                for v in uses_of(value):
                    self._use(v, pos)
                var = binding.var
                self.pts[var] = pts
                self.def_pos[var] = pos
                self.end_pos[var] = pos
        pos = self.counter
        self.counter += 1
        for v in uses_of(seq.body):
            self._use(v, pos)
        return self.expr_pts(seq.body)

    def run(self, func: E.Function) -> FunctionLifetimes:
        result_pts = self.seq(func.body)
        acc: dict[E.Var, list[Interval]] = {r: [] for r in self.result.roots}
        for var, pts in self.pts.items():
            roots = flatten(pts)
            if not roots:
                continue
            span = (self.def_pos[var], self.end_pos[var])
            for r in roots:
                acc[r].append(span)
        self.result.intervals = {r: merge_intervals(iv) for r, iv in acc.items()}
        self.result.escaping = flatten(result_pts)
        self.result.num_positions = self.counter
        return self.result


def analyze_lifetimes(func: E.Function, is_root: IsRoot) -> FunctionLifetimes:
    """Lifetimes of the roots (bindings ``is_root`` accepts) of ``func``."""
    return _Analyzer(is_root).run(func)
