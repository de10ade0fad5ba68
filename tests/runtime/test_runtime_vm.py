"""Hand-written executables through the VM: devices, copies, kills, memory, errors."""

import numpy as np
import pytest

import hetvm
from hetvm.errors import DeviceMismatchError, HetvmRuntimeError, OutOfMemoryError
from hetvm.runtime.bytecode import Call, Executable, Goto, If, KernelCall, Kill, Ret, VMFunction
from hetvm.runtime.device import device
from hetvm.runtime.registry import register_func, remove_global_func

B = "vm.builtin."
F32 = "float32"


def dev(kind, index):
    return {"kind": kind, "index": index, "memory_scope": "global"}


def tensor(shape, device=0, dtype=F32):
    return {"kind": "tensor", "shape": shape, "dtype": dtype, "device": device}


def r(i):
    return ("r", i)


def imm(v):
    return ("i", v)


def three_devices():
    device("sim", 1, capacity=None, missing_kernels=())
    device("sim", 2, capacity=None, missing_kernels=())
    return [dev("cpu", 0), dev("sim", 1), dev("sim", 2)]


def hetero_exe():
    """cpu -> sim1 (exp, add in one arena) -> sim2 (square) -> cpu, with kills."""
    instrs = [
        Call(1, B + "copy_to", (r(0), imm(1))),  # 0: 16 B on sim1
        Call(2, B + "alloc_storage", (imm([32]), imm(1), imm("global"))),  # 1: 32 B on sim1
        Call(3, B + "alloc_tensor", (r(2), imm(0), imm([4]), imm(F32))),  # 2
        Call(4, B + "alloc_tensor", (r(2), imm(16), imm([4]), imm(F32))),  # 3
        KernelCall("exp", {}, 1, (r(1), r(3)), 1),  # 4
        Kill(1),  # 5: 16 B back on sim1
        KernelCall("add", {}, 1, (r(3), r(3), r(4)), 1),  # 6
        Kill(3),  # 7
        Kill(2),  # 8: storage still held by r4
        Call(5, B + "copy_to", (r(4), imm(2))),  # 9: 16 B on sim2
        Kill(4),  # 10: the arena goes back (32 B)
        Call(6, B + "alloc_tensor_direct", (imm([4]), imm(F32), imm(2))),  # 11
        KernelCall("multiply", {}, 2, (r(5), r(5), r(6)), 1),  # 12
        Kill(5),  # 13
        Call(7, B + "copy_to", (r(6), imm(0))),  # 14: 16 B on cpu
        Kill(6),  # 15
        Ret(7),  # 16
    ]
    main = VMFunction("main", ["x"], [tensor([4])], 8, instrs, {})
    return Executable(three_devices(), [], {"main": main})


@pytest.mark.parametrize("allocator", ["naive", "pooled"])
def test_heterogeneous_run_with_kills_and_exact_memory_report(allocator):
    vm = hetvm.VirtualMachine(hetero_exe(), allocator=allocator, trace=True)
    x = np.array([0.0, 0.5, -1.0, 2.0], F32)
    out = vm["main"](x)
    assert out.device is hetvm.cpu(0)
    np.testing.assert_allclose(out.numpy(), (2 * np.exp(x)) ** 2, rtol=1e-6)
    rep = vm.memory_report()
    pooled = allocator == "pooled"
    assert rep["sim:1"]["peak_bytes"] == 48
    assert rep["sim:1"]["bytes_in_use"] == 0
    assert rep["sim:1"]["alloc_calls"] == 2
    assert rep["sim:1"]["pool_bytes"] == (48 if pooled else 0)
    assert rep["sim:2"]["peak_bytes"] == 32 and rep["sim:2"]["bytes_in_use"] == 0
    assert {k: rep["cpu:0"][k] for k in ("peak_bytes", "bytes_in_use", "pool_bytes", "alloc_calls",
                                         "raw_allocs")} == {  # (a pooled allocator says more)
        "peak_bytes": 16, "bytes_in_use": 16, "pool_bytes": 0, "alloc_calls": 1, "raw_allocs": 1
    }
    # the storage is released only when the last view (r4) is killed, at pc 10
    frees = [(e["device"], e["pc"], e["bytes"]) for e in vm.events if e["event"] == "free"]
    assert ("sim:1", 5, 16) in frees and ("sim:1", 10, 32) in frees
    assert not any(e["pc"] == 8 for e in vm.events if e["event"] == "free")
    copies = [e for e in vm.events if e["event"] == "copy"]
    assert [(c["src"], c["device"]) for c in copies] == [
        ("cpu:0", "sim:1"), ("sim:1", "sim:2"), ("sim:2", "cpu:0")
    ]
    del out
    # a second call reuses pooled blocks: no new device allocations on the sims
    vm["main"](x)
    rep = vm.memory_report()
    assert rep["sim:1"]["raw_allocs"] == (0 if pooled else 2)
    assert rep["sim:1"]["peak_bytes"] == 48


