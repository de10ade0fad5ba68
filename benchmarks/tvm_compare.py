"""hetvm next to TVM 0.27, measured live on the same programs.

Memory: the four programs of ``memory_planning.py`` are printed as TVMScript;
hetvm plans them with its own pipeline, TVM parses the same text and runs its
default CPU build pipeline (what ``relax.build(mod, "llvm")`` runs) up to and
including ``StaticPlanBlockMemory``; the bytes of TVM's planned storages are
set against hetvm's arenas and the lower bound from hetvm's report (the most
bytes of intermediates live at once; returned tensors are outside both plans).

Compile time: the chain and DAG programs of ``compile_time.py`` at each size
are printed once; each side parses that text and builds it for the CPU
(``hetvm.build`` / ``relax.build(mod, "llvm")``), with a pass instrument that
also reads off the time of the build's own passes up to and including
``StaticPlanBlockMemory`` (and, for TVM, of its whole relax pipeline).

TVM is never imported here: its half is ``benchmarks/_tvm_side.py``, run as a
subprocess with TVM's interpreter (``--tvm-python``, else ``HETVM_TVM_PYTHON``,
else ``/tmp/tvmenv/bin/python``), reading TVMScript files from a temporary
directory and answering JSON. Without that interpreter only hetvm's side is
printed. Figures are printed, never asserted.

    python benchmarks/tvm_compare.py [--sizes 1000 5000 20000] [--no-build]
                                     [--only memory|compile] [--timeout S]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import compile_time
import memory_planning

import hetvm
from hetvm.analysis.memory_plan import memory_plan_report
from hetvm.script import from_source, print_module
from hetvm.transform import PassContext, PassTimer

HERE = pathlib.Path(__file__).resolve().parent
TVM_SIDE = HERE / "_tvm_side.py"
DEFAULT_TVM_PYTHON = "/tmp/tvmenv/bin/python"


class TVMSide:
    """Runs ``_tvm_side.py`` with TVM's interpreter; ``None`` results when absent."""

    def __init__(self, python: str, timeout: float) -> None:
        self.python = python
        self.timeout = timeout
        self.version: str | None = None
        self.why_not: str | None = None
        if not pathlib.Path(python).exists():
            self.why_not = f"no TVM interpreter at {python}"
            return
        try:
            proc = subprocess.run(
                [python, "-c", "import tvm; print(tvm.__version__)"],
                capture_output=True, text=True, timeout=120,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.why_not = f"{python} did not start: {exc}"
            return
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["?"])[-1]
            self.why_not = f"{python} cannot import tvm: {last}"
            return
        self.version = proc.stdout.strip()

    @property
    def ok(self) -> bool:
        return self.version is not None

    def run(self, *args: str) -> dict:
        """One JSON answer, or ``{"error": ...}`` (timeout, crash)."""
        try:
            proc = subprocess.run(
                [self.python, str(TVM_SIDE), *args],
                capture_output=True, text=True, timeout=self.timeout,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"timeout after {self.timeout:.0f} s"}
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["?"])[-1]
            return {"error": f"exit {proc.returncode}: {last}"}
        return json.loads(proc.stdout.strip().splitlines()[-1])


def _ratio(a: float | None, b: float | None, digits: int = 2) -> str:
    return f"{a / b:.{digits}f}" if a is not None and b else "-"


def _bytes(n: int | None) -> str:
    return f"{n:,}" if n is not None else "-"


def _secs(s: float | None) -> str:
    return f"{s:.2f}" if s is not None else "-"


def memory(tvm: TVMSide, tmp: pathlib.Path, seed: int) -> None:
    programs = {
        "mlp": memory_planning.mlp(),
        "transformer": memory_planning.transformer(),
        "cnn": memory_planning.cnn(),
        "random_dag": memory_planning.random_dag(200, seed),
    }
    print("== memory: planned bytes of intermediates (returned tensors excluded on both sides)")
    print(
        f"{'program':<12} {'lower bound':>11} {'hetvm':>11} {'TVM':>11} "
        f"{'hetvm/LB':>8} {'TVM/LB':>7} {'issue 5':>7}  TVM notes"
    )
    notes = []
    for name, mod in programs.items():
        path = tmp / f"mem_{name}.py"
        path.write_text(print_module(mod), encoding="utf-8")
        dev = memory_plan_report(memory_planning.plan(from_source(path.read_text(encoding="utf-8"))))["main"][0]
        lower, planned = dev["lower_bound_bytes"], dev["planned_bytes"]
        t = tvm.run("memory", str(path)) if tvm.ok else {"error": ""}
        tvm_planned = None
        note = ""
        if "error" in t:
            note = t["error"]
        else:
            # anything TVM left as a builtin.alloc_tensor that is not returned is unplanned
            # intermediate memory: counted with its plan so the two stay comparable
            tvm_planned = t["storage_bytes"] + t["unplanned_intermediate_bytes"]
            note = f"{t['num_storage']} storages, {t['num_tensors']} tensors"
            if t["unplanned_intermediate_bytes"]:
                note += f", {t['unplanned_intermediate_bytes']:,} B unplanned"
            if t["symbolic"]:
                note += f", {len(t['symbolic'])} symbolic sizes not counted"
                notes.append(f"{name}: symbolic TVM sizes {t['symbolic']}")
        print(
            f"{name:<12} {lower:>11,} {planned:>11,} {_bytes(tvm_planned):>11} "
            f"{_ratio(planned, lower, 3):>8} {_ratio(tvm_planned, lower, 3):>7} "
            f"{memory_planning.TVM_RATIO[name]:>7.2f}  {note}"
        )
    print("issue 5 = TVM's ratio as quoted there (not measured here); LB = hetvm's lower bound")
    for n in notes:
        print(n)


