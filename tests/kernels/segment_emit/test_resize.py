"""Segment body of ``image.resize2d`` (linear, NCHW) against its NumPy kernel."""

import numpy as np
import pytest

from hetvm.testing.segment_check import assert_segment_matches

pytest.importorskip("numba")

ATTRS = {"roi": [0.0, 0.0, 0.0, 0.0], "layout": "NCHW", "method": "linear",
         "coordinate_transformation_mode": "half_pixel", "rounding_method": "floor", "cubic_alpha": -0.75,
         "cubic_exclude": 0, "extrapolation_value": 0.0, "out_dtype": None, "scales": None, "antialias": False}  # fmt: skip


def _resize(x, size, exact=True, **attrs):
    out = np.empty(x.shape[:2] + tuple(size), x.dtype)
    tol = {"rtol": 0, "atol": 0} if exact else {}
    return assert_segment_matches([("image.resize2d", {**ATTRS, **attrs}, [x, tuple(size), out])], **tol)


@pytest.mark.parametrize("ctm", ["half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linear_resize_matches_the_numpy_kernel_bit_for_bit(numba_on, ctm, dtype):
    rng = np.random.default_rng(0)
    # up, mixed, from one pixel, down to one pixel, unchanged (copied)
    for shape, size in [((1, 3, 4, 4), (8, 8)), ((2, 2, 5, 3), (3, 7)), ((1, 1, 1, 6), (4, 6)),
                        ((1, 2, 6, 5), (1, 1)), ((1, 2, 3, 3), (3, 3))]:  # fmt: skip
        x = rng.standard_normal(shape).astype(dtype)
        _resize(x, size, coordinate_transformation_mode=ctm)


def test_nan_and_infinities_spread_as_in_the_numpy_kernel(numba_on):
    x = np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4)
    x[0, 0, 1, 2], x[0, 1, 0, 0], x[0, 1, 3, 3] = np.nan, np.inf, -np.inf
    _resize(x, (7, 9))
    _resize(x, (4, 6))  # H unchanged: copied, so an inf next to a NaN stays inf


def test_empty_outputs_and_a_non_contiguous_input(numba_on):
    x = np.random.default_rng(1).standard_normal((1, 2, 4, 6)).astype(np.float32)
    _resize(x, (0, 5))
    _resize(x[:, :, :, ::2], (6, 5))
    _resize(np.empty((0, 2, 4, 4), np.float32), (8, 8))


def test_an_output_of_the_wrong_size_raises_the_kernels_error(numba_on):
    from hetvm.testing.segment_check import run_both

    x = np.ones((1, 1, 2, 2), np.float32)
    with pytest.raises(ValueError, match="does not match"):
        run_both([("image.resize2d", ATTRS, [x, (4, 4), np.empty((1, 1, 4, 3), np.float32)])])


@pytest.mark.parametrize("attrs", [{"method": "nearest_neighbor"}, {"method": "cubic"}, {"antialias": True},
                                   {"scales": (2.0, 2.0)}, {"layout": "NHWC"}, {"cubic_exclude": 1},
                                   {"coordinate_transformation_mode": "tf_crop_and_resize"}])  # fmt: skip
def test_other_modes_keep_the_numpy_kernel(numba_on, attrs):
    x = np.random.default_rng(2).standard_normal((1, 2, 4, 4)).astype(np.float32)
    out = np.empty((1, 8, 8, 4) if "layout" in attrs else (1, 2, 8, 8), np.float32)
    assert_segment_matches([("image.resize2d", {**ATTRS, **attrs}, [x, (8, 8), out])], compiled=False)


def test_integer_data_keeps_the_numpy_kernel(numba_on):
    x = np.arange(16, dtype=np.int32).reshape(1, 1, 4, 4)
    out = np.empty((1, 1, 8, 8), np.int32)
    assert_segment_matches([("image.resize2d", ATTRS, [x, (8, 8), out])], compiled=False)
