"""Minimal programs the generated-program properties found, kept as regressions."""

import numpy as np

import hetvm
from hetvm import ir
from hetvm import op as R
from hetvm.ir import struct_info as S
from hetvm.pipeline import lower
from hetvm.script import from_source

DEVICE_CONSTANT_ARGUMENT = '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global"), I.vdevice("sim", 0, "global")]})
    @R.function
    def helper(p: R.Tensor((1,), dtype="float32")) -> R.Tensor((1,), dtype="float32"):
        lv = R.hint_on_device(p, R.device("sim", 0))
        lv1 = R.exp(lv)
        return lv1

    @R.function
    def main(x: R.Tensor((1,), dtype="float32")) -> R.Tensor((1,), dtype="float32"):
        cls = Module
        lv = cls.helper(R.const([0.625], "float32"))
        return lv
'''


def test_constant_planned_on_a_device_reaches_a_function_there():
    """PlanDevices places a constant call argument on sim:0 (the callee's
    parameter device); VM codegen passed it as a host constant."""
    for poison in (False, True):  # the pooled copy on sim:0 is never released or poisoned
        vm = hetvm.VirtualMachine(hetvm.build(from_source(DEVICE_CONSTANT_ARGUMENT)), poison=poison)
        for _ in range(2):
            out = vm["main"](np.ones(1, "float32")).copyto(hetvm.cpu(0)).numpy()
            np.testing.assert_allclose(out, np.exp(np.float32(0.625)), rtol=1e-6)


def test_split_sections_not_dividing_the_axis():
    x = ir.Var("x", struct_info=S.TensorStructInfo((5,), "float32"))
    bb = ir.BlockBuilder()
    with bb.function("main", [x]):
        parts = bb.emit(R.split(x, 2, axis=0))
        bb.emit_func_output(parts)
    vm = hetvm.VirtualMachine(hetvm.build(bb.get()))
    a, b = vm["main"](np.arange(5, dtype="float32"))
    np.testing.assert_array_equal(a.numpy(), [0, 1, 2])
    np.testing.assert_array_equal(b.numpy(), [3, 4])


def test_hint_on_device_cpu_names_the_declared_llvm_vdevice():
    src = '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global"), I.vdevice("sim", 0, "global")]})
    @R.function
    def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        lv = R.hint_on_device(x, R.device("cpu", 0))
        lv1 = R.exp(lv)
        return lv1
'''
    from hetvm.analysis import check_well_formed

    check_well_formed(from_source(src))


def test_if_branch_body_that_is_a_call():
    c = ir.Var("c", struct_info=S.TensorStructInfo((), "bool"))
    bb = ir.BlockBuilder()
    with bb.function("main", [c]):
        bb.begin_scope()
        tb = bb.end_scope(R.logical_not(c))
        bb.begin_scope()
        fb = bb.end_scope(R.logical_not(c))
        bb.emit_func_output(bb.emit(ir.If(c, tb, fb)))
    vm = hetvm.VirtualMachine(hetvm.build(bb.get()))
    assert not bool(vm["main"](np.array(True)).numpy())


def test_hint_on_device_of_a_folded_constant():
    src = '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global"), I.vdevice("sim", 0, "global")]})
    @R.function
    def main(x: R.Tensor((), dtype="float32")) -> R.Tensor((), dtype="float32"):
        lv: R.Tensor((), dtype="float32") = R.zeros(R.shape([]), dtype="float32")
        lv1 = R.hint_on_device(lv, R.device("sim", 0))
        return lv1
