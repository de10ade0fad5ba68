"""ONNX Resize and Upsample imported as image.resize2d and run end to end, against
onnx.reference (and ONNX Runtime for the opset-10 forms the reference lacks)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from hetvm.errors import FrontendError  # noqa: E402
from hetvm.frontend import from_onnx  # noqa: E402
from hetvm.script import print_module  # noqa: E402
from hetvm.testing.oracle import onnxruntime_or_fail  # noqa: E402

X = np.random.default_rng(5).standard_normal((2, 3, 5, 6)).astype(np.float32)
ROI = np.array([0, 0, 0.1, 0.3, 1, 1, 1.2, 0.8], np.float32)


def resize_model(kit, *, roi=None, scales=None, sizes=None, opset=19, x_shape=X.shape, dtype="float32",
                 empty_unused=False, **attrs):  # fmt: skip
    """One Resize node: X a graph input, roi/scales/sizes initializers ('' when omitted,
    or empty tensors where opsets 11-12 need an input there)."""
    inits, order = {}, ["x"]
    for name, value, np_dtype in (("roi", roi, np.float32), ("scales", scales, np.float32), ("sizes", sizes, np.int64)):
        if value is None:
            if empty_unused and name != "sizes":
                inits[name] = np.zeros(0, np_dtype)
                order.append(name)
            else:
                order.append("")
            continue
        inits[name] = np.asarray(value, np_dtype)
        order.append(name)
    while not order[-1]:
        order.pop()
    return kit.node_model("Resize", {"x": (dtype, list(x_shape))}, inits, {"y": dtype}, opset,
                          input_order=order, **attrs)  # fmt: skip


CASES = {
    "nearest-up-scales": dict(scales=[1, 1, 2, 1.5], mode="nearest"),
    "nearest-down-sizes-ceil": dict(sizes=[2, 3, 3, 4], mode="nearest", nearest_mode="ceil"),
    "nearest-align-corners-floor": dict(sizes=[2, 3, 9, 4], mode="nearest", nearest_mode="floor",
                                        coordinate_transformation_mode="align_corners"),
    "linear-down-scales-0.6": dict(scales=[1, 1, 0.6, 0.6], mode="linear"),
    "linear-pytorch-half-pixel": dict(sizes=[2, 3, 1, 4], mode="linear",
                                      coordinate_transformation_mode="pytorch_half_pixel"),
    "linear-half-pixel-symmetric": dict(scales=[1, 1, 2.3, 0.7], mode="linear",
                                        coordinate_transformation_mode="half_pixel_symmetric"),
    "linear-antialias": dict(scales=[1, 1, 0.5, 0.4], mode="linear", antialias=1),
    "cubic-up-asymmetric": dict(scales=[1, 1, 2, 2], mode="cubic", coordinate_transformation_mode="asymmetric"),
    "cubic-a-exclude": dict(scales=[1, 1, 0.8, 1.7], mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1),
    "cubic-antialias-sizes": dict(sizes=[2, 3, 3, 2], mode="cubic", antialias=1),
    "tf-crop-and-resize": dict(roi=ROI, sizes=[2, 3, 4, 7], mode="linear",
                               coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=10.0),
    "tf-crop-and-resize-nearest": dict(roi=ROI, scales=[1, 1, 1.5, 1.5], mode="nearest",
                                       coordinate_transformation_mode="tf_crop_and_resize"),
    "axes-3-2-sizes": dict(sizes=[8, 3], axes=[3, 2], mode="linear", opset=18),
    "axes-one-scale": dict(scales=[2.5], axes=[2], mode="cubic", opset=18),
    "axes-tf-crop": dict(roi=[0.2, 0.1, 0.9, 1.1], sizes=[4, 4], axes=[2, 3], mode="linear", opset=18,
                         coordinate_transformation_mode="tf_crop_and_resize"),
    "keep-aspect-not-larger": dict(sizes=[7, 12], axes=[2, 3], keep_aspect_ratio_policy="not_larger", mode="linear",
                                   opset=18),
    "keep-aspect-not-smaller": dict(sizes=[3, 3], axes=[2, 3], keep_aspect_ratio_policy="not_smaller",
                                    mode="nearest", opset=18),
    "opset-11-scales": dict(scales=[1, 1, 1.5, 0.5], mode="linear", opset=11, empty_unused=True),
    "opset-11-sizes": dict(sizes=[2, 3, 7, 3], mode="cubic", opset=11, empty_unused=True),
    "opset-13-nearest": dict(scales=[1, 1, 3, 2], mode="nearest", opset=13),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
def test_resize_matches_the_reference(kit, name):
    case = dict(CASES[name])
    model = resize_model(kit, **case)
    mod = kit.check(model, {"x": X}, rtol=1e-5, atol=1e-5)
    assert "R.image.resize2d(" in print_module(mod)


def test_negative_axes(kit):
    """onnx.reference cannot run negative axes; they must import as the positive ones."""
    from hetvm.ir import assert_structural_equal

    for axes in ([-2], [-1, -2]):
        scales = [2.5, 0.5][: len(axes)]
        positive = [a % 4 for a in axes]
        assert_structural_equal(from_onnx(resize_model(kit, scales=scales, axes=axes, mode="cubic", opset=18)),
                                from_onnx(resize_model(kit, scales=scales, axes=positive, mode="cubic", opset=18)))


def test_scales_print_only_where_onnx_scale_is_not_out_over_in(kit):
    text = print_module(from_onnx(resize_model(kit, scales=[1, 1, 0.6, 2], mode="linear")))
    assert "scales=[0.60000002384185791, 2.0]" in text  # 5 -> 3 rows sampled with 0.6, not 0.6
    text = print_module(from_onnx(resize_model(kit, scales=[1, 1, 2, 0.5], mode="linear")))
    assert "R.image.resize2d(x, R.shape([10, 3])" in text and "scales" not in text


def test_nhwc_input_resizes_axes_1_and_2(kit):
    x = np.random.default_rng(6).standard_normal((1, 4, 5, 3)).astype(np.float32)
    model = resize_model(kit, scales=[1, 1.5, 0.6, 1], mode="cubic", x_shape=x.shape)
    mod = kit.check(model, {"x": x}, rtol=1e-5, atol=1e-5)
    assert 'layout="NHWC"' in print_module(mod)


def test_uint8_images(kit):
    x = np.random.default_rng(7).integers(0, 256, (1, 3, 4, 4)).astype(np.uint8)
    for mode in ("nearest", "linear"):
        model = resize_model(kit, scales=[1, 1, 2, 1.5], mode=mode, x_shape=x.shape, dtype="uint8")
        kit.check(model, {"x": x}, rtol=0, atol=0)


def test_identity_resize_emits_nothing(kit):
    mod = kit.check(resize_model(kit, scales=[1, 1, 1, 1], mode="cubic"), {"x": X})
    assert "resize2d" not in print_module(mod)


def test_sizes_from_a_symbolic_shape(kit):
    """sizes = Concat(Shape(x)[:2], [8, 9]): the batch stays symbolic."""
    h = kit.helper
    nodes = [
        h.make_node("Shape", ["x"], ["s"], end=2),
        h.make_node("Concat", ["s", "hw"], ["sizes"], axis=0),
        h.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear"),
    ]
    model = kit.model(nodes, {"x": ("float32", ["batch", 3, 5, 6])}, ["y"], {"hw": np.array([8, 9], np.int64)},
                      opset=19)  # fmt: skip
    mod = from_onnx(model)
    assert [str(d) for d in mod["main"].ret_struct_info.shape] == ["batch", "3", "8", "9"]
    expected = kit.reference(model, {"x": X})[0]
    np.testing.assert_allclose(kit.run(mod, [X])[0], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("scales", "mode", "layout_dims", "out_dims"), [
    ([1, 1, 2, 1.5], "linear", ["N", 3, "H", "W"], ["N", "3", "H * 2", "W + W // 2"]),
    # float32(0.6) is 5033165 / 2**23 exactly
    ([1, 1, 0.6, 0.5], "nearest", ["N", "C", "H", "W"], ["N", "C", "H * 5033165 // 8388608", "W // 2"]),
    ([1, 1.5, 0.6, 1], "cubic", [1, "H", "W", 3], ["1", "H + H // 2", "W * 5033165 // 8388608", "3"]),
])  # fmt: skip
def test_scales_on_symbolic_spatial_dims(kit, scales, mode, layout_dims, out_dims):
    """floor(in * scale) is a shape expression (exact: a float scale is p / 2**k), so
    one executable resizes every input size, on the CPU and on sim + CPU."""
    import hetvm
    from hetvm.cli_support.placement import pin_params
    from hetvm.ir import VDevice

    model = resize_model(kit, scales=scales, mode=mode, x_shape=layout_dims)
    mod = from_onnx(model)
    assert [str(d) for d in mod["main"].ret_struct_info.shape] == out_dims
    sim_mod = pin_params(mod.with_global_infos(vdevice=[VDevice("sim", 0), VDevice("llvm", 0)]), VDevice("sim", 0))
    vms = [hetvm.VirtualMachine(hetvm.build(mod, target="llvm")),
           hetvm.VirtualMachine(hetvm.build(sim_mod), [hetvm.device("sim", 0), hetvm.cpu(0)])]  # fmt: skip
    rng = np.random.default_rng(9)
    for size in ((2, 3, 5, 7), (1, 4, 3, 3), (1, 1, 11, 4)):
        shape = [s if isinstance(s, int) else size[i] for i, s in enumerate(layout_dims)]
        x = rng.standard_normal(shape).astype(np.float32)
        expected = kit.reference(model, {"x": x})[0]
        for vm in vms:
            got = vm["main"](x).copyto(hetvm.cpu(0)).numpy()
            assert got.shape == expected.shape
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_scales_kept_as_import_time_values_with_params_in_input(kit):
    model = resize_model(kit, scales=[1, 1, 0.6, 1.4], mode="linear")
    mod = from_onnx(model, keep_params_in_input=True)
    assert len(mod["main"].params) == 1  # x only: scales were read, not passed
    np.testing.assert_allclose(kit.run(mod, [X])[0], kit.reference(model, {"x": X})[0], rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# opset 10 and Upsample: asymmetric, nearest floor (up) / ceil (down)
# ---------------------------------------------------------------------------
def _legacy_model(kit, op_type, opset, scales, mode):
    if op_type == "Upsample" and opset < 9:
        return kit.node_model("Upsample", {"x": ("float32", list(X.shape))}, None, ["y"], opset, mode=mode,
                              scales=[float(s) for s in scales])  # fmt: skip
    return kit.node_model(op_type, {"x": ("float32", list(X.shape))}, {"scales": np.array(scales, np.float32)},
                          ["y"], opset, mode=mode)  # fmt: skip


def _equivalent(kit, scales, mode):
    """The same resize in opset 13's words: the oracle onnx.reference can run."""
    rounding = "ceil" if min(scales) < 1 else "floor"
    return resize_model(kit, scales=scales, mode=mode, opset=13, coordinate_transformation_mode="asymmetric",
                        nearest_mode=rounding)  # fmt: skip


