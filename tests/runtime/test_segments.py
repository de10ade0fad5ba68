"""Segments: a run of consecutive kernel calls in a VM function runs as one
compiled Numba function (``hetvm/runtime/segments.py``); what it computes,
when it falls back to the NumPy kernels, and the errors it raises."""

import re

import numpy as np
import pytest

import hetvm
from hetvm.kernels import codegen_numba
from hetvm.script import from_source
from hetvm.transform import PassContext

pytest.importorskip("numba")

F32 = "float32"

CHAIN = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), y: R.Tensor((4,), "float32"),
             w: R.Tensor((4, 3), "float32")) -> R.Tensor(("n", 3), "float32"):
        n = T.int64()
        a = R.add(x, y)
        b = R.multiply(a, y)
        c = R.subtract(b, x)
        d = R.matmul(c, w)
        e = R.reshape(d, R.shape([n * 3]))
        f = R.exp(e)
        g = R.reshape(f, R.shape([n, 3]))
        return g
"""


@pytest.fixture
def numba_on(monkeypatch):
    monkeypatch.setenv("HETVM_NUMBA", "1")
    codegen_numba._checked = False


def _vm(text=CHAIN):
    with PassContext(disabled_pass=["FuseOps"]):
        exe = hetvm.build(from_source(text))
    return hetvm.VirtualMachine(exe)


def _want(x, y, w):
    return np.exp(((x + y) * y - x) @ w)


def _segments(vm):
    """The Segment objects the generated code of ``main`` calls."""
    from hetvm.runtime.segments import Segment

    fn = vm._compiled["main"].fn
    return [v for v in fn.__globals__.values() if isinstance(v, Segment)]


def test_a_chain_with_a_reshape_between_kernels_runs_as_one_compiled_segment(numba_on):
    vm = _vm()
    src = vm.source("main")
    assert len(re.findall(r"_S\d+\(", src)) == 1 and not re.search(r"_K\d+\(", src), src
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(F32)
    for n in (2, 5):  # one compile serves every n
        x = rng.standard_normal((n, 4)).astype(F32)
        y = rng.standard_normal(4).astype(F32)
        np.testing.assert_allclose(vm["main"](x, y, w).numpy(), _want(x, y, w), rtol=1e-5)
    (seg,) = _segments(vm)
    assert [p[0] for p in seg.pieces] == ["g"] and seg.whole is not None


def test_without_numba_the_same_program_calls_its_kernels_one_by_one(monkeypatch):
    monkeypatch.setenv("HETVM_NUMBA", "0")
    codegen_numba._checked = False
    vm = _vm()
    assert not re.search(r"_S\d+\(", vm.source("main")) and re.search(r"_K\d+\(", vm.source("main"))


def test_arguments_of_other_types_than_the_first_calls_run_the_numpy_kernels(numba_on):
    from hetvm.testing.segment_check import run_both

    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4)).astype(F32)
    w = rng.standard_normal((4, 3)).astype(F32)
    _, _, seg = run_both([("exp", {}, [x, np.empty((3, 4), F32)]),
                          ("matmul", {}, [x, w, np.empty((3, 3), F32)])])  # fmt: skip
    assert [p[0] for p in seg.pieces] == ["g"]
    ran = []
    for call in seg.calls:
        call.kernel = (lambda real, op: lambda *a: (ran.append(op), real(*a)))(call.kernel, call.op)
    strided = np.asfortranarray(x)  # another memory layout than the first call's
    outs = [np.empty((3, 4), F32), np.empty((3, 3), F32)]
    seg(strided, outs[0], w, outs[1])
    assert ran == ["exp", "matmul"]  # both ran through NumPy, in order
    np.testing.assert_allclose(outs[0], np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(outs[1], x @ w, rtol=1e-5)


def test_an_error_inside_a_segment_names_the_failing_kernels_pc(numba_on):
    text = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32"), i: R.Tensor((2,), "int64")) -> R.Tensor((2,), "float32"):
        a = R.exp(x)
        b = R.take(a, i, axis=0)
        c = R.exp(b)
        return c
"""
    vm = _vm(text)
    x = np.arange(4, dtype=F32)
    np.testing.assert_allclose(vm["main"](x, np.array([3, 0])).numpy(), np.exp(np.exp(x)[[3, 0]]), rtol=1e-6)
    with pytest.raises(hetvm.HetvmRuntimeError, match="take") as info:
        vm["main"](x, np.array([7, 0]))
    assert "pc " in str(info.value)


