"""The VM's cheap per-instruction paths: tensors released by ``__del__`` (no
``weakref.finalize``), load-time specialised alloc_tensor / view_at / reshape,
and the Kill without trace or poison. Each must behave like the general path."""

import copy
import subprocess
import sys

import numpy as np
import pytest

import hetvm
from hetvm.errors import HetvmRuntimeError
from hetvm.runtime.builtins import static_alloc_tensor
from hetvm.runtime.bytecode import Call, Executable, KernelCall, Kill, Ret, VMFunction
from hetvm.runtime.memory import NaiveAllocator, Storage
from hetvm.runtime.ndarray import NDArray, view
from hetvm.runtime.pool import PooledAllocator
from hetvm.runtime.vm_state import CallState

B = "vm.builtin."
F32 = "float32"
CPU = [{"kind": "cpu", "index": 0, "memory_scope": "global"}]


def r(i):
    return ("r", i)


def imm(v):
    return ("i", v)


def exe_of(instrs, nregs, shape=(2, 6)):
    param = {"kind": "tensor", "shape": list(shape), "dtype": F32, "device": 0}
    return Executable(CPU, [], {"main": VMFunction("main", ["x"], [param], nregs, instrs, {})})


def reshape_exe(new_shape=(3, -1), extra=(), nregs=4):
    """exp(x) into an arena, returned as a reshape of it; the arena and the
    tensor are killed before the return, so only the view keeps the block."""
    instrs = [
        Call(1, B + "alloc_storage", (imm([48]), imm(0), imm("global"))),
        Call(2, B + "alloc_tensor", (r(1), imm(0), imm([2, 6]), imm(F32))),
        KernelCall("exp", {}, 0, (r(0), r(2)), 1),
        Call(3, B + "reshape", (r(2), imm(list(new_shape)))),
        *extra,
        Kill(2),
        Kill(1),
        Ret(3),
    ]
    return exe_of(instrs, nregs)


def test_dropped_tensor_releases_its_bytes_at_once():
    alloc = NaiveAllocator(hetvm.cpu(0))
    st = Storage(alloc.alloc(32))
    t = view(st.allocation, 0, (8,), F32)
    st.release()
    assert alloc.bytes_in_use == 32
    del t  # no Kill, no gc.collect(): reference counting runs __del__
    assert alloc.bytes_in_use == 0


def test_dropped_storage_releases_its_bytes_at_once():
    alloc = NaiveAllocator(hetvm.cpu(0))
    st = Storage(alloc.alloc(32))
    assert st.alive
    del st
    assert alloc.bytes_in_use == 0


def test_release_twice_and_drop_after_release_count_once():
    alloc = NaiveAllocator(hetvm.cpu(0))
    block = alloc.alloc(32)
    a = view(block, 0, (4,), F32)
    b = view(block, 16, (4,), F32)
    a.release()
    a.release()
    assert alloc.bytes_in_use == 32 and block.refs == 1
    del a  # already released: __del__ must not drop b's reference
    assert alloc.bytes_in_use == 32 and b.alive
    del b
    assert alloc.bytes_in_use == 0


def test_released_tensor_refuses_use():
    t = hetvm.nd.array(np.ones(3, F32))
    t.release()
    assert not t.alive and "released" in repr(t)
    with pytest.raises(HetvmRuntimeError, match="numpy\\(\\) on a released NDArray"):
        t.numpy()
    with pytest.raises(HetvmRuntimeError, match="released"):
        copy.copy(t)


def test_copies_hold_their_own_reference():
    alloc = NaiveAllocator(hetvm.cpu(0))
    t = view(alloc.alloc(16), 0, (4,), F32)
    t._data[...] = 2.0
    alias = copy.copy(t)
    deep = copy.deepcopy(t)
    assert alias._data.base is not None and np.shares_memory(alias._data, t._data)
    assert not np.shares_memory(deep._data, t._data)
    t.release()
    assert alloc.bytes_in_use == 16 and alias.alive
    np.testing.assert_array_equal(alias.numpy(), [2.0] * 4)
    del alias
    assert alloc.bytes_in_use == 0
    np.testing.assert_array_equal(deep.numpy(), [2.0] * 4)


