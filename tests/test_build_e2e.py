"""End to end: hetvm.build + VirtualMachine on CPU give NumPy's results."""

import numpy as np
import pytest

import hetvm
import hetvm.op as op
from hetvm.ir import (
    BlockBuilder,
    Call,
    If,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    Var,
    prim,
)

F32 = "float32"


def _run(mod, *args, **vm_kwargs):
    exe = hetvm.build(mod)
    vm = hetvm.VirtualMachine(exe, **vm_kwargs)
    return vm, vm["main"](*args)


def test_mlp_layer_matches_numpy():
    x = Var("x", struct_info=TensorStructInfo((8, 16), F32))
    w = Var("w", struct_info=TensorStructInfo((16, 4), F32))
    b = Var("b", struct_info=TensorStructInfo((4,), F32))
    bb = BlockBuilder()
    with bb.function("main", [x, w, b]):
        with bb.dataflow():
            h = bb.emit(op.matmul(x, w))
            h = bb.emit(op.add(h, b))
            out = bb.emit_output(op.nn.relu(h))
        bb.emit_func_output(out)
    rng = np.random.default_rng(0)
    xv, wv, bv = (rng.standard_normal(s).astype(F32) for s in ((8, 16), (16, 4), (4,)))
    for poison in (False, True):
        _, out = _run(bb.get(), xv, wv, bv, poison=poison)
        np.testing.assert_allclose(out.numpy(), np.maximum(xv @ wv + bv, 0), rtol=1e-5)


def test_tuple_outputs_and_split():
    x = Var("x", struct_info=TensorStructInfo((6, 4), F32))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            parts = bb.emit(op.split(x, 3, axis=0))
            a = bb.emit(TupleGetItem(parts, 0))
            c = bb.emit(TupleGetItem(parts, 2))
            s = bb.emit(op.add(a, c))
            e = bb.emit(op.exp(c))
            res = bb.emit_output(Tuple((s, e)))
        bb.emit_func_output(res)
    xv = np.arange(24, dtype=F32).reshape(6, 4) / 10
    vm, (s, e) = _run(bb.get(), xv)
    np.testing.assert_allclose(s.numpy(), xv[0:2] + xv[4:6])
    np.testing.assert_allclose(e.numpy(), np.exp(xv[4:6]), rtol=1e-6)


def test_if_selects_branch_and_kills_outer_values():
    x = Var("x", struct_info=TensorStructInfo((4,), F32))
    cond = Var("cond", struct_info=TensorStructInfo((), "bool"))
    bb = BlockBuilder()
    with bb.function("main", [x, cond]):
        a = bb.emit(op.exp(x))
        bb.begin_scope()
        t = bb.emit(op.add(a, a))
        then_seq = bb.end_scope(t)
        bb.begin_scope()
        e = bb.emit(op.multiply(x, x))
        else_seq = bb.end_scope(e)
        y = bb.emit(If(cond, then_seq, else_seq))
        out = bb.emit(op.add(y, x))
        bb.emit_func_output(out)
    mod = bb.get()
    xv = np.array([0.5, 1.0, 1.5, 2.0], F32)
    for flag in (True, False):
        vm, out = _run(mod, xv, np.array(flag))
        expected = (2 * np.exp(xv) if flag else xv * xv) + xv
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)


def test_functions_call_each_other():
    bb = BlockBuilder()
    a = Var("a", struct_info=TensorStructInfo((3,), F32))
    with bb.function("double", [a], private=True):
        with bb.dataflow():
            r = bb.emit_output(op.add(a, a))
        bb.emit_func_output(r)
    double = bb.module.get_global_var("double")
    x = Var("x", struct_info=TensorStructInfo((3,), F32))
    with bb.function("main", [x]):
        y = bb.emit(Call(double, (x,)))
        z = bb.emit(Call(double, (y,)))
        bb.emit_func_output(z)
    xv = np.array([1, 2, 3], F32)
    _, out = _run(bb.get(), xv)
    np.testing.assert_allclose(out.numpy(), 4 * xv)


def test_symbolic_shape_with_bound_checks_at_run_time():
    n = prim.PrimVar("n")
    x = Var("x", struct_info=TensorStructInfo((n, 4), F32))
    bb = BlockBuilder()
    with bb.function("main", [x], attrs={"tir_var_upper_bound": {"n": 16}}):
        with bb.dataflow():
            y = bb.emit(op.exp(x))
            out = bb.emit_output(op.add(y, x))
        bb.emit_func_output(out)
    mod = bb.get()
    for rows in (1, 7, 16):
        xv = np.ones((rows, 4), F32)
        _, out = _run(mod, xv)
        np.testing.assert_allclose(out.numpy(), np.e + 1, rtol=1e-6)
    with pytest.raises(hetvm.HetvmError, match="n"):
        _run(mod, np.ones((17, 4), F32))


