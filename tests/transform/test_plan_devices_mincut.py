"""PlanDevices placement: optimal against brute force, deterministic, and correct when run.

Random DAG programs with random pins on two devices: the planner's bytes copied
(then copies) must equal the best of every assignment of the free values; the
planned program must run on cpu + sim (and on two sim ids) under the runtime's
device check and give the single-device result.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

import hetvm.op as R
from hetvm.ir import BlockBuilder, TensorStructInfo, Var, VDevice
from hetvm.transform.device_planning import check_device_plan
from hetvm.transform.device_planning.solve import plan_cost
from hetvm.transform.plan_devices import plan_module

CPU = VDevice("llvm", 0)
SIM = VDevice("sim", 0)
SIM1 = VDevice("sim", 1)
SHAPES = [(4, 4), (4, 4), (2, 4)]


def random_program(seed: int, n_ops: int = 8, devices=(CPU, SIM), pins: bool = True):
    """A random DAG of unary/binary ops; some params, ops and hints pinned."""
    rng = random.Random(seed)
    bb = BlockBuilder()
    params = []
    for i in range(3):
        pick, roll = rng.choice(devices), rng.random()  # drawn either way: same program
        vd = pick if pins and roll < 0.7 else None
        rows = rng.choice([4, 8])
        params.append(Var(f"p{i}", struct_info=TensorStructInfo((rows, 4), "float32", vdevice=vd)))
    with bb.function("main", params):
        vals = []
        for p in params:  # bring every input to (4, 4) so ops combine freely
            vals.append(bb.emit(R.sum(R.reshape(p, (-1, 4, 4)), axis=0) if p.struct_info.shape[0].value == 8 else R.exp(p)))
        for _ in range(n_ops):
            kind = rng.random()
            a = rng.choice(vals)
            if kind < 0.45:
                v = bb.emit(rng.choice([R.add, R.multiply, R.subtract])(a, rng.choice(vals)))
            elif kind < 0.85:
                v = bb.emit(rng.choice([R.exp, R.negative, R.tanh, R.sigmoid])(a))
            else:
                pick = rng.choice(devices)
                v = bb.emit(R.hint_on_device(a, pick)) if pins else a
            vals.append(v)
        out = bb.emit(R.add(vals[-1], vals[-2]))
        bb.emit_func_output(out)
    mod = bb.get()
    mod.global_infos["vdevice"] = list(devices) if pins else [CPU]
    return mod


@pytest.mark.parametrize("seed", range(25))
def test_min_cut_matches_brute_force(seed):
    res = plan_module(random_program(seed, n_ops=5), default_vdevice=CPU)
    problem, placement = res.placement.problem, res.placement
    keys = res.table.keys
    roots = sorted(placement.device)
    free = [r for r in roots if problem.domains[r].pin is None]
    assert len(free) <= 15
    best = None
    for combo in itertools.product(range(len(keys)), repeat=len(free)):
        assign = dict(placement.device)
        for r, k in zip(free, combo):
            assign[r] = keys[k]
        cost = plan_cost(problem, assign)
        best = cost if best is None or cost < best else best
    assert plan_cost(problem, placement.device) == best


def test_min_cut_ties_go_to_default_and_plan_is_deterministic():
    for default in (CPU, SIM):
        a = plan_module(random_program(3), default_vdevice=default)
        b = plan_module(random_program(3), default_vdevice=default)
        assert a.copies == b.copies
        assert a.mod.script() == b.mod.script()
    # a free chain with nothing pinned stays on the default device
    mod = random_program(5, pins=False)
    mod.global_infos["vdevice"] = [CPU, SIM]
    res = plan_module(mod, default_vdevice=SIM)
    assert set(res.placement.device.values()) == {("sim", 0, "global")}


def _run(mod, devices, inputs, **plan):
    import hetvm
    from hetvm.pipeline import build

    exe = build(mod, target=plan.pop("target", "llvm"), plan_devices_options=plan)
    vm = hetvm.VirtualMachine(exe, devices)
    out = vm["main"](*inputs)
    return hetvm.nd.array(out.numpy() if out.device.kind == "cpu" else _to_host(out)).numpy()


def _to_host(arr):
    import hetvm

    return arr.copyto(hetvm.cpu(0)).numpy() if hasattr(arr, "copyto") else arr.numpy()


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("devices", [(CPU, SIM), (CPU, SIM, SIM1)], ids=["cpu+sim", "cpu+2sim"])
def test_planned_program_runs_and_matches_single_device(seed, devices):
    pytest.importorskip("hetvm.runtime.vm")
    import hetvm

    mod = random_program(seed, devices=devices)
    ref_mod = random_program(seed, devices=devices, pins=False)
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal([int(d.value) for d in p.struct_info.shape]).astype("float32")
              for p in mod["main"].params]
    ref = _run(ref_mod, [hetvm.cpu(0)], inputs)
    planned = plan_module(mod, default_vdevice=CPU).mod
    check_device_plan(planned)
    runtime_devs = [hetvm.cpu(0)] + [hetvm.device("sim", i) for i in range(len(devices) - 1)]
    got = _run(mod, runtime_devs, inputs)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    # the graph executor runs the same plan
    from hetvm.graph_executor import create
    from hetvm.pipeline import build

    gm = build(mod, target="llvm", executor="graph")
    ex = create(gm.graph, gm.lib, runtime_devs)
    ex.run(**{p.name_hint: v for p, v in zip(mod["main"].params, inputs)})
    out = ex.get_output(0)
    np.testing.assert_allclose(out.copyto(hetvm.cpu(0)).numpy(), ref, rtol=1e-5, atol=1e-5)
