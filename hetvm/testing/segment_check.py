"""Runs kernel calls through a compiled segment and through their NumPy kernels,
for the tests of the segment emitters (``hetvm/kernels/segment_emit``).

Why: an emitter's body must compute what the op's NumPy kernel computes; the
tests state a call (op, attributes, arguments) and this runs it both ways on
copies of the same arrays.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..kernels.registry import bind_kernel
from ..runtime.segments import Segment, SegmentCall, slot_value

__all__ = ["Call", "segment_of", "run_both", "compiled_calls", "assert_segment_matches"]

#: one kernel call: (op, attrs, arguments); an argument is a NumPy array, a list of
#: arrays, or an immediate (anything else); arrays are matched by identity, so the
#: same array object passed to two calls is one buffer (an output read later)
Call = tuple[str, dict, Sequence[Any]]


def segment_of(calls: Sequence[Call]) -> tuple[Segment, list[np.ndarray]]:
    """The segment of ``calls`` and its arguments (the distinct arrays, in order)."""
    arrays: list[np.ndarray] = []
    ids: dict[int, int] = {}

    def slot_of(a: np.ndarray) -> int:
        if id(a) not in ids:
            ids[id(a)] = len(arrays)
            arrays.append(a)
        return ids[id(a)]

    seg_calls = []
    for pc, (op, attrs, args) in enumerate(calls):
        slots = []
        for a in args:
            if isinstance(a, np.ndarray):
                slots.append(("a", slot_of(a)))
            elif isinstance(a, list) and a and all(isinstance(x, np.ndarray) for x in a):
                slots.append(("l", tuple(slot_of(x) for x in a)))
            else:
                slots.append(("i", a))
        seg_calls.append(SegmentCall(pc, op, dict(attrs), bind_kernel(op, "cpu", np, dict(attrs)), tuple(slots)))
    return Segment(seg_calls, "test"), arrays


def run_both(calls: Sequence[Call]) -> tuple[list[np.ndarray], list[np.ndarray], Segment]:
    """The arrays after the calls ran compiled (first) and through NumPy kernels
    (second), each on its own copies, and the segment (its ``pieces`` say which
    calls compiled)."""
    seg, arrays = segment_of(calls)
    compiled = [a.copy() for a in arrays]
    seg(*compiled)
    reference = [a.copy() for a in arrays]
    for call in seg.calls:
        call.kernel(*[slot_value(s, reference) for s in call.slots])
    return compiled, reference, seg


def compiled_calls(seg: Segment) -> int:
    """How many of the segment's calls ran in compiled code."""
    return sum(len(ks) for kind, _, _, ks in seg.pieces or () if kind == "g")


def assert_segment_matches(calls: Sequence[Call], *, compiled: bool = True, rtol: float = 1e-5,
                           atol: float = 1e-6) -> Segment:  # fmt: skip
    """Asserts that every array is the same after the compiled and the NumPy run
    (NaN where NaN), and with ``compiled`` that every call was compiled (False:
    that none was, the emitter declining)."""
    got, want, seg = run_both(calls)
    n = compiled_calls(seg)
    if compiled:
        assert n == len(calls), f"{len(calls) - n} of {len(calls)} calls were not compiled"
    else:
        assert n == 0, f"{n} calls were compiled, expected none"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, i
        if g.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"array {i}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"array {i}")
    return seg
