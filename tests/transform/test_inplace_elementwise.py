"""InplaceElementwise: an element-wise kernel writes over an input that dies there,
and only when the liveness analysis proves nothing reads those bytes later."""

import numpy as np
import pytest

import hetvm
import hetvm.op as R
from hetvm.analysis.memory_plan import check_no_overlap, memory_plan_report
from hetvm.ir import BlockBuilder, TensorStructInfo, Var
from hetvm.ir import expr as E
from hetvm.transform import (
    CallTIRRewrite,
    InplaceElementwise,
    LegalizeOps,
    Normalize,
    PassContext,
    Sequential,
    StaticPlanBlockMemory,
    ToNonDataflow,
)

N = 4 * 256 * 4  # bytes of one (4, 256) float32 tensor


def param(name, shape, dtype="float32"):
    return Var(name, struct_info=TensorStructInfo(shape, dtype))


def program(body):
    """main(x: (4, 64), w: (64, 256), v: (256, 8)) with ``body(bb, x, w, v)`` -> result."""
    x, w, v = param("x", (4, 64)), param("w", (64, 256)), param("v", (256, 8))
    bb = BlockBuilder()
    with bb.function("main", [x, w, v]):
        with bb.dataflow():
            out = bb.emit_output(body(bb, x, w, v))
        bb.emit_func_output(out)
    return bb.get()


def lower(mod, inplace=True):
    passes = [Normalize(), LegalizeOps(), ToNonDataflow(), CallTIRRewrite()]
    if inplace:
        passes.append(InplaceElementwise())
    return Sequential(passes)(mod)


def views(mod):
    """Names of the allocations InplaceElementwise turned into views."""
    out = []
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, E.Call) and isinstance(v.op, E.ExternFunc) and v.op.global_symbol == "vm.builtin.view_at":
                out.append(b.var.name_hint)
    return out


def plan(mod):
    planned = StaticPlanBlockMemory()(mod)
    check_no_overlap(planned)
    return memory_plan_report(planned)["main"][0]


def run(mod, seed=0):
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal([int(d.value) for d in p.struct_info.shape]).astype("float32") * 0.3
            for p in mod["main"].params]  # fmt: skip
    vm = hetvm.VirtualMachine(hetvm.build(mod), [hetvm.cpu(0)])
    return args, vm["main"](*args).numpy()


def chain(bb, x, w, v):
    t = bb.emit(R.matmul(x, w))  # (4, 256)
    u = bb.emit(R.exp(t))  # t dies here: u may be t's bytes
    r = bb.emit(R.nn.relu(u))  # and so on down the chain: one buffer
    return bb.emit(R.matmul(bb.emit(R.multiply(r, r)), v))


def test_a_dying_input_becomes_the_output_and_the_bound_drops():
    mod = program(chain)
    assert views(lower(mod)) == ["lv1", "lv2", "lv3"]
    before, after = plan(lower(mod, inplace=False)), plan(lower(mod))
    # without the pass, t and exp(t) are live together (2 buffers); with it one buffer
    assert before["lower_bound_bytes"] == 2 * N
    assert after["lower_bound_bytes"] == N and after["planned_bytes"] == N
    args, got = run(mod)
    x, w, v = args
    u = np.exp(x @ w)
    np.testing.assert_allclose(got, (np.maximum(u, 0) ** 2) @ v, rtol=1e-5, atol=1e-5)


def test_refused_while_the_input_is_read_later():
    def body(bb, x, w, v):
        t = bb.emit(R.matmul(x, w))
        u = bb.emit(R.exp(t))
        return bb.emit(R.matmul(bb.emit(R.add(u, t)), v))  # t read after exp

    lowered = lower(program(body))
    # exp(t) may not take t; add(u, t) may take u (or t): both die there
    assert views(lowered) == ["lv2"]
    args, got = run(program(body))
    x, w, v = args
    t = x @ w
    np.testing.assert_allclose(got, (np.exp(t) + t) @ v, rtol=1e-5, atol=1e-5)


