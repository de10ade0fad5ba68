"""Offset packing: place buffers with lifetimes in one arena, as small as we can.

Plain integers and intervals, no IR, and no import of any hetvm package: the
memory planner packs with it at build time
(``transform/static_plan_block_memory.py``), the analyses read its interval
sweep (``conflicts``), and the VM packs with it at call time, when it
re-packs a symbolic arena at a call's sizes (``runtime/plan_specialise.py``)
-- one algorithm, so the plan predicted before a call is the plan the call
uses. It sits at the top of the package, like ``errors.py``, because the
runtime imports no compiler package and the analyses none of the runtime.

This is the dynamic storage allocation problem (NP-hard), so we run several
greedy strategies and keep the smallest arena:

* order by size (largest first), by lifetime start, by duration, by
  size x duration, by conflict weight;
* for each order, place a buffer in the best-fitting gap between the buffers
  already placed that it conflicts with (time overlap), or in the first gap,
  or on top.

``max_live_bytes`` gives the lower bound every packing must meet (the most
bytes live at one position); a strategy that reaches it stops the search.
Offsets are multiples of ``alignment``; the arena is the highest end.
"""

from __future__ import annotations

import bisect
import heapq
import random
from dataclasses import dataclass
from typing import Callable, Sequence

__all__ = [
    "Buffer", "PackResult", "pack", "max_live_bytes", "conflict_lists", "align_up",
    "Interval", "BranchPath", "exclusive", "conflicts", "count_overlapping_pairs",
]  # fmt: skip

Interval = tuple[int, int]  # inclusive (first, last) positions
BranchPath = tuple[tuple[int, int], ...]  # ((if id, 0 true / 1 false), ...), outermost first

DEFAULT_ALIGNMENT = 64

def exclusive(a: BranchPath, b: BranchPath) -> bool:
    """True when locations with these branch paths can never exist in the same call."""
    for (ia, ba), (ib, bb) in zip(a, b):
        if ia != ib:
            return False
        if ba != bb:
            return True
    return False


def conflicts(items: Sequence[tuple[tuple[Interval, ...], BranchPath]]) -> list[list[int]]:
    """For each (intervals, branch path) item, the indices of the items live at a
    common position in the same call (a sweep over sorted intervals)."""
    spans: list[tuple[int, int, int]] = []
    for i, (intervals, _) in enumerate(items):
        for lo, hi in intervals:
            spans.append((lo, hi, i))
    spans.sort()
    pairs: list[set[int]] = [set() for _ in items]
    active: dict[int, int] = {}  # span id -> item index
    ends: list[tuple[int, int]] = []  # heap of (end, span id)
    for sid, (lo, hi, i) in enumerate(spans):
        while ends and ends[0][0] < lo:
            _, old = heapq.heappop(ends)
            active.pop(old, None)
        for j in active.values():
            if j != i and not exclusive(items[i][1], items[j][1]):
                pairs[i].add(j)
                pairs[j].add(i)
        active[sid] = i
        heapq.heappush(ends, (hi, sid))
    return [sorted(p) for p in pairs]


