"""Struct-info inference of the fused ops hetvm's passes build (hetvm/op/nn/fused.py)."""

import pytest

import hetvm.op as op
from hetvm.errors import StructInfoError
from hetvm.ir import Var, VDevice, prim
from hetvm.ir import struct_info as S


def tensor(shape, dtype="float32", name="x", vdevice=None, ndim=-1):
    return Var(name, struct_info=S.TensorStructInfo(shape, dtype, ndim, vdevice))


IMG = tensor((2, 4, 8, 8), name="img")
W = tensor((6, 4, 3, 3), name="w")
B = tensor((6,), name="b")


def test_conv2d_bias_add_act_is_the_convolutions_shape():
    res = tensor((2, 6, 4, 4), name="r")
    call = op.nn.conv2d_bias_add_act(IMG, W, B, res, strides=2, padding=1, activation="relu")
    want = op.nn.conv2d(IMG, W, strides=2, padding=1).struct_info
    assert call.struct_info.shape == want.shape and call.struct_info.dtype == "float32"
    assert call.attrs["activation"] == "relu" and call.attrs["padding"] == (1, 1, 1, 1)


def test_symbolic_batch_and_unknown_residual_shape():
    n = prim.PrimVar("n")
    img = tensor((n, 4, 8, 8), name="img")
    call = op.nn.conv2d_bias_add_act(img, W, B, tensor((n, 6, 6, 6), name="r"))
    assert call.struct_info.shape[0] is n
    call = op.nn.conv2d_bias_add_act(img, W, B, tensor(None, ndim=4, name="r"))
    assert call.struct_info.ndim == 4


@pytest.mark.parametrize(
    "residual,match",
    [
        (tensor((2, 6, 1, 6)), "residual .* must have the convolution's shape"),  # would broadcast
        (tensor((2, 6, 6, 6, 1)), "4-D"),
        (tensor((2, 6, 6, 6), "float16"), "residual is float16"),
    ],
)
def test_residual_must_match_exactly(residual, match):
    with pytest.raises(StructInfoError, match=match):
        op.nn.conv2d_bias_add_act(IMG, W, B, residual)


def test_bias_and_activation_are_checked():
    res = tensor((2, 6, 6, 6), name="r")
    with pytest.raises(StructInfoError, match="bias has 5 values"):
        op.nn.conv2d_bias_add_act(IMG, W, tensor((5,)), res)
    with pytest.raises(StructInfoError, match="bias is float64"):
        op.nn.conv2d_bias_add_act(IMG, W, tensor((6,), "float64"), res)
    with pytest.raises(StructInfoError, match="activation"):
        op.nn.conv2d_bias_add_act(IMG, W, B, res, activation="gelu")
    with pytest.raises(StructInfoError, match="op 'nn.conv2d_bias_add_act'"):
        op.nn.conv2d_bias_add_act(IMG, W, B, res, groups=3)


def test_residual_vdevice_joins_the_inputs():
    sim, cpu = VDevice("sim", 0), VDevice("llvm", 0)
    img, w = tensor((2, 4, 8, 8), vdevice=sim), tensor((6, 4, 3, 3), vdevice=sim)
    same = op.nn.conv2d_bias_add_act(img, w, B, tensor((2, 6, 6, 6), vdevice=sim))
    assert same.struct_info.vdevice == sim
    # a conflict is not an error (the device planner copies); the result is unplaced
    other = op.nn.conv2d_bias_add_act(img, w, B, tensor((2, 6, 6, 6), vdevice=cpu))
    assert other.struct_info.vdevice is None


# -- nn.scale_shift_act ---------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2, 6), (2, 6, 5), (2, 6, 5, 5), (1, 6, 2, 3, 4)])
def test_scale_shift_act_keeps_the_data_shape(shape):
    x = tensor(shape)
    call = op.nn.scale_shift_act(x, tensor((6,), name="s"), tensor((6,), name="t"), activation="relu")
    assert call.struct_info.shape == x.struct_info.shape and call.struct_info.dtype == "float32"
    assert call.attrs["activation"] == "relu"


def test_scale_shift_act_symbolic_and_unknown():
    n = prim.PrimVar("n")
    call = op.nn.scale_shift_act(tensor((n, 6, 3)), tensor((6,)), tensor((6,)))
    assert call.struct_info.shape[0] is n
    c = prim.PrimVar("c")
    call = op.nn.scale_shift_act(tensor((2, c)), tensor((c,)), tensor((c,)))
    assert call.struct_info.shape[1] is c
    call = op.nn.scale_shift_act(tensor(None, ndim=-1), tensor((6,)), tensor(None, ndim=-1))
    assert call.struct_info.ndim == -1


@pytest.mark.parametrize(
    "x,scale,shift,match",
    [
        (tensor((6,)), tensor((6,)), tensor((6,)), "channel axis 1"),
        (tensor(()), tensor((1,)), tensor((1,)), "channel axis 1"),
        (tensor((2, 6, 3)), tensor((5,)), tensor((6,)), "scale has 5 values"),
        (tensor((2, 6, 3)), tensor((6,)), tensor((6, 1)), "shift must be 1-D"),
        (tensor((2, 6, 3)), tensor((6,), "float64"), tensor((6,)), "scale is float64"),
    ],
)
def test_scale_shift_act_errors(x, scale, shift, match):
    with pytest.raises(StructInfoError, match=match):
        op.nn.scale_shift_act(x, scale, shift)
    with pytest.raises(StructInfoError, match="activation"):
        op.nn.scale_shift_act(tensor((2, 6)), tensor((6,)), tensor((6,)), activation="sigmoid")


def test_scale_shift_act_vdevice():
    sim = VDevice("sim", 0)
    call = op.nn.scale_shift_act(tensor((2, 6), vdevice=sim), tensor((6,)), tensor((6,)))
    assert call.struct_info.vdevice == sim
