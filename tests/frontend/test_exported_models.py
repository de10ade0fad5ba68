"""Models as people export them today: the corpus of tools/export_models.py.

Each file in tests/frontend/exported/ is a small random-weight torchvision-style
CNN or Hugging Face transformer exported by ``torch.onnx.export`` (the legacy
TorchScript exporter and the dynamo one) with dynamic batch / sequence / image
axes. Each imports, builds ONCE, and matches ONNX Runtime's outputs at the two
settings of its dynamic dims the manifest lists, from the same executable, on
the CPU and on the simulated accelerator + CPU.

ONNX Runtime is the oracle; it is in the ``test`` extra, and a comparison that
cannot run fails (it does not skip). The default suite runs a few models; the
whole corpus is ``-m slow``.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import hetvm  # noqa: E402
from hetvm.cli_support.placement import pin_params  # noqa: E402
from hetvm.frontend import from_onnx  # noqa: E402
from hetvm.ir import VDevice  # noqa: E402
from hetvm.testing.oracle import onnxruntime_or_fail  # noqa: E402

CORPUS = os.path.join(os.path.dirname(__file__), "exported")
with open(os.path.join(CORPUS, "manifest.json")) as _f:
    MANIFEST = {e["file"]: e for e in json.load(_f)["models"]}
SIM, CPU = VDevice("sim", 0), VDevice("llvm", 0)

#: run in the default suite (one of each family, both exporters); the rest is slow
FAST = {"resnet_legacy.onnx", "mobilenet_v3_dynamo.onnx", "vit_legacy.onnx", "gpt2_past_dynamo.onnx"}


def draw_inputs(entry: dict[str, Any], setting: dict[str, int], seed: int) -> dict[str, np.ndarray]:
    """Inputs for one setting: ids below their table's size, 0/1 masks with the
    first row's first position padded, floats from a normal distribution."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for inp in entry["inputs"]:
        shape = tuple(setting[d] if isinstance(d, str) else d for d in inp["dims"])
        if inp["kind"] == "ids":
            value = rng.integers(0, inp["high"], size=shape)
        elif inp["kind"] == "mask":
            value = np.ones(shape)
            if shape[-1] > 1:
                value[0, 0] = 0
        else:
            value = rng.standard_normal(shape)
        feeds[inp["name"]] = value.astype(inp["dtype"])
    return feeds


def _params() -> list[Any]:
    out = []
    for file in sorted(MANIFEST):
        marks = [] if file in FAST else [pytest.mark.slow]
        out.append(pytest.param(file, marks=marks, id=file[: -len(".onnx")]))
    return out


def _vm(path: str, heterogeneous: bool) -> Any:
    mod = from_onnx(path)
    if not heterogeneous:
        return hetvm.VirtualMachine(hetvm.build(mod, target="llvm"), hetvm.cpu(0))
    # inputs arrive on the accelerator, as with `hetvm run --devices sim:0,cpu`
    mod = pin_params(mod.with_global_infos(vdevice=[SIM, CPU]), SIM)
    return hetvm.VirtualMachine(hetvm.build(mod), [hetvm.device("sim", 0), hetvm.cpu(0)])


def _outputs(result: Any) -> list[np.ndarray]:
    items = result if isinstance(result, (tuple, list)) else [result]
    return [item.copyto(hetvm.cpu(0)).numpy() for item in items]


@pytest.mark.parametrize("heterogeneous", [False, True], ids=["cpu", "sim+cpu"])
@pytest.mark.parametrize("file", _params())
def test_exported_model_matches_onnxruntime(file, heterogeneous):
    ort = onnxruntime_or_fail()
    entry = MANIFEST[file]
    path = os.path.join(CORPUS, file)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    vm = _vm(path, heterogeneous)  # one executable for both settings
    for seed, setting in enumerate(entry["settings"]):
        feeds = draw_inputs(entry, setting, seed)
        expected = session.run(None, feeds)
        got = _outputs(vm["main"](*feeds.values()))
        assert len(got) == len(expected)
        for name, g, e in zip(entry["outputs"], got, expected):
            assert g.shape == e.shape, (name, setting)
            np.testing.assert_allclose(g, e, rtol=1e-3, atol=1e-4, err_msg=f"{name} at {setting}")


def test_corpus_covers_both_exporters_and_each_family():
    exporters = {e["exporter"] for e in MANIFEST.values()}
    models = {e["model"] for e in MANIFEST.values()}
    assert exporters == {"legacy", "dynamo"}
    assert {"resnet", "convnext", "bert", "gpt2_past", "llama_past", "t5", "bart", "vit", "segformer"} <= models
    for entry in MANIFEST.values():
        assert len(entry["settings"]) == 2 and entry["dynamic_dims"], entry["file"]
        assert os.path.getsize(os.path.join(CORPUS, entry["file"])) < 1 << 20
