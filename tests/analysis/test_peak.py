"""The peak simulation (hetvm.analysis.peak) on what only it models: the result
of a packed function nobody declared (see hetvm.op.effects.OPAQUE)."""

import numpy as np
import pytest

import hetvm
from hetvm.analysis.memory_plan import memory_plan_report
from hetvm.analysis.peak import predict_peak
from hetvm.pipeline import lower
from hetvm.runtime.registry import register_func, remove_global_func
from hetvm.script import from_source

PACKED_RESULT_RETURNED = '''
@I.ir_module
class Module:
    @R.function
    def g(x: R.Tensor((16,), dtype="float32")) -> R.Tensor((16,), dtype="float32"):
        R.func_attr({"relax.force_pure": True})
        a = R.exp(x)
        o = R.call_packed("test_peak.maybe_identity", a, ty_args=(R.Tensor((16,), dtype="float32"),))
        return o

    @R.function
    def main(x: R.Tensor((16,), dtype="float32")) -> R.Tensor((16,), dtype="float32"):
        cls = Module
        r = cls.g(x)
        b = R.exp(x)
        c = R.add(r, b)
        return c
'''


@pytest.fixture
def identity():
    register_func("test_peak.maybe_identity", lambda t: t, override=True)
    yield
    remove_global_func("test_peak.maybe_identity")


def test_an_undeclared_packed_result_may_be_its_argument(identity):
    """g's packed call may return `a` itself: then `a` outlives g and is still
    held by main's `r` while main's result is allocated. The simulation took
    the result for bytes of nobody's and released `a` when g returned
    (predicted 64 bytes, measured 128)."""
    mod = from_source(PACKED_RESULT_RETURNED)
    vm = hetvm.VirtualMachine(hetvm.build(mod), [hetvm.cpu(0)], poison=True)
    x = np.linspace(-1, 1, 16, dtype="float32")
    out = vm["main"](x)
    np.testing.assert_allclose(out.numpy(), 2 * np.exp(x), rtol=1e-6)
    measured = vm.memory_report()["cpu:0"]["peak_bytes"]
    facts = memory_plan_report(lower(mod))["main"][0]
    assert measured == 128  # a and c
    assert facts["predicted_peak_bytes"] >= measured
    # the result may also be fresh bytes: an upper bound, not the exact figure
    assert facts["predicted_peak_exact"] is False


def test_a_packed_result_that_cannot_hold_bytes_keeps_the_prediction_exact():
    src = PACKED_RESULT_RETURNED.replace(
        'o = R.call_packed("test_peak.maybe_identity", a, ty_args=(R.Tensor((16,), dtype="float32"),))',
        'o = R.call_packed("test_peak.maybe_identity", x, ty_args=(R.Tensor((16,), dtype="float32"),))',
    )
    low = lower(from_source(src))
    prediction = predict_peak(low, "main")
    assert prediction.exact.get(0, True)  # its only candidate is a parameter's bytes
