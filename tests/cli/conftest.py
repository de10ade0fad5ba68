"""Fixtures: small ONNX models on disk for the command-line tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def demo_onnx(tmp_path_factory) -> str:
    """The demo CNN (image: 2x3x32x32 float32 -> probs: 2x10) saved as a file."""
    onnx = pytest.importorskip("onnx")
    from hetvm.cli_support.demo_model import demo_onnx_model

    path = tmp_path_factory.mktemp("models") / "cnn.onnx"
    onnx.save(demo_onnx_model(batch=2), str(path))
    return str(path)


@pytest.fixture(scope="session")
def bad_files(tmp_path_factory, demo_onnx) -> dict[str, str]:
    """A text file, a truncated model and a model the onnx checker rejects."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    d = tmp_path_factory.mktemp("bad")
    text = d / "notes.onnx"
    text.write_text("this is not a model\n")
    data = open(demo_onnx, "rb").read()
    trunc = d / "truncated.onnx"
    trunc.write_bytes(data[: len(data) // 2])
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.graph.node[0].input[0] = "undefined_value"  # checker: input not produced by any node
    invalid = d / "invalid.onnx"
    invalid.write_bytes(model.SerializeToString())
    return {"text": str(text), "truncated": str(trunc), "invalid": str(invalid)}


@pytest.fixture(scope="session")
def bert_onnx(tmp_path_factory) -> str:
    """The BERT-style model of ``bert_like.py`` (symbolic batch and sequence) as a file."""
    onnx = pytest.importorskip("onnx")
    from hetvm.testing.bert_like import bert_like_model

    path = tmp_path_factory.mktemp("models") / "bert_like.onnx"
    onnx.save(bert_like_model(), str(path))
    return str(path)