'''
    hetvm.build(from_source(src))


def test_erf_and_gelu_of_a_scalar_tensor():
    """kernels: erf on a 0-d tensor used ufuncs with out= on NumPy scalars
    ('return arrays must be of ArrayType'), and nn.gelu through it."""
    from hetvm.transform.fold_constant import evaluate_op

    one = np.ones((), "float32")
    out = evaluate_op("erf", {}, [one], S.TensorStructInfo((), "float32"))
    np.testing.assert_allclose(out, 0.8427008, rtol=1e-6)
    out = evaluate_op("nn.gelu", {}, [one], S.TensorStructInfo((), "float32"))
    np.testing.assert_allclose(out, 0.8413447, rtol=1e-6)


def test_peak_with_a_constant_argument_on_a_device():
    """A constant argument of a call whose parameter PlanDevices puts on a sim was
    copied there by VM codegen outside the memory plan; PlanDevices now emits the
    copy (to_vdevice), so the measured peak equals the prediction."""
    exe = hetvm.build(from_source(DEVICE_CONSTANT_ARGUMENT))
    vm = hetvm.VirtualMachine(exe)
    x = hetvm.nd.array(np.ones(1, "float32"), vm.exe_devices[exe.functions["main"].param_info[0]["device"] or 0])
    vm["main"](x)
    for index, facts in exe.memory_plan()["main"].items():
        assert vm.memory_report()[str(vm.exe_devices[index])]["peak_bytes"] == facts["predicted_peak_bytes"]


def test_round_trip_of_a_cpu_hint():
    """hint_on_device(x, R.device("cpu", 0)) in a module declaring the host as
    llvm gave struct info 'cpu:0:global', which did not re-parse; the builder
    now names the declared vdevice, as the parser does."""
    from hetvm.ir import IRModule, VDevice, structural_equal

    x = ir.Var("x", struct_info=S.TensorStructInfo((2,), "float32"))
    bb = ir.BlockBuilder(IRModule(global_infos={"vdevice": [VDevice("llvm", 0), VDevice("sim", 0)]}))
    with bb.function("main", [x]):
        lv = bb.emit(R.hint_on_device(x, R.device("cpu", 0)))
        bb.emit_func_output(bb.emit(R.exp(lv)))
    mod = bb.get()
    assert structural_equal(from_source(mod.script()), mod)


ALIAS_OF_A_COPIED_CONSTANT = '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global"), I.vdevice("sim", 0, "global"), I.vdevice("sim", 1, "global")]})
    @R.function
    def main(x: R.Tensor((1, 2), "float32")) -> R.Tensor((1, 2), "float32", vdevice="sim:1:global"):
        lv: R.Tensor((1, 2), "float32") = R.full(R.shape([1, 2]), R.const(-2.0, "float32"), dtype="float32")
        lv1: R.Tensor((1, 2), "float32", vdevice="sim:1:global") = R.to_vdevice(lv, dst_vdevice="sim:1:global")
        gv: R.Tensor((1, 2), "float32", vdevice="sim:1:global") = lv1
        lv2: R.Tensor((1, 2), "float32", vdevice="sim:1:global") = R.negative(gv)
        return lv2
'''


def test_alias_of_a_copied_constant_is_read_on_its_device():
    """Found by the long run: a name for `to_vdevice(constant)` (gv = lv1) was
    placed on the default device, so PlanDevices' own check refused the plan
    ('negative' on sim:1 reads an input on cpu:0 without a copy)."""
    exe = hetvm.build(from_source(ALIAS_OF_A_COPIED_CONSTANT))
    vm = hetvm.VirtualMachine(exe, poison=True)
    out = vm["main"](np.ones((1, 2), "float32")).copyto(hetvm.cpu(0)).numpy()
    np.testing.assert_array_equal(out, np.full((1, 2), 2.0, "float32"))


def test_renamed_then_retyped_definition_is_found_by_its_uses():
    """ToNonDataflow renames a DataflowVar and ExprMutator re-types it again when its
    value's struct info changed; uses must follow both renamings (the codegen said
    "variable 'lv2' used before definition"). Found by the long run."""
    src = '''
n = TypeVar("n")
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global"), I.vdevice("sim", 0, "global")]})
    @R.function
    def main(x0: R.Tensor((2, n, 4), dtype="bool", vdevice="sim:0:global"), x1: R.Tensor((3, 1, 1), dtype="int64")):
        R.func_attr({"tir_var_upper_bound": {"n": 3}})
        d0 = T.int64()
        with R.dataflow():
            lv: R.Tensor((d0, 1, 1), dtype="int64") = R.match_cast(x1, R.Tensor((d0, 1, 1), dtype="int64"))
            lv1: R.Tensor((d0, 1, 1), dtype="int64", vdevice="sim:0:global") = R.hint_on_device(lv, R.device("sim", 0))
            lv2 = x0, lv1
            gv = lv1
            gv1 = lv2
            R.output(gv, gv1)
        return (gv, (gv1,))
'''
    from hetvm.script import from_source

    exe = hetvm.build(from_source(src))
    vm = hetvm.VirtualMachine(exe, [hetvm.cpu(0), hetvm.device("sim", 0)])
    x0 = np.ones((2, 3, 4), dtype=bool)
    x1 = np.arange(3, dtype="int64").reshape(3, 1, 1)
    gv, ((a, b),) = vm["main"](x0, x1)
    np.testing.assert_array_equal(gv.copyto(hetvm.cpu(0)).numpy(), x1)
    np.testing.assert_array_equal(b.copyto(hetvm.cpu(0)).numpy(), x1)
    np.testing.assert_array_equal(a.copyto(hetvm.cpu(0)).numpy(), x0)


