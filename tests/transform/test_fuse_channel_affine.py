"""FuseChannelAffine: per-channel multiply/add chains (+ relu) become one nn.scale_shift_act."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import hetvm
import hetvm.op as op
from hetvm.frontend import from_onnx
from hetvm.ir import BlockBuilder, Op, TensorStructInfo, Var, VDevice, const, prim
from hetvm.ir import expr as E
from hetvm.ir.structural import assert_structural_equal
from hetvm.pipeline import default_pipeline
from hetvm.script import from_source
from hetvm.testing.ir_query import bindings as _bindings
from hetvm.testing.ir_query import build_and_run, one_input_module
from hetvm.testing.ir_query import op_calls as _calls
from hetvm.testing.ir_query import op_names as _ops
from hetvm.testing.oracle import onnxruntime_or_fail
from hetvm.transform import (
    FoldConstant,
    FoldScaleAxis,
    FuseChannelAffine,
    FuseConvEpilogue,
    Normalize,
)

F32 = "float32"


def _rng():
    return np.random.default_rng(0)


def _rand(rng, *shape, dtype=F32):
    return rng.standard_normal(shape).astype(dtype)


def _module(body_fn, x_shape=(2, 6, 5, 5), **kwargs):
    return one_input_module(body_fn, x_shape, **kwargs)


def _run(mod, *args, fuse=True, **build):
    return build_and_run(mod, *args, disabled=[] if fuse else ["FuseChannelAffine"], poison=True, **build)


def _fuses_once(mod):
    out = FuseChannelAffine()(mod)
    assert_structural_equal(FuseChannelAffine()(out), out)  # idempotent
    return out


def _close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def _densenet_chain(rng, c=6):
    """x -> concat -> (multiply, add, multiply, add, relu), as DenseNet's BNs after a concat."""
    s1, t1, s2, t2 = (_rand(rng, c, 1, 1) for _ in range(4))

    def body(bb, x):
        cat = bb.emit(op.concat([x, x], axis=1))
        a = bb.emit(op.multiply(cat, const(s1)))
        b = bb.emit(op.add(a, const(t1)))
        m = bb.emit(op.multiply(b, const(s2)))
        d = bb.emit(op.add(m, const(t2)))
        return op.nn.relu(d)

    return body, (s1, t1, s2, t2)


# -- fusing ----------------------------------------------------------------------


def test_densenet_chain_becomes_one_call():
    rng = _rng()
    body, (s1, t1, s2, t2) = _densenet_chain(rng)
    mod = _module(body, x_shape=(2, 3, 5, 5))
    out = _fuses_once(mod)
    concat, call = _calls(out)
    assert concat.op.name == "concat" and call.op.name == "nn.scale_shift_act"
    assert call.attrs["activation"] == "relu"
    assert call.args[0] is _bindings(out)[0].var
    s64 = [a.astype(np.float64).reshape(6) for a in (s1, t1, s2, t2)]
    np.testing.assert_allclose(call.args[1].data, s64[0] * s64[2], rtol=1e-7)
    np.testing.assert_allclose(call.args[2].data, s64[1] * s64[2] + s64[3], rtol=1e-6, atol=1e-7)
    assert call.args[1].data.dtype == np.float32 and call.args[1].data.shape == (6,)
    assert call.struct_info.shape == _calls(mod)[-1].struct_info.shape
    assert _bindings(out)[-1].var.name_hint == _bindings(mod)[-1].var.name_hint
    x = _rand(rng, 2, 3, 5, 5)
    got = _run(mod, x)
    _close(got, _run(mod, x, fuse=False))
    assert got.min() == 0.0
    assert "nn.scale_shift_act" in hetvm.pipeline.lower(mod).script()


@pytest.mark.parametrize("const_first", [False, True])
@pytest.mark.parametrize("shape", [(6, 1, 1), (1, 6, 1, 1), (1,), (), (1, 1, 1, 1)])
def test_operand_order_and_constant_shapes(const_first, shape):
    rng = _rng()
    s, t = _rand(rng, *shape), _rand(rng, *shape)

    def body(bb, x):
        a = bb.emit(op.multiply(const(s), x) if const_first else op.multiply(x, const(s)))
        return op.add(const(t), a) if const_first else op.add(a, const(t))

    mod = _module(body)
    out = _fuses_once(mod)
    (call,) = _calls(out)
    assert call.op.name == "nn.scale_shift_act" and call.attrs["activation"] == "none"
    np.testing.assert_allclose(call.args[1].data, np.broadcast_to(s.reshape(-1), (6,)), rtol=1e-7)
    x = _rand(rng, 2, 6, 5, 5)
    _close(_run(mod, x), _run(mod, x, fuse=False))


