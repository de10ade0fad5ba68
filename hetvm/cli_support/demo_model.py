"""The model ``hetvm demo`` runs: no file needed.

With the ``onnx`` package installed the demo builds a small image classifier
as an ONNX graph in code (Conv → Relu → MaxPool → Conv → Relu →
GlobalAveragePool → Flatten → Gemm → Softmax) and imports it, so the demo goes
through the same importer as a user's model. Without onnx it builds the same
shape of program with the BlockBuilder. Either way the simulated accelerator
is configured without a Softmax kernel, so one op falls back to the CPU and
the device planner has copies to explain.
"""

from __future__ import annotations

import numpy as np

from ..ir.module import IRModule

__all__ = ["DEMO_DEVICES", "DEMO_MISSING", "demo_onnx_model", "demo_module"]

DEMO_DEVICES = "sim:0,cpu"
#: the op the simulated accelerator lacks in the demo (falls back to the CPU)
DEMO_MISSING = {"sim:0": {"nn.softmax"}}


def demo_onnx_model(batch: int = 2, seed: int = 0):
    """A small CNN classifier as an ``onnx.ModelProto`` (weights seeded)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        scale = 1.0 / np.sqrt(np.prod(shape[1:]) if len(shape) > 1 else shape[0])
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [
        weight("conv1_w", 16, 3, 3, 3), weight("conv1_b", 16),
        weight("conv2_w", 32, 16, 3, 3), weight("conv2_b", 32),
        weight("fc_w", 10, 32), weight("fc_b", 10),
    ]  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["image", "conv1_w", "conv1_b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2_w", "conv2_b"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "hetvm_demo_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [batch, 3, 32, 32])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [batch, 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def demo_module(batch: int = 2) -> tuple[IRModule, str]:
    """The demo program and where it came from (``onnx`` or ``blockbuilder``)."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        return _blockbuilder_module(batch), "blockbuilder"
    from ..frontend import from_onnx

    return from_onnx(demo_onnx_model(batch)), "onnx"


def _blockbuilder_module(batch: int) -> IRModule:
    """The fallback without onnx: a two-layer MLP ending in softmax."""
    from .. import op
    from ..ir import BlockBuilder, TensorStructInfo, Var
    from ..ir import expr as E

    rng = np.random.default_rng(0)
    w1 = E.const((rng.standard_normal((64, 32)) / 8).astype(np.float32))
    w2 = E.const((rng.standard_normal((32, 10)) / 6).astype(np.float32))
    x = Var("x", struct_info=TensorStructInfo((batch, 64), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(op.nn.relu(op.matmul(x, w1)))
            logits = bb.emit(op.matmul(h, w2))
            out = bb.emit_output(op.nn.softmax(logits, axis=-1))
        bb.emit_func_output(out)
    return bb.get()