COPY_OF_A_MATCH_CAST_ALIAS = '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global"), I.vdevice("sim", 0, "global")]})
    @R.function
    def main(x0: R.Tensor(("n", "n"), dtype="float32", vdevice="sim:0:global"),
             x1: R.Tensor((), dtype="bool")) -> R.Tensor(dtype="float32", ndim=2, vdevice="sim:0:global"):
        n = T.int64()
        R.func_attr({"tir_var_upper_bound": {"n": 3}})
        d0 = T.int64()
        d1 = T.int64()
        lv1 = R.match_cast(x0, R.Tensor((d0, d1), dtype="float32"))
        lv2 = R.tanh(lv1)
        if x1:
            lv9 = lv1
        else:
            lv8 = R.negative(lv1)
            lv9 = lv8
        lv10 = R.hint_on_device(lv9, R.device("sim", 0))
        return R.add(lv10, R.hint_on_device(lv2, R.device("sim", 0)))
'''


def test_copy_of_a_match_cast_alias_keeps_the_cast_shape():
    """Found by the long run: with `tanh` and `negative` missing on sim:0, PlanDevices
    copied the match_cast's source `x0` (shape (n, n)) to the CPU and read the copy
    where the alias `lv1` (shape (d0, d1)) had been read; the If's branches then
    joined (n, n) with (d0, d1), lost the shape, and CallTIRRewrite failed an
    assertion allocating the copy back to sim:0. The copy is now cast to the alias's
    shape once, outside the branch."""
    options = {"missing_kernels": {"sim:0": ["tanh", "negative"]}}
    mod = from_source(COPY_OF_A_MATCH_CAST_ALIAS)
    lowered = lower(mod, plan_devices_options=options)
    text = lowered.script()
    assert text.count("R.match_cast(x0_cpu0") == 1 and "kernel.negative" in text
    exe = hetvm.build(mod, plan_devices_options=options)
    devices = [hetvm.cpu(0), hetvm.device("sim", 0, missing_kernels=["tanh", "negative"])]
    x = np.arange(9, dtype="float32").reshape(3, 3) / 10
    for flag, branch in ((True, x), (False, -x)):
        out = hetvm.VirtualMachine(exe, devices, poison=True)["main"](x, np.array(flag))
        np.testing.assert_allclose(out.copyto(hetvm.cpu(0)).numpy(), branch + np.tanh(x), rtol=1e-6)


MATCH_CAST_OF_A_CONSTANT_RETURNED = '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global"), I.vdevice("sim", 0, "global")]})
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor(dtype="float32", ndim=2, vdevice="sim:0:global"):
        d0 = T.int64()
        d1 = T.int64()
        lv: R.Tensor((2, 3), dtype="float32") = R.zeros(R.shape([2, 3]), dtype="float32")
        lv1: R.Tensor((d0, d1), dtype="float32") = R.match_cast(lv, R.Tensor((d0, d1), dtype="float32"))
        lv2: R.Tensor((d0, d1), dtype="float32", vdevice="sim:0:global") = R.hint_on_device(lv1, R.device("sim", 0))
        return lv2
'''


def test_match_cast_of_a_constant_is_returned_on_its_device():
    """Found by the long run (`zeros` missing on the sims): FoldConstant turns
    `lv = zeros(...)` into a constant; PlanDevices modelled `match_cast(lv)` as the
    constant itself (free to read on any device), but the rewriter binds the
    match_cast once, on the CPU, and its readers read that binding, so the hint's
    result was returned from the CPU where sim:0 was declared (PlanDevices' check:
    "the function result is on [cpu:0] but is read on [sim:0] without a copy").
    A match_cast of a constant is now a value of its own, placed by the cut."""
    options = {"missing_kernels": {"sim:0": ["zeros"]}}
    exe = hetvm.build(from_source(MATCH_CAST_OF_A_CONSTANT_RETURNED), plan_devices_options=options)
    devices = [hetvm.cpu(0), hetvm.device("sim", 0, missing_kernels=["zeros"])]
    out = hetvm.VirtualMachine(exe, devices, poison=True)["main"](np.ones((2, 3), "float32"))
    assert out.device.kind == "sim"
    np.testing.assert_array_equal(out.copyto(hetvm.cpu(0)).numpy(), np.zeros((2, 3), "float32"))