@pytest.mark.parametrize(
    "x_shape,const_shape",
    [((4, 6), (6,)), ((4, 6), (1, 6)), ((2, 6, 7), (6, 1)), ((1, 6, 2, 3, 4), (6, 1, 1, 1)), ((3, 6, 4, 4), ())],
)
def test_any_rank_with_channels_on_axis_1(x_shape, const_shape):
    rng = _rng()
    s, t = _rand(rng, *const_shape), _rand(rng, *const_shape)

    def body(bb, x):
        return op.nn.relu(bb.emit(op.add(bb.emit(op.multiply(x, const(s))), const(t))))

    mod = _module(body, x_shape=x_shape)
    out = _fuses_once(mod)
    assert _ops(out) == ["nn.scale_shift_act"]
    x = _rand(rng, *x_shape)
    _close(_run(mod, x), _run(mod, x, fuse=False))


@pytest.mark.parametrize("steps", [("add", "relu"), ("multiply", "relu"), ("add", "add"), ("multiply", "multiply")])
def test_two_step_chains_fuse(steps):
    rng = _rng()
    consts = [_rand(rng, 6, 1, 1) for _ in steps]

    def body(bb, x):
        cur = x
        for kind, c in zip(steps[:-1], consts):
            cur = bb.emit(getattr(op, kind)(cur, const(c)))
        last = steps[-1]
        return op.nn.relu(cur) if last == "relu" else getattr(op, last)(cur, const(consts[-1]))

    mod = _module(body)
    out = _fuses_once(mod)
    (call,) = _calls(out)
    assert call.op.name == "nn.scale_shift_act"
    assert call.attrs["activation"] == ("relu" if "relu" in steps else "none")
    if "multiply" not in steps:
        np.testing.assert_array_equal(call.args[1].data, np.ones(6, F32))
    if "add" not in steps:
        np.testing.assert_array_equal(call.args[2].data, np.zeros(6, F32))
    x = _rand(rng, 2, 6, 5, 5)
    _close(_run(mod, x), _run(mod, x, fuse=False))


def test_symbolic_batch_and_float64():
    rng = _rng()
    n = prim.PrimVar("n")
    s, t = _rand(rng, 6, 1, 1, dtype="float64"), _rand(rng, 6, 1, 1, dtype="float64")

    def body(bb, x):
        return op.nn.relu(bb.emit(op.add(bb.emit(op.multiply(x, const(s))), const(t))))

    mod = _module(body, x_shape=(n, 6, 3, 3), dtype="float64")
    out = _fuses_once(mod)
    (call,) = _calls(out)
    assert call.op.name == "nn.scale_shift_act" and call.args[1].data.dtype == np.float64
    assert call.struct_info.shape[0] is n
    x = _rand(rng, 3, 6, 3, 3, dtype="float64")
    np.testing.assert_allclose(_run(mod, x), np.maximum(x * s + t, 0), rtol=1e-12)


def test_chain_stops_at_a_value_with_another_use():
    """b = x*s + t is also returned: the multiply and add fuse, the rest stays."""
    rng = _rng()
    s, t, s2 = (_rand(rng, 6, 1, 1) for _ in range(3))

    def body(bb, x):
        a = bb.emit(op.multiply(x, const(s)))
        b = bb.emit(op.add(a, const(t)))
        c = bb.emit(op.multiply(b, const(s2)))
        r = bb.emit(op.nn.relu(c))
        return E.Tuple((b, r))

    mod = _module(body)
    out = _fuses_once(mod)
    calls = _calls(out)
    # the second chain (multiply, relu) starts at the shared value and fuses too
    assert [c.op.name for c in calls] == ["nn.scale_shift_act", "nn.scale_shift_act"]
    assert [c.attrs["activation"] for c in calls] == ["none", "relu"]
    assert calls[1].args[0] is _bindings(out)[0].var
    x = _rand(rng, 2, 6, 5, 5)
    for got, want in zip(_run(mod, x), _run(mod, x, fuse=False)):
        _close(got, want)


