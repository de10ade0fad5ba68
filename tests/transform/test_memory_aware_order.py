"""MemoryAwareOrder: a topological order of each dataflow block with a lower peak,
kept only when it lowers the planned bytes' simulation; barriers stay put."""

import numpy as np

import hetvm
import hetvm.op as R
from hetvm.analysis.memory_plan import memory_plan_report
from hetvm.ir import BlockBuilder, TensorStructInfo, Var
from hetvm.ir import expr as E
from hetvm.transform import MemoryAwareOrder, Normalize, PassContext
from hetvm.transform.memory_aware_order import _orders, _Segment, simulate_peak

BIG = 64 * 1024 * 4  # bytes of one (64, 1024) float32 tensor


def param(name, shape):
    return Var(name, struct_info=TensorStructInfo(shape, "float32"))


def interleaved(rows=64):
    """Two branches, each a big tensor reduced to a small one; the given order
    computes both big tensors before reducing either (two big tensors live)."""
    x, w1, w2, v = param("x", (rows, 32)), param("w1", (32, 1024)), param("w2", (32, 1024)), param("v", (1024, 8))
    bb = BlockBuilder()
    with bb.function("main", [x, w1, w2, v]):
        with bb.dataflow():
            a = bb.emit(R.matmul(x, w1))
            b = bb.emit(R.matmul(x, w2))
            ra = bb.emit(R.matmul(a, v))
            rb = bb.emit(R.matmul(b, v))
            out = bb.emit_output(bb.emit(R.add(ra, rb)))
        bb.emit_func_output(out)
    return bb.get()


def names(mod):
    return [b.var.name_hint for blk in mod["main"].body.blocks for b in blk.bindings]


def planned(mod, disabled=()):
    from hetvm.pipeline import lower

    with PassContext(disabled_pass=list(disabled)):
        return memory_plan_report(lower(mod))["main"][0]["planned_bytes"]


def test_reorders_to_lower_the_planned_bytes_and_keeps_results():
    mod = interleaved()
    out = MemoryAwareOrder()(Normalize()(mod))
    order = names(out)
    # each branch is reduced before the other's big tensor exists
    assert order.index("lv2") < order.index("lv1") or order.index("lv3") < order.index("lv")
    facts = out.attrs["memory_order"]["main"]
    small = 64 * 8 * 4
    # given: a, b and ra live together; chosen: one big tensor and two small ones
    assert facts["given_peak_bytes"] == 2 * BIG + small and facts["chosen_peak_bytes"] == BIG + 2 * small
    # the simulation is the planner's own figure, before and after
    assert planned(mod, ["MemoryAwareOrder"]) == facts["given_peak_bytes"]
    assert planned(mod) == facts["chosen_peak_bytes"]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal([int(d.value) for d in p.struct_info.shape]).astype("float32") for p in mod["main"].params]
    x, w1, w2, v = args
    got = hetvm.VirtualMachine(hetvm.build(mod), [hetvm.cpu(0)])["main"](*args).numpy()
    np.testing.assert_allclose(got, (x @ w1) @ v + (x @ w2) @ v, rtol=1e-4, atol=1e-3)
    built = hetvm.build(mod).metadata["memory_order"]["main"]
    assert built["chosen_peak_bytes"] == BIG + 2 * small
    assert (built["planner_bound_given"], built["planner_bound_chosen"]) == (2 * BIG + small, BIG + 2 * small)


def test_the_planner_s_bound_overrules_a_wrong_simulation(monkeypatch):
    """Were the simulation to favour an order the planner needs more bytes for,
    the given order stays."""
    import hetvm.transform.memory_aware_order as order_pass

    x, w1, w2, v = param("x", (64, 32)), param("w1", (32, 1024)), param("w2", (32, 1024)), param("v", (1024, 8))
    bb = BlockBuilder()
    with bb.function("main", [x, w1, w2, v]):
        with bb.dataflow():
            a = bb.emit(R.matmul(x, w1))
            ra = bb.emit(R.matmul(a, v))
            b = bb.emit(R.matmul(x, w2))
            rb = bb.emit(R.matmul(b, v))
            out = bb.emit_output(bb.emit(R.add(ra, rb)))
        bb.emit_func_output(out)
    mod = Normalize()(bb.get())  # already the good order: one big tensor at a time
    bad = [0, 2, 1, 3, 4]  # both big tensors first
    monkeypatch.setattr(order_pass, "_orders", lambda seg: [("given", list(range(5))), ("bad", bad)])
    monkeypatch.setattr(order_pass, "simulate_peak", lambda seg, order: 0 if list(order) == bad else 1)
    assert MemoryAwareOrder()(mod) is mod


def test_a_second_run_and_a_chain_change_nothing():
    once = MemoryAwareOrder()(Normalize()(interleaved()))
    again = MemoryAwareOrder()(once)
    assert names(again) == names(once)
    x, w = param("x", (8, 8)), param("w", (8, 8))
    bb = BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            h = x
            for _ in range(4):
                h = bb.emit(R.matmul(h, w))
            out = bb.emit_output(h)
        bb.emit_func_output(out)
    chain = Normalize()(bb.get())
    assert MemoryAwareOrder()(chain) is chain  # nothing to gain: the module is returned as is


