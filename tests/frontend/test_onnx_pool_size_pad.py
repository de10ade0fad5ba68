"""Size of a run-time tensor, LpPool, Pad by a run-time constant, ReduceMax/Min of
an empty set, and the window generators (folded): against onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

import hetvm  # noqa: E402
from hetvm.frontend import from_onnx  # noqa: E402

try:
    from .test_onnx_index_nd import check, model
except ImportError:  # run as a file
    from test_onnx_index_nd import check, model  # type: ignore[no-redef]

RNG = np.random.default_rng(12)


def test_size_of_symbolic_dims_is_a_shape_value():
    nodes = [helper.make_node("Size", ["x"], ["n"]), helper.make_node("Range", ["zero", "n", "one"], ["y"])]
    m = model(nodes, {"x": ("float32", ["B", 3])}, {"y": ("int64", ["L"])}, {"zero": np.array(0), "one": np.array(1)})
    mod = check(m, [{"x": np.zeros((2, 3), np.float32)}, {"x": np.zeros((0, 3), np.float32)}])
    assert [str(d) for d in mod["main"].ret_struct_info.shape] == ["B * 3"]


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("attrs", [{"kernel_shape": [2, 2]}, {"kernel_shape": [3, 2], "pads": [1, 0, 1, 1], "strides": [2, 1]},
                                   {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER"}])  # fmt: skip
def test_lp_pool(p, attrs):
    m = model([helper.make_node("LpPool", ["x"], ["y"], p=p, **attrs)], {"x": ("float32", [1, 2, 5, 6])},
              {"y": ("float32", ["A", "B", "C", "D"])})  # fmt: skip
    check(m, [{"x": RNG.standard_normal((1, 2, 5, 6)).astype(np.float32)}])


def test_pad_by_a_run_time_constant_keeps_inf_and_nan():
    m = model([helper.make_node("Pad", ["x", "pads", "v"], ["y"])], {"x": ("float32", ["N", 3]), "v": ("float32", [])},
              {"y": ("float32", ["A", 6])}, {"pads": np.array([1, 2, 0, 1])}, opset=19)  # fmt: skip
    x = np.array([[1, np.inf, np.nan], [-2, 0, 3]], np.float32)
    mod = from_onnx(m)
    vm = hetvm.VirtualMachine(hetvm.build(mod, target="llvm"))
    for v in (np.float32(-7.5), np.float32(np.inf)):
        got = vm["main"](x, np.array(v)).numpy()
        np.testing.assert_array_equal(got, np.pad(x, ((1, 0), (2, 1)), constant_values=v))


@pytest.mark.parametrize("op_type,dtype", [("ReduceMax", "float32"), ("ReduceMin", "float32"), ("ReduceMax", "int32"),
                                           ("ReduceMin", "bool")])  # fmt: skip
def test_reduce_max_min_of_an_empty_set_is_the_identity(op_type, dtype):
    m = model([helper.make_node(op_type, ["x", "axes"], ["y"], keepdims=1)], {"x": (dtype, [2, 0, 4])},
              {"y": (dtype, [2, 1, 4])}, {"axes": np.array([1])})  # fmt: skip
    check(m, [{"x": np.zeros((2, 0, 4), dtype)}])


@pytest.mark.parametrize("op_type", ["HannWindow", "HammingWindow", "BlackmanWindow"])
def test_windows_fold_at_import(op_type):
    m = model([helper.make_node(op_type, ["n"], ["y"], periodic=0)], {}, {"y": ("float32", [7])}, {"n": np.array(7)})
    check(m, [{}])


@pytest.mark.parametrize("target,axes", [([3, 8], [1, 2]), ([5, 4], None), ([2], [-1])])
def test_center_crop_pad(target, axes):
    attrs = {} if axes is None else {"axes": axes}
    x_shape = [2, 6, 5] if axes is not None else [6, 5]
    out = ["A", "B", "C"][: len(x_shape)]
    m = model([helper.make_node("CenterCropPad", ["x", "s"], ["y"], **attrs)], {"x": ("float32", x_shape)},
              {"y": ("float32", out)}, {"s": np.array(target)})  # fmt: skip
    check(m, [{"x": RNG.standard_normal(x_shape).astype(np.float32)}])


def test_det_of_a_symbolic_batch():
    m = model([helper.make_node("Det", ["x"], ["y"])], {"x": ("float64", ["N", 3, 3])}, {"y": ("float64", ["N"])})
    check(m, [{"x": RNG.standard_normal((4, 3, 3))}, {"x": RNG.standard_normal((0, 3, 3))}])
