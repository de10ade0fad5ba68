"""nn.lrn: struct info, attribute checks, and one op per ONNX LRN."""

import numpy as np
import pytest

import hetvm
import hetvm.op as R
from hetvm.errors import StructInfoError
from hetvm.ir import TensorStructInfo, Var
from hetvm.ir.op_registry import infer_call


def tensor(shape, dtype="float32"):
    return Var("x", struct_info=TensorStructInfo(shape, dtype))


def test_struct_info_is_the_input_s():
    out = infer_call(R.nn.lrn(tensor((2, 5, 3, 3)), size=3))
    assert isinstance(out, TensorStructInfo)
    assert [int(d.value) for d in out.shape] == [2, 5, 3, 3] and out.dtype == "float32"


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: R.nn.lrn(tensor((2, 5, 3, 3), "int32"), size=3), "floating-point"),
        (lambda: R.nn.lrn(tensor((5,)), size=3), "channel axis"),
        (lambda: R.nn.lrn(tensor((2, 5, 3, 3)), size=0), "size must be a positive"),
        (lambda: R.nn.lrn(tensor((2, 5, 3, 3)), size=3, axis=4), "axis"),
        (lambda: R.nn.lrn(tensor((2, 5, 3, 3)), size=3, beta=float("nan")), "beta must be a finite"),
    ],
)
def test_bad_calls_are_refused_with_the_reason(build, message):
    with pytest.raises(StructInfoError, match=message):
        infer_call(build())


def test_onnx_lrn_is_one_op_and_runs_as_the_specification_says():
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from hetvm.frontend import from_onnx

    node = helper.make_node("LRN", ["x"], ["y"], size=5, alpha=1e-3, beta=0.75, bias=2.0)
    graph = helper.make_graph(
        [node], "lrn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 7, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 7, 3, 4])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    mod = from_onnx(model)
    ops = [b.value.op.name for blk in mod["main"].body.blocks for b in blk.bindings
           if hasattr(b.value, "op") and hasattr(b.value.op, "name")]  # fmt: skip
    assert ops == ["nn.lrn"]
    x = np.random.default_rng(0).standard_normal((2, 7, 3, 4)).astype("float32")
    got = hetvm.VirtualMachine(hetvm.build(mod), [hetvm.cpu(0)])["main"](x).numpy()
    # the specification, channel by channel (N != C on purpose)
    want = np.empty_like(x)
    for c in range(7):
        lo, hi = max(0, c - 2), min(6, c + 2)
        s = (x[:, lo : hi + 1] ** 2).sum(axis=1)
        want[:, c] = x[:, c] / (2.0 + 1e-3 / 5 * s) ** 0.75
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
