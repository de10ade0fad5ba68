"""Activation chains: hetvm (unfused, FuseOps on the NumPy runner, FuseOps with
generated Numba kernels) against ONNX Runtime, interleaved, same thread count.

Why: on the architectures exported today most of hetvm's gap to ORT was
element-wise chains run one NumPy pass (and one buffer) per op: EfficientNet's
SiLU (``Sigmoid`` + ``Mul``), MobileNet v3's HardSwish / HardSigmoid gates,
GPT-2's tanh GELU written with ``Pow``. Each model here is a small stack of
such blocks built with ``onnx.helper`` (so it needs no download). Every
figure is the median of ``--repeat`` calls, the variants taking turns call by
call. Printed, never asserted.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \\
        python benchmarks/activations_vs_ort.py [--threads 2] [--repeat 30]
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_models import _set_threads  # noqa: E402

_THREADS = _set_threads(sys.argv[1:])
os.environ.setdefault("NUMBA_NUM_THREADS", str(_THREADS))

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(0)


def _w(name: str, *shape: int, scale: float = 0.1):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def _scalar(name: str, value: float):
    return numpy_helper.from_array(np.array(value, np.float32), name)


class _Graph:
    def __init__(self) -> None:
        self.nodes: list = []
        self.inits: list = []
        self.n = 0

    def name(self) -> str:
        self.n += 1
        return f"t{self.n}"

    def op(self, op_type: str, *inputs: str, **attrs) -> str:
        out = self.name()
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int = 1, groups: int = 1) -> str:
        w = self.name()
        self.inits += [_w(w, cout, cin // groups, k, k), _w(w + "b", cout)]
        return self.op("Conv", x, w, w + "b", pads=[k // 2] * 4, group=groups)

    def const(self, value: float) -> str:
        c = self.name()
        self.inits.append(_scalar(c, value))
        return c

    def model(self, x_shape: tuple, out: str):  # every block keeps the input shape (residuals)
        graph = helper.make_graph(
            self.nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, list(x_shape))], self.inits,
        )  # fmt: skip
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def efficientnet_like():
    """MBConv-ish blocks: 1x1 expand + SiLU, depthwise 3x3 + SiLU, squeeze-excitation
    (mean, 1x1, SiLU, 1x1, Sigmoid, Mul), 1x1 project."""
    g, x, c = _Graph(), "x", 32
    for _ in range(3):
        e = g.conv(x, c, 4 * c)
        e = g.op("Mul", e, g.op("Sigmoid", e))
        d = g.conv(e, 4 * c, 4 * c, 3, groups=4 * c)
        d = g.op("Mul", d, g.op("Sigmoid", d))
        s = g.op("GlobalAveragePool", d)
        s = g.conv(s, 4 * c, c // 4)
        s = g.op("Mul", s, g.op("Sigmoid", s))
        s = g.op("Sigmoid", g.conv(s, c // 4, 4 * c))
        x = g.op("Add", x, g.conv(g.op("Mul", d, s), 4 * c, c))
    return g.model((1, c, 56, 56), x)


def mobilenet_v3_like():
    """Inverted residuals with HardSwish and a HardSigmoid gate, as exporters write
    them (HardSwish, and x * HardSigmoid(...))."""
    g, x, c = _Graph(), "x", 24
    for _ in range(3):
        e = g.op("HardSwish", g.conv(x, c, 4 * c))
        d = g.op("HardSwish", g.conv(e, 4 * c, 4 * c, 3, groups=4 * c))
        s = g.op("Relu", g.conv(g.op("GlobalAveragePool", d), 4 * c, c))
        s = g.op("HardSigmoid", g.conv(s, c, 4 * c), alpha=1 / 6, beta=0.5)
        x = g.op("Add", x, g.conv(g.op("Mul", d, s), 4 * c, c))
    return g.model((1, c, 56, 56), x)


def gpt2_mlp_like():
    """GPT-2 MLPs: MatMul, bias, the tanh GELU with Pow(x, 3) as the export writes it,
    MatMul, bias, residual."""
    g, x, d = _Graph(), "x", 256
    half, one, k, root = g.const(0.5), g.const(1.0), g.const(0.044715), g.const(float(np.sqrt(2 / np.pi)))
    three = g.const(3.0)
    for _ in range(3):
        w1, w2 = g.name(), g.name()
        g.inits += [_w(w1, d, 4 * d, scale=0.05), _w(w1 + "b", 4 * d), _w(w2, 4 * d, d, scale=0.05), _w(w2 + "b", d)]
        h = g.op("Add", g.op("MatMul", x, w1), w1 + "b")
        inner = g.op("Mul", root, g.op("Add", h, g.op("Mul", k, g.op("Pow", h, three))))
        h = g.op("Mul", g.op("Mul", half, h), g.op("Add", one, g.op("Tanh", inner)))
        x = g.op("Add", x, g.op("Add", g.op("MatMul", h, w2), w2 + "b"))
    return g.model((1, 64, d), x)


MODELS = {"efficientnet-like": efficientnet_like, "mobilenet-v3-like": mobilenet_v3_like,
          "gpt2-mlp-like": gpt2_mlp_like}  # fmt: skip


def _hetvm_variants(model):
    import hetvm
    from hetvm.frontend import from_onnx
    from hetvm.kernels import codegen_numba as cg
    from hetvm.transform import PassContext

    mod = from_onnx(model)
    out = {}
    t0 = time.perf_counter()
    with PassContext(disabled_pass=["FuseOps"]):
        exe = hetvm.build(mod)
    out["hetvm unfused"] = (hetvm.VirtualMachine(exe), time.perf_counter() - t0)
    saved = (cg._checked, cg._numba)
    cg._checked, cg._numba = True, None  # the NumPy runner
    t0 = time.perf_counter()
    exe = hetvm.build(mod)
    out["hetvm FuseOps+NumPy"] = (hetvm.VirtualMachine(exe), time.perf_counter() - t0)
    cg._checked, cg._numba = saved
    if cg.available():
        t0 = time.perf_counter()
        exe = hetvm.build(mod)
        vm = hetvm.VirtualMachine(exe)
        out["hetvm FuseOps+Numba"] = (vm, time.perf_counter() - t0)
        gen = exe.metadata.get("generated_kernels", {})
        print(f"    generated kernels: {gen.get('kernels', 0)}, compiled/loaded in {gen.get('compile_seconds', 0):.2f} s")
    return out


def _ort(model, threads: int):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args(argv)
    try:
        import numba

        numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    except ImportError:
        print("numba not installed: no generated kernels")
    print(f"threads {args.threads}, median of {args.repeat} interleaved calls (ms)")
    for name in args.models.split(","):
        model = MODELS[name]()
        x = RNG.standard_normal([d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]).astype(np.float32)
        print(f"  {name}:")
        runs = {k: (lambda vm=vm, x=x: vm["main"](x)) for k, (vm, _) in _hetvm_variants(model).items()}
        sess = _ort(model, args.threads)
        runs["ORT"] = lambda sess=sess, x=x: sess.run(None, {"x": x})
        ref = sess.run(None, {"x": x})[0]
        for label, fn in runs.items():
            if label != "ORT":
                got = fn().numpy()
                err = float(np.max(np.abs(got - ref)) / (np.max(np.abs(ref)) or 1.0))
                assert err < 1e-4, (name, label, err)
        times: dict[str, list[float]] = {k: [] for k in runs}
        for fn in runs.values():
            fn()
        for _ in range(args.repeat):
            for label, fn in runs.items():
                t0 = time.perf_counter()
                fn()
                times[label].append(time.perf_counter() - t0)
        ort_ms = statistics.median(times["ORT"]) * 1e3
        for label, ts in times.items():
            ms = statistics.median(ts) * 1e3
            print(f"    {label:22s} {ms:8.2f} ms   x ORT {ms / ort_ms:5.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
