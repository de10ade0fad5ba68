"""Inference rules of reductions, astype, where and the creation ops."""

import numpy as np
import pytest

import hetvm.op as op
from hetvm.errors import StructInfoError
from hetvm.ir import Constant, PrimValue, ShapeExpr, Var, prim
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

REDUCERS = [op.sum, op.mean, op.max, op.min, op.prod]


@pytest.mark.parametrize("ctor", REDUCERS)
def test_reductions_static(ctor):
    x = tensor((2, 3, 4))
    assert shape_of(ctor(x).struct_info) == ()
    assert shape_of(ctor(x, axis=1).struct_info) == (2, 4)
    assert shape_of(ctor(x, axis=[0, -1], keepdims=True).struct_info) == (1, 3, 1)
    assert ctor(x, axis=1).attrs == {"axis": (1,), "keepdims": False}


@pytest.mark.parametrize("ctor", REDUCERS)
def test_reductions_symbolic_and_unknown(ctor):
    assert ctor(tensor((n, 3)), axis=1).struct_info.shape == (n,)
    assert ctor(tensor_ndim(3), axis=(0, 1)).struct_info.ndim == 1
    assert ctor(tensor_ndim(-1)).struct_info.ndim == 0


@pytest.mark.parametrize("ctor", REDUCERS)
def test_reductions_bad_axis(ctor):
    with pytest.raises(StructInfoError, match=r"op '\w+': axis 3 is out of range for a tensor of 3"):
        ctor(tensor((2, 3, 4)), axis=3)
    with pytest.raises(StructInfoError, match="repeat"):
        ctor(tensor((2, 3, 4)), axis=(1, -2))


def test_argmax_argmin():
    x = tensor((n, 5))
    call = op.argmax(x, axis=1)
    assert call.struct_info.shape == (n,) and call.struct_info.dtype == "int64"
    assert shape_of(op.argmin(x, axis=0, keepdims=True).struct_info) == (1, 5)
    assert shape_of(op.argmax(x).struct_info) == ()
    with pytest.raises(StructInfoError, match="argmax"):
        op.argmax(x, axis=2)


def test_astype():
    x = tensor((n, 2))
    assert op.astype(x, "float16").struct_info == S.TensorStructInfo((n, 2), "float16")
    assert op.astype(x, np.int32).attrs["dtype"] == "int32"
    with pytest.raises(StructInfoError, match="astype"):
        op.astype(x, None)
    with pytest.raises(StructInfoError, match="astype.*must be a tensor"):
        op.astype(ShapeExpr((1,)), "int32")


def test_where():
    cond = tensor((n, 1), "bool", name="c")
    call = op.where(cond, tensor((1, 4)), tensor((4,), name="y"))
    assert call.struct_info.shape[0] is n and prim.const_value(call.struct_info.shape[1]) == 4
    assert call.struct_info.dtype == "float32"
    with pytest.raises(StructInfoError, match="condition must be bool, got float32"):
        op.where(tensor((2,)), tensor((2,)), tensor((2,)))
    with pytest.raises(StructInfoError, match="x1 is float32, x2 is int32"):
        op.where(cond, tensor((2,)), tensor((2,), "int32"))
    with pytest.raises(StructInfoError, match=r"where.*\(3,\) and \(2,\) cannot be broadcast"):
        op.where(tensor((3,), "bool"), tensor((2,)), tensor((2,)))


def test_zeros_ones():
    call = op.zeros((n, 3), "float32")
    assert call.struct_info == S.TensorStructInfo((n, 3), "float32")
    assert isinstance(call.args[0], ShapeExpr) and call.attrs["dtype"] == "float32"
    assert op.ones([2], "int8").struct_info == S.TensorStructInfo((2,), "int8")
    s = Var("s", struct_info=S.ShapeStructInfo(ndim=2))
    assert op.zeros(s, "float32").struct_info.ndim == 2
    with pytest.raises(StructInfoError, match="dtype is required"):
        op.zeros((2,), None)
    with pytest.raises(StructInfoError, match="op 'ones': shape must be a shape"):
        op.ones(tensor((2,)), "float32")


def test_full():
    call = op.full((2, n), 1.5, "float16")
    assert call.struct_info == S.TensorStructInfo((2, n), "float16")
    assert isinstance(call.args[1], Constant)
    call = op.full((2,), Constant(np.array(3, "int32")))
    assert call.struct_info.dtype == "int32"
    assert op.full((2,), PrimValue(7)).struct_info.dtype == "int64"
    assert op.full((2,), 0.5).args[1].data.dtype == np.float32
    assert op.full((2,), 3).struct_info.dtype == "int64"
    assert op.full((2,), 3, "float16").args[1].data.dtype == np.float16
    with pytest.raises(StructInfoError, match="fill_value must be a scalar"):
        op.full((2,), Constant(np.zeros(3, "float32")))


def test_like_ops():
    x = tensor((n, 2))
    assert op.zeros_like(x).struct_info == x.struct_info
    assert op.ones_like(x, "int32").struct_info.dtype == "int32"
    assert op.full_like(x, 2.0).struct_info == x.struct_info
    assert op.full_like(tensor((2,), "int32"), 2).args[1].data.dtype == np.int32
    with pytest.raises(StructInfoError, match="full_like.*scalar"):
        op.full_like(x, np.zeros(2))
    with pytest.raises(StructInfoError, match="zeros_like"):
        op.zeros_like(ShapeExpr((2,)))


def test_symbolic_broadcast_prefers_the_constant_side():
    m = prim.PrimVar("m")
    assert shape_of(op.where(tensor((n,), "bool"), tensor((4,)), tensor((4,))).struct_info) == (4,)
    assert op.add(tensor((n, 1)), tensor((1, m))).struct_info.shape == (n, m)
    # two unrelated symbolic dims: NumPy's rule exactly (the larger; 0 where one is 0)
    dim = op.add(tensor((n,)), tensor((m,))).struct_info.shape[0]
    for nv, mv in ((1, 3), (3, 1), (3, 3), (0, 1), (1, 0), (0, 0)):
        want = np.broadcast_shapes((nv,), (mv,))[0]
        assert prim.evaluate(dim, {n: nv, m: mv}) == want, (nv, mv)