def test_after_relu_a_new_chain_starts():
    rng = _rng()
    cs = [_rand(rng, 6, 1, 1) for _ in range(4)]

    def body(bb, x):
        a = bb.emit(op.nn.relu(bb.emit(op.add(bb.emit(op.multiply(x, const(cs[0]))), const(cs[1])))))
        return op.nn.relu(bb.emit(op.add(bb.emit(op.multiply(a, const(cs[2]))), const(cs[3]))))

    mod = _module(body)
    out = _fuses_once(mod)
    assert _ops(out) == ["nn.scale_shift_act"] * 2
    x = _rand(rng, 2, 6, 5, 5)
    _close(_run(mod, x), _run(mod, x, fuse=False))


def test_text_form_round_trips():
    body, _ = _densenet_chain(_rng())
    out = FuseChannelAffine()(_module(body, x_shape=(2, 3, 5, 5)))
    text = out.script()
    assert "R.nn.scale_shift_act(" in text and 'activation="relu"' in text
    again = from_source(text)
    assert_structural_equal(again, out)
    assert again.script() == text


def test_in_default_pipeline_after_fuse_conv_epilogue():
    host = hetvm.pipeline.target_vdevice("llvm")
    names = [p.name for p in default_pipeline(host, host).passes]
    assert names.index("FuseChannelAffine") == names.index("FuseConvEpilogue") + 1
    assert names.index("FuseChannelAffine") < names.index("PlanDevices")


def test_input_module_is_not_mutated():
    body, _ = _densenet_chain(_rng())
    mod = _module(body, x_shape=(2, 3, 5, 5))
    text = mod.script()
    FuseChannelAffine()(mod)
    assert mod.script() == text
    assert _ops(mod) == ["concat", "multiply", "add", "multiply", "add", "nn.relu"]


# -- not fusing ------------------------------------------------------------------

C6 = _rand(_rng(), 6, 1, 1)


def _nofuse_cases():
    def lone_multiply(bb, x):
        return op.multiply(x, const(C6))

    def lone_add(bb, x):
        return op.add(x, const(C6))

    def lone_relu(bb, x):
        return op.nn.relu(x)

    def intermediate_used_twice(bb, x):
        a = bb.emit(op.multiply(x, const(C6)))
        b = bb.emit(op.add(a, const(C6)))
        return E.Tuple((a, b))

    def operand_is_a_parameter(bb, x, p):
        return op.add(bb.emit(op.multiply(x, p)), const(C6))

    def both_operands_tensors(bb, x, p):
        return op.nn.relu(bb.emit(op.add(x, p)))

    def channel_on_last_axis(bb, x):  # (C,) against NCHW broadcasts over W, not C
        v = const(np.ones(5, F32))
        return op.add(bb.emit(op.multiply(x, v)), v)

    def constant_per_batch_and_channel(bb, x):
        g = const(np.ones((3, 6, 1, 1), F32))
        return op.add(bb.emit(op.multiply(x, const(C6))), g)

    def constant_grows_result(bb, x):
        g = const(np.ones((2, 1, 6, 1, 1), F32))
        return op.add(bb.emit(op.multiply(x, const(C6))), g)

    def constant_not_per_channel(bb, x):
        g = const(np.ones((1, 1, 5, 1), F32))
        return op.add(bb.emit(op.multiply(x, g)), g)

    def infinite_scale(bb, x):
        s = C6.copy()
        s[2] = np.inf
        return op.add(bb.emit(op.multiply(x, const(s))), const(C6))

    def nan_shift(bb, x):
        t = C6.copy()
        t[0] = np.nan
        return op.add(bb.emit(op.multiply(x, const(C6))), const(t))

    def overflowing_product(bb, x):
        big = const(np.full((6, 1, 1), 1e30, F32))
        return op.multiply(bb.emit(op.multiply(x, big)), big)

    def pinned_intermediate(bb, x):
        a = bb.emit(op.multiply(x, const(C6)))
        sim = Var("a", struct_info=TensorStructInfo((3, 6, 5, 5), F32, vdevice=VDevice("sim", 0)))
        a2 = bb.emit(E.Call(Op("add"), (a, const(C6)), E.Attrs({}), (), struct_info=sim.struct_info))
        return op.nn.relu(a2)

    def constant_of_other_dtype(bb, x):  # add refuses mixed dtypes when inferring: built by hand
        a = bb.emit(op.multiply(x, const(C6)))
        t = const(C6.astype("float64"))
        return E.Call(Op("add"), (a, t), E.Attrs({}), (), struct_info=a.struct_info)

    p6 = Var("p", struct_info=TensorStructInfo((6, 1, 1), F32))
    return {
        "lone_multiply": (lone_multiply, ()),
        "lone_add": (lone_add, ()),
        "lone_relu": (lone_relu, ()),
        "intermediate_used_twice": (intermediate_used_twice, ()),
        "operand_is_a_parameter": (operand_is_a_parameter, (p6,)),
        "both_operands_tensors": (both_operands_tensors, (p6,)),
        "channel_on_last_axis": (channel_on_last_axis, ()),
        "constant_per_batch_and_channel": (constant_per_batch_and_channel, ()),
        "constant_grows_result": (constant_grows_result, ()),
        "constant_not_per_channel": (constant_not_per_channel, ()),
        "infinite_scale": (infinite_scale, ()),
        "nan_shift": (nan_shift, ()),
        "overflowing_product": (overflowing_product, ()),
        "pinned_intermediate": (pinned_intermediate, ()),
        "constant_of_other_dtype": (constant_of_other_dtype, ()),
    }


