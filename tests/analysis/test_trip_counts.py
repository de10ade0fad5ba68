"""trip_counts: a loop's iterations when its callers fix them with constants."""

from __future__ import annotations

import numpy as np
import pytest

from hetvm.analysis.trip_counts import TripCount, trip_counts
from hetvm.script import from_source
from hetvm.testing.loop_programs import counting_loop

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hetvm.frontend import from_onnx  # noqa: E402


def _with_trips(trips: str, start: str = 'R.const(0, "int64")') -> str:
    return counting_loop(8).replace(
        'y = cls.loop(R.const(0, "int64"), trips, x, e)', f"y = cls.loop({start}, {trips}, x, e)")


def test_constant_bounds_give_the_count_and_run_time_ones_none():
    assert trip_counts(from_source(_with_trips('R.const(12, "int64")'))) == {"loop": TripCount(12, True)}
    assert trip_counts(from_source(_with_trips('R.const(12, "int64")', 'R.const(5, "int64")'))) == {"loop": TripCount(7, True)}
    assert trip_counts(from_source(_with_trips('R.const(-3, "int64")'))) == {"loop": TripCount(0, True)}
    assert trip_counts(from_source(_with_trips("trips"))) == {}


def _vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def _onnx(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return from_onnx(model)


def test_a_static_scan_runs_its_length_and_a_loop_with_a_condition_at_most_its_trip_count():
    F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"])], "body",
        [_vi("s_in", F, [3]), _vi("x_t", F, [3])], [_vi("s_out", F, [3])])  # fmt: skip
    scan = helper.make_node("Scan", ["s0", "xs"], ["s"], body=body, num_scan_inputs=1)
    mod = _onnx([scan], [_vi("s0", F, [3]), _vi("xs", F, [9, 3])], [_vi("s", F, [3])])
    assert list(trip_counts(mod).values()) == [TripCount(9, True)]

    loop_body = helper.make_graph(
        [helper.make_node("Neg", ["h_in"], ["h_out"]), helper.make_node("Identity", ["c_in"], ["c_out"])], "body",
        [_vi("i", I64, []), _vi("c_in", B, []), _vi("h_in", F, [2])], [_vi("c_out", B, []), _vi("h_out", F, [2])])  # fmt: skip
    m = numpy_helper.from_array(np.array(5, np.int64), "M")
    loop = helper.make_node("Loop", ["M", "c", "h0"], ["h"], body=loop_body)
    mod = _onnx([loop], [_vi("c", B, []), _vi("h0", F, [2])], [_vi("h", F, [2])], [m])
    assert list(trip_counts(mod).values()) == [TripCount(5, False)]
    assert TripCount(5, False).describe() == "at most 5 iterations"
