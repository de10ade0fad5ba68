"""PlanDevices: one test per behaviour of issue 6 (TVM's device-planning scenarios included)."""

from __future__ import annotations

import numpy as np
import pytest

import hetvm.op as R
from hetvm.errors import DevicePlanError
from hetvm.ir import (
    BlockBuilder,
    IRModule,
    Span,
    TensorStructInfo,
    TupleStructInfo,
    Var,
    VarBinding,
    VDevice,
    assert_structural_equal,
)
from hetvm.ir import expr as E
from hetvm.transform.device_planning import check_device_plan
from hetvm.transform.plan_devices import PlanDevices, plan_module

CPU = VDevice("llvm", 0)
SIM = VDevice("sim", 0)
SIM1 = VDevice("sim", 1)


def T(shape=(4, 4), dev=None, dtype="float32"):
    return TensorStructInfo(shape, dtype, vdevice=dev)


def at(call, line):
    return E.replace(call, span=Span("prog.py", line))


def annotate(bb, name, call, sinfo, line=None):
    """Emits ``name: sinfo = call`` (an annotated binding)."""
    call = bb.normalize(call)
    var = Var(name, struct_info=sinfo)
    span = Span("prog.py", line) if line else None
    bb.emit_binding(VarBinding(var, call, span=span))
    return var


def module(bb, vdevices=(CPU, SIM)):
    mod = bb.get()
    mod.global_infos["vdevice"] = list(vdevices)
    return mod


def bindings(func):
    out = []

    def walk(seq):
        for block in seq.blocks:
            for b in block.bindings:
                out.append(b)
                if isinstance(b.value, E.If):
                    walk(b.value.true_branch)
                    walk(b.value.false_branch)

    walk(func.body)
    return out


def copies_in(mod, fname="main"):
    return [b for b in bindings(mod[fname]) if isinstance(b.value, E.Call)
            and getattr(b.value.op, "name", "") == "to_vdevice"]


def dev(var):
    return str(var.struct_info.vdevice)


# ---------------------------------------------------------------------------
# TVM's scenarios
# ---------------------------------------------------------------------------


def test_op_annotated_to_cpu_inside_sim_program():
    bb = BlockBuilder()
    x = Var("x", struct_info=T(dev=SIM))
    with bb.function("main", [x]):
        a = bb.emit(R.exp(x), "a")
        b = annotate(bb, "b", R.negative(a), T(dev=CPU), line=7)
        c = bb.emit(R.add(b, b), "c")
        bb.emit_func_output(c)
    out = PlanDevices(default_vdevice=SIM)(module(bb))
    check_device_plan(out)
    bs = {b.var.name_hint: b for b in bindings(out["main"])}
    assert dev(bs["a"].var) == "sim:0" and dev(bs["b"].var) == "cpu:0"
    # c follows its cpu input rather than copying it back: cheaper (one copy in total)
    assert len(copies_in(out)) == 1
    rec = out.attrs["device_copies"]
    assert rec[0]["value"] == "a" and rec[0]["dst"] == "cpu:0"
    assert "prog.py:7" in rec[0]["reason"]


def test_fan_out_needs_one_copy():
    bb = BlockBuilder()
    x = Var("x", struct_info=T(dev=CPU))
    w = Var("w", struct_info=T(dev=SIM))
    with bb.function("main", [x, w]):
        a = bb.emit(R.add(x, w), "a")
        b = bb.emit(R.multiply(x, w), "b")
        c = bb.emit(R.subtract(x, w), "c")
        d = bb.emit(R.add(a, b), "d")
        e = bb.emit(R.add(d, c), "e")
        bb.emit_func_output(e)
    out = PlanDevices(default_vdevice=SIM)(module(bb))
    check_device_plan(out)
    cps = copies_in(out)
    assert len(cps) == 1 and cps[0].value.args[0].name_hint == "x"
    assert out.attrs["device_copies"][0]["consumers"] == ["a", "b", "c"]