MATCH_CAST_OF_A_CONSTANT_READ_BY_AN_OP = '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global"), I.vdevice("sim", 0, "global"), I.vdevice("sim", 1, "global")]})
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32", vdevice="sim:1:global")) -> R.Tensor((2, 3), dtype="float32", vdevice="sim:1:global"):
        d0 = T.int64()
        d1 = T.int64()
        lv: R.Tensor((2, 3), dtype="float32") = R.zeros(R.shape([2, 3]), dtype="float32")
        lv1: R.Tensor((d0, d1), dtype="float32") = R.match_cast(lv, R.Tensor((d0, d1), dtype="float32"))
        with R.dataflow():
            lv2: R.Tensor((d0, d1), dtype="float32", vdevice="sim:1:global") = R.hint_on_device(lv1, R.device("sim", 1))
            lv3: R.Tensor((d0, d1), dtype="float32", vdevice="sim:1:global") = R.negative(lv2)
            gv: R.Tensor((2, 3), dtype="float32", vdevice="sim:1:global") = R.add(x, lv3)
            R.output(gv)
        return gv
'''


def test_match_cast_of_a_constant_read_by_an_op_on_a_device():
    """Found by the long run, the same cause as above: `negative` on sim:1 read the
    match_cast of a folded constant through a hint, and the match_cast was bound on
    the CPU ("'negative' computing 'lv3' runs on sim:1 but reads an input on cpu:0
    without a copy")."""
    missing = {"sim:0": ["zeros", "negative"], "sim:1": ["zeros"]}
    exe = hetvm.build(from_source(MATCH_CAST_OF_A_CONSTANT_READ_BY_AN_OP), plan_devices_options={"missing_kernels": missing})
    devices = [hetvm.cpu(0)] + [hetvm.device("sim", i, missing_kernels=missing[f"sim:{i}"]) for i in (0, 1)]
    vm = hetvm.VirtualMachine(exe, devices, poison=True)
    x = np.arange(6, dtype="float32").reshape(2, 3)
    out = vm["main"](hetvm.nd.array(x, devices[2]))
    np.testing.assert_array_equal(out.copyto(hetvm.cpu(0)).numpy(), x)


TUPLE_HOLDING_A_CONSTANT = '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global"), I.vdevice("sim", 0, "global")]})
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32", vdevice="sim:0:global")) -> R.Tensor((2, 3), dtype="float32", vdevice="sim:0:global"):
        lv: R.Tensor((2, 3), dtype="float32") = R.zeros(R.shape([2, 3]), dtype="float32")
        t = (lv, x)
        lv1 = R.add(t[0], t[1])
        return lv1
'''


def test_tuple_holding_a_constant_is_read_on_its_device():
    """The same cause through a tuple: `(lv, x)` holds the folded constant `lv` as a
    field bound once, on the CPU; PlanDevices modelled `t[0]` as the constant (free
    anywhere) and `add` on sim:0 read it from the CPU without a copy."""
    options = {"missing_kernels": {"sim:0": ["zeros"]}}
    exe = hetvm.build(from_source(TUPLE_HOLDING_A_CONSTANT), plan_devices_options=options)
    devices = [hetvm.cpu(0), hetvm.device("sim", 0, missing_kernels=["zeros"])]
    x = np.arange(6, dtype="float32").reshape(2, 3)
    out = hetvm.VirtualMachine(exe, devices, poison=True)["main"](hetvm.nd.array(x, devices[1]))
    np.testing.assert_array_equal(out.copyto(hetvm.cpu(0)).numpy(), x)


HINT_OF_A_MATCH_CAST_ALIAS_IN_A_BRANCH = '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global"), I.vdevice("sim", 0, "global")]})
    @R.function
    def main(x0: R.Tensor(("n", "n"), dtype="float32", vdevice="sim:0:global"),
             x1: R.Tensor((), dtype="bool")) -> R.Tensor(dtype="float32", ndim=2, vdevice="sim:0:global"):
        n = T.int64()
        R.func_attr({"tir_var_upper_bound": {"n": 3}})
        d0 = T.int64()
        d1 = T.int64()
        lv1 = R.match_cast(x0, R.Tensor((d0, d1), dtype="float32"))
        if x1:
            lv9 = R.hint_on_device(lv1, R.device("sim", 0))
        else:
            lv8 = R.negative(lv1)
            lv9 = lv8
        return R.add(lv9, lv1)
