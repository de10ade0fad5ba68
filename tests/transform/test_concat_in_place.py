"""ConcatInPlace: a concatenation's inputs are computed into views of its output,
with the same results, the same or a lower memory bound, and the runtime's
peak equal to the plan's prediction."""

from __future__ import annotations

import numpy as np
import pytest

import hetvm
import hetvm.op as op
from hetvm.analysis.memory_plan import memory_plan_report
from hetvm.errors import HetvmRuntimeError
from hetvm.graph_executor import create as create_graph_executor
from hetvm.ir import BlockBuilder, If, TensorStructInfo, Var
from hetvm.ir import expr as E
from hetvm.pipeline import lower
from hetvm.runtime import ndarray as nd
from hetvm.runtime.builtins import Builtins
from hetvm.testing.ir_query import build_and_run
from hetvm.transform import (
    CallTIRRewrite,
    ConcatInPlace,
    LegalizeOps,
    Normalize,
    PassContext,
    Sequential,
    ToNonDataflow,
)

F32 = "float32"
RNG = np.random.default_rng(0)


def _rand(*shape):
    return RNG.standard_normal(shape).astype(F32)


def _module(shape, body, params=1):
    xs = [Var(f"x{i}", struct_info=TensorStructInfo(shape, F32)) for i in range(params)]
    bb = BlockBuilder()
    with bb.function("main", xs):
        bb.emit_func_output(body(bb, *xs))
    return bb.get()


def _two_branches(axis=1, shape=(1, 3, 4, 5)):
    """relu(x) and exp(x), concatenated, then read by one more op."""

    def body(bb, x):
        a = bb.emit(op.nn.relu(x))
        b = bb.emit(op.exp(x))
        c = bb.emit(op.concat(E.Tuple((a, b)), axis=axis))
        return bb.emit(op.multiply(c, c))

    return _module(shape, body)


def _lowered_calls(mod):
    """(kernel and builtin symbols called, in order) of the fully lowered main."""
    out = []

    def walk(seq):
        for block in seq.blocks:
            for b in block.bindings:
                v = b.value
                if isinstance(v, E.Call) and isinstance(v.op, E.ExternFunc):
                    out.append(v.op.global_symbol)
                elif isinstance(v, E.If):
                    walk(v.true_branch)
                    walk(v.false_branch)

    walk(lower(mod)["main"].body)
    return out


def _views(mod):
    """(offset, shape) of every view_at in ``mod`` after ConcatInPlace."""
    low = Sequential([Normalize(), LegalizeOps(), ToNonDataflow(), CallTIRRewrite(), ConcatInPlace()])(mod)
    return [
        (b.value.args[1].value.value, tuple(int(d.value) for d in b.value.args[2].values))
        for block in low["main"].body.blocks
        for b in block.bindings
        if isinstance(b.value, E.Call)
        and isinstance(b.value.op, E.ExternFunc)
        and b.value.op.global_symbol == "vm.builtin.view_at"
    ]


def _same_result(mod, *args):
    got = build_and_run(mod, *args, poison=True)
    want = build_and_run(mod, *args, disabled=["ConcatInPlace"], poison=True)
    for g, w in zip(got, want) if isinstance(want, list) else [(got, want)]:
        np.testing.assert_array_equal(g, w)


def _peak_is_predicted(mod, *args, executor_check=True):
    exe = hetvm.build(mod)
    vm = hetvm.VirtualMachine(exe, [hetvm.cpu(0)], poison=True)
    vm["main"](*args)
    report = memory_plan_report(lower(mod))["main"][0]
    assert vm.memory_report()["cpu:0"]["peak_bytes"] == report["predicted_peak_bytes"]
    return report


def test_inputs_become_views_and_the_copy_disappears():
    mod = _two_branches()
    calls = _lowered_calls(mod)
    assert "kernel.concat" not in calls and calls.count("vm.builtin.view_at") == 2
    assert _views(mod) == [(0, (1, 3, 4, 5)), (3 * 4 * 5 * 4, (1, 3, 4, 5))]
    x = _rand(1, 3, 4, 5)
    _same_result(mod, x)
    c = np.concatenate([np.maximum(x, 0), np.exp(x)], axis=1)
    np.testing.assert_allclose(build_and_run(mod, x), c * c, rtol=1e-6)
    _peak_is_predicted(mod, x)


def test_bound_does_not_grow_and_shrinks_here():
    """Without the pass both inputs and the output are live at the concat."""
    mod = _two_branches()
    with PassContext(disabled_pass=["ConcatInPlace"]):
        before = memory_plan_report(lower(mod))["main"][0]["lower_bound_bytes"]
    after = _peak_is_predicted(mod, _rand(1, 3, 4, 5))["lower_bound_bytes"]
    assert after < before