def test_params_and_results_of_called_function():
    bb = BlockBuilder()
    p = Var("p", struct_info=T(dev=SIM))
    with bb.function("f", [p]):
        r = bb.emit(R.exp(p), "r")
        bb.emit_func_output(r)
    x = Var("x", struct_info=T(dev=CPU))
    with bb.function("main", [x]):
        y = bb.emit(E.Call(bb.module.get_global_var("f"), (x,)), "y")
        z = annotate(bb, "z", R.negative(y), T(dev=CPU))
        bb.emit_func_output(z)
    out = PlanDevices(default_vdevice=CPU)(module(bb))
    check_device_plan(out)
    assert dev(out["f"].params[0]) == "sim:0"
    assert str(out["f"].ret_struct_info.vdevice) == "sim:0"
    kinds = sorted(c["kind"] for c in out.attrs["device_copies"])
    assert len(kinds) == 2  # into f at the boundary, and its result back
    assert any("function boundary" in c["reason"] for c in out.attrs["device_copies"])


def test_tuples_and_projections():
    bb = BlockBuilder()
    x = Var("x", struct_info=T(dev=CPU))
    y = Var("y", struct_info=T(dev=SIM))
    with bb.function("main", [x, y]):
        t = bb.emit(E.Tuple((x, y)), "t")
        a = bb.emit(E.TupleGetItem(t, 0), "a")
        b = bb.emit(E.TupleGetItem(t, 1), "b")
        c = bb.emit(R.add(a, b), "c")
        s = bb.emit(R.split(c, 2, axis=0), "s")
        s0 = bb.emit(E.TupleGetItem(s, 0), "s0")
        h = bb.emit(R.hint_on_device(s0, CPU), "h")
        bb.emit_func_output(E.Tuple((h, s)))
    out = PlanDevices(default_vdevice=SIM)(module(bb))
    check_device_plan(out)
    ret = out["main"].ret_struct_info
    assert isinstance(ret, TupleStructInfo)
    # computing on the CPU costs one copy (y); on sim it would cost y's copy and s[0]'s
    assert str(ret.fields[0].vdevice) == "cpu:0"
    assert all(str(f.vdevice) == "cpu:0" for f in ret.fields[1].fields)
    assert [c["value"] for c in out.attrs["device_copies"]] == ["y"]


def test_if_condition_on_host_and_branch_results():
    bb = BlockBuilder()
    x = Var("x", struct_info=T(dev=SIM))
    with bb.function("main", [x]):
        s = bb.emit(R.sum(x), "s")
        cond = bb.emit(R.greater(s, E.const(0.0, "float32")), "cond")
        bb.begin_scope()
        t1 = bb.emit(R.exp(x), "t1")
        tb = bb.end_scope(t1)
        bb.begin_scope()
        f1 = bb.emit(R.negative(x), "f1")
        fb = bb.end_scope(f1)
        r = bb.emit(E.If(cond, tb, fb), "r")
        bb.emit_func_output(r)
    out = PlanDevices(default_vdevice=SIM)(module(bb))
    check_device_plan(out)
    rec = out.attrs["device_copies"]
    assert len(rec) == 1 and rec[0]["dst"] == "cpu:0" and rec[0]["kind"] == "if-cond"
    assert rec[0]["bytes"] == 1  # only the bool scalar moves


def test_host_only_shape_values_need_no_copy():
    bb = BlockBuilder()
    x = Var("x", struct_info=T(dev=SIM))
    with bb.function("main", [x]):
        s = bb.emit(R.shape_of(x), "s")
        y = bb.emit(R.reshape(x, s), "y")
        bb.emit_func_output(y)
    out = PlanDevices(default_vdevice=CPU)(module(bb))
    check_device_plan(out)
    assert copies_in(out) == []
    assert dev(bindings(out["main"])[1].var) == "sim:0"


