"""Liveness on the value analysis: where each location is live, and where it dies.

Why here, once: the memory planner packs tensors whose intervals are
disjoint and KillAfterLastUse releases bytes at the end of their interval;
when the two computed "live" separately they disagreed (a kill after the
planner had reused the bytes, or before a late read). Both now read
:class:`Liveness`, and the overlap check re-derives it from the IR.

Positions are program order. Every binding of a ``SeqExpr`` takes one
position; an ``If`` binding takes a *range*: its true branch is numbered
first, then its false branch, then the ``If`` itself (where its variable is
bound); a ``SeqExpr``'s result is read at a position of its own after its
last binding. So the branches of one ``If`` occupy disjoint ranges, and
tensors that live only in one branch never overlap ones that live only in
the other.

A read is of *locations* (:mod:`hetvm.analysis.values`): ``f(t)`` reads
every location ``t`` may be, ``t[0]`` of a literal tuple only its field's;
a kill of a tuple-typed variable reads none (the VM's Kill of a tuple only
clears the register: its fields' bytes are untouched).
What a branch reads from outside it counts as read by the ``If`` too (at the
``If``'s position). A location is live, for each variable that may be it,
from that variable's binding to the variable's last read of it; its
intervals are the union (merged). Each location also has a *branch path*:
the (If, branch) pairs it was allocated under -- two locations allocated in
different branches of one ``If`` never exist in the same call.

Kill points (:meth:`Liveness.kill_point`): a variable's object is released
at the end of the intervals of every location it may be, in the frame that
binds it -- unless one of them outlives the frame, the call (a parameter, a
constant, a returned value), belongs to an enclosing frame (which releases
it), or is a tensor whose interval ended earlier (its bytes may already be
another tensor's). A literal tuple's register holds no bytes of its own: it
dies after its own last read.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Iterable

from ..arena_packing import BranchPath, Interval, conflicts, exclusive  # noqa: F401 - re-exported
from ..ir import expr as E
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..op.effects import Result, is_kill, is_storage_alloc
from .values import EMPTY, FunctionValues, Loc, LocKind, PointsTo, analyze_values, flatten

__all__ = [
    "Interval",
    "BranchPath",
    "Liveness",
    "analyze_liveness",
    "merge_intervals",
    "intervals_overlap",
    "exclusive",
    "kill_op_for",
    "conflicts",
]


#: locations whose bytes the planner may give to a later tensor once their interval ends
_REUSABLE = (Result.FRESH, Result.CARVED)
_BIG = 1 << 62


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




@dataclass
class _Frame:
    """One SeqExpr: its bindings' position ranges and its result's position."""

    seq: E.SeqExpr
    ranges: list[tuple[int, int]] = field(default_factory=list)  # per binding, inclusive
    body_pos: int = -1

    def binding_at(self, pos: int) -> int | None:
        """Index of the binding whose range holds ``pos`` (None: not a binding here)."""
        i = bisect.bisect_right(self.ranges, (pos, _BIG)) - 1
        if i >= 0 and self.ranges[i][0] <= pos <= self.ranges[i][1]:
            return i
        return None


@dataclass
class Liveness:
    """Positions, intervals and kill points of one function (see the module doc).

    ``intervals``: ALLOC location -> sorted inclusive intervals; ``path``:
    location -> branch path; ``def_pos``: variable -> its binding's position;
    ``num_positions``: positions used.
    """

    values: FunctionValues
    intervals: dict[Loc, tuple[Interval, ...]] = field(default_factory=dict)
    path: dict[Loc, BranchPath] = field(default_factory=dict)
    def_pos: dict[E.Var, int] = field(default_factory=dict)
    num_positions: int = 0
    _frames: dict[int, _Frame] = field(default_factory=dict)
    _last_read: dict[E.Var, int] = field(default_factory=dict)  # var read directly, last position
    _loc_read: set = field(default_factory=set)  # locations some read touches
    _escaping_objects: set = field(default_factory=set)
    _aliases: dict[E.Var, list[E.Var]] = field(default_factory=dict)
    _killed: set = field(default_factory=set)  # variables the IR already kills

    # -- intervals -----------------------------------------------------------------
    def end(self, loc: Loc) -> int:
        """The last position ``loc`` is live at."""
        iv = self.intervals.get(loc)
        return iv[-1][1] if iv else -1

    # -- kills -----------------------------------------------------------------------
    def kill_point(self, var: E.Var) -> int | None:
        """Index, in the frame binding ``var``, of the binding after which
        ``var``'s object is released; None when it is never released here
        (see the module doc). ``var`` should own its object
        (``values.owner(var) is var``)."""
        v = self.values
        frame_seq = v.frame_of.get(var)
        if frame_seq is None or not self._is_read(var):
            return None
        frame = self._frames[id(frame_seq)]
        if isinstance(v.value_of.get(var), E.Tuple):
            # a literal tuple's register: its fields are objects of their own
            if var in self._escaping_objects:
                return None
            return frame.binding_at(self._object_last_read(var))
        locs = v.of(var)
        escaping = v.escaping()
        pos = self._object_last_read(var)
        for loc in locs:
            if loc.kind is not LocKind.ALLOC or loc in escaping:
                return None  # a parameter's, a constant's or a returned value's bytes
            if frame_seq not in v.frames_up(v.frame_of.get(loc.var)):
                return None  # a value of an enclosing frame: that frame releases it
            pos = max(pos, self.end(loc))
        for loc in locs:
            if loc.origin in _REUSABLE and self.end(loc) < pos:
                # a kill this late would release bytes a later tensor may have
                return None
        return frame.binding_at(pos)

    def _is_read(self, var: E.Var) -> bool:
        if var in self._last_read:
            return True
        own = self.values.loc_of.get(var)
        return own is not None and own in self._loc_read

    def _object_last_read(self, var: E.Var) -> int:
        """Last direct read of ``var`` or of a name for its object."""
        last = self._last_read.get(var, self.def_pos.get(var, -1))
        for alias in self.aliases(var):
            last = max(last, self._last_read.get(alias, -1))
        return last

    def aliases(self, var: E.Var) -> list[E.Var]:
        """Other names for ``var``'s object that some binding reads, in program order."""
        return list(self._aliases.get(var, ()))

    def kills_in(self, seq: E.SeqExpr) -> dict[int, list[tuple[str, E.Var]]]:
        """The kills of one frame: binding index -> (kill op, variable) to run
        after it, in order (other names for an object cleared before it). What
        KillAfterLastUse inserts and the peak simulation replays."""
        v = self.values
        out: dict[int, list[tuple[str, E.Var]]] = {}
        for block in seq.blocks:
            for b in block.bindings:
                var = b.var
                if var in self._killed or v.owner(var) is not var:
                    continue
                op = kill_op_for(var, v.value_of.get(var))
                at = self.kill_point(var) if op is not None else None
                if op is None or at is None:
                    continue
                kills = out.setdefault(at, [])
                kills.extend(("vm.kill_object", a) for a in self.aliases(var) if v.frame_of.get(a) is seq)
                kills.append((op, var))
        return out

    def frame_positions(self, seq: E.SeqExpr) -> list[tuple[int, int]]:
        """Position range of each binding of ``seq`` (flattened over its blocks)."""
        return list(self._frames[id(seq)].ranges)


