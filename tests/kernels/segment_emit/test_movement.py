"""Segment bodies of the data-movement and indexing ops against their NumPy kernels.

Each test compiles one segment (a Numba compile per call in it), so the cases
are grouped; a segment is re-run on other shapes of the same ranks, where the
same compiled code has to clamp and check at run time.
"""

import numpy as np
import pytest

from hetvm.errors import HetvmRuntimeError
from hetvm.kernels.registry import bind_kernel
from hetvm.kernels.segment_emit import Arr, ArrList, Imm, emitter
from hetvm.runtime.segments import Segment, SegmentCall
from hetvm.testing.segment_check import assert_segment_matches, compiled_calls, run_both

pytest.importorskip("numba")

RNG = np.random.default_rng(7)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def with_specials(a):
    a = a.copy()
    flat = a.reshape(-1)
    flat[: 3] = [np.nan, np.inf, -np.inf][: flat.size]
    return a


def rerun(seg, calls):
    """Runs ``seg`` (planned and compiled for ``calls``' kind of arrays) on the
    arrays of ``calls`` and the NumPy kernels on copies; asserts they agree."""
    arrays, ids = [], {}
    for _, _, args in calls:
        for a in args:
            for x in a if isinstance(a, list) else [a]:
                if isinstance(x, np.ndarray) and id(x) not in ids:
                    ids[id(x)] = len(arrays)
                    arrays.append(x)
    got = [a.copy() for a in arrays]
    seg(*got)
    want = [a.copy() for a in arrays]
    for call in seg.calls:
        call.kernel(*[want[v] if t == "a" else [want[i] for i in v] if t == "l" else v for t, v in call.slots])
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_permute_broadcast_concat_and_take_compile_as_one_function(numba_on):
    x = with_specials(f32(2, 3, 4, 5))
    nc = f32(4, 6)[:, ::2]  # a non-contiguous input
    ints = RNG.integers(-50, 50, (3, 1, 2)).astype(np.int16)
    calls = [
        ("permute_dims", {"axes": [0, 2, 1, 3]}, [x, np.empty((2, 4, 3, 5), np.float32)]),
        ("permute_dims", {"axes": None}, [nc, np.empty((3, 4), np.float32)]),
        ("permute_dims", {"axes": [-1, 0, 1]}, [ints, np.empty((2, 3, 1), np.int16)]),
        ("broadcast_to", {}, [ints, (2, 3, 4, 2), np.empty((2, 3, 4, 2), np.int16)]),
        ("broadcast_to", {}, [np.array(1.5, np.float64), (2, 0), np.empty((2, 0), np.float64)]),
        ("concat", {"axis": -2}, [[nc, f32(1, 3), nc], np.empty((9, 3), np.float32)]),
        ("concat", {"axis": None}, [[ints, np.array([7], np.int16)], np.empty((7,), np.int16)]),
        ("concat", {"axis": 0}, [[np.zeros((0, 2), bool), np.ones((2, 2), bool)], np.empty((2, 2), bool)]),
        ("take", {"axis": 1, "mode": "fast"}, [x, np.array([[0, -1], [2, -3]]),
                                               np.empty((2, 2, 2, 4, 5), np.float32)]),  # fmt: skip
        ("take", {"axis": -1, "mode": "fast"}, [nc, np.array([2, 0, -2], np.int32), np.empty((4, 3), np.float32)]),
        ("take", {"axis": 0, "mode": "fast"}, [ints, np.array(True), np.empty((1, 2), np.int16)]),
        ("take", {"axis": None, "mode": "wrap"}, [ints, np.array([0, -1, 500, -77], np.int64),
                                                   np.empty((4,), np.int16)]),  # fmt: skip
        ("take", {"axis": 1, "mode": "clip"}, [x, np.array([3, 255, 0], np.uint8), np.empty((2, 3, 4, 5), np.float32)]),
        ("take", {"axis": 0, "mode": "fast"}, [f32(0, 3), np.zeros((0,), np.int64), np.empty((0, 3), np.float32)]),
    ]
    seg = assert_segment_matches(calls)
    assert [p[0] for p in seg.pieces] == ["g"]


