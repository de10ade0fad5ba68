"""FuseConvEpilogue: nn.conv2d + per-channel bias add + relu become one nn.conv2d_bias_act."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import hetvm
import hetvm.op as op
from hetvm.frontend import from_onnx
from hetvm.ir import BlockBuilder, Call, Op, TensorStructInfo, Var, const
from hetvm.ir import expr as E
from hetvm.ir.structural import assert_structural_equal
from hetvm.pipeline import default_pipeline
from hetvm.script import from_source
from hetvm.testing.ir_query import bindings as _bindings
from hetvm.testing.ir_query import build_and_run, one_input_module
from hetvm.testing.ir_query import op_calls as _calls
from hetvm.testing.ir_query import op_names as _ops
from hetvm.testing.oracle import onnxruntime_or_fail
from hetvm.transform import FoldConstant, FoldScaleAxis, FuseConvEpilogue, Normalize, PassContext

F32 = "float32"


def _rng():
    return np.random.default_rng(0)


def _rand(rng, *shape, dtype=F32, positive=False):
    a = rng.standard_normal(shape)
    if positive:
        a = np.abs(a) + 0.5
    return a.astype(dtype)


def _module(body_fn, x_shape=(2, 4, 8, 8), **kwargs):
    return one_input_module(body_fn, x_shape, **kwargs)


def _run(mod, *args, fuse=True):
    return build_and_run(mod, *args, disabled=[] if fuse else ["FuseConvEpilogue"])


def _fuses_once(mod):
    out = FuseConvEpilogue()(mod)
    assert_structural_equal(FuseConvEpilogue()(out), out)  # idempotent
    return out


def _close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


# -- fusing ----------------------------------------------------------------------


@pytest.mark.parametrize("bias_shape", [(6, 1, 1), (1, 6, 1, 1)])
@pytest.mark.parametrize("bias_first", [False, True])
def test_conv_bias_relu_becomes_one_call(bias_shape, bias_first):
    rng = _rng()
    w, b = _rand(rng, 6, 4, 3, 3), _rand(rng, *bias_shape)

    def body(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(w), padding=1, strides=(1, 2)))
        z = bb.emit(op.add(const(b), y) if bias_first else op.add(y, const(b)))
        return op.nn.relu(z)

    mod = _module(body)
    out = _fuses_once(mod)
    (call,) = _calls(out)
    assert call.op.name == "nn.conv2d_bias_act"
    assert call.attrs["activation"] == "relu"
    assert call.attrs["padding"] == (1, 1, 1, 1) and call.attrs["strides"] == (1, 2)
    assert call.args[0] is out["main"].params[0] and call.args[1].data is w
    np.testing.assert_array_equal(call.args[2].data, b.reshape(6))
    assert call.args[2].struct_info.shape[0].value == 6
    assert call.struct_info.shape == _calls(mod)[-1].struct_info.shape
    assert (
        mod["main"].body.blocks[0].bindings[-1].var.name_hint
        == out["main"].body.blocks[0].bindings[-1].var.name_hint
    )
    assert "nn.conv2d_bias_act" in hetvm.pipeline.lower(mod).script()
    x = _rand(rng, 2, 4, 8, 8)
    got = _run(mod, x)
    _close(got, _run(mod, x, fuse=False))
    assert got.min() == 0.0


def test_bias_without_relu_and_relu_without_bias():
    rng = _rng()
    w1, b1, w2 = _rand(rng, 6, 4, 3, 3), _rand(rng, 6, 1, 1), _rand(rng, 3, 6, 1, 1)

    def body(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(w1), padding=1))
        z = bb.emit(op.add(y, const(b1)))
        c = bb.emit(op.nn.conv2d(z, const(w2)))
        return op.nn.relu(c)

    mod = _module(body)
    out = _fuses_once(mod)
    calls = _calls(out)
    assert [c.op.name for c in calls] == ["nn.conv2d_bias_act"] * 2
    assert [c.attrs["activation"] for c in calls] == ["none", "relu"]
    np.testing.assert_array_equal(calls[1].args[2].data, np.zeros(3, F32))
    assert calls[1].args[0].name_hint == _bindings(mod)[1].var.name_hint
    x = _rand(rng, 2, 4, 8, 8)
    _close(_run(mod, x), _run(mod, x, fuse=False))


def test_grouped_and_weight_parameter_fuse():
    rng = _rng()
    wv = Var("w", struct_info=TensorStructInfo((8, 2, 3, 3), F32))
    b = _rand(rng, 8, 1, 1)

    def body(bb, x, w):
        y = bb.emit(op.nn.conv2d(x, w, groups=2, dilation=2, padding=2))
        z = bb.emit(op.add(y, const(b)))
        return op.nn.relu(z)

    mod = _module(body, extra_params=(wv,))
    out = _fuses_once(mod)
    assert _ops(out) == ["nn.conv2d_bias_act"]
    x, w = _rand(rng, 2, 4, 8, 8), _rand(rng, 8, 2, 3, 3)
    _close(_run(mod, x, w), _run(mod, x, w, fuse=False))


def test_in_default_pipeline_after_fold_scale_axis():
    host = hetvm.pipeline.target_vdevice("llvm")
    names = [p.name for p in default_pipeline(host, host).passes]
    # after the bias is folded and pools are reordered (a bias add stays after the pair)
    assert names.index("FoldScaleAxis") < names.index("ReorderPoolConv") < names.index("FuseConvEpilogue")
    assert names.index("FuseConvEpilogue") < names.index("PlanDevices")


def test_text_form_round_trips():
    rng = _rng()
    w, b = _rand(rng, 6, 4, 3, 3), _rand(rng, 6, 1, 1)

    def body(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(w), padding=(1, 0), strides=2))
        z = bb.emit(op.add(y, const(b)))
        return op.nn.relu(z)

    out = FuseConvEpilogue()(_module(body))
    text = out.script()
    assert "R.nn.conv2d_bias_act(" in text and 'activation="relu"' in text
    again = from_source(text)
    assert_structural_equal(again, out)
    assert again.script() == text


def test_constructor_round_trips_and_checks():
    x = Var("x", struct_info=TensorStructInfo((1, 4, 8, 8), F32))
    w = Var("w", struct_info=TensorStructInfo((6, 4, 3, 3), F32))
    b = Var("b", struct_info=TensorStructInfo((6,), F32))
    call = op.nn.conv2d_bias_act(x, w, b, padding=1, activation="relu")
    assert call.struct_info.shape == op.nn.conv2d(x, w, padding=1).struct_info.shape
    assert_structural_equal(op.nn.conv2d_bias_act(*call.args, **call.attrs), call)
    bad = Var("b", struct_info=TensorStructInfo((5,), F32))
    with pytest.raises(hetvm.errors.StructInfoError, match="5 values"):
        op.nn.conv2d_bias_act(x, w, bad)
    with pytest.raises(hetvm.errors.StructInfoError, match="activation"):
        op.nn.conv2d_bias_act(x, w, b, activation="gelu")


# -- not fusing ------------------------------------------------------------------

W6 = _rand(_rng(), 6, 4, 3, 3)


def _nofuse_cases():
    def lone_conv(bb, x):
        return op.nn.conv2d(x, const(W6))

    def conv_used_twice(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(W6)))
        z = bb.emit(op.add(y, const(np.ones((6, 1, 1), F32))))
        return op.add(z, y)

    def conv_used_twice_relu(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(W6)))
        r = bb.emit(op.nn.relu(y))
        return E.Tuple((r, y))

    def bias_is_param(bb, x, b):
        y = bb.emit(op.nn.conv2d(x, const(W6)))
        return op.add(y, b)

    def bias_not_per_channel(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(W6)))
        return op.add(y, const(np.ones((6, 6, 6), F32)))

    def bias_on_width(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(W6)))
        return op.add(y, const(np.ones((6,), F32)))

    def bias_grows_result(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(W6)))
        return op.add(y, const(np.ones((3, 6, 1, 1), F32)))

    def bias_by_itself(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(W6)))
        return op.add(y, y)

    def nhwc_layout(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(_rand(_rng(), 6, 8, 3, 3)), data_layout="NHWC"))
        return op.nn.relu(y)

    bias_param = Var("b", struct_info=TensorStructInfo((6, 1, 1), F32))
    return {
        "lone_conv": (lone_conv, ()),
        "conv_used_twice": (conv_used_twice, ()),
        "conv_used_twice_relu": (conv_used_twice_relu, ()),
        "bias_is_param": (bias_is_param, (bias_param,)),
        "bias_not_per_channel": (bias_not_per_channel, ()),
        "bias_on_width": (bias_on_width, ()),
        "bias_grows_result": (bias_grows_result, ()),
        "bias_by_itself": (bias_by_itself, ()),
        "nhwc_layout": (nhwc_layout, ()),
    }


@pytest.mark.parametrize("case", sorted(_nofuse_cases()))
def test_left_alone(case):
    body, params = _nofuse_cases()[case]
    mod = _module(body, x_shape=(3, 4, 8, 8), extra_params=params)
    assert FuseConvEpilogue()(mod) is mod


def test_add_with_other_use_fuses_bias_only():
    """z = conv + b is returned as well: conv and the add fuse, the relu stays."""
    rng = _rng()
    w, b = _rand(rng, 6, 4, 3, 3), _rand(rng, 6, 1, 1)

    def body(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(w)))
        z = bb.emit(op.add(y, const(b)))
        r = bb.emit(op.nn.relu(z))
        return E.Tuple((z, r))

    mod = _module(body)
    out = _fuses_once(mod)
    calls = _calls(out)
    assert [c.op.name for c in calls] == ["nn.conv2d_bias_act", "nn.relu"]
    assert calls[0].attrs["activation"] == "none"
    x = _rand(rng, 2, 4, 8, 8)
    for a, r in zip(_run(mod, x), _run(mod, x, fuse=False)):
        _close(a, r)


# -- ONNX conv + BatchNormalization + Relu -------------------------------------------


def _conv_bn_model(rng):
    """Conv(bias) -> BN -> Relu -> grouped Conv -> BN -> Relu -> Conv(no bias) -> BN."""
    nodes, inits = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(arr, name))
        return name

    def bn(inp, out, c):
        nodes.append(helper.make_node(
            "BatchNormalization",
            [inp, init(out + "_g", _rand(rng, c)), init(out + "_b", _rand(rng, c)), init(out + "_m", _rand(rng, c)),
             init(out + "_v", _rand(rng, c, positive=True))],
            [out], epsilon=1e-3,
        ))  # fmt: skip

    nodes.append(helper.make_node("Conv", ["x", init("w1", _rand(rng, 8, 3, 3, 3)), init("b1", _rand(rng, 8))],
                                  ["c1"], pads=[1, 1, 1, 1]))  # fmt: skip
    bn("c1", "n1", 8)
    nodes.append(helper.make_node("Relu", ["n1"], ["r1"]))
    nodes.append(helper.make_node("Conv", ["r1", init("w2", _rand(rng, 8, 2, 3, 3))], ["c2"], group=4,
                                  strides=[2, 2], pads=[1, 1, 1, 1]))  # fmt: skip
    bn("c2", "n2", 8)
    nodes.append(helper.make_node("Relu", ["n2"], ["r2"]))
    nodes.append(helper.make_node("Conv", ["r2", init("w3", _rand(rng, 5, 8, 1, 1))], ["c3"]))
    bn("c3", "y", 5)
    graph = helper.make_graph(
        nodes, "conv_bn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 10, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 5, 5])],
        inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    onnx.checker.check_model(model)
    return model


def test_onnx_conv_batch_norm_relu_fuses():
    rng = _rng()
    model = _conv_bn_model(rng)
    mod = from_onnx(model)
    prepared = FoldScaleAxis()(FoldConstant()(Normalize()(mod)))
    out = _fuses_once(prepared)
    calls = _calls(out)
    assert [c.op.name for c in calls] == ["nn.conv2d_bias_act"] * 3
    assert [c.attrs["activation"] for c in calls] == ["relu", "relu", "none"]
    x = _rand(rng, 2, 3, 10, 10)
    got = _run(mod, x)
    _close(got, _run(mod, x, fuse=False))

    ort = onnxruntime_or_fail()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_input_module_is_not_mutated():
    rng = _rng()
    w, b = _rand(rng, 6, 4, 3, 3), _rand(rng, 6, 1, 1)

    def body(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(w)))
        return op.nn.relu(bb.emit(op.add(y, const(b))))

    mod = _module(body)
    text = mod.script()
    FuseConvEpilogue()(mod)
    assert mod.script() == text
    assert _ops(mod) == ["nn.conv2d", "add", "nn.relu"]


# -- residual add (ResNet blocks): nn.conv2d_bias_add_act ---------------------------

W6B = _rand(_rng(), 6, 1, 1)


@pytest.mark.parametrize("residual_first", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("with_relu", [False, True])
def test_residual_add_fuses(residual_first, with_bias, with_relu):
    rng = _rng()
    w, b = _rand(rng, 6, 4, 3, 3), _rand(rng, 6, 1, 1)
    sv = Var("s", struct_info=TensorStructInfo((2, 6, 8, 8), F32))

    def body(bb, x, s):
        y = bb.emit(op.nn.conv2d(x, const(w), padding=1))
        if with_bias:
            y = bb.emit(op.add(y, const(b)))
        z = op.add(s, y) if residual_first else op.add(y, s)
        return op.nn.relu(bb.emit(z)) if with_relu else z

    mod = _module(body, extra_params=(sv,))
    out = _fuses_once(mod)
    (call,) = _calls(out)
    assert call.op.name == "nn.conv2d_bias_add_act"
    assert call.attrs["activation"] == ("relu" if with_relu else "none")
    params = out["main"].params
    assert call.args[0] is params[0] and call.args[3] is params[1]
    np.testing.assert_array_equal(call.args[2].data, b.reshape(6) if with_bias else np.zeros(6, F32))
    assert call.struct_info.shape == _calls(mod)[-1].struct_info.shape
    x, s = _rand(rng, 2, 4, 8, 8), _rand(rng, 2, 6, 8, 8)
    got = _run(mod, x, s)
    _close(got, _run(mod, x, s, fuse=False))
    if with_relu:
        assert got.min() == 0.0


def test_unfinished_fused_op_takes_the_residual_and_relu():
    """Text written against the older pass (conv2d_bias_act, then add and relu) fuses too."""
    rng = _rng()
    w, b = _rand(rng, 6, 4, 3, 3), _rand(rng, 6)
    sv = Var("s", struct_info=TensorStructInfo((2, 6, 8, 8), F32))

    def body(bb, x, s):
        y = bb.emit(op.nn.conv2d_bias_act(x, const(w), const(b), padding=1))
        return op.nn.relu(bb.emit(op.add(y, s)))

    mod = _module(body, extra_params=(sv,))
    out = _fuses_once(mod)
    (call,) = _calls(out)
    assert call.op.name == "nn.conv2d_bias_add_act" and call.attrs["activation"] == "relu"
    assert call.args[2].data is b
    x, s = _rand(rng, 2, 4, 8, 8), _rand(rng, 2, 6, 8, 8)
    _close(_run(mod, x, s), _run(mod, x, s, fuse=False))


def test_residual_text_form_round_trips():
    rng = _rng()
    w, b = _rand(rng, 6, 4, 3, 3), _rand(rng, 6, 1, 1)
    sv = Var("s", struct_info=TensorStructInfo((2, 6, 8, 8), F32))

    def body(bb, x, s):
        y = bb.emit(op.add(bb.emit(op.nn.conv2d(x, const(w), padding=1)), const(b)))
        return op.nn.relu(bb.emit(op.add(y, s)))

    out = FuseConvEpilogue()(_module(body, extra_params=(sv,)))
    text = out.script()
    assert "R.nn.conv2d_bias_add_act(" in text and 'activation="relu"' in text
    again = from_source(text)
    assert_structural_equal(again, out)
    assert again.script() == text


def _residual_nofuse_cases():
    def conv_used_twice(bb, x, s):
        y = bb.emit(op.nn.conv2d(x, const(W6), padding=1))
        z = bb.emit(op.add(y, s))
        return E.Tuple((bb.emit(op.nn.relu(z)), y))

    def biased_used_twice(bb, x, s):
        y = bb.emit(op.nn.conv2d(x, const(W6), padding=1))
        yb = bb.emit(op.add(y, const(W6B)))
        z = bb.emit(op.add(yb, s))
        return E.Tuple((yb, z))

    def residual_broadcasts(bb, x, s):
        y = bb.emit(op.nn.conv2d(x, const(W6), padding=1))
        return op.add(y, s)

    def residual_grows_result(bb, x, s):
        y = bb.emit(op.nn.conv2d(x, const(W6), padding=1))
        return op.add(y, s)

    def residual_unknown_dtype(bb, x, s):
        y = bb.emit(op.nn.conv2d(x, const(W6), padding=1))
        return op.add(y, s)

    def residual_unknown_shape(bb, x, s):
        y = bb.emit(op.nn.conv2d(x, const(W6), padding=1))
        return op.add(y, s)

    def residual_is_conv_itself(bb, x, s):
        y = bb.emit(op.nn.conv2d(x, const(W6), padding=1))
        return op.add(y, y)

    def t(shape, dtype=F32):
        return Var("s", struct_info=TensorStructInfo(shape, dtype, 4 if shape is None else -1))

    full = t((3, 6, 8, 8))
    return {
        "conv_used_twice": (conv_used_twice, full),
        "residual_broadcasts": (residual_broadcasts, t((1, 6, 1, 8))),
        "residual_grows_result": (residual_grows_result, t((2, 3, 6, 8, 8))),
        "residual_unknown_dtype": (residual_unknown_dtype, t((3, 6, 8, 8), None)),
        "residual_unknown_shape": (residual_unknown_shape, t(None)),
        "residual_is_conv_itself": (residual_is_conv_itself, full),
        "biased_used_twice": (biased_used_twice, full),
    }


@pytest.mark.parametrize("case", sorted(_residual_nofuse_cases()))
def test_residual_left_alone(case):
    body, s = _residual_nofuse_cases()[case]
    mod = _module(body, x_shape=(3, 4, 8, 8), extra_params=(s,))
    out = FuseConvEpilogue()(mod)
    assert "nn.conv2d_bias_add_act" not in _ops(out)
    assert_structural_equal(FuseConvEpilogue()(out), out)


def test_residual_with_other_dtype_is_left_alone():
    """``add`` refuses mixed dtypes when it infers, so the mismatch is built by hand:
    the pass must not rely on inference having run."""
    x = Var("x", struct_info=TensorStructInfo((2, 4, 8, 8), F32))
    s = Var("s", struct_info=TensorStructInfo((2, 6, 8, 8), "float64"))
    bb = BlockBuilder()
    with bb.function("main", [x, s]):
        with bb.dataflow():
            y = bb.emit(op.nn.conv2d(x, const(W6), padding=1))
            z = bb.emit(E.Call(Op("add"), (y, s), E.Attrs({}), (), struct_info=y.struct_info))
            out = bb.emit_output(op.nn.relu(z))
        bb.emit_func_output(out)
    mod = bb.get()
    assert _ops(FuseConvEpilogue()(mod)) == ["nn.conv2d", "add", "nn.relu"]


def _two_conv_add(rng):
    """relu(conv_a(x) + b_a + conv_b(x) + b_b): both convolutions could take the add."""
    wa, wb = _rand(rng, 6, 4, 3, 3), _rand(rng, 6, 4, 1, 1)
    ba, bb_ = _rand(rng, 6, 1, 1), _rand(rng, 6, 1, 1)

    def body(bb, x):
        a = bb.emit(op.add(bb.emit(op.nn.conv2d(x, const(wa), padding=1)), const(ba)))
        b = bb.emit(op.add(bb.emit(op.nn.conv2d(x, const(wb))), const(bb_)))
        return op.nn.relu(bb.emit(op.add(a, b)))

    return _module(body)


def test_two_convolutions_meeting_in_one_add():
    rng = _rng()
    mod = _two_conv_add(rng)
    out = _fuses_once(mod)
    calls = _calls(out)
    assert [c.op.name for c in calls] == ["nn.conv2d_bias_act", "nn.conv2d_bias_add_act"]
    # the later convolution (nearest the add) takes it; the earlier one is its residual
    assert calls[1].args[1].data.shape == (6, 4, 1, 1)
    assert calls[1].args[3] is _bindings(out)[0].var
    x = _rand(rng, 2, 4, 8, 8)
    _close(_run(mod, x), _run(mod, x, fuse=False))


# -- a ResNet-like network, memory planned, on the CPU and on sim + CPU ---------------


def _resnet_like(rng, batch=2):
    """Stem conv, a downsampling block (conv shortcut) and an identity block; every
    shortcut is a planned intermediate whose last read is the fused op."""
    x = Var("x", struct_info=TensorStructInfo((batch, 3, 16, 16), F32))

    def cbr(bb, v, o, i, k, stride=1, relu=True):
        w, b = _rand(rng, o, i, k, k), _rand(rng, o, 1, 1)
        y = bb.emit(op.add(bb.emit(op.nn.conv2d(v, const(w), strides=stride, padding=k // 2)), const(b)))
        return bb.emit(op.nn.relu(y)) if relu else y

    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            stem = cbr(bb, x, 8, 3, 3)
            short = cbr(bb, stem, 16, 8, 1, stride=2, relu=False)
            h = cbr(bb, stem, 4, 8, 1)
            h = cbr(bb, h, 4, 4, 3, stride=2)
            h = cbr(bb, h, 16, 4, 1, relu=False)
            r1 = bb.emit(op.nn.relu(bb.emit(op.add(h, short))))
            h = cbr(bb, r1, 4, 16, 1)
            h = cbr(bb, h, 4, 4, 3)
            h = cbr(bb, h, 16, 4, 1, relu=False)
            r2 = bb.emit(op.nn.relu(bb.emit(op.add(r1, h))))
            out = bb.emit_output(op.nn.conv2d(r2, const(_rand(rng, 2, 16, 1, 1))))
        bb.emit_func_output(out)
    return bb.get()


def _fused_kernel_buffers(lowered):
    """(output, residual) byte ranges of each planned nn.conv2d_bias_add_act call."""
    from hetvm.ir import PrimValue

    placed = {}
    found = []
    for b in _bindings(lowered):
        v = b.value
        if isinstance(v, Call) and isinstance(v.op, Op) and v.op.name == "memory.alloc_tensor":
            storage, offset, shape = v.args[0], v.args[1], v.args[2]
            off = offset.value.value if isinstance(offset, PrimValue) else offset
            nbytes = int(np.prod([d.value for d in shape.values])) * 4
            placed[b.var] = (storage, off, off + nbytes)
        elif isinstance(v, Call) and getattr(v.op, "global_symbol", "").endswith("nn.conv2d_bias_add_act"):
            found.append((v.args[4], v.args[3]))
    return [(placed.get(o), placed.get(r)) for o, r in found]


def test_resnet_block_memory_planned_matches_unfused():
    from hetvm.testing.interpreter import Interpreter

    rng = _rng()
    mod = _resnet_like(rng)
    fused = FuseConvEpilogue()(FoldConstant()(Normalize()(mod)))
    assert _ops(fused).count("nn.conv2d_bias_add_act") == 2
    lowered = hetvm.pipeline.lower(mod)
    pairs = _fused_kernel_buffers(lowered)
    assert len(pairs) == 2
    assert any(o is not None and r is not None for o, r in pairs)  # both in the arena
    for out_range, res_range in pairs:
        if out_range is not None and res_range is not None and out_range[0] is res_range[0]:
            assert out_range[2] <= res_range[1] or res_range[2] <= out_range[1]  # disjoint bytes
    x = _rand(rng, 2, 3, 16, 16)
    with PassContext(disabled_pass=["FuseConvEpilogue"]):
        want = hetvm.VirtualMachine(hetvm.build(mod))["main"](x).numpy()
    got = hetvm.VirtualMachine(hetvm.build(mod), poison=True)["main"](x).numpy()
    _close(got, want)
    _close(Interpreter(lowered).run("main", x), want)  # arenas as real views of bytes


def test_resnet_block_on_sim_and_cpu():
    from hetvm.cli_support.placement import pin_params
    from hetvm.ir import VDevice

    rng = _rng()
    mod = _resnet_like(rng)
    sim, cpu = VDevice("sim", 0), VDevice("llvm", 0)
    placed = pin_params(mod.with_global_infos(vdevice=[sim, cpu]), sim)
    x = _rand(rng, 2, 3, 16, 16)
    want = _run(mod, x, fuse=False)
    devices = [hetvm.device("sim", 0), hetvm.cpu(0)]
    for missing in ([], ["nn.conv2d_bias_add_act"]):
        options = {"missing_kernels": {"sim:0": missing}}
        exe = hetvm.build(placed, plan_devices_options=options)
        lowered = hetvm.pipeline.lower(placed, plan_devices_options=options)
        assert lowered.script().count("kernel.nn.conv2d_bias_add_act") == 2
        vm = hetvm.VirtualMachine(exe, devices, poison=True)
        got = vm["main"](x).copyto(hetvm.cpu(0)).numpy()
        _close(got, want)
        report = vm.memory_report()
        if missing:  # the fused op cannot run on sim: the network runs on the CPU
            assert report["cpu:0"]["peak_bytes"] > 0 and lowered.attrs["device_copies"]
        else:  # all on the accelerator, residuals included
            assert report["sim:0"]["peak_bytes"] > 0 and report["cpu:0"]["peak_bytes"] == 0


@pytest.mark.parametrize("part", ["nn.conv2d", "nn.relu", "add"])
def test_a_missing_part_makes_the_fused_op_missing(part):
    """sim configured without a kernel for a fused op's part has none for the fused
    op either: it falls back to the CPU, and the copy's reason names the part."""
    from hetvm.cli_support.placement import pin_params
    from hetvm.ir import VDevice

    rng = _rng()
    mod = _resnet_like(rng)
    sim, cpu = VDevice("sim", 0), VDevice("llvm", 0)
    placed = pin_params(mod.with_global_infos(vdevice=[sim, cpu]), sim)
    x = _rand(rng, 2, 3, 16, 16)
    want = _run(mod, x, fuse=False)
    options = {"missing_kernels": {"sim:0": [part]}}
    lowered = hetvm.pipeline.lower(placed, plan_devices_options=options)
    reasons = " ".join(str(c) for c in lowered.attrs["device_copies"])
    assert f"'{part}', which 'nn.conv2d_bias" in reasons
    exe = hetvm.build(placed, plan_devices_options=options)
    devices = [hetvm.device("sim", 0, missing_kernels=[part]), hetvm.cpu(0)]
    try:
        got = hetvm.VirtualMachine(exe, devices, poison=True)["main"](x).copyto(hetvm.cpu(0)).numpy()
    finally:
        hetvm.device("sim", 0, missing_kernels=[])
    _close(got, want)