def align_up(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


@dataclass(frozen=True)
class Buffer:
    """One tensor to place: ``size`` bytes live over ``intervals`` (inclusive).

    ``path`` is the tensor's branch path: buffers in different branches of one
    If never conflict (see ``lifetimes.exclusive``).
    """

    key: int
    size: int
    intervals: tuple[Interval, ...]
    path: BranchPath = ()

    @property
    def start(self) -> int:
        return self.intervals[0][0] if self.intervals else 0

    @property
    def duration(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.intervals)


@dataclass(frozen=True)
class PackResult:
    """Offsets by buffer key, the arena size, and which strategy won."""

    offsets: dict[int, int]
    total: int
    strategy: str


def _branch_max(live: list[Buffer]) -> int:
    """Most bytes of ``live`` that can exist together (one branch per If)."""
    tree: dict = {"own": 0, "ifs": {}}
    for b in live:
        node = tree
        for if_id, branch in b.path:
            node = node["ifs"].setdefault(if_id, {}).setdefault(branch, {"own": 0, "ifs": {}})
        node["own"] += b.size

    def value(node: dict) -> int:
        return node["own"] + sum(
            max(value(child) for child in branches.values()) for branches in node["ifs"].values()
        )

    return value(tree)


def max_live_bytes(buffers: Sequence[Buffer]) -> int:
    """The most bytes live at any one position (a lower bound on any packing).

    Buffers of different branches of one If are never counted together.
    """
    events: dict[int, list[tuple[int, Buffer]]] = {}
    for b in buffers:
        for lo, hi in b.intervals:
            events.setdefault(lo, []).append((1, b))
            events.setdefault(hi + 1, []).append((-1, b))
    plain = best = 0
    branched: dict[int, Buffer] = {}
    for pos in sorted(events):
        for sign, b in events[pos]:
            if b.path:
                if sign > 0:
                    branched[id(b)] = b
                else:
                    branched.pop(id(b), None)
            else:
                plain += sign * b.size
        live = plain + (_branch_max(list(branched.values())) if branched else 0)
        best = max(best, live)
    return best


MAX_CONFLICT_PAIRS = 400_000  # above this, pack with the linear-time sweep only


def count_conflict_pairs(buffers: Sequence[Buffer], limit: int) -> int:
    """Pairs of intervals live together, counted up to ``limit`` (cheap bail-out)."""
    return count_overlapping_pairs([iv for b in buffers for iv in b.intervals], limit)


def count_overlapping_pairs(spans: Sequence[Interval], limit: int) -> int:
    """Pairs of closed spans that overlap, counted up to ``limit`` (a sweep with a
    heap of ends: stops as soon as the count passes ``limit``)."""
    items = sorted(spans)
    ends: list[int] = []
    pairs = 0
    for lo, hi in items:
        while ends and ends[0] < lo:
            heapq.heappop(ends)
        pairs += len(ends)
        if pairs > limit:
            return pairs
        heapq.heappush(ends, hi)
    return pairs


def sweep_pack(buffers: Sequence[Buffer], footprints: list[int]) -> tuple[list[int], int]:
    """Best-fit in order of lifetime start, freeing bytes when a lifetime ends.

    O(n log n + n * gaps): for programs with very many simultaneously live
    tensors, where pairwise conflicts would be too many to list. A buffer
    occupies the hull of its intervals, and branch exclusivity is ignored
    (both only make the plan safer, not smaller).
    """
    order = sorted(range(len(buffers)), key=lambda i: (buffers[i].start, -buffers[i].size, i))
    offsets = [0] * len(buffers)
    gaps: list[list[int]] = []  # free [start, end) below the top, sorted
    top = total = 0
    ending: list[tuple[int, int]] = []  # heap of (last position, buffer)

    def free(i: int) -> None:
        nonlocal top
        lo, hi = offsets[i], offsets[i] + footprints[i]
        if hi <= lo:
            return
        k = bisect.bisect_left(gaps, [lo, hi])
        if k > 0 and gaps[k - 1][1] == lo:
            k -= 1
            gaps[k][1] = hi
        else:
            gaps.insert(k, [lo, hi])
        if k + 1 < len(gaps) and gaps[k + 1][0] == gaps[k][1]:
            gaps[k][1] = gaps.pop(k + 1)[1]
        if gaps[-1][1] >= top:
            top = gaps.pop()[0]

    for i in order:
        b = buffers[i]
        while ending and ending[0][0] < b.start:
            free(heapq.heappop(ending)[1])
        fp = footprints[i]
        best = -1
        for k, (lo, hi) in enumerate(gaps):
            if hi - lo >= fp and (best < 0 or hi - lo < gaps[best][1] - gaps[best][0]):
                best = k
        if fp == 0:
            offsets[i] = 0
        elif best >= 0:
            lo, hi = gaps[best]
            offsets[i] = lo
            if hi - lo == fp:
                gaps.pop(best)
            else:
                gaps[best][0] = lo + fp
        else:
            offsets[i] = top
            top += fp
        total = max(total, offsets[i] + b.size)
        heapq.heappush(ending, (b.intervals[-1][1] if b.intervals else b.start, i))
    return offsets, total


def conflict_lists(buffers: Sequence[Buffer]) -> list[list[int]]:
    """For each buffer (by index), the indices of buffers live at a common position."""
    return conflicts([(b.intervals, b.path) for b in buffers])


def _place(
    fp: int, neighbours: list[tuple[int, int]], best_fit: bool
) -> int:
    """Offset for a footprint ``fp`` among occupied (offset, end) ranges."""
    neighbours.sort()
    cursor = 0
    best_off = -1
    best_gap = -1
    for off, end in neighbours:
        if end <= off:  # empty buffer occupies nothing
            continue
        if off - cursor >= fp:
            gap = off - cursor
            if not best_fit:
                return cursor
            if best_off < 0 or gap < best_gap:
                best_off, best_gap = cursor, gap
        cursor = max(cursor, end)
    return best_off if best_off >= 0 else cursor


def _greedy(
    buffers: Sequence[Buffer],
    conflicts: list[list[int]],
    order: list[int],
    footprints: list[int],
    best_fit: bool,
    stop_above: int | None = None,
) -> tuple[list[int], int] | None:
    offsets = [-1] * len(buffers)
    total = 0
    for i in order:
        occupied = [
            (offsets[j], offsets[j] + footprints[j]) for j in conflicts[i] if offsets[j] >= 0
        ]
        off = _place(footprints[i], occupied, best_fit)
        offsets[i] = off
        end = off + buffers[i].size
        if end > total:
            total = end
            if stop_above is not None and total >= stop_above:
                return None
    return offsets, total


def _squeaky_wheel(
    buffers: Sequence[Buffer],
    conflicts: list[list[int]],
    footprints: list[int],
    lower: int,
    to_beat: int,
    iterations: int,
    seed: int,
) -> tuple[list[int], int] | None:
    """Re-runs the greedy with priorities raised for buffers that ended up above
    the lower bound (the further above, the more), so they are placed earlier
    next time. Seeded, so the result is deterministic."""
    rng = random.Random(seed)
    prio = [float(b.size) for b in buffers]
    idx = range(len(buffers))
    found: tuple[list[int], int] | None = None
    for _ in range(iterations):
        order = sorted(idx, key=lambda i: (-prio[i], buffers[i].start, i))
        last: tuple[list[int], int] | None = None
        for best_fit in (True, False):
            got = _greedy(buffers, conflicts, order, footprints, best_fit)
            assert got is not None
            if last is None or got[1] < last[1]:
                last = got
            if got[1] < to_beat:
                found, to_beat = got, got[1]
        if to_beat <= lower:
            break
        assert last is not None
        offsets, total = last
        for i in idx:
            end = offsets[i] + buffers[i].size
            if end > lower:
                prio[i] += buffers[i].size * (0.5 + rng.random()) * (end - lower) / max(1, total - lower)
    return found


def _orders(buffers: Sequence[Buffer], conflicts: list[list[int]]) -> list[tuple[str, list[int]]]:
    idx = range(len(buffers))
    weight = [sum(buffers[j].size for j in conflicts[i]) + buffers[i].size for i in idx]
    keys: list[tuple[str, Callable[[int], tuple]]] = [
        ("size", lambda i: (-buffers[i].size, buffers[i].start, i)),
        ("start", lambda i: (buffers[i].start, -buffers[i].size, i)),
        ("duration", lambda i: (-buffers[i].duration, -buffers[i].size, i)),
        ("area", lambda i: (-buffers[i].size * buffers[i].duration, buffers[i].start, i)),
        ("conflict", lambda i: (-weight[i], -buffers[i].size, i)),
    ]
    return [(name, sorted(idx, key=key)) for name, key in keys]


def pack(
    buffers: Sequence[Buffer],
    alignment: int = DEFAULT_ALIGNMENT,
    *,
    search_iterations: int | None = None,
    seed: int = 0,
) -> PackResult:
    """Places every buffer; returns the smallest arena the strategies found.

    ``search_iterations`` bounds a seeded squeaky-wheel search run after the
    greedy strategies when they miss the lower bound; by default it scales
    down with the number of buffers so large programs stay fast.
    """
    if not buffers:
        return PackResult({}, 0, "empty")
    footprints = [align_up(b.size, alignment) for b in buffers]
    lower = max_live_bytes(buffers)
    if count_conflict_pairs(buffers, MAX_CONFLICT_PAIRS) > MAX_CONFLICT_PAIRS:
        offsets, total = sweep_pack(buffers, footprints)
        return PackResult({b.key: offsets[i] for i, b in enumerate(buffers)}, total, "sweep")
    conflicts = conflict_lists(buffers)
    best: tuple[list[int], int] | None = None
    best_name = ""
    strategies = _orders(buffers, conflicts)
    if len(buffers) > 4000:  # large programs: the two strongest orders only
        strategies = strategies[:2]
    sweep_offsets, sweep_total = sweep_pack(buffers, footprints)
    for name, order in strategies:
        for best_fit in (True, False):
            got = _greedy(buffers, conflicts, order, footprints, best_fit, None if best is None else best[1])
            if got is not None and (best is None or got[1] < best[1]):
                best, best_name = got, f"{name}/{'best-fit' if best_fit else 'first-fit'}"
            if best is not None and best[1] <= lower:
                break
        if best is not None and best[1] <= lower:
            break
    assert best is not None
    if sweep_total < best[1]:
        best, best_name = (sweep_offsets, sweep_total), "sweep"
    iterations = search_iterations
    if iterations is None:
        iterations = max(0, min(300, 60_000 // max(1, len(buffers))))
    if best[1] > lower and iterations:
        got = _squeaky_wheel(buffers, conflicts, footprints, lower, best[1], iterations, seed)
        if got is not None:
            best, best_name = got, "squeaky-wheel"
    offsets, total = best
    return PackResult({b.key: offsets[i] for i, b in enumerate(buffers)}, total, best_name)
