"""Inference rules of matmul and the nn ops."""

import pytest

import hetvm.op as op
from hetvm.errors import HetvmError, StructInfoError
from hetvm.ir import Var, VDevice, prim
from hetvm.ir import struct_info as S


def shape_of(sinfo):
    """Shape as ints where constant, else the expression's text."""
    assert isinstance(sinfo, S.TensorStructInfo) and sinfo.shape is not None, sinfo
    return tuple(
        prim.const_value(d) if prim.const_value(d) is not None else prim.to_str(d)
        for d in sinfo.shape
    )

def tensor(shape, dtype="float32", vdevice=None, name="x"):
    return Var(name, struct_info=S.TensorStructInfo(shape, dtype, vdevice=vdevice))

def tensor_ndim(ndim, dtype="float32", name="x"):
    return Var(name, struct_info=S.TensorStructInfo(None, dtype, ndim))

n = prim.PrimVar("n")
m = prim.PrimVar("m")


# -- matmul -------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b, expect",
    [
        ((2, 3), (3, 4), (2, 4)),
        ((5, 2, 3), (3, 4), (5, 2, 4)),
        ((1, 2, 3), (7, 3, 4), (7, 2, 4)),
        ((3,), (3, 4), (4,)),
        ((2, 3), (3,), (2,)),
        ((3,), (3,), ()),
        ((6, 1, 2, 3), (5, 3, 4), (6, 5, 2, 4)),
    ],
)
def test_matmul_static_numpy_rules(a, b, expect):
    call = op.matmul(tensor(a), tensor(b, name="y"))
    assert shape_of(call.struct_info) == expect
    assert call.struct_info.dtype == "float32"


def test_matmul_symbolic():
    call = op.matmul(tensor((n, 4)), tensor((4, m)))
    sinfo = call.struct_info
    assert sinfo.shape[0] is n and sinfo.shape[1] is m


def test_matmul_inner_mismatch_names_both_shapes():
    with pytest.raises(StructInfoError, match=r"op 'matmul': inner dimensions differ: lhs \(n, 4\) vs rhs \(5, m\)"):
        op.matmul(tensor((n, 4)), tensor((5, m)))


def test_matmul_dtype_and_out_dtype():
    with pytest.raises(StructInfoError, match="float32.*float16"):
        op.matmul(tensor((2, 3)), tensor((3, 4), "float16"))
    call = op.matmul(tensor((2, 3), "int8"), tensor((3, 4), "int8"), out_dtype="int32")
    assert call.struct_info.dtype == "int32" and call.attrs["out_dtype"] == "int32"
    assert op.matmul(tensor((2, 3)), tensor((3, 4)), out_dtype="void").attrs["out_dtype"] is None


def test_matmul_unknown_shapes_and_scalar():
    assert op.matmul(tensor_ndim(3), tensor_ndim(2)).struct_info.ndim == 3
    assert op.matmul(tensor_ndim(1), tensor_ndim(1)).struct_info.ndim == 0
    assert op.matmul(tensor_ndim(-1), tensor((3, 4))).struct_info.ndim == -1
    with pytest.raises(StructInfoError, match="scalar"):
        op.matmul(tensor(()), tensor((3,)))


def test_matmul_batch_mismatch_and_arity():
    with pytest.raises(StructInfoError, match="batch"):
        op.matmul(tensor((2, 2, 3)), tensor((5, 3, 4)))
    with pytest.raises(TypeError):
        op.matmul(tensor((2, 3)))  # type: ignore[call-arg]


def test_vdevice_kept_or_dropped():
    gpu = VDevice("cuda", 0)
    cpu = VDevice("llvm", 0)
    same = op.matmul(tensor((2, 3), vdevice=gpu), tensor((3, 4), vdevice=gpu))
    assert same.struct_info.vdevice == gpu
    mixed = op.matmul(tensor((2, 3), vdevice=gpu), tensor((3, 4), vdevice=cpu))
    assert mixed.struct_info.vdevice is None


# -- conv2d ---------------------------------------------------------------------


def test_conv2d_static():
    call = op.nn.conv2d(tensor((1, 3, 32, 32)), tensor((8, 3, 3, 3)), strides=2, padding=1)
    assert shape_of(call.struct_info) == (1, 8, 16, 16)
    assert call.attrs["strides"] == (2, 2)
    assert call.attrs["padding"] == (1, 1, 1, 1)
    assert call.attrs["dilation"] == (1, 1)


def test_conv2d_padding_forms_and_dilation():
    x, w = tensor((1, 4, 10, 12)), tensor((6, 2, 3, 3))
    call = op.nn.conv2d(x, w, padding=(1, 2), dilation=2, groups=2)
    assert call.attrs["padding"] == (1, 2, 1, 2)
    # H: 10 + 2 - 5 + 1 = 8 ; W: 12 + 4 - 5 + 1 = 12
    assert shape_of(call.struct_info) == (1, 6, 8, 12)
    call = op.nn.conv2d(x, w, padding=(0, 1, 2, 3), groups=2)
    assert shape_of(call.struct_info) == (1, 6, 10, 14)


