"""The value analysis: which bytes each variable of a function may be.

Why one analysis: the memory planner (which tensors may share bytes), the
kill pass (when are bytes dead), the overlap check and ConcatInPlace all need
the same answer to "what may this variable point to", and when each had its
own (four of them) they disagreed about when bytes are free.

Abstract locations (:class:`Loc`):

* ``ALLOC``: bytes a binding brings into being -- a computation, an
  allocation, a storage, a tensor carved from a storage, a copy, or whatever
  a packed function or module function returns beyond its arguments. Keyed by
  the binding's variable; ``owner`` is the ``SeqExpr`` (frame) that binds it.
* ``PARAM``: a parameter's bytes (the caller's; they outlive the call).
* ``CONST``: a constant's bytes (the VM's constant pool; they outlive calls).

A variable's *points-to* is a set of locations, or, for a literal tuple, one
points-to per field (so ``t[0]`` of ``t = (a, b)`` is ``a`` alone). What a
call may return follows the callee's declared effects
(:mod:`hetvm.op.effects`): a view (``vm.builtin.reshape``, ``view_at``) is
its source's bytes; an undeclared packed function's result may be any of its
arguments; a module function's result may be the arguments its
*summary* says it may return (its parameters that reach its result), or a
constant. At the op level (before LegalizeOps) every op computes a value of
its own: the view ops share bytes only once lowered to a view builtin.

Besides points-to, the analysis records each variable's *owner*: the
variable whose register holds the object it is (``y = x``, a match_cast, a
view builtin or ``t[i]`` of a literal tuple are names for an object another
variable holds; killing that variable kills them all).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Union

from ..ir import expr as E
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..op.effects import Result, op_effects, symbol_effects
from .reads import reads
from .tail_calls import tail_calls

__all__ = [
    "LocKind",
    "Loc",
    "PointsTo",
    "FunctionValues",
    "Summary",
    "analyze_values",
    "flatten",
    "merge_points_to",
    "result_vars",
]


class LocKind(enum.Enum):
    ALLOC = "alloc"
    PARAM = "param"
    CONST = "const"


@dataclass(frozen=True, eq=False)
class Loc:
    """One abstract location. ``var``: the binding (ALLOC) or parameter (PARAM)
    that brings it into being; ``origin``: for ALLOC, what made it
    (:class:`hetvm.op.effects.Result`, or ``"call"`` for what a module
    function or an undeclared packed function returns of its own)."""

    kind: LocKind
    var: E.Var | None = None
    origin: object = None

    def __repr__(self) -> str:
        name = self.var.name_hint if self.var is not None else ""
        return f"Loc({self.kind.value}:{name})"


CONST_LOC = Loc(LocKind.CONST)

PointsTo = Union[frozenset, tuple]
EMPTY: frozenset = frozenset()


def flatten(pts: PointsTo) -> frozenset:
    """Every location a value may reach, tuple structure forgotten."""
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


def _may_hold_tensor(sinfo: S.StructInfo | None) -> bool:
    """False for values that cannot be (or contain) bytes: shapes, prims, ()."""
    if sinfo is None or isinstance(sinfo, (S.TensorStructInfo, S.ObjectStructInfo, S.FuncStructInfo)):
        return True  # a function value may be a closure holding tensors
    if isinstance(sinfo, S.TupleStructInfo):
        return any(_may_hold_tensor(f) for f in sinfo.fields)
    return False


@dataclass(frozen=True)
class Summary:
    """What a module function may return: which parameters (by index), and
    whether a constant's bytes."""

    returned_params: frozenset
    may_return_constant: bool