def test_kernel_given_tensor_on_wrong_device_names_everything():
    instrs = [
        Call(1, B + "alloc_tensor_direct", (imm([4]), imm(F32), imm(1))),
        KernelCall("exp", {}, 1, (r(0), r(1)), 1, names=("x", "out")),
        Ret(1),
    ]
    exe = Executable(three_devices(), [], {"main": VMFunction("main", ["x"], [tensor([4])], 2, instrs, {})})
    vm = hetvm.VirtualMachine(exe)
    with pytest.raises(DeviceMismatchError) as info:
        vm["main"](np.zeros(4, F32))
    msg = str(info.value)
    for part in ("argument 0 ('x')", "cpu:0", "sim:1", "function 'main', pc 1", "exp"):
        assert part in msg
    assert vm.memory_report()["sim:1"]["bytes_in_use"] == 0


def test_dynamic_device_check_for_values_of_unknown_kind():
    register_func("test_vm.passthrough", lambda t: t, override=True)
    instrs = [
        Call(1, "test_vm.passthrough", (r(0),)),
        Call(2, B + "alloc_tensor_direct", (imm([4]), imm(F32), imm(2))),
        KernelCall("negative", {}, 2, (r(1), r(2)), 1),
        Ret(2),
    ]
    exe = Executable(three_devices(), [], {"main": VMFunction("main", ["x"], [tensor([4], 1)], 3, instrs, {})})
    vm = hetvm.VirtualMachine(exe)
    with pytest.raises(DeviceMismatchError, match=r"argument 0, register r1, is a tensor on sim:1"):
        vm["main"](np.ones(4, F32))
    remove_global_func("test_vm.passthrough")


def test_kernel_failure_releases_the_calls_memory_and_vm_stays_usable():
    instrs = [
        Call(1, B + "alloc_storage", (imm([64]), imm(0))),
        Call(2, B + "alloc_tensor", (r(1), imm(0), imm([4]), imm(F32))),
        Call(3, B + "alloc_tensor_direct", (imm([3]), imm(F32), imm(0))),
        KernelCall("add", {}, 0, (r(0), r(0), r(3)), 1),
        Ret(3),
    ]
    info = {"kind": "tensor", "shape": None, "ndim": 1, "dtype": F32, "device": 0}
    exe = Executable([dev("cpu", 0)], [], {"main": VMFunction("main", ["x"], [info], 4, instrs, {})})
    vm = hetvm.VirtualMachine(exe, allocator="naive")
    with pytest.raises(HetvmRuntimeError) as err:
        vm["main"](np.ones(4, F32))  # (4,) + (4,) into (3,): broadcast error in the kernel
    msg = str(err.value)
    assert "kernel 'add'" in msg and "function 'main', pc 3" in msg
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 0
    assert vm.memory_report()["cpu:0"]["peak_bytes"] == 64 + 12
    out = vm["main"](np.ones(3, F32))
    np.testing.assert_array_equal(out.numpy(), [2, 2, 2])


