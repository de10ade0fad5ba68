"""Property: hetvm runs random compositions of ONNX ops as onnx.reference does.

Single nodes are checked by the conformance suite (tests/onnx_backend); what a
model does with several -- shapes flowing from one op into the next, constant
folding of shape arithmetic on a symbolic dim, broadcasting after a transpose --
is checked here on models from :func:`hetvm.testing.onnx_gen.onnx_models`:
import, build and run on the VM must give the reference evaluator's outputs
(float32 within rtol 1e-4 / atol 1e-5, ints and bools exactly) and dtypes.
Long run: ``HETVM_HYPOTHESIS=explore HETVM_LONG=1 HETVM_FUZZ_FACTOR=50 python -m
pytest -q tests/frontend/test_onnx_properties.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, note

pytest.importorskip("onnx")
from onnx.reference import ReferenceEvaluator  # noqa: E402

import hetvm  # noqa: E402
from hetvm.frontend import from_onnx  # noqa: E402
from hetvm.testing.onnx_gen import onnx_models  # noqa: E402

from .conftest import fuzz_settings  # noqa: E402


def describe(model: Any, feeds: dict[str, np.ndarray]) -> str:
    """The model as text, with its initializers and feeds, for a failing example."""
    from onnx import numpy_helper, printer

    lines = [f"opset {model.opset_import[0].version}", printer.to_text(model.graph)]
    lines += [f"const {n.output[0]} = {numpy_helper.to_array(n.attribute[0].t).tolist()!r}"
              for n in model.graph.node if n.op_type == "Constant"]
    lines += [f"init {t.name} = {numpy_helper.to_array(t).tolist()!r}" for t in model.graph.initializer]
    lines += [f"feed {k}: {v.dtype}{list(v.shape)} = {v.tolist()!r}" for k, v in feeds.items()]
    return "\n".join(lines)


def run_hetvm(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Import, build and run ``model`` on the VM; outputs as NumPy arrays."""
    mod = from_onnx(model)
    vm = hetvm.VirtualMachine(hetvm.build(mod, target="llvm"), hetvm.cpu())
    names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    out = vm["main"](*[hetvm.nd.array(feeds[n]) for n in names])
    outs = out if isinstance(out, (list, tuple)) else [out]
    return [o.numpy() if hasattr(o, "numpy") else np.asarray(o) for o in outs]


def assert_same_outputs(model: Any, feeds: dict[str, np.ndarray]) -> None:
    """hetvm's outputs equal the reference evaluator's (shape, dtype, values)."""
    expected = [np.asarray(e) for e in ReferenceEvaluator(model).run(None, feeds)]
    got = run_hetvm(model, feeds)
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        name = model.graph.output[i].name
        assert g.shape == e.shape, (name, g.shape, e.shape)
        assert g.dtype == e.dtype, (name, g.dtype, e.dtype)
        if e.dtype.kind == "f":
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5, err_msg=name)
        else:
            np.testing.assert_array_equal(g, e, err_msg=name)


@fuzz_settings(400)
@given(onnx_models())
def test_random_onnx_models_match_the_reference(case: tuple[Any, dict[str, np.ndarray]]) -> None:
    model, feeds = case
    try:
        assert_same_outputs(model, feeds)
    except Exception:
        note(describe(model, feeds))  # only for a failing example: printing costs
        raise
