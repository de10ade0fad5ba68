"""Registry-wide rules: round-trip of every op, attr names, arity, re-inference.

The printer and parser rely on ``ctor(*call.args, **call.attrs)`` rebuilding
a structurally equal call (CONTRACTS.md section 1).
"""

import inspect

import numpy as np
import pytest

import hetvm.op as op
from hetvm.errors import StructInfoError
from hetvm.ir import (
    BlockBuilder,
    Constant,
    Var,
    VDevice,
    assert_structural_equal,
    op_info,
    prim,
    registered_ops,
    structural_equal,
)
from hetvm.ir import expr as E
from hetvm.ir import prim as P
from hetvm.ir import struct_info as S
from hetvm.ir.block_builder import normalize


def tensor(shape, dtype="float32", vdevice=None, name="x"):
    return Var(name, struct_info=S.TensorStructInfo(shape, dtype, vdevice=vdevice))

n = prim.PrimVar("n")
m = prim.PrimVar("m")


def _samples():
    x = tensor((n, 4), name="x")
    y = tensor((4, m), name="y")
    img = tensor((1, 4, 8, 8), name="img")
    w = tensor((6, 2, 3, 3), name="w")
    c4 = [tensor((4,), name=f"p{i}") for i in range(4)]
    b = tensor((n, 4), "bool", name="b")
    idx = tensor((3,), "int64", name="i")
    obj = Var("s", struct_info=S.ObjectStructInfo())
    out = S.TensorStructInfo((n, 4), "float32")
    gpu = VDevice("cuda", 0)
    calls = [
        op.add(x, x), op.subtract(x, x), op.multiply(x, x), op.divide(x, x),
        op.floor_divide(x, x), op.power(x, x), op.maximum(x, x), op.minimum(x, x),
        op.equal(x, x), op.not_equal(x, x), op.less(x, x), op.less_equal(x, x),
        op.greater(x, x), op.greater_equal(x, x), op.logical_and(b, b), op.logical_or(b, b),
        op.logical_not(b), op.clip(x, 0, 6),
        op.matmul(x, y), op.matmul(x, y, out_dtype="float64"),
        op.nn.conv2d(img, w, strides=2, padding=(1, 0), dilation=1, groups=2),
        op.nn.conv2d(img, tensor((3, 4, 1, 1)), out_dtype="float32", out_layout="NCHW"),
        op.nn.conv2d_bias_act(img, w, tensor((6,)), padding=1, groups=2, activation="relu"),
        op.nn.conv2d_bias_add_act(img, w, tensor((6,)), tensor((1, 6, 8, 8)), padding=1, groups=2,
                                  activation="relu"),  # fmt: skip
        op.nn.scale_shift_act(img, tensor((4,)), tensor((4,)), activation="relu"),
        op.nn.scale_shift_act(x, tensor((4,)), tensor((4,))),
        op.nn.lrn(img, 3, alpha=1e-3, beta=0.5, bias=2.0),
        op.fused_elementwise(x, tensor((4,)), program=[("sigmoid", "float32", "x0"), ("const", "float32", 0.5),
                                                      ("multiply", "float32", "t0", "t1"),
                                                      ("add", "float32", "t2", "x1"),
                                                      ("clip", "float32", "t3", 0.0, 6.0)]),
        op.nn.max_pool2d(img, 2, 2, padding=1, ceil_mode=True),
        op.nn.max_pool2d_bias_act(img, tensor((4,)), 3, 2, padding=1, activation="relu"),
        op.nn.avg_pool2d(img, (3, 3), count_include_pad=True),
        op.nn.adaptive_avg_pool2d(img, 1), op.nn.adaptive_avg_pool2d(img),
        op.nn.relu(x), op.nn.gelu(x), op.nn.gelu_tanh(x), op.nn.silu(x),
        op.nn.leakyrelu(x, 0.2), op.nn.softmax(x, 0), op.nn.log_softmax(x),
        op.nn.batch_norm(img, *c4, axis=1, epsilon=1e-3, training=False),
        op.nn.layer_norm(x, c4[0], c4[1], axes=-1),
        op.nn.dropout(x, 0.25),
        op.nn.pad(x, [1, 0, 2, 3]), op.nn.pad(img, (0,) * 8, "reflect", 1),
        op.shape_to_tensor(op.shape_of(x)),
        op.reshape(x, (-1,)), op.reshape(x, (2, n * 2)),
        op.permute_dims(x), op.permute_dims(x, [1, 0]),
        op.expand_dims(x, (0, -1)), op.squeeze(tensor((1, 3))), op.squeeze(x, None),
        op.squeeze(tensor((n, 1)), 1),
        op.flatten(x), op.broadcast_to(tensor((1, 4)), (n, 4)),
        op.concat([x, x]), op.concat((x, x), axis=None),
        op.split(x, 2, axis=1), op.split(x, [1, 3], axis=1),
        op.take(x, idx, axis=1), op.take(x, idx, mode="clip"),
        op.strided_slice(x, [0, 1], [1, 0], [n, 4], [1, 2]),
        op.strided_slice(x, [1], [-1], [0], [-1], assume_inbound=True),
        op.sum(x), op.mean(x, 1), op.max(x, [0], True), op.min(x, -1), op.prod(x, (0, 1)),
        op.argmax(x, 1), op.argmin(x, keepdims=True),
        op.astype(x, "float16"), op.where(b, x, x),
        op.zeros((n, 2), "float32"), op.ones((2,), "int32"),
        op.full((2, 3), 1.5, "float32"), op.full((2,), E.PrimValue(3)),
        op.zeros_like(x), op.ones_like(x, "int8"), op.full_like(x, Constant(np.array(2.0, "float32"))),
        op.shape_of(x),
        op.hint_on_device(x, op.device("cuda", 0)), op.to_vdevice(x, gpu),
        op.memory.alloc_storage((64,), 0, "global", "uint8"),
        op.memory.alloc_tensor(obj, 16, (2, 2), "float32"),
        op.memory.kill_storage(obj), op.memory.kill_tensor(x),
        op.builtin.alloc_tensor((n, 4), "float32", 0),
        op.builtin.alloc_tensor((n, 4), "float32", 1, "global"),
        op.vm.alloc_storage((64,), 0, "uint8"), op.vm.alloc_storage((64,), 1, "uint8", "global"),
        op.vm.alloc_tensor(obj, 0, (n,), "int64"), op.vm.kill_object(obj),
        op.call_dps_packed("k", [x], out), op.call_dps_packed("k", [x, y], [out, out]),
        op.call_dps_packed("add", [x, x], out, op_attrs={"axes": (1,)}, device=gpu),
        op.null_value(),
    ]  # fmt: skip
    unary = [u for u in op.elementwise.UNARY_MATH if u != "logical_not"]
    calls += [getattr(op, name)(x) for name in unary]
    # hetvm/op/extra.py
    ints = tensor((n, 4), "int32", name="k")
    calls += [getattr(op, name)(x) for name in op.extra.FLOAT_UNARY + op.extra.FLOAT_CLASS]
    calls += [getattr(op, name)(ints, ints) for name in op.extra.INT_BINARY + op.extra.BITWISE_BINARY]
    calls += [
        op.bitwise_not(ints), op.cumsum(x), op.cumsum(ints, 1, "int64", True), op.cumprod(x, -1),
        op.gather_elements(x, tensor((2, 4), "int64", name="g"), 0),
        op.einsum([x, y], "ij,jk->ik"), op.einsum((x,), "...->..."),
    ]  # fmt: skip
    img = tensor((1, 4, 8, 8), name="img")  # hetvm/op/image.py
    calls += [op.image.resize2d(img, (n, 12)), op.image.resize2d(img, 4, method="cubic", scales=(0.5, 0.5), antialias=True)]
    calls += [op.nn.conv2d_transpose(img, tensor((4, 3, 3, 3), name="wt"), 2, (1, 0), 1, 1, 2), op.nn.conv1d_transpose(tensor((n, 4, 8), name="s1"), tensor((4, 2, 3), name="w1"), 2, 1, 1, groups=2, out_dtype="float32")]  # hetvm/op/nn/conv_transpose.py
    ii = tensor((n, 2), "int64", name="ii")  # hetvm/op/index_nd.py, hetvm/op/dynamic.py
    calls += [op.gather_nd(x, ii), op.gather_nd(tensor((n, 4, 3), name="g3"), tensor((n, 1), "int64", name="gi"), 1), op.scatter_nd(x, ii, tensor((n,), name="u")), op.scatter_nd(x, ii, tensor((n,), name="u"), "max"), op.one_hot(ii, 1.0, 0.0, 3), op.one_hot(ii, 1, 0, 4, 0), op.tril(x), op.triu(x, -1), op.arange(n), op.arange(0.5, 2.0, 0.25, "float64"), op.range_length(*[tensor((1,), "int64", name=f"r{i}") for i in range(3)]), op.tensor_to_shape(tensor((2,), "int64", name="s2")), op.nonzero(x), op.nonzero(x, (m,)), op.topk(x, 2), op.topk(x, 1, 0, "indices", False, "int64"), op.det(tensor((n, 3, 3), name="sq")), op.unique_count(x), op.unique_count(x, 1), op.unique(x), op.unique(x, (m,), False, 0)]
    # hetvm/op/compat.py, hetvm/op/nn/compat_nn.py, hetvm/op/debug.py (issue 20)
    s3 = tensor((2, 4, 8), name="s3")
    calls += [
        op.tile(x, (2, 1)), op.tile(x, 3), op.flip(x, 1), op.repeat(x, 2), op.repeat(x, 3, axis=0),
        op.scatter_elements(x, tensor((1, 4), "int64", name="si"), tensor((1, 4), name="su"), 0, "add"),
        op.variance(x), op.std(x, [1], keepdims=True),
        op.nn.conv1d(s3, tensor((6, 2, 3), name="w1d"), 2, (1, 0), 1, groups=2),
        op.nn.rms_norm(x, tensor((4,), name="rw")), op.nn.rms_norm(x, tensor((n, 4), name="rw2"), (0, 1), 1e-6),
        op.nn.group_norm(img, tensor((4,), name="gg"), tensor((4,), name="gb"), 2, 1, (2, 3)),
        op.nn.recurrent_scan(tensor((n, 2, 16), name="xp"), tensor((4, 16), name="rt"), tensor((12,), name="pp"),
                             tensor((2, 4), name="h0"), tensor((2, 4), name="c0"), tensor((2,), "int32", name="sl"),
                             kind="LSTM", activations=("Sigmoid", "Tanh", "Affine"), alphas=(0.0, 0.0, 2.0),
                             betas=(0.0, 0.0, 0.5), clip=3.0, reverse=True, peepholes=True, masked=True),
        op.print(x, y, format="{} {}"), op.print(format="hi"), op.assert_op(tensor((), "bool", name="c0")), op.assert_op(E.PrimValue(P.IntImm(1, "bool")), x, format="x: {}"),
        op.call_pure_packed("f", x, sinfo_args=out),
    ]  # fmt: skip
    fn = E.GlobalVar("f", struct_info=S.FuncStructInfo([out, S.TensorStructInfo((4, m), "float32")], out))
    clo = Var("clo", struct_info=S.FuncStructInfo([out], out))
    calls += [
        op.make_closure(fn, E.Tuple((y,))),
        op.invoke_closure(clo, E.Tuple((x,)), sinfo_args=[out]),
        op.invoke_pure_closure(clo, E.Tuple((x,)), sinfo_args=[out]),
    ]
    return calls