'''


HINTS_OF_A_MATCH_CAST_ALIAS_THERE_AND_BACK = '''
n = TypeVar("n")
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global"), I.vdevice("sim", 0, "global")]})
    @R.function
    def main(x0: R.Tensor((n, n, n), dtype="float32"), x1: R.Tensor((), dtype="bool")) -> R.Tensor(dtype="float32", ndim=3):
        R.func_attr({"tir_var_upper_bound": {"n": 2}})
        d0 = T.int64()
        d1 = T.int64()
        d2 = T.int64()
        lv: R.Tensor((d0, d1, d2), dtype="float32") = R.match_cast(x0, R.Tensor((d0, d1, d2), dtype="float32"))
        if x1:
            lv3 = R.hint_on_device(lv, R.device("cpu", 0))
            lv4 = R.hint_on_device(lv3, R.device("sim", 0))
            lv5 = R.negative(lv4)
            lv6 = lv5
        else:
            lv6 = lv
        lv7 = R.tanh(lv6)
        return lv7
'''


def test_hint_of_a_match_cast_alias_keeps_the_cast_shape():
    """A hint whose argument is already on the device read the match_cast's source
    `x0` (shape (n, n)) in place of the alias `lv1` (shape (d0, d1)); the If's
    branches then joined (n, n) with (d0, d1), lost the shape, and LegalizeOps could
    not allocate `add`'s result. A hint now reads its argument itself when no copy is
    needed, and a copy cast to the argument's shape when one is (as other reads of
    a match_cast alias do). Such a cast is known by the block it is bound in, so a
    later read of it elsewhere is cast again outside the branch (the long run found
    the second program failing the same way when the cast was bound in the branch)."""
    exe = hetvm.build(from_source(HINT_OF_A_MATCH_CAST_ALIAS_IN_A_BRANCH))
    x = np.arange(9, dtype="float32").reshape(3, 3)
    for flag, want in ((True, 2 * x), (False, 0 * x)):
        vm = hetvm.VirtualMachine(exe, [hetvm.cpu(0), hetvm.device("sim", 0)], poison=True)
        out = vm["main"](hetvm.nd.array(x, hetvm.device("sim", 0)), np.array(flag))
        np.testing.assert_array_equal(out.copyto(hetvm.cpu(0)).numpy(), want)
    # a hint's result that is itself a cast (of the copy to sim:0), read back on the
    # CPU by `negative`, is cast once more outside the branch, not inside it
    exe = hetvm.build(from_source(HINTS_OF_A_MATCH_CAST_ALIAS_THERE_AND_BACK))
    x = np.linspace(-1, 1, 8, dtype="float32").reshape(2, 2, 2)
    for flag, want in ((True, np.tanh(-x)), (False, np.tanh(x))):
        vm = hetvm.VirtualMachine(exe, [hetvm.cpu(0), hetvm.device("sim", 0)], poison=True)
        out = vm["main"](x, np.array(flag))
        np.testing.assert_allclose(out.copyto(hetvm.cpu(0)).numpy(), want, rtol=1e-6)


CONSTANT_HINTED_AND_READ_TWICE = '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global"), I.vdevice("sim", 0, "global")]})
    @R.function
    def main(x: R.Tensor((1, 1), dtype="float32")) -> R.Tuple(R.Tensor((1, 1), dtype="float32", vdevice="sim:0:global"), R.Tuple(R.Tensor((1, 1), dtype="float32", vdevice="sim:0:global"))):
        with R.dataflow():
            lv: R.Tensor((1, 1), dtype="float32") = R.const([[0.5]], "float32")
            lv1: R.Tensor((1, 1), dtype="float32", vdevice="sim:0:global") = R.hint_on_device(lv, R.device("sim", 0))
            lv2: R.Tuple(R.Tensor((1, 1), dtype="float32", vdevice="sim:0:global")) = (lv1,)
            gv: R.Tensor((1, 1), dtype="float32", vdevice="sim:0:global") = lv1
            gv1: R.Tuple(R.Tensor((1, 1), dtype="float32", vdevice="sim:0:global")) = lv2
            R.output(gv, gv1)
        return (gv, gv1)
'''


