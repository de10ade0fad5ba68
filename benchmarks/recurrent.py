"""LSTM over a static sequence, the two ways hetvm imports it: one
``nn.recurrent_scan`` kernel call per direction (the default) and unrolled into
plain ops (``from_onnx(..., unroll_recurrent=True)``), against a bare NumPy loop
over the steps and ONNX Runtime, interleaved call by call; with each form's build
time.

Why: unrolled, each step costs a few VM instructions (a slice, a matmul, an add,
a split, two fused element-wise kernels, their allocations and kills); the scan
op dispatches once and loops inside its kernel. This measured which is faster,
and by how much, for which lengths. Every figure is the median of ``--repeat``
calls. Printed, never asserted.

    python benchmarks/recurrent.py [--steps 1,4,16,64] [--batch 1] [--hidden 64] [--repeat 50]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def lstm_model(steps: int, batch: int, size: int, hidden: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    inits = {
        "W": rng.normal(0, 0.2, (1, 4 * hidden, size)),
        "R": rng.normal(0, 0.2, (1, 4 * hidden, hidden)),
        "B": rng.normal(0, 0.1, (1, 8 * hidden)),
    }
    node = helper.make_node("LSTM", ["X", "W", "R", "B", "", "H0", "C0"], ["Y", "Y_h", "Y_c"], hidden_size=hidden)
    state = [1, batch, hidden]
    graph = helper.make_graph(
        [node], "lstm",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [steps, batch, size]),
         helper.make_tensor_value_info("H0", TensorProto.FLOAT, state),
         helper.make_tensor_value_info("C0", TensorProto.FLOAT, state)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [steps, 1, batch, hidden]),
         helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, state),
         helper.make_tensor_value_info("Y_c", TensorProto.FLOAT, state)],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model, {k: v.astype(np.float32) for k, v in inits.items()}


def numpy_loop(weights: dict, x: np.ndarray, h: np.ndarray, c: np.ndarray) -> tuple:
    """The body of a single recurrent kernel: one projection, then a Python loop."""
    w, r, b = weights["W"][0], weights["R"][0], weights["B"][0]
    n = r.shape[1]
    steps, batch, _ = x.shape
    proj = (x.reshape(steps * batch, -1) @ w.T + (b[: 4 * n] + b[4 * n :])).reshape(steps, batch, 4 * n)
    r_t = np.ascontiguousarray(r.T)
    h, c = h[0], c[0]
    ys = np.empty((steps, 1, batch, n), np.float32)

    def sigmoid(v: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-v))

    for t in range(steps):
        g = proj[t] + h @ r_t
        i, o, f, cell = sigmoid(g[:, :n]), sigmoid(g[:, n : 2 * n]), sigmoid(g[:, 2 * n : 3 * n]), np.tanh(g[:, 3 * n :])
        c = f * c + i * cell
        h = o * np.tanh(c)
        ys[t, 0] = h
    return ys, h[None], c[None]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", default="1,4,16,64")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()

    import onnxruntime as ort

    import hetvm
    from hetvm.frontend import from_onnx

    print(f"LSTM batch {args.batch}, input {args.size}, hidden {args.hidden}; median of {args.repeat} calls")
    print(f"{'steps':>5} {'build s (scan/unrolled)':>24} {'scan ms':>8} {'unrolled ms':>12} {'numpy loop ms':>14} "
          f"{'ORT ms':>8} {'unrolled/scan':>14}")  # fmt: skip
    for steps in [int(s) for s in args.steps.split(",")]:
        _measure(steps, args, ort, hetvm, from_onnx)


def _measure(steps: int, args: argparse.Namespace, ort: Any, hetvm: Any, from_onnx: Any) -> None:
    model, weights = lstm_model(steps, args.batch, args.size, args.hidden)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(steps, args.batch, args.size)).astype(np.float32)
    h0 = np.zeros((1, args.batch, args.hidden), np.float32)
    vms, builds = {}, {}
    for name, unroll in (("scan", False), ("unrolled", True)):
        t0 = time.perf_counter()
        vms[name] = hetvm.VirtualMachine(hetvm.build(from_onnx(model, unroll_recurrent=unroll), target="llvm"), hetvm.cpu())
        builds[name] = time.perf_counter() - t0
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    args_nd = [hetvm.nd.array(a) for a in (x, h0, h0)]
    expected = sess.run(None, {"X": x, "H0": h0, "C0": h0})
    for vm in vms.values():
        for g, e, m in zip(vm["main"](*args_nd), expected, numpy_loop(weights, x, h0, h0)):
            np.testing.assert_allclose(g.numpy(), e, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(m, e, rtol=1e-4, atol=1e-5)
    times: dict[str, list[float]] = {"scan": [], "unrolled": [], "loop": [], "ort": []}
    for _ in range(args.repeat):
        for name, fn in (("scan", lambda: vms["scan"]["main"](*args_nd)),
                         ("unrolled", lambda: vms["unrolled"]["main"](*args_nd)),
                         ("loop", lambda: numpy_loop(weights, x, h0, h0)),
                         ("ort", lambda: sess.run(None, {"X": x, "H0": h0, "C0": h0}))):  # fmt: skip
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    build = f"{builds['scan']:.2f} / {builds['unrolled']:.2f}"
    print(f"{steps:>5} {build:>24} {med['scan']:>8.3f} {med['unrolled']:>12.3f} {med['loop']:>14.3f} "
          f"{med['ort']:>8.3f} {med['unrolled'] / med['scan']:>14.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
