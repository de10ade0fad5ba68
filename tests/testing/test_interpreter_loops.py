"""The reference interpreter runs loops as the VM does: a call in tail position
after the caller's frame is gone, so depth stays constant."""

import sys

import numpy as np

from hetvm.pipeline import lower
from hetvm.script import from_source
from hetvm.testing.interpreter import Interpreter
from hetvm.testing.loop_programs import counting_loop, counting_loop_reference


def _inputs():
    rng = np.random.default_rng(3)
    return rng.standard_normal((1, 8)).astype("float32"), (rng.standard_normal((8, 8)) * 0.1 - 3).astype("float32")


def test_a_loop_runs_past_the_depth_limit_on_the_high_level_and_the_lowered_ir():
    mod = from_source(counting_loop(8))
    x, w = _inputs()
    trips = sys.getrecursionlimit() + 100  # far above max_depth (64) and Python's limit
    want = counting_loop_reference(trips, x, w)
    for m in (mod, lower(mod, target="llvm")):  # the lowered one has arenas and kills
        got = Interpreter(m).run("main", np.array(trips), x, w)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

