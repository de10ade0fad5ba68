"""Per-call time of the ``nn.layer_norm`` and ``nn.softmax`` kernels (last axis,
float32) with the direct Numba loops off and on (``hetvm/kernels/norm_direct.py``),
interleaved in one run. Times are this thread's CPU time, the median of 7 runs
of ``--calls`` calls, in microseconds; printed, never asserted.

    python benchmarks/norm_kernels.py [--shapes 1x8x32,2x9x64] [--calls 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from functools import partial

import numpy as np

from hetvm.kernels import codegen_numba, get_kernel


def _numba(on: bool) -> None:
    os.environ["HETVM_NUMBA"] = "1" if on else "0"
    codegen_numba._checked = False


def _per_call(fn, calls: int) -> float:
    times = []
    for _ in range(7):
        start = time.thread_time()
        for _ in range(calls):
            fn()
        times.append((time.thread_time() - start) / calls * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="1x8x32,2x9x64")
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    layer_norm = get_kernel("nn.layer_norm", "cpu")
    softmax = get_kernel("nn.softmax", "cpu")
    rng = np.random.default_rng(0)
    for text in args.shapes.split(","):
        shape = tuple(int(d) for d in text.split("x"))
        x = rng.standard_normal(shape).astype("float32")
        out = np.empty_like(x)
        gamma = rng.standard_normal(shape[-1]).astype("float32")
        beta = rng.standard_normal(shape[-1]).astype("float32")
        kernels = {
            "layer_norm": partial(layer_norm, np, {"axes": (-1,)}, x, gamma, beta, out),
            "softmax": partial(softmax, np, {"axis": -1}, x, out),
        }
        for name, fn in kernels.items():
            figures = {}
            for on in (False, True):
                _numba(on)
                for _ in range(200):  # warm: the loop's first call compiles or loads it
                    fn()
                figures[on] = _per_call(fn, args.calls)
            print(f"{name:10s} {text:>10s}: NumPy {figures[False]:6.2f} us, direct "
                  f"{figures[True]:6.2f} us ({figures[False] / figures[True]:.1f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
