"""The NumPy runner of ``fused_elementwise`` (temporaries reused along the
program) against ``run_numpy`` (one fresh temporary per step, the reference)."""

import numpy as np
import pytest

from hetvm.kernels.fused_program import NumpyRunner, run_numpy

F32 = "float32"
PROGRAMS = {
    "chain": [("add", F32, "x0", "x1"), ("multiply", F32, "t0", "x1"), ("subtract", F32, "t1", "x0"),
              ("add", F32, "t2", "x1"), ("sigmoid", F32, "t3"), ("add", F32, "t4", "t0")],
    # t0 read twice by one step, then again later: its buffer must not be freed twice
    "read_twice": [("exp", F32, "x0"), ("multiply", F32, "t0", "t0"), ("negative", F32, "t1"),
                   ("add", F32, "t2", "t0"), ("tanh", F32, "t3"), ("add", F32, "t4", "t1")],
    "diamond": [("abs", F32, "x0"), ("sqrt", F32, "t0"), ("exp", F32, "t0"),
                ("divide", F32, "t1", "t2"), ("maximum", F32, "t3", "t1")],
    # steps of different shapes: (3, 1) then broadcast to (3, 4)
    "broadcast": [("exp", F32, "x1"), ("add", F32, "t0", "x0"), ("multiply", F32, "t1", "t0"),
                  ("nn.silu", F32, "t2")],
    "const_last": [("exp", F32, "x0"), ("const", F32, 2.5)],
    "where": [("greater", "bool", "x0", "x1"), ("where", F32, "t0", "x0", "x1"),
              ("const", F32, 0.5), ("multiply", F32, "t1", "t2")],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_runner_matches_the_reference(name):
    program = tuple(tuple(s) for s in PROGRAMS[name])
    rng = np.random.default_rng(1)
    shapes = [((3, 4), (3, 1)), ((2, 3, 4), (2, 3, 4)), ((0, 4), (0, 1))]
    runner = NumpyRunner(np, program)
    for _ in range(2):  # the second round reuses each shape's plan
        for s0, s1 in shapes:
            x0 = rng.standard_normal(s0).astype(F32)
            x1 = rng.standard_normal(s1).astype(F32)
            inputs = [x0, x1] if any("x1" in step for step in program) else [x0]
            shape = np.broadcast_shapes(*(a.shape for a in inputs))
            got, want = np.empty(shape, F32), np.empty(shape, F32)
            runner(*inputs, got)
            with np.errstate(all="ignore"):
                run_numpy(np, program, inputs, want)
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(x0, inputs[0])  # inputs never written


def test_a_long_chain_needs_two_temporaries():
    program = tuple(("add", F32, "x0" if k == 0 else f"t{k - 1}", "x1") for k in range(32))
    runner = NumpyRunner(np, program)
    x, one = np.zeros(3, F32), np.ones(3, F32)
    out = np.empty(3, F32)
    runner(x, one, out)
    np.testing.assert_array_equal(out, [32, 32, 32])
    (plan,) = runner.plans.values()
    source_names = plan[1].__code__.co_varnames
    assert sorted(n for n in source_names if n.startswith("b")) == ["b0", "b1"]


def test_mismatched_output_is_an_error():
    runner = NumpyRunner(np, (("add", F32, "x0", "x1"),))
    with pytest.raises(ValueError, match="could not be broadcast"):
        runner(np.ones(3, F32), np.ones(3, F32), np.empty(4, F32))
