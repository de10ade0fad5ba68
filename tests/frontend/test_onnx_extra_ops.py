"""ONNX ops converted to the ops of hetvm/op/extra.py (trig, IsNaN/IsInf, Mod,
bitwise, CumSum/CumProd, GatherElements, Einsum): struct info and values against
onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

RNG = np.random.default_rng(2)


def uni(lo, hi, *shape):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


X = {"x": ("float32", [3, 4])}
AB_INT = {"a": ("int32", [3, 4]), "b": ("int32", [4])}


def case(op, inputs, feeds, inits=None, opset=18, outputs=("y",), **attrs):
    return dict(op=op, inputs=inputs, feeds=feeds, inits=inits, opset=opset, outputs=outputs, attrs=attrs)


INTS = {"a": RNG.integers(-20, 20, (3, 4)).astype(np.int32), "b": np.array([3, -3, 7, -5], np.int32)}
SPECIAL = np.array([[1.0, np.nan, np.inf, -np.inf]] * 3, np.float32)
U8 = {"a": ("uint8", [3, 4]), "b": ("uint8", [4])}
U8_FEEDS = {"a": RNG.integers(0, 255, (3, 4)).astype(np.uint8), "b": np.array([1, 2, 3, 7], np.uint8)}

CASES = {
    **{op: case(op, X, {"x": uni(lo, hi, 3, 4)}) for op, lo, hi in [
        ("Tan", -1.2, 1.2), ("Asin", -1, 1), ("Acos", -1, 1), ("Atan", -4, 4), ("Sinh", -3, 3),
        ("Cosh", -3, 3), ("Asinh", -4, 4), ("Acosh", 1, 4), ("Atanh", -0.9, 0.9)]},
    "IsNaN": case("IsNaN", X, {"x": SPECIAL}, outputs={"y": "bool"}),
    "IsInf": case("IsInf", X, {"x": SPECIAL}, outputs={"y": "bool"}),
    "IsInf-negative-only": case("IsInf", X, {"x": SPECIAL}, outputs={"y": "bool"}, detect_positive=0),
    "IsInf-positive-only": case("IsInf", X, {"x": SPECIAL}, outputs={"y": "bool"}, detect_negative=0),
    "Div-int-truncates": case("Div", AB_INT, INTS, outputs={"y": "int32"}),
    "Mod-int": case("Mod", AB_INT, INTS, outputs={"y": "int32"}),
    "Mod-int-fmod": case("Mod", AB_INT, INTS, outputs={"y": "int32"}, fmod=1),
    "Mod-float-fmod": case("Mod", {"a": ("float32", [3, 4]), "b": ("float32", [4])},
                           {"a": uni(-9, 9, 3, 4), "b": np.array([2.5, -2.5, 3, 7], np.float32)}, fmod=1),
    "BitwiseAnd": case("BitwiseAnd", AB_INT, INTS, outputs={"y": "int32"}),
    "BitwiseOr": case("BitwiseOr", AB_INT, INTS, outputs={"y": "int32"}),
    "BitwiseXor": case("BitwiseXor", AB_INT, INTS, outputs={"y": "int32"}),
    "BitwiseNot": case("BitwiseNot", {"a": ("int32", [3, 4])}, {"a": INTS["a"]}, outputs={"y": "int32"}),
    "BitShift-left": case("BitShift", U8, U8_FEEDS, outputs={"y": "uint8"}, direction="LEFT"),
    "BitShift-right": case("BitShift", U8, U8_FEEDS, outputs={"y": "uint8"}, direction="RIGHT"),
    "CumSum": case("CumSum", X, {"x": uni(-1, 1, 3, 4)}, {"axis": np.array(1)}),
    "CumSum-reverse-exclusive": case("CumSum", X, {"x": uni(-1, 1, 3, 4)}, {"axis": np.array(-2)},
                                     reverse=1, exclusive=1),
    "CumSum-int-reverse": case("CumSum", {"a": ("int32", [3, 4])}, {"a": INTS["a"]},
                               {"axis": np.array(0, np.int32)}, outputs={"y": "int32"}, reverse=1),
    "GatherElements": case("GatherElements", {"x": ("float32", [3, 4]), "i": ("int64", [2, 4])},
                           {"x": uni(-1, 1, 3, 4), "i": np.array([[0, -1, 2, 1], [-3, 0, 0, 2]])}),
    "GatherElements-axis1": case("GatherElements", X, {"x": uni(-1, 1, 3, 4)},
                                 {"i": np.array([[3, 0], [1, 1], [-1, 2]])}, axis=1),
    "Einsum-batch-matmul": case("Einsum", {"a": ("float32", [2, 3, 4]), "b": ("float32", [2, 4, 5])},
                                {"a": uni(-1, 1, 2, 3, 4), "b": uni(-1, 1, 2, 4, 5)},
                                equation="bij, bjk -> bik"),
    "Einsum-ellipsis-sum": case("Einsum", {"a": ("float32", [2, 3, 4])}, {"a": uni(-1, 1, 2, 3, 4)},
                                equation="...ij->...j"),
    "Einsum-implicit": case("Einsum", {"a": ("float32", [3, 4]), "b": ("float32", [4, 5])},
                            {"a": uni(-1, 1, 3, 4), "b": uni(-1, 1, 4, 5)}, equation="ij,jk"),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
def test_extra_op(kit, name):
    c = CASES[name]
    model = kit.node_model(c["op"], dict(c["inputs"]), c["inits"], c["outputs"], c["opset"], **c["attrs"])
    kit.check(model, c["feeds"], rtol=1e-5, atol=1e-6)


def test_cumsum_axis_must_be_known(kit):
    from hetvm.errors import FrontendError
    from hetvm.frontend import from_onnx

    model = kit.node_model("CumSum", {"x": ("float32", [3, 4]), "ax": ("int64", [])}, opset=18)
    with pytest.raises(FrontendError, match="CumSum node .*axis must be a constant known at import time"):
        from_onnx(model)


def test_gather_elements_of_constants_folds_at_import():
    # ALBERT's legacy export gathers its (1, 64) token-type buffer with (1, seq)
    # constant positions; onnx.reference's GatherElements fails on those shapes
    from onnx import TensorProto, helper, numpy_helper

    import hetvm
    from hetvm.frontend import from_onnx

    data = np.arange(64, dtype=np.int64).reshape(1, 64) * 3
    positions = np.array([[4, 0, 63, -1, 7]], np.int64)
    graph = helper.make_graph(
        [helper.make_node("GatherElements", ["data", "positions"], ["g"], axis=1),
         helper.make_node("Add", ["g", "x"], ["y"])],
        "fold_gather_elements",
        [helper.make_tensor_value_info("x", TensorProto.INT64, [1, 5])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [1, 5])],
        [numpy_helper.from_array(data, "data"), numpy_helper.from_array(positions, "positions")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    exe = hetvm.build(from_onnx(model), target="llvm")
    x = np.ones((1, 5), np.int64)
    got = hetvm.VirtualMachine(exe, hetvm.cpu(0))["main"](x).numpy()
    np.testing.assert_array_equal(got, data[0, positions % 64] + 1)