@pytest.mark.parametrize("axis", [0, -4, 2, -1])
def test_axes_whose_leading_dimensions_are_one(axis):
    """Slices are contiguous when every dimension before the axis is 1: axis 0 of
    any shape, or a later axis of a (1, 1, ...) shape."""
    shape = {2: (1, 1, 3, 5), -1: (1, 1, 1, 5)}.get(axis, (2, 3, 4, 5))
    mod = _two_branches(axis=axis, shape=shape)
    assert "kernel.concat" not in _lowered_calls(mod)
    _same_result(mod, _rand(*shape))


def test_batch_two_on_channels_keeps_its_copy():
    mod = _two_branches(axis=1, shape=(2, 3, 4, 5))
    assert "kernel.concat" in _lowered_calls(mod) and _views(mod) == []
    _same_result(mod, _rand(2, 3, 4, 5))


def test_parameters_repeated_inputs_and_results_keep_the_copy():
    def param_input(bb, x):
        a = bb.emit(op.exp(x))
        return bb.emit(op.concat(E.Tuple((a, x)), axis=1))

    def repeated(bb, x):
        a = bb.emit(op.exp(x))
        c = bb.emit(op.concat(E.Tuple((a, a)), axis=1))
        return bb.emit(op.add(c, c))

    def input_returned(bb, x):
        a = bb.emit(op.exp(x))
        b = bb.emit(op.nn.relu(x))
        c = bb.emit(op.concat(E.Tuple((a, b)), axis=1))
        return bb.emit(E.Tuple((c, a)))

    for body in (param_input, repeated, input_returned):
        mod = _module((1, 2, 3), body)
        assert "kernel.concat" in _lowered_calls(mod), body.__name__
        _same_result(mod, _rand(1, 2, 3))


def test_output_returned_is_placed_outside_the_arena_with_its_inputs():
    """The function's result is not planned (it outlives the call); its inputs
    are views of it all the same."""

    def body(bb, x):
        a = bb.emit(op.exp(x))
        b = bb.emit(op.nn.relu(x))
        return bb.emit(op.concat(E.Tuple((a, b)), axis=1))

    mod = _module((1, 2, 3), body)
    assert "kernel.concat" in _lowered_calls(mod)  # a result is never rewritten
    _same_result(mod, _rand(1, 2, 3))


def _dense_block(layers=4, grow=2, width=8):
    """DenseNet's pattern: each layer concatenates its input with a new part
    computed from it; the block's final buffer would hold every layer's output."""

    def body(bb, x):
        cur = bb.emit(op.nn.relu(x))
        for _ in range(layers):
            t = bb.emit(op.exp(cur))  # an intermediate as large as the input
            part = bb.emit(op.strided_slice(t, axes=[1], begin=[0], end=[grow]))
            part = bb.emit(op.nn.relu(part))
            cur = bb.emit(op.concat(E.Tuple((cur, part)), axis=1))
        return bb.emit(op.sum(cur, axis=[1]))

    return _module((1, width, 4, 4), body)


def test_nested_placement_is_kept_only_when_the_bound_does_not_grow():
    mod = _dense_block()
    with PassContext(disabled_pass=["ConcatInPlace"]):
        before = memory_plan_report(lower(mod))["main"][0]["lower_bound_bytes"]
    x = _rand(1, 8, 4, 4)
    report = _peak_is_predicted(mod, x)
    assert report["lower_bound_bytes"] <= before
    _same_result(mod, x)


def test_nested_placement_when_it_costs_nothing():
    """Three concats feeding each other with nothing else live: one buffer, views
    of views, the bound unchanged or lower."""

    def body(bb, x):
        a = bb.emit(op.exp(x))
        b = bb.emit(op.nn.relu(x))
        ab = bb.emit(op.concat(E.Tuple((a, b)), axis=1))
        c = bb.emit(op.negative(x))
        abc = bb.emit(op.concat(E.Tuple((ab, c)), axis=1))
        return bb.emit(op.add(abc, abc))

    mod = _module((1, 2, 3), body)
    calls = _lowered_calls(mod)
    assert "kernel.concat" not in calls and calls.count("vm.builtin.view_at") == 4
    x = _rand(1, 2, 3)
    _same_result(mod, x)
    _peak_is_predicted(mod, x)


