"""Importer behaviour: bad files, unsupported ops, inputs, parameters, folding, node mapping."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

from hetvm.errors import FrontendError  # noqa: E402
from hetvm.frontend import from_onnx  # noqa: E402
from hetvm.ir import Constant, PrimVar, Var  # noqa: E402
from hetvm.ir import prim as P  # noqa: E402
from hetvm.ir import struct_info as S  # noqa: E402


def _bindings(mod):
    return [b for blk in mod["main"].body.blocks for b in blk.bindings]


def _op_names(mod):
    return [b.value.op.name for b in _bindings(mod) if hasattr(b.value, "op") and hasattr(b.value.op, "name")]


def _relu_model(kit, shape=(2, 3)):
    return kit.node_model("Relu", {"x": ("float32", list(shape))})


# -- bad input -------------------------------------------------------------------


def test_missing_file_names_it(tmp_path):
    path = tmp_path / "nope.onnx"
    with pytest.raises(FrontendError, match="nope.onnx: no such file"):
        from_onnx(path)


def test_not_onnx_file(tmp_path):
    path = tmp_path / "notes.onnx"
    path.write_bytes(b"\xff\xfe this is certainly not a protobuf \x00\x01\x02")
    with pytest.raises(FrontendError, match="notes.onnx") as info:
        from_onnx(str(path))
    assert "\n" not in str(info.value)


def test_truncated_file(kit, tmp_path):
    data = _relu_model(kit).SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(FrontendError, match="cut.onnx") as info:
        from_onnx(path)
    assert "\n" not in str(info.value)


def test_invalid_graph_fails_the_checker(kit, tmp_path):
    model = _relu_model(kit)
    model.graph.node[0].input[0] = "undefined_value"
    path = tmp_path / "bad.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(FrontendError, match="bad.onnx: invalid ONNX model") as info:
        from_onnx(path)
    assert "\n" not in str(info.value)


def test_wrong_argument_type():
    with pytest.raises(FrontendError, match="ModelProto or a path"):
        from_onnx(42)


def test_model_from_path_and_bytes(kit, tmp_path):
    model = _relu_model(kit)
    path = tmp_path / "ok.onnx"
    onnx.save(model, path)
    for source in (path, str(path), model.SerializeToString()):
        mod = from_onnx(source)
        assert mod["main"].ret_struct_info.static_shape == (2, 3)


# -- unsupported operators --------------------------------------------------------


def test_unsupported_ops_are_all_listed(kit):
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("RandomUniformLike", ["a"], ["b"]),
        helper.make_node("Bernoulli", ["a"], ["c"]),
        helper.make_node("RandomUniformLike", ["x"], ["d"]),
        helper.make_node("DFT", ["a"], ["y"]),
    ]
    model = kit.model(nodes, {"x": ("float32", [1, 4, 2, 2])}, ["y"])
    with pytest.raises(FrontendError) as info:
        from_onnx(model)
    msg = str(info.value)
    assert "3 unsupported ONNX operator(s)" in msg
    for op in ("DFT (opset 17)", "Bernoulli (opset 17)", "RandomUniformLike (opset 17)"):
        assert op in msg
    assert "Relu" not in msg


def test_op_too_old_for_its_converter_is_unsupported(kit):
    model = kit.node_model("LayerNormalization", {"x": ("float32", [2, 4])}, {"g": np.ones(4, np.float32)})
    with pytest.raises(FrontendError, match=r"LayerNormalization \(opset 16\)"):
        from_onnx(model, opset=16)


def test_unsupported_attribute_names_the_node(kit):
    model = kit.node_model("MaxPool", {"x": ("float32", [1, 1, 4, 4])}, kernel_shape=[2, 2], storage_order=1)
    with pytest.raises(FrontendError, match="MaxPool node 'the_maxpool'.*storage_order"):
        from_onnx(model)


def test_window_attributes_must_match_the_spatial_rank(kit):
    """Found by the damaged-model fuzz test: a 1-value kernel_shape on a 2-D pool
    failed with IndexError inside the converter."""
    model = kit.node_model("MaxPool", {"x": ("float32", [1, 1, 4, 4])}, kernel_shape=[2])
    with pytest.raises(FrontendError, match="MaxPool node 'the_maxpool'.*'kernel_shape' needs 2 value"):
        from_onnx(model)
    model = kit.node_model("AveragePool", {"x": ("float32", [1, 1, 4, 4])}, kernel_shape=[2, 2], strides=[0, 1])
    with pytest.raises(FrontendError, match="'strides' values must be positive"):
        from_onnx(model)


def test_split_sections_must_match_the_outputs(kit):
    """Found by the fuzz test: num_outputs=2**33 built a list of 8 billion sections
    (the importer now holds num_outputs to the node's outputs)."""
    model = kit.node_model("Split", {"x": ("float32", [4, 2])}, outputs=("a", "b"), opset=18,
                           axis=0, num_outputs=3)  # fmt: skip
    with pytest.raises(FrontendError, match="num_outputs=3, but the node has 2 output"):
        from_onnx(model)


def test_a_constant_node_its_folder_refuses_is_a_frontend_error(kit):
    """Found by the fuzz test: an Einsum of constants with a damaged equation went
    to onnx.reference, whose TypeError escaped the importer."""
    a = np.ones((2, 3), "float32")
    model = kit.node_model("Einsum", {}, initializers={"a": a}, equation="ij->jk")
    with pytest.raises(FrontendError, match="Einsum node 'the_einsum'.*cannot evaluate it on its constant inputs"):
        from_onnx(model)


def test_shape_error_names_node_and_inputs(kit):
    model = kit.node_model("MatMul", {"a": ("float32", [2, 3]), "b": ("float32", ["k", 5])})
    with pytest.raises(FrontendError, match="MatMul node 'the_matmul'") as info:
        from_onnx(model, shape_dict={"b": (4, 5)})
    assert "'a'" in str(info.value) and "'b'" in str(info.value)


# -- inputs ---------------------------------------------------------------------------


def test_dim_params_are_shared_prim_vars(kit):
    model = kit.node_model("Add", {"a": ("float32", ["batch", 4]), "b": ("float32", ["batch", 4])})
    mod = from_onnx(model)
    a, b = mod["main"].params
    assert isinstance(a.struct_info.shape[0], PrimVar)
    assert a.struct_info.shape[0] is b.struct_info.shape[0]
    assert a.struct_info.shape[0].name == "batch"
    ret = mod["main"].ret_struct_info
    assert P.prove_equal(ret.shape[0], a.struct_info.shape[0])


def test_unnamed_unknown_dim_gets_a_fresh_var(kit):
    model = kit.node_model("Relu", {"x": ("float32", [None, 3])})
    (x,) = from_onnx(model)["main"].params
    assert isinstance(x.struct_info.shape[0], PrimVar)


def test_shape_dict_overrides_and_names_symbolic_dims(kit):
    model = kit.node_model("Relu", {"x": ("float32", ["n", 3])})
    (x,) = from_onnx(model, shape_dict={"x": (8, 3)})["main"].params
    assert x.struct_info.static_shape == (8, 3)
    (x,) = from_onnx(model, shape_dict={"x": ("m", 3)})["main"].params
    assert x.struct_info.shape[0].name == "m"


def test_shape_dict_with_unknown_name(kit):
    with pytest.raises(FrontendError, match=r"unknown input\(s\) \['nope'\].*\['x'\]"):
        from_onnx(_relu_model(kit), shape_dict={"nope": (1,)})


def test_initializers_listed_as_inputs_are_constants(kit):
    model = kit.node_model("Add", {"x": ("float32", [3])}, {"w": np.ones(3, np.float32)})
    model.graph.input.append(helper.make_tensor_value_info("w", onnx.TensorProto.FLOAT, [3]))
    mod = from_onnx(model)
    assert [p.name_hint for p in mod["main"].params] == ["x"]


# -- parameters ------------------------------------------------------------------------


def test_initializers_become_constants_by_default(kit):
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    model = kit.node_model("MatMul", {"x": ("float32", [4, 2])}, {"w": w})
    mod = from_onnx(model)
    (binding,) = _bindings(mod)[:1]
    const = binding.value.args[1]
    assert isinstance(const, Constant) and np.array_equal(const.data, w)
    assert "params" not in mod.attrs


def test_keep_params_in_input(kit):
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    nodes = [
        helper.make_node("ConstantOfShape", ["bshape"], ["b"],
                         value=onnx.numpy_helper.from_array(np.array([0.5], np.float32))),  # fmt: skip
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["y"]),
    ]
    model = kit.model(nodes, {"x": ("float32", [4, 2])}, ["y"], {"w": w, "bshape": np.array([3])})
    mod = from_onnx(model, keep_params_in_input=True)
    func = mod["main"]
    assert [p.name_hint for p in func.params] == ["x", "w", "b"]
    assert func.attrs["num_input"] == 1
    params = mod.attrs["params"]
    assert list(params) == ["w", "b"]
    assert np.array_equal(params["w"], w) and np.array_equal(params["b"], np.full(3, 0.5, np.float32))
    assert func.params[2].struct_info.static_shape == (3,)