LEGACY = [(op_type, opset, scales) for op_type, opset in [("Resize", 10), ("Upsample", 7), ("Upsample", 9)]
          for scales in ([1, 1, 2, 3], [1, 1, 1.7, 2.5], [1, 1, 0.6, 0.5])
          if op_type == "Resize" or min(scales) >= 1]  # Upsample only upsamples  # fmt: skip


@pytest.mark.parametrize(("op_type", "opset", "scales"), LEGACY)
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_opset_10_resize_and_upsample(kit, op_type, opset, mode, scales):
    model = _legacy_model(kit, op_type, opset, scales, mode)
    got = kit.run(from_onnx(model), [X])[0]
    expected = kit.reference(_equivalent(kit, scales, mode), {"x": X})[0]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    ort = onnxruntime_or_fail()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(got, session.run(None, {"x": X})[0], rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# rejected
# ---------------------------------------------------------------------------
def test_scales_computed_at_run_time_are_rejected(kit):
    model = kit.node_model("Resize", {"x": ("float32", list(X.shape)), "scales": ("float32", [4])}, None,
                           ["y"], 19, input_order=["x", "", "scales"], mode="linear")  # fmt: skip
    with pytest.raises(FrontendError) as err:
        from_onnx(model)
    assert str(err.value) == (
        "<model>: Resize node 'the_resize' (opset 19): input 2 (scales) is computed at run time; "
        "hetvm needs it known at import time (a constant or an initializer)"
    )


def test_sizes_computed_at_run_time_are_rejected(kit):
    """Fresh dims for sizes would hide which axes are resized: refused like scales
    (the ONNX backend then binds the input)."""
    model = kit.node_model("Resize", {"x": ("float32", list(X.shape)), "sizes": ("int64", [4])}, None,
                           ["y"], 19, input_order=["x", "", "", "sizes"], mode="linear")  # fmt: skip
    with pytest.raises(FrontendError, match=r"input 3 \(sizes\) is computed at run time; hetvm needs it known"):
        from_onnx(model)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(scales=[1, 2, 2, 2], mode="linear"),
         r"resizes axes \[1, 2, 3\] \(output dims \[2, 6, 10, 12\], scales \[1.0, 2.0, 2.0, 2.0\] for input dims "
         r"\[2, 3, 5, 6\]\); hetvm resizes two axes of a 4-D input, H and W of NCHW \(axes 2, 3\) or of NHWC"),
        (dict(scales=[1, 1, 2, 2], sizes=[2, 3, 4, 4], mode="linear"), "needs exactly one of scales and sizes, got both"),
        (dict(mode="linear"), "needs exactly one of scales and sizes, got neither"),
        (dict(scales=[1, 1, 2, 2], mode="area"), r"mode 'area' is not supported \(supported: nearest, linear, cubic\)"),
        (dict(scales=[1, 1, 0.1, 2], mode="linear"), r"scales \[1.0, 1.0, 0.1.*\] give an empty output"),
        (dict(sizes=[4, 4], axes=[2, 2], mode="linear", opset=18), r"axes \[2, 2\] repeat an axis"),
        (dict(scales=[1, 1, 2], mode="linear"), "scales has 3 value.s. for 4 axes"),
        (dict(scales=[1, 1, 2, 2], mode="nearest", coordinate_transformation_mode="corners"),
         "op 'image.resize2d': coordinate_transformation_mode must be one of half_pixel, .*; got 'corners'"),
    ],
)  # fmt: skip
def test_unsupported_resizes_name_the_node_and_the_cause(kit, kwargs, message):
    with pytest.raises(FrontendError, match=r"Resize node 'the_resize' \(opset \d+\): " + message):
        from_onnx(resize_model(kit, **kwargs))


def test_rank_3_and_mixed_legacy_nearest_are_rejected(kit):
    model = kit.node_model("Resize", {"x": ("float32", [2, 3, 5])}, {"sizes": np.array([2, 3, 9], np.int64)},
                           ["y"], 19, input_order=["x", "", "", "sizes"], mode="linear")  # fmt: skip
    with pytest.raises(FrontendError, match=r"only 4-D inputs are supported \(N, C, H, W or N, H, W, C\), got rank 3"):
        from_onnx(model)
    model = _legacy_model(kit, "Resize", 10, [1, 1, 2, 0.5], "nearest")
    with pytest.raises(FrontendError, match=r"nearest with scales \[1.0, 1.0, 2.0, 0.5\] both up- and downsamples"):
        from_onnx(model)
