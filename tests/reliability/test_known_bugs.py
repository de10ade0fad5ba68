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
