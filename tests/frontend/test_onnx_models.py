"""Whole models: the nine light models the onnx package ships, and a transformer
encoder layer built with onnx.helper (symbolic batch and sequence length)."""

from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hetvm.frontend import from_onnx  # noqa: E402
from hetvm.ir import PrimVar  # noqa: E402
from hetvm.ir import prim as P  # noqa: E402
from hetvm.testing.light_models import light_dir, light_expected, light_input, light_names  # noqa: E402

LIGHT_DIR = light_dir()
LIGHT = light_names()


_expected = light_expected

_dummy_input = light_input


def test_all_nine_light_models_are_present():
    assert len(LIGHT) == 9, LIGHT


@pytest.mark.parametrize("name", LIGHT)
def test_light_model_imports(name):
    path = os.path.join(LIGHT_DIR, f"light_{name}.onnx")
    mod = from_onnx(path)
    ret = mod["main"].ret_struct_info
    expected = _expected(name)
    assert ret.static_shape == expected.shape and ret.dtype == "float32"
    (param,) = mod["main"].params  # weights were folded into constants
    node_of = mod.attrs["onnx_node_of"]
    ops = {op for _, op in node_of.values()}
    assert "Conv" in ops and "ConstantOfShape" not in ops


# Numerical runs of the nine light models (CPU and sim+CPU) live in
# test_light_models_devices.py.


# --------------------------------------------------------------------------
# a transformer encoder layer (BERT-style, as exporters write it)
# --------------------------------------------------------------------------


