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
    reason="analysis: check_no_overlap raises 'carved from storage with an unbounded symbolic "
    "size' for a dynamically sized storage holding one tensor at offset 0, which cannot "
    "overlap anything (hetvm/analysis/memory_plan.py)",
)
def test_no_overlap_check_accepts_unbounded_dynamic_storage():
    from hetvm.analysis.memory_plan import check_no_overlap
    from hetvm.pipeline import lower

    src = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), dtype="float32")) -> R.Tensor(("n",), dtype="float32"):
        lv = R.exp(x)
        lv1 = R.tanh(lv)
        return lv1
'''
    check_no_overlap(lower(from_source(src)))


@pytest.mark.xfail(
    strict=True,
    raises=TypeError,
    reason="kernels: erf (and nn.gelu through it) on a 0-d tensor: numpy ufuncs with out= "
    "reject a 0-d temporary ('return arrays must be of ArrayType') (hetvm/kernels/common.py, erf)",
)
def test_erf_of_a_scalar_tensor():
    from hetvm.transform.fold_constant import evaluate_op

    out = evaluate_op("erf", {}, [np.ones((), "float32")], S.TensorStructInfo((), "float32"))
    np.testing.assert_allclose(out, 0.8427008, rtol=1e-6)


@pytest.mark.xfail(
    strict=True,
    reason="transform/backend: a constant argument of a call to a function whose parameter "
    "PlanDevices puts on a sim is copied there by VM codegen (vm.builtin.copy_to, added in "
    "this session so the run is right) outside the memory plan, so the measured peak "
    "exceeds predicted_peak_bytes; PlanDevices should emit the copy (to_vdevice) so it is "
    "planned (hetvm/transform/device_planning/rewrite.py, hetvm/backend/vm_codegen.py)",
)
def test_peak_with_a_constant_argument_on_a_device():
    from .test_regressions import DEVICE_CONSTANT_ARGUMENT

    exe = hetvm.build(from_source(DEVICE_CONSTANT_ARGUMENT))
    vm = hetvm.VirtualMachine(exe)
    x = hetvm.nd.array(np.ones(1, "float32"), vm.exe_devices[exe.functions["main"].param_info[0]["device"] or 0])
    vm["main"](x)
    for index, facts in exe.memory_plan()["main"].items():
        assert vm.memory_report()[str(vm.exe_devices[index])]["peak_bytes"] == facts["predicted_peak_bytes"]


@pytest.mark.xfail(
    strict=True,
    reason="script: hint_on_device(x, R.device('cpu', 0)) gives struct info with vdevice "
    "'cpu:0:global', which prints but does not re-parse when the host is declared as "
    "I.vdevice('llvm', 0) ('vdevice cpu:0:global is not declared') (hetvm/script/)",
)
def test_round_trip_of_a_cpu_hint():
    from hetvm.ir import IRModule, VDevice, structural_equal

    x = ir.Var("x", struct_info=S.TensorStructInfo((2,), "float32"))
    bb = ir.BlockBuilder(IRModule(global_infos={"vdevice": [VDevice("llvm", 0), VDevice("sim", 0)]}))
    with bb.function("main", [x]):
        lv = bb.emit(R.hint_on_device(x, R.device("cpu", 0)))
        bb.emit_func_output(bb.emit(R.exp(lv)))
    mod = bb.get()
    assert structural_equal(from_source(mod.script()), mod)
