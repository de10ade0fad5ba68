"""Device ops, memory/vm/builtin allocation ops, packed calls."""

import pytest

import hetvm.op as op
from hetvm.errors import StructInfoError
from hetvm.ir import (
    DataTypeImm,
    DeviceBehavior,
    ExternFunc,
    PrimValue,
    ShapeExpr,
    StringImm,
    Tuple,
    Var,
    VDevice,
    op_info,
    prim,
)
from hetvm.ir import struct_info as S


def tensor(shape, dtype="float32", vdevice=None, name="x"):
    return Var(name, struct_info=S.TensorStructInfo(shape, dtype, vdevice=vdevice))

n = prim.PrimVar("n")
GPU = VDevice("cuda", 0)


def test_device_helper():
    assert op.device("cuda", 1) == VDevice("cuda", 1)
    assert op.device(2, 0) == VDevice("cuda", 0)
    assert op.device("cpu").kind == "cpu"
    with pytest.raises(StructInfoError, match="index"):
        op.device("cuda", -1)
    with pytest.raises(StructInfoError, match="code 99"):
        op.device(99)


def test_hint_on_device():
    x = tensor((n, 2))
    call = op.hint_on_device(x, op.device("cuda", 0))
    # TVM's rule: the result keeps the input's struct info until the planner realises it
    assert call.struct_info == x.struct_info
    assert call.attrs == {"dst_vdevice": GPU}
    scoped = op.hint_on_device(x, GPU, memory_scope="texture")
    assert scoped.attrs["dst_vdevice"].memory_scope == "texture"
    assert op_info("hint_on_device").device_behavior is DeviceBehavior.ANNOTATION
    with pytest.raises(StructInfoError, match="hint_on_device.*VDevice"):
        op.hint_on_device(x, 3)


def test_to_vdevice():
    x = tensor((2,), vdevice=VDevice("llvm", 0))
    call = op.to_vdevice(x, GPU)
    assert call.struct_info.vdevice == GPU and call.struct_info.shape == x.struct_info.shape
    assert op.to_vdevice(x, "cuda:1").attrs["dst_vdevice"] == VDevice("cuda", 1)
    assert op_info("to_vdevice").device_behavior is DeviceBehavior.CROSS_DEVICE
    with pytest.raises(StructInfoError, match="to_vdevice.*must be a tensor"):
        op.to_vdevice(ShapeExpr((2,)), GPU)


def test_memory_alloc_storage_and_tensor():
    storage = op.memory.alloc_storage((256,), 0, "global", "uint8")
    assert [type(a) for a in storage.args] == [ShapeExpr, PrimValue, StringImm, DataTypeImm]
    assert storage.struct_info == S.ObjectStructInfo() and storage.attrs == {}
    sv = Var("s", struct_info=storage.struct_info)
    t = op.memory.alloc_tensor(sv, 64, (n, 4), "float32")
    assert t.struct_info == S.TensorStructInfo((n, 4), "float32")
    assert op.memory.kill_storage(sv).struct_info == S.TupleStructInfo([])
    assert op.memory.kill_tensor(tensor((2,))).struct_info == S.TupleStructInfo([])


def test_memory_errors():
    with pytest.raises(StructInfoError, match="memory.alloc_storage.*storage_scope must be a StringImm"):
        op.memory.alloc_storage((256,), 0, DataTypeImm("x"), "uint8")
    with pytest.raises(StructInfoError, match="virtual_device_index must be an integer"):
        op.memory.alloc_storage((256,), 0.5, "global", "uint8")
    with pytest.raises(StructInfoError, match="memory.alloc_tensor.*storage must be a storage"):
        op.memory.alloc_tensor(tensor((2,)), 0, (2,), "float32")
    with pytest.raises(StructInfoError, match="kill_tensor.*must be a tensor"):
        op.memory.kill_tensor(Var("s", struct_info=S.ObjectStructInfo()))


def test_vm_and_builtin():
    st = op.vm.alloc_storage((128,), 0, "uint8")
    assert st.args[3].value == "global" and st.struct_info == S.ObjectStructInfo()
    sv = Var("s", struct_info=S.ObjectStructInfo())
    assert op.vm.alloc_tensor(sv, 0, (4, 8), "float16").struct_info == S.TensorStructInfo(
        (4, 8), "float16"
    )
    assert op.vm.kill_object(sv).struct_info == S.TupleStructInfo([])
    t = op.builtin.alloc_tensor((n, 3), "float32", 0)
    assert len(t.args) == 3 and t.struct_info == S.TensorStructInfo((n, 3), "float32")
    # TVM's default scope "global" is dropped (both spellings give one call), others kept
    assert len(op.builtin.alloc_tensor((2,), "int8", 1, "global").args) == 3
    assert len(op.builtin.alloc_tensor((2,), "int8", 1, "texture").args) == 4
    # vm.alloc_tensor reads TVM's trailing runtime_device_index, dropping the default 0
    assert len(op.vm.alloc_tensor(sv, 0, (4, 8), "float16", 0).args) == 4
    assert len(op.vm.alloc_tensor(sv, 0, (4, 8), "float16", 1).args) == 5
    with pytest.raises(StructInfoError, match="runtime_device_index"):
        op.builtin.alloc_tensor((2,), "int8", "zero")


@pytest.mark.parametrize(
    "name",
    ["memory.alloc_storage", "memory.alloc_tensor", "memory.kill_storage", "memory.kill_tensor",
     "builtin.alloc_tensor", "vm.alloc_storage", "vm.alloc_tensor", "vm.kill_object"],
)
def test_memory_ops_are_impure_memory(name):
    info = op_info(name)
    assert info.pure is False and info.device_behavior is DeviceBehavior.MEMORY


def test_call_dps_packed():
    x = tensor((n, 2))
    out = S.TensorStructInfo((n, 2), "float32")
    call = op.call_dps_packed("my_kernel", [x], out_sinfo=out)
    assert isinstance(call.args[0], ExternFunc) and isinstance(call.args[1], Tuple)
    assert call.sinfo_args == (out,) and call.struct_info == out
    two = op.call_dps_packed(ExternFunc("k"), (x,), [out, out])
    assert two.struct_info == S.TupleStructInfo([out, out])
    lowered = op.call_dps_packed("add", [x, x], out, op_attrs={"axis": 1}, device=GPU)
    assert lowered.attrs["op_attrs"] == {"axis": 1} and lowered.attrs["device"] == GPU
    assert op_info("call_dps_packed").device_behavior is DeviceBehavior.MEMORY
    with pytest.raises(StructInfoError, match="out_sinfo"):
        op.call_dps_packed("k", [x], out_sinfo="tensor")


def test_call_packed_is_plain_call():
    x = tensor((2,))
    call = op.call_packed("vm.builtin.print", x, 3, "s", sinfo_args=[x.struct_info])
    assert isinstance(call.op, ExternFunc) and call.op.global_symbol == "vm.builtin.print"
    assert [type(a) for a in call.args] == [Var, PrimValue, StringImm]
    assert call.struct_info == x.struct_info and call.sinfo_args == (x.struct_info,)
    plain = op.call_packed("f", x, device_index=1)
    assert plain.struct_info == S.ObjectStructInfo() and plain.attrs == {"device_index": 1}
    with pytest.raises(StructInfoError, match="cannot pass"):
        op.call_packed("f", object())


def test_null_value():
    call = op.null_value()
    assert call.args == () and call.struct_info == S.ObjectStructInfo()
