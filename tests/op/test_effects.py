"""Op effects (hetvm.op.effects): declared once, read by every pass."""

import numpy as np
import pytest

import hetvm
from hetvm.ir import BlockBuilder, Var, op_registry
from hetvm.ir import expr as E
from hetvm.ir import struct_info as S
from hetvm.ir.op_registry import DeviceBehavior, op_info, registered_ops
from hetvm.op import effects as fx
from hetvm.op.manipulate import _infer_flatten
from hetvm.pipeline import lower
from hetvm.testing.interpreter import interpret
from hetvm.transform import LegalizeOps


def test_an_op_that_declares_nothing_is_a_computation_with_a_result_of_its_own():
    assert op_info("add").effects is None
    assert fx.op_effects("add") == fx.COMPUTE
    assert fx.op_effects("add").shares_bytes_with(2) == ()


def test_every_registered_op_has_effects():
    for name in registered_ops():
        eff = fx.op_effects(name)
        assert isinstance(eff, fx.Effects), name
        if eff.kills:
            assert not op_info(name).pure, f"{name} releases memory but is declared pure"


def test_memory_ops_declare_what_they_do():
    assert fx.op_effects("memory.alloc_storage").result is fx.Result.STORAGE
    assert fx.op_effects("vm.alloc_storage").result is fx.Result.STORAGE
    assert fx.op_effects("memory.alloc_tensor").result is fx.Result.CARVED
    assert fx.op_effects("builtin.alloc_tensor").result is fx.Result.FRESH
    for kill in ("memory.kill_tensor", "memory.kill_storage", "vm.kill_object"):
        assert fx.op_effects(kill).kills
    assert fx.op_effects("hint_on_device").is_alias(1)
    assert not fx.op_effects("to_vdevice").is_alias(1)


def test_packed_functions():
    assert fx.symbol_effects(fx.kernel_symbol("exp")) == fx.KERNEL
    assert fx.kernel_op_of("kernel.nn.relu") == "nn.relu"
    assert fx.kernel_op_of("my_func") is None
    assert fx.symbol_effects(fx.RESHAPE_BUILTIN).is_alias(2)
    assert fx.symbol_effects(fx.VIEW_AT_BUILTIN).is_alias(3)
    # copy_to is its destination when it is given one, else new bytes
    copy = fx.symbol_effects(fx.COPY_BUILTIN)
    assert copy.shares_bytes_with(3) == (2,) and copy.shares_bytes_with(2) == ()
    # a user's packed function may return any argument
    assert fx.symbol_effects("my_func").shares_bytes_with(3) is None


def test_every_view_op_is_legalized_to_a_view_and_others_to_kernels():
    x = Var("x", struct_info=S.TensorStructInfo((2, 3), "float32"))
    from hetvm import op as R

    calls = {
        "reshape": R.reshape(x, (6,)),
        "expand_dims": R.expand_dims(x, 0),
        "squeeze": R.squeeze(R.expand_dims(x, 0), [0]),
        "flatten": R.flatten(x),
        "exp": R.exp(x),
    }
    views = {n for n in registered_ops() if fx.is_view_op(n)}
    assert views == {"reshape", "expand_dims", "squeeze", "flatten"}
    for name, call in calls.items():
        bb = BlockBuilder()
        with bb.function("main", [x]):
            bb.emit_func_output(bb.emit(call))
        body = LegalizeOps()(bb.get())["main"].body
        value = body.blocks[-1].bindings[-1].value
        if fx.is_view_op(name):
            assert value.op.global_symbol == fx.RESHAPE_BUILTIN
        else:
            assert fx.kernel_op_of(value.args[0].global_symbol) == name


@pytest.fixture
def new_view_op():
    """A view-like op declared by its definition alone (register_op + effects)."""
    name = "testing.flatten_view"
    op_registry.register_op(name, _infer_flatten, num_inputs=1, effects=fx.VIEW)
    yield name
    op_registry._REGISTRY.pop(name, None)
    op_registry._OPS.pop(name, None)


def test_a_new_view_op_needs_only_its_definition(new_view_op):
    """Legalisation, device planning, memory planning, kills, codegen and the
    interpreter all follow the declaration: no kernel, no list to extend."""
    assert fx.is_view_op(new_view_op)
    x = Var("x", struct_info=S.TensorStructInfo((2, 3), "float32"))
    from hetvm import op as R

    bb = BlockBuilder()
    with bb.function("main", [x]):
        lv = bb.emit(R.exp(x))
        view = bb.emit(E.Call(op_registry.get_op(new_view_op), (lv,), struct_info=S.TensorStructInfo((6,), "float32")))
        bb.emit_func_output(bb.emit(R.negative(view)))
    mod = bb.get()
    data = np.arange(6, dtype="float32").reshape(2, 3) / 4
    expected = -np.exp(data).reshape(6)
    np.testing.assert_allclose(interpret(mod, data), expected, rtol=1e-6)
    lowered = lower(mod)["main"].body
    symbols = [getattr(b.value.op, "global_symbol", "") for blk in lowered.blocks for b in blk.bindings]
    assert fx.RESHAPE_BUILTIN in symbols and not any(fx.kernel_op_of(s) == new_view_op for s in symbols)
    vm = hetvm.VirtualMachine(hetvm.build(mod), poison=True)
    np.testing.assert_allclose(vm["main"](data).numpy(), expected, rtol=1e-6)
    assert op_info(new_view_op).device_behavior is DeviceBehavior.FOLLOW_INPUTS