def symbolic_exe(bounds):
    n = ["var", "n"]
    instrs = [
        Call(2, B + "alloc_tensor_direct", (imm([n, ["add", n, 1]]), imm(F32), imm(0))),
        KernelCall("add", {}, 0, (r(0), r(1), r(2)), 1),
        Call(3, B + "shape_of", (r(2),)),
        Call(4, B + "make_shape", (imm([["mul", n, 2]]),)),
        Call(5, B + "make_tuple", (r(2), r(3), r(4))),
        Ret(5),
    ]
    params = [tensor([n, ["add", n, 1]]), tensor([1, ["add", n, 1]])]
    main = VMFunction("main", ["x", "y"], params, 6, instrs, bounds)
    return Executable([dev("cpu", 0)], [], {"main": main})


def test_symbolic_shapes_bind_check_and_bound():
    vm = hetvm.VirtualMachine(symbolic_exe({"n": [1, 8]}))
    x = np.ones((3, 4), F32)
    out, shape, made = vm["main"](x, np.ones((1, 4), F32))
    np.testing.assert_array_equal(out.numpy(), 2 * x)
    assert shape == (3, 4) and made == (6,)
    with pytest.raises(HetvmRuntimeError) as e:
        vm["main"](np.ones((3, 5), F32), np.ones((1, 4), F32))
    assert "parameter 'x' dimension 1" in str(e.value)
    assert "(n + 1) = 4" in str(e.value) and "given 5" in str(e.value)
    with pytest.raises(HetvmRuntimeError, match=r"parameter 'y' dimension 1 .*expected \(n \+ 1\) = 4, given 6"):
        vm["main"](np.ones((3, 4), F32), np.ones((1, 6), F32))
    with pytest.raises(HetvmRuntimeError, match=r"'n' .* = 9 .* exceeds its upper bound 8"):
        vm["main"](np.ones((9, 10), F32), np.ones((1, 10), F32))
    with pytest.raises(HetvmRuntimeError, match="expected 2 dimension"):
        vm["main"](np.ones(3, F32), np.ones((1, 4), F32))
    with pytest.raises(HetvmRuntimeError, match="expected dtype float32, given float64"):
        vm["main"](np.ones((3, 4)), np.ones((1, 4), F32))
    with pytest.raises(HetvmRuntimeError, match=r"takes 2 argument\(s\) \(x, y\), given 1"):
        vm["main"](x)


def test_poison_turns_use_after_kill_into_nan():
    instrs = [
        Call(1, B + "alloc_storage", (imm([16]), imm(0))),
        Call(2, B + "alloc_tensor", (r(1), imm(0), imm([4]), imm(F32))),
        KernelCall("exp", {}, 0, (r(0), r(2)), 1),
        Kill(2),  # deliberately killed ...
        Call(3, B + "alloc_tensor", (r(1), imm(0), imm([4]), imm(F32))),  # ... and read again
        Call(4, B + "alloc_tensor_direct", (imm([4]), imm(F32), imm(0))),
        KernelCall("add", {}, 0, (r(3), r(0), r(4)), 1),
        Ret(4),
    ]
    exe = Executable([dev("cpu", 0)], [], {"main": VMFunction("main", ["x"], [tensor([4])], 5, instrs, {})})
    x = np.arange(4, dtype=F32)
    quiet = hetvm.VirtualMachine(exe)["main"](x).numpy()
    np.testing.assert_allclose(quiet, np.exp(x) + x, rtol=1e-6)  # silently "works"
    loud = hetvm.VirtualMachine(exe, poison=True)["main"](x).numpy()
    assert np.isnan(loud).all()