def test_take_out_of_range_raises_the_kernels_index_error(numba_on):
    x = f32(3, 4)
    # from the end: -3 is the first row; -4 and 3 are out of range
    _, _, seg = run_both([("take", {"axis": 0, "mode": "fast"}, [x, np.array([-3, 2]), np.empty((2, 4), np.float32)])])
    assert compiled_calls(seg) == 1
    for bad in (-4, 3):
        with pytest.raises(IndexError):
            seg(x, np.array([0, bad]), np.empty((2, 4), np.float32))


def test_shapes_that_disagree_raise_and_odd_calls_are_declined(numba_on):
    x = f32(2, 3)
    with pytest.raises(ValueError):  # concat's inputs differ off the axis
        run_both([("concat", {"axis": 0}, [[x, f32(1, 4)], np.empty((3, 3), np.float32)])])
    declined = [
        ("permute_dims", {"axes": [0, 1]}, [x, np.empty((2, 3), np.float64)]),  # a cast on the way
        ("concat", {"axis": 0}, [[x, x.astype(np.float64)], np.empty((4, 3), np.float64)]),  # mixed dtypes
        ("strided_slice", {"axes": [0], "begin": ["n"], "end": [2], "strides": [1]},
         [x, np.empty((2, 3), np.float32)]),  # a symbolic bound  # fmt: skip
        ("cumsum", {"axis": 0}, [x, np.empty((2, 3), np.int32)]),  # float to int
        ("arange", {}, [0.5, 3, 1.0, np.empty((3,), np.int64)]),  # float path into ints
    ]
    for call in declined:
        assert_segment_matches([call], compiled=False)


def _slices():
    """(begin, end, stride) of a slice: inside, past both ends, negative, reversed, huge."""
    big = 2**63 - 1
    return [(1, 4, 1), (-2, big, 1), (-big - 1, -1, 2), (big, -big - 1, -1), (5, 0, -2), (-1, -5, -3),
            (0, 0, 1), (3, 1, 1), (2, big, 4)]  # fmt: skip


def test_strided_slice_clamps_like_python_at_every_extent(numba_on):
    def calls_for(n):
        x = RNG.standard_normal((2, n)).astype(np.float32)
        out = []
        for b, e, s in _slices():
            length = len(range(n)[slice(b, e, s)])
            out.append(("strided_slice", {"axes": [-1], "begin": [b], "end": [e], "strides": [s]},
                        [x, np.empty((2, length), np.float32)]))  # fmt: skip
        # two axes, one given twice (the last one counts), ints; no strides given
        y = RNG.integers(0, 9, (n, 3)).astype(np.int64)
        out.append(("strided_slice", {"axes": [0, 1, 1], "begin": [1, 0, -2], "end": [7, 3, 3]},
                    [y, np.empty((len(range(n)[1:7]), 2), np.int64)]))  # fmt: skip
        return out

    seg = assert_segment_matches(calls_for(7))
    for n in (0, 1, 3, 12):  # the same compiled code, other extents
        rerun(seg, calls_for(n))


