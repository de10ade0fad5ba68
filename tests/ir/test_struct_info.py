"""Struct info: construction, subsumption (is_base_of), matching, unification."""

import pytest

from hetvm.errors import StructInfoError
from hetvm.ir import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    TensorStructInfo,
    TupleStructInfo,
    VDevice,
    prim,
)
from hetvm.ir import struct_info as S

n = prim.PrimVar("n")
m = prim.PrimVar("m")
CUDA = VDevice("cuda", 0)
CPU = VDevice("llvm", 0)


def test_tensor_shape_and_ndim():
    t = TensorStructInfo((n, 4), "float32")
    assert t.ndim == 2 and t.shape[1] == prim.IntImm(4)
    assert TensorStructInfo(ndim=3, dtype="int32").shape is None
    assert TensorStructInfo().ndim == -1
    with pytest.raises(StructInfoError, match="ndim"):
        TensorStructInfo((1, 2), "float32", ndim=3)


def test_static_shape():
    assert TensorStructInfo((2, 3), "float32").static_shape == (2, 3)
    assert TensorStructInfo((n, 3), "float32").static_shape is None
    assert TensorStructInfo((n - n + 2,), "float32").static_shape == (2,)


def test_shape_struct_info():
    s = ShapeStructInfo((n, 2))
    assert s.ndim == 2
    assert ShapeStructInfo(ndim=3).values is None
    with pytest.raises(StructInfoError):
        ShapeStructInfo((1,), ndim=2)


def test_struct_info_values_are_equal_by_content():
    assert TensorStructInfo((2, 3), "float32") == TensorStructInfo((2, 3), "float32")
    assert hash(TensorStructInfo((2,), "int32")) == hash(TensorStructInfo((2,), "int32"))
    assert TupleStructInfo([ObjectStructInfo()]) == TupleStructInfo((ObjectStructInfo(),))
    assert FuncStructInfo().ret == ObjectStructInfo()


def test_with_vdevice_and_strip():
    t = TensorStructInfo((2,), "float32", vdevice=CUDA)
    assert t.with_vdevice(None).vdevice is None
    tup = TupleStructInfo([t, TensorStructInfo((3,), "float32", vdevice=CPU)])
    assert S.sinfo_vdevices(tup) == [CUDA, CPU]
    assert S.sinfo_vdevices(S.strip_vdevice(tup)) == []
    assert S.sinfo_vdevices(FuncStructInfo([t], t)) == [CUDA, CUDA]


def test_dtype_nbytes():
    assert S.dtype_nbytes("float32") == 4
    assert S.dtype_nbytes("bool") == 1
    assert S.dtype_nbytes("int64") == 8
    with pytest.raises(StructInfoError, match="unknown dtype 'floaty'"):
        S.dtype_nbytes("floaty")


@pytest.mark.parametrize(
    "base, derived, expected",
    [
        (ObjectStructInfo(), TensorStructInfo((2,), "float32"), True),
        (TensorStructInfo(dtype="float32"), TensorStructInfo((2,), "float32"), True),
        (TensorStructInfo(ndim=1), TensorStructInfo((2,), "float32"), True),
        (TensorStructInfo((2,), "float32"), TensorStructInfo(dtype="float32", ndim=1), False),
        (TensorStructInfo((2,), "float32"), TensorStructInfo((2,), "int32"), False),
        (TensorStructInfo((2,), "float32"), TensorStructInfo((3,), "float32"), False),
        (TensorStructInfo((n + 1,), "float32"), TensorStructInfo((1 + n,), "float32"), True),
        (TensorStructInfo((n,), "float32"), TensorStructInfo((m,), "float32"), False),
        (TensorStructInfo((2,), "float32"), TensorStructInfo((2,), "float32", vdevice=CUDA), True),
        (TensorStructInfo((2,), "float32", vdevice=CUDA), TensorStructInfo((2,), "float32"), False),
        (
            TensorStructInfo((2,), "float32", vdevice=CUDA),
            TensorStructInfo((2,), "float32", vdevice=CPU),
            False,
        ),
        (TensorStructInfo((2,), "float32"), ShapeStructInfo((2,)), False),
        (ShapeStructInfo(ndim=2), ShapeStructInfo((n, 3)), True),
        (ShapeStructInfo((n, 3)), ShapeStructInfo(ndim=2), False),
        (PrimStructInfo("int64"), PrimStructInfo("int64", n), True),
        (PrimStructInfo("int64", n), PrimStructInfo("int64"), False),
        (PrimStructInfo("int64"), PrimStructInfo("float32"), False),
        (
            TupleStructInfo([ObjectStructInfo(), TensorStructInfo(ndim=1)]),
            TupleStructInfo([PrimStructInfo(), TensorStructInfo((4,), "int32")]),
            True,
        ),
        (TupleStructInfo([ObjectStructInfo()]), TupleStructInfo([]), False),
        (TensorStructInfo(), ObjectStructInfo(), False),
        (FuncStructInfo(None, ObjectStructInfo(), False), FuncStructInfo([], ObjectStructInfo()), True),
        (FuncStructInfo(None, ObjectStructInfo(), True), FuncStructInfo([], ObjectStructInfo(), False), False),
        (FuncStructInfo([ObjectStructInfo()]), FuncStructInfo([ObjectStructInfo()] * 2), False),
        (
            FuncStructInfo(None, TensorStructInfo(ndim=1)),
            FuncStructInfo(None, TensorStructInfo((2,), "float32")),
            True,
        ),
        (
            FuncStructInfo(None, TensorStructInfo((2,), "float32")),
            FuncStructInfo(None, ObjectStructInfo()),
            False,
        ),
    ],
)
def test_is_base_of(base, derived, expected):
    assert S.is_base_of(base, derived) is expected


