"""Where hetvm's time goes on the ONNX models: per-kernel time vs VM overhead.

Each kernel the VM binds is wrapped with a timer (keyed by op, or by op and
argument shapes with ``--by-shape``); the rest of a call's wall time is the
VM's own work (generated dispatch code, allocation, kills). Figures are
printed, never asserted.

    python benchmarks/kernels_profile.py [--models squeezenet,resnet50]
                                         [--batch 1] [--repeat 5] [--threads 1]
                                         [--by-shape] [--top 15]
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


def profile(name: str, batch: int, repeat: int, by_shape: bool, top: int) -> None:
    import onnx
    from onnx_models import encoder_model, feeds_for, light_path, with_batch

    import hetvm.runtime.codegen as codegen
    from hetvm.cli_support.placement import parse_devices
    from hetvm.cli_support.session import compile_program, configure_runtime
    from hetvm.frontend import from_onnx
    from hetvm.runtime.vm import VirtualMachine

    if name == "encoder":
        model = encoder_model(batch)
    else:
        base = onnx.load(light_path(name))
        model = base if batch == 1 else with_batch(base, batch)
    feeds = feeds_for(model)
    setup = parse_devices("cpu")
    compiled = compile_program(from_onnx(model), setup, want_explain=False)

    times: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    real_bind = codegen.bind_kernel

    def timed_bind(op, kind, xp, attrs):
        fn = real_bind(op, kind, xp, attrs)
        perf = time.perf_counter

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
    plain = VirtualMachine(compiled.exe, devices=configure_runtime(setup))
    codegen.bind_kernel = timed_bind
    try:
        vm = VirtualMachine(compiled.exe, devices=configure_runtime(setup))
    finally:
        codegen.bind_kernel = real_bind

    def best(fn) -> float:
        fn()
        out = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return min(out)

    wall_plain = best(lambda: plain["main"](*args))
    times.clear()
    counts.clear()
    wall_timed = best(lambda: vm["main"](*args))
    runs = repeat + 1
    kern = sum(times.values()) / runs
    n_calls = sum(counts.values()) // runs
    print(f"== {name} batch {batch}: best {wall_plain * 1e3:.1f} ms untimed; timed run {wall_timed * 1e3:.1f} ms, "
          f"kernels {kern * 1e3:.1f} ms over {n_calls} calls, rest (VM) ~{(wall_timed - kern) * 1e3:.1f} ms")
    for key, t in sorted(times.items(), key=lambda kv: -kv[1])[:top]:
        print(f"   {t / runs * 1e3:8.2f} ms  {counts[key] // runs:4d}x  {key}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="bvlc_alexnet,resnet50,shufflenet,squeezenet,vgg19,encoder")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--by-shape", action="store_true")
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args()
    for m in a.models.split(","):
        profile(m, a.batch, a.repeat, a.by_shape, a.top)


if __name__ == "__main__":
    main()
