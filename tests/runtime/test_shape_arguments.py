"""Sizes given through a shape argument: clear errors naming the dimension and the limit."""

import numpy as np
import pytest

import hetvm
from hetvm.errors import HetvmRuntimeError, OutOfMemoryError
from hetvm.runtime.memory import MAX_ALLOC_BYTES, NaiveAllocator
from hetvm.script.parser import from_source

SRC = """
@I.ir_module
class M:
    @R.function
    def main(s: R.Shape(["n"])) -> R.Tensor(("n",), "float32"):
        n = T.int64()
        x = R.zeros(R.shape([n]), "float32")
        return x
"""


@pytest.fixture(scope="module")
def vm():
    return hetvm.VirtualMachine(hetvm.build(from_source(SRC)))


def test_a_good_size_runs(vm):
    np.testing.assert_array_equal(vm["main"]((3,)).numpy(), np.zeros(3, "float32"))


def test_a_negative_size_names_the_dimension_given(vm):
    """It used to say only "negative dimension in shape (-4,)" (the size in bytes). A
    shape's values may be negative (bounds, steps), so the size is refused where
    it is used, naming the shape variable it came from."""
    with pytest.raises(HetvmRuntimeError, match=r"alloc_storage of a negative size \(\(-4,\) bytes\) on "
                                                r"cpu:0 .*alloc_storage.* with n = -1\]"):
        vm["main"]((-1,))


def test_a_size_beyond_int64_is_refused_at_entry(vm):
    with pytest.raises(HetvmRuntimeError, match=r"dimension 0 is 1180591620717411303424; a shape's values "
                                                r"are int64, at most 9223372036854775807"):
        vm["main"]((2**70,))


def test_a_size_whose_bytes_no_allocation_can_hold_says_so(vm):
    """It used to report 'register r2 is empty' (the failing call's own result)."""
    with pytest.raises(OutOfMemoryError) as info:
        vm["main"]((2**62,))
    msg = str(info.value)
    assert f"cannot allocate {2**64} bytes on cpu:0" in msg and str(MAX_ALLOC_BYTES) in msg
    assert f"with n = {2**62}" in msg and "alloc_storage" in msg and "is empty" not in msg
    np.testing.assert_array_equal(vm["main"]((2,)).numpy(), np.zeros(2, "float32"))  # still usable


def test_a_size_the_system_refuses_is_out_of_memory(vm):
    with pytest.raises(OutOfMemoryError, match=r"the system refused|cannot allocate"):
        vm["main"]((2**60,))


def test_the_allocator_refuses_more_than_it_can_count():
    with pytest.raises(OutOfMemoryError, match="more than any allocation can hold"):
        NaiveAllocator(hetvm.cpu(0)).alloc(MAX_ALLOC_BYTES + 1)


def test_a_shape_may_hold_negative_values():
    """A shape is also how bounds and steps travel (R.arange's, say): only a size
    used for memory must be >= 0."""
    src = """
@I.ir_module
class M:
    @R.function
    def main(s: R.Shape(["a", "b"])) -> R.Shape(["a", "b"]):
        a = T.int64()
        b = T.int64()
        return s
"""
    vm = hetvm.VirtualMachine(hetvm.build(from_source(src)))
    assert tuple(vm["main"]((-3, 5))) == (-3, 5)