def encoder_model(hidden: int = 32, heads: int = 4, ffn: int = 64, opset: int = 17, seed: int = 0):
    """One post-LN encoder layer with symbolic (batch, seq); the reshape targets
    are computed from Shape like PyTorch exports do."""
    rng = np.random.default_rng(seed)
    hd = hidden // heads

    def w(*shape):
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    inits = {
        "wqkv": w(hidden, 3 * hidden), "bqkv": w(3 * hidden), "wo": w(hidden, hidden), "bo": w(hidden),
        "w1": w(hidden, ffn), "b1": w(ffn), "w2": w(ffn, hidden), "b2": w(hidden),
        "g1": np.ones(hidden, np.float32), "be1": np.zeros(hidden, np.float32),
        "g2": (1 + w(hidden)), "be2": w(hidden),
        "split": np.array([hidden] * 3), "i0": np.array(0), "i1": np.array(1), "ax0": np.array([0]),
        "heads_hd": np.array([heads, hd]), "hidden_": np.array([hidden]),
        "scale": np.array(np.sqrt(hd), np.float32), "half": np.array(0.5, np.float32),
        "one": np.array(1.0, np.float32), "sqrt2": np.array(np.sqrt(2.0), np.float32),
        "neg": np.array(-1e4, np.float32), "two": np.array(2.0, np.float32),
        "eps": np.array(1e-5, np.float32), "ax_last": np.array([-1]), "ax12": np.array([1, 2]),
    }  # fmt: skip
    mk = helper.make_node
    nodes = [
        # shape arithmetic: (batch, seq, heads, hd) and (batch, seq, hidden)
        mk("Shape", ["x"], ["xs"]),
        mk("Gather", ["xs", "i0"], ["b"], axis=0),
        mk("Gather", ["xs", "i1"], ["s"], axis=0),
        mk("Unsqueeze", ["b", "ax0"], ["bu"]),
        mk("Unsqueeze", ["s", "ax0"], ["su"]),
        mk("Concat", ["bu", "su", "heads_hd"], ["split_shape"], axis=0),
        mk("Concat", ["bu", "su", "hidden_"], ["merge_shape"], axis=0),
        # attention
        mk("MatMul", ["x", "wqkv"], ["qkv0"]),
        mk("Add", ["qkv0", "bqkv"], ["qkv"]),
        mk("Split", ["qkv", "split"], ["q0", "k0", "v0"], axis=-1),
        mk("Reshape", ["q0", "split_shape"], ["q1"]),
        mk("Reshape", ["k0", "split_shape"], ["k1"]),
        mk("Reshape", ["v0", "split_shape"], ["v1"]),
        mk("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
        mk("Transpose", ["k1"], ["kt"], perm=[0, 2, 3, 1]),
        mk("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
        mk("MatMul", ["q", "kt"], ["sc0"]),
        mk("Div", ["sc0", "scale"], ["sc1"]),
        # mask (batch, seq) of 0/1 -> additive (batch, 1, 1, seq)
        mk("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT),
        mk("Unsqueeze", ["maskf", "ax12"], ["mask4"]),
        mk("Sub", ["one", "mask4"], ["inv"]),
        mk("Mul", ["inv", "neg"], ["madd"]),
        mk("Add", ["sc1", "madd"], ["sc"]),
        mk("Softmax", ["sc"], ["p"], axis=-1),
        mk("MatMul", ["p", "v"], ["ctx0"]),
        mk("Transpose", ["ctx0"], ["ctx1"], perm=[0, 2, 1, 3]),
        mk("Reshape", ["ctx1", "merge_shape"], ["ctx"]),
        mk("MatMul", ["ctx", "wo"], ["att0"]),
        mk("Add", ["att0", "bo"], ["att"]),
        mk("Add", ["att", "x"], ["res1"]),
        mk("LayerNormalization", ["res1", "g1", "be1"], ["h1"], axis=-1, epsilon=1e-5),
        # feed-forward with erf-GELU
        mk("MatMul", ["h1", "w1"], ["f0"]),
        mk("Add", ["f0", "b1"], ["f1"]),
        mk("Div", ["f1", "sqrt2"], ["f2"]),
        mk("Erf", ["f2"], ["f3"]),
        mk("Add", ["f3", "one"], ["f4"]),
        mk("Mul", ["f1", "f4"], ["f5"]),
        mk("Mul", ["f5", "half"], ["f6"]),
        mk("MatMul", ["f6", "w2"], ["f7"]),
        mk("Add", ["f7", "b2"], ["f8"]),
        mk("Add", ["f8", "h1"], ["res2"]),
        # the second LayerNorm spelled out, as older exporters do
        mk("ReduceMean", ["res2"], ["mu"], axes=[-1]),
        mk("Sub", ["res2", "mu"], ["d"]),
        mk("Pow", ["d", "two"], ["d2"]),
        mk("ReduceMean", ["d2"], ["var"], axes=[-1]),
        mk("Add", ["var", "eps"], ["ve"]),
        mk("Sqrt", ["ve"], ["sd"]),
        mk("Div", ["d", "sd"], ["nrm"]),
        mk("Mul", ["nrm", "g2"], ["n1"]),
        mk("Add", ["n1", "be2"], ["y"]),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", hidden]),
        helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "seq"]),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", hidden])]
    graph = helper.make_graph(
        nodes, "encoder", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 9)
    onnx.checker.check_model(model)
    return model


def _encoder_feeds(batch=2, seq=5, hidden=32):
    rng = np.random.default_rng(1)
    mask = np.ones((batch, seq), np.int64)
    mask[1, -2:] = 0
    return {"x": rng.standard_normal((batch, seq, hidden)).astype(np.float32), "mask": mask}


def test_encoder_imports_with_symbolic_batch_and_seq():
    mod = from_onnx(encoder_model())
    x, mask = mod["main"].params
    batch, seq = x.struct_info.shape[:2]
    assert isinstance(batch, PrimVar) and batch.name == "batch"
    assert mask.struct_info.shape[0] is batch and mask.struct_info.shape[1] is seq
    ret = mod["main"].ret_struct_info
    assert ret.shape[0] is batch and ret.shape[1] is seq and P.const_value(ret.shape[2]) == 32
    ops = [b.value.op.name for b in mod["main"].body.blocks[0].bindings if hasattr(b.value, "op")]
    # the Shape/Gather/Concat chain folded away into symbolic reshapes
    assert "take" not in ops and "concat" not in ops and "shape_of" not in ops
    assert ops.count("reshape") == 4


def test_encoder_matches_reference(kit):
    model = encoder_model()
    kit.check(model, _encoder_feeds(), rtol=1e-4, atol=1e-4,
              shape_dict={"x": (2, 5, 32), "mask": (2, 5)})  # fmt: skip


def test_encoder_symbolic_runs(kit):
    model = encoder_model()
    mod = from_onnx(model)
    feeds = _encoder_feeds(batch=3, seq=7)
    (got,) = kit.run(mod, list(feeds.values()))
    (expected,) = kit.reference(model, feeds)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_light_model_with_params_in_input():
    mod = from_onnx(os.path.join(LIGHT_DIR, "light_squeezenet.onnx"), keep_params_in_input=True)
    func = mod["main"]
    params = mod.attrs["params"]
    assert func.attrs["num_input"] == 1
    assert [p.name_hint for p in func.params[1:]] == list(params)
    assert len(params) == 52  # 26 convolutions: weight and bias each
    for var in func.params[1:]:
        assert var.struct_info.static_shape == params[var.name_hint].shape