def test_functions_call_each_other_with_control_flow_and_packed_calls():
    seen = []

    @register_func("test_vm.record", override=True)
    def record(t):
        seen.append((type(t).__name__, t.shape))
        return t

    # helper(x, flag): flag ? x*x : -x
    helper = [
        Call(2, B + "alloc_tensor_direct", (imm([2]), imm(F32), imm(0))),
        If(1, 3),
        KernelCall("multiply", {}, 0, (r(0), r(0), r(2)), 1),
        Goto(2),
        KernelCall("negative", {}, 0, (r(0), r(2)), 1),
        Ret(2),
    ]
    main = [
        Call(2, "helper", (r(0), r(1))),
        Call(3, "test_vm.record", (r(2),)),
        Call(4, B + "read_cond", (r(1),)),
        Ret(3),
    ]
    prim = {"kind": "prim", "dtype": "bool"}
    exe = Executable(
        [dev("cpu", 0)],
        [],
        {
            "main": VMFunction("main", ["x", "flag"], [tensor([2]), prim], 5, main, {}),
            "helper": VMFunction("helper", ["x", "flag"], [tensor([2]), prim], 3, helper, {}),
        },
    )
    vm = hetvm.VirtualMachine(exe)
    x = np.array([2.0, -3.0], F32)
    np.testing.assert_array_equal(vm["main"](x, True).numpy(), [4.0, 9.0])
    np.testing.assert_array_equal(vm.invoke("main", x, False).numpy(), [-2.0, 3.0])
    np.testing.assert_array_equal(vm["helper"](x, False).numpy(), [-2.0, 3.0])
    assert seen == [("NDArray", (2,)), ("NDArray", (2,))]
    remove_global_func("test_vm.record")


def test_missing_kernel_and_out_of_memory_on_sim():
    device("sim", 5, capacity=None, missing_kernels=("exp",))
    instrs = [
        Call(1, B + "copy_to", (r(0), imm(0))),
        Call(2, B + "alloc_tensor_direct", (imm([4]), imm(F32), imm(0))),
        KernelCall("exp", {}, 0, (r(1), r(2)), 1),
        Ret(2),
    ]
    info = {"kind": "tensor", "shape": [4], "dtype": F32, "device": None}
    exe = Executable([dev("sim", 5)], [], {"main": VMFunction("main", ["x"], [info], 3, instrs, {})})
    vm = hetvm.VirtualMachine(exe)
    with pytest.raises(HetvmRuntimeError, match="sim:5 is configured without a kernel for 'exp'"):
        vm["main"](hetvm.nd.array(np.ones(4, F32), device("sim", 5)))
    # 16 B argument + 16 B copy + 16 B output > 40 B capacity
    device("sim", 6, capacity=40, missing_kernels=())
    vm = hetvm.VirtualMachine(exe, devices=[device("sim", 6)])
    with pytest.raises(OutOfMemoryError, match=r"sim:6: requested 16 bytes .* capacity 40"):
        vm["main"](np.ones(4, F32))
    assert vm.memory_report()["sim:6"]["bytes_in_use"] == 0
    device("sim", 5, capacity=None, missing_kernels=())
    device("sim", 6, capacity=None)


def test_empty_register_and_wrong_parameter_device():
    instrs = [Kill(0), Call(1, B + "shape_of", (r(0),)), Ret(1)]
    exe = Executable(three_devices(), [], {"main": VMFunction("main", ["x"], [tensor([2], 1)], 2, instrs, {})})
    vm = hetvm.VirtualMachine(exe)
    with pytest.raises(DeviceMismatchError, match="parameter 'x' .* is on cpu:0 but .* sim:1"):
        vm["main"](hetvm.nd.array(np.ones(2, F32)))
    with pytest.raises(HetvmRuntimeError, match="needs a tensor|empty"):
        vm["main"](np.ones(2, F32))


