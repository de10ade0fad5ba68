"""Per-pc debug info of an executable (the model node an instruction runs for).

Optional in the JSON: executables without it (older artifacts, programs from
TVMScript) load as before; a malformed entry is a clear error, never a crash.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import hetvm
from hetvm.errors import ArtifactError, HetvmRuntimeError
from hetvm.runtime.bytecode import Call, Executable, KernelCall, Ret, VMFunction
from hetvm.runtime.graph_artifact import validate_graph

INFO = {"node": "Gather_3", "op_type": "Gather", "inputs": ["table", "ids"], "source": "m.onnx"}


def _exe(debug_info=None):
    instrs = [
        Call(2, "vm.builtin.alloc_tensor_direct", (("i", [2]), ("i", "float32"), ("i", 0))),
        KernelCall("take", {"axis": 0, "mode": "fast"}, 0, (("c", 0), ("r", 1), ("r", 2)), 1, ("table", "ids", "out")),
        Ret(2),
    ]
    info = [{"kind": "tensor", "shape": [2], "ndim": 1, "dtype": "float32", "device": 0},
            {"kind": "tensor", "shape": [2], "ndim": 1, "dtype": "int64", "device": 0}]  # fmt: skip
    func = VMFunction("main", ["x", "ids"], info, 3, instrs, {}, dict(debug_info or {}))
    devices = [{"kind": "cpu", "index": 0, "memory_scope": "global"}]
    return Executable(devices, [np.arange(4, dtype="float32")], {"main": func}).validate()


def test_export_and_load_keep_debug_info_and_the_error_names_the_node(tmp_path):
    exe = _exe({1: INFO})
    exe.export(str(tmp_path / "m.hetvm"))
    loaded = hetvm.load_module(str(tmp_path / "m.hetvm"))
    assert loaded["main"].debug_info == {1: INFO}
    vm = hetvm.VirtualMachine(loaded, hetvm.cpu(0))
    with pytest.raises(HetvmRuntimeError, match=r"failed at ONNX node 'Gather_3' \(Gather; inputs 'table', 'ids'\) "
                                                r"in function 'main', pc 1: .*index 7 is out of bounds"):
        vm["main"](np.zeros(2, "float32"), np.array([0, 7], "int64"))


def test_an_executable_without_debug_info_keeps_its_json_and_loads():
    exe = _exe()
    doc = exe.to_json()
    assert "debug_info" not in doc["functions"][0]  # what artifacts from before it hold
    again = Executable.from_json(doc, exe.constants)
    assert again["main"].debug_info == {}
    vm = hetvm.VirtualMachine(again, hetvm.cpu(0))
    with pytest.raises(HetvmRuntimeError, match=r"^kernel 'take' on cpu:0 failed in function 'main', pc 1"):
        vm["main"](np.zeros(2, "float32"), np.array([0, 7], "int64"))


@pytest.mark.parametrize(
    "bad",
    [{"a": 1}, [[9, INFO]], [[1, {"node": 3}]], [[1, {"inputs": ["a", 2]}]], [[1, {"secret": "x"}]], [[True, INFO]],
     [[1]]],
)  # fmt: skip
def test_malformed_debug_info_is_a_clear_error(bad):
    exe = _exe({1: INFO})
    doc = exe.to_json()
    doc["functions"][0]["debug_info"] = bad
    with pytest.raises(HetvmRuntimeError, match="debug_info"):
        Executable.from_json(doc, exe.constants)


def test_graph_onnx_node_is_validated():
    pytest.importorskip("onnx")
    from hetvm.frontend import from_onnx
    from hetvm.testing.bert_like import bert_like_model

    shapes = {k: (1, 2) for k in ("input_ids", "token_type_ids", "attention_mask")}
    gm = hetvm.build(from_onnx(bert_like_model(), shape_dict=shapes), target="llvm", executor="graph")
    validate_graph(gm.graph, gm.lib)
    graph = copy.deepcopy(gm.graph)
    node = next(n for n in graph["nodes"] if "onnx_node" in n)
    node["onnx_node"] = {"node": ["not", "a", "name"]}
    with pytest.raises(ArtifactError, match="bad 'onnx_node'"):
        validate_graph(graph, gm.lib)
    for n in graph["nodes"]:  # absent: graphs from before it
        n.pop("onnx_node", None)
    validate_graph(graph, gm.lib)
