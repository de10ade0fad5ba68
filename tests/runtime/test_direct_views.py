"""Direct views: planned tensors read only by kernels run as backend arrays
carved once with their storage, with no alloc_tensor and no kill at run time."""

import numpy as np
import pytest

import hetvm
from hetvm.runtime.bytecode import Call, Executable, KernelCall, Kill, Ret, VMFunction
from hetvm.script import from_source
from hetvm.transform import PassContext

B = "vm.builtin."
F32 = "float32"
CPU = {"kind": "cpu", "index": 0, "memory_scope": "global"}


def r(i):
    return ("r", i)


def imm(v):
    return ("i", v)


def tensor(shape):
    return {"kind": "tensor", "shape": shape, "dtype": F32, "device": 0}


CHAIN = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32"), y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        a = R.add(x, y)
        b = R.multiply(a, y)
        c = R.subtract(b, x)
        d = R.add(c, a)
        return d
"""


def _built_chain(**vm_kwargs):
    with PassContext(disabled_pass=["FuseOps"]):
        exe = hetvm.build(from_source(CHAIN))
    return hetvm.VirtualMachine(exe, **vm_kwargs)


@pytest.mark.parametrize("allocator", ["pooled", "naive"])
def test_built_chain_runs_its_intermediates_as_direct_views(allocator):
    vm = _built_chain(allocator=allocator)
    src = vm.source("main")
    assert "= _V" in src  # carved with the storage
    kernel_lines = [line for line in src.splitlines() if "_K" in line]
    assert any(" d" in line or "(d" in line for line in kernel_lines), src
    rng = np.random.default_rng(0)
    for _ in range(3):  # the views carved at the first call serve the next ones
        x, y = rng.standard_normal((2, 4)).astype(F32)
        a = x + y
        np.testing.assert_allclose(vm["main"](x, y).numpy(), a * y - x + a, rtol=1e-6)
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 0  # results dropped above


def test_poison_and_trace_keep_every_kill():
    for kwargs in ({"poison": True}, {"trace": True}):
        vm = _built_chain(**kwargs)
        src = vm.source("main")
        assert "= _V" not in src and "C.kill" in src, kwargs
        x = np.arange(4, dtype=F32)
        np.testing.assert_allclose(vm["main"](x, x).numpy(), (2 * x) * x - x + 2 * x)


def test_storage_kill_waits_for_the_last_kernel_reading_its_views():
    """main(x): t = exp(x) in S; kill S; u = -x in a new storage S2; return t + u.
    A view holds no count on its block: had S gone back to the pool at its kill,
    S2 would get the same bytes and u would overwrite t."""
    instrs = [
        Call(1, B + "alloc_storage", (imm([16]), imm(0), imm("global"))),
        Call(2, B + "alloc_tensor", (r(1), imm(0), imm([4]), imm(F32))),
        KernelCall("exp", {}, 0, (r(0), r(2)), 1),
        Kill(1),
        Call(3, B + "alloc_storage", (imm([16]), imm(0), imm("global"))),
        Call(4, B + "alloc_tensor", (r(3), imm(0), imm([4]), imm(F32))),
        KernelCall("negative", {}, 0, (r(0), r(4)), 1),
        Kill(3),
        Call(5, B + "alloc_tensor_direct", (imm([4]), imm(F32), imm(0))),
        KernelCall("add", {}, 0, (r(2), r(4), r(5)), 1),
        Kill(2),
        Kill(4),
        Ret(5),
    ]
    main = VMFunction("main", ["x"], [tensor([4])], 6, instrs, {})
    vm = hetvm.VirtualMachine(Executable([CPU], [], {"main": main}))
    src = vm.source("main")
    assert "d2, = _V" in src and "d4, = _V" in src
    x = np.linspace(-1, 1, 4, dtype=F32)
    for _ in range(2):
        np.testing.assert_allclose(vm["main"](x).numpy(), np.exp(x) - x, rtol=1e-6)
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 0


def test_a_tensor_that_leaves_the_kernels_keeps_its_ndarray():
    """Returned, passed to a builtin or a function: the NDArray path, not a view."""
    instrs = [
        Call(1, B + "alloc_storage", (imm([32]), imm(0), imm("global"))),
        Call(2, B + "alloc_tensor", (r(1), imm(0), imm([4]), imm(F32))),
        KernelCall("exp", {}, 0, (r(0), r(2)), 1),
        Call(3, B + "alloc_tensor", (r(1), imm(16), imm([4]), imm(F32))),
        KernelCall("negative", {}, 0, (r(2), r(3)), 1),
        Call(4, B + "make_tuple", (r(3),)),
        Kill(1),
        Ret(4),
    ]
    main = VMFunction("main", ["x"], [tensor([4])], 5, instrs, {})
    vm = hetvm.VirtualMachine(Executable([CPU], [], {"main": main}))
    src = vm.source("main")
    assert "d2, = _V" in src  # read by kernels only
    assert "d3" not in src and "r3 = _A" in src  # leaves in a tuple
    x = np.linspace(-1, 1, 4, dtype=F32)
    (out,) = vm["main"](x)
    np.testing.assert_allclose(out.numpy(), -np.exp(x), rtol=1e-6)
    again = vm["main"](x)[0]
    assert not np.shares_memory(again._data, out._data)  # the held block is not reused
    np.testing.assert_allclose(out.numpy(), -np.exp(x), rtol=1e-6)


def test_a_failing_kernel_on_a_direct_view_frees_the_call_and_names_the_pc():
    instrs = [
        Call(1, B + "alloc_storage", (imm([16]), imm(0), imm("global"))),
        Call(2, B + "alloc_tensor", (r(1), imm(0), imm([4]), imm(F32))),
        KernelCall("exp", {}, 0, (r(0), r(2)), 1),
        Call(3, B + "alloc_tensor_direct", (imm([3]), imm(F32), imm(0))),
        KernelCall("add", {}, 0, (r(2), r(2), r(3)), 1),  # (4,) does not fit in (3,)
        Kill(1),
        Ret(3),
    ]
    main = VMFunction("main", ["x"], [tensor([4])], 4, instrs, {})
    vm = hetvm.VirtualMachine(Executable([CPU], [], {"main": main}))
    assert "d2, = _V" in vm.source("main")
    with pytest.raises(hetvm.HetvmError, match="pc 4") as info:
        vm["main"](np.ones(4, F32))
    # the kernel failed; a direct view's register is not "empty"
    assert str(info.value).startswith("kernel 'add' on cpu:0 failed"), info.value
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 0


def _inplace_exe(returned_view: bool):
    """main(x): t = exp(x) in S; u = view_at(t) (an in-place step, as
    InplaceElementwise writes it); u = -t in place; out = u + x (or u returned)."""
    instrs = [
        Call(1, B + "alloc_storage", (imm([16]), imm(0), imm("global"))),
        Call(2, B + "alloc_tensor", (r(1), imm(0), imm([4]), imm(F32))),
        Kill(1),
        KernelCall("exp", {}, 0, (r(0), r(2)), 1),
        Call(3, B + "view_at", (r(2), imm(0), imm([2, 2]))),
        KernelCall("negative", {}, 0, (r(3), r(3)), 1),
    ]
    if returned_view:
        instrs += [Kill(2), Ret(3)]
    else:
        instrs += [
            Call(4, B + "alloc_tensor_direct", (imm([2, 2]), imm(F32), imm(0))),
            Call(5, B + "reshape", (r(0), imm([2, 2]))),
            KernelCall("add", {}, 0, (r(3), r(5), r(4)), 1),
            Kill(3), Kill(2), Ret(4),
        ]
    main = VMFunction("main", ["x"], [tensor([4])], 6, instrs, {})
    return hetvm.VirtualMachine(Executable([CPU], [], {"main": main}))


def test_a_view_of_a_direct_tensor_is_direct_too():
    vm = _inplace_exe(returned_view=False)
    src = vm.source("main")
    assert "d2, d3, = _V" in src and "view_at" not in src
    x = np.linspace(-1, 1, 4, dtype=F32)
    for _ in range(2):
        np.testing.assert_allclose(vm["main"](x).numpy(), (-np.exp(x) + x).reshape(2, 2), rtol=1e-6)
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 0


def test_a_returned_view_keeps_its_source_an_ndarray():
    vm = _inplace_exe(returned_view=True)
    src = vm.source("main")
    assert "= _V" not in src  # the view leaves: it and its source are NDArrays
    x = np.linspace(-1, 1, 4, dtype=F32)
    out = vm["main"](x)
    np.testing.assert_allclose(out.numpy(), -np.exp(x).reshape(2, 2), rtol=1e-6)
    again = vm["main"](x)
    assert not np.shares_memory(again._data, out._data)


def test_views_at_the_same_place_are_one_array():
    """An in-place output is a view at its input's place: one array object, so
    NumPy's ufunc sees ``out`` is its input (not a second view it must check)."""
    from hetvm.runtime.direct_carve import Place, make_carver
    from hetvm.runtime.memory import Storage

    alloc = _inplace_exe(returned_view=False).allocator(0)
    storage = Storage(alloc.alloc(64))
    f32 = np.dtype(F32)
    specs = [(0, (4,)), (16, (4,)), (0, (4,)), (0, (2, 2))]
    carve = make_carver([Place(off, dims, f32, "test") for off, dims in specs], (), "test")
    a, b, same, other = carve(storage)
    assert same is a and b is not a and other is not a
    assert np.shares_memory(other, a) and not np.shares_memory(a, b)
    assert carve(storage)[2] is a  # kept with the block