def test_existing_explicit_copy_kept():
    bb = BlockBuilder()
    x = Var("x", struct_info=T(dev=CPU))
    with bb.function("main", [x]):
        y = bb.emit(at(R.to_vdevice(x, SIM), 12), "y")
        z = bb.emit(R.exp(y), "z")
        bb.emit_func_output(z)
    out = PlanDevices(default_vdevice=CPU)(module(bb))
    check_device_plan(out)
    cps = copies_in(out)
    assert [c.var.name_hint for c in cps] == ["y"]
    rec = out.attrs["device_copies"][0]
    assert rec["pass"] == "<input>" and rec["line"] == 12 and "R.to_vdevice" in rec["reason"]
    assert dev(bindings(out["main"])[-1].var) == "sim:0"


def test_copy_between_equal_devices_removed():
    bb = BlockBuilder()
    x = Var("x", struct_info=T(dev=SIM))
    with bb.function("main", [x]):
        y = bb.emit(R.to_vdevice(x, SIM), "y")
        z = bb.emit(R.exp(y), "z")
        bb.emit_func_output(z)
    out = PlanDevices()(module(bb))
    assert copies_in(out) == [] and out.attrs["device_copies"] == []
    assert bindings(out["main"])[0].value.args[0] is out["main"].params[0]


def test_hint_moves_free_values_without_copy():
    bb = BlockBuilder()
    x = Var("x", struct_info=T())
    with bb.function("main", [x]):
        a = bb.emit(R.exp(x), "a")
        h = bb.emit(R.hint_on_device(a, R.device("sim", 0)), "h")
        b = bb.emit(R.negative(h), "b")
        bb.emit_func_output(b)
    out = PlanDevices(default_vdevice=CPU)(module(bb))
    check_device_plan(out)
    assert copies_in(out) == []
    assert {dev(b.var) for b in bindings(out["main"])} == {"sim:0"}
    assert dev(out["main"].params[0]) == "sim:0"


def test_missing_kernel_fallback_from_option_and_target_attrs():
    def prog(vdevs):
        bb = BlockBuilder()
        x = Var("x", struct_info=T(dev=SIM))
        with bb.function("main", [x]):
            a = bb.emit(R.exp(x), "a")
            b = bb.emit(R.nn.softmax(a), "b")
            c = bb.emit(R.negative(b), "c")
            bb.emit_func_output(c)
        return module(bb, vdevs)

    out = PlanDevices(default_vdevice=SIM, missing_kernels={"sim:0": {"nn.softmax"}})(prog([CPU, SIM]))
    sim_attrs = VDevice("sim", 0, target_attrs=(("missing_kernels", ("nn.softmax",)),))
    out2 = PlanDevices(default_vdevice=sim_attrs)(prog([CPU, sim_attrs]))
    for o in (out, out2):
        check_device_plan(o)
        names = {b.var.name_hint: dev(b.var) for b in bindings(o["main"])}
        assert names["b"] == "cpu:0"
        assert len(o.attrs["device_copies"]) == 2
        assert any("nn.softmax" in c["reason"] for c in o.attrs["device_copies"])


def test_conflicting_pins_error_names_value_and_both_constraints():
    bb = BlockBuilder()
    x = Var("x", struct_info=T(dev=CPU))
    with bb.function("main", [x]):
        b = annotate(bb, "b", R.nn.softmax(x), T(dev=SIM), line=9)
        bb.emit_func_output(b)
    with pytest.raises(DevicePlanError) as err:
        PlanDevices(missing_kernels={"sim:0": ["nn.softmax"]})(module(bb))
    msg = str(err.value)
    assert "'b'" in msg and "prog.py:9" in msg and "sim:0" in msg and "nn.softmax" in msg