def test_two_segments_of_the_same_text_and_types_share_one_compiled_function(numba_on):
    from hetvm.testing.segment_check import run_both

    x = np.ones((2, 3), np.float32)
    calls = [("add", {}, [x, x, np.empty((2, 3), np.float32)]), ("exp", {}, [x, np.empty((2, 3), np.float32)])]
    _, _, first = run_both(calls)
    _, _, second = run_both(calls)
    assert [p[0] for p in first.pieces] == [p[0] for p in second.pieces] == ["g"]
    assert first.pieces[0][1] is second.pieces[0][1]


def test_a_long_run_compiles_in_stretches_of_bounded_length_and_a_huge_one_keeps_numpy(numba_on, monkeypatch):
    from hetvm.runtime import segments
    from hetvm.testing.segment_check import run_both

    x = np.ones(4, F32)
    bufs = [np.empty(4, F32) for _ in range(5)]
    calls = [("add", {}, [x if i == 0 else bufs[i - 1], x, bufs[i]]) for i in range(5)]
    monkeypatch.setattr(segments, "MAX_STRETCH", 2)
    got, want, seg = run_both(calls)
    assert [len(p[3]) for p in seg.pieces] == [2, 2, 1]
    np.testing.assert_array_equal(got[-1], want[-1])
    monkeypatch.setattr(segments, "MAX_CALLS", 4)
    _, _, seg = run_both(calls)
    assert [p[0] for p in seg.pieces] == ["k"] * 5


def test_a_kernel_the_device_is_configured_without_still_raises_inside_a_run(numba_on):
    from hetvm.runtime.device import device

    text = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        a = R.exp(x)
        b = R.tanh(a)
        c = R.exp(b)
        return c
"""
    with PassContext(disabled_pass=["FuseOps"]):  # three kernels: a segment
        exe = hetvm.build(from_source(text))
    vm = hetvm.VirtualMachine(exe, devices=[device("cpu", 0, missing_kernels=["tanh"])])
    with pytest.raises(hetvm.HetvmRuntimeError, match="without a kernel for 'tanh'"):
        vm["main"](np.ones(4, F32))


KV_CACHE = """
@I.ir_module
class Module:
    @R.function
    def main(past: R.Tensor((1, "p", 4), "float32"), x: R.Tensor((1, 1, 4), "float32"),
             y: R.Tensor((1, 1, 4), "float32")) -> R.Tensor((1, "p + 1", 4), "float32"):
        k = R.add(x, y)
        c = R.concat((past, k), axis=1)
        d = R.multiply(c, c)
        return d
"""


def test_a_concat_of_a_parameter_and_a_kernels_result_compiles_in_its_segment(numba_on):
    # a KV cache's (past, new): the tuple's fields reach the segment as a list of arrays
    vm = _vm(KV_CACHE)
    src = vm.source("main")
    assert re.search(r"_S\d+\(.*r\d+\[0\]\._data, r\d+\[1\]\._data, ", src), src
    rng = np.random.default_rng(0)
    for p in (3, 0, 6):
        past = rng.standard_normal((1, p, 4)).astype(F32)
        x, y = (rng.standard_normal((1, 1, 4)).astype(F32) for _ in range(2))
        c = np.concatenate([past, x + y], axis=1)
        np.testing.assert_array_equal(vm["main"](past, x, y).numpy(), c * c)
    (seg,) = [s for s in _segments(vm) if "concat" in [c.op for c in s.calls]]
    assert [p[0] for p in seg.pieces] == ["g"]
