"""Kills between the kernel calls of a segment (hetvm/runtime/codegen.py,
``_Emitter.defer_kill``): a kill of a value the pending calls read waits until
their segment has run instead of splitting it, unless the block it may give
back could be taken by an allocation the segment would otherwise run after --
the VM's allocations and releases stay in program order, so its peak does."""

import re

import numpy as np
import pytest

import hetvm
from hetvm.kernels import codegen_numba
from hetvm.runtime.bytecode import Call, Executable, KernelCall, Kill, Ret, VMFunction

pytest.importorskip("numba")

B = "vm.builtin."
F32 = "float32"
CPU = [{"kind": "cpu", "index": 0, "memory_scope": "global"}]


def r(i):
    return ("r", i)


def imm(v):
    return ("i", v)


@pytest.fixture
def numba_on(monkeypatch):
    monkeypatch.setenv("HETVM_NUMBA", "1")
    codegen_numba._checked = False


def _exe(instrs, nregs):
    param = {"kind": "tensor", "shape": [2, 6], "dtype": F32, "device": 0}
    return Executable(CPU, [], {"main": VMFunction("main", ["x"], [param], nregs, instrs, {})})


def _run(exe, monkeypatch, numba, **kwargs):
    """(result, peak bytes, generated source) of one call on a fresh VM."""
    monkeypatch.setenv("HETVM_NUMBA", "1" if numba else "0")
    codegen_numba._checked = False
    vm = hetvm.VirtualMachine(exe, **kwargs)
    x = np.linspace(-2, 2, 12, dtype=F32).reshape(2, 6)
    out = vm["main"](x).numpy()
    return out, vm.memory_report()["cpu:0"]["peak_bytes"], vm.source("main")


def _segments(src):
    return len(re.findall(r"_S\d+\(", src))


def _line_of(src, text):
    """The index of the first generated line that starts with ``text``."""
    return next(i for i, line in enumerate(src.splitlines()) if line.strip().startswith(text))


def _want(x):
    return (np.exp(x) + x) * (np.exp(x) + x)


# a symbolic arena's tensors (run-time shapes: NDArrays over one storage that
# lives to the end), as in llama_past: killing one gives no block back
ARENA = [
    Call(1, B + "alloc_storage", (imm([96]), imm(0), imm("global"))),
    Call(2, B + "shape_of", (r(0),)),
    Call(3, B + "alloc_tensor", (r(1), imm(0), r(2), imm(F32))),
    KernelCall("exp", {}, 0, (r(0), r(3))),
    Call(4, B + "alloc_tensor", (r(1), imm(48), r(2), imm(F32))),
    KernelCall("add", {}, 0, (r(3), r(0), r(4))),
    Kill(3),  # read by the pending add: split the segment before
    Call(5, B + "alloc_tensor_direct", (r(2), imm(F32), imm(0))),
    KernelCall("multiply", {}, 0, (r(4), r(4), r(5))),
    Kill(4),
    Kill(1),
    Ret(5),
]

# tensors in blocks of their own: killing a gives its block back, and the
# allocation after the kill takes those bytes in program order
OWN = [
    Call(1, B + "shape_of", (r(0),)),
    Call(2, B + "alloc_tensor_direct", (r(1), imm(F32), imm(0))),
    KernelCall("exp", {}, 0, (r(0), r(2))),
    Call(3, B + "alloc_tensor_direct", (r(1), imm(F32), imm(0))),
    KernelCall("add", {}, 0, (r(2), r(0), r(3))),
    Kill(2),
    Call(4, B + "alloc_tensor_direct", (r(1), imm(F32), imm(0))),
    KernelCall("multiply", {}, 0, (r(3), r(3), r(4))),
    Kill(3),
    Ret(4),
]