def test_the_runtime_refuses_a_fused_op_whose_part_is_missing():
    from hetvm.ir import VDevice
    from hetvm.ir.op_registry import fused_parts, missing_part

    assert missing_part("nn.conv2d_bias_act", {"nn.relu"}) == "nn.relu"
    assert missing_part("nn.conv2d_bias_act", {"nn.conv2d_bias_act", "nn.relu"}) == "nn.conv2d_bias_act"
    assert missing_part("nn.scale_shift_act", {"nn.conv2d"}) is None
    assert missing_part("no.such.op", {"add"}) is None and fused_parts("add") == ()
    rng = _rng()
    mod = _resnet_like(rng).with_global_infos(vdevice=[VDevice("sim", 0)])
    exe = hetvm.build(mod, target="sim")  # planned with every kernel present
    try:
        with pytest.raises(hetvm.errors.HetvmRuntimeError, match="without a kernel for 'nn.relu', which"):
            vm = hetvm.VirtualMachine(exe, [hetvm.device("sim", 0, missing_kernels=["nn.relu"])])
            vm["main"](_rand(rng, 2, 3, 16, 16))
        graph, lib, _ = hetvm.build(mod, target="sim", executor="graph")
        with pytest.raises(hetvm.errors.HetvmRuntimeError, match="no kernel for 'nn.relu' \\(which"):
            hetvm.graph_executor.create(graph, lib, [hetvm.device("sim", 0, missing_kernels=["nn.relu"])])
    finally:
        hetvm.device("sim", 0, missing_kernels=[])
