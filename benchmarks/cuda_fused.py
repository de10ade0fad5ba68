"""On a CUDA GPU: generated fused element-wise kernels (``codegen_cuda``, one
CuPy ElementwiseKernel a program) against the NumPy runner on CuPy's arrays
(one CuPy kernel and one temporary a step); the generated norm and window
kernels (``codegen_cuda_norm``, ``codegen_cuda_window``) against the
step-by-step kernels (``HETVM_CUDA_CODEGEN=0``); then whole programs built for
``cuda`` against the same programs built for the CPU. Figures are printed,
never asserted; it needs CuPy and a device and says so otherwise.

Timing: CUDA events around ``--reps`` calls after two warm-up calls (the first
call compiles), median of 5 rounds; a ratio above 1 means the generated kernel
is faster.

    python benchmarks/cuda_fused.py [--sizes 4096,1048576,16777216] [--light] [--models [--corpus-dir DIR]]

With ``PYTHONPATH=tools/fake_cupy`` it runs on the host's stand-in for CuPy:
its times mean nothing, its ``agree`` column is a check of the CUDA code paths.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

F = "float32"
PROGRAMS = {
    "silu": [("nn.silu", F, "x0")],
    "hardswish": [("const", F, 3.0), ("add", F, "x0", "t0"), ("clip", F, "t1", 0.0, 6.0),
                  ("multiply", F, "x0", "t2"), ("const", F, 1 / 6), ("multiply", F, "t3", "t4")],
    "bias_gelu_tanh": [("add", F, "x0", "x1"), ("nn.gelu_tanh", F, "t0")],
    "gelu_erf": [("nn.gelu", F, "x0")],
    "residual_relu": [("add", F, "x0", "x1"), ("nn.relu", F, "t0")],
}  # fmt: skip


def _gpu():
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy
    except Exception as err:  # no CuPy, or no driver
        print(f"no CUDA device through CuPy ({type(err).__name__}: {err})")
        return None
    print("no CUDA device through CuPy")
    return None


def gpu_seconds(cp, fn, reps: int) -> float:
    """Median over 5 rounds of the event-timed mean of ``reps`` calls."""
    fn()
    fn()
    rounds = []
    for _ in range(5):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        rounds.append(cp.cuda.get_elapsed_time(start, end) / 1e3 / reps)
    return statistics.median(rounds)


def fused_table(cp, sizes: list[int], reps: int) -> None:
    from hetvm.kernels import codegen_cuda
    from hetvm.kernels.fused_program import NumpyRunner

    print(f"{'program':16s} {'elements':>10s} {'generated us':>13s} {'runner us':>10s} {'ratio':>6s}")
    for name, steps in PROGRAMS.items():
        program = tuple(tuple(s) for s in steps)
        n_inputs = 1 + max(int(r[1:]) for s in program for r in s[2:] if isinstance(r, str) and r[:1] == "x")
        for size in sizes:
            rows = max(1, size // 1024)
            inputs = [cp.asarray(np.random.default_rng(i).standard_normal((rows, size // rows)).astype(F))
                      for i in range(n_inputs)]  # fmt: skip
            out = cp.empty(inputs[0].shape, F)
            generated = codegen_cuda.generated_kernel(cp, program)
            runner = NumpyRunner(cp, program)
            t_gen = gpu_seconds(cp, lambda g=generated, a=inputs, o=out: g(*a, o), reps)
            t_run = gpu_seconds(cp, lambda r=runner, a=inputs, o=out: r(*a, o), reps)
            print(f"{name:16s} {size:10d} {t_gen * 1e6:13.1f} {t_run * 1e6:10.1f} {t_run / t_gen:6.2f}")


# the generated norm / window kernels: name -> (op, attrs, input shapes, output shape)
_CONV3 = {"strides": (1, 1), "padding": (1, 1, 1, 1)}
OPS = {
    "softmax 4096x128": ("nn.softmax", {"axis": -1}, [(4096, 128)], (4096, 128)),
    "softmax 64x32768": ("nn.softmax", {"axis": -1}, [(64, 32768)], (64, 32768)),
    "layer_norm 512x768": ("nn.layer_norm", {"axes": (-1,), "epsilon": 1e-5}, [(512, 768), (768,), (768,)], (512, 768)),
    "rms_norm 512x4096": ("nn.rms_norm", {"axes": (-1,), "epsilon": 1e-6}, [(512, 4096), (4096,)], (512, 4096)),
    "max_pool 3x3/2 64x112x112": ("nn.max_pool2d", {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)},
                                  [(1, 64, 112, 112)], (1, 64, 56, 56)),
    "avg_pool 3x3/1 256x35x35": ("nn.avg_pool2d", {"pool_size": (3, 3), **_CONV3}, [(1, 256, 35, 35)], (1, 256, 35, 35)),
    "depthwise 3x3 144x56x56": ("nn.conv2d", {**_CONV3, "groups": 144}, [(1, 144, 56, 56), (144, 1, 3, 3)],
                                (1, 144, 56, 56)),
    "depthwise 3x3/2 +bias,relu": ("nn.conv2d_bias_act", {"strides": (2, 2), "padding": (1, 1, 1, 1), "groups": 96,
                                   "activation": "relu"}, [(1, 96, 112, 112), (96, 1, 3, 3), (96,)], (1, 96, 56, 56)),
    "conv 3x3 64x56x56 +bias,relu": ("nn.conv2d_bias_act", {**_CONV3, "groups": 1, "activation": "relu"},
                                     [(1, 64, 56, 56), (64, 64, 3, 3), (64,)], (1, 64, 56, 56)),
}  # fmt: skip


def ops_table(cp, reps: int) -> None:
    """Each op's kernel with generated CUDA kernels on, then with them off
    (``HETVM_CUDA_CODEGEN=0``: the step-by-step kernels on CuPy), and the
    largest difference between the two outputs."""
    import os

    from hetvm.kernels.registry import bind_kernel

    print(f"\n{'op':30s} {'generated us':>13s} {'steps us':>9s} {'ratio':>6s} {'max |diff|':>11s}")
    for name, (op, attrs, shapes, out_shape) in OPS.items():
        inputs = [cp.asarray(np.random.default_rng(i).standard_normal(s).astype(F)) for i, s in enumerate(shapes)]
        times, outs = {}, {}
        for setting in ("1", "0"):
            os.environ["HETVM_CUDA_CODEGEN"] = setting
            kernel = bind_kernel(op, "cuda", cp, attrs)
            out = cp.empty(out_shape, F)
            times[setting] = gpu_seconds(cp, lambda k=kernel, a=inputs, o=out: k(*a, o), reps)
            outs[setting] = cp.asnumpy(out)
        os.environ.pop("HETVM_CUDA_CODEGEN")
        diff = float(np.max(np.abs(outs["1"] - outs["0"])))
        t_gen, t_steps = times["1"], times["0"]
        print(f"{name:30s} {t_gen * 1e6:13.1f} {t_steps * 1e6:9.1f} {t_steps / t_gen:6.2f} {diff:11.2e}")


def models_table(cp, reps: int, corpus_dir: str | None) -> None:
    """The exported corpus's first setting (``corpus_dir``: another folder with a
    manifest, such as tools/export_held_out.py's): hetvm on the GPU against hetvm
    on the CPU (wall clock: a call ends with a host copy), and whether they agree."""
    import os

    import onnx

    from hetvm.frontend import from_onnx
    from hetvm.testing.exported_corpus import CORPUS_DIR, draw_inputs, load_manifest

    print(f"\n{'model':44s} {'cuda ms':>8s} {'cpu ms':>8s} {'agree':>6s}")
    folder = corpus_dir or CORPUS_DIR
    for file, entry in load_manifest(folder).items():
        feeds = draw_inputs(entry, entry["settings"][0], 0)
        _compare(file, from_onnx(onnx.load(os.path.join(folder, file))), [feeds[i["name"]] for i in entry["inputs"]],
                 reps)  # fmt: skip


def light_table(reps: int) -> None:
    """The light ONNX CNNs (their pooling, depthwise convolutions and epilogues
    run the generated window kernels on cuda), cuda against the CPU."""
    from hetvm.frontend import from_onnx
    from hetvm.testing.light_models import light_input, light_names, load_light

    print(f"\n{'model':44s} {'cuda ms':>8s} {'cpu ms':>8s} {'agree':>6s}")
    for name in light_names():
        model = load_light(name)
        _compare(name, from_onnx(model), [light_input(model)], reps)


def _compare(name: str, mod, args: list, reps: int) -> None:
    """One row: ``mod`` built for cuda and for the CPU, best wall time of each
    over ``reps`` calls, and whether the outputs agree."""
    import hetvm

    timings, results = {}, {}
    for target in ("cuda", "llvm"):
        fn = hetvm.VirtualMachine(hetvm.build(mod, target=target))["main"]  # its devices
        results[target] = fn(*args)
        best = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            fn(*args)
            best = min(best, time.perf_counter() - t0)
        timings[target] = best
    agree = _agree(results["cuda"], results["llvm"])
    print(f"{name:44s} {timings['cuda'] * 1e3:8.2f} {timings['llvm'] * 1e3:8.2f} {agree:>6s}")


def _agree(a, b) -> str:
    def flat(o):
        return [y for x in o for y in flat(x)] if isinstance(o, (list, tuple)) else [np.asarray(o.numpy())]

    for x, y in zip(flat(a), flat(b)):
        if x.dtype.kind == "f" and not np.allclose(x, y, rtol=1e-3, atol=1e-4, equal_nan=True):
            return "no"
        if x.dtype.kind != "f" and not np.array_equal(x, y):
            return "no"
    return "yes"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4096,1048576,16777216")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--models", action="store_true", help="also whole corpus models, cuda vs cpu")
    ap.add_argument("--light", action="store_true", help="also the light ONNX CNNs, cuda vs cpu")
    ap.add_argument("--corpus-dir", default=None, help="the models' folder (default: the exported corpus)")
    ap.add_argument("--no-kernels", action="store_true", help="skip the kernel tables")
    args = ap.parse_args()
    cp = _gpu()
    if cp is None:
        sys.exit(0)
    if not args.no_kernels:
        fused_table(cp, [int(s) for s in args.sizes.split(",")], args.reps)
        ops_table(cp, args.reps)
    if args.light:
        light_table(max(3, args.reps // 4))
    if args.models:
        models_table(cp, max(3, args.reps // 4), args.corpus_dir)


if __name__ == "__main__":
    main()
