"""The VM runs a loop (a function calling itself in tail position) in constant
stack and constant memory: the call is made after the caller's frame is gone."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import hetvm
from hetvm.runtime.codegen import tail_call_pcs
from hetvm.script import from_source
from hetvm.testing.loop_programs import counting_loop, counting_loop_reference

N = 64
ACC = 4 * N  # one carried (1, N) float32
COUNTER = 8  # one carried int64 counter
E_BYTES = 4 * N * N  # exp(w), made before the loop and read in it


def _inputs(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, N)).astype("float32")
    w = (rng.standard_normal((N, N)) * 0.05 - 4).astype("float32")
    return x, w


@pytest.fixture(scope="module")
def exe():
    return hetvm.build(from_source(counting_loop(N)), target="llvm")


def test_a_loop_runs_past_the_python_recursion_limit(exe):
    vm = hetvm.VirtualMachine(exe)
    x, w = _inputs()
    trips = sys.getrecursionlimit() + 500
    got = vm["main"](np.array(trips), x, w).numpy()
    np.testing.assert_allclose(got, counting_loop_reference(trips, x, w), rtol=1e-4, atol=1e-5)
    assert vm["main"](np.array(0), x, w).numpy().tolist() == x.tolist()


def test_peak_of_1000_iterations_is_one_iteration_plan_plus_carried_values(exe):
    vm = hetvm.VirtualMachine(exe)
    x, w = _inputs()
    peaks = {}
    for trips in (2, 10, 1000):
        out = vm["main"](np.array(trips), x, w)
        del out  # a result still held would count in the next call's peak
        peaks[trips] = vm.memory_report()["cpu:0"]["peak_bytes"]
    plan = exe.memory_plan()
    arena = plan["loop"][0]["planned_bytes"]  # the iteration's intermediates, planned once
    # exp(w) + one iteration's arena + the values it received and the ones it passes on
    want = E_BYTES + arena + 2 * (ACC + COUNTER)
    assert peaks == {2: want, 10: want, 1000: want}
    assert plan["main"][0]["predicted_peak_bytes"] == want
    assert plan["main"][0]["predicted_peak_exact"] is True
    # what an iteration passes on is never in its arena (the arena goes with the frame)
    assert {u["name"] for u in plan["loop"][0]["unplanned"]} == {"a", "j"}


def test_a_loop_takes_no_new_memory_after_its_first_iterations(exe):
    """Each iteration's arena and the values it passes on come back from the pool:
    the carried values alternate between the block received and the one passed on,
    so 1,000 iterations reach the device no more often than 3 do."""
    x, w = _inputs()
    raw = {}
    for trips in (3, 1000):
        vm = hetvm.VirtualMachine(exe)  # a cold pool each time
        vm["main"](np.array(trips), x, w)
        raw[trips] = vm.allocator("cpu:0").stats()
        vm["main"](np.array(trips), x, w)  # warm: every block is in the pool already
        assert vm.memory_report()["cpu:0"]["raw_allocs"] == 0
        assert vm.memory_report()["cpu:0"]["alloc_calls"] > trips  # the iterations did allocate, from the pool
    assert raw[1000]["raw_allocs"] == raw[3]["raw_allocs"]
    assert raw[1000]["reserved_bytes"] == raw[3]["reserved_bytes"]


def test_only_calls_in_tail_position_become_tail_calls(exe):
    pcs = tail_call_pcs(exe.functions["loop"], exe.functions)
    calls = [pc for pc, ins in enumerate(exe.functions["loop"].instructions) if getattr(ins, "func", None) == "loop"]
    assert pcs == set(calls) and len(calls) == 1
    src = counting_loop(N).replace(
        "y = cls.loop(R.const(0, \"int64\"), trips, x, e)\n        return y",
        "y = cls.loop(R.const(0, \"int64\"), trips, x, e)\n        z = R.add(y, x)\n        return z",
    )
    exe2 = hetvm.build(from_source(src), target="llvm")
    assert tail_call_pcs(exe2.functions["main"], exe2.functions) == set()  # its result is read after
    x, w = _inputs(1)
    got = hetvm.VirtualMachine(exe2)["main"](np.array(5), x, w).numpy()
    np.testing.assert_allclose(got, counting_loop_reference(5, x, w) + x, rtol=1e-4, atol=1e-5)

