"""FoldScaleAxis: per-channel multiply/add chains after nn.conv2d fold into its weight."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import hetvm
import hetvm.op as op
from hetvm.frontend import from_onnx
from hetvm.ir import (
    BlockBuilder,
    Call,
    Constant,
    If,
    Op,
    SeqExpr,
    TensorStructInfo,
    Var,
    VarBinding,
    const,
    prim,
)
from hetvm.ir import expr as E
from hetvm.ir.structural import structural_equal
from hetvm.pipeline import default_pipeline
from hetvm.testing.ir_query import bindings as _bindings
from hetvm.testing.ir_query import build_and_run, one_input_module
from hetvm.testing.ir_query import op_names as _ops
from hetvm.testing.oracle import onnxruntime_or_fail
from hetvm.transform import FoldConstant, FoldScaleAxis, Normalize, PassContext

F32 = "float32"
RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _seeded():
    """The same values whatever the order tests run in."""
    global RNG
    RNG = np.random.default_rng(0)


def _rand(*shape, dtype=F32, positive=False):
    a = RNG.standard_normal(shape)
    if positive:
        a = np.abs(a) + 0.5
    return a.astype(dtype)


def _module(body_fn, x_shape=(2, 4, 8, 8), **kwargs):
    return one_input_module(body_fn, x_shape, **kwargs)


def _conv_weights(mod):
    return [b.value.args[1].data for b in _bindings(mod) if _is(b.value, "nn.conv2d")]


def _is(value, name):
    return isinstance(value, Call) and isinstance(value.op, Op) and value.op.name == name


def _run(mod, *args, fold=True):
    return build_and_run(mod, *args, disabled=[] if fold else ["FoldScaleAxis"])


def _close(got, want):
    """Equal up to float rounding: relative 1e-5, and absolute 1e-6 of the result's
    magnitude (an output near zero from cancelling terms carries their rounding)."""
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * max(1.0, float(np.abs(want).max())))


def _check_same_results(mod, *args):
    _close(_run(mod, *args), _run(mod, *args, fold=False))


def _folds_once(mod):
    """Applies the pass, checks it left its input alone and that a second run is a no-op."""
    before = mod.script()
    out = FoldScaleAxis()(mod)
    assert mod.script() == before
    again = FoldScaleAxis()(out)
    assert again is out or structural_equal(again, out)
    return out


# -- folding -------------------------------------------------------------------


def test_multiply_after_conv_folds_into_weight():
    w, s = _rand(6, 4, 3, 3), _rand(6, 1, 1, positive=True)

    def body(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(w), padding=(1, 1)))
        return op.multiply(y, const(s))

    mod = _module(body)
    out = _folds_once(mod)
    assert _ops(out) == ["nn.conv2d"]
    (folded,) = _conv_weights(out)
    assert folded.dtype == np.float32
    np.testing.assert_allclose(folded, w * s[:, :, :, None], rtol=1e-6)
    _check_same_results(mod, _rand(2, 4, 8, 8))


def test_bias_add_then_scale_then_shift_become_one_add():
    """(conv + b) * s + t  ==  conv(W*s) + (b*s + t); also 2 stacked BNs, operands swapped."""
    w, b, s1, t1 = _rand(6, 4, 1, 1), _rand(1, 6, 1, 1), _rand(6, 1, 1), _rand(6, 1, 1)
    s2, t2 = _rand(1, 6, 1, 1), _rand(6, 1, 1)

    def body(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(w)))
        y = bb.emit(op.add(const(b), y))
        y = bb.emit(op.multiply(y, const(s1)))
        y = bb.emit(op.add(y, const(t1)))
        y = bb.emit(op.multiply(const(s2), y))
        y = bb.emit(op.add(y, const(t2)))
        return op.nn.relu(y)

    mod = _module(body)
    out = _folds_once(mod)
    assert _ops(out) == ["nn.conv2d", "add", "nn.relu"]
    scale = (s1.reshape(6) * s2.reshape(6)).astype(np.float64)
    (folded,) = _conv_weights(out)
    np.testing.assert_allclose(folded, w * scale[:, None, None, None], rtol=1e-6)
    add = next(bv.value for bv in _bindings(out) if _is(bv.value, "add"))
    shift = (b.reshape(6) * s1.reshape(6) + t1.reshape(6)) * s2.reshape(6) + t2.reshape(6)
    np.testing.assert_allclose(add.args[1].data.reshape(6), shift, rtol=1e-5)
    _check_same_results(mod, _rand(2, 4, 8, 8))


@pytest.mark.parametrize("groups", [1, 2, 4])
@pytest.mark.parametrize("scale_shape", [(8, 1, 1), (1, 8, 1, 1), (), (1,), (1, 1, 1, 1)])
def test_grouped_conv_and_scale_shapes(groups, scale_shape):
    w = _rand(8, 4 // groups, 3, 3)
    s = _rand(*scale_shape) if scale_shape else np.asarray(1.5, F32)

    def body(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(w), strides=(2, 2), groups=groups))
        return op.multiply(y, const(s))

    mod = _module(body, x_shape=(2, 4, 9, 9))
    out = _folds_once(mod)
    assert _ops(out) == ["nn.conv2d"]
    _check_same_results(mod, _rand(2, 4, 9, 9))


def test_adds_only_chain_merges_and_single_add_is_left_alone():
    w, b1, b2 = _rand(3, 4, 1, 1), _rand(3, 1, 1), _rand(3, 1, 1)

    def two(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(w)))
        y = bb.emit(op.add(y, const(b1)))
        return op.add(y, const(b2))

    mod = _module(two)
    out = _folds_once(mod)
    assert _ops(out) == ["nn.conv2d", "add"]
    _check_same_results(mod, _rand(2, 4, 8, 8))

    def one(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(w)))
        return op.add(y, const(b1))

    single = _module(one)
    assert FoldScaleAxis()(single) is single


def test_symbolic_batch_and_float64():
    n = prim.PrimVar("n")
    w, s = _rand(5, 4, 3, 3, dtype="float64"), _rand(5, 1, 1, dtype="float64")

    def body(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(w)))
        return op.multiply(y, const(s))

    mod = _module(body, x_shape=(n, 4, 6, 6), dtype="float64", attrs={"tir_var_upper_bound": {"n": 4}})
    out = _folds_once(mod)
    assert _ops(out) == ["nn.conv2d"]
    assert _conv_weights(out)[0].dtype == np.float64
    for batch in (1, 3):
        _check_same_results(mod, _rand(batch, 4, 6, 6, dtype="float64"))


def test_chain_stops_at_first_step_that_does_not_qualify():
    """conv * s (per-channel) * m (spatial): s folds, the spatial multiply stays."""
    w, s, m = _rand(3, 4, 3, 3), _rand(3, 1, 1), _rand(1, 1, 6, 6)

    def body(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(w)))
        y = bb.emit(op.multiply(y, const(s)))
        return op.multiply(y, const(m))

    mod = _module(body)
    out = _folds_once(mod)
    assert _ops(out) == ["nn.conv2d", "multiply"]
    assert _bindings(out)[-1].value.args[1].data.shape == (1, 1, 6, 6)
    _check_same_results(mod, _rand(2, 4, 8, 8))


def test_folds_inside_if_branches():
    w, s = _rand(3, 4, 1, 1), _rand(3, 1, 1)
    x = Var("x", struct_info=TensorStructInfo((1, 4, 5, 5), F32))
    c = Var("c", struct_info=TensorStructInfo((), "bool"))
    bb = BlockBuilder()
    with bb.function("main", [x, c]):
        y = Var("y", struct_info=TensorStructInfo((1, 3, 5, 5), F32))
        z = Var("z", struct_info=TensorStructInfo((1, 3, 5, 5), F32))
        then_seq = SeqExpr(
            [E.BindingBlock((VarBinding(y, op.nn.conv2d(x, const(w))), VarBinding(z, op.multiply(y, const(s)))))],
            z,
        )
        y2 = Var("y2", struct_info=y.struct_info)
        else_seq = SeqExpr([E.BindingBlock((VarBinding(y2, op.nn.conv2d(x, const(w))),))], y2)
        out = bb.emit(If(c, then_seq, else_seq))
        bb.emit_func_output(out)
    mod = bb.get()
    folded = _folds_once(mod)
    branch = next(b.value for b in _bindings(folded) if isinstance(b.value, If)).true_branch
    ops = [b.value.op.name for blk in branch.blocks for b in blk.bindings]
    assert ops == ["nn.conv2d"]
    xv = _rand(1, 4, 5, 5)
    for cond in (True, False):
        cv = np.asarray(cond)
        _close(_run(mod, xv, cv), _run(mod, xv, cv, fold=False))


def test_in_default_pipeline_after_fold_constant():
    host = hetvm.pipeline.target_vdevice("llvm")
    names = [p.name for p in default_pipeline(host, host).passes]
    assert names.index("FoldScaleAxis") == names.index("FoldConstant") + 1
    assert names.index("FoldScaleAxis") < names.index("PlanDevices")


# -- not folding -----------------------------------------------------------------


def _scale_param():
    return Var("s", struct_info=TensorStructInfo((6, 1, 1), F32))


def _w_param():
    return Var("w", struct_info=TensorStructInfo((6, 4, 3, 3), F32))


W6 = _rand(6, 4, 3, 3)


def _nofold_cases():
    def scale_is_param(bb, x, s):
        y = bb.emit(op.nn.conv2d(x, const(W6)))
        return op.multiply(y, s)

    def weight_is_param(bb, x, w):
        y = bb.emit(op.nn.conv2d(x, w))
        return op.multiply(y, const(_rand(6, 1, 1)))

    def scale_not_per_channel(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(W6)))
        return op.multiply(y, const(_rand(6, 6, 6)))

    def scale_grows_result(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(W6)))
        return op.multiply(y, const(_rand(3, 6, 1, 1)))

    def conv_used_twice(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(W6)))
        z = bb.emit(op.multiply(y, const(_rand(6, 1, 1))))
        return op.add(z, y)

    def non_finite_scale(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(W6)))
        return op.multiply(y, const(np.full((6, 1, 1), np.inf, F32)))

    def scale_by_itself(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(W6)))
        return op.multiply(y, y)

    def nhwc_layout(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(_rand(6, 8, 3, 3)), data_layout="NHWC"))
        return op.multiply(y, const(_rand(6)))

    return {
        "scale_is_param": (scale_is_param, (_scale_param(),)),
        "weight_is_param": (weight_is_param, (_w_param(),)),
        "scale_not_per_channel": (scale_not_per_channel, ()),
        "scale_grows_result": (scale_grows_result, ()),
        "conv_used_twice": (conv_used_twice, ()),
        "non_finite_scale": (non_finite_scale, ()),
        "scale_by_itself": (scale_by_itself, ()),
        "nhwc_layout": (nhwc_layout, ()),
    }


@pytest.mark.parametrize("case", sorted(_nofold_cases()))
def test_left_alone(case):
    body, params = _nofold_cases()[case]
    mod = _module(body, x_shape=(3, 4, 8, 8), extra_params=params)
    assert FoldScaleAxis()(mod) is mod


def test_intermediate_with_other_use_ends_the_chain():
    """conv * s is returned as well: s folds, the later add (whose input is needed) stays."""
    w, s, b = _rand(6, 4, 3, 3), _rand(6, 1, 1), _rand(6, 1, 1)

    def body(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(w)))
        z = bb.emit(op.multiply(y, const(s)))
        t = bb.emit(op.add(z, const(b)))
        return E.Tuple((z, t))

    mod = _module(body)
    out = _folds_once(mod)
    assert _ops(out) == ["nn.conv2d", "add"]
    x = _rand(2, 4, 8, 8)
    with PassContext(disabled_pass=["FoldScaleAxis"]):
        ref = hetvm.VirtualMachine(hetvm.build(mod))["main"](x)
    res = hetvm.VirtualMachine(hetvm.build(mod))["main"](x)
    for a, r in zip(res, ref):
        _close(a.numpy(), r.numpy())


# -- ONNX conv + BatchNormalization ------------------------------------------------


def _conv_bn_model():
    """Conv(bias) -> BN -> Relu -> grouped Conv -> BN -> Relu -> Conv(no bias) -> BN."""
    nodes, inits = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(arr, name))
        return name

    def bn(inp, out, c):
        nodes.append(helper.make_node(
            "BatchNormalization",
            [inp, init(out + "_g", _rand(c)), init(out + "_b", _rand(c)), init(out + "_m", _rand(c)),
             init(out + "_v", _rand(c, positive=True))],
            [out], epsilon=1e-3,
        ))

    nodes.append(helper.make_node("Conv", ["x", init("w1", _rand(8, 3, 3, 3)), init("b1", _rand(8))], ["c1"],
                                  pads=[1, 1, 1, 1]))
    bn("c1", "n1", 8)
    nodes.append(helper.make_node("Relu", ["n1"], ["r1"]))
    nodes.append(helper.make_node("Conv", ["r1", init("w2", _rand(8, 2, 3, 3))], ["c2"], group=4,
                                  strides=[2, 2], pads=[1, 1, 1, 1]))
    bn("c2", "n2", 8)
    nodes.append(helper.make_node("Relu", ["n2"], ["r2"]))
    nodes.append(helper.make_node("Conv", ["r2", init("w3", _rand(5, 8, 1, 1))], ["c3"]))
    bn("c3", "y", 5)
    graph = helper.make_graph(
        nodes, "conv_bn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 10, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 5, 5])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    onnx.checker.check_model(model)
    return model


def test_onnx_conv_batch_norm_folds():
    model = _conv_bn_model()
    mod = from_onnx(model)
    prepared = FoldConstant()(Normalize()(mod))
    assert _ops(prepared).count("multiply") == 3
    out = _folds_once(prepared)
    ops = _ops(out)
    assert "multiply" not in ops
    assert ops.count("nn.conv2d") == 3 and ops.count("add") == 3
    x = _rand(2, 3, 10, 10)
    got = _run(mod, x)
    _close(got, _run(mod, x, fold=False))

    ort = onnxruntime_or_fail()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_constant_weights_are_new_objects():
    """The input module's constants keep their values (the pass builds new ones)."""
    w, s = _rand(6, 4, 3, 3), _rand(6, 1, 1)
    wc = const(w)

    def body(bb, x):
        y = bb.emit(op.nn.conv2d(x, wc))
        return op.multiply(y, const(s))

    mod = _module(body)
    out = FoldScaleAxis()(mod)
    (new_w,) = [b.value.args[1] for b in _bindings(out) if _is(b.value, "nn.conv2d")]
    assert isinstance(new_w, Constant) and new_w is not wc
    np.testing.assert_array_equal(wc.data, w)