def test_tuple_outputs_pinned_to_two_devices_error():
    bb = BlockBuilder()
    x = Var("x", struct_info=T())
    with bb.function("main", [x]):
        s = annotate(bb, "s", R.split(x, 2), TupleStructInfo([T((2, 4), CPU), T((2, 4), SIM)]), line=4)
        bb.emit_func_output(s)
    with pytest.raises(DevicePlanError, match=r"'s'.*cpu:0.*sim:0"):
        PlanDevices()(module(bb))


def test_undeclared_vdevice_error_and_default_added():
    bb = BlockBuilder()
    x = Var("x", struct_info=T())
    with bb.function("main", [x]):
        bb.emit(at(R.hint_on_device(x, R.device("sim", 3)), 5), "y")
        z = bb.emit(R.add(x, x), "z")
        bb.emit_func_output(z)
    with pytest.raises(DevicePlanError, match=r"sim:3.*not declared.*prog.py:5"):
        PlanDevices()(module(bb))
    bb = BlockBuilder()
    x = Var("x", struct_info=T())
    with bb.function("main", [x]):
        y = bb.emit(R.exp(x), "y")
        bb.emit_func_output(y)
    out = PlanDevices()(bb.get())
    assert [str(v) for v in out.vdevices] == ["cpu:0"]
    check_device_plan(out)


def three_function_module():
    """main -> module1 (CPU) -> module2 (accelerator) -> module3 (CPU), pins only."""
    bb = BlockBuilder()
    specs = [("module1", CPU, R.exp), ("module2", SIM, R.negative), ("module3", CPU, R.sigmoid)]
    for name, vd, fn in specs:
        p = Var("p", struct_info=T(dev=vd))
        with bb.function(name, [p]):
            r = bb.emit(fn(p), "r")
            bb.emit_func_output(r)
    x = Var("x", struct_info=T())
    with bb.function("main", [x]):
        cur = x
        for name, _, _ in specs:
            cur = bb.emit(E.Call(bb.module.get_global_var(name), (cur,)), f"o_{name}")
        bb.emit_func_output(cur)
    return module(bb)


def test_three_function_case_copies_at_call_boundaries():
    out = PlanDevices(default_vdevice=CPU)(three_function_module())
    check_device_plan(out)
    rec = out.attrs["device_copies"]
    assert [(c["value"], c["src"], c["dst"]) for c in rec] == [
        ("o_module1", "cpu:0", "sim:0"), ("o_module2", "sim:0", "cpu:0")]
    assert all("function boundary" in c["reason"] for c in rec)


def test_function_called_from_two_devices_gets_boundary_copies():
    bb = BlockBuilder()
    p = Var("p", struct_info=T())
    with bb.function("g", [p]):
        r = bb.emit(R.exp(p), "r")
        bb.emit_func_output(r)
    x = Var("x", struct_info=T(dev=CPU))
    y = Var("y", struct_info=T(dev=SIM))
    with bb.function("main", [x, y]):
        a = bb.emit(E.Call(bb.module.get_global_var("g"), (x,)), "a")
        b = bb.emit(E.Call(bb.module.get_global_var("g"), (y,)), "b")
        c = annotate(bb, "c", R.add(a, b), T(dev=SIM))
        bb.emit_func_output(c)
    out = PlanDevices(default_vdevice=CPU)(module(bb))
    check_device_plan(out)
    assert len(out.functions) == 2  # no clone
    assert dev(out["g"].params[0]) == "sim:0"
    assert len(out.attrs["device_copies"]) == 1  # x into g; both results already on sim


def test_determinism():
    mods = [PlanDevices(default_vdevice=CPU)(three_function_module()) for _ in range(2)]
    assert_structural_equal(mods[0], mods[1])
    assert mods[0].attrs["device_copies"] == mods[1].attrs["device_copies"]


def test_pass_is_idempotent_and_input_untouched():
    mod = three_function_module()
    before = mod.script()
    once = PlanDevices(default_vdevice=CPU)(mod)
    twice = PlanDevices(default_vdevice=CPU)(once)
    assert mod.script() == before
    # the copies the first run inserted are kept, as the user's, and nothing is added
    assert [c["pass"] for c in twice.attrs["device_copies"]] == ["<input>", "<input>"]
    assert_structural_equal(once["main"], twice["main"])