def test_an_in_place_chain_of_tiny_tensors_runs_over_one_array():
    with PassContext(disabled_pass=["FuseOps"], config={"hetvm.inplace.min_bytes": 0}):
        exe = hetvm.build(from_source(CHAIN))
    assert exe.metadata["inplace_elementwise"] == {"main": 1}  # c = b - x over b
    vm = hetvm.VirtualMachine(exe)
    rng = np.random.default_rng(1)
    for _ in range(2):
        x, y = rng.standard_normal((2, 4)).astype(F32)
        a = x + y
        np.testing.assert_allclose(vm["main"](x, y).numpy(), a * y - x + a, rtol=1e-6)


N = ["var", "n"]


def _symbolic_exe(misfit=False, tuple_source=False):
    """main(x: (n,)): t = exp(x) and u = -t in one storage of 8n bytes at symbolic
    offsets (make_shape / prim_value registers, as a symbolic memory plan has
    them), v = reshape(u, (n, 1)); returns v + v (or u in a tuple)."""
    second = ["mul", N, 8] if misfit else ["mul", N, 4]
    instrs = [
        Call(1, B + "make_shape", (imm([["mul", N, 8]]),)),
        Call(2, B + "alloc_storage", (r(1), imm(0), imm("global"))),
        Call(3, B + "make_shape", (imm([N]),)),
        Call(4, B + "alloc_tensor", (r(2), imm(0), r(3), imm(F32))),
        KernelCall("exp", {}, 0, (r(0), r(4)), 1),
        Call(5, B + "prim_value", (imm(second),)),
        Call(6, B + "alloc_tensor", (r(2), r(5), r(3), imm(F32))),
        KernelCall("negative", {}, 0, (r(4), r(6)), 1),
        Call(7, B + "make_shape", (imm([N, 1]),)),
        Call(8, B + "reshape", (r(6), r(7))),
        Call(9, B + "alloc_tensor_direct", (imm([N, 1]), imm(F32), imm(0))),
        KernelCall("add", {}, 0, (r(8), r(8), r(9)), 1),
        Kill(4), Kill(8), Kill(2), Kill(3), Kill(5), Kill(7),
    ]  # fmt: skip
    if tuple_source:
        instrs += [Call(10, B + "make_tuple", (r(6), r(9))), Ret(10)]
    else:
        instrs += [Kill(6), Ret(9)]
    main = VMFunction("main", ["x"], [tensor([N])], 11, instrs, {})
    return hetvm.VirtualMachine(Executable([CPU], [], {"main": main}))


