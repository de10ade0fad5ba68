"""Struct-info inference, attrs and errors of the ops in hetvm/op/extra.py."""

import pytest

import hetvm.op as op
from hetvm.errors import StructInfoError
from hetvm.ir import Var, op_info, prim
from hetvm.ir import struct_info as S
from hetvm.ir.op_registry import DeviceBehavior

n = prim.PrimVar("n")


def t(shape, dtype="float32", name="x"):
    return Var(name, struct_info=S.TensorStructInfo(shape, dtype))


def test_float_unary_ops_keep_the_input_and_need_floats():
    x = t((n, 3))
    for name in op.extra.FLOAT_UNARY:
        call = getattr(op, name)(x)
        assert call.struct_info == x.struct_info
        assert op_info(name).pure and op_info(name).device_behavior is DeviceBehavior.FOLLOW_INPUTS
        with pytest.raises(StructInfoError, match=f"op '{name}': needs a floating-point tensor"):
            getattr(op, name)(t((3,), "int32"))


def test_float_class_ops_give_bool():
    for name in op.extra.FLOAT_CLASS:
        sinfo = getattr(op, name)(t((n, 3))).struct_info
        assert sinfo.dtype == "bool" and sinfo.shape[0] is n


def test_mod_and_bitwise_ops_broadcast_and_check_dtypes():
    a, b = t((2, 1, 4), "int32", "a"), t((3, 1), "int32", "b")
    for name in op.extra.INT_BINARY + op.extra.BITWISE_BINARY:
        assert getattr(op, name)(a, b).struct_info.static_shape == (2, 3, 4)
    assert op.mod(t((3,)), t((3,), name="y")).struct_info.dtype == "float32"
    with pytest.raises(StructInfoError, match="op 'bitwise_and': needs integer tensors, got float32"):
        op.bitwise_and(t((3,)), t((3,), name="y"))
    with pytest.raises(StructInfoError, match="op 'left_shift': needs integer tensors, got bool"):
        op.left_shift(t((3,), "bool"), t((3,), "bool", "y"))
    with pytest.raises(StructInfoError, match="op 'floor_mod': operand dtypes differ"):
        op.floor_mod(a, t((3, 1), "int64"))
    assert op.bitwise_not(t((3,), "uint8")).struct_info.dtype == "uint8"
    with pytest.raises(StructInfoError, match="op 'bitwise_not'"):
        op.bitwise_not(t((3,)))


def test_scans():
    x = t((n, 4), "int32")
    call = op.cumsum(x, axis=-1, dtype="int64", exclusive=True)
    assert dict(call.attrs) == {"axis": -1, "dtype": "int64", "exclusive": True}
    assert call.struct_info.dtype == "int64" and call.struct_info.shape[0] is n
    flat = op.cumprod(t((2, 3))).struct_info
    assert flat.static_shape == (6,)
    with pytest.raises(StructInfoError, match="op 'cumsum': axis 2 is out of range"):
        op.cumsum(x, 2)


def test_gather_elements():
    data, idx = t((3, 4)), t((5, 4), "int64", "i")
    assert op.gather_elements(data, idx, 0).struct_info.static_shape == (5, 4)
    with pytest.raises(StructInfoError, match="must match data .* on every axis but 0"):
        op.gather_elements(data, t((5, 2), "int64", "i"), 0)
    with pytest.raises(StructInfoError, match="same rank"):
        op.gather_elements(data, t((5,), "int64", "i"))
    with pytest.raises(StructInfoError, match="indices must be integers"):
        op.gather_elements(data, t((3, 4), "float32", "i"))


@pytest.mark.parametrize("eq,shapes,expected", [
    ("ij,jk->ik", [(2, 3), (3, 5)], (2, 5)),
    ("bij,bjk->bik", [(4, 2, 3), (4, 3, 5)], (4, 2, 5)),
    ("ij->ji", [(2, 3)], (3, 2)),
    ("ii->i", [(3, 3)], (3,)),
    ("ij->", [(2, 3)], ()),
    ("ij,ij", [(2, 3), (2, 3)], ()),  # implicit output: letters seen once (none)
    ("ij,jk", [(2, 3), (3, 5)], (2, 5)),
    ("...ij,...jk->...ik", [(7, 2, 3), (1, 3, 5)], (7, 2, 5)),
    ("i,j", [(2,), (3,)], (2, 3)),
])  # fmt: skip
def test_einsum_shapes(eq, shapes, expected):
    ops = [t(s, name=f"x{i}") for i, s in enumerate(shapes)]
    assert op.einsum(ops, eq).struct_info.static_shape == expected


def test_einsum_errors():
    a, b = t((2, 3), name="a"), t((4, 5), name="b")
    with pytest.raises(StructInfoError, match="subscript 'j' has sizes 3 and 4"):
        op.einsum([a, b], "ij,jk->ik")
    with pytest.raises(StructInfoError, match="names 2 operand"):
        op.einsum([a], "ij,jk->ik")
    with pytest.raises(StructInfoError, match="does not fit an operand of rank 2"):
        op.einsum([a], "ijk->i")
    with pytest.raises(StructInfoError, match="output subscript 'z'"):
        op.einsum([a], "ij->z")
    sym = op.einsum([t((n, 3), name="a"), t((3, 4), name="b")], "ij,jk->ik").struct_info
    assert sym.shape[0] is n
