"""Packing tensors whose sizes are expressions in shape variables.

The plan must hold for every value of the variables, so offsets are
expressions too. How (and why it is sound):

1. **Pick an order.** At a few reference points (every variable 1, 4, ..., 256)
   the sizes are numbers; the constant packer (:func:`hetvm.arena_packing.pack`) places
   them. Sorting the tensors by their offset there gives a total order.
2. **Compact symbolically.** In that order, a tensor's offset is the maximum,
   over the tensors *before it in the order that are live at the same time*,
   of their offset plus their aligned size (0 when there is none)::

       off(t) = max(0, max{ off(u) + align(size(u)) : u before t, u conflicts with t })

   For any two tensors live at once, the later one starts at or above the
   earlier one's end, for every value of the variables: that is the whole
   non-overlap proof, and it does not depend on the reference packing being
   any good (the order only decides how small the arena is). Every offset is
   a maximum of sums of aligned sizes, so a multiple of the alignment.
   At the reference point itself each offset is at most the constant
   packer's (by induction on the order), so the arena is never larger there.
3. **Keep the best.** Each reference order gives a plan; the one whose arena
   is smallest relative to the lower bound (the sum of log ratios over the
   sizes 1, 2, 4, ..., 512) is kept.

The arena is the maximum of every tensor's end (a :class:`ByteMax`): the VM
evaluates it once per call from the shape values. A tensor ``c x F`` whose
coefficient is a multiple of the alignment (a CNN's ``802,816 x batch``) keeps
its exact size; otherwise the rounding up is spelled out (``(n + 63) // 64 x 64``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from ...analysis.liveness import BranchPath, Interval, conflicts
from ...analysis.symbolic_bytes import ByteMax, align_bytes
from ...arena_packing import Buffer, count_overlapping_pairs, max_live_bytes, pack
from ...ir import prim as P

__all__ = ["SymbolicBuffer", "SymbolicPackResult", "pack_symbolic", "max_live_symbolic", "REFERENCE_VALUES"]

REFERENCE_VALUES = (1, 4, 16, 64, 256)
JUDGE_VALUES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
MAX_SYMBOLIC_CONFLICTS = 200_000  # above this, tensors are stacked without reuse


@dataclass(frozen=True)
class SymbolicBuffer:
    """``size`` bytes (an expression) live over ``intervals`` on branch ``path``."""

    key: int
    size: P.PrimExpr
    intervals: tuple[Interval, ...]
    path: BranchPath = ()


@dataclass
class SymbolicPackResult:
    offsets: dict[int, P.PrimExpr]
    total: ByteMax
    strategy: str


def _env(var_list: Sequence[P.PrimVar], value: int, upper: Mapping[str, int]) -> dict[P.PrimVar, int]:
    return {v: min(value, upper[v.name]) if v.name in upper else value for v in var_list}


def _free_vars(exprs: Sequence[P.PrimExpr]) -> list[P.PrimVar]:
    seen: dict[int, P.PrimVar] = {}
    for e in exprs:
        for v in P.free_vars(e):
            seen.setdefault(id(v), v)
    return list(seen.values())


def pack_symbolic(
    buffers: Sequence[SymbolicBuffer], alignment: int, upper: Mapping[str, int] | None = None
) -> SymbolicPackResult:
    """Offsets valid for every value of the variables (``upper``: declared
    upper bounds by name, used only to choose the reference points)."""
    if not buffers:
        return SymbolicPackResult({}, ByteMax(), "empty")
    upper = upper or {}
    sizes = [P.simplify(b.size) for b in buffers]
    footprints = [align_bytes(s, alignment) for s in sizes]
    var_list = _free_vars(sizes)
    items = [(b.intervals, b.path) for b in buffers]
    pairs = _count_pairs(items)
    if pairs > MAX_SYMBOLIC_CONFLICTS:
        return _stacked(buffers, sizes, footprints)
    neighbours = conflicts(items)
    # judged at more points than it is built from: an order good at one size
    # only (a transformer's seq x seq against seq x hidden) scores badly
    judge = [_env(var_list, v, upper) for v in JUDGE_VALUES]
    lowers = [_lower_at(buffers, footprints, env) for env in judge]
    best: tuple[float, SymbolicPackResult] | None = None
    tried: set[tuple[int, ...]] = set()
    for value in REFERENCE_VALUES:
        fps = [P.evaluate(fp, _env(var_list, value, upper)) for fp in footprints]
        placed = pack([Buffer(i, fps[i], b.intervals, b.path) for i, b in enumerate(buffers)], alignment)
        order = tuple(sorted(range(len(buffers)), key=lambda i: (placed.offsets[i], fps[i], i)))
        if order in tried:
            continue
        tried.add(order)
        result = _compact(buffers, sizes, footprints, neighbours, order, f"order at {value}/{placed.strategy}")
        score = sum(
            math.log(max(1, result.total.evaluate({v.name: x for v, x in env.items()})) / lo)
            for env, lo in zip(judge, lowers)
        )
        if best is None or score < best[0]:
            best = (score, result)
    assert best is not None
    return best[1]


def _lower_at(buffers: Sequence[SymbolicBuffer], footprints: Sequence[P.PrimExpr], env: dict) -> int:
    fps = [P.evaluate(fp, env) for fp in footprints]
    return max(1, max_live_bytes([Buffer(i, fps[i], b.intervals, b.path) for i, b in enumerate(buffers)]))


def _count_pairs(items: Sequence[tuple[tuple[Interval, ...], BranchPath]]) -> int:
    """Pairs of buffers whose whole spans (first start to last end) overlap."""
    return count_overlapping_pairs([(iv[0][0], iv[-1][1]) for iv, _ in items if iv], MAX_SYMBOLIC_CONFLICTS)


def _compact(
    buffers: Sequence[SymbolicBuffer],
    sizes: Sequence[P.PrimExpr],
    footprints: Sequence[P.PrimExpr],
    neighbours: Sequence[Sequence[int]],
    order: Sequence[int],
    strategy: str,
) -> SymbolicPackResult:
    rank = {i: r for r, i in enumerate(order)}
    offsets: dict[int, ByteMax] = {}
    total = ByteMax()
    for i in order:
        ends: dict[P.PrimExpr, None] = {P.IntImm(0): None}
        for j in neighbours[i]:
            if rank[j] < rank[i]:
                for term in offsets[j].terms:
                    ends.setdefault(P.add(term, footprints[j]), None)
        off = ByteMax(ends)
        offsets[i] = off
        total = total.include(off.plus(sizes[i]))
    return SymbolicPackResult(
        {buffers[i].key: offsets[i].to_prim() for i in order}, total, strategy
    )


def _stacked(
    buffers: Sequence[SymbolicBuffer], sizes: Sequence[P.PrimExpr], footprints: Sequence[P.PrimExpr]
) -> SymbolicPackResult:
    """Every tensor above the previous one (no reuse): for programs with too
    many simultaneously live tensors to compare pairwise."""
    offsets: dict[int, P.PrimExpr] = {}
    cursor: P.PrimExpr = P.IntImm(0)
    for b, size, fp in zip(buffers, sizes, footprints):
        offsets[b.key] = cursor
        end = P.add(cursor, size)
        cursor = P.add(cursor, fp)
    return SymbolicPackResult(offsets, ByteMax([end]), "stacked")


def max_live_symbolic(buffers: Sequence[SymbolicBuffer]) -> ByteMax:
    """The most bytes live at one position, as a maximum over positions
    (buffers of different branches of one If never counted together): the
    lower bound any packing meets, for every value of the variables."""
    events: dict[int, list[tuple[int, int]]] = {}
    for k, b in enumerate(buffers):
        for lo, hi in b.intervals:
            events.setdefault(lo, []).append((1, k))
            events.setdefault(hi + 1, []).append((-1, k))
    plain: P.PrimExpr = P.IntImm(0)
    branched: dict[int, SymbolicBuffer] = {}
    best = ByteMax(cap=None)
    for pos in sorted(events):
        grew = False
        for sign, k in events[pos]:
            b = buffers[k]
            if b.path:
                if sign > 0:
                    branched[k] = b
                else:
                    branched.pop(k, None)
            else:
                plain = P.add(plain, b.size) if sign > 0 else P.sub(plain, b.size)
            grew |= sign > 0
        if grew:
            best = best.include(_branch_max(list(branched.values())).plus(plain) if branched else plain)
    return best


def _branch_max(live: Sequence[SymbolicBuffer]) -> ByteMax:
    tree: dict = {"own": P.IntImm(0), "ifs": {}}
    for b in live:
        node = tree
        for if_id, branch in b.path:
            node = node["ifs"].setdefault(if_id, {}).setdefault(branch, {"own": P.IntImm(0), "ifs": {}})
        node["own"] = P.add(node["own"], b.size)

    def value(node: dict) -> ByteMax:
        out = ByteMax([node["own"]], cap=None)
        for branches in node["ifs"].values():
            worst = ByteMax(cap=None)
            for child in branches.values():
                worst = worst.include(value(child))
            out = out.plus(worst)
        return out

    return value(tree)