def test_a_kill_of_a_value_the_segment_reads_waits_for_the_segment_instead_of_splitting_it(numba_on, monkeypatch):
    exe = _exe(ARENA, 6)
    out, peak, src = _run(exe, monkeypatch, numba=True)
    assert _segments(src) == 1, src
    assert _line_of(src, "_kill(r3)") > _line_of(src, "_S"), src
    want, numpy_peak, numpy_src = _run(exe, monkeypatch, numba=False)
    assert _segments(numpy_src) == 0
    x = np.linspace(-2, 2, 12, dtype=F32).reshape(2, 6)
    np.testing.assert_allclose(want, _want(x), rtol=1e-6)
    np.testing.assert_allclose(out, want, rtol=1e-6)
    assert peak == numpy_peak == 96 + 48  # the arena and the result


def test_a_kill_that_gives_a_block_back_still_splits_before_an_allocation_that_would_take_it(numba_on, monkeypatch):
    exe = _exe(OWN, 5)
    out, peak, src = _run(exe, monkeypatch, numba=True)
    assert _segments(src) == 2, src
    assert _line_of(src, "_kill(r2)") < _line_of(src, "r4 = "), src
    want, numpy_peak, _ = _run(exe, monkeypatch, numba=False)
    np.testing.assert_allclose(out, want, rtol=1e-6)
    assert peak == numpy_peak == 96  # two blocks of 48 at once, as in program order


def test_a_kill_that_gives_a_block_back_waits_where_no_allocation_follows(numba_on, monkeypatch):
    instrs = OWN[:5] + [OWN[6], OWN[5]] + OWN[7:]  # the result allocated before the kill
    exe = _exe(instrs, 5)
    out, peak, src = _run(exe, monkeypatch, numba=True)
    assert _segments(src) == 1, src
    want, numpy_peak, _ = _run(exe, monkeypatch, numba=False)
    np.testing.assert_allclose(out, want, rtol=1e-6)
    assert peak == numpy_peak == 3 * 48


def test_a_storage_kill_waits_for_the_segment_that_reads_its_views(numba_on, monkeypatch):
    """Planned tensors (direct views) hold no count: their storage's kill, right
    after the last reader, must run after the segment, not be hoisted above it."""
    instrs = [
        Call(1, B + "alloc_storage", (imm([48]), imm(0), imm("global"))),
        Call(2, B + "alloc_tensor", (r(1), imm(0), imm([2, 6]), imm(F32))),
        KernelCall("exp", {}, 0, (r(0), r(2))),
        Call(3, B + "shape_of", (r(0),)),
        Call(4, B + "alloc_tensor_direct", (r(3), imm(F32), imm(0))),
        KernelCall("add", {}, 0, (r(2), r(0), r(4))),
        Kill(2),
        Kill(1),
        Call(5, B + "alloc_tensor_direct", (r(3), imm(F32), imm(0))),
        KernelCall("multiply", {}, 0, (r(4), r(4), r(5))),
        Kill(4),
        Ret(5),
    ]
    exe = _exe(instrs, 6)
    out, peak, src = _run(exe, monkeypatch, numba=True)
    assert _segments(src) == 2, src
    assert _line_of(src, "_kill(r1)") > _line_of(src, "_S"), src
    assert _line_of(src, "_kill(r1)") < _line_of(src, "r5 = "), src
    want, numpy_peak, _ = _run(exe, monkeypatch, numba=False)
    np.testing.assert_allclose(out, want, rtol=1e-6)
    assert peak == numpy_peak == 96


@pytest.mark.parametrize("instrs", [ARENA, OWN], ids=["arena", "own"])
def test_poisoning_kills_at_their_pcs_after_the_last_read(numba_on, monkeypatch, instrs):
    """With poison on, a kill fills the bytes it gives up (NaN for floats); it
    runs where the program has it, so no kernel reads poisoned bytes."""
    exe = _exe(instrs, 6)
    out, peak, src = _run(exe, monkeypatch, numba=True, poison=True)
    assert _segments(src) == 0, src
    kill = next(ins for ins in instrs if isinstance(ins, Kill))
    lines = src.splitlines()
    kernels = [i for i, line in enumerate(lines) if re.search(r"_K\d+\(", line)]
    assert kernels[1] < _line_of(src, f"C.kill(r{kill.reg})") < kernels[2], src
    want, numpy_peak, _ = _run(exe, monkeypatch, numba=False)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, want, rtol=1e-6)
    assert peak == numpy_peak
