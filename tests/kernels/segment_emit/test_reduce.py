"""The sum and mean bodies over a contiguous run of axes (segment_emit/reduce.py)
against their NumPy kernels, and their float64 accumulation against exact sums."""

import math

import numpy as np
import pytest

from hetvm.kernels.segment_emit import Arr, norm, reduce
from hetvm.testing.segment_check import assert_segment_matches, run_both

pytest.importorskip("numba")

F32 = dict(rtol=2e-6, atol=2e-6)


def _f(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _red(op, x, axis, keep, out_dtype=None):
    shape = np.sum(np.zeros(x.shape), axis=tuple(axis) if isinstance(axis, list) else axis, keepdims=keep).shape
    return (op, {"axis": axis, "keepdims": keep}, [x, np.empty(shape, out_dtype or x.dtype)])


def _taken(call):
    """Whether this module's emitter (not the general one) writes the call's body."""
    op, attrs, (x, out) = call
    args = [Arr(str(x.dtype), x.ndim, x.shape), Arr(str(out.dtype), out.ndim, out.shape)]
    return reduce._emit(op, attrs, args, ["a0", "a1"]) is not None


def test_float_rows_and_columns_match_numpy_with_nan_inf_keepdims_and_negative_axes(numba_on):
    x = _f((2, 6, 5, 7))
    x[0, 1, 2, 3] = np.nan
    x[1, 4, 0, 0] = np.inf
    x[1, 5, 1, 1] = -np.inf
    x[1, 5, 2, 2] = np.inf  # inf - inf: NaN, as NumPy
    wide = _f((3, 300), np.float64, 1)  # rows of two blocks and a tail
    calls = [
        _red("mean", x, [2, 3], True), _red("mean", x, [-2, -1], False), _red("sum", x, [1, 2, 3], False),
        _red("sum", x, None, True), _red("mean", x, [1], False), _red("sum", x, [0, 1], True),
        _red("mean", x, [-3, -2], False), _red("sum", wide, [1], False), _red("mean", wide, [0], True),
        _red("mean", wide, None, False),
    ]
    assert all(_taken(c) for c in calls)
    assert_segment_matches(calls, **F32)


def test_empty_sets_non_contiguous_inputs_and_sizes_above_the_general_rule(numba_on):
    big = _f((1, 40, 23, 23), seed=2)  # above norm.REDUCE_MAX, SqueezeNet's pool in small
    assert big.size > norm.REDUCE_MAX
    calls = [
        _red("mean", np.zeros((3, 0), np.float32), [1], False),  # NaN: NumPy's mean of nothing
        _red("sum", np.zeros((3, 0, 2), np.float64), [1], True),
        _red("sum", np.zeros((0, 4), np.float32), [1], False),
        _red("mean", _f((4, 6, 5), seed=3).transpose(2, 0, 1), [1, 2], False),  # read through ravel's copy
        _red("sum", _f((8, 9), seed=4)[::2, 1:], [0], False),
        _red("mean", big, [2, 3], True), _red("sum", big, [1], True),
    ]
    assert all(_taken(c) for c in calls)
    assert_segment_matches(calls, **F32)


def test_integer_and_bool_sums_wrap_and_means_promote_as_numpy(numba_on):
    rng = np.random.default_rng(5)
    i32 = rng.integers(-2**31, 2**31 - 1, (4, 6, 3), dtype=np.int32)  # sums that wrap in int32
    u8 = rng.integers(0, 255, (3, 5, 4), dtype=np.uint8)
    u64 = rng.integers(0, 2**64 - 1, (3, 5), dtype=np.uint64, endpoint=True)
    b = rng.random((3, 4, 2)) > 0.5
    calls = [
        _red("sum", i32, [2], False), _red("sum", i32, [1], True), _red("sum", i32, None, False, np.int64),
        _red("sum", u8, [1, 2], False, np.uint64), _red("sum", u8, [0], False, np.uint64),
        _red("sum", u64, [1], False), _red("sum", b, [0, 1], False, np.int64), _red("sum", b, [-1], True, np.int64),
        _red("mean", i32, [1, 2], False, np.float64), _red("mean", u8, [0], True, np.float64),
        _red("mean", b, [2], False, np.float64),
    ]
    assert all(_taken(c) for c in calls)
    assert_segment_matches(calls)


def test_other_axes_ops_and_dtypes_go_to_the_general_body(numba_on):
    x = _f((3, 4, 5))
    for call in (_red("sum", x, [0, 2], False), _red("max", x, [2], False), _red("prod", x, [2], False),
                 _red("sum", x, [], False), _red("sum", x, [1], False, np.float64),
                 _red("mean", x.astype(np.int32), [1], False, np.int32)):
        assert not _taken(call)
    assert_segment_matches([_red("sum", x, [0, 2], False), _red("max", x, [2], False)], **F32)  # the general body
    with pytest.raises(ValueError):  # NumPy's error for a repeated axis, not a loop over it
        run_both([("sum", {"axis": [1, -2], "keepdims": False}, [x, np.empty((3, 5), np.float32)]),
                  ("add", {}, [x, x, np.empty_like(x)])])


def test_a_wrongly_shaped_output_raises_in_compiled_code(numba_on):
    x = _f((2, 3, 4))
    seg = assert_segment_matches([_red("mean", x, [2], False), _red("sum", x, [1, 2], True)], **F32)
    (kind, fn, _, _), = seg.pieces
    assert kind == "g"
    with pytest.raises(ValueError, match="mean: the output shape"):
        fn(x, np.empty((2, 4), np.float32), np.empty((2, 1, 1), np.float32))
    with pytest.raises(ValueError, match="sum: the output shape"):
        fn(x, np.empty((2, 3), np.float32), np.empty((2, 1), np.float32).reshape(2, 1, 1)[:1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_long_row_sums_stay_within_numpys_pairwise_error(numba_on, dtype):
    """Against the exact sum (math.fsum): the float64 lanes and pairwise block sums
    err no more than NumPy's own pairwise sum in the input's dtype, up to a factor."""
    n = (1 << 17) + 77
    x = (np.random.default_rng(6).random((2, n)) + 1e3).astype(dtype)  # large common part: cancellation-free drift
    out = np.empty(2, dtype)
    got, _, seg = run_both([("sum", {"axis": [1], "keepdims": False}, [x, out])])
    assert seg.pieces[0][0] == "g"
    exact = np.array([math.fsum(row.astype(np.float64)) for row in x])
    ours = np.abs(got[1].astype(np.float64) - exact)
    numpy_err = np.abs(x.sum(axis=1).astype(np.float64) - exact)
    rounding = np.abs(exact.astype(dtype).astype(np.float64) - exact)  # the store's one rounding
    assert np.all(ours <= np.maximum(2 * numpy_err, rounding + 1e-300))