def _hetvm_compile(text: str) -> dict:
    t0 = time.perf_counter()
    mod = from_source(text)
    parse = time.perf_counter() - t0
    timer = PassTimer()
    t0 = time.perf_counter()
    with PassContext(instruments=[timer]):
        hetvm.build(mod, target="llvm")
    build = time.perf_counter() - t0
    # hetvm.build's own passes up to and including the memory plan
    to_plan = 0.0
    for name, secs in timer.timings:
        to_plan += secs
        if name == "StaticPlanBlockMemory":
            break
    return {"parse_s": parse, "plan_passes_s": to_plan, "build_s": build}


def compile_times(tvm: TVMSide, tmp: pathlib.Path, sizes: list[int], build: bool) -> None:
    print("\n== compile time, seconds (one run each; parse = TVMScript text -> module)")
    print(
        f"{'program':<11} {'hetvm parse':>11} {'to plan':>8} {'build':>7} | "
        f"{'TVM parse':>9} {'to plan':>8} {'pipeline':>8} {'build':>7} | "
        f"{'plan T/h':>8} {'build T/h':>9}"
    )
    builders = {"chain": compile_time.chain, "dag": compile_time.dag}
    for n in sizes:
        for kind, builder in builders.items():
            text = print_module(builder(n))
            path = tmp / f"ct_{kind}_{n}.py"
            path.write_text(text, encoding="utf-8")
            h = _hetvm_compile(text)
            if tvm.ok:
                t = tvm.run("compile", str(path), *(["--build"] if build else []))
            else:
                t = {}
            err = t.get("error")
            print(
                f"{kind + ' ' + str(n):<11} {h['parse_s']:>11.2f} {h['plan_passes_s']:>8.2f} "
                f"{h['build_s']:>7.2f} | {_secs(t.get('parse_s')):>9} {_secs(t.get('plan_passes_s')):>8} "
                f"{_secs(t.get('relax_pipeline_s')):>8} {_secs(t.get('build_s')):>7} | "
                f"{_ratio(t.get('plan_passes_s'), h['plan_passes_s']):>8} "
                f"{_ratio(t.get('build_s'), h['build_s']):>9}" + (f"  TVM: {err}" if err else ""),
                flush=True,
            )
    print(
        "to plan = the build's passes up to StaticPlanBlockMemory; pipeline = TVM's relax pipeline "
        "(without --no-build, inside relax.build); build = hetvm.build / relax.build(mod, 'llvm'), "
        "codegen included; T/h = TVM s / hetvm s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tvm-python", default=os.environ.get("HETVM_TVM_PYTHON", DEFAULT_TVM_PYTHON),
                        help="interpreter with apache-tvm (default: $HETVM_TVM_PYTHON or %(default)s)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000],
                        help="bindings of the compile-time programs")
    parser.add_argument("--no-build", action="store_true", help="skip relax.build (TVM's passes only)")
    parser.add_argument("--only", choices=("memory", "compile"), help="one half of the comparison")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random DAG")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per TVM subprocess")
    args = parser.parse_args()
    tvm = TVMSide(args.tvm_python, args.timeout)
    if tvm.ok:
        print(f"TVM {tvm.version} via {args.tvm_python}; hetvm in {sys.executable}")
    else:
        print(f"TVM side skipped ({tvm.why_not}); printing hetvm's side only")
    with tempfile.TemporaryDirectory(prefix="hetvm_tvm_") as tmp:
        if args.only != "compile":
            memory(tvm, pathlib.Path(tmp), args.seed)
        if args.only != "memory":
            compile_times(tvm, pathlib.Path(tmp), args.sizes, not args.no_build)


if __name__ == "__main__":
    main()
