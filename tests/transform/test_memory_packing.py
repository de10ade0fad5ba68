"""Packing algorithms and the lower bound, on hand-made and random buffers."""

from __future__ import annotations

import random

from hetvm.arena_packing import (
    Buffer,
    PackResult,
    align_up,
    conflict_lists,
    max_live_bytes,
    pack,
    sweep_pack,
)
from hetvm.transform.memory_planning.lifetimes import exclusive, intervals_overlap, merge_intervals


def assert_valid(buffers, result, alignment=64):
    offsets = result.offsets
    for b in buffers:
        assert offsets[b.key] % alignment == 0
        assert offsets[b.key] + b.size <= result.total
    for i, a in enumerate(buffers):
        for b in buffers[i + 1 :]:
            if not a.size or not b.size or exclusive(a.path, b.path):
                continue
            if intervals_overlap(a.intervals, b.intervals):
                oa, ob = offsets[a.key], offsets[b.key]
                assert oa + a.size <= ob or ob + b.size <= oa, (a, b, oa, ob)


def test_merge_intervals_joins_adjacent_only():
    assert merge_intervals([(5, 6), (0, 2), (3, 3), (9, 9)]) == ((0, 3), (5, 6), (9, 9))


def test_lower_bound_and_exact_packing():
    bufs = [Buffer(0, 640, ((0, 3),)), Buffer(1, 128, ((2, 5),)), Buffer(2, 640, ((4, 7),))]
    assert max_live_bytes(bufs) == 768
    result = pack(bufs)
    assert result.offsets == {0: 0, 1: 640, 2: 0}
    assert result.total == 768
    assert_valid(bufs, result)


def test_alignment_pads_offsets_not_the_top():
    bufs = [Buffer(0, 10, ((0, 1),)), Buffer(1, 10, ((0, 1),))]
    result = pack(bufs)
    assert sorted(result.offsets.values()) == [0, 64]
    assert result.total == 74
    assert pack(bufs, alignment=8).total == 26


def test_branch_exclusive_buffers_share():
    # both live at the same positions, but in different branches of If 0
    a = Buffer(0, 256, ((0, 9),), ((0, 0),))
    b = Buffer(1, 256, ((0, 9),), ((0, 1),))
    c = Buffer(2, 64, ((0, 9),), ())
    assert conflict_lists([a, b, c]) == [[2], [2], [0, 1]]
    assert max_live_bytes([a, b, c]) == 320
    result = pack([a, b, c])
    assert result.offsets[0] == result.offsets[1]
    assert result.total == 320


def test_nested_branches_lower_bound():
    # If 0 true branch holds If 1; the false branch of If 0 holds one big buffer
    bufs = [
        Buffer(0, 100, ((0, 5),), ((0, 0), (1, 0))),
        Buffer(1, 300, ((0, 5),), ((0, 0), (1, 1))),
        Buffer(2, 50, ((0, 5),), ((0, 0),)),
        Buffer(3, 320, ((0, 5),), ((0, 1),)),
    ]
    assert max_live_bytes(bufs) == 350  # max(50 + max(100, 300), 320)


def test_empty_and_zero_size():
    assert pack([]).total == 0
    bufs = [Buffer(0, 0, ((0, 3),)), Buffer(1, 128, ((0, 3),))]
    result = pack(bufs)
    assert result.total == 128
    assert_valid(bufs, result)


def _random_buffers(rng: random.Random, n: int, with_paths: bool) -> list[Buffer]:
    out = []
    for i in range(n):
        start = rng.randrange(0, 3 * n)
        intervals = [(start, start + rng.randrange(0, 12))]
        if rng.random() < 0.2:  # a second live range after a gap (an If result)
            lo = intervals[0][1] + 2 + rng.randrange(0, 5)
            intervals.append((lo, lo + rng.randrange(0, 6)))
        path = ()
        if with_paths and rng.random() < 0.4:
            path = ((rng.randrange(0, 3), rng.randrange(0, 2)),)
        size = rng.choice([0, 4, 100, 1000, 4096, 65536]) * rng.randrange(1, 5)
        out.append(Buffer(i, size, tuple(intervals), path))
    return out


def test_random_buffers_are_valid_and_never_below_the_bound():
    rng = random.Random(1234)
    for trial in range(40):
        bufs = _random_buffers(rng, rng.randrange(1, 60), with_paths=trial % 2 == 1)
        result = pack(bufs)
        assert_valid(bufs, result)
        assert result.total >= max_live_bytes(bufs)


def test_sweep_pack_is_valid_on_random_buffers():
    rng = random.Random(99)
    for _ in range(30):
        bufs = _random_buffers(rng, rng.randrange(1, 80), with_paths=False)
        footprints = [align_up(b.size, 64) for b in bufs]
        offsets, total = sweep_pack(bufs, footprints)
        assert_valid(bufs, PackResult({b.key: offsets[i] for i, b in enumerate(bufs)}, total, "sweep"))


def test_equal_sizes_many_live_uses_the_sweep_and_meets_the_bound():
    # 1,200 buffers of one size with long, staggered lifetimes: too many pairs to list
    bufs = [Buffer(i, 128, ((i, i + 600),)) for i in range(1200)]
    result = pack(bufs)
    assert result.strategy == "sweep"
    assert result.total == max_live_bytes(bufs) == 601 * 128
