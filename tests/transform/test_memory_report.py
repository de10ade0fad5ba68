"""memory_plan_report: exact figures, and end to end the VM's peak equals the prediction."""

from __future__ import annotations

import random

import numpy as np
import pytest

import hetvm
import hetvm.op as op
from hetvm.analysis.memory_plan import check_no_overlap, memory_plan_report
from hetvm.errors import MemoryPlanError
from hetvm.ir import BlockBuilder, Call, If, TensorStructInfo, Var, prim
from hetvm.pipeline import lower
from hetvm.transform import (
    CallTIRRewrite,
    LegalizeOps,
    Normalize,
    PassContext,
    Sequential,
    ToNonDataflow,
)
from hetvm.transform.static_plan_block_memory import StaticPlanBlockMemory

F32 = "float32"


@pytest.fixture(autouse=True)
def _unfused():
    """The figures are the planner's on these exact programs: FuseOps would make
    their element-wise chains one op (fewer tensors to plan), InplaceElementwise
    one buffer (tests/transform/test_inplace_elementwise.py has its figures)."""
    with PassContext(disabled_pass=["FuseOps", "InplaceElementwise"]):
        yield


def chain():
    x = Var("x", struct_info=TensorStructInfo((4, 8), F32))
    w = Var("w", struct_info=TensorStructInfo((8, 8), F32))
    bb = BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            a = bb.emit(op.matmul(x, w))
            b = bb.emit(op.nn.relu(a))
            c = bb.emit(op.reshape(b, (32,)))
            d = bb.emit(op.add(c, c))
            e = bb.emit_output(op.multiply(d, d))
        bb.emit_func_output(e)
    return bb.get()


def planned(mod, **kwargs):
    return Sequential(
        [Normalize(), LegalizeOps(), ToNonDataflow(), CallTIRRewrite(), StaticPlanBlockMemory(**kwargs)]
    )(mod)


def measured_peak(mod, *args, device="cpu:0", poison=False):
    exe = hetvm.build(mod)
    vm = hetvm.VirtualMachine(exe, [hetvm.cpu(0)], poison=poison)
    out = vm["main"](*args)
    return out, vm.memory_report()[device]["peak_bytes"]


def test_report_figures_for_a_chain():
    report = memory_plan_report(planned(chain()))
    dev = report["main"][0]
    assert dev["planned_bytes"] == 256
    assert dev["lower_bound_bytes"] == 256
    assert dev["no_reuse_bytes"] == 384
    assert dev["outputs_in_plan"] is False
    # arena (256) + the returned tensor (128), allocated while the arena is in use
    assert dev["predicted_peak_bytes"] == 384
    assert dev["predicted_peak_exact"] is True
    assert [(u["reason"], u["nbytes"]) for u in dev["unplanned"]] == [("returned", 128)]


def test_report_with_outputs_in_plan():
    dev = memory_plan_report(planned(chain(), plan_outputs=True))["main"][0]
    assert dev["outputs_in_plan"] is True
    assert dev["planned_bytes"] == 256  # d reuses a's bytes: a is dead by then
    assert dev["predicted_peak_bytes"] == 256


def test_report_same_before_and_after_lowering():
    mod = chain()
    assert memory_plan_report(planned(mod)) == memory_plan_report(lower(mod))


def test_report_needs_a_plan():
    with pytest.raises(MemoryPlanError, match="no memory plan"):
        memory_plan_report(chain())


def test_chain_end_to_end_peak_equals_prediction():
    rng = np.random.default_rng(0)
    xv, wv = rng.standard_normal((4, 8)).astype(F32), rng.standard_normal((8, 8)).astype(F32)
    out, peak = measured_peak(chain(), xv, wv, poison=True)
    ref = np.maximum(xv @ wv, 0).reshape(32)
    np.testing.assert_allclose(out.numpy(), (ref + ref) ** 2, rtol=1e-5)
    assert peak == memory_plan_report(lower(chain()))["main"][0]["predicted_peak_bytes"] == 384


def if_module():
    x = Var("x", struct_info=TensorStructInfo((16, 16), F32))
    cond = Var("cond", struct_info=TensorStructInfo((), "bool"))
    bb = BlockBuilder()
    with bb.function("main", [x, cond]):
        a = bb.emit(op.exp(x))
        bb.begin_scope()
        t1 = bb.emit(op.add(a, a))
        t2 = bb.emit(op.multiply(t1, a))
        t3 = bb.emit(op.add(t2, t1))
        then_seq = bb.end_scope(t3)
        bb.begin_scope()
        e1 = bb.emit(op.multiply(x, x))
        else_seq = bb.end_scope(e1)
        y = bb.emit(If(cond, then_seq, else_seq))
        z = bb.emit(op.add(y, x))
        out = bb.emit(op.add(z, z))
        bb.emit_func_output(out)
    return bb.get()