def test_a_match_cast_is_a_barrier():
    x, w1, w2, v = param("x", (64, 32)), param("w1", (32, 1024)), param("w2", (32, 1024)), param("v", (1024, 8))
    bb = BlockBuilder()
    with bb.function("main", [x, w1, w2, v]):
        with bb.dataflow():
            a = bb.emit(R.matmul(x, w1))
            b = bb.emit(R.matmul(x, w2))
            bb.match_cast(b, TensorStructInfo((64, 1024), "float32"))
            ra = bb.emit(R.matmul(a, v))
            rb = bb.emit(R.matmul(b, v))
            out = bb.emit_output(bb.emit(R.add(ra, rb)))
        bb.emit_func_output(out)
    mod = Normalize()(bb.get())
    before = names(mod)
    after = names(MemoryAwareOrder()(mod))
    cast = next(i for i, blk in enumerate(mod["main"].body.blocks[0].bindings) if isinstance(blk, E.MatchCast))
    # everything before the match_cast stays before it, everything after after it
    assert set(after[:cast]) == set(before[:cast]) and after[cast] == before[cast]


def random_dag(num_ops, seed):
    """Ops over (16, w) tensors, each reading random earlier values (recent ones
    more often), as benchmarks/memory_planning.py's random DAG."""
    import random

    rng = random.Random(seed)
    widths = [64, 128, 256]
    x = param("x", (16, 128))
    weights = {(a, b): param(f"w_{a}_{b}", (a, b)) for a in widths for b in widths}
    bb = BlockBuilder()
    with bb.function("main", [x, *weights.values()]):
        with bb.dataflow():
            values = [x]
            for _ in range(num_ops):
                a = values[max(0, len(values) - 1 - int(rng.expovariate(0.3)))] if rng.random() < 0.7 else rng.choice(values)
                wa = a.struct_info.shape[1].value
                kind = rng.random()
                if kind < 0.4:
                    y = bb.emit(R.matmul(a, weights[(wa, rng.choice(widths))]))
                elif kind < 0.7:
                    same = [v for v in values if v.struct_info.shape[1].value == wa and v is not a]
                    y = bb.emit(R.add(a, rng.choice(same) if same else a))
                else:
                    y = bb.emit(R.nn.relu(a) if rng.random() < 0.5 else R.exp(a))
                values.append(y)
            out = bb.emit_output(bb.emit(R.concat(values[-8:], axis=1)))
        bb.emit_func_output(out)
    return bb.get()


def test_the_simulation_is_the_planner_s_figure_on_a_random_dag():
    from hetvm.transform import (
        CallTIRRewrite,
        InplaceElementwise,
        LegalizeOps,
        Sequential,
        ToNonDataflow,
    )
    from hetvm.transform.static_plan_block_memory import StaticPlanBlockMemory

    plan = Sequential([Normalize(), LegalizeOps(), ToNonDataflow(), CallTIRRewrite(), InplaceElementwise(),
                       StaticPlanBlockMemory()])  # fmt: skip
    mod = Normalize()(random_dag(120, 2))
    block = mod["main"].body.blocks[0]
    returned = {mod["main"].body.body}
    seg = _Segment(list(block.bindings), set(returned), returned)
    orders = dict(_orders(seg))
    bound = memory_plan_report(plan(mod))["main"][0]["lower_bound_bytes"]
    assert simulate_peak(seg, orders["given"]) == bound
    for name, order in orders.items():
        assert sorted(order) == list(range(len(block.bindings))), name
    reordered = MemoryAwareOrder()(mod)
    chosen = reordered.attrs["memory_order"]["main"]["chosen_peak_bytes"]
    assert chosen < bound
    assert memory_plan_report(plan(reordered))["main"][0]["lower_bound_bytes"] <= chosen
    # and the reordered program computes the same
    rng = np.random.default_rng(1)
    args = [rng.standard_normal([int(d.value) for d in p.struct_info.shape]).astype("float32") * 0.1
            for p in mod["main"].params]  # fmt: skip
    with PassContext(disabled_pass=["MemoryAwareOrder"]):
        want = hetvm.VirtualMachine(hetvm.build(mod), [hetvm.cpu(0)])["main"](*args).numpy()
    got = hetvm.VirtualMachine(hetvm.build(mod), [hetvm.cpu(0)])["main"](*args).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def interleaved_symbolic():
    """``interleaved`` with a dynamic row count n: every size is a multiple of n."""
    from hetvm.ir import prim as P

    return interleaved(P.PrimVar("n"))


def test_symbolic_sizes_are_reordered_when_the_order_wins_at_every_representative_size():
    from hetvm.transform.memory_aware_order import representative_dims

    mod = interleaved_symbolic()
    out = MemoryAwareOrder()(Normalize()(mod))
    facts = out.attrs["memory_order"]["main"]
    assert facts["dims"] in representative_dims(["n"])
    n = facts["dims"]["n"]
    big, small = n * 1024 * 4, -(-n * 8 * 4 // 64) * 64
    assert (facts["given_peak_bytes"], facts["chosen_peak_bytes"]) == (2 * big + small, big + 2 * small)
    exe, before = hetvm.build(mod), None
    with PassContext(disabled_pass=["MemoryAwareOrder"]):
        before = hetvm.build(mod)
    for rows in (3, 40):
        got = exe.memory_plan(dims={"n": rows})["main"][0]["lower_bound_bytes"]
        was = before.memory_plan(dims={"n": rows})["main"][0]["lower_bound_bytes"]
        assert got == rows * 4096 + 2 * rows * 32 and was == 2 * rows * 4096 + rows * 32


def test_no_representative_size_has_a_dim_of_one():
    from hetvm.transform.memory_aware_order import representative_dims

    envs = representative_dims(["seq", "batch"])
    assert {"batch": 512, "seq": 4} in envs and {"batch": 4, "seq": 512} in envs and {"batch": 16, "seq": 16} in envs
    assert all(v >= 4 for env in envs for v in env.values()) and representative_dims([]) == []
