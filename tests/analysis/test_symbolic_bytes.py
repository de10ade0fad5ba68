"""``is_nonnegative`` (hetvm/analysis/symbolic_bytes.py): what the memory
planner needs proven before a symbolic size goes into the arena; checked
against the expression's values wherever it is defined."""

from __future__ import annotations

import itertools

import pytest

from hetvm.analysis.symbolic_bytes import is_nonnegative
from hetvm.ir import prim as P

B, S = P.PrimVar("batch"), P.PrimVar("seq")
HEADS = P.floordiv(P.mul(P.mul(B, S), 2), P.mul(B, 2))  # a legacy export's head count


def _values(e):
    """The values of ``e`` at small dims, skipping those where it is undefined."""
    out = []
    for b, s in itertools.product(range(5), range(5)):
        try:
            out.append(P.evaluate(e, {B: b, S: s}))
        except Exception:  # noqa: BLE001 - a division by zero: undefined there
            continue
    return out


PROVEN = [
    HEADS,
    P.mul(P.mul(128, B), HEADS),
    P.mul(P.mul(8, B), P.max_(S, HEADS)),
    P.mul(P.mul(B, S), P.min_(1, P.min_(S, HEADS))),
    P.floormod(S, P.add(B, 1)),
    P.max_(P.sub(S, 3), B),
]
NOT_PROVEN = [
    P.sub(S, 1),
    P.floordiv(S, P.sub(B, 2)),  # a divisor that may be negative
    P.min_(1, P.sub(S, 2)),
    P.floordiv(P.sub(S, 3), P.add(B, 1)),  # a numerator that may be negative
]


@pytest.mark.parametrize("e", PROVEN, ids=str)
def test_sizes_of_non_negative_parts_are_proven_non_negative(e):
    assert is_nonnegative(e)
    assert all(v >= 0 for v in _values(e))


@pytest.mark.parametrize("e", NOT_PROVEN, ids=str)
def test_a_part_that_may_be_negative_is_not_proven(e):
    assert not is_nonnegative(e)
    assert any(v < 0 for v in _values(e))  # and indeed is negative somewhere
