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

import os
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import hetvm  # noqa: E402
from hetvm.cli_support.placement import pin_params  # noqa: E402
from hetvm.frontend import from_onnx  # noqa: E402
from hetvm.ir import VDevice  # noqa: E402
from hetvm.testing.exported_corpus import CORPUS_DIR, draw_inputs, load_manifest  # noqa: E402
from hetvm.testing.oracle import onnxruntime_or_fail  # noqa: E402

CORPUS = CORPUS_DIR
MANIFEST = load_manifest()
SIM, CPU = VDevice("sim", 0), VDevice("llvm", 0)

#: run in the default suite (one of each family, both exporters); the rest is slow
FAST = {"resnet_legacy.onnx", "mobilenet_v3_dynamo.onnx", "vit_legacy.onnx", "gpt2_past_dynamo.onnx"}


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