def test_split_cuts_sections_and_indices_as_the_kernel(numba_on):
    def calls_for(n):
        x = RNG.standard_normal((3, n)).astype(np.float32)
        chunk = -(-n // 3)
        sec = [min(k * chunk, n) for k in range(3)] + [n]
        pieces = [np.empty((3, max(0, min(hi, n) - lo)), np.float32) for lo, hi in zip(sec, sec[1:])]
        cuts = [0, 2, -1, 9, n]  # a negative cut reads from the end, past the end clamps
        idx_pieces = []
        for lo, hi in zip(cuts, cuts[1:]):
            lo = min(lo, n)
            idx_pieces.append(np.empty((3, len(range(n)[lo:max(lo, min(hi, n))])), np.float32))
        return [("split", {"axis": 1, "indices_or_sections": 3}, [x, *pieces]),
                ("split", {"axis": -1, "indices_or_sections": [2, -1, 9]}, [x, *idx_pieces])]

    seg = assert_segment_matches(calls_for(8))
    for n in (0, 1, 5, 9):
        rerun(seg, calls_for(n))


def test_gathers_read_negative_indices_from_the_end(numba_on):
    data = with_specials(f32(2, 3, 4))
    ge_idx = np.array([[[0, -1], [2, -3]]], np.int64)  # (1, 2, 2): shorter than data off the axis
    nd_idx = np.array([[[1, -1]], [[0, 2]]], np.int32)  # batch 1, tuples of 2
    calls = [
        ("gather_elements", {"axis": 1}, [data, ge_idx, np.empty((1, 2, 2), np.float32)]),
        ("gather_elements", {"axis": -1}, [data, ge_idx.astype(np.int8), np.empty((1, 2, 2), np.float32)]),
        ("gather_nd", {"batch_dims": 1}, [data, nd_idx, np.empty((2, 1), np.float32)]),
        ("gather_nd", {"batch_dims": 0}, [data, np.array([[1], [-2]]), np.empty((2, 3, 4), np.float32)]),
        ("gather_nd", {"batch_dims": 0}, [data, np.zeros((0, 2), np.int64), np.empty((0, 4), np.float32)]),
    ]
    assert_segment_matches(calls)


def test_gather_out_of_range_raises_the_kernels_error(numba_on):
    data = f32(2, 3)
    calls = [("gather_elements", {"axis": 1}, [data, np.array([[0, -3]]), np.empty((1, 2), np.float32)]),
             ("gather_nd", {"batch_dims": 0}, [data, np.array([[0, -3]]), np.empty((1,), np.float32)])]
    _, _, seg = run_both(calls)
    assert compiled_calls(seg) == 2
    ok = np.array([[1, 2]])
    # gather_elements: -4 + 3 = -1 is not read from the end a second time
    for ge, nd, error in ((-4, 2, ValueError), (3, 2, ValueError), (0, -4, HetvmRuntimeError)):
        with pytest.raises(error):
            seg(data, np.array([[0, ge]]), np.empty((1, 2), np.float32), np.array([[0, nd]]),
                np.empty((1,), np.float32))
    seg(data, ok, np.empty((1, 2), np.float32), ok, np.empty((1,), np.float32))


def test_creation_ops_and_cumsum(numba_on):
    x = with_specials(f32(2, 3, 4))
    ints = RNG.integers(-100, 100, (3, 5)).astype(np.int8)
    calls = [
        ("full", {}, [(2, 3), 1.75, np.empty((2, 3), np.int32)]),  # the kernel's truncating store
        ("full", {}, [(2,), float("-inf"), np.empty((2,), np.float32)]),
        ("full", {}, [(), 3, np.empty((), np.bool_)]),
        ("full", {}, [(2, 2), np.array(0.25, np.float64), np.empty((2, 2), np.float64)]),
        ("shape_to_tensor", {}, [(2, 3, 0), np.empty((3,), np.int64)]),
        ("shape_to_tensor", {}, [(), np.empty((0,), np.int32)]),
        ("arange", {"dtype": "int64"}, [3, 10, -2, np.empty((4,), np.int64)]),
        ("arange", {"dtype": "int8"}, [120, 200, 5, np.empty((4,), np.int8)]),  # wraps as astype does
        ("arange", {"dtype": "float32"}, [0.1, 1.0, 0.3, np.empty((3,), np.float32)]),
        ("arange", {"dtype": "float32"}, [np.array(2, np.int64), 5, np.array(0.1, np.float32),
                                          np.empty((3,), np.float32)]),  # fmt: skip
        ("cumsum", {"axis": 1, "exclusive": False}, [x, np.empty_like(x)]),
        ("cumsum", {"axis": -1, "exclusive": True}, [x, np.empty((2, 3, 4), np.float64)]),
        ("cumsum", {"axis": 0}, [ints, np.empty((3, 5), np.int8)]),  # wraps in the output dtype
        ("cumsum", {"axis": None, "exclusive": True}, [ints, np.empty((15,), np.float32)]),
        ("cumsum", {"axis": 1}, [np.zeros((2, 0), bool), np.empty((2, 0), np.int64)]),
    ]
    assert_segment_matches(calls)


def test_emitters_decline_what_their_kernels_refuse():
    """Static refusals, without compiling: the call keeps its NumPy kernel."""
    f = Arr("float32", 2)
    assert emitter("permute_dims")({"axes": [0, 2]}, [f, f], ["a0", "a1"]) is None
    assert emitter("take")({"axis": 2}, [f, Arr("int64", 1), Arr("float32", 2)], ["a0", "a1", "a2"]) is None
    assert emitter("concat")({"axis": 0}, [ArrList(()), f], [[], "a0"]) is None
    assert emitter("split")({"axis": 0, "indices_or_sections": 0}, [f], ["a0"]) is None
    assert emitter("split")({"axis": 0, "indices_or_sections": [1, 2]}, [f, f, f], ["a0", "a1", "a2"]) is None
    zero_stride = {"axes": [0], "begin": [0], "end": [1], "strides": [0]}
    assert emitter("strided_slice")(zero_stride, [f, f], ["a0", "a1"]) is None
    assert emitter("full")({}, [Imm((2, 2)), Imm(2**40), Arr("int32", 2)], [None, None, "a0"]) is None
    assert emitter("shape_to_tensor")({}, [Imm((300,)), Arr("int8", 1)], [None, "a0"]) is None
    assert emitter("take")({"axis": 0}, [f, Arr("float64", 1), f], ["a0", "a1", "a2"]) is None  # float indices
    assert emitter("gather_elements")({"axis": 0}, [f, Arr("int64", 1), f], ["a0", "a1", "a2"]) is None


class RunTime:
    """A call argument the VM computes at run time (an int, float, bool or shape
    tuple): passed to the segment as an argument, so its emitter sees a ``Val``."""

    def __init__(self, value):
        self.value = value


def _value_segment(calls):
    """The segment of ``calls`` (arrays and :class:`RunTime` values as its
    arguments, anything else an immediate) and its argument list."""
    args, seg_calls = [], []
    for pc, (op, attrs, call_args) in enumerate(calls):
        slots = []
        for a in call_args:
            if isinstance(a, (np.ndarray, RunTime)):
                slots.append(("a", len(args)))
                args.append(a.value if isinstance(a, RunTime) else a)
            else:
                slots.append(("i", a))
        seg_calls.append(SegmentCall(pc, op, attrs, bind_kernel(op, "cpu", np, dict(attrs)), tuple(slots)))
    return Segment(seg_calls, "test"), args


def test_values_known_at_run_time_are_read_as_the_kernels_read_them(numba_on):
    def calls_for(start, step, dims, big, fill):
        return [
            ("arange", {}, [RunTime(start), RunTime(10), RunTime(step), np.empty((4,), np.int32)]),
            ("arange", {}, [RunTime(float(start)), 10, RunTime(step), np.empty((4,), np.float32)]),
            ("shape_to_tensor", {}, [RunTime(dims), np.empty((3,), np.int16)]),
            ("shape_to_tensor", {}, [RunTime(big), np.empty((3,), np.float32)]),
            ("full", {}, [RunTime(dims), RunTime(fill), np.empty((2, 3), np.int8)]),
            ("full", {}, [RunTime(dims), RunTime(fill), np.empty((2, 3), np.float32)]),
            ("full", {}, [RunTime(dims), RunTime(fill * 0.5), np.empty((3,), np.float64)]),
            ("full", {}, [RunTime(dims), RunTime(fill > 0), np.empty((2,), np.float32)]),
            ("broadcast_to", {}, [np.arange(3, dtype=np.int16), RunTime(dims), np.empty((2, 3), np.int16)]),
        ]

    def check(calls, seg=None):
        seg_new, args = _value_segment(calls)
        seg = seg or seg_new
        got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        seg(*got)
        want = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        for call in seg.calls:
            call.kernel(*[want[v] if t == "a" else v for t, v in call.slots])
        for g, w in zip(got, want):
            if isinstance(g, np.ndarray):
                assert g.dtype == w.dtype
                np.testing.assert_array_equal(g, w)
        return seg

    seg = check(calls_for(3, -2, (2, 3, 7), (0, 1, 2), 100))
    assert compiled_calls(seg) == 9
    # int64 wrapping, and a float32 rounded through float64 (NumPy's conversion of a Python int)
    seg = check(calls_for(-(2**40), 2**62 + 3, (0, 1, 32767), (0, 1, (1 << 60) + (1 << 36) + 1), -128), seg)
    # a value the output dtype cannot hold: the kernel's error
    with pytest.raises(OverflowError):
        check(calls_for(0, 1, (2, 3, 40000), (1, 2, 3), 1), seg)
