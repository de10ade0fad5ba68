"""Symbolic memory plans on generated programs whose shape variables have no bounds.

Every symbolic var of main is left without ``tir_var_upper_bound``, so the
planner packs its tensors with offsets that are expressions. One executable
is run at the program's sizes and at larger ones; at each:
- the planned module's offsets are proven apart for every value, and checked
  at those values (``check_no_overlap`` with and without ``dims``);
- a VM with poisoning (killed bytes overwritten) gives the interpreter's results;
- without control flow, the measured peak per device equals
  ``exe.memory_plan(dims=...)``'s predicted peak;
- the placements the VM re-packs at each call's sizes
  (``runtime/plan_specialise.py``) keep every two tensors live together apart,
  inside an arena no larger than the formula's.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given

import hetvm
from hetvm.analysis.memory_plan import check_no_overlap
from hetvm.arena_packing import conflicts
from hetvm.ir import prim as P
from hetvm.pipeline import lower
from hetvm.runtime.plan_specialise import arena_specs
from hetvm.runtime.shapes import eval_prim
from hetvm.testing import harness as H
from hetvm.testing.generators import GenConfig, GeneratedProgram, make_inputs, programs

from .conftest import fuzz_settings

UNBOUNDED = GenConfig(devices=True, missing_kernels=True, bound_probability=0.0)


def _sizes(prog: GeneratedProgram) -> list[dict[str, int]]:
    base = dict(prog.sym_values)
    return [base] + ([{k: v + 2 for k, v in base.items()}, {k: 2 * v + 3 for k, v in base.items()}] if base else [])


def _at(prog: GeneratedProgram, values: dict[str, int]) -> GeneratedProgram | None:
    """The program with inputs of these sizes (None when it does not run there:
    a match_cast or a shape check may tie the sizes together)."""
    if values == prog.sym_values:
        return prog
    func = prog.mod["main"]
    env = {v: values[v.name] for p in func.params for d in p.struct_info.shape for v in P.free_vars(d)}
    other = dataclasses.replace(prog, inputs=make_inputs(func, env, np.random.default_rng(0)), sym_values=values)
    try:
        H.reference(other)
    except hetvm.HetvmError:
        return None
    return other


def _has_if(mod) -> bool:
    return any(" if " in line or line.lstrip().startswith("if ") for line in mod.script().splitlines())


@fuzz_settings(15)
@given(programs(UNBOUNDED))
def test_symbolic_plan_never_overlaps(prog):
    H.build(prog)  # configures the devices
    with H.keeping_dead_code():
        lowered = lower(prog.mod, **H.build_options(prog))
    check_no_overlap(lowered)  # a proof for every value of the dims
    for values in _sizes(prog):
        check_no_overlap(lowered, values)


@fuzz_settings(15)
@given(programs(UNBOUNDED))
def test_one_executable_runs_right_at_several_sizes_with_poison(prog):
    exe = H.build(prog)
    vm = H.make_vm(prog, exe, poison=True)
    exact = not _has_if(prog.mod)
    for values in _sizes(prog):
        at = _at(prog, values)
        if at is None:
            continue
        H.compare(H.run(vm, at), H.reference(at), at, f"VM with poison=True at {values}")
        plan = exe.memory_plan(dims=values).get("main") or {}
        fresh = H.make_vm(at, exe)  # a fresh VM: its peak is this call's
        out = fresh["main"](*H.placed_inputs(at, fresh))
        report = fresh.memory_report()
        for index, facts in plan.items():
            predicted = facts.get("predicted_peak_bytes")
            if predicted is None or not facts.get("predicted_peak_exact", True):
                continue
            measured = report[str(fresh.exe_devices[index])]["peak_bytes"]
            assert measured == predicted if exact else measured <= predicted, (
                f"device {fresh.exe_devices[index]} at {values}: measured peak {measured}, "
                f"predicted {predicted} ({facts.get('formulas')})\n{at!r}"
            )
        del out


@fuzz_settings(15)
@given(programs(UNBOUNDED))
def test_call_time_placements_keep_live_tensors_apart(prog):
    exe = H.build(prog)
    specialiser = exe.specialiser()
    for (fn, arena), (raw, _) in arena_specs(exe.metadata).items():
        buffers = raw["buffers"]
        items = [(tuple(map(tuple, b["intervals"])), tuple(map(tuple, b["path"]))) for b in buffers]
        together = conflicts(items)
        for values in _sizes(prog):
            if not set(raw["dims"]) <= set(values):
                continue  # a callee's own dims
            total, offsets = specialiser.place_at(fn, arena, values)
            sizes = [eval_prim(b["size"], values) for b in buffers]
            assert total <= max(eval_prim(t, values) for t in raw["total"])
            for i, js in enumerate(together):
                assert offsets[i] + sizes[i] <= total
                for j in js:
                    assert offsets[i] + sizes[i] <= offsets[j] or offsets[j] + sizes[j] <= offsets[i], (
                        f"{fn}/{arena} at {values}: {buffers[i]['name']} and {buffers[j]['name']} overlap"
                    )