def test_conv2d_symbolic_hw():
    call = op.nn.conv2d(tensor((n, 3, m, m)), tensor((8, 3, 3, 3)), padding=1)
    sinfo = call.struct_info
    assert sinfo.shape[0] is n and prim.prove_equal(sinfo.shape[2], m)


def test_conv2d_nhwc_layout():
    call = op.nn.conv2d(tensor((1, 32, 32, 3)), tensor((8, 3, 3, 3)), data_layout="NHWC")
    assert shape_of(call.struct_info) == (1, 30, 30, 8)


def test_conv2d_errors():
    with pytest.raises(StructInfoError, match=r"nn.conv2d.*channels 3.*weight \(8, 4, 3, 3\)"):
        op.nn.conv2d(tensor((1, 3, 8, 8)), tensor((8, 4, 3, 3)))
    with pytest.raises(StructInfoError, match="4-D"):
        op.nn.conv2d(tensor((3, 8, 8)), tensor((8, 3, 3, 3)))
    with pytest.raises(StructInfoError, match="does not fit height"):
        op.nn.conv2d(tensor((1, 3, 2, 8)), tensor((8, 3, 3, 3)))
    with pytest.raises(StructInfoError, match="float16"):
        op.nn.conv2d(tensor((1, 3, 8, 8)), tensor((8, 3, 3, 3), "float16"))
    with pytest.raises(StructInfoError, match="padding"):
        op.nn.conv2d(tensor((1, 3, 8, 8)), tensor((8, 3, 3, 3)), padding=(1, 2, 3))
    with pytest.raises(StructInfoError, match="data_layout"):
        op.nn.conv2d(tensor((1, 3, 8, 8)), tensor((8, 3, 3, 3)), data_layout="NCHX")


def test_conv2d_out_dtype_and_unknown_shape():
    call = op.nn.conv2d(tensor_ndim(4, "int8"), tensor((8, 3, 3, 3), "int8"), out_dtype="int32")
    assert call.struct_info.ndim == 4 and call.struct_info.shape is None
    assert call.struct_info.dtype == "int32"


# -- pooling --------------------------------------------------------------------


def test_max_pool2d_static_and_ceil_mode():
    x = tensor((1, 3, 7, 7))
    assert shape_of(op.nn.max_pool2d(x, 2, 2).struct_info) == (1, 3, 3, 3)
    assert shape_of(op.nn.max_pool2d(x, 2, 2, ceil_mode=True).struct_info) == (1, 3, 4, 4)
    assert shape_of(op.nn.avg_pool2d(x, (3, 3), 1, padding=1).struct_info) == (1, 3, 7, 7)
    call = op.nn.avg_pool2d(x, 3, count_include_pad=True)
    assert call.attrs["pool_size"] == (3, 3) and call.attrs["count_include_pad"] is True


def test_pool_symbolic():
    call = op.nn.max_pool2d(tensor((1, 3, n, n)), 2, 2)
    assert prim.to_str(call.struct_info.shape[2]) in ("n // 2", "(n - 2) // 2 + 1")
    assert prim.evaluate(call.struct_info.shape[2], {n: 9}) == 4


def test_pool_errors():
    with pytest.raises(StructInfoError, match="nn.max_pool2d.*4-D"):
        op.nn.max_pool2d(tensor((3, 7, 7)), 2)
    with pytest.raises(StructInfoError, match="does not fit"):
        op.nn.avg_pool2d(tensor((1, 3, 2, 2)), 3)
    with pytest.raises(StructInfoError, match="pool_size"):
        op.nn.avg_pool2d(tensor((1, 3, 2, 2)), (3, 3, 3))


def test_adaptive_avg_pool2d():
    x = tensor((2, 3, n, 9))
    assert shape_of(op.nn.adaptive_avg_pool2d(x, 1).struct_info) == (2, 3, 1, 1)
    assert shape_of(op.nn.adaptive_avg_pool2d(x, (2, 3)).struct_info) == (2, 3, 2, 3)
    assert op.nn.adaptive_avg_pool2d(x).struct_info.shape[2] is n
    with pytest.raises(StructInfoError, match="output_size"):
        op.nn.adaptive_avg_pool2d(x, 0)
    with pytest.raises(StructInfoError, match="4-D"):
        op.nn.adaptive_avg_pool2d(tensor((3, 9)), 1)


# -- activations ---------------------------------------------------------------


@pytest.mark.parametrize("ctor", [op.nn.relu, op.nn.gelu, op.nn.gelu_tanh, op.nn.silu,
                                  op.nn.softmax, op.nn.log_softmax, op.nn.leakyrelu])
def test_activation_keeps_struct_info(ctor):
    x = tensor((n, 4), vdevice=VDevice("cuda", 0))
    assert ctor(x).struct_info == x.struct_info


