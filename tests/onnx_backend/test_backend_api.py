"""``hetvm.onnx_backend`` as a library: devices, input forms, run_node, errors."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

from hetvm.errors import FrontendError  # noqa: E402
from hetvm.onnx_backend import HetvmBackend  # noqa: E402


@pytest.fixture(scope="module")
def cnn():
    from hetvm.cli_support.demo_model import demo_onnx_model

    return demo_onnx_model(batch=2)


@pytest.fixture(scope="module")
def image():
    return np.random.default_rng(3).standard_normal((2, 3, 32, 32)).astype(np.float32)


def test_supports_cpu_only_without_a_gpu():
    assert HetvmBackend.supports_device("CPU")
    assert not HetvmBackend.supports_device("FPGA")


def test_run_model_list_and_dict_inputs_agree(cnn, image):
    (a,) = HetvmBackend.run_model(cnn, [image])
    rep = HetvmBackend.prepare(cnn)
    (b,) = rep.run({"image": image})
    (c,) = rep.run(image)
    assert a.shape == (2, 10)
    np.testing.assert_allclose(a.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    assert rep.input_names == ["image"] and rep.output_names == ["probs"]


def test_heterogeneous_prepare_matches_cpu(cnn, image):
    (cpu,) = HetvmBackend.run_model(cnn, [image])
    rep = HetvmBackend.prepare(cnn, devices=["sim:0", "cpu"], missing_kernels={"sim:0": ["nn.softmax"]})
    assert [str(d) for d in rep.vm.exe_devices] == ["sim:0", "cpu:0"]
    (het,) = rep.run([image])
    np.testing.assert_allclose(het, cpu, rtol=1e-5, atol=1e-7)
    # the VM really used both devices
    report = rep.vm.memory_report()
    assert report["sim:0"]["peak_bytes"] > 0 and report["cpu:0"]["peak_bytes"] > 0


def test_wrong_inputs_are_named(cnn, image):
    rep = HetvmBackend.prepare(cnn)
    with pytest.raises(FrontendError, match="takes 1 input"):
        rep.run([image, image])
    with pytest.raises(FrontendError, match="missing \\['image'\\], unknown \\['x'\\]"):
        rep.run({"x": image})


def test_run_node_wraps_one_node():
    node = helper.make_node("Relu", ["x"], ["y"])
    x = np.array([[-1.0, 2.0], [3.0, -4.0]], np.float32)
    (y,) = HetvmBackend.run_node(node, [x], outputs_info=[(np.float32, (2, 2))])
    np.testing.assert_array_equal(y, np.maximum(x, 0))


def test_unknown_device_and_bad_model():
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(FrontendError, match="does not know device 'TPU'"):
        HetvmBackend.prepare(model, "TPU")
    with pytest.raises(FrontendError, match="not an ONNX model"):
        HetvmBackend.prepare(b"garbage bytes")


def _reduce_sum_model():
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
                                            helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_runtime_axes_are_bound_per_value():
    rep = HetvmBackend.prepare(_reduce_sum_model())
    assert rep.bound_inputs == ["axes"] and rep.vm is None
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    for axis in (1, 2, 1, -1):
        (y,) = rep.run({"x": x, "axes": np.array([axis])})
        np.testing.assert_allclose(y, x.sum(axis=axis), rtol=1e-5, atol=1e-6)
    # one compiled module per distinct value: 1, 2 and -1 (1 came from the cache)
    assert len(rep._binder.cache) == 3
    assert [name for name, _ in rep._param_info] == ["x"]


def test_prepare_still_fails_fast_for_other_causes():
    # an operator without a converter fails in prepare, even with a bindable input
    node = helper.make_node("NonMaxSuppression", ["x", "k"], ["v"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
                                            helper.make_tensor_value_info("k", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("v", TensorProto.INT64, [2, 3])])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(FrontendError, match="unsupported ONNX operator"):
        HetvmBackend.prepare(model)
    # a run-time axes input too large to bind keeps the importer's error
    big = _reduce_sum_model()
    big.graph.input[1].type.tensor_type.shape.dim[0].dim_value = 65
    with pytest.raises(FrontendError, match="axes must be a constant known at import time"):
        HetvmBackend.prepare(big)


def test_small_integer_data_input_stays_an_input():
    node = helper.make_node("CumSum", ["x", "axis"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.INT32, [2, 3]),
                                            helper.make_tensor_value_info("axis", TensorProto.INT32, [])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [2, 3])])  # fmt: skip
    rep = HetvmBackend.prepare(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]))
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    for axis in (0, 1):
        (y,) = rep.run([x, np.array(axis, np.int32)])
        np.testing.assert_array_equal(y, np.cumsum(x, axis=axis))
    assert rep.bound_inputs == ["axis"]
    (y,) = rep.run([x + 1, np.array(1, np.int32)])  # new data, cached module
    np.testing.assert_array_equal(y, np.cumsum(x + 1, axis=1))
    assert len(rep._binder.cache) == 2


def test_float_scales_of_resize_are_bound_but_float_data_is_not():
    """Resize's float ``scales`` input is a parameter, bound per value; a small
    float data input read at index 1 (Add's second operand) stays an input."""
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["r"], mode="nearest"),
             helper.make_node("Add", ["r", "bias"], ["y"])]  # fmt: skip
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2]),
                                           helper.make_tensor_value_info("scales", TensorProto.FLOAT, [4]),
                                           helper.make_tensor_value_info("bias", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b", "c", "d"])])  # fmt: skip
    rep = HetvmBackend.prepare(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]))
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    bias = np.array([0.5], np.float32)
    (y,) = rep.run([x, np.array([1, 1, 2, 2], np.float32), bias])
    np.testing.assert_array_equal(y, x.repeat(2, axis=2).repeat(2, axis=3) + 0.5)
    (y,) = rep.run([x, np.array([1, 1, 1, 3], np.float32), bias + 1])
    np.testing.assert_array_equal(y, x.repeat(3, axis=3) + 1.5)
    assert rep.bound_inputs == ["scales"]