SAMPLES = _samples()


def ctor_of(name: str):
    obj = op
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _ops_from_hetvm_op():
    return [
        name for name in registered_ops() if op_info(name).infer.__module__.startswith("hetvm.op")
    ]


def test_every_op_has_a_sample_and_a_constructor():
    covered = {c.op.name for c in SAMPLES}
    missing = [name for name in _ops_from_hetvm_op() if name not in covered]
    assert not missing, f"ops without a round-trip sample: {missing}"
    for name in _ops_from_hetvm_op():
        assert callable(ctor_of(name)), name


def _rebuild(call: E.Call) -> E.Call:
    kwargs = dict(call.attrs)
    if call.op.name == "call_dps_packed":
        kwargs["out_sinfo"] = call.sinfo_args[0]
    elif call.sinfo_args:
        kwargs["sinfo_args"] = list(call.sinfo_args)
    return ctor_of(call.op.name)(*call.args, **kwargs)


@pytest.mark.parametrize("call", SAMPLES, ids=lambda c: c.op.name)
def test_round_trip(call):
    again = _rebuild(call)
    assert_structural_equal(again, call)
    assert structural_equal(again.struct_info, call.struct_info)


@pytest.mark.parametrize("call", SAMPLES, ids=lambda c: c.op.name)
def test_attrs_follow_registered_names_and_signature(call):
    info = op_info(call.op)
    assert set(call.attrs) <= set(info.attr_names)
    if call.op.name != "call_dps_packed":
        assert tuple(call.attrs) == info.attr_names  # every attr stored, in ctor order
    params = list(inspect.signature(ctor_of(call.op.name)).parameters)
    positions = [params.index(a) for a in info.attr_names]
    assert positions == sorted(positions)
    for value in call.attrs.values():
        assert _plain(value), (call.op.name, value)


