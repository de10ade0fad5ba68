"""The image.resize2d kernel against ONNX's reference Resize (onnx.reference) over
methods, coordinate modes, nearest modes, cubic options, antialias, scales and sizes,
dtypes and layouts, on small random arrays."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import hetvm.op as op
from hetvm.ir import Var
from hetvm.ir import struct_info as S
from hetvm.kernels import get_kernel
from hetvm.kernels.resize import axis_taps

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

METHODS = {"nearest": "nearest_neighbor", "linear": "linear", "cubic": "cubic"}
MODES = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_crop_and_resize",
         "half_pixel_symmetric")  # fmt: skip
ROI = [0.0, 0.0, 0.2, -0.3, 1.0, 1.0, 1.3, 0.9]  # H cropped inside and past the end, W before the start


@pytest.fixture
def rng(request):
    """Data per test, the same however tests are distributed over workers."""
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


def reference(x, *, roi=None, scales=None, sizes=None, **attrs):
    """ONNX's reference Resize (opset 19) of a one-node model, roi/scales/sizes as initializers."""
    names, inits = ["x", "", "", ""], []
    for i, (name, value, dtype) in enumerate([("roi", roi, np.float32), ("scales", scales, np.float32),
                                             ("sizes", sizes, np.int64)], start=1):  # fmt: skip
        if value is not None:
            inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
            names[i] = name
    while not names[-1]:
        names.pop()
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph([helper.make_node("Resize", names, ["y"], **attrs)], "g",
                              [helper.make_tensor_value_info("x", elem, x.shape)],
                              [helper.make_tensor_value_info("y", elem, None)], inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    return ReferenceEvaluator(model).run(None, {"x": x})[0]


def hetvm_resize(x, *, roi=None, scales=None, sizes=None, layout="NCHW", mode="nearest",
                 coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_floor",
                 cubic_coeff_a=-0.75, exclude_outside=0, extrapolation_value=0.0, antialias=0,
                 out_dtype=None):  # fmt: skip
    """The kernel with the attrs the constructor normalises, for ONNX's NCHW arguments."""
    if sizes is not None:
        assert tuple(sizes[:2]) == x.shape[:2]
        size, hw_scales = (int(sizes[2]), int(sizes[3])), None
    else:
        s32 = np.asarray(scales, np.float32)
        size = tuple(int(d) for d in (s32 * np.array(x.shape)).astype(int)[2:])
        hw_scales = (float(s32[2]), float(s32[3]))
    data = x if layout == "NCHW" else x.transpose(0, 2, 3, 1)
    call = op.image.resize2d(
        Var("x", struct_info=S.TensorStructInfo(data.shape, str(x.dtype))), size,
        roi=None if roi is None else (roi[2], roi[3], roi[6], roi[7]), layout=layout,
        method=METHODS[mode], coordinate_transformation_mode=coordinate_transformation_mode,
        rounding_method=nearest_mode, cubic_alpha=cubic_coeff_a, cubic_exclude=exclude_outside,
        extrapolation_value=extrapolation_value, scales=hw_scales, antialias=bool(antialias),
        out_dtype=out_dtype,
    )  # fmt: skip
    out = np.full(call.struct_info.static_shape, 77, dtype=call.struct_info.dtype)
    get_kernel("image.resize2d", "cpu")(np, dict(call.attrs), data, size, out)
    return out if layout == "NCHW" else out.transpose(0, 3, 1, 2)


def compare(x, rtol=1e-5, **kwargs):
    if "hw" in kwargs:  # sizes of H and W only
        kwargs["sizes"] = [*x.shape[:2], *kwargs.pop("hw")]
    if kwargs.get("coordinate_transformation_mode") == "tf_crop_and_resize":
        kwargs.setdefault("roi", ROI)
        kwargs.setdefault("extrapolation_value", -3.25)
    expected = reference(x, **kwargs)
    got = hetvm_resize(x, **kwargs)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    # ONNX's reference weights cubic taps in float32 (cubic_coeff_a is a float32
    # attr); the kernel in float64 (float32 for float32 data): tolerance relative to the data
    scale = float(np.abs(x.astype(np.float64)).max())
    np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), rtol=0, atol=rtol * scale)


SPECS = {
    "up-scales": {"scales": [1, 1, 2, 3]},
    "down-scales": {"scales": [1, 1, 0.6, 0.8]},  # floor(in * scale); coordinates use 0.6, not out/in
    "mixed-scales": {"scales": [1, 1, 1.7, 0.45]},
    "sizes": {"hw": [9, 3]},
    "sizes-to-one": {"hw": [1, 1]},
}