def test_constant_read_twice_on_a_device_is_copied_once():
    """Found by the long run: a constant hinted onto sim:0 and read outside any op
    twice (a tuple field, the result) got two copies to sim:0, which the device
    plan's checker refuses (one copy per value and destination). Copies of a
    constant are now shared within their scope."""
    from hetvm.pipeline import target_vdevice
    from hetvm.transform import PlanDevices

    mod = from_source(CONSTANT_HINTED_AND_READ_TWICE)
    host = target_vdevice("llvm")
    planned = PlanDevices(default_vdevice=host, host_vdevice=host)(mod)  # checks its own plan
    copies = [b for blk in planned["main"].body.blocks for b in blk.bindings
              if isinstance(b.value, ir.Call) and getattr(b.value.op, "name", "") == "to_vdevice"]  # fmt: skip
    assert len(copies) == 1
    vm = hetvm.VirtualMachine(hetvm.build(mod), [hetvm.cpu(0), hetvm.device("sim", 0)])
    a, (b,) = vm["main"](np.zeros((1, 1), "float32"))
    for t in (a, b):
        np.testing.assert_array_equal(t.copyto(hetvm.cpu(0)).numpy(), [[0.5]])


MATCH_CAST_DEFINES_A_LATER_SHAPE = '''
@I.ir_module
class Module:
    @R.function
    def main(x0: R.Tensor((1,), dtype="float32")) -> R.Tensor(dtype="float32", ndim=1):
        d0 = T.int64()
        lv: R.Tensor((d0,), dtype="float32") = R.match_cast(x0, R.Tensor((d0,), dtype="float32"))
        lv1: R.Tensor((d0,), dtype="float32") = R.full(R.shape([d0]), R.const(2.0, "float32"), dtype="float32")
        return lv1
'''


def test_dead_code_elimination_keeps_a_match_cast_that_defines_symbols():
    """Found by the long run: the match_cast's result is unread, but it defines
    `d0`, which a later shape uses; DeadCodeElimination dropped it and left `d0`
    without a value ("symbolic variable 'd0' has no value")."""
    from hetvm.testing.interpreter import Interpreter
    from hetvm.transform import DeadCodeElimination

    mod = DeadCodeElimination()(from_source(MATCH_CAST_DEFINES_A_LATER_SHAPE))
    assert any(isinstance(b, ir.MatchCast) for blk in mod["main"].body.blocks for b in blk.bindings)
    out = Interpreter(mod).run("main", np.ones(1, "float32"))
    np.testing.assert_array_equal(np.asarray(out), [2.0])
    vm = hetvm.VirtualMachine(hetvm.build(from_source(MATCH_CAST_DEFINES_A_LATER_SHAPE)))
    np.testing.assert_array_equal(vm["main"](np.ones(1, "float32")).numpy(), [2.0])


CONSTANTS_IN_A_TUPLE_ON_A_DEVICE = '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global"), I.vdevice("sim", 0, "global")]})
    @R.function
    def main(x0: R.Tensor((1,), dtype="float16")) -> R.Tensor(dtype="float32", ndim=1):
        d0 = T.int64()
        lv: R.Tensor((1,), dtype="float32") = R.zeros(R.shape([1]), dtype="float32")
        lv1: R.Tensor((3,), dtype="float32") = R.concat((lv, lv, lv), axis=0)
        lv2: R.Tensor((d0,), dtype="float32") = R.match_cast(lv1, R.Tensor((d0,), dtype="float32"))
        lv4: R.Tensor((d0,), dtype="float32", vdevice="sim:0:global") = R.hint_on_device(lv2, R.device("sim", 0))
        return lv4
'''


def test_constants_planned_on_a_device_are_pooled_and_the_prediction_holds():
    """Found by the long run: the concat's three constant inputs are fields of a
    tuple on sim:0. The VM copied each to sim:0 on every call, which the peak
    simulation did not count (predicted 12 bytes, measured 24); now the VM keeps
    one pooled copy per constant and device, made once, and a call allocates
    only its output (12 bytes, predicted and measured)."""
    from hetvm.analysis.memory_plan import memory_plan_report

    mod = from_source(CONSTANTS_IN_A_TUPLE_ON_A_DEVICE)
    predicted = memory_plan_report(lower(mod))["main"][1]["predicted_peak_bytes"]
    vm = hetvm.VirtualMachine(hetvm.build(mod), [hetvm.cpu(0), hetvm.device("sim", 0)])
    for _ in range(2):
        out = vm["main"](np.array([1.5], "float16"))
        np.testing.assert_array_equal(out.copyto(hetvm.cpu(0)).numpy(), np.zeros(3, "float32"))
        report = vm.memory_report()["sim:0"]
        assert report["peak_bytes"] == predicted == 12  # the output only: no copies
        del out  # (else the next call's output would be live beside it)