@pytest.mark.parametrize("ctor", [op.nn.gelu, op.nn.silu, op.nn.softmax, op.nn.log_softmax])
def test_float_activations_reject_ints(ctor):
    with pytest.raises(StructInfoError, match="floating-point"):
        ctor(tensor((2, 3), "int32"))


def test_softmax_axis_checked():
    assert op.nn.softmax(tensor((2, 3)), axis=0).attrs["axis"] == 0
    with pytest.raises(StructInfoError, match="axis 2 is out of range"):
        op.nn.softmax(tensor((2, 3)), axis=2)
    assert op.nn.relu(tensor((2, 3), "int32")).struct_info.dtype == "int32"


# -- normalisation ---------------------------------------------------------------


def _bn_args(c, shape=None, dtype="float32"):
    data = tensor(shape or (2, c, 4, 4), dtype)
    params = [tensor((c,), dtype, name=f"p{i}") for i in range(4)]
    return [data, *params]


def test_batch_norm_tuple_result():
    call = op.nn.batch_norm(*_bn_args(3), axis=1, epsilon=1e-3, training=False)
    sinfo = call.struct_info
    assert isinstance(sinfo, S.TupleStructInfo) and len(sinfo.fields) == 3
    assert shape_of(sinfo.fields[0]) == (2, 3, 4, 4)
    assert shape_of(sinfo.fields[1]) == (3,) and shape_of(sinfo.fields[2]) == (3,)
    assert call.attrs["epsilon"] == 1e-3 and call.attrs["training"] is False


def test_batch_norm_symbolic_channels():
    data = tensor((2, n, 4))
    params = [tensor((n,), name=f"p{i}") for i in range(4)]
    sinfo = op.nn.batch_norm(data, *params, axis=1).struct_info
    assert sinfo.fields[1].shape[0] is n


def test_batch_norm_errors():
    data, g, b, mu, var = _bn_args(3)
    with pytest.raises(StructInfoError, match=r"gamma has shape \(4,\)"):
        op.nn.batch_norm(data, tensor((4,)), b, mu, var, axis=1)
    with pytest.raises(StructInfoError, match="axis 4 is out of range"):
        op.nn.batch_norm(data, g, b, mu, var, axis=4)
    with pytest.raises(StructInfoError, match="moving_var must be a tensor"):
        op.nn.batch_norm(data, g, b, mu, op.shape_of(data), axis=1)


def test_layer_norm():
    x = tensor((n, 5, 6))
    call = op.nn.layer_norm(x, tensor((5, 6)), tensor((5, 6)), axes=[-2, -1])
    assert call.struct_info == x.struct_info and call.attrs["axes"] == (-2, -1)
    call = op.nn.layer_norm(x, tensor((6,)), tensor((6,)), axes=-1)
    assert call.attrs["axes"] == (-1,)
    with pytest.raises(StructInfoError, match=r"nn.layer_norm.*beta has shape \(5,\)"):
        op.nn.layer_norm(x, tensor((6,)), tensor((5,)), axes=-1)
    with pytest.raises(StructInfoError, match="repeat"):
        op.nn.layer_norm(x, tensor((6,)), tensor((6,)), axes=(2, -1))


def test_dropout():
    x = tensor((2, 3))
    sinfo = op.nn.dropout(x, 0.1).struct_info
    assert sinfo.fields == (x.struct_info, x.struct_info)
    with pytest.raises(StructInfoError, match="rate"):
        op.nn.dropout(x, 1.5)


def test_errors_are_hetvm_errors():
    with pytest.raises(HetvmError):
        op.nn.conv2d(tensor((1, 3, 8, 8)), tensor((8, 4, 3, 3)))


def test_pad():
    call = op.nn.pad(tensor((n, 3)), [1, 2, 0, 4], pad_value=1)
    assert prim.prove_equal(call.struct_info.shape[0], n + 3)
    assert prim.const_value(call.struct_info.shape[1]) == 7
    assert call.attrs == {"pad_width": (1, 2, 0, 4), "pad_mode": "constant", "pad_value": 1.0}
    assert op.nn.pad(tensor_ndim(-1), [1, 1]).struct_info.ndim == 1


def test_pad_errors():
    with pytest.raises(StructInfoError, match="nn.pad.*2 values per axis.*got 2"):
        op.nn.pad(tensor((2, 3)), [1, 1])
    with pytest.raises(StructInfoError, match="non-negative"):
        op.nn.pad(tensor((2, 3)), [1, -1, 0, 0])
    with pytest.raises(StructInfoError, match="pad_mode"):
        op.nn.pad(tensor((2, 3)), [0, 0, 0, 0], pad_mode="mirror")
    with pytest.raises(StructInfoError, match=r"reflect padding \(0, 3\) must be smaller than axis 1"):
        op.nn.pad(tensor((2, 3)), [0, 0, 0, 3], pad_mode="reflect")
