"""Writes the ONNX files of the bad-input corpus (run once; the files are committed).

``python tests/bad_inputs/make_onnx_models.py`` rewrites them in ``onnx/``.
"""

from __future__ import annotations

import pathlib

import onnx
from onnx import TensorProto, helper

HERE = pathlib.Path(__file__).parent / "onnx"


def _model(nodes, inputs, outputs, name, extra_opsets=()):
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
    )
    opsets = [helper.make_opsetid("", 17)] + [helper.make_opsetid(d, 1) for d in extra_opsets]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="hetvm-bad-inputs")
    model.ir_version = 8
    return model


def main() -> None:
    HERE.mkdir(exist_ok=True)
    valid = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", [2, 3])], [("y", [2, 3])], "valid")
    data = valid.SerializeToString()
    (HERE / "truncated.onnx").write_bytes(data[: len(data) // 2])
    # a node reads a value nothing defines: the ONNX checker refuses the graph
    dangling = _model(
        [helper.make_node("Add", ["x", "nowhere"], ["y"])], [("x", [2, 3])], [("y", [2, 3])], "dangling"
    )
    (HERE / "dangling_input.onnx").write_bytes(dangling.SerializeToString())
    # shapes that cannot broadcast: the checker passes, the importer's inference refuses
    badshape = _model(
        [helper.make_node("Add", ["x", "b"], ["y"], name="add_bias")],
        [("x", [2, 3]), ("b", [4])],
        [("y", [2, 3])],
        "badshape",
    )
    (HERE / "broadcast_mismatch.onnx").write_bytes(badshape.SerializeToString())
    # three operators hetvm has no converter for (two of them twice)
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Frobnicate", ["a"], ["b"], domain="com.example"),
        helper.make_node("Bernoulli", ["b"], ["c"]),
        helper.make_node("Twiddle", ["c"], ["d"], domain="com.example"),
        helper.make_node("Frobnicate", ["d"], ["e"], domain="com.example"),
        helper.make_node("Bernoulli", ["e"], ["y"]),
    ]
    unsupported = _model(nodes, [("x", [2, 3])], [("y", [2, 3])], "unsupported", ["com.example"])
    (HERE / "unsupported_ops.onnx").write_bytes(unsupported.SerializeToString())
    empty = _model([], [("x", [2, 3])], [("x", [2, 3])], "empty")
    (HERE / "no_nodes.onnx").write_bytes(empty.SerializeToString())
    onnx.checker.check_model(badshape)


if __name__ == "__main__":
    main()
