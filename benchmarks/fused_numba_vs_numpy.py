"""Generated (Numba) fused kernels against the NumPy runner, per program family
and size: the measurement behind ``codegen_numba.prefers_generated`` (figures
printed, never asserted).

Each program runs as a generated kernel (forced: ``HETVM_NUMBA=1``) and on the
NumPy runner, one thread (Numba capped through the thread budget, BLAS is not
involved), timed with this thread's CPU time so other processes on a shared
machine inflate neither side; the best of 5 rounds is kept. A ratio above 1
means the generated kernel is faster.

    python benchmarks/fused_numba_vs_numpy.py [--sizes 256,4096,65536,1048576] [--interp]

``--interp``: instead, the interpreter of small programs
(``hetvm/kernels/program_interp.py``, what ``auto`` runs below ``SMALL``
elements) against each program's own generated kernel and the NumPy runner,
at 32 to 4,096 elements: the measurement behind ``program_interp.SMALL``.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ["HETVM_NUMBA"] = "1"  # every covered program generated, for the comparison

import numpy as np  # noqa: E402

F = "float32"
PROGRAMS = {
    "add4": [("add", F, "x0", "x1"), ("multiply", F, "t0", "x1"), ("subtract", F, "t1", "x0"),
             ("maximum", F, "t2", "x1")],
    "relu_add": [("add", F, "x0", "x1"), ("nn.relu", F, "t0")],
    "hardswish": [("const", F, 3.0), ("add", F, "x0", "t0"), ("clip", F, "t1", 0.0, 6.0),
                  ("multiply", F, "x0", "t2"), ("const", F, 1 / 6), ("multiply", F, "t3", "t4")],
    "sigmoid": [("sigmoid", F, "x0")],
    "silu": [("nn.silu", F, "x0")],
    "sigmoid_mul": [("sigmoid", F, "x0"), ("multiply", F, "t0", "x1")],
    "exp": [("exp", F, "x0")],
    "exp_sub": [("subtract", F, "x0", "x1"), ("exp", F, "t0")],
    "tanh": [("tanh", F, "x0")],
    "erf": [("erf", F, "x0")],
    "gelu_erf": [("nn.gelu", F, "x0")],
    "gelu_tanh": [("nn.gelu_tanh", F, "x0")],
}  # fmt: skip


def best_seconds(fn, args, reps: int) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.thread_time()
        for _ in range(reps):
            fn(*args)
        best = min(best, (time.thread_time() - t0) / reps)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=None)
    ap.add_argument("--interp", action="store_true", help="the interpreter of small programs instead")
    a = ap.parse_args()
    if a.interp:
        interp(a.sizes or "32,256,1024,2048,4096")
        return
    a.sizes = a.sizes or "256,4096,65536,1048576"
    from hetvm.kernels import codegen_numba as cg
    from hetvm.kernels.fused_program import NumpyRunner
    from hetvm.runtime.threads import ThreadBudget

    if not cg.available():
        raise SystemExit("numba is not installed")
    rng = np.random.default_rng(0)
    print("NumPy runner time / generated time (above 1: generated is faster), one thread, CPU time")
    print(f"{'elements':>9}  " + "  ".join(f"{name:>11}" for name in PROGRAMS))
    with ThreadBudget(1):
        for n in (int(s) for s in a.sizes.split(",")):
            x0, x1 = rng.standard_normal((2, n)).astype(F)
            cells = []
            for program in PROGRAMS.values():
                program = tuple(tuple(s) for s in program)
                inputs = [x0, x1] if any("x1" in s for s in program) else [x0]
                args = (*inputs, np.empty(n, F))
                generated, runner = cg.generated_kernel(np, program), NumpyRunner(np, program)
                for fn in (generated, runner):
                    for _ in range(3):  # compile, plan, warm up
                        fn(*args)
                reps = max(3, 2_000_000 // n)
                cells.append(best_seconds(runner, args, reps) / best_seconds(generated, args, reps))
            print(f"{n:>9}  " + "  ".join(f"{c:>11.2f}" for c in cells), flush=True)


def interp(sizes: str) -> None:
    from hetvm.kernels import codegen_numba as cg
    from hetvm.kernels.fused_program import NumpyRunner
    from hetvm.runtime.threads import ThreadBudget

    if not cg.available():
        raise SystemExit("numba is not installed")
    rng = np.random.default_rng(0)
    print("interpreter time / the program's own kernel's time, and (in brackets) NumPy runner / interpreter;")
    print("one thread, CPU time, best of 5 rounds")
    print(f"{'elements':>9}  " + "  ".join(f"{name:>14}" for name in PROGRAMS))
    with ThreadBudget(1):
        for n in (int(s) for s in sizes.split(",")):
            x0, x1 = rng.standard_normal((2, n)).astype(F)
            cells = []
            for program in PROGRAMS.values():
                program = tuple(tuple(s) for s in program)
                inputs = [x0, x1] if any("x1" in s for s in program) else [x0]
                out = np.empty(n, F)
                own, runner = cg.generated_kernel(np, program), NumpyRunner(np, program)
                table = cg._Interpreted(program, len(inputs), F)  # what auto runs below SMALL
                fns = {"own": (own, (*inputs, out)), "numpy": (runner, (*inputs, out)), "interp": (table, (inputs, out))}
                for fn, args in fns.values():
                    for _ in range(3):
                        fn(*args)
                reps = max(20, 200_000 // n)
                t = {k: best_seconds(fn, args, reps) for k, (fn, args) in fns.items()}
                cells.append(f"{t['interp'] / t['own']:.2f} ({t['numpy'] / t['interp']:.1f})")
            print(f"{n:>9}  " + "  ".join(f"{c:>14}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
