"""One convolution at a time: hetvm's kernel against ONNX Runtime's, and the BLAS
product inside hetvm's, in GFLOP/s.

Why: the models' latency gap to ORT is mostly convolution throughput. This
separates what the kernel adds (im2col copies, padding, bias and relu passes)
from what NumPy's BLAS gives (the bare product of the same shape) and from what
ORT's MLAS reaches on the same layer. Every timing is the minimum over
``--repeat`` calls with hot caches (inside a model the weights arrive cold, so
the models run slower than these figures). Printed, never asserted.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \\
        python benchmarks/conv_vs_ort.py [--threads 1] [--repeat 30] [--shapes C,H,O,K,S;...]

A shape is input channels, input height (= width), output channels, kernel size,
stride; padding is K // 2. The default list is the heaviest layers of
Inception v2, SqueezeNet and ResNet-50.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_models import _set_threads  # noqa: E402

_THREADS = _set_threads(sys.argv[1:])

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

DEFAULT_SHAPES = (
    "3,224,64,7,2;64,56,192,3,1;64,28,96,3,1;576,14,128,1,1;192,7,320,3,1;1024,7,352,1,1;"
    "16,55,64,3,1;64,13,256,3,1;512,13,1000,1,1;256,14,256,3,1"
)


def _best(fn, repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _ort_session(c: int, h: int, o: int, k: int, s: int, weight: np.ndarray, bias: np.ndarray):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    node = helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[k // 2] * 4, strides=[s, s])
    relu = helper.make_node("Relu", ["c"], ["y"])
    graph = helper.make_graph(
        [node, relu], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = _THREADS
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def measure(c: int, h: int, o: int, k: int, s: int, repeat: int) -> None:
    from hetvm.kernels.registry import bind_kernel

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, c, h, h)).astype(np.float32)
    w = (rng.standard_normal((o, c, k, k)) * 0.05).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    oh = (h + 2 * (k // 2) - k) // s + 1
    out = np.empty((1, o, oh, oh), np.float32)
    attrs = {"strides": (s, s), "padding": (k // 2,) * 4, "dilation": (1, 1), "groups": 1, "activation": "relu"}
    kernel = bind_kernel("nn.conv2d_bias_act", "cpu", np, attrs)
    a = w.reshape(o, c * k * k)
    cols = rng.standard_normal((c * k * k, oh * oh)).astype(np.float32)
    prod = np.empty((o, oh * oh), np.float32)
    flops = 2.0 * o * c * k * k * oh * oh
    t_kernel = _best(lambda: kernel(x, w, b, out), repeat)
    t_blas = _best(lambda: np.matmul(a, cols, out=prod), repeat)
    line = (f"{c:>5} {h:>4} {o:>5} {k}x{k}/{s}  hetvm {t_kernel * 1e6:8.0f} us {flops / t_kernel / 1e9:5.0f} GF/s"
            f"  BLAS product {flops / t_blas / 1e9:5.0f} GF/s")  # fmt: skip
    try:
        sess = _ort_session(c, h, o, k, s, w, b)
    except ImportError:
        print(line + "  (onnxruntime not installed)")
        return
    t_ort = _best(lambda: sess.run(None, {"x": x}), repeat)
    ref = sess.run(None, {"x": x})[0]
    agree = np.allclose(out, ref, rtol=1e-3, atol=1e-3)
    print(f"{line}  ORT {t_ort * 1e6:8.0f} us {flops / t_ort / 1e9:5.0f} GF/s  ratio {t_kernel / t_ort:5.2f}"
          f"  {'agree' if agree else 'DIFFER'}", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    a = ap.parse_args()
    print(f"one convolution + bias + relu, {_THREADS} thread(s), min of {a.repeat} hot calls")
    for spec in a.shapes.split(";"):
        c, h, o, k, s = (int(v) for v in spec.split(","))
        measure(c, h, o, k, s, a.repeat)


if __name__ == "__main__":
    main()
