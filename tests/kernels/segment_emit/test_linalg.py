"""The matmul segment body (blocks of rows, the rest one at a time) against np.matmul."""

import numpy as np
import pytest

from hetvm.testing.segment_check import assert_segment_matches, run_both

pytest.importorskip("numba")


def _out(a, b, dtype=None):
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    return np.empty(shape, dtype or a.dtype)


def _check(a, b, **kw):
    return assert_segment_matches([("matmul", {"out_dtype": None}, [a, b, _out(a, b)])], **kw)


@pytest.mark.parametrize("m", range(1, 10))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_count_of_left_over_rows_matches_numpy(numba_on, m, dtype):
    rng = np.random.default_rng(m)
    a = rng.standard_normal((m, 7)).astype(dtype)
    b = rng.standard_normal((7, 5)).astype(dtype)
    _check(a, b)
    _check(a[None], b)  # a stack of one: the batch loop around the same body


@pytest.mark.parametrize("m", [4, 5, 9, 17])
def test_the_product_stays_within_the_summation_bound_of_the_float64_product(numba_on, m):
    rng = np.random.default_rng(7)
    k = 129
    a = rng.standard_normal((3, m, k)).astype(np.float32)
    b = rng.standard_normal((k, 33)).astype(np.float32)
    got, _, _ = run_both([("matmul", {}, [a, b, _out(a, b)])])
    exact = a.astype(np.float64) @ b.astype(np.float64)
    bound = k * np.finfo(np.float32).eps * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    assert np.all(np.abs(got[-1] - exact) <= bound)


@pytest.mark.parametrize("shapes", [((2, 1, 6, 3), (3, 3, 5)), ((6, 3), (2, 3, 5)), ((1, 5, 9), (4, 1, 9, 3)),
                                    ((3, 2, 5, 4), (3, 2, 4, 1)), ((2, 4, 1), (1, 1, 3))])
def test_batched_and_broadcast_stacks_match_numpy(numba_on, shapes):
    rng = np.random.default_rng(2)
    _check(rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1]))


@pytest.mark.parametrize("shapes", [((0, 3), (3, 4)), ((5, 0), (0, 4)), ((5, 3), (3, 0)), ((0, 5, 3), (3, 4)),
                                    ((2, 9, 0), (2, 0, 3))])
def test_empty_dimensions_match_numpy(numba_on, shapes):
    a = np.ones(shapes[0], np.float32)
    b = np.ones(shapes[1], np.float32)
    _check(a, b)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_nan_and_inf_propagate_as_in_numpy(numba_on):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((9, 6)).astype(np.float32)
    b = rng.standard_normal((6, 7)).astype(np.float32)
    a[0, 2] = np.nan  # a row of the first block
    a[5, 1] = np.inf  # a row of the second block: inf, -inf, and inf * 0 (NaN) in its sums
    a[8, 3] = -np.inf  # the left-over row
    b[1, 0] = 0.0
    b[4, 6] = np.inf
    got, want, _ = run_both([("matmul", {}, [a, b, _out(a, b)])])
    np.testing.assert_array_equal(np.isnan(got[-1]), np.isnan(want[-1]))
    assert np.isnan(got[-1]).any() and np.isinf(got[-1]).any()
    _check(a, b)


def test_non_contiguous_operands_match_numpy(numba_on):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((7, 10)).astype(np.float32).T  # (10, 7), column-major
    b = rng.standard_normal((7, 12)).astype(np.float32)[:, ::2]  # (7, 6), strided rows
    _check(a, b)
    stack = rng.standard_normal((3, 5, 8)).astype(np.float32)[::2, :, 1:]  # (2, 5, 7)
    _check(stack, b)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_an_integer_product_keeps_its_numpy_kernel(numba_on, dtype):
    a = np.arange(12, dtype=dtype).reshape(3, 4)
    b = np.arange(8, dtype=dtype).reshape(4, 2)
    _check(a, b, compiled=False)


def test_an_output_stack_larger_than_the_operands_broadcast_repeats_the_product_as_numpy_does(numba_on):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((1, 5, 3)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    assert_segment_matches([("matmul", {}, [a, b, np.empty((2, 5, 4), np.float32)])])


def test_inner_dimensions_that_differ_raise(numba_on):
    a = np.ones((5, 3), np.float32)
    b = np.ones((4, 2), np.float32)
    with pytest.raises(ValueError):
        run_both([("matmul", {}, [a, b, np.empty((5, 2), np.float32)])])


def test_only_a_product_body_may_contract_multiply_adds_and_no_other_fast_math_flag_is_set():
    from hetvm.kernels.segment_emit import Arr, emitter
    from hetvm.runtime.segments import _kernel_source

    f32 = [Arr("float32", 2, (5, 3)), Arr("float32", 2, (3, 4)), Arr("float32", 2, (5, 4))]
    product = _kernel_source(emitter("matmul")({}, f32, ["a0", "a1", "a2"]), ["a0", "a1", "a2"])
    assert "fastmath={'contract'}" in product and product.count("fastmath") == 1
    for op in ("add", "multiply"):
        same = [Arr("float32", 2, (5, 4))] * 3
        assert "fastmath" not in _kernel_source(emitter(op)({}, same, ["a0", "a1", "a2"]), ["a0", "a1", "a2"])
