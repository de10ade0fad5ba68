"""The pooled allocator under a dynamic sequence length: pool bytes vs peak.

Two programs built by ``hetvm.build`` from TVMScript with a symbolic length
``n`` (``exp -> tanh`` on ``(n,)``, and a small sequence block on ``(n, 16)``:
matmul, softmax, residual add) are called with 1,000 different lengths, in
random order and in growing order (the worst for a pool: no freed block is ever
big enough). After each call the report gives the call's peak and the bytes the
pool holds from the device; printed: the largest of each and their ratio
(issue 24's target: at most 2). Prints figures only; nothing is asserted.

    python benchmarks/allocator.py [lengths] [max_length]
"""

from __future__ import annotations

import random
import sys
import time

import numpy as np

import hetvm
from hetvm.script.parser import from_source
from hetvm.testing.dynamic_programs import ELEMENTWISE_BY_LENGTH as ELEMENTWISE
from hetvm.testing.dynamic_programs import SEQUENCE_BLOCK as SEQUENCE


def run(source: str, lengths: list[int], width: int | None) -> dict:
    vm = hetvm.VirtualMachine(hetvm.build(from_source(source)))
    w = np.full((16, 16), 0.01, "float32")
    peak = held = 0
    t0 = time.perf_counter()
    for n in lengths:
        x = np.ones((n,) if width is None else (n, width), "float32")
        out = vm["main"](x) if width is None else vm["main"](x, w)
        del out
        rep = vm.memory_report()["cpu:0"]
        peak = max(peak, rep["peak_bytes"])
        held = max(held, rep["reserved_bytes"])
    seconds = time.perf_counter() - t0
    final = vm.memory_report()["cpu:0"]
    return {"peak": peak, "held": held, "ratio": held / peak, "seconds": seconds, "final": final}


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 16
    rng = random.Random(0)
    orders = {}
    for name, longest in (("exp->tanh (n,)", top), ("seq block (n, 16)", top // 8)):
        shuffled = rng.sample(range(1, longest + 1), count)
        orders[name] = (("random", shuffled), ("growing", sorted(shuffled)))
    print(f"{count} lengths in [1, {top}] ((n,)), [1, {top // 8}] ((n, 16)); "
          "pool = bytes the pool holds from the device")
    print(f"{'program':<22} {'order':<8} {'largest call peak':>18} {'largest pool':>14} {'ratio':>6} {'s':>6}")
    for name, source, width in (("exp->tanh (n,)", ELEMENTWISE, None), ("seq block (n, 16)", SEQUENCE, 16)):
        for order, lengths in orders[name]:
            r = run(source, lengths, width)
            print(f"{name:<22} {order:<8} {r['peak']:>18,} {r['held']:>14,} {r['ratio']:>6.2f} {r['seconds']:>6.1f}")
            trimmed = r["final"]["trimmed"]
            print(f"{'':<22} {'':<8} given back: " + ", ".join(f"{k} {v:,}" for k, v in trimmed.items()))


if __name__ == "__main__":
    main()
