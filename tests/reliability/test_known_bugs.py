"""Minimal reproducers of bugs the generated-program properties found in other layers.

Each is a strict xfail naming the layer and file; when the bug is fixed the test
passes, the xfail turns into a failure, and the marker should be removed (and
the generator's workaround, referenced from hetvm/testing, dropped).
"""

import numpy as np
import pytest

import hetvm
from hetvm import ir
from hetvm import op as R
from hetvm.ir import struct_info as S
from hetvm.script import from_source


@pytest.mark.xfail(
    strict=True,
    reason="kernels: split with an int section count that does not divide the axis uses "
    "np.split (equal division only) instead of ceil-sized pieces (hetvm/kernels/manipulate.py)",
)
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


@pytest.mark.xfail(
    strict=True,
    reason="analysis: well-formedness rejects R.device('cpu', 0) in hint_on_device when the "
    "host is declared as I.vdevice('llvm', 0) ('cpu:0 is not declared (declared: cpu:0, ...)'); "
    "the planner and codegen match by kind (hetvm/analysis/well_formed.py)",
)
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


@pytest.mark.xfail(
    strict=True,
    reason="transform: PlanDevices' check fails ('the block result has a tensor without a "
    "vdevice') on an If whose branch body is a call, not a variable; check_well_formed "
    "accepts it (hetvm/transform/device_planning/, or Normalize should bind the body)",
)
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


@pytest.mark.xfail(
    strict=True,
    raises=KeyError,
    reason="transform: PlanDevices raises KeyError: -1 on hint_on_device of a value "
    "FoldConstant turned into a constant (hetvm/transform/device_planning/rewrite.py, ref)",
)
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


@pytest.mark.xfail(
    strict=True,
    reason="transform: KillAfterLastUse kills a call's argument after the call although the "
    "callee returns that argument (the result aliases it; TVM's refcounting hides this, "
    "hetvm's kills free at once) (hetvm/transform/kill_after_last_use.py)",
)
def test_function_returning_its_parameter():
    src = '''
@I.ir_module
class Module:
    @R.function
    def identity(p: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        return p

    @R.function
    def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        cls = Module
        lv = R.exp(x)
        lv1 = cls.identity(lv)
        return lv1
'''
    vm = hetvm.VirtualMachine(hetvm.build(from_source(src)))
    x = np.array([0.0, 1.0], "float32")
    np.testing.assert_allclose(vm["main"](x).numpy(), np.exp(x), rtol=1e-6)