@pytest.mark.parametrize("case", sorted(_nofuse_cases()))
def test_left_alone(case):
    body, params = _nofuse_cases()[case]
    mod = _module(body, x_shape=(3, 6, 5, 5), extra_params=params)
    assert FuseChannelAffine()(mod) is mod


def test_integer_tensors_and_unknown_channels_are_left_alone():
    ci = const(np.full((6, 1, 1), 2, "int32"))

    def ints(bb, x):
        return op.add(bb.emit(op.multiply(x, ci)), ci)

    mod = _module(ints, dtype="int32")
    assert FuseChannelAffine()(mod) is mod

    def sym(bb, x):
        return op.nn.relu(bb.emit(op.multiply(x, const(np.float32(2.0)))))

    mod = _module(sym, x_shape=(2, prim.PrimVar("c"), 5, 5))
    assert FuseChannelAffine()(mod) is mod


def test_chain_across_blocks_is_left_alone():
    """The multiply ends a dataflow block, the add starts the next (plain) one."""
    x = Var("x", struct_info=TensorStructInfo((2, 6, 5, 5), F32))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit_output(op.multiply(x, const(C6)))
        b = bb.emit(op.add(a, const(C6)))
        bb.emit_func_output(b)
    mod = bb.get()
    assert FuseChannelAffine()(mod) is mod


# -- a DenseNet-like ONNX model: Concat -> BatchNormalization -> Relu -> Conv ---------


