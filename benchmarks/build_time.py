"""Build time with a cold and a warm kernel cache, each in a fresh process.

Why: a build compiles (or loads from the disk cache) every generated Numba
kernel its fused ops call. In one process a second build finds them already
compiled, so each build here runs in its own interpreter: the cold one with an
empty ``HETVM_KERNEL_CACHE``, the warm one with the cache the cold one left.
The build also compiles the direct depthwise, pooling and epilogue loops the
model's calls take (their Numba cache is in ``HETVM_KERNEL_CACHE`` too);
``NUMBA_CACHE_DIR`` is pointed at the same directory all the same.
``from_onnx`` is timed apart; "build" is ``hetvm.build`` alone, "1st call" the
VM's first call; "kernels" and
"kernel s" are what the build reports (``generated_kernels`` metadata).
Figures are printed, never asserted.

    python benchmarks/build_time.py                        # the nine light models
    python benchmarks/build_time.py --models resnet50 dag20000
    python benchmarks/build_time.py --numba 0              # no generated kernels

``dagN`` / ``chainN`` are the programs of ``compile_time.py`` with N bindings.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent

_CHILD = r"""
import json, sys, time
sys.path.insert(0, {here!r})
name = {name!r}
import hetvm
if name.startswith(("dag", "chain")):
    import compile_time
    kind = "dag" if name.startswith("dag") else "chain"
    t0 = time.perf_counter()
    mod = getattr(compile_time, kind)(int(name[len(kind):]))
    import numpy as np
    args = [np.random.default_rng(0).standard_normal((4, 8)).astype("float32")]
else:
    import onnx_models
    from hetvm.frontend import from_onnx
    model, feeds = onnx_models.load_model(name, 1)
    t0 = time.perf_counter()
    mod = from_onnx(model)
    args = list(feeds.values())
t1 = time.perf_counter()
exe = hetvm.build(mod, target="llvm")
t2 = time.perf_counter()
vm = hetvm.VirtualMachine(exe)
vm["main"](*args)
t3 = time.perf_counter()
gen = exe.metadata.get("generated_kernels") or {{}}
print(json.dumps({{"import_s": t1 - t0, "build_s": t2 - t1, "first_call_s": t3 - t2,
                  "kernels": gen.get("kernels", 0), "kernel_s": gen.get("compile_seconds", 0.0)}}))
"""


def _one(name: str, cache: str, numba: str | None) -> dict:
    env = dict(os.environ, HETVM_KERNEL_CACHE=cache, NUMBA_CACHE_DIR=cache, PYTHONPATH=str(HERE.parent))
    if numba is not None:
        env["HETVM_NUMBA"] = numba
    proc = subprocess.run([sys.executable, "-c", _CHILD.format(here=str(HERE), name=name)],
                          capture_output=True, text=True, env=env)  # fmt: skip
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": last}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    import onnx_models

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(onnx_models.LIGHT), help="comma-separated names")
    ap.add_argument("--numba", choices=("0", "1", "auto"), help="HETVM_NUMBA for the builds (default: as set)")
    args = ap.parse_args()
    print(f"{'model':<14} {'import s':>8} | {'build s':>7} {'kernels':>7} {'kernel s':>8} {'1st call s':>10} "
          f"| {'build s':>7} {'kernel s':>8} {'1st call s':>10}")  # fmt: skip
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory(prefix="hetvm_kcache_") as cache:
            cold = _one(name, cache, args.numba)
            warm = _one(name, cache, args.numba) if "error" not in cold else cold
        if "error" in cold or "error" in warm:
            print(f"{name:<14} error: {cold.get('error') or warm.get('error')}")
            continue
        print(f"{name:<14} {cold['import_s']:>8.2f} | {cold['build_s']:>7.2f} {cold['kernels']:>7d} "
              f"{cold['kernel_s']:>8.2f} {cold['first_call_s']:>10.2f} | {warm['build_s']:>7.2f} "
              f"{warm['kernel_s']:>8.2f} {warm['first_call_s']:>10.2f}", flush=True)  # fmt: skip
    print("left: cold kernel caches (HETVM_KERNEL_CACHE and NUMBA_CACHE_DIR empty); right: warm (what the "
          "cold build left); 1st call = the VM's first call, where kernels built lazily compile")


if __name__ == "__main__":
    main()
