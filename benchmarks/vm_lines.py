"""Where one VM call's own time goes: each line of the generated function, timed.

The VM runs a function as generated Python (``vm.source(name)``, see
hetvm/runtime/codegen.py). This script re-compiles that source with a
``perf_counter_ns`` stamp after every line, runs the model's ``main`` many
times, and prints the median time of each line, of the entry before the first
line (checks, thread budget) and of the exit after the last (results,
releases). Figures are printed, never asserted; stamps add about 0.1 us a line.

    python benchmarks/vm_lines.py bert_dynamo [--calls 2000] [--threads 1] [--min-us 0.5]

A model is named as in benchmarks/onnx_models.py (a light model, ``encoder`` or
a corpus model's file name without .onnx).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_models import _set_threads  # noqa: E402

_THREADS = _set_threads(sys.argv[1:])

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-us", type=float, default=0.0, help="print only lines at least this long")
    args = ap.parse_args(argv)

    from onnx_models import load_model

    from hetvm.cli_support.placement import parse_devices
    from hetvm.cli_support.session import compile_program, configure_runtime
    from hetvm.frontend import from_onnx
    from hetvm.runtime.vm import VirtualMachine

    model, feeds = load_model(args.model, 1)
    setup = parse_devices("cpu")
    compiled = compile_program(from_onnx(model), setup, want_explain=False)
    vm = VirtualMachine(compiled.exe, devices=configure_runtime(setup), threads=_THREADS)
    inputs = list(feeds.values())
    call = vm["main"]
    for _ in range(50):  # compiles segments, warms pools and caches
        call(*inputs)
    cf = vm._compiled["main"]
    src = cf.source.splitlines()
    timed = [src[0], "    _T = _STAMPS; _t = _NOW", "    _T.append(_t())"]
    labels = []
    for line in src[1:]:
        timed += [line, " " * (len(line) - len(line.lstrip())) + "_T.append(_t())"]
        labels.append(line.strip())
    ns = cf.fn.__globals__
    stamps: list[int] = []
    ns["_STAMPS"], ns["_NOW"] = stamps, time.perf_counter_ns
    exec(compile("\n".join(timed) + "\n", cf.filename, "exec"), ns)  # noqa: S102 - the VM's own source
    cf.fn = ns["_vmfn"]
    for _ in range(50):
        call(*inputs)
    runs = []
    for _ in range(args.calls):
        stamps.clear()
        t0 = time.perf_counter_ns()
        call(*inputs)
        runs.append((list(stamps), t0, time.perf_counter_ns()))
    if any(len(r[0]) != len(runs[0][0]) for r in runs):
        raise SystemExit("the function branches: lines ran a different number of times per call")

    def med(values) -> float:
        return statistics.median(values) / 1e3

    n = len(runs[0][0])
    print(f"{args.model}: {med(r[2] - r[1] for r in runs):.1f} us a call (median of {args.calls}, "
          f"{_THREADS} thread(s)); entry {med(r[0][0] - r[1] for r in runs):.1f} us, "
          f"exit {med(r[2] - r[0][-1] for r in runs):.1f} us")
    for i, label in enumerate(labels[: n - 1]):
        us = med(r[0][i + 1] - r[0][i] for r in runs)
        if us >= args.min_us:
            print(f"{us:8.2f}  {label[:110]}")


if __name__ == "__main__":
    main()
