"""hetvm against ONNX Runtime on real models (figures printed, never asserted).

For each light model that ships with the ``onnx`` package and a transformer
encoder built with ``onnx.helper`` (at batch 1 and 8), and with ``--corpus``
each model of the exported corpus (tests/frontend/exported/, at the first
setting of its manifest: batch 1), in one run:

* hetvm's and ONNX Runtime's median latency, timed interleaved (one timed call
  of each per round, so a load change on a shared machine hits both; before
  it, ``--settle`` seconds of untimed calls of the same runtime let the other's
  spinning threads go quiet, see ``interleaved_medians``), with the
  same thread count (hetvm's thread budget for BLAS and generated kernels,
  ``intra_op_num_threads`` for ORT) and their ratio;
* hetvm's memory: the planner's lower bound and planned bytes, and the peak the
  VM measured (all devices together);
* output agreement with ORT (max |difference| and allclose at rtol 1e-3, atol 1e-5);
* at the end, the median and worst ratio over the rows at batch 1.

    python benchmarks/onnx_models.py [--threads 2] [--repeat 5] [--batches 1,8]
                                     [--models squeezenet,encoder] [--corpus] [--stat min] [--clock cpu]
                                     [--settle 0.1] [--corpus-dir DIR]
                                     [--devices cpu] [--ort-level all|extended|basic]

``--models ''`` with ``--corpus`` runs the corpus alone; a corpus model can also
be named in ``--models`` by its file name without ``.onnx`` (``resnet_legacy``).
``--corpus-dir DIR`` takes the corpus from another folder that
``tools/export_models.py --out DIR`` wrote (models kept out of the tests).
``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` are removed from the environment
before NumPy loads (a core type forced for another machine skews BLAS).
``--ort-level extended`` times ORT without its NCHWc layout transform (blocked
direct convolutions): the im2col + SGEMM path hetvm also takes, which shows how
much of ORT's lead is that one kernel family.

The ORT columns are left out when onnxruntime is not installed
(``pip install onnxruntime``).
"""

from __future__ import annotations

import argparse
import os
import sys


def _set_threads(argv: list[str]) -> int:
    """BLAS thread count must be fixed before NumPy is imported."""
    threads = 1
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            threads = int(argv[i + 1])
        elif a.startswith("--threads="):
            threads = int(a.split("=", 1)[1])
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
        os.environ[var] = str(threads)
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        os.environ.pop(var, None)
    return threads


_THREADS = _set_threads(sys.argv[1:])

import copy  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

LIGHT = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
         "shufflenet", "squeezenet", "vgg19", "zfnet512"]  # fmt: skip


def light_path(name: str) -> str:
    import onnx

    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", f"light_{name}.onnx")


