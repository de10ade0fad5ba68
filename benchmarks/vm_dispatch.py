"""VM dispatch overhead: a chain of one-element adds through the VM vs NumPy.

Builds an executable by hand whose ``main`` runs N ``add`` kernel calls
(ping-ponging between two preallocated one-element tensors), and times it
next to calling ``np.add(a, b, out=c)`` directly in a Python loop, in one run
(the floor: no allocation, no kill). Then the same chain written in TVMScript
and built by ``hetvm.build`` -- what a user's program costs -- unfused (FuseOps
off; with InplaceElementwise forced too) and as FuseOps groups it, next to a Python
loop of ``np.add`` (allocating) and of ``np.add(out=)``, interleaved; with
Numba installed, FuseOps with generated kernels too: ``FuseOps+Numba`` in the
default mode (these one-element programs run on the interpreter of small
programs, :mod:`hetvm.kernels.program_interp`), ``FuseOps+Numba-1`` with
``HETVM_NUMBA=1`` (each program its own kernel). Prints figures only; speed is never asserted in tests.

    python benchmarks/vm_dispatch.py [N] [repeats] [--clock wall|cpu]

``--clock cpu`` times with this thread's CPU time (``time.thread_time``), which
other processes on a shared machine do not inflate (everything here runs on one
thread); ``wall`` (the default) with ``perf_counter``.
"""

from __future__ import annotations

import os
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


CLOCK = time.perf_counter
WARMUP = 10  # calls before timing (see bench_built)


def bench_direct(n: int, a: np.ndarray, b: np.ndarray) -> float:
    c = np.empty_like(a)
    d = np.empty_like(a)
    add = np.add
    t0 = CLOCK()
    add(a, b, out=c)
    for _ in range(n - 1):
        add(c, b, out=d)
        c, d = d, c
    return CLOCK() - t0


def main(argv: list[str]) -> None:
    global CLOCK
    if "--clock" in argv:
        i = argv.index("--clock")
        CLOCK = {"wall": time.perf_counter, "cpu": time.thread_time}[argv[i + 1]]
        argv = argv[:i] + argv[i + 2 :]
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
    for _ in range(WARMUP):
        vm["main"](x, one)
    vm_t, np_t = [], []
    for _ in range(repeats):
        t0 = CLOCK()
        vm["main"](x, one)
        vm_t.append(CLOCK() - t0)
        np_t.append(bench_direct(n, x.numpy(), one.numpy()))
    vm_us = min(vm_t) / n * 1e6
    np_us = min(np_t) / n * 1e6
    clock = "CPU time" if CLOCK is time.thread_time else "wall time"
    print(f"chain of {n} one-element adds, best of {repeats}, {clock} (load/compile {load_s * 1e3:.1f} ms)")
    print(f"  VM          : {vm_us:.3f} us/op")
    print(f"  direct NumPy: {np_us:.3f} us/op  (np.add(a, b, out=c) in a loop)")
    print(f"  ratio VM/NumPy: {vm_us / np_us:.2f}  (target <= 1.5)")
    bench_built(n, repeats)


def tvmscript_chain(n: int) -> str:
    """TVMScript of ``main(x, one)``: ``n`` adds, each reading the previous result."""
    lines = [
        "@I.ir_module",
        "class Module:",
        "    @R.function",
        '    def main(x: R.Tensor((1,), "float32"), one: R.Tensor((1,), "float32")) -> R.Tensor((1,), "float32"):',
        "        v0 = R.add(x, one)",
    ]
    lines += [f"        v{i} = R.add(v{i - 1}, one)" for i in range(1, n)]
    lines.append(f"        return v{n - 1}")
    return "\n".join(lines) + "\n"


def bench_built(n: int, repeats: int) -> None:
    """The same chain written in TVMScript and built by ``hetvm.build`` (alloc,
    kernel and kill per op), unfused and as FuseOps groups it, against a Python
    loop of ``np.add`` (allocating, as the program does) and of ``np.add(out=)``."""
    from hetvm.kernels import codegen_numba
    from hetvm.script import from_source
    from hetvm.transform import PassContext

    mod = from_source(tvmscript_chain(n))
    builds = {}
    # InplaceElementwise leaves outputs below hetvm.inplace.min_bytes alone (these
    # are 4 bytes); "unfused-inplace" forces it: each add writes over its dying
    # input, and NumPy's ufunc takes its overlap-checking path
    forced = {"hetvm.inplace.min_bytes": 0}
    variants = [("unfused", ["FuseOps"], {}, "0"), ("unfused-inplace", ["FuseOps"], forced, "0"),
                ("FuseOps", [], {}, "0")]  # fmt: skip
    try:
        import numba  # noqa: F401

        # auto (the default): programs below program_interp.SMALL elements run on the
        # interpreter compiled once per dtype; "1": every program its own kernel
        variants += [("FuseOps+Numba", [], {}, "auto"), ("FuseOps+Numba-1", [], {}, "1")]
    except ImportError:
        print("(numba is not installed: no generated-kernel variant)")
    for label, disabled, config, use_numba in variants:
        os.environ["HETVM_NUMBA"] = use_numba
        codegen_numba._checked = False  # re-read HETVM_NUMBA for this build and VM
        codegen_numba._KERNELS.clear()  # a program's plans follow the mode of the build that made them
        t0 = time.perf_counter()
        with PassContext(disabled_pass=disabled, config=config):
            exe = hetvm.build(mod)
        build_s = time.perf_counter() - t0
        vm = hetvm.VirtualMachine(exe)
        builds[label] = (vm, build_s, sum(len(f.instructions) for f in exe.functions.values()))
    x = np.zeros(1, "float32")
    one = np.ones(1, "float32")
    for vm, _, _ in builds.values():
        assert vm["main"](x, one).numpy()[0] == n
        # warm-up: CPython specialises a function's bytecode only after it has run
        # several times, and each generated line runs once per call
        for _ in range(WARMUP):
            vm["main"](x, one)
    times: dict[str, list[float]] = {k: [] for k in (*builds, "np.add", "np.add(out=)")}
    for _ in range(repeats):  # interleaved: every variant once per round
        for label, (vm, _, _) in builds.items():
            t0 = CLOCK()
            vm["main"](x, one)
            times[label].append(CLOCK() - t0)
        t0 = CLOCK()
        v = np.add(x, one)
        for _ in range(n - 1):
            v = np.add(v, one)
        times["np.add"].append(CLOCK() - t0)
        times["np.add(out=)"].append(bench_direct(n, x, one))
    base = min(times["np.add"])
    print(f"\n{n} adds written in TVMScript, built by hetvm.build, best of {repeats}, interleaved")
    for label, ts in times.items():
        extra = ""
        if label in builds:
            _, build_s, count = builds[label]
            extra = f"  (build {build_s:.2f} s, {count} instructions)"
        print(f"  {label:15s}: {min(ts) / n * 1e6:7.3f} us/op  ratio to np.add loop {min(ts) / base:5.2f}{extra}")


if __name__ == "__main__":
    main(sys.argv)