def test_refused_while_a_view_of_the_input_is_read_later():
    def body(bb, x, w, v):
        t = bb.emit(R.matmul(x, w))
        flat = bb.emit(R.reshape(t, (1024,)))  # a view of t's bytes
        u = bb.emit(R.exp(t))
        s = bb.emit(R.reshape(bb.emit(R.negative(flat)), (4, 256)))
        return bb.emit(R.matmul(bb.emit(R.add(u, s)), v))

    lowered = lower(program(body))
    names = views(lowered)
    assert "lv2" not in names  # exp(t): flat, a view of t, is read afterwards
    args, got = run(program(body))
    x, w, v = args
    t = x @ w
    np.testing.assert_allclose(got, (np.exp(t) - t) @ v, rtol=1e-5, atol=1e-5)


def test_refused_for_another_input_sharing_the_bytes():
    def body(bb, x, w, v):
        t = bb.emit(R.matmul(x, w))
        same = bb.emit(R.reshape(bb.emit(R.reshape(t, (1024,))), (4, 256)))  # t's bytes again
        return bb.emit(R.matmul(bb.emit(R.add(t, same)), v))

    assert views(lower(program(body))) == []
    args, got = run(program(body))
    x, w, v = args
    np.testing.assert_allclose(got, (2 * (x @ w)) @ v, rtol=1e-5, atol=1e-5)