def encoder_model(batch: int, seq: int = 128, hidden: int = 256, heads: int = 4, ffn: int = 1024,
                  layers: int = 2, seed: int = 0):  # fmt: skip
    """A post-LN BERT-style encoder (MatMul/Add/Split/Reshape/Transpose/Softmax/
    LayerNormalization/Erf-GELU) with static shapes, weights seeded."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    hd = hidden // heads
    inits: dict[str, np.ndarray] = {
        "qkv_split": np.array([hidden] * 3, np.int64),
        "split_shape": np.array([batch, seq, heads, hd], np.int64),
        "merge_shape": np.array([batch, seq, hidden], np.int64),
        "scale": np.array(np.sqrt(hd), np.float32),
        "sqrt2": np.array(np.sqrt(2.0), np.float32),
        "one": np.array(1.0, np.float32),
        "half": np.array(0.5, np.float32),
    }
    nodes = []
    mk = helper.make_node
    x = "x"
    for i in range(layers):
        p = f"l{i}_"

        def w(name: str, *shape: int, scale: float = 0.05, _p: str = p) -> str:
            inits[_p + name] = (rng.standard_normal(shape) * scale).astype(np.float32)
            return _p + name

        inits[p + "g1"] = np.ones(hidden, np.float32)
        inits[p + "b1n"] = np.zeros(hidden, np.float32)
        inits[p + "g2"] = np.ones(hidden, np.float32)
        inits[p + "b2n"] = np.zeros(hidden, np.float32)
        nodes += [
            mk("MatMul", [x, w("wqkv", hidden, 3 * hidden)], [p + "qkv0"]),
            mk("Add", [p + "qkv0", w("bqkv", 3 * hidden)], [p + "qkv"]),
            mk("Split", [p + "qkv", "qkv_split"], [p + "q0", p + "k0", p + "v0"], axis=-1),
            mk("Reshape", [p + "q0", "split_shape"], [p + "q1"]),
            mk("Reshape", [p + "k0", "split_shape"], [p + "k1"]),
            mk("Reshape", [p + "v0", "split_shape"], [p + "v1"]),
            mk("Transpose", [p + "q1"], [p + "q"], perm=[0, 2, 1, 3]),
            mk("Transpose", [p + "k1"], [p + "kt"], perm=[0, 2, 3, 1]),
            mk("Transpose", [p + "v1"], [p + "v"], perm=[0, 2, 1, 3]),
            mk("MatMul", [p + "q", p + "kt"], [p + "s0"]),
            mk("Div", [p + "s0", "scale"], [p + "s1"]),
            mk("Softmax", [p + "s1"], [p + "pr"], axis=-1),
            mk("MatMul", [p + "pr", p + "v"], [p + "c0"]),
            mk("Transpose", [p + "c0"], [p + "c1"], perm=[0, 2, 1, 3]),
            mk("Reshape", [p + "c1", "merge_shape"], [p + "c"]),
            mk("MatMul", [p + "c", w("wo", hidden, hidden)], [p + "a0"]),
            mk("Add", [p + "a0", w("bo", hidden)], [p + "a"]),
            mk("Add", [p + "a", x], [p + "r1"]),
            mk("LayerNormalization", [p + "r1", p + "g1", p + "b1n"], [p + "h1"], axis=-1, epsilon=1e-5),
            mk("MatMul", [p + "h1", w("w1", hidden, ffn)], [p + "f0"]),
            mk("Add", [p + "f0", w("bf1", ffn)], [p + "f1"]),
            mk("Div", [p + "f1", "sqrt2"], [p + "f2"]),
            mk("Erf", [p + "f2"], [p + "f3"]),
            mk("Add", [p + "f3", "one"], [p + "f4"]),
            mk("Mul", [p + "f1", p + "f4"], [p + "f5"]),
            mk("Mul", [p + "f5", "half"], [p + "f6"]),
            mk("MatMul", [p + "f6", w("w2", ffn, hidden)], [p + "f7"]),
            mk("Add", [p + "f7", w("bf2", hidden)], [p + "f8"]),
            mk("Add", [p + "f8", p + "h1"], [p + "r2"]),
            mk("LayerNormalization", [p + "r2", p + "g2", p + "b2n"], [p + "out"], axis=-1, epsilon=1e-5),
        ]
        x = p + "out"
    nodes.append(mk("Identity", [x], ["y"]))
    graph = helper.make_graph(
        nodes,
        "encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, seq, hidden])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def with_batch(model, batch: int):
    """A copy of ``model`` whose first input has batch ``batch`` (outputs left free)."""
    out = copy.deepcopy(model)
    inits = {i.name for i in out.graph.initializer}
    first = next(vi for vi in out.graph.input if vi.name not in inits)
    first.type.tensor_type.shape.dim[0].dim_value = batch
    for vo in out.graph.output:
        dims = vo.type.tensor_type.shape.dim
        if dims:
            dims[0].dim_param = "batch"
    del out.graph.value_info[:]
    # the light models were exported at batch 1 with Reshape targets like
    # [1, 9216]; ONNX's 0 ("copy this dim from the input") makes them batch-free
    from onnx import numpy_helper

    shape_inputs = {n.input[1] for n in out.graph.node if n.op_type == "Reshape" and len(n.input) > 1}
    for i, init in enumerate(out.graph.initializer):
        if init.name in shape_inputs:
            arr = numpy_helper.to_array(init).copy()
            if arr.ndim == 1 and arr.size and arr[0] == 1:
                arr[0] = 0
                out.graph.initializer[i].CopyFrom(numpy_helper.from_array(arr, init.name))
    return out


def feeds_for(model, seed: int = 0) -> dict[str, np.ndarray]:
    from onnx import helper

    rng = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    out = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        out[vi.name] = rng.standard_normal(shape).astype(dtype)
    return out


def corpus_names(corpus_dir: str | None = None) -> list[str]:
    """The exported corpus's models, by file name without ``.onnx``."""
    from hetvm.testing.exported_corpus import CORPUS_DIR, load_manifest

    return [f[: -len(".onnx")] for f in sorted(load_manifest(corpus_dir or CORPUS_DIR))]


def load_model(name: str, batch: int, corpus_dir: str | None = None):
    """(ONNX model, feeds) of a light model, the encoder or a corpus model (whose
    inputs are those of its manifest's first setting; ``batch`` is ignored).
    ``corpus_dir``: another folder written by ``tools/export_models.py --out``
    (models held out of the tests) instead of the committed corpus."""
    import onnx

    if name == "encoder":
        model = encoder_model(batch)
        return model, feeds_for(model)
    if name in LIGHT:
        base = onnx.load(light_path(name))
        model = base if batch == 1 else with_batch(base, batch)
        return model, feeds_for(model)
    from hetvm.testing.exported_corpus import CORPUS_DIR, draw_inputs, load_manifest

    corpus_dir = corpus_dir or CORPUS_DIR
    entry = load_manifest(corpus_dir).get(name + ".onnx")
    if entry is None:
        raise SystemExit(f"unknown model {name!r}: not a light model, 'encoder' or a model of {corpus_dir}")
    model = onnx.load(os.path.join(corpus_dir, entry["file"]))
    return model, draw_inputs(entry, entry["settings"][0], 0)


