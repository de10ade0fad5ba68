"""The nn.lrn kernel against the ONNX specification written out channel by channel."""

import numpy as np
import pytest

from hetvm.kernels import get_kernel


def reference(x, size, alpha, beta, bias, axis):
    x64 = np.moveaxis(x.astype("float64"), axis, 1)
    c = x64.shape[1]
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    out = np.empty_like(x64)
    for i in range(c):
        window = x64[:, max(0, i - lo) : min(c - 1, i + hi) + 1]
        out[:, i] = x64[:, i] / (bias + alpha / size * (window**2).sum(axis=1)) ** beta
    return np.moveaxis(out, 1, axis)


@pytest.mark.parametrize("kind", ["cpu", "sim"])
@pytest.mark.parametrize(
    "shape, size, axis",
    [((2, 7, 3, 4), 5, 1), ((1, 6, 5), 4, 1), ((3, 2, 2, 2), 9, 1), ((2, 4, 5, 3), 3, 3), ((1, 1, 4, 4), 1, 1)],
)
def test_matches_the_specification(kind, shape, size, axis):
    x = np.random.default_rng(1).standard_normal(shape).astype("float32")
    attrs = {"size": size, "alpha": 1e-2, "beta": 0.75, "bias": 1.5, "axis": axis}
    out = np.full(shape, np.nan, "float32")
    get_kernel("nn.lrn", kind)(np, attrs, x.copy(), out)
    np.testing.assert_allclose(out, reference(x, size, 1e-2, 0.75, 1.5, axis), rtol=1e-5, atol=1e-6)


def test_a_wrong_output_buffer_is_an_error():
    x = np.ones((1, 3, 2, 2), "float32")
    with pytest.raises(ValueError, match="output buffer"):
        get_kernel("nn.lrn", "cpu")(np, {"size": 3, "alpha": 1e-4, "beta": 0.75, "bias": 1.0, "axis": 1},
                                    x, np.empty((1, 3, 2, 3), "float32"))  # fmt: skip
