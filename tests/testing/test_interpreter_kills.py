"""The reference interpreter's kills: a killed tensor's bytes are poisoned, so a
read through an alias shows; killing bytes that outlive the call is an error."""

import numpy as np
import pytest

from hetvm.errors import HetvmRuntimeError
from hetvm.script import from_source
from hetvm.testing.interpreter import interpret

# `lv1` is a view of `lv`; the kill of `lv` comes before the view's last read
KILL_BEFORE_ALIAS_READ = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((6,), dtype="float32"):
        R.func_attr({"relax.force_pure": True})
        arena: R.Any = R.memory.alloc_storage(R.shape([48]), 0, R.str("global"), R.dtype("uint8"))
        lv: R.Tensor((2, 3), dtype="float32") = R.memory.alloc_tensor(arena, 0, R.shape([2, 3]), R.dtype("float32"))
        lv2: R.Tensor((6,), dtype="float32") = R.memory.alloc_tensor(arena, 24, R.shape([6]), R.dtype("float32"))
        R.memory.kill_storage(arena)
        R.call_packed("kernel.exp", x, lv, num_outputs=1, ty_args=(R.Tuple,))
        lv1: R.Tensor((6,), dtype="float32") = R.call_packed("vm.builtin.reshape", lv, R.shape([6]), ty_args=(R.Tensor((6,), dtype="float32"),))
        R.memory.kill_tensor(lv)
        R.call_packed("kernel.negative", lv1, lv2, num_outputs=1, ty_args=(R.Tuple,))
        return lv2
'''


def _program(kill_line: str) -> str:
    return KILL_BEFORE_ALIAS_READ.replace("        R.memory.kill_tensor(lv)\n", kill_line)


def test_reading_an_alias_of_a_killed_tensor_reads_poison():
    x = np.arange(6, dtype="float32").reshape(2, 3) / 10
    out = interpret(from_source(KILL_BEFORE_ALIAS_READ), x)
    assert np.isnan(out).all()


def test_the_same_program_with_the_kill_after_the_last_read_is_right():
    x = np.arange(6, dtype="float32").reshape(2, 3) / 10
    src = _program("")
    src = src.replace("        return lv2\n", "        R.memory.kill_tensor(lv)\n        return lv2\n")
    out = interpret(from_source(src), x)
    np.testing.assert_allclose(out, -np.exp(x).reshape(6), rtol=1e-6)


def test_killing_a_storage_leaves_its_tensors_alive():
    """kill_storage drops the handle: the tensors carved from it keep their bytes."""
    x = np.ones((2, 3), "float32")
    out = interpret(from_source(_program("")), x)
    np.testing.assert_allclose(out, -np.exp(x).reshape(6), rtol=1e-6)


def test_killing_a_parameter_is_an_error_and_leaves_it_intact():
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
        lv: R.Tensor((3,), dtype="float32") = R.call_packed("vm.builtin.reshape", x, R.shape([3]), ty_args=(R.Tensor((3,), dtype="float32"),))
        R.memory.kill_tensor(lv)
        return x
'''
    x = np.ones(3, "float32")
    with pytest.raises(HetvmRuntimeError, match="bytes are those of parameter 'x'"):
        interpret(from_source(src), x)
    np.testing.assert_array_equal(x, np.ones(3, "float32"))


def test_killing_a_constant_is_an_error():
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
        lv: R.Tensor((3,), dtype="float32") = R.call_packed("vm.builtin.reshape", R.const([1.0, 2.0, 3.0], "float32"), R.shape([3]), ty_args=(R.Tensor((3,), dtype="float32"),))
        R.memory.kill_tensor(lv)
        return x
'''
    with pytest.raises(HetvmRuntimeError, match="a constant"):
        interpret(from_source(src), np.ones(3, "float32"))


def test_an_op_result_has_bytes_of_its_own():
    """A high-level op NumPy answers with a view (permute_dims) still gets its own
    bytes: killing it poisons nothing the caller passed."""
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
        lv: R.Tensor((3, 2), dtype="float32") = R.permute_dims(x)
        lv1: R.Tensor((3, 2), dtype="float32") = R.exp(lv)
        R.memory.kill_tensor(lv)
        lv2: R.Tensor((2, 3), dtype="float32") = R.permute_dims(lv1)
        return lv2
'''
    x = np.arange(6, dtype="float32").reshape(2, 3)
    out = interpret(from_source(src), x)
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-6)
    np.testing.assert_array_equal(x, np.arange(6, dtype="float32").reshape(2, 3))
