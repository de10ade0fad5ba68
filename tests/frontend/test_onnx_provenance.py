"""Errors name the ONNX node (name, op type) and its inputs at import, build and run time.

The importer gives every value it emits a span naming its node; the passes keep it
through fusion and lowering, VM codegen keeps it as per-pc debug info and graph
codegen on each kernel node, so a kernel failing inside a run says which node of the
user's model it ran for.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import hetvm  # noqa: E402
from hetvm.errors import DevicePlanError, FrontendError, HetvmRuntimeError  # noqa: E402
from hetvm.frontend import from_onnx  # noqa: E402
from hetvm.runtime.bytecode import KernelCall  # noqa: E402
from hetvm.testing.bert_like import bert_like_model  # noqa: E402


def _bindings(func):
    return [b for block in func.body.blocks for b in block.bindings]


def _node_names(model):
    return {n.name: n.op_type for n in model.graph.node}


def test_every_imported_binding_names_its_node_and_the_node_inputs():
    model = bert_like_model()
    mod = from_onnx(model)
    nodes = _node_names(model)
    for b in _bindings(mod["main"]):
        if b.var.name_hint == "last_hidden_state":  # the graph output's alias of 'context'
            continue
        assert b.span is not None and b.span.node_name in nodes, b.var.name_hint
        assert b.span.op_type == nodes[b.span.node_name]
    gather = next(b for b in _bindings(mod["main"]) if b.var.name_hint == "types")
    assert gather.span.node_inputs == ("token_type_embeddings", "token_type_ids")
    assert str(gather.span) == "ONNX node 'token_type_embedding' (Gather)"


def test_import_error_names_node_op_type_and_inputs():
    from onnx import TensorProto, helper

    node = helper.make_node("MatMul", ["a", "b"], ["y"], name="proj")
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])],
    )  # fmt: skip
    with pytest.raises(FrontendError) as info:
        from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    msg = str(info.value)
    assert "MatMul node 'proj'" in msg and "'a'" in msg and "'b'" in msg


def test_provenance_survives_fusion_and_lowering_to_every_kernel_call():
    from hetvm.cli_support.demo_model import demo_onnx_model

    model = demo_onnx_model(batch=2)
    nodes = _node_names(model)
    mod = from_onnx(model)
    exe = hetvm.build(mod, target="llvm")
    func = exe["main"]
    kernels = [pc for pc, ins in enumerate(func.instructions) if isinstance(ins, KernelCall)]
    assert kernels and all(pc in func.debug_info for pc in kernels)
    for pc in kernels:
        info = func.debug_info[pc]
        assert nodes[info["node"]] == info["op_type"]
    fused = [func.debug_info[pc] for pc in kernels if func.instructions[pc].op.startswith("nn.conv2d_bias")]
    assert fused and all(i["op_type"] in ("Conv", "Relu", "Add") for i in fused)
    graph = hetvm.build(mod, target="llvm", executor="graph").graph
    kernel_nodes = [n for n in graph["nodes"] if n["op"] == "kernel"]
    assert all(nodes[n["onnx_node"]["node"]] == n["onnx_node"]["op_type"] for n in kernel_nodes)


def test_build_error_names_the_node():
    from hetvm.cli_support.demo_model import demo_onnx_model
    from hetvm.cli_support.placement import (
        apply_pins,
        declare,
        parse_devices,
        parse_place_rules,
        pin_params,
    )

    setup = parse_devices("sim:0,cpu", {"sim:0": {"nn.softmax"}})
    mod = pin_params(declare(from_onnx(demo_onnx_model(batch=2)), setup), setup.default)
    mod, _ = apply_pins(mod, parse_place_rules(["Softmax=sim:0"], setup))
    with pytest.raises(DevicePlanError, match=r"ONNX node 'softmax' \(Softmax\)"):
        hetvm.build(mod, target="sim", plan_devices_options={"missing_kernels": {"sim:0": ["nn.softmax"]}})


def _bad_token_types():
    mod = from_onnx(bert_like_model(), shape_dict={k: (2, 3) for k in ("input_ids", "token_type_ids", "attention_mask")})
    ids = np.zeros((2, 3), np.int64)
    return mod, (ids, np.full((2, 3), 2, np.int64), np.ones((2, 3), np.int64))


def test_kernel_failing_in_a_vm_run_names_node_and_inputs():
    mod, args = _bad_token_types()
    vm = hetvm.VirtualMachine(hetvm.build(mod, target="llvm"), hetvm.cpu(0))
    with pytest.raises(HetvmRuntimeError) as info:
        vm["main"](*args)
    msg = str(info.value)
    assert msg.startswith("kernel 'take' on cpu:0 failed at ONNX node 'token_type_embedding' (Gather; "
                          "inputs 'token_type_embeddings', 'token_type_ids') in function 'main', pc ")  # fmt: skip
    assert msg.endswith("IndexError: index 2 is out of bounds for axis 0 with size 2")


def test_kernel_failing_in_a_graph_run_names_node_and_inputs():
    from hetvm import graph_executor

    mod, args = _bad_token_types()
    gm = graph_executor.create(hetvm.build(mod, target="llvm", executor="graph"), None, hetvm.cpu(0))
    for name, arr in zip(("input_ids", "token_type_ids", "attention_mask"), args):
        gm.set_input(name, arr)
    with pytest.raises(HetvmRuntimeError, match=r"'kernel:take' \(ONNX node 'token_type_embedding' \(Gather; "
                                                r"inputs 'token_type_embeddings', 'token_type_ids'\)\): IndexError"):
        gm.run()