def _plain(value) -> bool:
    if isinstance(value, (tuple, list)):
        return isinstance(value, tuple) and all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_plain(v) for v in value.values())
    return value is None or isinstance(value, (int, float, str, bool, prim.PrimExpr, VDevice))


@pytest.mark.parametrize("call", SAMPLES, ids=lambda c: c.op.name)
def test_reinference_is_stable(call):
    fresh = normalize(E.replace(call, struct_info=None))
    assert structural_equal(fresh.struct_info, call.struct_info)


@pytest.mark.parametrize("call", SAMPLES, ids=lambda c: c.op.name)
def test_wrong_arity_names_the_op(call):
    if op_info(call.op).extra.get("variadic"):
        pytest.skip("takes any number of values (R.print, R.assert_op, R.call_pure_packed)")
    extras = (tensor((1,), name="e1"), tensor((1,), name="e2"))  # two: variadic ops too
    extra = E.replace(call, args=call.args + extras, struct_info=None)
    with pytest.raises(StructInfoError, match=f"op '{call.op.name}'"):
        normalize(extra)


def test_builder_emits_ops_in_anf():
    x = tensor((n, 4))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(op.nn.relu(op.matmul(x, op.permute_dims(x))))
            z = bb.emit_output(op.sum(y, axis=1))
        bb.emit_func_output(z)
    ret = bb.get()["main"].ret_struct_info
    assert ret.shape[0] is n and ret.ndim == 1


