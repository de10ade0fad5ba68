"""ONNX ``RNN``, ``GRU`` and ``LSTM`` against ONNX Runtime: every direction, both
layouts, sequence lengths (constant and given at run time), initial states,
peepholes, clip, non-default activations with their alpha/beta,
linear_before_reset, input_forget, and each optional output alone; plus the
errors for what hetvm refuses (each names the node)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import hetvm  # noqa: E402
from hetvm.errors import FrontendError  # noqa: E402
from hetvm.frontend import from_onnx  # noqa: E402
from hetvm.testing.oracle import onnxruntime_or_fail  # noqa: E402

F = TensorProto.FLOAT
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _model(op: str, *, steps: int = 3, batch: int = 2, size: int = 3, hidden: int = 4, direction: str = "forward",
           layout: int = 0, bias: bool = True, lens: str | None = None, initial: bool = False, peep: bool = False,
           outputs: tuple[str, ...] = ("Y", "Y_h", "Y_c"), seed: int = 0, **attrs):  # fmt: skip
    """A one-node model; W, R, B, P are initializers, X (and sequence_lens when
    ``lens='input'``, initial_h/c when ``initial``) are graph inputs."""
    rng = np.random.default_rng(seed)
    d = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    inits = {
        "W": rng.uniform(-1, 1, (d, g * hidden, size)),
        "R": rng.uniform(-1, 1, (d, g * hidden, hidden)),
    }
    if bias:
        inits["B"] = rng.uniform(-1, 1, (d, 2 * g * hidden))
    if peep:
        inits["P"] = rng.uniform(-1, 1, (d, 3 * hidden))
    x_shape = [steps, batch, size] if layout == 0 else [batch, steps, size]
    state_shape = [d, batch, hidden] if layout == 0 else [batch, d, hidden]
    graph_inputs = [helper.make_tensor_value_info("X", F, x_shape)]
    feeds = {"X": rng.uniform(-1, 1, x_shape).astype(np.float32)}
    seq_lens = np.array([steps - 1 - i % steps for i in range(batch)], np.int32)
    if lens == "input":
        graph_inputs.append(helper.make_tensor_value_info("L", TensorProto.INT32, [batch]))
        feeds["L"] = seq_lens
    elif lens == "constant":
        inits["L"] = seq_lens
    names = ["X", "W", "R", "B" if bias else "", "L" if lens else ""]
    if initial:
        names.append("H0")
        graph_inputs.append(helper.make_tensor_value_info("H0", F, state_shape))
        feeds["H0"] = rng.uniform(-1, 1, state_shape).astype(np.float32)
        if op == "LSTM":
            names.append("C0")
            graph_inputs.append(helper.make_tensor_value_info("C0", F, state_shape))
            feeds["C0"] = rng.uniform(-1, 1, state_shape).astype(np.float32)
    if peep:
        names += [""] * (7 - len(names)) + ["P"]
    while names and not names[-1]:
        names.pop()
    outs = [o if o in outputs else "" for o in ("Y", "Y_h", "Y_c")[: 3 if op == "LSTM" else 2]]
    while outs and not outs[-1]:
        outs.pop()
    node = helper.make_node(op, names, outs, name=f"my_{op.lower()}", hidden_size=hidden, direction=direction,
                            **({"layout": layout} if layout else {}), **attrs)  # fmt: skip
    init = [onnx.numpy_helper.from_array(v.astype(np.int32 if k == "L" else np.float32), k) for k, v in inits.items()]
    y_shape = [steps, d, batch, hidden] if layout == 0 else [batch, steps, d, hidden]
    out_shapes = {"Y": y_shape, "Y_h": state_shape, "Y_c": state_shape}
    graph = helper.make_graph([node], "g", graph_inputs,
                              [helper.make_tensor_value_info(o, F, out_shapes[o]) for o in outs if o], init)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model, feeds


def _hetvm(model, feeds: dict, unroll: bool = False) -> list[np.ndarray]:
    vm = hetvm.VirtualMachine(hetvm.build(from_onnx(model, unroll_recurrent=unroll), target="llvm"), hetvm.cpu())
    out = vm["main"](*[hetvm.nd.array(v) for v in feeds.values()])
    return [o.numpy() for o in (out if isinstance(out, (list, tuple)) else [out])]


def _onnxruntime(model, feeds: dict) -> list[np.ndarray]:
    ort = onnxruntime_or_fail()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


#: the imports a case checks: the default (one nn.recurrent_scan per direction) and,
#: in the slow suite and test_unrolled_import_matches_onnxruntime, unrolled too
_MODES: list[tuple[bool, ...]] = [(False,)]


@pytest.fixture(autouse=True)
def _modes(request):
    _MODES[0] = (False, True) if request.node.get_closest_marker("slow") else (False,)
    yield
    _MODES[0] = (False,)


def _check(model, feeds: dict, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    expected = _onnxruntime(model, feeds)
    for unroll in _MODES[0]:
        _compare(_hetvm(model, feeds, unroll), expected, rtol, atol)


def _compare(got: list[np.ndarray], expected: list[np.ndarray], rtol: float = 1e-5, atol: float = 1e-5) -> None:
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)


def _check_batchwise(op: str, **kw) -> None:
    """layout=1 (batch first): ONNX Runtime runs only layout 0, so hetvm's import of
    the batch-first model is compared with ORT's run of the same weights seq-first,
    inputs and outputs transposed."""
    model0, feeds0 = _model(op, layout=0, **kw)
    model1, _ = _model(op, layout=1, **kw)
    feeds1 = {k: np.ascontiguousarray(v.transpose(1, 0, 2)) if v.ndim == 3 else v for k, v in feeds0.items()}
    expected = [e.transpose(2, 0, 1, 3) if e.ndim == 4 else e.transpose(1, 0, 2) for e in _onnxruntime(model0, feeds0)]
    for unroll in _MODES[0]:
        _compare(_hetvm(model1, feeds1, unroll), expected)


def _matrix(names: str, axes: list[list], default: set[tuple]) -> pytest.MarkDecorator:
    """Every combination of ``axes``; those not in ``default`` run in the slow suite
    only (a build per case; the default suite keeps one of each kind of thing)."""
    import itertools

    cases = [pytest.param(*combo, marks=() if combo in default else pytest.mark.slow)
             for combo in itertools.product(*axes)]  # fmt: skip
    return pytest.mark.parametrize(names, cases)


KINDS = ["RNN", "GRU", "LSTM"]
DIRECTIONS = ["forward", "reverse", "bidirectional"]


@_matrix("op,direction,layout", [KINDS, DIRECTIONS, [0, 1]],
         {("RNN", "reverse", 0), ("GRU", "bidirectional", 1), ("LSTM", "forward", 1), ("LSTM", "bidirectional", 0)})
def test_directions_and_layouts_match_onnxruntime(op, direction, layout):
    if layout == 0:
        _check(*_model(op, direction=direction, initial=True))
    else:
        _check_batchwise(op, direction=direction, initial=True, lens="input")


@_matrix("op,lens,direction", [KINDS, ["input", "constant"], DIRECTIONS],
         {("RNN", "constant", "reverse"), ("GRU", "input", "forward"), ("LSTM", "input", "bidirectional")})
def test_sequence_lens_hold_the_state_and_zero_the_output(op, lens, direction):
    model, feeds = _model(op, steps=4, batch=3, lens=lens, direction=direction, initial=True)
    _check(model, feeds)


@pytest.mark.parametrize("layout", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_lstm_peepholes_clip_and_input_forget(layout):
    if layout == 0:
        _check(*_model("LSTM", peep=True, clip=0.7, direction="bidirectional"))
    else:
        _check_batchwise("LSTM", peep=True, clip=0.7, direction="bidirectional")
    _check(*_model("LSTM", peep=True, input_forget=1, initial=True))


@pytest.mark.parametrize("direction", ["forward", pytest.param("bidirectional", marks=pytest.mark.slow)])
def test_gru_linear_before_reset(direction):
    _check(*_model("GRU", linear_before_reset=1, direction=direction, initial=True, lens="input"))


def test_activations_consume_alpha_and_beta_in_order():
    """Only the activations that take a parameter consume one (ONNX Runtime's reading)."""
    acts = ["HardSigmoid", "LeakyRelu", "ScaledTanh", "Sigmoid", "Elu", "Affine"]
    _check(*_model("LSTM", direction="bidirectional", activations=acts,
                   activation_alpha=[0.3, 0.05, 0.9, 1.5, 0.5], activation_beta=[0.4, 1.2, 0.1]))  # fmt: skip
    _check(*_model("GRU", activations=["Softsign", "Softplus"], clip=2.0))
    _check(*_model("RNN", activations=["ThresholdedRelu"], activation_alpha=[0.2]))
    _check(*_model("RNN", activations=["Relu"], bias=False))
    # defaults: HardSigmoid 0.2/0.5, LeakyRelu 0.01, Elu 1.0
    _check(*_model("GRU", activations=["HardSigmoid", "Elu"]))


@pytest.mark.parametrize(
    "case",
    [
        lambda: _check(*_model("LSTM", peep=True, clip=0.7, direction="bidirectional", lens="input", initial=True)),
        lambda: _check(*_model("GRU", linear_before_reset=1, direction="reverse", lens="constant")),
        lambda: _check(*_model("GRU", activations=["HardSigmoid", "Softsign"], initial=True)),
        lambda: _check_batchwise("RNN", direction="bidirectional", initial=True, lens="input"),
    ],
    ids=["lstm", "gru-lbr", "gru", "rnn-batchwise"],
)
def test_unrolled_import_matches_onnxruntime(case):
    """from_onnx(unroll_recurrent=True): the steps as plain ops (the slow suite checks
    every case both ways)."""
    _MODES[0] = (True,)
    case()


@pytest.mark.parametrize("outputs", [("Y",), ("Y_c",), pytest.param(("Y_h",), marks=pytest.mark.slow),
                                     pytest.param(("Y", "Y_c"), marks=pytest.mark.slow)])
def test_each_optional_output_alone(outputs):
    _check(*_model("LSTM", outputs=outputs, direction="reverse"))


def test_input_projection_is_one_matmul_over_all_steps():
    """The input weights multiply all steps at once; unrolled, each step multiplies only
    H by R; by default the steps are one nn.recurrent_scan call per direction."""
    from hetvm.ir import expr as E
    from hetvm.ir import prim as P
    from hetvm.ir.visitor import post_order_visit

    model, _ = _model("LSTM", steps=5, outputs=("Y_h",), direction="bidirectional")

    def calls(mod, name: str) -> list:
        found: list = []
        post_order_visit(mod["main"], lambda e: found.append(e)
                         if isinstance(e, E.Call) and getattr(e.op, "name", "") == name else None)  # fmt: skip
        return found

    unrolled = from_onnx(model, unroll_recurrent=True)
    shapes = [tuple(P.const_value(d) for d in e.struct_info.shape) for e in calls(unrolled, "matmul")]
    assert shapes.count((5 * 2, 16)) == 2  # (steps * batch, 4 * hidden), once per direction
    assert shapes.count((2, 16)) == 2 * 5  # one H @ R^T per step and direction
    assert not calls(unrolled, "nn.recurrent_scan")
    scanned = from_onnx(model)
    assert [c.attrs["reverse"] for c in calls(scanned, "nn.recurrent_scan")] == [False, True]
    assert len(calls(scanned, "matmul")) == 2


def _error(model, shape_dict=None, unroll: bool = False) -> str:
    with pytest.raises(FrontendError) as info:
        from_onnx(model, shape_dict=shape_dict, unroll_recurrent=unroll)
    return str(info.value)


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_a_symbolic_sequence_length_runs_one_build_at_any_length(op):
    """The scan op takes the length at run time (and sequence_lens with it); unrolling
    cannot, and says so naming the node."""
    model, _ = _model(op, steps=2, batch=3, lens="input", direction="bidirectional")
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "T"
    for out in model.graph.output:
        del out.type.tensor_type.shape.dim[:]
    vm = hetvm.VirtualMachine(hetvm.build(from_onnx(model), target="llvm"), hetvm.cpu())
    for steps in (1, 5):
        _, feeds = _model(op, steps=steps, batch=3, lens="input", direction="bidirectional")
        feeds["L"] = np.minimum(feeds["L"], steps).astype(np.int32)
        fixed, _ = _model(op, steps=steps, batch=3, lens="input", direction="bidirectional")
        out = vm["main"](*[hetvm.nd.array(v) for v in feeds.values()])
        _compare([o.numpy() for o in out], _onnxruntime(fixed, feeds))
    message = _error(model, unroll=True)
    assert f"{op} node 'my_{op.lower()}'" in message and "sequence length" in message and "static" in message


@pytest.mark.parametrize(
    ("attrs", "needle"),
    [
        ({"activations": ["Tanh"]}, "needs 3"),
        ({"activations": ["Sigmoid", "Swish", "Tanh"]}, "unsupported activation 'Swish'"),
        ({"activations": ["Affine", "Tanh", "Tanh"]}, "Affine needs its alpha"),
        ({"input_forget": 2}, "input_forget=2 is not valid for LSTM"),
        ({"clip": -1.0}, "clip must be positive"),
        ({"hidden_size": 5}, "hidden_size=5"),
    ],
)
def test_unsupported_attribute_combinations_name_the_node(attrs, needle):
    model, _ = _model("LSTM")
    node = model.graph.node[0]
    keep = [a for a in node.attribute if a.name not in attrs]
    del node.attribute[:]
    node.attribute.extend(keep + [helper.make_attribute(k, v) for k, v in attrs.items()])
    message = _error(model)
    assert "LSTM node 'my_lstm'" in message and needle in message, message


def test_bad_direction_and_weight_shape_name_the_node():
    model, _ = _model("RNN")
    node = model.graph.node[0]
    for a in node.attribute:
        if a.name == "direction":
            a.s = b"sideways"
    assert "RNN node 'my_rnn'" in _error(model) and "sideways" in _error(model)
    model, _ = _model("RNN")
    w = model.graph.initializer[0]
    w.CopyFrom(onnx.numpy_helper.from_array(np.zeros((1, 4, 2), np.float32), "W"))
    assert "W has shape [1, 4, 2], expected [1, ?, 3]" in _error(model)


def test_scan_runs_on_the_accelerator():
    """nn.recurrent_scan has a kernel on every device kind: pinned to ``sim`` with the
    host for the rest, a bidirectional LSTM with peepholes and sequence_lens matches ORT."""
    from hetvm.cli_support.placement import pin_params
    from hetvm.ir import VDevice

    model, feeds = _model("LSTM", direction="bidirectional", lens="input", initial=True, peep=True)
    mod = from_onnx(model).with_global_infos(vdevice=[VDevice("sim", 0), VDevice("llvm", 0)])
    exe = hetvm.build(pin_params(mod, VDevice("sim", 0)))
    scans = [i for i in exe["main"].instructions if getattr(i, "op", None) == "nn.recurrent_scan"]
    assert len(scans) == 2 and all(exe.devices[i.device]["kind"] == "sim" for i in scans)
    vm = hetvm.VirtualMachine(exe, [hetvm.device("sim", 0), hetvm.cpu(0)])
    out = vm["main"](*feeds.values())
    _compare([o.copyto(hetvm.cpu(0)).numpy() for o in out], _onnxruntime(model, feeds))
    assert vm.memory_report()["sim:0"]["peak_bytes"] > 0


@pytest.mark.parametrize("op", KINDS)
@pytest.mark.parametrize("bad", [4, -1])
def test_sequence_lens_outside_the_sequence_at_run_time_name_the_node_and_value(op, bad):
    """sequence_lens as a graph input is checked when the kernel runs: an entry
    above the sequence length (3) or below 0 is an error naming the node and
    the entry, not a silently masked (or wrong) result."""
    from hetvm.errors import HetvmError

    model, feeds = _model(op, lens="input")
    vm = hetvm.VirtualMachine(hetvm.build(from_onnx(model), target="llvm"), hetvm.cpu())
    lens = feeds["L"].copy()
    lens[1] = bad
    feeds["L"] = lens
    with pytest.raises(HetvmError) as info:
        vm["main"](*[hetvm.nd.array(v) for v in feeds.values()])
    message = str(info.value)
    assert f"my_{op.lower()}" in message and f"sequence_lens[1] = {bad} is outside [0, 3]" in message, message