def test_check_device_plan_rejects_missing_copy():
    bb = BlockBuilder()
    x = Var("x", struct_info=T(dev=CPU))
    y = Var("y", struct_info=T(dev=SIM))
    with bb.function("main", [x, y]):
        z = annotate(bb, "z", R.add(x, y), T(dev=SIM), line=3)
        bb.emit_func_output(z)
    with pytest.raises(DevicePlanError, match=r"'add'.*'z'.*sim:0.*cpu:0.*prog.py:3"):
        check_device_plan(module(bb))


def test_constant_read_on_two_devices_needs_no_copy():
    bb = BlockBuilder()
    x = Var("x", struct_info=T(dev=CPU))
    y = Var("y", struct_info=T(dev=SIM))
    c = E.const(np.ones((4, 4), "float32"))
    with bb.function("main", [x, y]):
        a = bb.emit(R.add(x, c), "a")
        b = bb.emit(R.add(y, c), "b")
        bb.emit_func_output(E.Tuple((a, b)))
    out = PlanDevices()(module(bb))
    check_device_plan(out)
    assert out.attrs["device_copies"] == []


def test_plan_result_modeled_cost_matches_copies():
    res = plan_module(three_function_module(), default_vdevice=CPU)
    assert res.modeled_cost == (128, 2)
    assert sum(c["bytes"] for c in res.copies) == 128


def test_module_without_devices_is_untouched_semantically():
    mod = IRModule()
    assert PlanDevices()(mod).attrs["device_copies"] == []


def test_three_function_case_runs_and_matches_single_device():
    pytest.importorskip("hetvm.runtime.vm")
    import hetvm
    from hetvm.pipeline import build

    x = np.random.default_rng(0).standard_normal((4, 4)).astype("float32")
    exe = build(three_function_module(), target="llvm")
    vm = hetvm.VirtualMachine(exe, [hetvm.cpu(0), hetvm.device("sim", 0)])
    got = vm["main"](x).numpy()
    ref = 1 / (1 + np.exp(np.exp(x)))  # sigmoid(negative(exp(x)))
    np.testing.assert_allclose(got, ref, rtol=1e-5)


def _kernel_calls_without_kernels(exe, missing):
    """Every KernelCall of ``exe`` whose device has no kernel for its op."""
    from hetvm.kernels import has_kernel
    from hetvm.runtime.bytecode import KernelCall

    bad = []
    for func in exe.functions.values():
        for pc, ins in enumerate(func.instructions):
            if not isinstance(ins, KernelCall):
                continue
            d = exe.devices[ins.device]
            name = f"{d['kind']}:{d['index']}"
            if not has_kernel(ins.op, d["kind"]) or ins.op in missing.get(name, ()):
                bad.append((func.name, pc, ins.op, name))
    return bad


def test_host_only_op_runs_on_the_host_when_the_default_device_is_a_sim():
    """Regression: ``Shape(x) * y`` on sim:0 + cpu put ``shape_to_tensor`` (a CPU kernel
    only) on sim:0: the plan said cpu, but its call's struct info named no device, so
    lowering allocated its result on the default device and ran the kernel there."""
    import hetvm
    from hetvm.ir import prim as P

    n = P.PrimVar("n")
    bb = BlockBuilder()
    x = Var("x", struct_info=T((n, 3), dev=SIM))
    y = Var("y", struct_info=T((2,), dev=SIM, dtype="int64"))
    with bb.function("main", [x, y]):
        s = bb.emit(R.shape_to_tensor(E.ShapeExpr((n, 3))), "s")
        z = bb.emit(R.multiply(s, y), "z")
        bb.emit_func_output(z)
    mod = module(bb, (SIM, CPU))
    planned = PlanDevices(default_vdevice=SIM)(mod)
    assert {b.var.name_hint: dev(b.var) for b in bindings(planned["main"])}["s"] == "cpu:0"
    exe = hetvm.build(mod, target="sim")
    assert _kernel_calls_without_kernels(exe, {}) == []
    vm = hetvm.VirtualMachine(exe, [hetvm.device("sim", 0), hetvm.cpu(0)])
    out = vm["main"](np.zeros((5, 3), "float32"), np.array([2, 7], "int64"))
    np.testing.assert_array_equal(out.copyto(hetvm.cpu(0)).numpy(), [10, 21])