@dataclass
class FunctionValues:
    """The value facts of one function.

    ``points_to``: variable -> points-to; ``value_of``: variable -> the value
    it is bound to; ``frame_of``: variable -> the SeqExpr binding it (None for
    parameters); ``parent``: frame -> enclosing frame; ``locs``: ALLOC
    locations in program order; ``loc_of``: binding variable -> its ALLOC
    location; ``result``: points-to of the function's result; ``params``.
    """

    func: E.Function
    points_to: dict[E.Var, PointsTo] = field(default_factory=dict)
    value_of: dict[E.Var, E.Expr] = field(default_factory=dict)
    frame_of: dict[E.Var, E.SeqExpr | None] = field(default_factory=dict)
    parent: dict[int, E.SeqExpr | None] = field(default_factory=dict)
    locs: list[Loc] = field(default_factory=list)
    loc_of: dict[E.Var, Loc] = field(default_factory=dict)
    result: PointsTo = EMPTY
    params: tuple = ()
    #: locations passed to a call in tail position: the VM makes that call once
    #: this frame is gone, so they outlive it (see :mod:`.tail_calls`)
    passed_on: frozenset = EMPTY
    #: owner() answers, filled on demand once the analysis is complete
    _owners: dict = field(default_factory=dict, repr=False, compare=False)

    # -- queries ---------------------------------------------------------------
    def of(self, var: E.Var) -> frozenset:
        """Every location ``var`` may be (flattened)."""
        return flatten(self.points_to.get(var, EMPTY))

    def of_expr(self, expr: E.Expr) -> PointsTo:
        """What an expression may be: a variable's points-to, a constant's
        bytes, per field for a literal tuple (an argument, a branch result)."""
        if isinstance(expr, E.Var):
            return self.points_to.get(expr, EMPTY)
        if isinstance(expr, E.Constant):
            return frozenset((CONST_LOC,))
        if isinstance(expr, E.Tuple):
            return tuple(self.of_expr(f) for f in expr.fields)
        if isinstance(expr, E.TupleGetItem):
            inner = self.of_expr(expr.tuple_value)
            if isinstance(inner, tuple):
                return inner[expr.index] if -len(inner) <= expr.index < len(inner) else flatten(inner)
            return inner
        return EMPTY

    def escaping(self) -> frozenset:
        """Locations the function's result may reach, or that it passes to a call
        in tail position: they outlive the call."""
        return flatten(self.result) | self.passed_on

    def owner(self, var: E.Var) -> E.Var:
        """The variable whose register holds the object ``var`` names (itself when
        it holds one of its own). Memoised along the chain: a chain of n views
        (an in-place element-wise chain is one) costs O(n) in all, not O(n^2)."""
        cache = self._owners
        path = []
        while var not in cache and len(path) < 1_000_000:
            source = self._same_object(self.value_of.get(var))
            if source is None or source is var or source in path:
                cache[var] = var
                break
            path.append(var)
            var = source
        found = cache.get(var, var)
        for v in path:
            cache[v] = found
        return found

    def _same_object(self, value: E.Expr | None) -> E.Var | None:
        if isinstance(value, E.Var):
            return value
        if isinstance(value, E.Call) and isinstance(value.op, E.ExternFunc):
            eff = symbol_effects(value.op.global_symbol)
            if eff.is_alias(len(value.args)) and isinstance(value.args[eff.source], E.Var):
                return value.args[eff.source]  # type: ignore[return-value]
            return None
        if isinstance(value, E.TupleGetItem) and isinstance(value.tuple_value, E.Var):
            tup = self.value_of.get(value.tuple_value)
            if isinstance(tup, E.Tuple):
                fieldv = tup.fields[value.index]
                if isinstance(fieldv, E.Var):
                    return fieldv
            return value.tuple_value
        return None

    def frames_up(self, frame: E.SeqExpr | None) -> list[E.SeqExpr]:
        """``frame`` and the frames enclosing it, innermost first."""
        out = []
        while frame is not None:
            out.append(frame)
            frame = self.parent.get(id(frame))
        return out

    def summary(self) -> Summary:
        escaping = flatten(self.result)
        returned = frozenset(
            i for i, p in enumerate(self.params) if any(loc.var is p for loc in escaping if loc.kind is LocKind.PARAM)
        )
        return Summary(returned, CONST_LOC in escaping)


_NOTHING = Summary(frozenset(), False)


