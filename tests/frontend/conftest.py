"""Helpers for the ONNX importer tests: tiny models built with onnx.helper, the
ONNX reference evaluator as the oracle, and hetvm's VM when it is available."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from hetvm.frontend import from_onnx  # noqa: E402
from hetvm.ir import struct_info as S  # noqa: E402

_NP_TO_ONNX = {
    "float32": TensorProto.FLOAT,
    "float64": TensorProto.DOUBLE,
    "int64": TensorProto.INT64,
    "int32": TensorProto.INT32,
    "uint8": TensorProto.UINT8,
    "bool": TensorProto.BOOL,
}


_PROBE: list[Any] = []
#: messages of runtime layers still being written (a missing kernel or builtin):
#: such a run is skipped with the message, a wrong value still fails
def _runtime() -> Any:
    """hetvm's build + VM, or None while those layers cannot yet run ``x + x``."""
    if not _PROBE:
        _PROBE.append(_probe())
    return _PROBE[0]


def _probe() -> Any:
    try:
        import hetvm
        from hetvm import op
        from hetvm.ir import BlockBuilder, TensorStructInfo, Var

        x = Var("x", struct_info=TensorStructInfo((2,), "float32"))
        bb = BlockBuilder()
        with bb.function("main", [x]):
            with bb.dataflow():
                y = bb.emit_output(op.add(x, x))
            bb.emit_func_output(y)
        vm = hetvm.VirtualMachine(hetvm.build(bb.get(), target="llvm"), hetvm.cpu())
        out = vm["main"](hetvm.nd.array(np.ones(2, np.float32)))
        if not np.allclose(out.numpy(), 2.0):
            return None
    except Exception:  # noqa: BLE001 - any failure means "not ready yet"
        return None
    return hetvm


class OnnxKit:
    """Builds models and compares hetvm's import against onnx.reference."""

    helper = helper
    TensorProto = TensorProto

    def model(
        self,
        nodes: Sequence[Any],
        inputs: dict[str, tuple[str, Sequence[Any] | None]],
        outputs: dict[str, str] | Sequence[str],
        initializers: dict[str, np.ndarray] | None = None,
        opset: int = 17,
    ) -> Any:
        """A checked ModelProto; ``inputs`` maps name -> (dtype, shape)."""
        if not isinstance(outputs, dict):
            outputs = {o: "float32" for o in outputs}
        g_inputs = [
            helper.make_tensor_value_info(n, _NP_TO_ONNX[dt], shape) for n, (dt, shape) in inputs.items()
        ]
        g_outputs = [helper.make_empty_tensor_value_info(n) for n in outputs]
        inits = [onnx.numpy_helper.from_array(np.asarray(v), n) for n, v in (initializers or {}).items()]
        graph = helper.make_graph(list(nodes), "test", g_inputs, g_outputs, inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = min(model.ir_version, 9)
        # Output types come from ONNX's own shape inference (the dtype given is the fallback).
        model = onnx.shape_inference.infer_shapes(model)
        for vi in model.graph.output:
            ttype = vi.type.tensor_type
            if not ttype.elem_type:
                ttype.elem_type = _NP_TO_ONNX[outputs[vi.name]]
            if not ttype.HasField("shape"):
                ttype.shape.SetInParent()
        onnx.checker.check_model(model)
        return model

    def node_model(
        self,
        op_type: str,
        inputs: dict[str, tuple[str, Sequence[Any] | None]],
        initializers: dict[str, np.ndarray] | None = None,
        outputs: Sequence[str] | dict[str, str] = ("y",),
        opset: int = 17,
        input_order: Sequence[str] | None = None,
        **attrs: Any,
    ) -> Any:
        """A model of one node whose inputs are graph inputs then initializers (or ``input_order``)."""
        names = list(input_order) if input_order is not None else list(inputs) + list(initializers or {})
        out_names = list(outputs)
        node = helper.make_node(op_type, names, out_names, name=f"the_{op_type.lower()}", **attrs)
        return self.model([node], inputs, outputs, initializers, opset)

    @staticmethod
    def reference(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(o) for o in ReferenceEvaluator(model).run(None, feeds)]

    @staticmethod
    def run(mod: Any, feeds: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Runs ``main`` on hetvm's VM (skips the test while the VM is missing)."""
        hetvm = _runtime()
        if hetvm is None:
            pytest.skip("hetvm's VM is not available yet")
        ex = hetvm.build(mod, target="llvm")
        vm = hetvm.VirtualMachine(ex, hetvm.cpu())
        out = vm["main"](*[hetvm.nd.array(np.asarray(f)) for f in feeds])
        if isinstance(out, (list, tuple)):
            return [o.numpy() if hasattr(o, "numpy") else np.asarray(o) for o in out]
        return [out.numpy() if hasattr(out, "numpy") else np.asarray(out)]

    def check(
        self,
        model: Any,
        feeds: dict[str, np.ndarray],
        rtol: float = 1e-5,
        atol: float = 1e-5,
        numeric: bool = True,
        **import_kwargs: Any,
    ) -> Any:
        """Imports ``model``; its result struct info must match the reference
        outputs' shapes and dtypes, and (when the VM exists) so must the values."""
        mod = from_onnx(model, **import_kwargs)
        expected = self.reference(model, feeds)
        ret = mod["main"].ret_struct_info
        rets = list(ret.fields) if isinstance(ret, S.TupleStructInfo) else [ret]
        assert len(rets) == len(expected)
        for sinfo, exp in zip(rets, expected):
            assert isinstance(sinfo, S.TensorStructInfo)
            dtype = "bool" if exp.dtype == np.bool_ else str(exp.dtype)
            assert sinfo.dtype == dtype, (sinfo, exp.dtype)
            assert sinfo.static_shape == exp.shape, (S.describe(sinfo), exp.shape)
        if numeric and _runtime() is not None:
            got = self.run(mod, list(feeds.values()))
            for g, e in zip(got, expected):
                np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
        return mod


@pytest.fixture
def kit() -> OnnxKit:
    return OnnxKit()



# -- fuzzing: the shared Hypothesis settings ----------------------------------
from hetvm.testing.fuzz_settings import FACTOR, LONG, fuzz_settings  # noqa: E402, F401