def interleaved_medians(fns: list, repeat: int, stat=statistics.median, clock=time.perf_counter,
                        settle: float = 0.0) -> list[float]:  # fmt: skip
    """Median (or ``stat``) seconds of each callable, timed one call of each per
    round (after warm-up rounds: pools, caches, CPython's specialisation of
    generated code).

    ``settle`` > 0: before its timed call in a round, each callable runs untimed
    for at least that many seconds (at least once). Why: a runtime's thread pool
    keeps working after its call returns -- ONNX Runtime's workers spin for new
    work, OpenBLAS's poll for about 0.1 s -- and on a machine with as many
    cores as threads, the call timed right after it runs with a core taken
    away. Measured at 2 threads on 2 cores: the encoder's hetvm call took 12-13
    ms right after an ORT call, 5.6-6.0 ms after hetvm's own calls or next to an
    ORT session that does not spin. Settling times each runtime as a server
    that runs its own requests back to back sees it, while the rounds still
    alternate, so a change of load hits both."""
    for fn in fns:
        for _ in range(3):
            fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, ts in zip(fns, times):
            if settle > 0:
                until = time.perf_counter() + settle
                fn()
                while time.perf_counter() < until:
                    fn()
            t0 = clock()
            fn()
            ts.append(clock() - t0)
    return [stat(ts) for ts in times]


def prepare_hetvm(model, feeds, devices: str) -> dict:
    """Imports and builds ``model``; ``call`` runs it once (the VM under the
    benchmark's thread budget), ``finish()`` gives outputs and memory figures."""
    from hetvm.cli_support.placement import parse_devices
    from hetvm.cli_support.reports import memory_rows, plan_of
    from hetvm.cli_support.session import compile_program, configure_runtime
    from hetvm.frontend import from_onnx
    from hetvm.runtime.device import cpu
    from hetvm.runtime.vm import VirtualMachine

    t0 = time.perf_counter()
    mod = from_onnx(model)
    t1 = time.perf_counter()
    setup = parse_devices(devices)
    compiled = compile_program(mod, setup, want_explain=False)
    t2 = time.perf_counter()
    vm = VirtualMachine(compiled.exe, devices=configure_runtime(setup), threads=_THREADS)
    args = list(feeds.values())
    holder: list = []

    def call() -> None:
        holder[:] = [vm["main"](*args)]

    def finish() -> dict:
        out = holder[0]
        outs = list(out) if isinstance(out, tuple) else [out]
        arrays = [(o.copyto(cpu(0)) if o.device.kind != "cpu" else o).numpy() for o in outs]
        rows = memory_rows(plan_of(compiled.exe), vm.memory_report())
        total = {k: sum(r.get(k) or 0 for r in rows) for k in ("lower_bound", "planned", "peak")}
        return {"import_s": t1 - t0, "build_s": t2 - t1, "outputs": arrays, **total}

    return {"call": call, "finish": finish}


# ORT graph optimisation levels: "all" (ORT's default) includes the NCHWc layout
# transform, whose blocked direct convolutions are most of ORT's lead on
# convolutional models; "extended" stops before it (im2col + SGEMM, like hetvm)
ORT_LEVELS = ("all", "extended", "basic")