class _Analyzer:
    def __init__(
        self, func: E.Function, mod: IRModule | None, active: tuple, assumed: dict[str, Summary] | None = None
    ) -> None:
        self.mod = mod
        self.active = active
        self.out = FunctionValues(func, params=tuple(func.params))
        self._summaries: dict[str, Summary] = {}
        #: summaries of the functions being analysed (recursion), guessed so far
        self.assumed = assumed if assumed is not None else {}
        self.consulted: set[str] = set()

    def run(self) -> FunctionValues:
        func = self.out.func
        for p in func.params:
            self.out.points_to[p] = frozenset((Loc(LocKind.PARAM, p),))
            self.out.frame_of[p] = None
        self.out.result = self.seq(func.body, None)
        passed: set = set()
        for call in tail_calls(func, self.mod).values():
            for a in call.args:
                passed |= flatten(self.expr(a))
        self.out.passed_on = frozenset(passed)
        return self.out

    # -- expressions --------------------------------------------------------------
    def expr(self, expr: E.Expr) -> PointsTo:
        return self.out.of_expr(expr)

    def new_loc(self, var: E.Var, origin: object) -> frozenset:
        loc = Loc(LocKind.ALLOC, var, origin)
        self.out.locs.append(loc)
        self.out.loc_of[var] = loc
        return frozenset((loc,))

    def call(self, var: E.Var, call: E.Call) -> PointsTo:
        callee = call.op
        if isinstance(callee, E.Op):
            eff = op_effects(callee.name)
            if eff.result is Result.NONE or not _may_hold_tensor(call.struct_info):
                return EMPTY
            if eff.result is Result.OPAQUE:  # a closure (or its result) holds its arguments
                out = set(self.new_loc(var, "call"))
                for a in call.args:
                    out |= flatten(self.expr(a))
                return frozenset(out)
            # at the op level every op computes a value of its own (views share
            # bytes once LegalizeOps makes them view builtins)
            origin = eff.result if eff.result in (Result.STORAGE, Result.CARVED) else Result.FRESH
            return self.new_loc(var, origin)
        if not _may_hold_tensor(call.struct_info):
            return EMPTY
        if isinstance(callee, E.ExternFunc):
            eff = symbol_effects(callee.global_symbol)
            if eff.is_alias(len(call.args)):
                source = self.expr(call.args[eff.source])
                return source if eff.result is Result.ARGUMENT else flatten(source)
            if eff.result is Result.NONE:
                return EMPTY
            if eff.result is Result.OPAQUE:
                out = set(self.new_loc(var, "call"))
                for a in call.args:
                    out |= flatten(self.expr(a))
                return frozenset(out)
            return self.new_loc(var, eff.result)
        if isinstance(callee, E.GlobalVar) and self.mod is not None and callee.name_hint in self.mod:
            summary = self.summary_of(callee.name_hint)
            out = set(self.new_loc(var, "call"))
            for i, a in enumerate(call.args):
                if i in summary.returned_params:
                    out |= flatten(self.expr(a))
            if summary.may_return_constant:
                out.add(CONST_LOC)
            return frozenset(out)
        # a function value or an unknown callee: any argument (a closure's captured
        # values too), or bytes of its own
        out = set(self.new_loc(var, "call"))
        out |= flatten(self.expr(callee))
        for a in call.args:
            out |= flatten(self.expr(a))
        return frozenset(out)

    def summary_of(self, name: str) -> Summary:
        if name in self.active:  # recursion: the guess of the fixpoint in progress
            self.consulted.add(name)
            return self.assumed.get(name, _NOTHING)
        if name not in self._summaries:
            assert self.mod is not None
            self._summaries[name] = _fixpoint(self.mod[name], self.mod, self.active + (name,), self.assumed)[0]
        return self._summaries[name]

    # -- walking ---------------------------------------------------------------------
    def seq(self, seq: E.SeqExpr, parent: E.SeqExpr | None) -> PointsTo:
        self.out.parent[id(seq)] = parent
        for block in seq.blocks:
            for binding in block.bindings:
                var = binding.var
                value = binding.value  # type: ignore[attr-defined]
                self.out.value_of[var] = value
                self.out.frame_of[var] = seq
                if isinstance(value, E.If):
                    t = self.seq(value.true_branch, seq)
                    f = self.seq(value.false_branch, seq)
                    pts = merge_points_to(t, f)
                elif isinstance(value, E.Call):
                    pts = self.call(var, value)
                else:
                    pts = self.expr(value)
                self.out.points_to[var] = pts
        return self.expr(seq.body)


def _fixpoint(
    func: E.Function, mod: IRModule | None, active: tuple, assumed: dict[str, Summary]
) -> tuple[Summary, FunctionValues]:
    """The summary of ``func`` (``active[-1]``) and its facts under it. A function
    that calls itself (a loop) is analysed from the guess "returns nothing"
    until its summary stops growing: the least fixpoint, so a loop that returns
    its accumulator does not also return its trip count."""
    name = active[-1]
    guess = _NOTHING
    for _ in range(len(func.params) + 3):  # each round adds a parameter or the constant
        analyzer = _Analyzer(func, mod, active, {**assumed, name: guess})
        facts = analyzer.run()
        got = facts.summary()
        got = Summary(got.returned_params | guess.returned_params, got.may_return_constant or guess.may_return_constant)
        if name not in analyzer.consulted or got == guess:
            return got, facts
        guess = got
    everything = Summary(frozenset(range(len(func.params))), True)
    return everything, _Analyzer(func, mod, active, {**assumed, name: everything}).run()


def analyze_values(func: E.Function, mod: IRModule | None = None, name: str | None = None) -> FunctionValues:
    """The value facts of ``func`` (``mod``: for summaries of the module
    functions it calls; ``name``: its own name there, to spot recursion)."""
    if name is None:
        return _Analyzer(func, mod, ()).run()
    return _fixpoint(func, mod, (name,), {})[1]


def result_vars(seq: E.SeqExpr) -> set[E.Var]:
    """Variables ``seq`` returns, also as fields of literal tuples it binds."""
    tuples = {
        b.var: b.value for block in seq.blocks for b in block.bindings if isinstance(b.value, E.Tuple)  # type: ignore[attr-defined]
    }
    out: set[E.Var] = set()
    todo = reads(seq.body)
    while todo:
        v = todo.pop()
        if v not in out:
            out.add(v)
            if v in tuples:
                todo.extend(reads(tuples[v]))
    return out
