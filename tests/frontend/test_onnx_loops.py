"""ONNX ``Loop`` and ``Scan`` import as a function calling itself in tail
position: trip count and/or condition, carried values, scan outputs, values of
the enclosing graph read in the body; checked against onnx.reference on the CPU
and with the loop on sim + CPU."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from hetvm.analysis.tail_calls import self_recursive  # noqa: E402
from hetvm.errors import FrontendError  # noqa: E402
from hetvm.frontend import from_onnx  # noqa: E402
from hetvm.testing.oracle import onnxruntime_or_fail  # noqa: E402

from .test_onnx_control_flow import _run  # noqa: E402

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def _model(nodes, inputs, outputs, opset=17):
    g = helper.make_graph(nodes, "m", [_vi(*i) for i in inputs], [_vi(*o) for o in outputs])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model


def _expected(model, feeds):
    """ONNX Runtime's outputs (onnx.reference concatenates a Loop's scan outputs
    instead of stacking them, and fails on zero iterations)."""
    ort = onnxruntime_or_fail()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _check(model, feeds, heterogeneous=False):
    mod = from_onnx(model)
    want = _expected(model, feeds)
    got = _run(mod, list(feeds.values()), heterogeneous)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    return mod


def _accumulate_loop(with_trips=True, with_cond=True):
    """h = tanh(h * w + x), w read from the enclosing graph; stops after M
    iterations or when sum(h) + iter >= limit (so a loop without M ends too);
    scan output: each iteration's h."""
    body = helper.make_graph(
        [
            helper.make_node("Mul", ["h_in", "w"], ["hw"]),
            helper.make_node("Add", ["hw", "x"], ["pre"]),
            helper.make_node("Tanh", ["pre"], ["h_out"]),
            helper.make_node("ReduceSum", ["h_out"], ["sum"], keepdims=0),
            helper.make_node("Cast", ["iter"], ["iter_f"], to=F),
            helper.make_node("Add", ["sum", "iter_f"], ["total"]),
            helper.make_node("Less", ["total", "limit"], ["cond_out"]),
            helper.make_node("Identity", ["h_out"], ["row"]),
        ],
        "body",
        [_vi("iter", I64, []), _vi("cond_in", B, []), _vi("h_in", F, [2, 3])],
        [_vi("cond_out", B, []), _vi("h_out", F, [2, 3]), _vi("row", F, [2, 3])],
    )
    loop = helper.make_node(
        "Loop", ["M" if with_trips else "", "c0" if with_cond else "", "h0"], ["h", "rows"], body=body, name="steps"
    )
    w_node = helper.make_node("Exp", ["v"], ["w"])  # computed before the loop, read inside
    inputs = [("M", I64, []), ("c0", B, []), ("h0", F, [2, 3]), ("v", F, [2, 3]), ("x", F, [2, 3]), ("limit", F, [])]
    if not with_trips:
        inputs = [i for i in inputs if i[0] != "M"]
    if not with_cond:
        inputs = [i for i in inputs if i[0] != "c0"]
    return _model([w_node, loop], inputs, [("h", F, [2, 3]), ("rows", F, ["n", 2, 3])])


def _feeds(trips=None, cond=True, limit=100.0):
    rng = np.random.default_rng(0)
    feeds = {}
    if trips is not None:
        feeds["M"] = np.array(trips, np.int64)
    if cond is not None:
        feeds["c0"] = np.array(cond)
    feeds.update(
        h0=rng.standard_normal((2, 3)).astype(np.float32),
        v=(rng.standard_normal((2, 3)) * 0.1).astype(np.float32),
        x=(rng.standard_normal((2, 3)) * 0.5).astype(np.float32),
        limit=np.array(limit, np.float32),
    )
    return feeds


@pytest.mark.parametrize("heterogeneous", [False, True])
def test_a_loop_with_trip_count_condition_scan_output_and_outer_values(heterogeneous):
    mod = _check(_accumulate_loop(), _feeds(trips=7), heterogeneous)
    loops = [n for n in mod.functions if n != "main"]
    assert len(loops) == 1 and self_recursive(mod[loops[0]], loops[0])
    _check(_accumulate_loop(), _feeds(trips=0))  # no iteration: the initial value, no rows
    _check(_accumulate_loop(), _feeds(trips=50, limit=6.0))  # the condition ends it first


def test_a_loop_with_only_a_trip_count_or_only_a_condition():
    _check(_accumulate_loop(with_cond=False), _feeds(trips=4, cond=None))
    _check(_accumulate_loop(with_trips=False), _feeds(cond=True, limit=6.0))


def test_a_loop_without_trip_count_and_condition_is_refused_naming_the_node():
    with pytest.raises(FrontendError, match=r"Loop node 'steps'.*never end"):
        from_onnx(_accumulate_loop(with_trips=False, with_cond=False))


