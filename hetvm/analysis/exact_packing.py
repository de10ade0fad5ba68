"""An exact packing of buffers with fixed lifetimes: the certificate for the planner.

The planner's packing (``hetvm/arena_packing.py``) is a set of
greedy strategies; this module answers how far from optimal they are for the
order the program was given. It searches the offsets exactly, by branch and
bound, within a time limit, with no dependency beyond the standard library.

Why the search is complete: in any packing, slide every buffer down (in order
of offset) until it rests on address 0 or on the top of a buffer it conflicts
with (is live together with). The arena does not grow, and every offset is now
0 or the (aligned) end of a conflicting buffer with a smaller offset. So it is
enough to place buffers *in order of offset*, each at 0 or at the end of an
already placed conflicting buffer, never below the previous buffer's offset
(buffers at one offset in index order, which removes the symmetric orders).

Bounds: with the last offset ``cur``, every unplaced buffer lies at ``cur`` or
above, and two buffers live at one position never share bytes, so at each
position ``t`` the arena needs at least ``cur`` + the sizes of the unplaced
buffers live at ``t`` + what placed buffers live at ``t`` hold above ``cur``.
The root's bound is the most bytes live at one position (the planner's lower
bound); when the starting packing (the planner's, given as ``upper``) meets it,
the answer is proven at once. With branches (buffers of the two sides of an
``If`` never conflict) only the plain bound (largest end so far, ``cur`` + the
largest unplaced buffer, the root bound) is used.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

from .liveness import BranchPath, Interval, conflicts

__all__ = ["ExactResult", "exact_pack", "brute_force_pack"]


@dataclass(frozen=True)
class ExactResult:
    """The best arena found, its offsets (by buffer index), whether it is proven
    optimal (the search finished, or met the lower bound), the lower bound, and
    how many search nodes were visited."""

    total: int
    offsets: tuple[int, ...]
    optimal: bool
    lower_bound: int
    nodes: int


def _align(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def _live_max(sizes: Sequence[int], intervals: Sequence[tuple[Interval, ...]]) -> int:
    events: dict[int, int] = {}
    for size, ivs in zip(sizes, intervals):
        for lo, hi in ivs:
            events[lo] = events.get(lo, 0) + size
            events[hi + 1] = events.get(hi + 1, 0) - size
    best = cur = 0
    for pos in sorted(events):
        cur += events[pos]
        best = max(best, cur)
    return best


def exact_pack(
    sizes: Sequence[int],
    intervals: Sequence[tuple[Interval, ...]],
    paths: Sequence[BranchPath] | None = None,
    *,
    alignment: int = 64,
    upper: tuple[int, Sequence[int]] | None = None,
    time_limit: float = 10.0,
    max_nodes: int | None = None,
) -> ExactResult:
    """The smallest arena for buffers of ``sizes`` live over ``intervals``
    (inclusive positions), offsets multiples of ``alignment``, a buffer
    occupying its size rounded up to the alignment (the planner's rule); the
    arena is the largest ``offset + size``. ``upper``: a known packing
    (total, offsets) to start from; ``time_limit`` seconds and ``max_nodes``
    bound the search (the result then says it is not proven optimal)."""
    n = len(sizes)
    if alignment <= 0:
        raise ValueError(f"alignment must be positive, got {alignment}")
    if len(intervals) != n or (paths is not None and len(paths) != n):
        raise ValueError("sizes, intervals and paths must have one entry per buffer")
    if n == 0:
        return ExactResult(0, (), True, 0, 0)
    paths = list(paths) if paths is not None else [()] * n
    branched = any(paths)
    foot = [_align(s, alignment) for s in sizes]
    neighbours = conflicts(list(zip(intervals, paths)))
    positions = sorted({p for ivs in intervals for lo, hi in ivs for p in (lo, hi)})
    live_at = [[i for i in range(n) if any(lo <= p <= hi for lo, hi in intervals[i])] for p in positions]
    root_bound = max(sizes) if branched else _live_max(sizes, intervals)
    if branched:
        root_bound = max(root_bound, max(sizes))
    if upper is not None:
        best_total, best_offsets = int(upper[0]), tuple(int(o) for o in upper[1])
    else:
        best_total, best_offsets = _stack(sizes, foot, neighbours)
    if best_total <= root_bound:
        return ExactResult(best_total, best_offsets, True, root_bound, 0)

    offsets = [-1] * n
    deadline = time.perf_counter() + time_limit
    nodes = 0
    stopped = False
    # buffers tried largest first at each offset (good packings come early)
    by_size = sorted(range(n), key=lambda i: (-sizes[i], i))

    def bound(cur: int, top: int) -> int:
        b = max(top, root_bound)
        if branched:
            rest = [sizes[i] for i in range(n) if offsets[i] < 0]
            return max(b, cur + max(rest)) if rest else b
        for live in live_at:
            need = cur
            for i in live:
                off = offsets[i]
                if off < 0:
                    need += sizes[i]
                elif off + sizes[i] > cur:
                    need += off + sizes[i] - max(off, cur)
            if need > b:
                b = need
        return b

    def fits(i: int, off: int) -> bool:
        end = off + foot[i]
        for j in neighbours[i]:
            o = offsets[j]
            if o >= 0 and o < end and off < o + foot[j]:
                return False
        return True

    def search(placed: int, cur: int, last: int, top: int) -> None:
        nonlocal best_total, best_offsets, nodes, stopped
        if stopped:
            return
        nodes += 1
        if (nodes & 255) == 0 and time.perf_counter() > deadline or (max_nodes is not None and nodes > max_nodes):
            stopped = True
            return
        if placed == n:
            if top < best_total:
                best_total, best_offsets = top, tuple(offsets)
            return
        if bound(cur, top) >= best_total:
            return
        options: list[tuple[int, int]] = []
        for i in by_size:
            if offsets[i] >= 0:
                continue
            cands = {0}
            for j in neighbours[i]:
                if offsets[j] >= 0:
                    cands.add(offsets[j] + foot[j])
            for off in cands:
                if off < cur or (off == cur and i < last):
                    continue
                if off + sizes[i] >= best_total or not fits(i, off):
                    continue
                options.append((off, i))
        options.sort(key=lambda t: (t[0], -sizes[t[1]], t[1]))
        for off, i in options:
            offsets[i] = off
            search(placed + 1, off, i, max(top, off + sizes[i]))
            offsets[i] = -1
            if stopped or best_total <= root_bound:
                return

    search(0, 0, -1, 0)
    return ExactResult(best_total, best_offsets, not stopped or best_total <= root_bound, root_bound, nodes)


def _stack(sizes: Sequence[int], foot: Sequence[int], neighbours: list[list[int]]) -> tuple[int, tuple[int, ...]]:
    """A first packing when none is given: first fit, largest first."""
    offsets = [-1] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda k: (-sizes[k], k)):
        taken = sorted((offsets[j], offsets[j] + foot[j]) for j in neighbours[i] if offsets[j] >= 0)
        off = 0
        for lo, hi in taken:
            if off + foot[i] <= lo:
                break
            off = max(off, hi)
        offsets[i] = off
    return max(o + s for o, s in zip(offsets, sizes)), tuple(offsets)


def brute_force_pack(
    sizes: Sequence[int],
    intervals: Sequence[tuple[Interval, ...]],
    paths: Sequence[BranchPath] | None = None,
    alignment: int = 1,
) -> int:
    """The smallest arena by trying every aligned offset of every buffer (tiny
    cases only: the reference the tests hold :func:`exact_pack` to)."""
    n = len(sizes)
    paths = list(paths) if paths is not None else [()] * n
    foot = [_align(s, alignment) for s in sizes]
    neighbours = conflicts(list(zip(intervals, paths)))
    limit = sum(foot)
    offsets = [0] * n
    best = limit + 1

    def go(i: int, top: int) -> None:
        nonlocal best
        if top >= best:
            return
        if i == n:
            best = top
            return
        for off in range(0, limit, alignment):
            if all(not (offsets[j] < off + foot[i] and off < offsets[j] + foot[j]) for j in neighbours[i] if j < i):
                offsets[i] = off
                go(i + 1, max(top, off + sizes[i]))

    go(0, 0)
    return best