class _Walker:
    def __init__(self, values: FunctionValues) -> None:
        self.v = values
        self.out = Liveness(values)
        self.counter = 0
        self.branch: list[tuple[int, int]] = []
        self.num_ifs = 0
        # (var, loc) -> last position var reads loc
        self.read_end: dict[tuple[E.Var, Loc], int] = {}

    # -- reads --------------------------------------------------------------------------
    def _pts(self, var: E.Var) -> PointsTo:
        return self.v.points_to.get(var, EMPTY)

    def accesses(self, expr: E.Expr, out: list[tuple[E.Var, frozenset]]) -> None:
        """(variable, locations read through it) for every read in ``expr``."""
        if isinstance(expr, E.Var):
            out.append((expr, flatten(self._pts(expr))))
        elif isinstance(expr, E.TupleGetItem):
            path: list[int] = []
            base: E.Expr = expr
            while isinstance(base, E.TupleGetItem):
                path.append(base.index)
                base = base.tuple_value
            if isinstance(base, E.Var):
                pts = self._pts(base)
                for index in reversed(path):
                    if isinstance(pts, tuple) and -len(pts) <= index < len(pts):
                        pts = pts[index]
                    else:
                        pts = flatten(pts)
                        break
                out.append((base, flatten(pts)))
            else:
                self.accesses(base, out)
        elif isinstance(expr, E.Tuple):
            for f in expr.fields:
                self.accesses(f, out)
        elif isinstance(expr, E.Call):
            if isinstance(expr.op, E.Var):
                self.accesses(expr.op, out)
            for a in expr.args:
                self.accesses(a, out)
        elif isinstance(expr, E.Function):
            from .reads import reads

            params = set(expr.params)
            for r in reads(expr.body):
                if r not in params:
                    self.accesses(r, out)

    def record(self, pos: int, accesses: list[tuple[E.Var, frozenset]]) -> None:
        for var, locs in accesses:
            if self.out._last_read.get(var, -1) < pos:
                self.out._last_read[var] = pos
            for loc in locs:
                self.out._loc_read.add(loc)
                key = (var, loc)
                if self.read_end.get(key, -1) < pos:
                    self.read_end[key] = pos

    # -- walking ---------------------------------------------------------------------------
    def seq(self, seq: E.SeqExpr) -> list[tuple[E.Var, frozenset]]:
        """Numbers ``seq``; returns what it reads of variables bound outside it."""
        frame = _Frame(seq)
        self.out._frames[id(seq)] = frame
        defined: set[E.Var] = set()
        free: list[tuple[E.Var, frozenset]] = []
        for block in seq.blocks:
            for binding in block.bindings:
                value = binding.value  # type: ignore[attr-defined]
                acc: list[tuple[E.Var, frozenset]] = []
                if isinstance(value, E.If):
                    if_id = self.num_ifs
                    self.num_ifs += 1
                    lo = self.counter
                    self.branch.append((if_id, 0))
                    acc.extend(self.seq(value.true_branch))
                    self.branch[-1] = (if_id, 1)
                    acc.extend(self.seq(value.false_branch))
                    self.branch.pop()
                    self.accesses(value.cond, acc)
                    pos = self.counter
                    self.counter += 1
                    frame.ranges.append((lo, pos))
                else:
                    pos = self.counter
                    self.counter += 1
                    frame.ranges.append((pos, pos))
                    if _kills_a_tuple_register(value):
                        # the VM drops the register and touches no field's bytes
                        acc.append((value.args[0], EMPTY))
                    else:
                        self.accesses(value, acc)
                self.record(pos, acc)
                free.extend(a for a in acc if a[0] not in defined)
                if is_kill(value) and isinstance(value.args[0], E.Var):
                    self.out._killed.add(value.args[0])
                var = binding.var
                defined.add(var)
                self.out.def_pos[var] = pos
                loc = self.v.loc_of.get(var)
                if loc is not None:
                    self.out.path[loc] = tuple(self.branch)
        pos = self.counter
        self.counter += 1
        frame.body_pos = pos
        acc = []
        self.accesses(seq.body, acc)
        self.record(pos, acc)
        free.extend(a for a in acc if a[0] not in defined)
        return free

    def run(self) -> Liveness:
        func = self.v.func
        self.seq(func.body)
        spans: dict[Loc, list[Interval]] = {loc: [] for loc in self.v.locs}
        for var, pts in self.v.points_to.items():
            start = self.out.def_pos.get(var)
            if start is None:
                continue  # a parameter: PARAM locations have no intervals
            for loc in flatten(pts):
                if loc.kind is LocKind.ALLOC:
                    spans[loc].append((start, max(start, self.read_end.get((var, loc), start))))
        self.out.intervals = {loc: merge_intervals(iv) for loc, iv in spans.items()}
        self.out.num_positions = self.counter
        self.out._escaping_objects = _escaping_objects(self.v)
        for a in sorted(self.out._last_read, key=lambda a: self.out.def_pos.get(a, -1)):
            owner = self.v.owner(a)
            if owner is not a:
                self.out._aliases.setdefault(owner, []).append(a)
        return self.out