def test_is_base_of_is_reflexive():
    for s in (
        TensorStructInfo((n, 2), "float32", vdevice=CUDA),
        ShapeStructInfo((n,)),
        PrimStructInfo("int64", n),
        TupleStructInfo([TensorStructInfo(ndim=2), ObjectStructInfo()]),
        FuncStructInfo([TensorStructInfo((n,), "float32")], TensorStructInfo((n,), "float32")),
        ObjectStructInfo(),
    ):
        assert S.is_base_of(s, s)


def test_could_match():
    assert S.could_match(TensorStructInfo((n, 4), "float32"), TensorStructInfo(dtype="float32"))
    assert S.could_match(TensorStructInfo((2,), "float32"), TensorStructInfo((n,), "float32"))
    assert not S.could_match(TensorStructInfo((2,), "float32"), TensorStructInfo((3,), "float32"))
    assert not S.could_match(TensorStructInfo(dtype="float32"), TensorStructInfo(dtype="int8"))
    assert not S.could_match(TensorStructInfo(ndim=1), TensorStructInfo(ndim=2))
    assert not S.could_match(TensorStructInfo(), ShapeStructInfo())
    assert S.could_match(ObjectStructInfo(), ShapeStructInfo())


def test_unify():
    a = TensorStructInfo((n, 4), "float32", vdevice=CUDA)
    assert S.unify(a, TensorStructInfo((n, 4), "float32", vdevice=CUDA)) == a
    u = S.unify(a, TensorStructInfo((m, 4), "float32", vdevice=CPU))
    assert u == TensorStructInfo(None, "float32", 2, None)
    assert S.unify(a, TensorStructInfo((3,), "int32")) == TensorStructInfo()
    assert S.unify(PrimStructInfo("int64", n), PrimStructInfo("int64", m)) == PrimStructInfo("int64")
    assert S.unify(ShapeStructInfo((1,)), ShapeStructInfo((2,))) == ShapeStructInfo(ndim=1)
    tup = S.unify(TupleStructInfo([a]), TupleStructInfo([a]))
    assert tup == TupleStructInfo([a])
    assert S.unify(a, ShapeStructInfo()) == ObjectStructInfo()
    f = S.unify(FuncStructInfo([a], a), FuncStructInfo([a], a, purity=False))
    assert isinstance(f, FuncStructInfo) and f.purity is False


def test_unify_result_admits_both_sides():
    pairs = [
        (TensorStructInfo((n, 4), "float32"), TensorStructInfo((m, 4), "float32")),
        (TensorStructInfo((2,), "float32", vdevice=CUDA), TensorStructInfo((2,), "float32")),
        (ShapeStructInfo((n,)), ShapeStructInfo((n, 1))),
        (TupleStructInfo([PrimStructInfo()]), TupleStructInfo([PrimStructInfo("int64", n)])),
    ]
    for a, b in pairs:
        u = S.unify(a, b)
        assert S.is_base_of(u, a) and S.is_base_of(u, b), (a, b, u)


def test_describe():
    assert S.describe(TensorStructInfo((n, 4), "float32", vdevice=CUDA)) == "Tensor((n, 4), float32, cuda:0)"
    assert S.describe(TensorStructInfo(ndim=2)) == "Tensor(ndim=2)"
    assert S.describe(ShapeStructInfo((n,))) == "Shape([n])"
    assert S.describe(PrimStructInfo("int64", n + 1)) == "Prim(n + 1)"
    assert S.describe(TupleStructInfo([ObjectStructInfo()])) == "Tuple(Object)"


def test_vdevice_kind_and_text():
    assert CPU.kind == "cpu" and CPU.is_host
    assert CUDA.kind == "cuda" and not CUDA.is_host
    assert str(VDevice("cuda", 1, "shared")) == "cuda:1[shared]"
    assert VDevice("cuda", 0) == CUDA
    assert VDevice("cuda", 0, target_attrs=(("arch", "sm_80"),)) != CUDA