def test_failed_construction_is_not_released_later():
    seen = []
    old = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        with pytest.raises(AttributeError):
            NDArray(np.zeros(1), hetvm.cpu(0), None, 0)
    finally:
        sys.unraisablehook = old
    assert seen == []


def test_live_tensors_at_interpreter_exit_are_quiet():
    code = (
        "import numpy as np, hetvm\n"
        "from hetvm.runtime.memory import Storage\n"
        "from hetvm.runtime.pool import PooledAllocator\n"
        "from hetvm.runtime.ndarray import view\n"
        "alloc = PooledAllocator(hetvm.cpu(0), poison=True)\n"
        "st = Storage(alloc.alloc(64))\n"
        "keep = [view(st.allocation, 0, (4,), 'float32'), st, hetvm.nd.array(np.ones(3))]\n"
        "cycle = [keep]; cycle.append(cycle)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stderr == ""


@pytest.mark.parametrize("allocator", ["naive", "pooled"])
def test_user_held_view_output_keeps_its_block(allocator):
    vm = hetvm.VirtualMachine(reshape_exe(), allocator=allocator)
    x = np.linspace(-1, 1, 12, dtype=F32).reshape(2, 6)
    out = vm["main"](x)
    assert out.shape == (3, 4) and out.alive
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 48
    np.testing.assert_allclose(out.numpy(), np.exp(x).reshape(3, 4), rtol=1e-6)
    CallState(vm.state).kill(out)  # a sealed output is never killed by the VM
    assert out.alive
    again = vm["main"](x)  # the held block is not reused
    assert not np.shares_memory(again._data, out._data)
    np.testing.assert_allclose(out.numpy(), np.exp(x).reshape(3, 4), rtol=1e-6)
    del out, again
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 0


def test_specialised_builtins_are_used_and_kernels_read_views_directly():
    extra = (
        Call(4, B + "alloc_tensor", (r(1), imm(0), imm([3, 4]), imm(F32))),
        KernelCall("exp", {}, 0, (r(3), r(4)), 1),
        Kill(4),
    )
    vm = hetvm.VirtualMachine(reshape_exe(extra=extra, nregs=5))
    src = vm.source("main")
    # alloc_tensor and reshape: bound closures; alloc_storage: its size-only closure
    # (no general builtin left); r4, read only by a kernel, is a direct view carved
    # with its storage (no NDArray)
    assert src.count("= _A") == 2 and src.count("= _P") == 1 and "= _B" not in src
    assert src.count("d4, = _V") == 1 and "kill(r4)" not in src
    assert "r3._data, d4" in src  # a reshape's device is its source's
    vm["main"](np.zeros((2, 6), F32))


def test_kill_twice_is_harmless():
    instrs = [
        Call(1, B + "alloc_storage", (imm([48]), imm(0), imm("global"))),
        Call(2, B + "alloc_tensor", (r(1), imm(0), imm([2, 6]), imm(F32))),
        KernelCall("exp", {}, 0, (r(0), r(2)), 1),
        Call(3, B + "alloc_tensor_direct", (imm([2, 6]), imm(F32), imm(0))),
        KernelCall("exp", {}, 0, (r(2), r(3)), 1),
        Kill(2),
        Kill(2),
        Kill(1),
        Kill(1),
        Ret(3),
    ]
    for poison in (False, True):
        vm = hetvm.VirtualMachine(exe_of(instrs, 4), poison=poison)
        x = np.zeros((2, 6), F32)
        out = vm["main"](x)
        np.testing.assert_allclose(out.numpy(), np.e, rtol=1e-6)
        rep = vm.memory_report()["cpu:0"]
        assert rep["bytes_in_use"] == 48 and rep["peak_bytes"] == 96


def test_poison_fills_a_killed_view_of_a_live_block():
    alloc = PooledAllocator(hetvm.cpu(0), poison=True)
    st = Storage(alloc.alloc(16))
    t = view(st.allocation, 0, (4,), F32)
    t._data[...] = 1.0
    t._poison()
    assert np.isnan(t._data).all()


def _run_error(instrs, nregs, match):
    vm = hetvm.VirtualMachine(exe_of(instrs, nregs))
    with pytest.raises(HetvmRuntimeError, match=match):
        vm["main"](np.zeros((2, 6), F32))
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 0
    return vm


def test_specialised_alloc_tensor_errors_are_the_general_ones():
    storage = Call(1, B + "alloc_storage", (imm([48]), imm(0), imm("global")))
    _run_error([storage, Call(2, B + "alloc_tensor", (r(1), imm(8), imm([2, 6]), imm(F32))), Ret(2)],
               3, "does not fit in a storage of 48 bytes")
    _run_error([storage, Kill(1), Call(2, B + "alloc_tensor", (r(1), imm(0), imm([2]), imm(F32))), Ret(2)],
               3, "alloc_tensor needs a Storage, got NoneType")
    _run_error([Call(2, B + "alloc_tensor", (r(0), imm(0), imm([2]), imm(F32))), Ret(2)],
               3, "alloc_tensor needs a Storage, got NDArray")
    _run_error([storage, Call(2, B + "alloc_tensor", (r(1), imm(0), imm([2]), imm("complex64"))), Ret(2)],
               3, "unsupported dtype")
    _run_error([storage, Call(2, B + "alloc_tensor", (r(1), imm(0), imm([-2]), imm(F32))), Ret(2)],
               3, "negative dimension")
    # a storage whose block was given back: every view of it was released too
    st = Storage(NaiveAllocator(hetvm.cpu(0)).alloc(16))
    st.allocation.force_free()
    vm = hetvm.VirtualMachine(exe_of([Ret(0)], 1))
    with pytest.raises(HetvmRuntimeError, match="alloc_tensor on a released storage"):
        static_alloc_tensor(vm._builtins, 0, [4], F32)(st)


def test_specialised_reshape_and_view_at_errors_are_the_general_ones():
    head = [
        Call(1, B + "alloc_storage", (imm([48]), imm(0), imm("global"))),
        Call(2, B + "alloc_tensor", (r(1), imm(0), imm([2, 6]), imm(F32))),
    ]
    _run_error(head + [Call(3, B + "reshape", (r(2), imm([5, -1]))), Ret(3)], 4,
               r"cannot reshape a tensor of shape \(2, 6\)")
    _run_error(head + [Call(3, B + "reshape", (r(2), imm([7]))), Ret(3)], 4, "cannot reshape")
    _run_error(head + [Kill(2), Call(3, B + "reshape", (r(2), imm([12]))), Ret(3)], 4,
               "reshape needs a live tensor, got NoneType")
    _run_error(head + [Call(3, B + "view_at", (r(2), imm(8), imm([2, 6]))), Ret(3)], 4,
               "view_at: .* does not fit")
    _run_error(head + [Call(3, B + "view_at", (r(1), imm(0), imm([2]))), Ret(3)], 4,
               "view_at needs a live tensor, got Storage")


def test_specialised_reshape_and_view_at_results():
    instrs = [
        Call(1, B + "alloc_storage", (imm([48]), imm(0), imm("global"))),
        Call(2, B + "alloc_tensor", (r(1), imm(0), imm([2, 6]), imm(F32))),
        KernelCall("exp", {}, 0, (r(0), r(2)), 1),
        Call(3, B + "view_at", (r(2), imm(24), imm([1, 6]))),  # the second row
        Call(4, B + "reshape", (r(3), imm([-1, 3]))),
        Call(5, B + "reshape", (r(2), imm([12]))),
        Call(6, B + "make_tuple", (r(4), r(5))),
        Kill(3),
        Kill(2),
        Kill(1),
        Ret(6),
    ]
    vm = hetvm.VirtualMachine(exe_of(instrs, 7))
    x = np.arange(12, dtype=F32).reshape(2, 6) / 10
    row, flat = vm["main"](x)
    assert row.shape == (2, 3) and flat.shape == (12,)
    assert row.offset == 24 and flat.offset == 0 and row.allocation is flat.allocation
    np.testing.assert_allclose(row.numpy(), np.exp(x[1]).reshape(2, 3), rtol=1e-6)
    np.testing.assert_allclose(flat.numpy(), np.exp(x).ravel(), rtol=1e-6)
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 48
    del row
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 48
    del flat
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 0


def test_empty_reshape_falls_back_to_the_general_builtin():
    instrs = [
        Call(1, B + "alloc_storage", (imm([0]), imm(0), imm("global"))),
        Call(2, B + "alloc_tensor", (r(1), imm(0), imm([0, 6]), imm(F32))),
        Call(3, B + "reshape", (r(2), imm([-1, 0]))),  # NumPy refuses; the builtin makes (0, 0)
        Kill(2),
        Kill(1),
        Ret(3),
    ]
    vm = hetvm.VirtualMachine(exe_of(instrs, 4))
    out = vm["main"](np.zeros((2, 6), F32))
    assert out.shape == (0, 0)


def test_pooled_buffers_keep_their_views_across_calls():
    vm = hetvm.VirtualMachine(reshape_exe(), allocator="pooled")
    x = np.ones((2, 6), F32)
    first = vm["main"](x)
    data = first._data
    del first  # the arena goes back to the pool with the views carved from it
    second = vm["main"](x)
    assert second._data is data  # the same reshape of the same pooled buffer
    np.testing.assert_allclose(second.numpy(), np.e, rtol=1e-6)
    held = vm["main"](x)  # the pooled buffer is still held: a fresh one, fresh views
    assert held._data is not data and not np.shares_memory(held._data, data)
    del second, held
    vm.release_pools()
    stats = vm.allocator(0).stats()
    assert stats["pool_bytes"] == stats["reserved_bytes"] == stats["segments"] == 0


def test_naive_blocks_keep_no_views():
    vm = hetvm.VirtualMachine(reshape_exe(), allocator="naive")
    out = vm["main"](np.ones((2, 6), F32))
    assert out.allocation.views is None


def test_kept_views_follow_their_source():
    from hetvm.runtime.builtins import static_view

    vm = hetvm.VirtualMachine(exe_of([Ret(0)], 1))
    alloc = PooledAllocator(hetvm.cpu(0))
    block = alloc.alloc(64)
    block.buffer[:] = np.arange(64, dtype=np.uint8)
    a = view(block, 0, (8,), F32)
    b = view(block, 32, (8,), F32)
    flat = static_view(vm._builtins, "vm.builtin.reshape", [[2, 4]])
    row = static_view(vm._builtins, "vm.builtin.view_at", [16, [4]])
    for src in (a, b, a, b):  # each source gets its own view, never the other's
        got = flat(src)
        assert got.offset == src.offset and np.shares_memory(got._data, src._data)
        np.testing.assert_array_equal(got._data.ravel(), src._data)
        tail = row(src)
        assert tail.offset == src.offset + 16
        np.testing.assert_array_equal(tail._data, src._data[4:])
    assert len(block.views) == 2


def test_shape_errors_still_name_the_whole_shape():
    vm = hetvm.VirtualMachine(reshape_exe())
    with pytest.raises(HetvmRuntimeError, match=r"parameter 'x' dimension 1 .*expected 6, given 5 "
                       r"\(shape \(2, 6\), given \(2, 5\)\)"):
        vm["main"](np.ones((2, 5), F32))
    from hetvm.runtime.shapes import ShapeBinder

    binder = ShapeBinder({"n": 3}, {}, "f")
    binder.bind_dims("x", [["var", "n"], 2], (3, 2))
    with pytest.raises(HetvmRuntimeError, match=r"expected n = 3 \(bound earlier\), given 4 "
                       r"\(shape \(n, 2\), given \(4, 2\)\)"):
        binder.bind_dims("x", [["var", "n"], 2], (4, 2))


IDENTITY_AND_ADD = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")):
        y = R.add(x, x)
        return (x, y)
"""


def test_numpy_inputs_are_read_in_place_and_results_never_alias_them():
    from hetvm.runtime.device import cpu
    from hetvm.runtime.memory import ADOPTED
    from hetvm.runtime.ndarray import adopt
    from hetvm.script import from_source

    vm = hetvm.VirtualMachine(hetvm.build(from_source(IDENTITY_AND_ADD)))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    before = x.copy()
    same, doubled = vm["main"](x)
    np.testing.assert_array_equal(doubled.numpy(), 2 * before)
    np.testing.assert_array_equal(same.numpy(), before)
    assert not np.shares_memory(same.numpy(), x)  # the returned parameter is a copy
    np.testing.assert_array_equal(x, before)  # and the input was not written
    strided = np.arange(12, dtype=np.float32).reshape(2, 6)[:, ::2]  # copied, not adopted
    np.testing.assert_array_equal(vm["main"](strided)[1].numpy(), 2 * strided)
    assert adopt(strided, cpu(0)) is None
    assert adopt(x.astype(">f4"), cpu(0)) is None  # foreign byte order
    held = adopt(x, cpu(0))
    assert held.allocation.chunk is ADOPTED and np.shares_memory(held._data, x)
    del held, same, doubled
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 0
    np.testing.assert_array_equal(x, before)  # dropping them leaves the caller's bytes alone


# -- symbolic entry checks and size-only builtins ------------------------------------------
N = ["var", "n"]


def symbolic_exe(bounds=None, second=None):
    """exp(x) of x: (n, 4) into a block sized at run time (alloc_storage and
    alloc_tensor with a run-time shape: their size-only closures); a second
    parameter of shape ``second`` when given."""
    params = [{"kind": "tensor", "shape": [N, 4], "dtype": F32, "device": 0}]
    names = ["x"]
    if second is not None:
        params.append({"kind": "tensor", "shape": second, "dtype": F32, "device": 0})
        names.append("y")
    k = len(params)
    instrs = [
        Call(k, B + "make_shape", (imm([["mul", N, 16]]),)),
        Call(k + 1, B + "alloc_storage", (r(k), imm(0), imm("global"))),
        Call(k + 2, B + "make_shape", (imm([N, 4]),)),
        Call(k + 3, B + "alloc_tensor", (r(k + 1), imm(0), r(k + 2), imm(F32))),
        Kill(k + 1),
        KernelCall("exp", {}, 0, (r(0), r(k + 3)), 1),
        Ret(k + 3),
    ]
    func = VMFunction("main", names, params, k + 4, instrs, dict(bounds or {}))
    return Executable(CPU, [], {"main": func})


def test_size_only_builtins_run_a_symbolic_block_and_match_the_general_path():
    vm = hetvm.VirtualMachine(symbolic_exe())
    src = vm.source("main")
    # the result's storage holds it alone and is killed at once: one step, no Storage
    # (codegen._own_block_tensors), with its size and shape read at run time
    assert src.count("= _P") == 1 and "= _B" not in src and "_kill" not in src, src
    for n in (1, 3, 0):
        x = np.arange(4 * n, dtype=F32).reshape(n, 4) / 7
        np.testing.assert_allclose(vm["main"](x).numpy(), np.exp(x), rtol=1e-6)
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 0


def test_a_bound_or_shape_mismatch_takes_the_general_check_and_its_error():
    vm = hetvm.VirtualMachine(symbolic_exe(bounds={"n": [2, 5]}, second=[N, 4]))
    ok = np.ones((3, 4), F32)
    np.testing.assert_allclose(vm["main"](ok, ok).numpy(), np.exp(ok), rtol=1e-6)
    with pytest.raises(HetvmRuntimeError, match="below its lower bound 2"):
        vm["main"](np.ones((1, 4), F32), np.ones((1, 4), F32))
    with pytest.raises(HetvmRuntimeError, match="exceeds its upper bound 5"):
        vm["main"](np.ones((6, 4), F32), np.ones((6, 4), F32))
    with pytest.raises(HetvmRuntimeError, match=r"expected n = 3 \(bound earlier\), given 4"):
        vm["main"](ok, np.ones((4, 4), F32))
    with pytest.raises(HetvmRuntimeError, match="dimension 1 of function 'main': expected 4, given 5"):
        vm["main"](np.ones((3, 5), F32), ok)
    with pytest.raises(HetvmRuntimeError, match="expected 2 dimension"):
        vm["main"](np.ones((3, 4, 1), F32), ok)
    np.testing.assert_allclose(vm["main"](ok, ok).numpy(), np.exp(ok), rtol=1e-6)  # still usable
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 0


def test_a_compound_dimension_is_checked_after_every_variable_is_bound():
    vm = hetvm.VirtualMachine(symbolic_exe(second=[["mul", N, 2], 4]))
    x = np.ones((3, 4), F32)
    np.testing.assert_allclose(vm["main"](x, np.ones((6, 4), F32)).numpy(), np.exp(x), rtol=1e-6)
    with pytest.raises(HetvmRuntimeError, match="expected"):
        vm["main"](x, np.ones((5, 4), F32))


def test_the_size_only_storage_refuses_a_negative_size_as_the_general_one_does():
    b = hetvm.VirtualMachine(symbolic_exe()).state.builtins
    from hetvm.runtime.builtins import static_alloc_storage, static_alloc_tensor_at

    alloc = static_alloc_storage(b, 0, "global")
    call = CallState(b.state)
    with pytest.raises(HetvmRuntimeError, match="negative size"):
        alloc(call, (-4,))
    st = alloc(call, (np.int64(16),))  # not a plain int: the general builtin, same block size
    assert st.nbytes == 16
    at = static_alloc_tensor_at(b, 8, F32)
    with pytest.raises(HetvmRuntimeError, match="does not fit"):
        at(st, (3,))  # 8 + 12 bytes in a block of 16
    assert at(st, (2,))._data.shape == (2,)
    assert static_alloc_storage(b, 5) is None and static_alloc_tensor_at(b, -1, F32) is None
    call.free_all()


@pytest.mark.parametrize("maker", ["site_view", "constant_view"])
def test_a_view_site_keeps_placements_and_matches_the_general_view(maker):
    from hetvm.runtime import builtins as bi

    b = hetvm.VirtualMachine(symbolic_exe()).state.builtins
    src = hetvm.nd.array(np.arange(24, dtype=np.int64).reshape(1, 24))
    site = getattr(bi, maker)(b, "vm.builtin.slice_view")
    for n in (5, 5, 3, 24, 0, 5):  # repeated, changed, and back
        args = ((1,), (0,), (n,), (1,))
        got, want = site(src, *args), b.view("vm.builtin.slice_view", src, *args)
        assert got.shape == want.shape and got.offset == want.offset
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        assert got.allocation is src.allocation
    other = hetvm.nd.array(np.arange(12, dtype=np.int64).reshape(1, 12))
    np.testing.assert_array_equal(site(other, (1,), (0,), (5,), (1,)).numpy(), np.arange(5).reshape(1, 5))
    with pytest.raises(HetvmRuntimeError, match="not one contiguous run"):
        site(src, (1,), (0,), (5,), (2,))  # every other element
    reshape = getattr(bi, maker)(b, "vm.builtin.reshape")
    with pytest.raises(HetvmRuntimeError, match="cannot reshape"):
        reshape(src, (5, 5))
    np.testing.assert_array_equal(reshape(src, (3, 8)).numpy(), np.arange(24).reshape(3, 8))


def test_a_parameter_only_kernels_read_is_passed_as_its_array():
    vm = hetvm.VirtualMachine(symbolic_exe(second=[N, 4]))
    src = vm.source("main")
    assert "p0 = r0\n" in src and "r0._data" not in src, src  # raw: no tensor made for x
    x = np.arange(12, dtype=F32).reshape(3, 4) / 5
    want = np.exp(x)
    for given in (x, hetvm.nd.array(x), np.asfortranarray(x)):  # in place, a tensor, a copy
        np.testing.assert_allclose(vm["main"](given, x).numpy(), want, rtol=1e-6)
    with pytest.raises(HetvmRuntimeError, match="expected dtype float32"):
        vm["main"](x.astype(np.float64), x)
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 0


def test_a_result_in_a_block_of_its_own_that_does_not_fit_says_so_and_frees_it():
    exe = symbolic_exe()
    func = exe.functions["main"]
    k = 1
    func.instructions[2] = Call(k + 2, B + "make_shape", (imm([N, 8]),))  # n*32 bytes in n*16
    vm = hetvm.VirtualMachine(exe)
    assert "= _P" in vm.source("main")
    with pytest.raises(HetvmRuntimeError, match="does not fit in a storage of 48 bytes"):
        vm["main"](np.ones((3, 4), F32))
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 0
