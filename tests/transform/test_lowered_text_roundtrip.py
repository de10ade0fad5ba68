"""The IR after every pipeline stage prints as TVMScript that parses back equal."""

import pytest

import hetvm.op as op
from hetvm.ir import (
    BlockBuilder,
    TensorStructInfo,
    TupleGetItem,
    Var,
    VDevice,
    assert_structural_equal,
)
from hetvm.pipeline import default_pipeline
from hetvm.script import from_source
from hetvm.transform import PassContext, PassInstrument


def _views_and_tuples():
    x = Var("x", struct_info=TensorStructInfo((4, 8), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(op.exp(x))
            parts = bb.emit(op.split(a, 2, axis=1))
            first = bb.emit(TupleGetItem(parts, 0))
            r = bb.emit(op.reshape(first, (8, 2)))
            out = bb.emit_output(op.multiply(r, r))
        bb.emit_func_output(out)
    return bb.get()


def _two_devices():
    x = Var("x", struct_info=TensorStructInfo((4, 8), "float32", vdevice=VDevice("llvm", 0)))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(op.hint_on_device(op.exp(x), VDevice("sim", 0)))
            b = bb.emit(op.add(a, a))
            out = bb.emit_output(op.multiply(b, x))
        bb.emit_func_output(out)
    return bb.get().with_global_infos(vdevice=[VDevice("llvm", 0), VDevice("sim", 0)])


class _RoundTrip(PassInstrument):
    def __init__(self):
        self.checked = []

    def run_after_pass(self, mod, info):
        text = mod.script()
        again = from_source(text)
        assert_structural_equal(again, mod)
        assert again.script() == text
        self.checked.append(info.name)


@pytest.mark.parametrize("make", [_views_and_tuples, _two_devices])
def test_every_stage_round_trips(make):
    check = _RoundTrip()
    with PassContext(instruments=[check]):
        default_pipeline()(make())
    assert "KillAfterLastUse" in check.checked and "StaticPlanBlockMemory" in check.checked
