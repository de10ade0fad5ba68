"""FuseOps: element-wise groups on a CPU device become one fused_elementwise call."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import hetvm
import hetvm.op as op
from hetvm.errors import StructInfoError
from hetvm.frontend import from_onnx
from hetvm.ir import Var, VDevice, const
from hetvm.ir import struct_info as S
from hetvm.ir.structural import assert_structural_equal
from hetvm.pipeline import default_pipeline, lower
from hetvm.script import from_source
from hetvm.testing.ir_query import build_and_run, one_input_module
from hetvm.testing.ir_query import op_calls as _calls
from hetvm.testing.ir_query import op_names as _ops
from hetvm.transform import FuseOps, Sequential

F32 = "float32"


def _planned(mod):
    """The module as FuseOps sees it in the pipeline (placed, before LegalizeOps)."""
    passes = default_pipeline(VDevice("llvm", 0), VDevice("llvm", 0)).passes
    names = [p.name for p in passes]
    return Sequential(passes[: names.index("FuseOps")])(mod)


def _fused(mod):
    planned = _planned(mod)
    out = FuseOps()(planned)
    assert_structural_equal(FuseOps()(out), out)  # idempotent
    return out


def _programs(mod):
    return [c.attrs["program"] for c in _calls(mod) if c.op.name == "fused_elementwise"]


def _compare(mod, *args, rtol=1e-6, atol=1e-6):
    fused = build_and_run(mod, *args, poison=True)
    plain = build_and_run(mod, *args, disabled=["FuseOps"], poison=True)
    np.testing.assert_allclose(fused, plain, rtol=rtol, atol=atol)
    return fused


def _swish(bb, x):
    s = bb.emit(op.sigmoid(x))
    return bb.emit(op.multiply(x, s))


def test_sigmoid_times_input_is_one_silu_step():
    mod = one_input_module(_swish, (2, 3, 4))
    out = _fused(mod)
    assert _ops(out) == ["fused_elementwise"]
    assert _programs(out) == [(("nn.silu", F32, "x0"),)]
    x = np.linspace(-30, 30, 24, dtype=F32).reshape(2, 3, 4)
    y = _compare(mod, x)
    np.testing.assert_allclose(y, x / (1 + np.exp(-x.astype(np.float64))), rtol=1e-6, atol=1e-30)


def _onnx_module(nodes, shape=(1, 4, 3, 3), inits=()):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], initializer=list(inits),
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return from_onnx(model)


def test_hardswish_and_hardsigmoid_chains_fuse_into_one_op_each():
    mod = _onnx_module([helper.make_node("HardSwish", ["x"], ["h"]),
                        helper.make_node("HardSigmoid", ["h"], ["y"], alpha=0.25, beta=0.4)])  # fmt: skip
    out = _fused(mod)
    assert _ops(out) == ["fused_elementwise"]  # both chains: one group, one pass
    (program,) = _programs(out)
    assert [s[0] for s in program].count("clip") == 2
    x = np.linspace(-5, 5, 36, dtype=F32).reshape(1, 4, 3, 3)
    y = _compare(mod, x)
    hs = x * np.clip(x / 6 + 0.5, 0, 1)
    np.testing.assert_allclose(y, np.clip(hs * 0.25 + 0.4, 0, 1), rtol=1e-6, atol=1e-6)


def test_gpt2_gelu_power_three_becomes_products():
    three = helper.make_tensor("three", TensorProto.FLOAT, [], [3.0])
    half = helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])
    k = helper.make_tensor("k", TensorProto.FLOAT, [], [0.044715])
    nodes = [
        helper.make_node("Pow", ["x", "three"], ["p"]), helper.make_node("Mul", ["p", "k"], ["pk"]),
        helper.make_node("Add", ["x", "pk"], ["s"]), helper.make_node("Tanh", ["s"], ["t"]),
        helper.make_node("Mul", ["x", "half"], ["xh"]), helper.make_node("Mul", ["xh", "t"], ["y"]),
    ]  # fmt: skip
    mod = _onnx_module(nodes, (2, 8), [three, half, k])
    out = _fused(mod)
    assert _ops(out) == ["fused_elementwise"]
    (program,) = _programs(out)
    assert "power" not in [s[0] for s in program]
    assert [s[0] for s in program].count("multiply") >= 4
    x = np.linspace(-4, 4, 16, dtype=F32).reshape(2, 8)
    _compare(mod, x, rtol=1e-5)


def test_a_value_read_outside_the_group_stays_a_result_and_an_input():
    def body(bb, x):
        a = bb.emit(op.exp(x))
        b = bb.emit(op.add(a, x))
        return bb.emit(op.concat([bb.emit(op.multiply(b, b)), a], axis=0))

    out = _fused(one_input_module(body, (2, 3)))
    # exp is read by the concat too: it stays; add + multiply fuse reading it
    assert _ops(out) == ["exp", "fused_elementwise", "concat"]
    assert _programs(out) == [(("add", F32, "x0", "x1"), ("multiply", F32, "t0", "t0"))]


def test_a_smaller_producer_is_not_recomputed_per_element_of_a_broadcast():
    g = Var("g", struct_info=S.TensorStructInfo((1, 3, 1, 1), F32))

    def body(bb, x, g):
        s = bb.emit(op.sigmoid(g))  # a squeeze-excitation gate
        return bb.emit(op.multiply(x, s))

    mod = one_input_module(body, (1, 3, 4, 4), extra_params=[g])
    out = _fused(mod)
    # the sigmoid alone is fused (its own kernel); the multiply reads its result
    assert _ops(out) == ["fused_elementwise", "multiply"]
    rng = np.random.default_rng(0)
    _compare(mod, rng.standard_normal((1, 3, 4, 4)).astype(F32), rng.standard_normal((1, 3, 1, 1)).astype(F32))


def test_broadcast_inputs_and_scalar_constants():
    y = Var("y", struct_info=S.TensorStructInfo((3, 1), F32))

    def body(bb, x, y):
        a = bb.emit(op.add(x, y))
        b = bb.emit(op.multiply(a, const(np.full((1, 1), 2.0, F32))))
        c = bb.emit(op.maximum(b, const(np.zeros((4,), F32))))  # 4 elements: an input
        return bb.emit(op.subtract(c, const(np.float32(1.0))))

    mod = one_input_module(body, (3, 4), extra_params=[y])
    out = _fused(mod)
    assert _ops(out) == ["fused_elementwise"]
    (call,) = _calls(out)
    assert len(call.args) == 3 and [s[0] for s in call.attrs["program"]].count("const") == 2
    x = np.array([[np.nan, np.inf, -np.inf, 0.0]] * 3, F32)
    _compare(mod, x, np.arange(3, dtype=F32).reshape(3, 1))


def test_integer_and_bool_programs_match_the_unfused_ops():
    def body(bb, x):
        a = bb.emit(op.multiply(x, x))  # wraps around in int32
        b = bb.emit(op.add(a, const(np.int32(7))))
        c = bb.emit(op.greater(b, const(np.int32(0))))
        return bb.emit(op.logical_not(c))

    mod = one_input_module(body, (5,), dtype="int32")
    out = _fused(mod)
    assert _ops(out) == ["fused_elementwise"]
    x = np.array([0, -3, 46341, 2**31 - 1, -(2**31)], np.int32)
    fused = build_and_run(mod, x)
    assert fused.dtype == np.bool_
    np.testing.assert_array_equal(fused, build_and_run(mod, x, disabled=["FuseOps"]))


def test_empty_tensors_fuse_and_run():
    mod = one_input_module(_swish, (0, 3))
    assert _ops(_fused(mod)) == ["fused_elementwise"]
    assert _compare(mod, np.zeros((0, 3), F32)).shape == (0, 3)


def test_symbolic_shapes_fuse():
    mod = from_source('''
from tvm.script import relax as R
@R.function
def main(x: R.Tensor(("n", 4), "float32")):
    with R.dataflow():
        a = R.tanh(x)
        b = R.multiply(a, x)
        R.output(b)
    return b
''')
    assert _ops(_fused(mod)) == ["fused_elementwise"]
    _compare(mod, np.linspace(-2, 2, 12, dtype=F32).reshape(3, 4))


def test_nothing_fuses_on_a_sim_device():
    mod = one_input_module(_swish, (2, 3))
    low = lower(mod, target="sim")
    assert "fused_elementwise" not in low.script()


def test_nothing_fuses_on_a_cpu_configured_without_a_step_kernel():
    mod = one_input_module(_swish, (2, 3))
    low = lower(mod, plan_devices_options={"missing_kernels": {"cpu:0": {"tanh"}}})
    assert "fused_elementwise" not in low.script()


def test_fusing_leaves_fewer_planned_intermediates():
    def body(bb, x):
        a = bb.emit(op.multiply(x, const(np.float32(1 / 6))))
        b = bb.emit(op.add(a, const(np.float32(0.5))))
        c = bb.emit(op.clip(b, 0.0, 1.0))
        d = bb.emit(op.multiply(x, c))
        return bb.emit(op.nn.conv2d(d, const(np.ones((2, 2, 1, 1), F32))))

    mod = one_input_module(body, (1, 2, 8, 8))
    from hetvm.transform import PassContext

    # InplaceElementwise would chain the unfused ops into one buffer too: off, so
    # what is measured is FuseOps alone
    with PassContext(disabled_pass=["InplaceElementwise"]):
        fused = hetvm.build(mod).metadata["memory_plan_report"]["main"]
    with PassContext(disabled_pass=["FuseOps", "InplaceElementwise"]):
        plain = hetvm.build(mod).metadata["memory_plan_report"]["main"]
    assert sum(d["num_planned"] for d in fused.values()) < sum(d["num_planned"] for d in plain.values())


def test_the_fused_op_prints_and_parses_back():
    low = _fused(one_input_module(_swish, (2, 3)))
    again = from_source(low.script())
    assert_structural_equal(again, low)


@pytest.mark.parametrize(
    ("program", "match"),
    [
        ([("launch_missiles", F32, "x0")], "unknown op 'launch_missiles'"),
        ([("add", F32, "x0", "t0")], "step 0 .*'t0' names no input"),
        ([("add", F32, "x0", "x1")], "names no input"),
        ([("exp", "int32", "x0")], "result dtype must be float32"),
        ([("clip", F32, "x0", 0.0)], "takes 1 ref"),
        ([("const", F32, 1.0)], "input 0 is not read"),
        ([], "non-empty list"),
    ],
)
def test_a_malformed_program_names_the_step(program, match):
    x = Var("x", struct_info=S.TensorStructInfo((2,), F32))
    with pytest.raises(StructInfoError, match=match):
        op.fused_elementwise(x, program=program)


def test_a_long_chain_becomes_groups_of_bounded_size():
    from hetvm.transform.fuse_ops import MAX_GROUP

    def body(bb, x):
        v = x
        for _ in range(2 * MAX_GROUP + 3):
            v = bb.emit(op.add(v, const(np.float32(1.0))))
        return v

    mod = one_input_module(body, (3,))
    out = _fused(mod)
    assert _ops(out) == ["fused_elementwise"] * 3
    assert [len(p) - 1 for p in _programs(out)] == [MAX_GROUP, MAX_GROUP, 3]  # ops, plus one const each
    np.testing.assert_allclose(_compare(mod, np.zeros(3, F32)), np.full(3, 2 * MAX_GROUP + 3, F32))


@pytest.mark.parametrize(
    "program",
    [[("add", F32, "", "x1")], [("exp", F32, "x0"), ("nope", F32, "t0")], "add", [("const", F32, "1")],
     [("exp", "float99", "x0")]],
)
def test_a_damaged_program_in_an_executable_is_refused_at_load(program):
    from hetvm.kernels import bind_kernel

    with pytest.raises(hetvm.HetvmError, match="fused_elementwise"):
        bind_kernel("fused_elementwise", "cpu", np, {"program": program})


def _random_dag(n, seed=0):
    """Each op reads one or two earlier values, mostly recent ones (as compile_time.py)."""
    import random

    from hetvm.ir import BlockBuilder

    rng = random.Random(seed)
    x = Var("x", struct_info=S.TensorStructInfo((4, 8), F32))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            values = [x]
            for _ in range(n):
                a = values[max(0, len(values) - 1 - int(rng.expovariate(0.2)))]
                if rng.random() < 0.5:
                    b = values[rng.randrange(len(values))]
                    values.append(bb.emit(rng.choice((op.add, op.multiply, op.maximum))(a, b)))
                else:
                    values.append(bb.emit(rng.choice((op.negative, op.tanh, op.sigmoid))(a)))
            out = bb.emit_output(values[-1])
        bb.emit_func_output(out)
    return bb.get()


def test_groups_of_a_random_dag_keep_every_read_inside():
    """On a 600-op random DAG (groups merge across shared producers): every value
    a fused group swallows is read only inside it, and no group exceeds MAX_GROUP
    -- the invariant the planner's per-group read counts must keep."""
    from hetvm.transform._conv_chain import use_counts
    from hetvm.transform.fuse_ops import MAX_GROUP, _device_filter, _Planner

    planned = _planned(_random_dag(600))
    func = planned["main"]
    uses = use_counts(func)
    planner = _Planner(uses, _device_filter(planned, None))
    block = next(b for b in func.body.blocks if b.bindings)
    plans = planner.plan(block)
    assert plans and max(len(g) for g in plans.values()) > 2
    for root, group in plans.items():
        assert group[-1].var is root and len(group) <= MAX_GROUP
        for member in group[:-1]:
            reads = sum(1 for g in group for a in g.value.args if a is member.var)
            assert reads == uses[member.var]


def test_groups_on_a_cuda_device_fuse_too():
    # CuPy runs the program as one generated kernel (hetvm.kernels.codegen_cuda);
    # lowering needs no GPU
    mod = one_input_module(_swish, (2, 3))
    low = lower(mod, target="cuda")
    assert "fused_elementwise" in low.script()
