"""Helpers shared by kernels: relu_into's fast path must equal ``maximum(x, 0)``."""

import numpy as np
import pytest

from hetvm.kernels.common import relu_into


@pytest.mark.parametrize(
    "shape",
    [(1, 256, 56, 56), (2, 3, 64), (1, 2048, 7, 7), (1, 272, 14, 14), (4, 70000), (65, 64), (1000,), (3,), ()],
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_into_equals_maximum(shape: tuple, dtype: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    if x.size > 2:
        x.reshape(-1)[:3] = (np.nan, -0.0, -np.inf)
    out = np.empty_like(x)
    relu_into(np, x, out)
    np.testing.assert_array_equal(out, np.maximum(x, 0))
    relu_into(np, x, x)  # in place
    np.testing.assert_array_equal(x, out)


def test_relu_into_strided_and_integer_inputs() -> None:
    x = np.arange(-60, 60, dtype=np.float32).reshape(8, 15)[:, ::2]
    out = np.empty(x.shape, np.float32)
    relu_into(np, x, out)
    np.testing.assert_array_equal(out, np.maximum(x, 0))
    ints = np.arange(-200, 200, dtype=np.int32).reshape(4, 100)
    iout = np.empty_like(ints)
    relu_into(np, ints, iout)
    np.testing.assert_array_equal(iout, np.maximum(ints, 0))


def test_relu_into_zero_rows_are_read_only() -> None:
    x = -np.ones((8, 128), np.float32)
    out = np.empty_like(x)
    relu_into(np, x, out)
    out[...] = 5  # the cached zero row must not alias the output
    relu_into(np, x, out)
    assert not out.any()


@pytest.mark.parametrize("shape", [(1, 4, 56, 56), (2, 3, 30, 30), (1, 5, 7, 7), (3, 6, 100), (2, 4), (1, 2, 128, 128)])
@pytest.mark.parametrize("ufunc", [np.add, np.multiply])
def test_per_channel_equals_broadcasting(shape: tuple, ufunc) -> None:
    from hetvm.kernels.common import per_channel

    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    values = rng.standard_normal(shape[1]).astype(np.float32)
    want = ufunc(x, values.reshape((-1,) + (1,) * (x.ndim - 2)))
    out = np.empty_like(x)
    before = np.getbufsize()
    per_channel(np, ufunc, x, values, out)
    np.testing.assert_array_equal(out, want)
    per_channel(np, ufunc, x, values, x)  # in place
    np.testing.assert_array_equal(x, want)
    assert np.getbufsize() == before  # the buffer size is restored