def test_match_cast_binds_new_variables():
    m = ["var", "m"]
    instrs = [
        Call(1, B + "match_cast", (r(0), imm({"kind": "tensor", "shape": [m], "dtype": F32}))),
        Call(2, B + "make_shape", (imm([["mul", m, 3]]),)),
        Ret(2),
    ]
    info = {"kind": "tensor", "shape": None, "ndim": -1, "dtype": F32, "device": 0}
    exe = Executable([dev("cpu", 0)], [], {"main": VMFunction("main", ["x"], [info], 3, instrs, {"m": [None, 4]})})
    vm = hetvm.VirtualMachine(exe)
    assert vm["main"](np.ones(3, F32)) == (9,)
    with pytest.raises(HetvmRuntimeError, match="upper bound 4"):
        vm["main"](np.ones(5, F32))
    with pytest.raises(HetvmRuntimeError, match="match_cast value .*expected 1 dimension"):
        vm["main"](np.ones((2, 2), F32))


def test_tuple_inputs_multiple_outputs_and_attrs_on_sim():
    instrs = [
        Call(1, B + "copy_to", (r(0), imm(1))),
        Call(2, B + "make_tuple", (r(1), r(1))),
        Call(3, B + "alloc_tensor_direct", (imm([2, 6]), imm(F32), imm(1))),
        KernelCall("concat", {"axis": 1}, 1, (r(2), r(3)), 1),
        Call(4, B + "alloc_tensor_direct", (imm([2, 2]), imm(F32), imm(1))),
        Call(5, B + "alloc_tensor_direct", (imm([2, 4]), imm(F32), imm(1))),
        KernelCall("split", {"indices_or_sections": [2], "axis": 1}, 1, (r(3), r(4), r(5)), 2),
        Call(6, B + "copy_to", (r(5), imm(0))),
        Call(7, B + "shape_of", (r(6),)),
        Call(8, B + "alloc_tensor_direct", (r(7), imm(F32), imm(0))),
        KernelCall("reshape", {}, 0, (r(6), r(7), r(8)), 1),
        Call(9, B + "make_tuple", (r(8), r(4))),
        Ret(9),
    ]
    main = VMFunction("main", ["x"], [tensor([2, 3])], 10, instrs, {})
    vm = hetvm.VirtualMachine(Executable(three_devices(), [], {"main": main}))
    x = np.arange(6, dtype=F32).reshape(2, 3)
    tail, head = vm["main"](x)
    both = np.concatenate([x, x], axis=1)
    np.testing.assert_array_equal(tail.numpy(), both[:, 2:])
    assert head.device is device("sim", 1)
    np.testing.assert_array_equal(head.copyto(hetvm.cpu(0)).numpy(), both[:, :2])


IEEE_EDGES = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tuple(R.Tensor((2, 3), "float32"), R.Tensor((2, 3), "float32")):
        with R.dataflow():
            lg = R.log(x)
            sm = R.nn.softmax(R.divide(x, x), axis=-1)
            R.output(lg, sm)
        return (lg, sm)
"""


def test_kernels_give_ieee_results_without_numpy_warnings():
    """log(0) is -inf and 0/0 is nan, silently, as in ONNX Runtime: a masked row
    in a model is not an error, so neither the VM nor the graph executor warns."""
    import warnings

    from hetvm.graph_executor import create
    from hetvm.pipeline import build
    from hetvm.script.parser import from_source

    x = np.array([[0.0, 1.0, 2.0], [0.0, 0.0, 0.0]], "float32")
    mod = from_source(IEEE_EDGES)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lg, sm = hetvm.VirtualMachine(hetvm.build(mod))["main"](x)
        graph, lib, _ = build(mod, executor="graph")
        ge = create(graph, lib)
        ge.run(x=x)
    assert lg.numpy()[0, 0] == -np.inf and np.isnan(sm.numpy()).all()
    np.testing.assert_array_equal(ge.get_output(0).numpy(), lg.numpy())
    assert np.isnan(ge.get_output(1).numpy()).all()