def test_unannotated_inputs_live_on_an_accelerator_target_and_keep_the_compute_there():
    """Regression: a model whose inputs carry no device and whose shape work runs on
    the host (an exported transformer's ``Shape -> Mul -> Reshape``) was planned
    entirely onto the CPU by ``hetvm.build(target="sim")``: with free inputs, moving
    everything to the host spared the one 16-byte copy of the shape."""
    from hetvm.ir import prim as P

    n = P.PrimVar("n")
    bb = BlockBuilder()
    x = Var("x", struct_info=T((n, 2)))  # no vdevice: what an ONNX import gives
    with bb.function("main", [x]):
        s = bb.emit(R.shape_to_tensor(E.ShapeExpr((n, 2))), "s")
        a = bb.emit(R.exp(x), "a")
        b = bb.emit(R.multiply(a, R.astype(s, "float32")), "b")
        bb.emit_func_output(b)
    mod = bb.get()
    planned = PlanDevices(default_vdevice=SIM)(mod)
    where = {b.var.name_hint: dev(b.var) for b in bindings(planned["main"])}
    assert where["s"] == "cpu:0" and where["a"] == "sim:0" and where["b"] == "sim:0"
    assert dev(planned["main"].params[0]) == "sim:0"
    (copy,) = planned.attrs["device_copies"]
    assert (copy["src"], copy["dst"]) == ("cpu:0", "sim:0")
    # on a CPU target nothing is pinned: the plan is all-host, no copy
    on_cpu = PlanDevices(default_vdevice=CPU)(mod)
    assert on_cpu.attrs["device_copies"] == []


def test_no_kernel_call_lands_on_a_device_without_that_kernel():
    """The general rule, checked on the bytecode: a device configured without an op's
    kernel (and the registry's own gaps) never runs that op, wherever the inputs are."""
    import hetvm

    missing = {"sim:0": {"nn.softmax", "multiply"}}
    bb = BlockBuilder()
    x = Var("x", struct_info=T(dev=SIM))
    with bb.function("main", [x]):
        a = bb.emit(R.exp(x), "a")
        b = bb.emit(R.multiply(a, x), "b")
        c = bb.emit(R.nn.softmax(b), "c")
        s = bb.emit(R.shape_to_tensor(E.ShapeExpr((4,))), "s")
        d = bb.emit(R.add(c, R.astype(s, "float32")), "d")
        bb.emit_func_output(d)
    mod = module(bb, (SIM, CPU))
    exe = hetvm.build(mod, target="sim", plan_devices_options={"missing_kernels": missing})
    assert _kernel_calls_without_kernels(exe, missing) == []
    ops_on = {(op_name, exe.devices[ins.device]["kind"]) for ins in exe["main"].instructions
              if type(ins).__name__ == "KernelCall" for op_name in _step_ops(ins)}  # fmt: skip
    assert {("multiply", "cpu"), ("nn.softmax", "cpu"), ("shape_to_tensor", "cpu")} <= ops_on


def _step_ops(ins):
    """The ops a kernel call runs: a fused_elementwise call's steps (FuseOps)."""
    if ins.op != "fused_elementwise":
        return [ins.op]
    return [step[0] for step in ins.attrs["program"]]