def test_a_shape_read_from_an_input_at_run_time_is_bound_instead():
    """Reshape's target as a graph input imports (fresh dims from its values), but
    ONNX's 0 and -1 need the values: the backend binds such an input."""
    node = helper.make_node("Reshape", ["x", "s"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
                                            helper.make_tensor_value_info("s", TensorProto.INT64, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b", "c"])])  # fmt: skip
    rep = HetvmBackend.prepare(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]))
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for shape in ([0, -1, 2], [4, 3, 2]):
        (y,) = rep.run([x, np.array(shape)])
        np.testing.assert_array_equal(y, x.reshape(2, 6, 2) if shape[0] == 0 else x.reshape(4, 3, 2))
    assert rep.bound_inputs == ["s"]


def test_attribute_like_inputs_are_found_inside_if_branches():
    """``axis`` is read as CumSum's axis only inside a branch: it is bound, while the
    condition and the data stay run-time inputs (the If is decided when it runs)."""
    i32 = TensorProto.INT32
    then = helper.make_graph([helper.make_node("CumSum", ["x", "axis"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", i32, None)])  # fmt: skip
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", i32, None)])  # fmt: skip
    node = helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                            helper.make_tensor_value_info("x", i32, [2, 3]),
                                            helper.make_tensor_value_info("axis", i32, [])],
                              [helper.make_tensor_value_info("y", i32, [2, 3])])  # fmt: skip
    rep = HetvmBackend.prepare(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]))
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    for cond, axis in ((True, 0), (True, 1), (False, 1)):
        (y,) = rep.run([np.array(cond), x, np.array(axis, np.int32)])
        np.testing.assert_array_equal(y, np.cumsum(x, axis=axis) if cond else -x)
    assert rep.bound_inputs == ["axis"]