# -- folding ------------------------------------------------------------------------------


def test_constant_of_shape_weights_fold_once(kit):
    nodes = [
        helper.make_node("ConstantOfShape", ["wshape"], ["w"],
                         value=onnx.numpy_helper.from_array(np.array([0.02], np.float32))),  # fmt: skip
        helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3]),
    ]
    model = kit.model(nodes, {"x": ("float32", [1, 2, 5, 5])}, ["y"], {"wshape": np.array([4, 2, 3, 3])})
    mod = kit.check(model, {"x": np.ones((1, 2, 5, 5), np.float32)})
    assert _op_names(mod) == ["nn.conv2d"]
    weight = _bindings(mod)[0].value.args[1]
    assert isinstance(weight, Constant) and weight.data.shape == (4, 2, 3, 3)
    assert np.allclose(weight.data, 0.02) and weight.data.dtype == np.float32


def test_constant_subgraph_without_numpy_folder_uses_reference(kit):
    # Softmax of an initializer is evaluated at import time, not at run time.
    nodes = [
        helper.make_node("Softmax", ["w"], ["ws"], axis=-1),
        helper.make_node("Mul", ["x", "ws"], ["y"]),
    ]
    w = np.array([1.0, 2.0, 3.0], np.float32)
    model = kit.model(nodes, {"x": ("float32", [3])}, ["y"], {"w": w})
    mod = kit.check(model, {"x": np.ones(3, np.float32)})
    assert _op_names(mod) == ["multiply"]