def test_wrong_input_shape_names_parameter():
    x = Var("x", struct_info=TensorStructInfo((2, 3), F32))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        out = bb.emit(op.exp(x))
        bb.emit_func_output(out)
    exe = hetvm.build(bb.get())
    vm = hetvm.VirtualMachine(exe)
    with pytest.raises(hetvm.HetvmError, match="x"):
        vm["main"](np.ones((3, 3), F32))


def test_views_and_tuple_fields_survive_kills_with_poison():
    x = Var("x", struct_info=TensorStructInfo((4, 8), F32))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(op.exp(x))
            parts = bb.emit(op.split(a, 2, axis=1))
            first = bb.emit(TupleGetItem(parts, 0))
            r = bb.emit(op.reshape(first, (8, 2)))
            out = bb.emit_output(op.multiply(r, r))
        bb.emit_func_output(out)
    xv = np.linspace(-1, 1, 32, dtype=F32).reshape(4, 8)
    _, out = _run(bb.get(), xv, poison=True)
    expected = np.exp(xv)[:, :4].reshape(8, 2) ** 2
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)


def test_unread_values_are_neither_computed_nor_copied():
    """The build drops dead code before device planning: an unread value that
    would need a copy to sim:0 gets no copy, no kernel and no memory."""
    from hetvm.pipeline import lower
    from hetvm.script import from_source

    mod = from_source('''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global"), I.vdevice("sim", 0, "global")]})
    @R.function
    def main(x: R.Tensor((8,), dtype="float32")) -> R.Tensor((8,), dtype="float32"):
        unread = R.hint_on_device(R.exp(x), R.device("sim", 0))
        unread2 = R.tanh(unread)
        y = R.negative(x)
        return y
''')
    text = lower(mod).script()
    assert "kernel.exp" not in text and "kernel.tanh" not in text and "copy_to" not in text
    exe = hetvm.build(mod)
    assert exe.metadata["device_copies"] == []
    out = hetvm.VirtualMachine(exe)["main"](np.arange(8, dtype="float32"))
    np.testing.assert_array_equal(out.numpy(), -np.arange(8, dtype="float32"))


def test_broadcast_of_two_unrelated_symbolic_dims_runs_for_every_size():
    """`(n, 2) + (m, 2)`: the result took n, so n=1, m=3 failed in the kernel
    (found by the TVM interop exploration); it is now max/min of the two."""
    from hetvm.script import from_source

    mod = from_source('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 2), "float32"), y: R.Tensor(("m", 2), "float32")):
        lv = R.add(x, y)
        lv1 = R.exp(lv)
        return lv1
''')
    vm = hetvm.VirtualMachine(hetvm.build(mod), poison=True)
    for n, m in ((1, 3), (3, 1), (3, 3), (0, 1), (1, 0)):
        x, y = np.full((n, 2), 0.5, "float32"), np.full((m, 2), 0.25, "float32")
        np.testing.assert_allclose(vm["main"](x, y).numpy(), np.exp(x + y), rtol=1e-6)
    with pytest.raises(hetvm.HetvmError, match="could not be broadcast"):
        vm["main"](np.ones((2, 2), "float32"), np.ones((3, 2), "float32"))


def test_function_held_in_a_variable_is_called_by_name():
    from hetvm.script import from_source

    mod = from_source(
        """
@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        y = R.exp(x)
        return y

    @R.function
    def main(x: R.Tensor((2,), "float32")):
        cls = Module
        g = cls.f
        y = g(x)
        return y
"""
    )
    x = np.array([0.0, 1.0], "float32")
    out = hetvm.VirtualMachine(hetvm.build(mod), [hetvm.cpu(0)])["main"](x)
    np.testing.assert_allclose(out.numpy(), np.exp(x), rtol=1e-6)


def test_module_of_private_functions_only_is_refused():
    from hetvm.errors import HetvmError
    from hetvm.script import from_source

    mod = from_source(
        """
@I.ir_module
class Module:
    @R.function(private=True)
    def main(x: R.Tensor((2,), "float32")):
        return x
"""
    )
    with pytest.raises(HetvmError, match=r"every function of the module is private \(main\)"):
        hetvm.build(mod)


@pytest.mark.parametrize("annotation", ["R.Any", "R.Object", "R.Tuple(R.Any, R.Tensor((2,), 'float32'))"])
def test_result_annotated_any_builds_and_runs(annotation):
    from hetvm.script import from_source

    body = "(y, y)" if annotation.startswith("R.Tuple") else "y"
    mod = from_source(
        f"""
@R.function
def main(x: R.Tensor((2,), "float32")) -> {annotation}:
    y = R.exp(x)
    z = {body}
    return z
"""
    )
    x = np.array([0.0, 1.0], "float32")
    out = hetvm.VirtualMachine(hetvm.build(mod), [hetvm.cpu(0)])["main"](x)
    first = out[0] if isinstance(out, (tuple, list)) else out
    np.testing.assert_allclose(first.numpy(), np.exp(x), rtol=1e-6)
