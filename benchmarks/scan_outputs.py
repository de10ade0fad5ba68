"""A Loop with a scan output over many iterations: time and measured peak with
LoopCarriedInPlace (each row written in place into one preallocated buffer)
and without it (``scatter_nd`` copies the buffer every iteration).

Why: a loop that stacks one row per iteration used to grow its output by a
``concat`` each iteration -- time quadratic in the trip count and two copies
of the output alive at the end. The importer now preallocates the output when
the trip count is known before the loop; the pass removes the per-iteration
copy. Every figure is the minimum of ``--repeat`` calls (CPU time). Printed,
never asserted.

    python benchmarks/scan_outputs.py [--trips 1000,4000,16000] [--hidden 64] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from onnx import TensorProto, helper

import hetvm
from hetvm.frontend import from_onnx
from hetvm.transform import PassContext

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def loop_model(n: int):
    """h = tanh(h @ exp(v)) + h, M times; each iteration's tanh is a scan output."""
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [
            helper.make_node("MatMul", ["h_in", "w"], ["hw"]),
            helper.make_node("Tanh", ["hw"], ["t"]),
            helper.make_node("Add", ["t", "h_in"], ["h_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Identity", ["t"], ["row"]),
        ],
        "body",
        [vi("iter", I64, []), vi("cond_in", B, []), vi("h_in", F, [1, n])],
        [vi("cond_out", B, []), vi("h_out", F, [1, n]), vi("row", F, [1, n])],
    )
    loop = helper.make_node("Loop", ["M", "", "h0"], ["h", "rows"], body=body)
    graph = helper.make_graph(
        [helper.make_node("Exp", ["v"], ["w"]), loop], "m",
        [vi("M", I64, []), vi("h0", F, [1, n]), vi("v", F, [n, n])],
        [vi("h", F, [1, n]), vi("rows", F, ["k", 1, n])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def measure(exe, trips: int, h0, v, repeat: int) -> tuple[float, int]:
    vm = hetvm.VirtualMachine(exe)
    best = float("inf")
    peak = 0
    for _ in range(repeat):
        t = time.process_time()
        out = vm["main"](np.array(trips, np.int64), h0, v)
        best = min(best, time.process_time() - t)
        del out
        peak = vm.memory_report()["cpu:0"]["peak_bytes"]
    return best, peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trips", default="1000,4000,16000")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = args.hidden
    mod = from_onnx(loop_model(n))
    rng = np.random.default_rng(0)
    h0 = rng.standard_normal((1, n)).astype("float32")
    v = (rng.standard_normal((n, n)) * 0.05 - 4).astype("float32")
    in_place = hetvm.build(mod, target="llvm")
    with PassContext(disabled_pass=["LoopCarriedInPlace"]):
        copying = hetvm.build(mod, target="llvm")
    print(f"{'trips':>7} {'output':>10} | {'in place ms':>11} {'peak':>10} | {'copying ms':>10} {'peak':>10}")
    for trips in (int(t) for t in args.trips.split(",")):
        t1, p1 = measure(in_place, trips, h0, v, args.repeat)
        t2, p2 = measure(copying, trips, h0, v, args.repeat)
        print(f"{trips:>7} {trips * 4 * n:>10,} | {t1 * 1e3:>11.1f} {p1:>10,} | {t2 * 1e3:>10.1f} {p2:>10,}")


if __name__ == "__main__":
    main()