@pytest.mark.parametrize("spec", list(SPECS))
@pytest.mark.parametrize("ctm", MODES)
@pytest.mark.parametrize("mode", list(METHODS))
def test_methods_and_coordinate_modes(mode, ctm, spec, rng):
    x = rng.standard_normal((1, 2, 5, 7)).astype(np.float32)
    compare(x, mode=mode, coordinate_transformation_mode=ctm, **SPECS[spec])


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("ctm", ["half_pixel", "asymmetric", "align_corners", "tf_crop_and_resize"])
@pytest.mark.parametrize("spec", ["up-scales", "down-scales", "sizes"])
def test_nearest_modes_pick_exactly_the_reference_pixels(nearest_mode, ctm, spec, rng):
    x = rng.integers(0, 1000, (1, 2, 5, 7)).astype(np.float32)
    kwargs = dict(mode="nearest", coordinate_transformation_mode=ctm, nearest_mode=nearest_mode, **SPECS[spec])
    compare(x, rtol=0, **kwargs)


@pytest.mark.parametrize("a", [-0.75, -0.5])
@pytest.mark.parametrize("exclude", [0, 1])
@pytest.mark.parametrize("ctm", ["half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"])
@pytest.mark.parametrize("spec", ["up-scales", "down-scales", "sizes"])
def test_cubic_coefficient_and_exclude_outside(a, exclude, ctm, spec, rng):
    x = rng.standard_normal((2, 1, 4, 6)).astype(np.float64)
    compare(x, mode="cubic", coordinate_transformation_mode=ctm, cubic_coeff_a=a, exclude_outside=exclude,
            **SPECS[spec])  # fmt: skip


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("spec", [{"scales": [1, 1, 0.6, 0.35]}, {"hw": [3, 2]}, {"scales": [1, 1, 0.5, 2.5]}])
@pytest.mark.parametrize("ctm", ["half_pixel", "pytorch_half_pixel", "align_corners"])
def test_antialias_widens_the_filter_when_downsampling(mode, spec, ctm, rng):
    x = rng.standard_normal((1, 2, 7, 9)).astype(np.float32)
    compare(x, mode=mode, antialias=1, coordinate_transformation_mode=ctm, **spec)


@pytest.mark.parametrize("dtype", ["uint8", "int32", "float16", "float64"])
@pytest.mark.parametrize("mode", list(METHODS))
def test_dtypes(dtype, mode, rng):
    """Integer results are rounded half to even and clipped to the dtype, as ONNX's
    reference casts: the cubic overshoot of a 0/255 edge saturates in uint8."""
    x = (rng.standard_normal((1, 2, 4, 5)) * 100).astype(dtype)
    if dtype == "uint8":
        x = rng.integers(0, 256, (1, 2, 4, 5)).astype(dtype)
        x[0, 0] = [[0, 0, 255, 255, 255]] * 4  # a step: cubic overshoots below 0 and above 255
    kwargs = dict(mode=mode, scales=[1, 1, 1.5, 2.5])
    expected, got = reference(x, **kwargs), hetvm_resize(x, **kwargs)
    assert got.dtype == expected.dtype == np.dtype(dtype)
    if dtype == "float16":
        np.testing.assert_allclose(got.astype(float), expected.astype(float), rtol=2e-3, atol=0.1)
    elif dtype == "float64":
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5 * np.abs(x).max())
    else:
        # cubic: the reference's float32 taps may round a .5 the other way
        diff = np.abs(got.astype(np.int64) - expected.astype(np.int64))
        assert diff.max() <= (1 if mode == "cubic" else 0)
    if dtype == "uint8" and mode == "cubic":
        unclipped = hetvm_resize(x.astype(np.float64), **kwargs)[0, 0]
        assert unclipped.min() < -0.5 and unclipped.max() > 255.5
        assert got[0, 0].min() == 0 and got[0, 0].max() == 255


def test_nhwc_layout_equals_nchw(rng):
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    for kwargs in ({"mode": "cubic", "scales": [1, 1, 1.6, 0.5]}, {"mode": "nearest", "sizes": [2, 3, 7, 2]},
                   {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize", "roi": ROI,
                    "sizes": [2, 3, 4, 6], "extrapolation_value": 9.0}):  # fmt: skip
        np.testing.assert_array_equal(hetvm_resize(x, layout="NHWC", **kwargs), hetvm_resize(x, **kwargs))