def test_a_carried_value_that_grows_gets_a_symbolic_length():
    """acc = concat(acc, [iter]): its shape changes every iteration."""
    body = helper.make_graph(
        [
            helper.make_node("Cast", ["iter"], ["f"], to=F),
            helper.make_node("Unsqueeze", ["f", "zero"], ["fr"]),
            helper.make_node("Concat", ["acc_in", "fr"], ["acc_out"], axis=0),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [_vi("iter", I64, []), _vi("cond_in", B, []), _vi("acc_in", F, ["k"])],
        [_vi("cond_out", B, []), _vi("acc_out", F, ["k2"])],
        [onnx.numpy_helper.from_array(np.array([0], np.int64), "zero")],
    )
    loop = helper.make_node("Loop", ["M", "", "a0"], ["acc"], body=body)
    model = _model([loop], [("M", I64, []), ("a0", F, [1])], [("acc", F, ["m"])])
    _check(model, {"M": np.array(5, np.int64), "a0": np.array([-1.0], np.float32)})


def _scan_model(directions=(0,), out_axes=(0,)):
    """A running sum over axis 0 (or reversed), each step's sum as a scan output."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["y_t"])],
        "body",
        [_vi("s_in", F, [3]), _vi("x_t", F, [3])],
        [_vi("s_out", F, [3]), _vi("y_t", F, [3])],
    )
    scan = helper.make_node(
        "Scan", ["s0", "xs"], ["s", "ys"], body=body, num_scan_inputs=1,
        scan_input_directions=list(directions), scan_output_axes=list(out_axes),
    )  # fmt: skip
    return _model([scan], [("s0", F, [3]), ("xs", F, [4, 3])], [("s", F, [3]), ("ys", F, ["a", "b"])])


@pytest.mark.parametrize("directions,out_axes", [((0,), (0,)), ((1,), (1,))])
def test_scan_forward_and_reversed_with_an_output_axis(directions, out_axes):
    rng = np.random.default_rng(1)
    feeds = {"s0": rng.standard_normal(3).astype(np.float32), "xs": rng.standard_normal((4, 3)).astype(np.float32)}
    _check(_scan_model(directions, out_axes), feeds)


def _stepping_loop(n: int, scan: bool):
    """h = tanh(h @ exp(v)) + h, M times (no condition); with ``scan`` each
    iteration's tanh is a scan output too."""
    nodes = [
        helper.make_node("MatMul", ["h_in", "w"], ["hw"]),
        helper.make_node("Tanh", ["hw"], ["t"]),
        helper.make_node("Add", ["t", "h_in"], ["h_out"]),
        helper.make_node("Identity", ["cond_in"], ["cond_out"]),
    ]
    outs = [_vi("cond_out", B, []), _vi("h_out", F, [1, n])]
    if scan:
        nodes.append(helper.make_node("Identity", ["t"], ["row"]))
        outs.append(_vi("row", F, [1, n]))
    body = helper.make_graph(nodes, "body", [_vi("iter", I64, []), _vi("cond_in", B, []), _vi("h_in", F, [1, n])], outs)
    loop = helper.make_node("Loop", ["M", "", "h0"], ["h"] + (["rows"] if scan else []), body=body, name="steps")
    results = [("h", F, [1, n])] + ([("rows", F, ["k", 1, n])] if scan else [])
    model = _model([helper.make_node("Exp", ["v"], ["w"]), loop], [("M", I64, []), ("h0", F, [1, n]), ("v", F, [n, n])], results)
    rng = np.random.default_rng(0)
    h0 = rng.standard_normal((1, n)).astype(np.float32)
    v = (rng.standard_normal((n, n)) * 0.05 - 4).astype(np.float32)
    return model, h0, v


def test_an_imported_loop_of_1000_iterations_peaks_at_one_iteration_plan_plus_its_carried_values():
    """The memory of an imported Loop does not depend on its trip count: the
    measured peak is main's plan (exp(v)) + the loop's arena + the carried
    values received and passed on, and iterations after the first few take
    nothing new from the device."""
    import hetvm

    n = 64
    model, h0, v = _stepping_loop(n, scan=False)
    exe = hetvm.build(from_onnx(model), target="llvm")
    plan = exe.memory_plan()
    (loop,) = [f for f in plan if f != "main"]
    carried = 4 * n + 8  # h (1, n) float32 and the counter
    want = plan["main"][0]["planned_bytes"] + plan[loop][0]["planned_bytes"] + 2 * carried
    assert plan["main"][0]["predicted_peak_bytes"] == want
    stats = {}
    for trips in (3, 1000):
        vm = hetvm.VirtualMachine(exe)
        got = vm["main"](np.array(trips, np.int64), h0, v).numpy()
        stats[trips] = vm.memory_report()["cpu:0"]
        want_h = h0
        for _ in range(trips):
            want_h = np.tanh(want_h @ np.exp(v)) + want_h
        np.testing.assert_allclose(got, want_h, rtol=1e-4, atol=1e-5)
    assert stats[3]["peak_bytes"] == stats[1000]["peak_bytes"] == want
    assert stats[1000]["raw_allocs"] == stats[3]["raw_allocs"]


def test_scan_outputs_of_1000_iterations_are_written_into_one_preallocated_buffer():
    """A Loop with a trip count and no condition stacks its scan output into a
    buffer allocated once before the loop (LoopCarriedInPlace writes each row in
    place): the peak is the output once plus what the loop without it takes,
    the device is asked for nothing new per iteration, and the result matches
    ONNX Runtime."""
    import hetvm

    n, trips = 64, 1000
    model, h0, v = _stepping_loop(n, scan=True)
    mod = from_onnx(model)
    exe = hetvm.build(mod, target="llvm")
    plan = exe.memory_plan()
    (loop,) = [f for f in plan if f != "main"]
    carried = 4 * n + 8
    without_rows = plan["main"][0]["planned_bytes"] + plan[loop][0]["planned_bytes"] + 2 * carried
    feeds = {"M": np.array(trips, np.int64), "h0": h0, "v": v}
    stats = {}
    for m in (3, trips):
        vm = hetvm.VirtualMachine(exe)
        h, rows = vm["main"](np.array(m, np.int64), h0, v)
        stats[m] = vm.memory_report()["cpu:0"]
        assert rows.shape == (m, 1, n)
        if m == trips:
            want_h, want_rows = _expected(model, feeds)
            np.testing.assert_allclose(h.numpy(), want_h, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(rows.numpy(), want_rows, rtol=1e-4, atol=1e-5)
        del h, rows
    assert stats[trips]["peak_bytes"] == without_rows + trips * 4 * n
    assert stats[trips]["raw_allocs"] == stats[3]["raw_allocs"]
    for m in (3, trips):  # the plan, given the output's length, predicts the measured peak
        predicted = exe.memory_plan(dims={"scan_rows_len": m})["main"][0]
        assert predicted["predicted_peak_bytes"] == stats[m]["peak_bytes"] and predicted["predicted_peak_exact"]


def test_a_scan_writes_its_outputs_in_place_and_matches_onnx_runtime():
    rng = np.random.default_rng(2)
    feeds = {"s0": rng.standard_normal(3).astype(np.float32), "xs": rng.standard_normal((4, 3)).astype(np.float32)}
    mod = _check(_scan_model(), feeds)
    from hetvm.pipeline import lower

    assert lower(mod, target="llvm").attrs.get("loop_carried_in_place") == {n: 1 for n in mod.functions if n != "main"}


def test_a_preallocated_scan_output_on_the_accelerator_matches_onnx_runtime():
    model, h0, v = _stepping_loop(8, scan=True)
    _check(model, {"M": np.array(6, np.int64), "h0": h0, "v": v}, heterogeneous=True)
    _check(model, {"M": np.array(0, np.int64), "h0": h0, "v": v})  # no iteration: no rows


def _scan8_model(batch=2, steps=4, directions=(0,), lens=None):
    """Opset 8: a running sum per batch entry, reading the scan input reversed
    with directions=[1]; optional constant sequence_lens."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["y_t"])],
        "body",
        [_vi("s_in", F, [3]), _vi("x_t", F, [3])],
        [_vi("s_out", F, [3]), _vi("y_t", F, [3])],
    )
    inits = [] if lens is None else [onnx.numpy_helper.from_array(np.array(lens, np.int64), "L")]
    scan = helper.make_node("Scan", ["L" if lens is not None else "", "s0", "xs"], ["s", "ys"], body=body,
                            num_scan_inputs=1, directions=list(directions), name="scan8")  # fmt: skip
    g = helper.make_graph([scan], "m", [_vi("s0", F, [batch, 3]), _vi("xs", F, [batch, steps, 3])],
                          [_vi("s", F, [batch, 3]), _vi("ys", F, [batch, steps, 3])], inits)  # fmt: skip
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 8)])
    model.ir_version = 4
    return model


@pytest.mark.parametrize("directions", [(0,), (1,)])
def test_an_opset_8_scan_runs_its_loop_per_batch_entry(directions):
    rng = np.random.default_rng(3)
    feeds = {"s0": rng.standard_normal((2, 3)).astype(np.float32), "xs": rng.standard_normal((2, 4, 3)).astype(np.float32)}
    mod = _check(_scan8_model(directions=directions), feeds)
    assert len([f for f in mod.functions if f != "main"]) == 1  # one loop, called per entry
    _check(_scan8_model(lens=[4, 4], directions=directions), feeds)  # full lengths: no mask needed


def test_an_opset_8_scan_with_shorter_sequence_lens_is_refused_naming_the_node():
    with pytest.raises(FrontendError, match=r"Scan node 'scan8'.*sequence_lens other than a constant of full lengths"):
        from_onnx(_scan8_model(lens=[4, 2]))