def test_constant_node_and_output_constant(kit):
    c = onnx.numpy_helper.from_array(np.array([1.0, 2.0], np.float32))
    nodes = [helper.make_node("Constant", [], ["c"], value=c), helper.make_node("Neg", ["c"], ["y"])]
    model = kit.model(nodes, {}, ["y"])
    mod = from_onnx(model)
    assert mod["main"].ret_struct_info.static_shape == (2,)


@pytest.mark.parametrize("op", ["Abs", "Sqrt", "Neg", "Relu"])
def test_folded_scalar_initializer_is_a_known_value(kit, op):
    """Regression (ONNX composition fuzz): NumPy ufuncs give a 0-d array's result
    as a NumPy scalar, so Abs of a scalar initializer folded to an np.int64 that
    the importer did not take as known (AttributeError on a graph output)."""
    dtype = "int64" if op != "Sqrt" else "float32"
    nodes = [helper.make_node(op, ["w"], ["y"]), helper.make_node("Add", ["x", "y"], ["z"])]
    inits = {"w": np.asarray(4 if op == "Sqrt" else -4, dtype)}
    model = kit.model(nodes, {"x": (dtype, [2])}, {"y": dtype, "z": dtype}, inits)
    kit.check(model, {"x": np.asarray([1, 2], dtype)})