def test_symbolic_offsets_and_shapes_are_carved_once_per_shape():
    vm = _symbolic_exe()
    src = vm.source("main")
    # one carve of t, u and the reshape of u; the offset and shape registers that
    # only placed them are gone, and no tensor is made by alloc_tensor or reshape
    assert "d4, d6, d8, = _V" in src and ", E)" in src, src
    assert "r3 =" not in src and "r5 =" not in src and "r7 =" not in src and "_A" not in src
    for n in (4, 7, 4, 1, 0):  # new shapes carve anew; the pooled block's views follow
        x = np.linspace(-1, 1, n, dtype=F32)
        np.testing.assert_allclose(vm["main"](x).numpy(), -2 * np.exp(x).reshape(n, 1), rtol=1e-6)
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 0


def test_a_symbolic_view_of_a_tensor_that_keeps_its_ndarray_keeps_its_own():
    vm = _symbolic_exe(tuple_source=True)
    src = vm.source("main")
    assert "d4, = _V" in src and "d6" not in src and "d8" not in src, src
    x = np.linspace(-1, 1, 5, dtype=F32)
    u, v = vm["main"](x)
    np.testing.assert_allclose(u.numpy(), -np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(v.numpy(), -2 * np.exp(x).reshape(5, 1), rtol=1e-6)


def test_a_symbolic_tensor_that_does_not_fit_names_its_pc():
    vm = _symbolic_exe(misfit=True)
    with pytest.raises(hetvm.HetvmError, match=r"pc 6: tensor \(3,\) float32 at offset 24 .* storage of 24 bytes"):
        vm["main"](np.zeros(3, F32))
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 0
    np.testing.assert_allclose(vm["main"](np.zeros(0, F32)).numpy(), np.zeros((0, 1)))  # fits at n = 0


def test_a_variable_bound_in_the_body_keeps_the_ndarray_path():
    """m is bound by match_cast mid-function: its tensors are made where they are."""
    M = ["var", "m"]
    instrs = [
        Call(1, B + "match_cast", (r(0), imm({"kind": "tensor", "shape": [M], "dtype": F32, "device": 0}))),
        Call(2, B + "alloc_storage", (imm([["mul", M, 4]]), imm(0), imm("global"))),
        Call(3, B + "alloc_tensor", (r(2), imm(0), imm([M]), imm(F32))),
        KernelCall("exp", {}, 0, (r(1), r(3)), 1),
        Call(4, B + "alloc_tensor_direct", (imm([M]), imm(F32), imm(0))),
        KernelCall("negative", {}, 0, (r(3), r(4)), 1),
        Kill(3), Kill(2), Ret(4),
    ]  # fmt: skip
    info = {"kind": "tensor", "ndim": 1, "dtype": F32, "device": 0}
    main = VMFunction("main", ["x"], [info], 5, instrs, {})
    vm = hetvm.VirtualMachine(Executable([CPU], [], {"main": main}))
    assert "= _V" not in vm.source("main")
    x = np.linspace(-1, 1, 3, dtype=F32)
    np.testing.assert_allclose(vm["main"](x).numpy(), -np.exp(x), rtol=1e-6)


SYMBOLIC = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 16), "float32"), y: R.Tensor(("n", 16), "float32")) -> R.Tensor(("n", 16), "float32"):
        a = R.add(x, y)
        b = R.multiply(a, y)
        c = R.subtract(b, x)
        d = R.add(c, a)
        return d