def test_device_behaviors():
    from hetvm.ir import DeviceBehavior as D

    assert op_info("shape_of").device_behavior is D.HOST_ONLY
    assert op_info("add").device_behavior is D.FOLLOW_INPUTS
    assert op_info("nn.conv2d").pure and not op_info("memory.kill_tensor").pure
    assert op_info("null_value").device_behavior is D.MEMORY


def test_unknown_dtypes_and_shapes_are_accepted():
    x = Var("x", struct_info=S.TensorStructInfo(None, None, -1))
    w = Var("w", struct_info=S.TensorStructInfo(None, None, 4))
    i = Var("i", struct_info=S.TensorStructInfo((3,), None))
    calls = [
        op.add(x, x), op.exp(x), op.matmul(x, x), op.nn.conv2d(x, w), op.nn.max_pool2d(x, 2),
        op.nn.softmax(x), op.nn.layer_norm(x, x, x, -1), op.nn.batch_norm(x, x, x, x, x, 1),
        op.reshape(x, (2, -1)), op.permute_dims(x), op.expand_dims(x, 0), op.squeeze(x),
        op.flatten(x), op.broadcast_to(x, (2, 3)), op.concat([x, x]), op.split(x, 2),
        op.take(x, i, 0), op.strided_slice(x, [0], [0], [1]), op.sum(x, 0), op.argmax(x, 0),
        op.where(x, x, x), op.zeros_like(x), op.shape_of(x), op.nn.pad(x, [1, 1]),
    ]  # fmt: skip
    for call in calls:
        sinfo = call.struct_info
        fields = sinfo.fields if isinstance(sinfo, S.TupleStructInfo) else (sinfo,)
        for f in fields:
            assert isinstance(f, (S.TensorStructInfo, S.ShapeStructInfo)), call.op.name
            if isinstance(f, S.TensorStructInfo) and call.op.name not in ("argmax", "shape_of"):
                assert f.dtype is None, call.op.name
    ndims = {c.op.name: c.struct_info.ndim for c in calls if isinstance(c.struct_info, S.TensorStructInfo)}
    assert ndims["matmul"] == -1 and ndims["nn.conv2d"] == 4 and ndims["reshape"] == 2
    assert ndims["flatten"] == 1 and ndims["broadcast_to"] == 2 and ndims["nn.pad"] == 1