def test_if_end_to_end_prediction_is_the_larger_branch():
    mod = if_module()
    low = lower(mod)
    check_no_overlap(low)
    dev = memory_plan_report(low)["main"][0]
    xv = np.linspace(-1, 1, 256, dtype=F32).reshape(16, 16)
    peaks = {}
    for flag in (True, False):
        out, peaks[flag] = measured_peak(mod, xv, np.array(flag), poison=True)
        a = np.exp(xv)
        y = ((a + a) * a + (a + a)) if flag else xv * xv
        np.testing.assert_allclose(out.numpy(), 2 * (y + xv), rtol=1e-5)
    # one arena serves both branches (their tensors share bytes), so both paths peak alike
    assert dev["predicted_peak_bytes"] == peaks[True] == peaks[False]


def test_module_function_calls_are_part_of_the_peak():
    bb = BlockBuilder()
    a = Var("a", struct_info=TensorStructInfo((64,), F32))
    with bb.function("double", [a], private=True):
        with bb.dataflow():
            t = bb.emit(op.add(a, a))
            r = bb.emit_output(op.multiply(t, t))
        bb.emit_func_output(r)
    double = bb.module.get_global_var("double")
    x = Var("x", struct_info=TensorStructInfo((64,), F32))
    with bb.function("main", [x]):
        y = bb.emit(op.exp(x))
        z = bb.emit(Call(double, (y,)))
        w = bb.emit(op.add(z, y))
        bb.emit_func_output(w)
    mod = bb.get()
    xv = np.linspace(0, 1, 64, dtype=F32)
    out, peak = measured_peak(mod, xv)
    e = np.exp(xv)
    np.testing.assert_allclose(out.numpy(), (2 * e) ** 2 + e, rtol=1e-5)
    report = memory_plan_report(lower(mod))
    assert report["main"][0]["predicted_peak_bytes"] == peak
    assert report["double"][0]["predicted_peak_bytes"] == 512


def test_bounded_symbolic_prediction_is_an_upper_bound():
    n = prim.PrimVar("n")
    x = Var("x", struct_info=TensorStructInfo((n, 4), F32))
    bb = BlockBuilder()
    with bb.function("main", [x], attrs={"tir_var_upper_bound": {"n": 16}}):
        with bb.dataflow():
            a = bb.emit(op.exp(x))
            b = bb.emit(op.add(a, a))
            c = bb.emit_output(op.multiply(b, a))
        bb.emit_func_output(c)
    mod = bb.get()
    dev = memory_plan_report(lower(mod))["main"][0]
    assert dev["planned_bytes"] == 2 * 16 * 4 * 4
    assert dev["predicted_peak_exact"] is False
    for rows in (3, 16):
        xv = np.ones((rows, 4), F32)
        out, peak = measured_peak(mod, xv, poison=True)
        np.testing.assert_allclose(out.numpy(), 2 * np.e * np.e * xv, rtol=1e-5)
        assert peak <= dev["predicted_peak_bytes"]
    assert peak == dev["predicted_peak_bytes"]  # at the bound the prediction is exact


def random_program(seed: int, num_ops: int = 30):
    """Element-wise ops over (8, w) tensors, with views and concat, reading random earlier values."""
    rng = random.Random(seed)
    x = Var("x", struct_info=TensorStructInfo((8, 16), F32))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            values = [x]
            for _ in range(num_ops):
                a = values[max(0, len(values) - 1 - int(rng.expovariate(0.4)))]
                kind = rng.random()
                same = [v for v in values if v.struct_info.shape[1].value == a.struct_info.shape[1].value]
                if kind < 0.35:
                    y = bb.emit(op.add(a, rng.choice(same)))
                elif kind < 0.6:
                    y = bb.emit(op.tanh(a))
                elif kind < 0.75:
                    w = a.struct_info.shape[1].value
                    v = bb.emit(op.reshape(a, (w, 8)))
                    y = bb.emit(op.reshape(bb.emit(op.multiply(v, v)), (8, w)))
                elif kind < 0.9 and a.struct_info.shape[1].value <= 32:
                    y = bb.emit(op.concat([a, a], axis=1))
                else:
                    y = bb.emit(op.multiply(a, rng.choice(same)))
                values.append(y)
            outs = bb.emit_output(values[-1])
        bb.emit_func_output(outs)
    return bb.get()


@pytest.mark.parametrize("seed", range(6))
def test_random_programs_match_unplanned_and_peak(seed):
    mod = random_program(seed)
    low = lower(mod)
    check_no_overlap(low)
    xv = np.random.default_rng(seed).standard_normal((8, 16)).astype(F32) * 0.5
    ref_vm = hetvm.VirtualMachine(hetvm.build(mod, plan_memory=False), [hetvm.cpu(0)])
    expected = ref_vm["main"](xv).numpy()
    out, peak = measured_peak(mod, xv, poison=True)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)
    dev = memory_plan_report(low)["main"][0]
    assert peak == dev["predicted_peak_bytes"]
    assert dev["lower_bound_bytes"] <= dev["planned_bytes"] <= dev["no_reuse_bytes"]