def test_extrapolation_value_fills_outside_the_image():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    roi = [0, 0, -0.5, 0.25, 1, 1, 0.5, 1.5]
    got = hetvm_resize(x, roi=roi, sizes=[1, 1, 3, 3], mode="linear",
                       coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-1.0)  # fmt: skip
    # rows at -1.5, 0, 1.5 and columns at 0.75, 2.625, 4.5 (3 * roi): -1 outside
    np.testing.assert_allclose(got[0, 0], [[-1, -1, -1], [0.75, 2.625, -1], [6.75, 8.625, -1]])
    np.testing.assert_array_equal(got, reference(x, roi=roi, sizes=[1, 1, 3, 3], mode="linear",
                                                 coordinate_transformation_mode="tf_crop_and_resize",
                                                 extrapolation_value=-1.0))  # fmt: skip


def test_scale_not_out_over_in_moves_the_samples():
    """4 -> 2 rows with scale 0.6 (floor(2.4)): half_pixel samples (y + 0.5) / 0.6 - 0.5."""
    x = np.arange(4, dtype=np.float64).reshape(1, 1, 4, 1)
    got = hetvm_resize(x, scales=[1, 1, 0.6, 1], mode="linear")
    np.testing.assert_allclose(got[0, 0, :, 0], [1 / 3, 2.0])  # not 0.5, 2.5 (scale 0.5)
    np.testing.assert_allclose(hetvm_resize(x, sizes=[1, 1, 2, 1], mode="linear")[0, 0, :, 0], [0.5, 2.5])


def test_window_follows_the_reference_where_a_coordinate_is_an_ulp_past_a_pixel():
    """half_pixel_symmetric, 7 -> 5 with scale 0.8: the third sample is at
    3 + 4e-16, and ONNX's reference takes the window of pixel 3 (taps 2, 3) with the
    ratio 4e-16, i.e. pixel 2 for nearest and linear alike."""
    x = np.arange(7, dtype=np.float32).reshape(1, 1, 1, 7)
    for mode in ("nearest", "linear", "cubic"):
        kwargs = dict(mode=mode, scales=[1, 1, 1, 0.8], coordinate_transformation_mode="half_pixel_symmetric")
        np.testing.assert_allclose(hetvm_resize(x, **kwargs), reference(x, **kwargs), rtol=0, atol=1e-5)
    assert hetvm_resize(x, mode="nearest", scales=[1, 1, 1, 0.8],
                        coordinate_transformation_mode="half_pixel_symmetric")[0, 0, 0, 2] == 2  # fmt: skip


def test_tvm_round_and_tf_half_pixel_for_nn():
    """TVM's rounding 'round' (half away from zero) and the opset-11 mode
    tf_half_pixel_for_nn ((y + 0.5) / scale), which onnx.reference no longer has."""
    x = np.arange(6, dtype=np.float32).reshape(1, 1, 1, 6)
    got = hetvm_resize(x, mode="nearest", sizes=[1, 1, 1, 4], nearest_mode="round",
                       coordinate_transformation_mode="asymmetric")  # fmt: skip
    np.testing.assert_array_equal(got[0, 0, 0], [0, 2, 3, 5])  # 0, 1.5, 3, 4.5 rounded up
    got = hetvm_resize(x, mode="nearest", sizes=[1, 1, 1, 4], nearest_mode="floor",
                       coordinate_transformation_mode="tf_half_pixel_for_nn")  # fmt: skip
    np.testing.assert_array_equal(got[0, 0, 0], [0, 2, 3, 5])  # floor(0.75, 2.25, 3.75, 5.25)


def test_out_dtype_saturates():
    x = np.array([[[[-300.0, 100.7, 300.0]]]], np.float32)
    got = hetvm_resize(x, mode="nearest", sizes=[1, 1, 1, 3], out_dtype="int8")
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, [[[[-128, 101, 127]]]])


def test_identity_and_errors(rng):
    x = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    np.testing.assert_array_equal(hetvm_resize(x, mode="cubic", sizes=[1, 2, 3, 4]), x)
    taps = axis_taps(5, 5, None, "linear", "half_pixel", "round", -0.75, False, False, 0.0, 1.0)
    assert taps.identity
    taps = axis_taps(5, 3, 0.6, "cubic", "half_pixel", "round", -0.75, True, False, 0.0, 1.0)
    assert taps.index.shape == (3, 4) and not taps.index.flags.writeable
    assert taps.index.min() >= 0 and taps.index.max() <= 4
    np.testing.assert_allclose(taps.weights.sum(axis=1), 1.0)
    kernel = get_kernel("image.resize2d", "cpu")
    with pytest.raises(ValueError, match=r"output \(1, 2, 5, 5\) does not match input \(1, 2, 3, 4\) resized to \(6, 6\)"):
        kernel(np, {"layout": "NCHW"}, x, (6, 6), np.empty((1, 2, 5, 5), np.float32))
    with pytest.raises(ValueError, match="needs 4-D data"):
        kernel(np, {"layout": "NCHW"}, x[0], (6, 6), np.empty((2, 6, 6), np.float32))
