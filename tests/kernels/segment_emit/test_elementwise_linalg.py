"""Segment bodies of element-wise ops and matmul against their NumPy kernels."""

import numpy as np
import pytest

from hetvm.testing.segment_check import assert_segment_matches

pytest.importorskip("numba")


def test_a_chain_of_binary_ops_with_broadcasting_compiles_as_one_function(numba_on):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    y = rng.standard_normal((3, 1)).astype(np.float32)
    t = np.empty((2, 3, 4), np.float32)
    u = np.empty((2, 3, 4), np.float32)
    x[0, 0, 0] = np.nan
    seg = assert_segment_matches([
        ("add", {}, [x, y, t]),
        ("multiply", {}, [t, x, u]),
        ("fused_elementwise", {"program": [["sigmoid", "float32", "x0"], ["multiply", "float32", "t0", "x1"]]},
         [u, y, t]),
        ("isnan", {}, [t, np.empty((2, 3, 4), bool)]),
    ])
    assert [p[0] for p in seg.pieces] == ["g"]


def test_integer_ops_wrap_like_numpy_and_where_selects(numba_on):
    a = np.array([2**31 - 1, -5, 7], np.int32)
    b = np.array([1, 3, -2], np.int32)
    s = np.empty(3, np.int32)
    c = np.array([True, False, True])
    w = np.empty(3, np.int32)
    assert_segment_matches([("add", {}, [a, b, s]), ("where", {}, [c, s, b, w])])


def test_a_shape_that_does_not_broadcast_raises_the_numpy_kernels_error(numba_on):
    from hetvm.testing.segment_check import run_both

    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError):
        run_both([("add", {}, [x, np.ones((4,), np.float32), np.empty((2, 3), np.float32)])])


@pytest.mark.parametrize("shapes", [((5, 8), (8, 3)), ((2, 5, 8), (8, 3)), ((2, 1, 5, 8), (3, 8, 4)),
                                    ((1, 8), (2, 8, 0))])
def test_matmul_matches_numpy_with_broadcast_batches(numba_on, shapes):
    rng = np.random.default_rng(1)
    a = rng.standard_normal(shapes[0]).astype(np.float32)
    b = rng.standard_normal(shapes[1]).astype(np.float32)
    out = np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]), np.float32)
    assert_segment_matches([("matmul", {"out_dtype": None}, [a, b, out])])


def test_matmul_of_mixed_dtypes_keeps_its_numpy_kernel(numba_on):
    a = np.ones((2, 3), np.float32)
    b = np.ones((3, 2), np.float64)
    assert_segment_matches([("matmul", {}, [a, b, np.empty((2, 2), np.float64)])], compiled=False)


def test_casts_to_bool_and_between_numbers_match_numpy(numba_on):
    x = np.array([0.0, -0.0, 1.5, np.nan, np.inf], np.float32)
    i = np.array([0, 3, -2, 7, 0], np.int64)
    assert_segment_matches([
        ("astype", {"dtype": "bool"}, [x, np.empty(5, bool)]),
        ("astype", {"dtype": "bool"}, [i, np.empty(5, bool)]),
        ("astype", {"dtype": "float32"}, [i, np.empty(5, np.float32)]),
    ])
    # float to integer is left to NumPy (NaN and out-of-range values have no safe scalar cast)
    assert_segment_matches([("astype", {"dtype": "int64"}, [x, np.empty(5, np.int64)])], compiled=False)


def test_a_unary_op_refuses_an_input_that_would_broadcast_as_its_numpy_kernel_does(numba_on):
    from hetvm.testing.segment_check import segment_of

    x = np.ones((1, 3), np.float32)
    for op in ("exp", "negative", "isnan"):
        out = np.empty((2, 3), bool if op == "isnan" else np.float32)
        seg, arrays = segment_of([(op, {}, [x, out]), ("exp", {}, [x, np.empty((1, 3), np.float32)])])
        with pytest.raises(ValueError):
            seg(*arrays)


def test_literals_of_nan_and_infinities_are_source_text():
    from hetvm.kernels.segment_emit import literal

    assert literal(float("nan"), "float32") == "np.float32(np.nan)"
    assert literal(float("-inf")) == "-np.inf" and literal(float("inf"), "float64") == "np.float64(np.inf)"
    assert literal(0.5, "float32") == "np.float32(0.5)"