@pytest.mark.parametrize("axis", [-2, -1, 0, 1, 2])
def test_folded_flatten_negative_axis(kit, axis):
    """Regression (ONNX composition fuzz): the folder took Flatten's axis modulo
    rank + 1, so axis=-1 of a (5, 2) initializer gave (10, 1), not (5, 2)."""
    w = np.arange(10, dtype=np.float32).reshape(5, 2)
    nodes = [helper.make_node("Flatten", ["w"], ["f"], axis=axis), helper.make_node("Relu", ["f"], ["y"])]
    model = kit.model(nodes, {}, ["y"], {"w": w})
    kit.check(model, {})


def test_symbolic_shape_chain_becomes_a_symbolic_reshape(kit):
    """Shape of an input with a symbolic batch folds to (batch, -1) arithmetic."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Slice", ["s", "zero", "one"], ["lead"]),
        helper.make_node("Concat", ["lead", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    inits = {"zero": np.array([0]), "one": np.array([1]), "minus1": np.array([-1])}
    model = kit.model(nodes, {"x": ("float32", ["batch", 3, 4])}, ["y"], inits)
    mod = from_onnx(model)
    assert _op_names(mod) == ["reshape"]
    batch = mod["main"].params[0].struct_info.shape[0]
    ret = mod["main"].ret_struct_info
    assert ret.shape[0] is batch and P.const_value(ret.shape[1]) == 12


def test_symbolic_constant_of_shape_emits_full(kit):
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("ConstantOfShape", ["s"], ["z"]),
        helper.make_node("Add", ["x", "z"], ["y"]),
    ]
    model = kit.model(nodes, {"x": ("float32", ["n", 2])}, ["y"])
    mod = from_onnx(model)
    assert _op_names(mod) == ["full", "add"]


def test_symbolic_shape_used_as_a_tensor_is_materialised(kit):
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Cast", ["s"], ["sf"], to=onnx.TensorProto.FLOAT),
        helper.make_node("Mul", ["sf", "sf"], ["y"]),
    ]
    model = kit.model(nodes, {"x": ("float32", ["n", 2])}, ["y"])
    mod = from_onnx(model)
    assert _op_names(mod)[0] == "shape_to_tensor"
    x = np.zeros((3, 2), np.float32)
    (got,) = kit.run(mod, [x])
    np.testing.assert_array_equal(got, np.array([9.0, 4.0], np.float32))


def test_output_variable_keeps_the_onnx_name(kit):
    mod = from_onnx(kit.node_model("Relu", {"x": ("float32", [2])}, outputs=["relu_out"]))
    assert mod["main"].body.body.name_hint == "relu_out"


# -- outputs and node mapping -------------------------------------------------------------


def test_several_outputs_make_a_tuple(kit):
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["x"], ["b"])]
    model = kit.model(nodes, {"x": ("float32", [2])}, ["a", "b"])
    ret = from_onnx(model)["main"].ret_struct_info
    assert isinstance(ret, S.TupleStructInfo) and len(ret.fields) == 2


def test_node_mapping_names_node_and_op_type(kit):
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv_1", kernel_shape=[1, 1]),
        helper.make_node("Relu", ["c"], ["y"]),  # unnamed: gets Relu_1
    ]
    inits = {"w": np.ones((2, 1, 1, 1), np.float32)}
    model = kit.model(nodes, {"x": ("float32", [1, 1, 2, 2])}, ["y"], inits)
    mod = from_onnx(model)
    node_of = mod.attrs["onnx_node_of"]
    by_var = {b.var.name_hint: b for b in _bindings(mod)}
    assert set(node_of) <= set(by_var)
    assert ("conv_1", "Conv") in node_of.values()
    assert ("Relu_1", "Relu") in node_of.values()
    conv_vars = [v for v, (n, _) in node_of.items() if n == "conv_1"]
    assert [by_var[v].value.op.name for v in conv_vars] == ["nn.conv2d"]
    for var in mod["main"].params:
        assert isinstance(var, Var)


def test_other_domains_are_listed_with_their_domain(kit):
    nodes = [helper.make_node("FusedGemm", ["x"], ["y"], domain="com.microsoft")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])],
    )  # fmt: skip
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    with pytest.raises(FrontendError, match=r"com\.microsoft\.FusedGemm \(opset 1\)"):
        from_onnx(model)