def _kills_a_tuple_register(value: E.Expr) -> bool:
    """A kill of a tuple-typed variable: it clears a register and releases no
    bytes (the VM's Kill releases NDArrays and storages only), so it reads the
    variable but none of its fields' locations; counting it as a read of them
    would keep a field alive past the point where the planner reused its bytes."""
    return (
        is_kill(value)
        and isinstance(value.args[0], E.Var)  # type: ignore[attr-defined]
        and isinstance(value.args[0].struct_info, S.TupleStructInfo)  # type: ignore[attr-defined]
    )


def _escaping_objects(v: FunctionValues) -> set[E.Var]:
    """Variables whose object the function's result is (or holds), syntactically:
    through literal tuples, names of one object and If results."""
    out: set[E.Var] = set()
    stack: list[E.Expr] = [v.func.body.body]
    while stack:
        e = stack.pop()
        if isinstance(e, E.Tuple):
            stack.extend(e.fields)
        elif isinstance(e, E.Var) and e not in out:
            out.add(e)
            stack.append(v.owner(e))
            value = v.value_of.get(e)
            if isinstance(value, E.Tuple):
                stack.extend(value.fields)
            elif isinstance(value, E.If):
                stack.extend((value.true_branch.body, value.false_branch.body))
            elif value is not None and not isinstance(value, E.Call):
                stack.append(value)
    return out


def analyze_liveness(
    func: E.Function, mod: IRModule | None = None, name: str | None = None, values: FunctionValues | None = None
) -> Liveness:
    """Liveness of ``func`` (its value facts computed unless given)."""
    if values is None:
        values = analyze_values(func, mod, name)
    return _Walker(values).run()


def kill_op_for(var: E.Var, value: E.Expr | None) -> str | None:
    """Which kill releases ``var``'s object: storage, tensor or register (None:
    shapes, prim values and functions are not killed)."""
    sinfo = var.struct_info
    if isinstance(sinfo, (S.ShapeStructInfo, S.PrimStructInfo, S.FuncStructInfo)):
        return None
    if value is not None and is_storage_alloc(value):
        return "memory.kill_storage"
    if isinstance(sinfo, S.TensorStructInfo):
        return "memory.kill_tensor"
    return "vm.kill_object"