def test_a_loop_body_on_an_accelerator_copies_what_it_reads_once_before_the_loop():
    import hetvm
    from hetvm.script import from_source
    from hetvm.testing.loop_programs import counting_loop, counting_loop_reference

    mod = from_source(counting_loop(16, body_device="sim"))
    report = hetvm.explain(mod)
    # x and exp(w) go to the accelerator at the loop's entry, the result comes back:
    # nothing is copied inside the loop body (a copy there runs on every iteration)
    assert sorted((c["value"], c["function"], c["dst"]) for c in report.copies) == [
        ("e", "main", "sim:0"), ("x", "main", "sim:0"), ("y", "main", "cpu:0")]
    assert all(c["per_iteration_of"] is None for c in report.copies)
    assert all("once, before loop 'loop'" in c["reason"] for c in report.copies if c["value"] != "y")
    exe = hetvm.build(mod, target="llvm")
    vm = hetvm.VirtualMachine(exe, [hetvm.cpu(0), hetvm.device("sim", 0)], trace=True)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 16)).astype("float32")
    w = (rng.standard_normal((16, 16)) * 0.1 - 3).astype("float32")
    for trips in (1, 1000):
        got = vm["main"](np.array(trips), x, w).numpy()
        np.testing.assert_allclose(got, counting_loop_reference(trips, x, w), rtol=1e-4, atol=1e-5)
        assert sum(1 for e in vm.events if e["event"] == "copy") == 3  # the same for 1 and 1,000


def test_a_copy_inside_a_loop_body_is_reported_per_iteration():
    import hetvm
    from hetvm.script import from_source
    from hetvm.testing.loop_programs import counting_loop

    # only the product is pinned on the accelerator: its input acc, carried from
    # the CPU add, must cross on every iteration
    src = counting_loop(16, body_device="sim").replace(
        'u: R.Tensor((1, 16), "float32", "sim")', 'u: R.Tensor((1, 16), "float32", "llvm")').replace(
        'a: R.Tensor((1, 16), "float32", "sim")', 'a: R.Tensor((1, 16), "float32", "llvm")')
    report = hetvm.explain(from_source(src))
    inside = [c for c in report.copies if c["function"] == "loop"]
    assert inside and all(c["per_iteration_of"] == "loop" for c in inside)
    assert all("made on every iteration of loop 'loop'" in c["reason"] for c in inside)


@pytest.mark.parametrize("trips,per_iteration", [("trips", False), ("R.const(4, \"int64\")", True), ("R.const(64, \"int64\")", False)])
def test_a_known_trip_count_weighs_the_copies_inside_a_loop(trips, per_iteration):
    """The matmul may run on the CPU (its result and the carried value then cross
    on every iteration: 128 bytes each) or on the accelerator (the 1,024-byte
    exp(w) crosses once, before the loop). Four known iterations make the first
    cheaper; 64, or an unknown count (weighed as 16), the second. explain says
    which count it used."""
    import hetvm
    from hetvm.script import from_source
    from hetvm.testing.loop_programs import counting_loop

    src = counting_loop(16, body_device="sim").replace(
        't: R.Tensor((1, 16), "float32", "sim")', 't: R.Tensor((1, 16), "float32")').replace(
        'y = cls.loop(R.const(0, "int64"), trips, x, e)', f'y = cls.loop(R.const(0, "int64"), {trips}, x, e)')
    copies = hetvm.explain(from_source(src)).copies
    inside = [c for c in copies if c["per_iteration_of"] == "loop"]
    assert bool(inside) is per_iteration
    if per_iteration:
        assert all(c["trip_count"] == 4 and "(4 iterations: 256 bytes per entry of the loop)" in c["reason"] for c in inside)
    else:
        before = [c for c in copies if "before loop 'loop'" in c["reason"]]
        want = "unknown trip count" if trips == "trips" else "64 iterations"
        assert before and all(want in c["reason"] for c in before)