def prepare_ort(model, feeds, threads: int, level: str = "all") -> dict | None:
    """An ORT session of ``model`` (None without onnxruntime); ``call`` runs it once."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    opts.graph_optimization_level = {
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    }[level]
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    holder: list = []

    def call() -> None:
        holder[:] = [sess.run(None, feeds)]

    return {"call": call, "finish": lambda: {"outputs": holder[0]}}


def _mib(n: int | None) -> str:
    return "-" if not n else f"{n / (1 << 20):.2f}"


def agreement(a: list[np.ndarray], b: list[np.ndarray]) -> tuple[str, str]:
    if len(a) != len(b):
        return "-", f"{len(a)} vs {len(b)} outputs"
    worst = 0.0
    ok = True
    for x, y in zip(a, b):
        if x.shape != y.shape:
            return "-", f"shape {x.shape} vs {y.shape}"
        worst = max(worst, float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)), initial=0.0)))
        ok &= bool(np.allclose(x, y, rtol=1e-3, atol=1e-5))
    return f"{worst:.1e}", "yes" if ok else "NO"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--models", default=",".join(LIGHT + ["encoder"]))
    ap.add_argument("--corpus", action="store_true", help="also every model of the exported corpus (batch 1)")
    ap.add_argument("--corpus-dir", default=None,
                    help="with --corpus: a folder of models with a manifest.json written by "
                         "tools/export_models.py --out (default: tests/frontend/exported)")
    ap.add_argument("--devices", default="cpu", help="hetvm devices, e.g. sim:0,cpu")
    ap.add_argument("--stat", choices=("median", "min"), default="median",
                    help="figure of the interleaved calls (min: least skewed on a loaded machine)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: this thread's CPU time, which other processes do not inflate "
                         "(one thread only: both hetvm and ORT then run on the calling thread)")
    ap.add_argument("--ort-level", choices=ORT_LEVELS, default="all",
                    help="ORT graph optimisation level (all: ORT's default, with NCHWc; extended: without)")
    ap.add_argument("--settle", type=float, default=0.1,
                    help="seconds each runtime runs untimed before its timed call in a round, so the "
                         "other's pool has gone quiet (0: strict call-by-call alternation)")
    args = ap.parse_args(argv)

    if args.clock == "cpu" and args.threads != 1:
        raise SystemExit("--clock cpu measures the calling thread only: use it with --threads 1")
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    batches = [int(b) for b in args.batches.split(",") if b]
    names = [m for m in args.models.split(",") if m]
    corpus = set(corpus_names(args.corpus_dir)) if args.corpus else set()
    names += sorted(corpus - set(names))
    has_ort = True
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        has_ort = False
    print(f"hetvm vs ONNX Runtime (optimisation level {args.ort_level}), {args.threads} thread(s), "
          f"{args.stat} of {args.repeat} interleaved calls ({args.clock} time, {args.settle:g} s settle), "
          f"hetvm on {args.devices}")
    if not has_ort:
        print("(onnxruntime is not installed: ORT columns left out; pip install onnxruntime)")
    head = f"{'model':<24}{'batch':>5} {'hetvm ms':>10}"
    if has_ort:
        head += f" {'ORT ms':>9} {'ratio':>6}"
    head += f" {'bound MiB':>10} {'planned':>8} {'peak':>8}"
    if has_ort:
        head += f" {'max|diff|':>10} {'agree':>6}"
    print(head)
    print("-" * len(head))
    ratios: dict[str, float] = {}  # batch-1 rows
    for name in names:
        in_corpus = name not in LIGHT and name != "encoder"
        for batch in [1] if in_corpus else batches:
            label = f"{name:<24}{batch:>5}"
            try:
                model, feeds = load_model(name, batch, args.corpus_dir)
                h = prepare_hetvm(model, feeds, args.devices)
            except Exception as err:  # noqa: BLE001 - a benchmark reports, it does not stop
                print(f"{label} hetvm failed: {type(err).__name__}: {str(err).splitlines()[0][:120]}")
                continue
            o = None
            if has_ort:
                try:
                    o = prepare_ort(model, feeds, args.threads, args.ort_level)
                except Exception as err:  # noqa: BLE001
                    print(f"{label} ORT failed: {type(err).__name__}: {str(err).splitlines()[0][:120]}")
            try:
                stat = min if args.stat == "min" else statistics.median
                secs = interleaved_medians([h["call"]] + ([o["call"]] if o else []), args.repeat, stat, clock, args.settle)
            except Exception as err:  # noqa: BLE001
                print(f"{label} run failed: {type(err).__name__}: {str(err).splitlines()[0][:120]}")
                continue
            hf = h["finish"]()
            line = f"{label} {secs[0] * 1e3:>10.2f}"
            if has_ort:
                if o is not None:
                    ratio = secs[0] / secs[1]
                    if batch == 1:
                        ratios[name] = ratio
                    line += f" {secs[1] * 1e3:>9.2f} {ratio:>6.2f}"
                else:
                    line += f" {'-':>9} {'-':>6}"
            line += f" {_mib(hf['lower_bound']):>10} {_mib(hf['planned']):>8} {_mib(hf['peak']):>8}"
            if has_ort:
                diff, ok = agreement(hf["outputs"], o["finish"]()["outputs"]) if o is not None else ("-", "-")
                line += f" {diff:>10} {ok:>6}"
            print(line, flush=True)
    if ratios:
        worst = sorted(ratios.items(), key=lambda kv: -kv[1])
        print(f"\nbatch 1, {len(ratios)} models: hetvm/ORT median {statistics.median(ratios.values()):.2f}, "
              f"worst {worst[0][1]:.2f} ({worst[0][0]}); worst three: "
              + ", ".join(f"{n} {r:.2f}" for n, r in worst[:3]))


if __name__ == "__main__":
    main()