"""


def test_a_built_symbolic_program_runs_its_intermediates_as_direct_views():
    with PassContext(disabled_pass=["FuseOps"]):
        exe = hetvm.build(from_source(SYMBOLIC))
    vm = hetvm.VirtualMachine(exe)
    src = vm.source("main")
    assert "= _V" in src and ", E)" in src and "_A" not in src, src
    rng = np.random.default_rng(2)
    for n in (3, 9, 3):
        x, y = rng.standard_normal((2, n, 16)).astype(F32)
        a = x + y
        np.testing.assert_allclose(vm["main"](x, y).numpy(), a * y - x + a, rtol=1e-6)
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 0


def _tuple_exe(leak=False):
    """main(x: (4,)): t = exp(x), u = -x, w = v * v for v = (t, u)[1], all in one
    storage; returns concat((t, u, w)) (and, with ``leak``, the tuple (t, u) too)."""
    instrs = [
        Call(1, B + "alloc_storage", (imm([64]), imm(0), imm("global"))),
        Call(2, B + "alloc_tensor", (r(1), imm(0), imm([4]), imm(F32))),
        KernelCall("exp", {}, 0, (r(0), r(2)), 1),
        Call(3, B + "alloc_tensor", (r(1), imm(16), imm([4]), imm(F32))),
        KernelCall("negative", {}, 0, (r(0), r(3)), 1),
        Call(4, B + "make_tuple", (r(2), r(3))),
        Call(5, B + "tuple_getitem", (r(4), imm(1))),
        Call(6, B + "alloc_tensor", (r(1), imm(32), imm([4]), imm(F32))),
        KernelCall("multiply", {}, 0, (r(5), r(5), r(6)), 1),
        Call(7, B + "alloc_tensor_direct", (imm([12]), imm(F32), imm(0))),
        Call(8, B + "make_tuple", (r(2), r(3), r(6))),
        KernelCall("concat", {"axis": 0}, 0, (r(8), r(7)), 1),
        Kill(6), Kill(8), Kill(1),
    ]  # fmt: skip
    if leak:
        instrs += [Call(9, B + "make_tuple", (r(7), r(4))), Ret(9)]
    else:
        instrs += [Kill(5), Kill(4), Kill(2), Kill(3), Ret(7)]
    main = VMFunction("main", ["x"], [tensor([4])], 10, instrs, {})
    return hetvm.VirtualMachine(Executable([CPU], [], {"main": main}))


def test_a_tuple_of_direct_views_read_by_kernels_is_a_list_of_them():
    vm = _tuple_exe()
    src = vm.source("main")
    # p is read only through tuple_getitem: gone; v is u's array; the concat's
    # tuple is the list of the three arrays
    assert "d2, d3, d5, d6, = _V" in src and "r8 = [d2, d3, d6]" in src, src
    assert "r4" not in src and "r5" not in src and "_kill" in src and "= _A" not in src
    x = np.linspace(-1, 1, 4, dtype=F32)
    for _ in range(2):
        want = np.concatenate([np.exp(x), -x, x * x])
        np.testing.assert_allclose(vm["main"](x).numpy(), want, rtol=1e-6)
    assert vm.memory_report()["cpu:0"]["bytes_in_use"] == 0


def test_a_tuple_that_leaves_keeps_its_fields_ndarrays():
    vm = _tuple_exe(leak=True)
    src = vm.source("main")
    assert "d2" not in src and "d3" not in src and "d5" not in src, src
    x = np.linspace(-1, 1, 4, dtype=F32)
    out, (t, u) = vm["main"](x)
    np.testing.assert_allclose(out.numpy(), np.concatenate([np.exp(x), -x, x * x]), rtol=1e-6)
    np.testing.assert_allclose(t.numpy(), np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(u.numpy(), -x, rtol=1e-6)


def test_a_block_without_views_for_the_carver_reuses_its_placements(monkeypatch):
    """The pool may hand a storage a block another storage used last: no views of
    this carver's there, but the placements at the same shape values are not
    evaluated again (BLOOM's symbolic storages re-evaluated hundreds of offset
    expressions a call)."""
    from hetvm.runtime import direct_carve
    from hetvm.runtime.direct_carve import Place, make_carver
    from hetvm.runtime.memory import NaiveAllocator, Storage

    evaluated = []
    real = direct_carve._placements
    monkeypatch.setattr(direct_carve, "_placements", lambda *a: evaluated.append(1) or real(*a))
    f32 = np.dtype(F32)
    n = ["var", "n"]
    carve = make_carver([Place(0, (n,), f32, "test"), Place(["mul", n, 4], (2,), f32, "test")], ("n",), "test")
    alloc = NaiveAllocator(hetvm.cpu(0))  # no views kept with a block
    for _ in range(3):
        a, b = carve(Storage(alloc.alloc(64)), {"n": 3})
        assert a.shape == (3,) and b.shape == (2,)
    assert len(evaluated) == 1
    carve(Storage(alloc.alloc(64)), {"n": 4})  # other values: placed anew
    assert len(evaluated) == 2