def _dense_block_model(rng):
    nodes, inits = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(arr, name))
        return name

    def bn_relu(inp, out, c):
        nodes.append(helper.make_node(
            "BatchNormalization",
            [inp, init(out + "_g", _rand(rng, c)), init(out + "_b", _rand(rng, c)), init(out + "_m", _rand(rng, c)),
             init(out + "_v", np.abs(_rand(rng, c)) + 0.5)],
            [out + "_bn"], epsilon=1e-5,
        ))  # fmt: skip
        nodes.append(helper.make_node("Relu", [out + "_bn"], [out]))

    nodes.append(helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]))
    bn_relu("p", "r0", 4)
    nodes.append(helper.make_node("Conv", ["r0", init("w0", _rand(rng, 3, 4, 3, 3))], ["c0"], pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Concat", ["p", "c0"], ["cat"], axis=1))
    bn_relu("cat", "r1", 7)
    nodes.append(helper.make_node("Conv", ["r1", init("w1", _rand(rng, 5, 7, 1, 1))], ["y"]))
    graph = helper.make_graph(
        nodes, "dense_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 4, 4])],
        inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    onnx.checker.check_model(model)
    return model


def test_onnx_batch_norm_after_concat_fuses():
    rng = _rng()
    model = _dense_block_model(rng)
    mod = from_onnx(model)
    prepared = FuseConvEpilogue()(FoldScaleAxis()(FoldConstant()(Normalize()(mod))))
    out = _fuses_once(prepared)
    assert _ops(out).count("nn.scale_shift_act") == 2
    assert not {"multiply", "add", "nn.relu"} & set(_ops(out))
    x = _rand(rng, 2, 4, 8, 8)
    got = _run(mod, x)
    _close(got, _run(mod, x, fuse=False))

    ort = onnxruntime_or_fail()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_onnx_dense_block_on_sim_and_cpu():
    from hetvm.cli_support.placement import pin_params

    rng = _rng()
    mod = from_onnx(_dense_block_model(rng))
    sim, cpu = VDevice("sim", 0), VDevice("llvm", 0)
    placed = pin_params(mod.with_global_infos(vdevice=[sim, cpu]), sim)
    x = _rand(rng, 2, 4, 8, 8)
    want = _run(mod, x, fuse=False)
    devices = [hetvm.device("sim", 0), hetvm.cpu(0)]
    for missing in ([], ["nn.scale_shift_act"]):
        options = {"missing_kernels": {"sim:0": missing}}
        lowered = hetvm.pipeline.lower(placed, plan_devices_options=options)
        assert lowered.script().count("kernel.nn.scale_shift_act") == 2
        vm = hetvm.VirtualMachine(hetvm.build(placed, plan_devices_options=options), devices, poison=True)
        _close(vm["main"](x).copyto(hetvm.cpu(0)).numpy(), want)
        report = vm.memory_report()
        if missing:
            assert report["cpu:0"]["peak_bytes"] > 0 and lowered.attrs["device_copies"]
        else:
            assert report["sim:0"]["peak_bytes"] > 0 and report["cpu:0"]["peak_bytes"] == 0


# -- the scale moves into the next convolution ----------------------------------


def _chain_into_conv(rng, scale_sign=1.0, groups=1, padding=(1, 1, 1, 1), second_use=False, relu=True):
    c = 6
    s = (np.abs(_rand(rng, c, 1, 1)) + 0.1) * scale_sign
    t = _rand(rng, c, 1, 1)
    w = _rand(rng, 4, c // groups, 3, 3)

    def body(bb, x):
        a = bb.emit(op.multiply(x, const(s)))
        b = bb.emit(op.add(a, const(t)))
        r = bb.emit(op.nn.relu(b)) if relu else b
        y = bb.emit(op.nn.conv2d(r, const(w), padding=padding, groups=groups))
        return E.Tuple((y, r)) if second_use else y

    return body


@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("padding", [(1, 1, 1, 1), (0, 0, 0, 0)])
def test_positive_scale_moves_into_the_convolution(relu, padding):
    rng = _rng()
    mod = _module(_chain_into_conv(rng, padding=padding, relu=relu), x_shape=(2, 6, 7, 7))
    out = _fuses_once(mod)
    affine, conv = _calls(out)
    assert affine.op.name == "nn.scale_shift_act" and conv.op.name == "nn.conv2d"
    np.testing.assert_array_equal(affine.args[1].data, np.ones(6, np.float32))  # only shifts now
    w_old = _calls(mod)[-1].args[1].data
    assert not np.array_equal(conv.args[1].data, w_old)
    x = _rand(rng, 2, 6, 7, 7)
    _close(_run(mod, x), _run(mod, x, fuse=False))


@pytest.mark.parametrize("case", ["negative scale", "two groups", "second use"])
def test_scale_stays_when_it_cannot_move(case):
    rng = _rng()
    body = _chain_into_conv(rng, scale_sign=-1.0 if case == "negative scale" else 1.0,
                            groups=2 if case == "two groups" else 1,
                            second_use=case == "second use")  # fmt: skip
    mod = _module(body, x_shape=(2, 6, 7, 7))
    out = _fuses_once(mod)
    affine = next(c for c in _calls(out) if c.op.name == "nn.scale_shift_act")
    assert not np.array_equal(affine.args[1].data, np.ones(6, np.float32))
    conv = next(c for c in _calls(out) if c.op.name == "nn.conv2d")
    w_old = next(c for c in _calls(mod) if c.op.name == "nn.conv2d").args[1].data
    np.testing.assert_array_equal(conv.args[1].data, w_old)
    x = _rand(rng, 2, 6, 7, 7)
    for got, want in zip(*(_as_list(_run(mod, x, fuse=f))
                           for f in (True, False))):  # fmt: skip
        _close(got, want)


def _as_list(out):
    return out if isinstance(out, list) else [out]
