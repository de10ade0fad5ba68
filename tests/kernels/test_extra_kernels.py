"""NumPy kernels of the ops in hetvm/op/extra.py, against NumPy itself."""

import numpy as np
import pytest

from hetvm.kernels import get_kernel, has_kernel

RNG = np.random.default_rng(3)


def run(op, attrs, *args, shape, dtype="float32"):
    out = np.full(shape, 7, dtype=dtype)
    get_kernel(op, "cpu")(np, attrs, *args, out)
    return out


@pytest.mark.parametrize("op,ref,lo,hi", [
    ("tan", np.tan, -1.2, 1.2), ("asin", np.arcsin, -1, 1), ("acos", np.arccos, -1, 1),
    ("atan", np.arctan, -5, 5), ("sinh", np.sinh, -3, 3), ("cosh", np.cosh, -3, 3),
    ("asinh", np.arcsinh, -5, 5), ("acosh", np.arccosh, 1, 5), ("atanh", np.arctanh, -0.9, 0.9),
])  # fmt: skip
def test_float_unary(op, ref, lo, hi):
    x = RNG.uniform(lo, hi, (3, 4)).astype(np.float32)
    np.testing.assert_allclose(run(op, {}, x, shape=(3, 4)), ref(x), rtol=1e-6)
    assert all(has_kernel(op, k) for k in ("cpu", "sim", "cuda"))


def test_float_class():
    x = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], np.float32)
    assert run("isnan", {}, x, shape=(5,), dtype="bool").tolist() == [0, 1, 0, 0, 0]
    assert run("isinf", {}, x, shape=(5,), dtype="bool").tolist() == [0, 0, 1, 1, 0]
    assert run("isfinite", {}, x, shape=(5,), dtype="bool").tolist() == [1, 0, 0, 0, 1]


def test_mod_signs_and_zero_divisor():
    a = np.array([7, -7, 7, -7, 5], np.int32)
    b = np.array([3, 3, -3, -3, 0], np.int32)
    assert run("mod", {}, a, b, shape=(5,), dtype="int32").tolist() == [1, -1, 1, -1, 0]
    assert run("floor_mod", {}, a, b, shape=(5,), dtype="int32").tolist() == [1, 2, -2, -1, 0]
    x, y = np.array([5.5, -5.5], np.float32), np.array([2.0, 2.0], np.float32)
    np.testing.assert_allclose(run("mod", {}, x, y, shape=(2,)), [1.5, -1.5])
    np.testing.assert_allclose(run("floor_mod", {}, x, y, shape=(2,)), [1.5, 0.5])


def test_bitwise_and_shifts():
    a = np.array([[12], [5]], np.uint8)
    b = np.array([10, 3], np.uint8)
    for op, ref in [("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
                    ("bitwise_xor", np.bitwise_xor), ("left_shift", np.left_shift),
                    ("right_shift", np.right_shift)]:  # fmt: skip
        np.testing.assert_array_equal(run(op, {}, a, b, shape=(2, 2), dtype="uint8"), ref(a, b))
    np.testing.assert_array_equal(run("bitwise_not", {}, b, shape=(2,), dtype="uint8"), ~b)


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("exclusive", [False, True])
def test_scans(op, exclusive):
    x = RNG.integers(1, 4, (3, 4)).astype(np.int32)
    got = run(op, {"axis": 1, "dtype": "int64", "exclusive": exclusive}, x, shape=(3, 4), dtype="int64")
    ref = getattr(np, op)(x, axis=1, dtype=np.int64)
    if exclusive:
        ref = np.concatenate([np.full((3, 1), 0 if op == "cumsum" else 1), ref[:, :-1]], axis=1)
    np.testing.assert_array_equal(got, ref)
    flat = run(op, {"axis": None, "dtype": None, "exclusive": False}, x, shape=(12,), dtype="int32")
    np.testing.assert_array_equal(flat, getattr(np, op)(x.reshape(-1)))


def test_gather_elements_negative_indices():
    data = RNG.standard_normal((3, 4)).astype(np.float32)
    idx = np.array([[0, -1, 2, 1], [-3, 0, 0, 2]], np.int64)
    got = run("gather_elements", {"axis": 0}, data, idx, shape=(2, 4))
    np.testing.assert_array_equal(got, np.take_along_axis(data, idx % 3, axis=0))


def _gather_elements_by_loop(data, idx, axis):
    """ONNX's definition, element by element."""
    out = np.empty(idx.shape, data.dtype)
    for pos in np.ndindex(*idx.shape):
        src = list(pos)
        src[axis] = idx[pos] % data.shape[axis]
        out[pos] = data[tuple(src)]
    return out


@pytest.mark.parametrize("axis", [0, 1])
def test_gather_elements_indices_shorter_than_data_on_the_other_axis(axis):
    # ONNX allows it (the output is the indices' shape); take_along_axis alone does not
    data = RNG.standard_normal((3, 4)).astype(np.float32)
    idx = np.array([[2, -1], [0, 1]], np.int64)
    got = run("gather_elements", {"axis": axis}, data, idx, shape=(2, 2))
    np.testing.assert_array_equal(got, _gather_elements_by_loop(data, idx, axis))


def test_gather_elements_indices_longer_than_data_is_an_error():
    from hetvm.kernels.extra import take_elements

    with pytest.raises(ValueError, match=r"indices shape \(4, 1\) exceeds data shape \(3, 4\) on axis 0"):
        take_elements(np, np.zeros((3, 4)), np.zeros((4, 1), np.int64), 1)


def test_einsum():
    a, b = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 4, 5))
    a, b = a.astype(np.float32), b.astype(np.float32)
    got = run("einsum", {"subscripts": "bij,bjk->bik"}, [a, b], shape=(2, 3, 5))
    np.testing.assert_allclose(got, np.einsum("bij,bjk->bik", a, b), rtol=1e-5)
