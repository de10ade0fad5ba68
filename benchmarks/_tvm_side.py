"""The TVM half of ``benchmarks/tvm_compare.py``; runs inside TVM's interpreter.

Never imported by hetvm: ``tvm_compare.py`` starts it as a subprocess with the
interpreter that has apache-tvm (``--tvm-python`` / ``HETVM_TVM_PYTHON``),

    <tvm python> benchmarks/_tvm_side.py memory  FILE.py
    <tvm python> benchmarks/_tvm_side.py compile FILE.py [--build]

where FILE.py holds one TVMScript module (as hetvm prints it). The text is
parsed with ``tvm.script.from_source`` -- never executed -- and one JSON object
is written to stdout.

``memory``: runs TVM's own default CPU build pipeline (``relax.build``'s
``relax_pipeline="default"``, i.e. ``relax.pipeline.default_build_pipeline``)
up to and including ``StaticPlanBlockMemory`` and sums, in the planned
``main``, the bytes of every ``R.memory.alloc_storage`` (TVM's planned storage)
and of every ``R.builtin.alloc_tensor`` (left unplanned: returned tensors,
and anything else the planner declined), separating static from symbolic
sizes.

``compile``: times parsing, then ``relax.build(mod, "llvm")`` (or, without
``--build``, only the default relax pipeline) with a pass instrument that
reads off the relax pipeline's time and the time of its passes up to and
including ``StaticPlanBlockMemory``.
"""

from __future__ import annotations

import json
import sys
import time

import tvm
from tvm import relax

try:  # TVM 0.27 names the TIR package tirx; older releases tir
    from tvm.tirx import IntImm
except ImportError:  # pragma: no cover
    from tvm.tir import IntImm

# relax.pipeline.default_build_pipeline (TVM 0.27), which relax.build runs for
# target="llvm"; the memory plan is taken right after StaticPlanBlockMemory.
_UP_TO_PLAN = (
    "backend.DispatchSampling",
    "backend.DispatchSortScan",
    "transform.LegalizeOps",
    "transform.RewriteDataflowReshape",
    "transform.ToNonDataflow",
    "transform.RemovePurityChecking",
    "transform.CallTIRRewrite",
    "transform.StaticPlanBlockMemory",
)


def _pass(dotted: str):
    obj = relax
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj()


def _plan_passes():
    return tvm.transform.Sequential([_pass(p) for p in _UP_TO_PLAN])


def _parse(path: str):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return tvm.script.from_source(text)


def _dtype_bytes(dtype: str) -> int:
    t = tvm.runtime.DataType(dtype)
    return (int(t.bits) * int(t.lanes) + 7) // 8


def _static_dims(shape) -> list[int] | None:
    dims = []
    for v in shape.values:
        if not isinstance(v, IntImm):
            return None
        dims.append(int(v))
    return dims


def _bindings(seq):
    for block in seq.blocks:
        for b in block.bindings:
            yield b
            if isinstance(b.value, relax.If):
                yield from _bindings(b.value.true_branch)
                yield from _bindings(b.value.false_branch)


def _returned_vars(func) -> set:
    body = func.body.body
    out = set()
    stack = [body]
    while stack:
        e = stack.pop()
        if isinstance(e, relax.Var):
            out.add(e)
        elif isinstance(e, relax.Tuple):
            stack.extend(e.fields)
    return out


def _memory(path: str) -> dict:
    mod = _parse(path)
    with tvm.target.Target("llvm"):
        planned = _plan_passes()(mod)
    func = planned["main"]
    returned = _returned_vars(func)
    # a returned tensor may be re-bound (lv = alloc; return lv): follow the chain
    alias = {b.var: b.value for b in _bindings(func.body) if isinstance(b.value, relax.Var)}
    for v in list(returned):
        while v in alias:
            v = alias[v]
            returned.add(v)
    out = {
        "storage_bytes": 0,
        "num_storage": 0,
        "unplanned_intermediate_bytes": 0,
        "returned_bytes": 0,
        "num_alloc_tensor": 0,
        "num_tensors": 0,
        "symbolic": [],
    }
    for b in _bindings(func.body):
        v = b.value
        if not isinstance(v, relax.Call) or not isinstance(v.op, tvm.ir.Op):
            continue
        name = v.op.name
        if name in ("relax.memory.alloc_tensor", "relax.builtin.alloc_tensor"):
            out["num_tensors"] += 1
        if name == "relax.memory.alloc_storage":
            dims = _static_dims(v.args[0])
            if dims is None:
                out["symbolic"].append({"var": b.var.name_hint, "op": name, "size": str(v.args[0])})
                continue
            out["storage_bytes"] += dims[0]
            out["num_storage"] += 1
        elif name == "relax.builtin.alloc_tensor":
            out["num_alloc_tensor"] += 1
            dims = _static_dims(v.args[0])
            if dims is None:
                out["symbolic"].append({"var": b.var.name_hint, "op": name, "size": str(v.args[0])})
                continue
            n = _dtype_bytes(str(v.args[1].value))
            for d in dims:
                n *= d
            key = "returned_bytes" if b.var in returned else "unplanned_intermediate_bytes"
            out[key] += n
    return out


@tvm.instrument.pass_instrument
class _PassClock:
    """Times every pass, nested ones included: (depth, name, seconds) in finishing order."""

    def __init__(self) -> None:
        self.open: list[float] = []
        self.records: list[tuple[int, str, float]] = []

    def run_before_pass(self, mod, info) -> None:
        self.open.append(time.perf_counter())

    def run_after_pass(self, mod, info) -> None:
        t0 = self.open.pop()
        self.records.append((len(self.open), info.name, time.perf_counter() - t0))


def _compile(path: str, build: bool) -> dict:
    out: dict = {}
    t0 = time.perf_counter()
    mod = _parse(path)
    out["parse_s"] = time.perf_counter() - t0
    clock = _PassClock()
    t0 = time.perf_counter()
    with tvm.transform.PassContext(instruments=[clock]):
        if build:
            relax.build(mod, target="llvm")
        else:
            relax.get_pipeline("default")(mod)
    total = time.perf_counter() - t0
    if build:
        out["build_s"] = total
    # the relax pipeline is the first top-level pass to finish; the passes up to
    # the memory plan are its own (not their nested helpers such as NormalizeGlobalVar)
    plan_names = {p.rsplit(".", 1)[-1] for p in _UP_TO_PLAN}
    to_plan, seen_plan = 0.0, False
    for depth, name, secs in clock.records:
        if depth == 0:
            out["relax_pipeline_s"] = secs
            break
        if name in plan_names and not seen_plan:
            to_plan += secs
            seen_plan = name == "StaticPlanBlockMemory"
    out["plan_passes_s"] = to_plan
    return out


def main(argv: list[str]) -> None:
    kind, path = argv[0], argv[1]
    result = {"tvm_version": tvm.__version__}
    if kind == "memory":
        result.update(_memory(path))
    elif kind == "compile":
        result.update(_compile(path, "--build" in argv[2:]))
    else:
        raise SystemExit(f"unknown kind {kind!r}; expected memory or compile")
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
