"""Where hetvm's time goes on the ONNX models: per-kernel time vs VM overhead.

Each kernel the VM binds is wrapped with a timer (keyed by op, or by op and
argument shapes with ``--by-shape``); the rest of a call's time is the VM's
own work (generated dispatch code, allocation, kills). Times are this
thread's CPU time (``time.thread_time``) by default, which other processes on
a shared machine do not inflate (the kernels are single-threaded at
``--threads 1``); ``--clock wall`` uses ``perf_counter``. Figures are printed,
never asserted.

    python benchmarks/kernels_profile.py [--models squeezenet,resnet50,mobilenet_v3_dynamo]
                                         [--batch 1] [--repeat 5] [--threads 1]
                                         [--by-shape] [--top 15] [--clock cpu|wall]
                                         [--vs-ort] [--split-segments] [--corpus-dir DIR]

With Numba on, the VM runs stretches of kernels as compiled segments
(``hetvm/runtime/segments.py``), whose time the kernel timers do not see
("the rest"). ``--split-segments`` compiles every covered call of the timed
VM as its own stretch and times each: the compiled calls appear as
``op [seg]`` (one more Numba dispatch each, so a little slower than fused).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_models import _set_threads  # noqa: E402

_THREADS = _set_threads(sys.argv[1:])

import argparse  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402


def profile(name: str, batch: int, repeat: int, by_shape: bool, top: int, clock, vs_ort: bool,
            split: bool = False, corpus_dir: str | None = None) -> None:
    from onnx_models import load_model

    import hetvm.runtime.codegen as codegen
    from hetvm.cli_support.placement import parse_devices
    from hetvm.cli_support.session import compile_program, configure_runtime
    from hetvm.frontend import from_onnx
    from hetvm.runtime.vm import VirtualMachine

    model, feeds = load_model(name, batch, corpus_dir)
    setup = parse_devices("cpu")
    compiled = compile_program(from_onnx(model), setup, want_explain=False)

    times: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    real_bind = codegen.bind_kernel

    def timed_bind(op, kind, xp, attrs):
        fn = real_bind(op, kind, xp, attrs)
        perf = clock

        def wrapped(*args):
            key = op
            if by_shape:
                shapes = [tuple(a.shape) for a in args if hasattr(a, "shape")]
                key = f"{op} {shapes}"
            t0 = perf()
            fn(*args)
            times[key] += perf() - t0
            counts[key] += 1

        return wrapped

    args = list(feeds.values())
    plain = VirtualMachine(compiled.exe, devices=configure_runtime(setup), threads=_THREADS)
    codegen.bind_kernel = timed_bind
    try:
        vm = VirtualMachine(compiled.exe, devices=configure_runtime(setup), threads=_THREADS)
    finally:
        codegen.bind_kernel = real_bind
    if split:
        plain["main"](*args)  # plans the untimed VM's segments as they are
        _split_segments(times, counts, by_shape, clock)

    def best(fn, snapshot=False) -> float:
        """Smallest time over ``repeat`` runs (after one warm-up); with
        ``snapshot`` the kernel times of that run are left in ``times``."""
        fn()
        best_t, kept = float("inf"), ({}, {})
        for _ in range(repeat):
            times.clear()
            counts.clear()
            t0 = clock()
            fn()
            t = clock() - t0
            if t < best_t:
                best_t, kept = t, (dict(times), dict(counts))
        if snapshot:
            times.clear()
            counts.clear()
            times.update(kept[0])
            counts.update(kept[1])
        return best_t

    if vs_ort:
        _versus_ort(name, batch, model, feeds, lambda: plain["main"](*args), repeat)
        return
    plain_t = best(lambda: plain["main"](*args))
    timed_t = best(lambda: vm["main"](*args), snapshot=True)
    kern = sum(times.values())
    # the timers' own cost is in timed_t, not in the kernels' times: the VM's share
    # is the untimed call less the kernels
    print(f"== {name} batch {batch}: {_ms(plain_t)} ms a call (best of {repeat}); with timers "
          f"{_ms(timed_t)} ms: kernels {_ms(kern)} ms in {sum(counts.values())} calls, "
          f"the rest (VM: dispatch, allocation, argument checks) {_ms(max(plain_t - kern, 0.0))} ms")
    for key, t in sorted(times.items(), key=lambda kv: -kv[1])[:top]:
        print(f"   {_ms(t):>8} ms  {counts[key]:4d}x  {key}")


def _split_segments(times, counts, by_shape: bool, clock) -> None:
    """Makes every segment planned from now on compile one function per covered
    call and time each (keyed ``op [seg]``)."""
    import hetvm.runtime.segments as segments

    real_plan = segments.Segment._plan

    def plan_split(self, args):
        old, segments.MAX_STRETCH = segments.MAX_STRETCH, 1
        try:
            pieces = real_plan(self, args)
        finally:
            segments.MAX_STRETCH = old
        out = []
        for kind, fn, idx, ks in pieces:
            if kind == "g":
                call = self.calls[ks[0]]
                key = f"{call.op} [seg]"
                if by_shape:
                    key += f" {[tuple(args[i].shape) for i in idx if hasattr(args[i], 'shape')]}"
                fn = _timed(fn, key, times, counts, clock)
            out.append((kind, fn, idx, ks))
        return out

    segments.Segment._plan = plan_split


def _timed(fn, key, times, counts, clock):
    def run(*a):
        t0 = clock()
        fn(*a)
        times[key] += clock() - t0
        counts[key] += 1

    return run


def _ms(seconds: float) -> str:
    """Milliseconds with three decimals below 10 ms (the corpus's tiny models)."""
    ms = seconds * 1e3
    return f"{ms:.1f}" if ms >= 10 else f"{ms:.3f}"


def _versus_ort(name: str, batch: int, model, feeds, run_hetvm, repeat: int) -> None:
    """hetvm and ONNX Runtime timed alternately, one call each per round, and the
    smallest wall time of each kept: on a shared machine (other processes, an
    SMT sibling halving AVX throughput) the minimum of interleaved runs is the
    figure least skewed against either side."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = _THREADS
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    run_hetvm()
    sess.run(None, feeds)
    h = o = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        run_hetvm()
        t1 = time.perf_counter()
        sess.run(None, feeds)
        t2 = time.perf_counter()
        h, o = min(h, t1 - t0), min(o, t2 - t1)
    print(f"{name:<14}{batch:>5} hetvm {h * 1e3:9.2f} ms  ORT {o * 1e3:9.2f} ms  ratio {h / o:5.2f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="bvlc_alexnet,resnet50,shufflenet,squeezenet,vgg19,encoder")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--by-shape", action="store_true")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--vs-ort", action="store_true", help="min wall time against ORT, interleaved")
    ap.add_argument("--split-segments", action="store_true", help="time each compiled call of a segment")
    ap.add_argument("--corpus-dir", default=None, help="corpus models from this folder (see onnx_models.py)")
    a = ap.parse_args()
    for m in a.models.split(","):
        clock = time.thread_time if a.clock == "cpu" else time.perf_counter
        profile(m, a.batch, a.repeat, a.by_shape, a.top, clock, a.vs_ort, a.split_segments, a.corpus_dir)


if __name__ == "__main__":
    main()
