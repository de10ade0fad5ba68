"""Programs built for a CUDA device, run here on a stand-in for CuPy (NumPy
arrays, generated element-wise kernels compiled for the host: see
``hetvm/testing/cuda_host.py``). What it shows without a GPU: the VM, the
copies and every kernel take their CuPy code paths (``xp is not numpy``) and
agree with the CPU build; fused element-wise groups run as generated kernels.
``test_runtime_cuda.py`` runs on a real GPU where there is one."""

import importlib
import os
import sys

import numpy as np
import pytest

import hetvm
from hetvm.frontend import from_onnx
from hetvm.script import from_source
from hetvm.testing.cuda_host import CXX, RecordingCupy
from hetvm.testing.exported_corpus import CORPUS_DIR, draw_inputs, load_manifest
from hetvm.testing.light_models import light_input, load_light

device_mod = importlib.import_module("hetvm.runtime.device")  # (hetvm.runtime.device is also a function)
pytestmark = pytest.mark.skipif(CXX is None, reason="no host C++ compiler")


@pytest.fixture
def fake_cupy(monkeypatch):
    """``import cupy`` gives the stand-in; device APIs made before are forgotten.
    Yields the list of the kernels generated through it."""
    fake = RecordingCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    saved = dict(device_mod._APIS)
    device_mod._APIS.clear()
    yield fake.made
    device_mod._APIS.clear()
    device_mod._APIS.update(saved)


def _launched(made) -> set[str]:
    """The names of the generated kernels that ran."""
    return {k.name for k in made if k.calls}


GELU_MLP = '''
from hetvm.script import ir as I, relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 16), "float32"), w: R.Tensor((16, 32), "float32"),
             b: R.Tensor((32,), "float32")):
        with R.dataflow():
            h = R.add(R.matmul(x, w), b)
            c = R.multiply(R.power(h, R.const(3.0, "float32")), R.const(0.044715, "float32"))
            t = R.tanh(R.multiply(R.add(h, c), R.const(0.7978845608028654, "float32")))
            g = R.multiply(R.multiply(h, R.const(0.5, "float32")), R.add(t, R.const(1.0, "float32")))
            s = R.nn.softmax(g, axis=-1)
            R.output(s)
        return s
'''


def _cpu_and_cuda(mod, *inputs):
    cpu = hetvm.VirtualMachine(hetvm.build(mod, target="llvm"), hetvm.cpu(0))["main"](*inputs)
    exe = hetvm.build(mod, target="cuda")
    out = hetvm.VirtualMachine(exe)["main"](*inputs)  # its devices: cuda:0 (and the host)
    return cpu, out, exe


def test_a_tanh_gelu_mlp_runs_on_cuda_with_generated_kernels(fake_cupy):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 16)).astype("float32")
    w = (rng.standard_normal((16, 32)) * 0.3).astype("float32")
    b = rng.standard_normal(32).astype("float32")
    cpu, out, exe = _cpu_and_cuda(from_source(GELU_MLP), x, w, b)
    assert out.device == hetvm.device("cuda", 0)
    np.testing.assert_allclose(out.numpy(), cpu.numpy(), rtol=1e-5, atol=1e-7)
    fused = [k for k in fake_cupy if k.name == "hetvm_fused"]
    assert len(fused) == 1 and fused[0].calls == 1 and "tanhf(" in fused[0].source
    assert {"hetvm_row_max", "hetvm_exp_sum", "hetvm_softmax"} <= _launched(fake_cupy)


def test_a_light_onnx_cnn_runs_on_cuda_and_agrees_with_the_cpu(fake_cupy):
    model = load_light("shufflenet")
    x = light_input(model)
    mod = from_onnx(model)
    cpu, out, _ = _cpu_and_cuda(mod, x)
    np.testing.assert_allclose(np.asarray(out.numpy()), np.asarray(cpu.numpy()), rtol=1e-4, atol=1e-5)
    assert {"hetvm_depthwise_conv2d", "hetvm_max_pool2d", "hetvm_epilogue"} <= _launched(fake_cupy)


def test_an_exported_transformer_with_host_shape_work_runs_its_compute_on_cuda(fake_cupy):
    # the legacy exporter's Shape -> Gather -> Mul chains run on the host; the
    # unannotated inputs still live on cuda, so the layers run there (before, the
    # plan moved the whole model to the CPU to spare an 8-byte copy)
    import onnx

    entry = load_manifest()["distilbert_legacy.onnx"]
    mod = from_onnx(onnx.load(os.path.join(CORPUS_DIR, entry["file"])))
    feeds = draw_inputs(entry, entry["settings"][0], 0)
    cpu, out, exe = _cpu_and_cuda(mod, *(feeds[i["name"]] for i in entry["inputs"]))
    kinds = [d["kind"] for d in exe.devices]
    on_cuda = [ins.op for ins in exe["main"].instructions
               if type(ins).__name__ == "KernelCall" and kinds[ins.device] == "cuda"]  # fmt: skip
    assert "fused_elementwise" in on_cuda and "nn.softmax" in on_cuda
    assert {"hetvm_fused", "hetvm_softmax", "hetvm_layer_norm"} <= _launched(fake_cupy)
    got = out[0] if isinstance(out, (list, tuple)) else out
    want = cpu[0] if isinstance(cpu, (list, tuple)) else cpu
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_the_graph_executor_runs_a_cuda_build(fake_cupy):
    from hetvm.runtime.graph_executor import create

    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 16)).astype("float32")
    w = (rng.standard_normal((16, 32)) * 0.3).astype("float32")
    b = rng.standard_normal(32).astype("float32")
    mod = from_source(GELU_MLP.replace('("n", 16)', "(3, 16)"))  # the graph executor is static
    want = hetvm.VirtualMachine(hetvm.build(mod))["main"](x, w, b).numpy()
    gm = hetvm.build(mod, target="cuda", executor="graph")
    ex = create(gm, None, [hetvm.device("cuda", 0), hetvm.cpu(0)][: len(gm.graph["devices"])])
    ex.set_input(0, x)
    ex.set_input(1, w)
    ex.set_input(2, b)
    ex.run()
    out = ex.get_output(0)
    assert out.device == hetvm.device("cuda", 0)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-7)
    assert sum(k.calls for k in fake_cupy) >= 1
