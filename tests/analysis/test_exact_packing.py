"""The exact packing solver against brute force, and as the planner's certificate."""

import random

import pytest

from hetvm.analysis.exact_packing import brute_force_pack, exact_pack


def random_case(rng, n, positions=6, max_size=3):
    sizes, intervals = [], []
    for _ in range(n):
        lo = rng.randrange(positions)
        hi = rng.randrange(lo, positions)
        sizes.append(rng.randint(1, max_size))
        intervals.append(((lo, hi),))
    return sizes, intervals


def valid(sizes, intervals, offsets, alignment, total):
    for i in range(len(sizes)):
        assert offsets[i] % alignment == 0
        assert offsets[i] + sizes[i] <= total
        for j in range(i):
            live_together = any(a <= d and c <= b for a, b in intervals[i] for c, d in intervals[j])
            fi, fj = -(-sizes[i] // alignment) * alignment, -(-sizes[j] // alignment) * alignment
            if live_together:
                assert offsets[i] + fi <= offsets[j] or offsets[j] + fj <= offsets[i]


@pytest.mark.parametrize("seed", range(40))
def test_matches_brute_force_on_small_cases(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 5)
    sizes, intervals = random_case(rng, n)
    alignment = rng.choice([1, 2])
    got = exact_pack(sizes, intervals, alignment=alignment, time_limit=30)
    assert got.optimal
    assert got.total == brute_force_pack(sizes, intervals, alignment=alignment)
    valid(sizes, intervals, got.offsets, alignment, got.total)


def test_a_buffer_live_throughout_beside_a_chain():
    sizes = [2, 1, 2, 1]
    intervals = [((0, 1),), ((1, 2),), ((2, 3),), ((0, 3),)]
    got = exact_pack(sizes, intervals, alignment=1, time_limit=30)
    assert got.total == brute_force_pack(sizes, intervals) and got.optimal
    assert got.lower_bound <= got.total


def test_branches_never_conflict():
    # the two buffers live at one position, but in the two branches of one If
    sizes = [3, 3]
    intervals = [((0, 2),), ((0, 2),)]
    got = exact_pack(sizes, intervals, [((0, 0),), ((0, 1),)], alignment=1)
    assert got.total == 3 and got.optimal


def test_a_good_start_is_proven_at_once_and_a_time_limit_is_honoured():
    sizes = [64, 64]
    intervals = [((0, 0),), ((1, 1),)]
    got = exact_pack(sizes, intervals, upper=(64, [0, 0]))
    assert (got.total, got.optimal, got.nodes) == (64, True, 0)
    rng = random.Random(7)
    sizes, intervals = random_case(rng, 60, positions=30, max_size=9)
    limited = exact_pack(sizes, intervals, alignment=1, max_nodes=50)
    valid(sizes, intervals, limited.offsets, 1, limited.total)
    assert limited.lower_bound <= limited.total


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="one entry per buffer"):
        exact_pack([1, 2], [((0, 0),)])
    with pytest.raises(ValueError, match="alignment"):
        exact_pack([1], [((0, 0),)], alignment=0)