def test_concat_inside_a_branch():
    x = Var("x", struct_info=TensorStructInfo((1, 2, 3), F32))
    cond = Var("cond", struct_info=TensorStructInfo((), "bool"))
    bb = BlockBuilder()
    with bb.function("main", [x, cond]):
        bb.begin_scope()
        a = bb.emit(op.exp(x))
        b = bb.emit(op.nn.relu(x))
        c = bb.emit(op.concat(E.Tuple((a, b)), axis=1))
        d = bb.emit(op.add(c, c))
        then_seq = bb.end_scope(d)
        bb.begin_scope()
        e = bb.emit(op.concat(E.Tuple((x, x)), axis=1))
        else_seq = bb.end_scope(e)
        y = bb.emit(If(cond, then_seq, else_seq))
        bb.emit_func_output(bb.emit(op.multiply(y, y)))
    mod = bb.get()
    assert _lowered_calls(mod).count("vm.builtin.view_at") == 2
    xv = _rand(1, 2, 3)
    for flag in (True, False):
        _same_result(mod, xv, np.array(flag))


def test_graph_executor_runs_the_views():
    """The graph executor's entries for views share the output's storage."""
    mod = _two_branches()
    x = _rand(1, 3, 4, 5)
    gm = hetvm.build(mod, executor="graph")
    assert not [n for n in gm.graph["nodes"] if n.get("name") == "concat"]
    ex = create_graph_executor(gm.graph, gm.lib, [hetvm.cpu(0)])
    ex.run(x0=x)
    want = build_and_run(mod, x, disabled=["ConcatInPlace"])
    np.testing.assert_array_equal(np.asarray(ex.get_output(0).numpy()), want)


def test_view_at_checks_its_bounds():
    src = nd.empty((1, 4, 2), F32)
    builtins = Builtins.__new__(Builtins)
    v = builtins.view("vm.builtin.view_at", src, 8, (1, 2, 2))
    assert v.shape == (1, 2, 2) and v.offset == src.offset + 8
    with pytest.raises(HetvmRuntimeError, match="does not fit"):
        builtins.view("vm.builtin.view_at", src, 20, (1, 2, 2))
    with pytest.raises(HetvmRuntimeError, match="live tensor"):
        builtins.view("vm.builtin.view_at", np.zeros(3), 0, (1,))


def test_exported_executable_with_views_loads_and_runs(tmp_path):
    from hetvm.runtime.artifact import export_executable, load_module

    mod = _two_branches()
    x = _rand(1, 3, 4, 5)
    path = tmp_path / "concat.hetvm"
    export_executable(hetvm.build(mod), path)
    out = hetvm.VirtualMachine(load_module(path), [hetvm.cpu(0)], poison=True)["main"](x)
    np.testing.assert_array_equal(out.numpy(), build_and_run(mod, x, disabled=["ConcatInPlace"]))


def test_views_on_a_simulated_accelerator():
    """The views live in the sim device's memory, which host code cannot read:
    kernels there see them as their own tensors."""
    mod = _two_branches()
    x = _rand(1, 3, 4, 5)
    low = lower(mod, target="sim", target_host="llvm")
    assert "vm.builtin.view_at" in low.script() and '"kernel.concat"' not in low.script()
    exe = hetvm.build(mod, target="sim", target_host="llvm")
    sim = hetvm.device("sim", 0)
    out = hetvm.VirtualMachine(exe, [sim], poison=True)["main"](hetvm.nd.array(x, sim))
    got = out.copyto(hetvm.cpu(0)).numpy()
    np.testing.assert_array_equal(got, build_and_run(mod, x, disabled=["ConcatInPlace"]))


def test_symbolic_shapes_give_symbolic_offsets():
    """A dimension the parameters define may be symbolic: the offsets are then
    expressions the VM evaluates per call."""
    from hetvm.ir import prim as P

    n = P.PrimVar("n")
    x = Var("x", struct_info=TensorStructInfo((n, 3), F32))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        a = bb.emit(op.exp(x))
        b = bb.emit(op.nn.relu(x))
        c = bb.emit(op.concat(E.Tuple((a, b)), axis=0))
        bb.emit_func_output(bb.emit(op.multiply(c, c)))
    mod = bb.get()
    text = lower(mod).script()
    assert text.count("vm.builtin.view_at") == 2 and '"kernel.concat"' not in text
    for rows in (1, 4, 0):
        xv = _rand(rows, 3)
        _same_result(mod, xv)
        c = np.concatenate([np.exp(xv), np.maximum(xv, 0)])
        np.testing.assert_allclose(build_and_run(mod, xv), c * c, rtol=1e-6)