def test_refused_for_parameters_returned_values_broadcasts_and_unsafe_kernels():
    x = param("x", (4, 256))
    small = param("s", (1, 256))
    bb = BlockBuilder()
    with bb.function("main", [x, small]):
        with bb.dataflow():
            a = bb.emit(R.exp(x))  # x is a parameter: the caller's bytes
            b = bb.emit(R.add(bb.emit(R.exp(small)), a))  # exp(small) is broadcast: smaller than b
            g = bb.emit(R.nn.gelu(b))  # writes partial results, then reads b again
            out = bb.emit_output(bb.emit(R.nn.relu(g)))  # returned: results never alias
        bb.emit_func_output(out)
    mod = bb.get()
    lowered = lower(mod)
    # only add(exp(small), a) may take a (a dies there, same shape)
    assert views(lowered) == ["lv2"]
    rng = np.random.default_rng(0)
    xs, ss = rng.standard_normal((4, 256)).astype("float32"), rng.standard_normal((1, 256)).astype("float32")
    got = hetvm.VirtualMachine(hetvm.build(mod), [hetvm.cpu(0)])["main"](xs, ss).numpy()
    from math import erf

    b = np.exp(ss) + np.exp(xs)
    gelu = 0.5 * b * (1 + np.vectorize(erf)(b / np.sqrt(2)))
    np.testing.assert_allclose(got, np.maximum(gelu, 0), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("last, allowed", [("add", True), ("nn.gelu", False)])
def test_fused_elementwise_only_when_its_last_step_is_safe(last, allowed):
    def body(bb, x, w, v):
        t = bb.emit(R.matmul(x, w))
        if last == "add":
            steps = [("exp", "float32", "x0"), ("add", "float32", "t0", "x0")]
        else:
            steps = [("exp", "float32", "x0"), ("nn.gelu", "float32", "t0")]
        u = bb.emit(R.fused_elementwise(t, program=steps))
        return bb.emit(R.matmul(u, v))

    mod = program(body)
    assert (views(lower(mod)) == ["lv1"]) is allowed
    args, got = run(mod)
    x, w, v = args
    t = x @ w
    if last == "add":
        want = (np.exp(t) + t) @ v
    else:
        from math import erf

        e = np.exp(t)
        want = (0.5 * e * (1 + np.vectorize(erf)(e / np.sqrt(2)))) @ v
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_the_whole_pipeline_reports_it_and_both_executors_agree():
    from hetvm.graph_executor import create

    mod = program(chain)
    # FuseOps makes the chain one fused_elementwise (last step multiply): one rewrite
    assert hetvm.build(mod).metadata["inplace_elementwise"] == {"main": 1}
    args, got = run(mod)
    gm = hetvm.build(mod, executor="graph")
    ex = create(gm.graph, gm.lib, [hetvm.cpu(0)])
    ex.run(**{p.name_hint: a for p, a in zip(mod["main"].params, args)})
    np.testing.assert_allclose(ex.get_output(0).numpy(), got, rtol=1e-6)


def test_measured_peak_equals_the_prediction_with_poisoned_kills():
    from hetvm.pipeline import lower

    mod = program(chain)
    rng = np.random.default_rng(3)
    args = [rng.standard_normal([int(d.value) for d in p.struct_info.shape]).astype("float32") * 0.3
            for p in mod["main"].params]  # fmt: skip
    for disabled in ([], ["FuseOps"]):
        from hetvm.transform import PassContext

        with PassContext(disabled_pass=disabled):
            vm = hetvm.VirtualMachine(hetvm.build(mod), [hetvm.cpu(0)], poison=True)
            out = vm["main"](*args).numpy()
            predicted = memory_plan_report(lower(mod))["main"][0]["predicted_peak_bytes"]
        x, w, v = args
        np.testing.assert_allclose(out, (np.maximum(np.exp(x @ w), 0) ** 2) @ v, rtol=1e-5, atol=1e-5)
        assert vm.memory_report()["cpu:0"]["peak_bytes"] == predicted


def test_in_place_on_the_simulated_accelerator():
    mod = program(chain)
    exe = hetvm.build(mod, target="sim", target_host="llvm")
    # FuseOps leaves sim groups alone: exp, relu and multiply each run in place
    assert exe.metadata["inplace_elementwise"] == {"main": 3}
    rng = np.random.default_rng(5)
    args = [rng.standard_normal([int(d.value) for d in p.struct_info.shape]).astype("float32") * 0.3
            for p in mod["main"].params]  # fmt: skip
    vm = hetvm.VirtualMachine(exe, [hetvm.device("sim", 0)], poison=True)
    out = vm["main"](*args).copyto(hetvm.cpu(0)).numpy()
    x, w, v = args
    np.testing.assert_allclose(out, (np.maximum(np.exp(x @ w), 0) ** 2) @ v, rtol=1e-5, atol=1e-5)


def small_program():
    """main(x: (2, 8)): exp, relu, negative: each output 64 bytes, each input dies."""
    x = param("x", (2, 8))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(R.exp(x))
            b = bb.emit(R.nn.relu(a))
            c = bb.emit(R.negative(b))
            out = bb.emit_output(bb.emit(R.add(c, x)))
        bb.emit_func_output(out)
    return bb.get()


def lower_with(mod, inplace_pass):
    return Sequential([Normalize(), LegalizeOps(), ToNonDataflow(), CallTIRRewrite(), inplace_pass])(mod)


def test_tiny_outputs_keep_their_allocation_below_min_bytes():
    mod = small_program()
    # 64 bytes < the default MIN_BYTES: NumPy's overlapping-out path would cost more
    assert views(lower(mod)) == []
    assert views(lower_with(mod, InplaceElementwise(min_bytes=64))) == ["lv1", "lv2"]
    assert views(lower_with(mod, InplaceElementwise(min_bytes=65))) == []
    with PassContext(config={"hetvm.inplace.min_bytes": 0}, disabled_pass=["FuseOps"]):
        assert views(lower(mod)) == ["lv1", "lv2"]
        exe = hetvm.build(mod)
    assert exe.metadata["inplace_elementwise"] == {"main": 2}
    x = np.linspace(-2, 2, 16, dtype="float32").reshape(2, 8)
    got = hetvm.VirtualMachine(exe, [hetvm.cpu(0)], poison=True)["main"](x).numpy()
    np.testing.assert_allclose(got, -np.maximum(np.exp(x), 0) + x, rtol=1e-6)


def test_a_symbolic_size_is_not_judged_tiny():
    from hetvm.ir import prim as P

    n = P.PrimVar("n")
    x = Var("x", struct_info=TensorStructInfo((n,), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(R.exp(x))
            b = bb.emit(R.nn.relu(a))
            out = bb.emit_output(bb.emit(R.add(b, x)))
        bb.emit_func_output(out)
    assert views(lower(bb.get())) == ["lv1"]


@pytest.mark.parametrize("bad", [-1, 1.5, "64", True])
def test_a_bad_min_bytes_is_a_clear_error(bad):
    with pytest.raises(hetvm.HetvmError, match=r"InplaceElementwise\(min_bytes=...\) must be a non-negative int"):
        InplaceElementwise(min_bytes=bad)
    with PassContext(config={"hetvm.inplace.min_bytes": bad}):
        with pytest.raises(hetvm.HetvmError, match="'hetvm.inplace.min_bytes' must be a non-negative int"):
            lower(small_program())
