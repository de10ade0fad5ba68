"""VM dispatch overhead: a chain of one-element adds through the VM vs NumPy.

Builds an executable by hand whose ``main`` runs N ``add`` kernel calls
(ping-ponging between two preallocated one-element tensors), and times it
next to calling ``np.add(a, b, out=c)`` directly in a Python loop, in one run.
Prints figures only; speed is never asserted in tests.

    python benchmarks/vm_dispatch.py [N] [repeats]
"""

from __future__ import annotations

import sys
import time

import numpy as np

import hetvm
from hetvm.runtime.bytecode import Call, Executable, KernelCall, Ret, VMFunction


def build_chain(n: int) -> Executable:
    """main(x, one): r2 = x + one; r3 = r2 + one; r2 = r3 + one ... return the last."""
    instrs: list = [
        Call(2, "vm.builtin.alloc_tensor_direct", (("i", [1]), ("i", "float32"), ("i", 0))),
        Call(3, "vm.builtin.alloc_tensor_direct", (("i", [1]), ("i", "float32"), ("i", 0))),
        KernelCall("add", {}, 0, (("r", 0), ("r", 1), ("r", 2)), 1),
    ]
    src, dst = 2, 3
    for _ in range(n - 1):
        instrs.append(KernelCall("add", {}, 0, (("r", src), ("r", 1), ("r", dst)), 1))
        src, dst = dst, src
    instrs.append(Ret(src))
    info = {"kind": "tensor", "shape": [1], "dtype": "float32", "device": 0}
    main = VMFunction("main", ["x", "one"], [info, info], 4, instrs, {})
    return Executable([{"kind": "cpu", "index": 0, "memory_scope": "global"}], [], {"main": main})


def bench_direct(n: int, a: np.ndarray, b: np.ndarray) -> float:
    c = np.empty_like(a)
    d = np.empty_like(a)
    add = np.add
    t0 = time.perf_counter()
    add(a, b, out=c)
    for _ in range(n - 1):
        add(c, b, out=d)
        c, d = d, c
    return time.perf_counter() - t0


def main(argv: list[str]) -> None:
    n = int(argv[1]) if len(argv) > 1 else 10_000
    repeats = int(argv[2]) if len(argv) > 2 else 7
    exe = build_chain(n)
    t0 = time.perf_counter()
    vm = hetvm.VirtualMachine(exe)
    load_s = time.perf_counter() - t0
    x = hetvm.nd.array(np.zeros(1, "float32"))
    one = hetvm.nd.array(np.ones(1, "float32"))
    out = vm["main"](x, one)
    assert out.numpy()[0] == n, out.numpy()
    vm_t, np_t = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        vm["main"](x, one)
        vm_t.append(time.perf_counter() - t0)
        np_t.append(bench_direct(n, x.numpy(), one.numpy()))
    vm_us = min(vm_t) / n * 1e6
    np_us = min(np_t) / n * 1e6
    print(f"chain of {n} one-element adds, best of {repeats} (load/compile {load_s * 1e3:.1f} ms)")
    print(f"  VM          : {vm_us:.3f} us/op")
    print(f"  direct NumPy: {np_us:.3f} us/op  (np.add(a, b, out=c) in a loop)")
    print(f"  ratio VM/NumPy: {vm_us / np_us:.2f}  (target <= 1.5)")


if __name__ == "__main__":
    main(sys.argv)
