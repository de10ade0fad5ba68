"""Inference rules of the shape-manipulation and indexing ops."""

import pytest

import hetvm.op as op
from hetvm.errors import StructInfoError
from hetvm.ir import ShapeExpr, Tuple, Var, prim
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


# -- reshape ----------------------------------------------------------------------


def test_reshape_static_and_minus_one_resolved():
    call = op.reshape(tensor((2, 3, 4)), (6, -1))
    assert shape_of(call.struct_info) == (6, 4)
    assert isinstance(call.args[1], ShapeExpr)
    assert [prim.const_value(v) for v in call.args[1].values] == [6, 4]


def test_reshape_symbolic():
    call = op.reshape(tensor((n, 4, 4)), (-1, 16))
    assert prim.prove_equal(call.struct_info.shape[0], n)
    call = op.reshape(tensor((n, m)), (m, n))
    assert call.struct_info.shape == (m, n)


def test_reshape_unknown_data_keeps_minus_one():
    call = op.reshape(tensor_ndim(3), (2, -1))
    assert call.struct_info.ndim == 2 and call.struct_info.shape is None


def test_reshape_shape_var():
    s = Var("s", struct_info=S.ShapeStructInfo((n, 2)))
    assert op.reshape(tensor((2, n)), s).struct_info.shape[0] is n


def test_reshape_errors():
    with pytest.raises(StructInfoError, match=r"op 'reshape': cannot reshape \(2, 3\) \(6 elements\) to \(4, 2\)"):
        op.reshape(tensor((2, 3)), (4, 2))
    with pytest.raises(StructInfoError, match="at most one -1"):
        op.reshape(tensor((2, 3)), (-1, -1))
    with pytest.raises(StructInfoError, match="cannot reshape"):
        op.reshape(tensor((2, 3)), (4, -1))
    with pytest.raises(StructInfoError, match="shape must be a shape"):
        op.reshape(tensor((2, 3)), tensor((6,)))


# -- permute / expand / squeeze / flatten -----------------------------------------


def test_permute_dims():
    x = tensor((n, 3, 4))
    assert op.permute_dims(x).struct_info.shape[2] is n
    call = op.permute_dims(x, [0, 2, 1])
    assert shape_of(call.struct_info) == ("n", 4, 3) and call.attrs["axes"] == (0, 2, 1)
    assert shape_of(op.permute_dims(x, (-1, 0, 1)).struct_info) == (4, "n", 3)
    assert op.permute_dims(tensor_ndim(-1), (1, 0)).struct_info.ndim == 2
    with pytest.raises(StructInfoError, match="do not match a tensor of 3"):
        op.permute_dims(x, (1, 0))
    with pytest.raises(StructInfoError, match="repeat"):
        op.permute_dims(x, (1, 1, 0))


def test_expand_dims():
    x = tensor((n, 3))
    assert shape_of(op.expand_dims(x, 0).struct_info) == (1, "n", 3)
    assert shape_of(op.expand_dims(x, -1).struct_info) == ("n", 3, 1)
    assert shape_of(op.expand_dims(x, (0, 3)).struct_info) == (1, "n", 3, 1)
    with pytest.raises(StructInfoError, match="out of range"):
        op.expand_dims(x, 4)


def test_squeeze():
    x = tensor((1, 3, 1))
    assert shape_of(op.squeeze(x).struct_info) == (3,)
    assert shape_of(op.squeeze(x, 0).struct_info) == (3, 1)
    assert shape_of(op.squeeze(tensor((1, n)), [0]).struct_info) == ("n",)
    assert op.squeeze(tensor((1, n))).struct_info.ndim == -1
    with pytest.raises(StructInfoError, match=r"axis 1 of \(1, 3, 1\) has size 3"):
        op.squeeze(x, 1)


def test_flatten():
    assert shape_of(op.flatten(tensor((2, 3, 4))).struct_info) == (24,)
    assert prim.prove_equal(op.flatten(tensor((n, 4))).struct_info.shape[0], n * 4)
    assert op.flatten(tensor_ndim(3)).struct_info.ndim == 1
    with pytest.raises(StructInfoError, match="must be a tensor"):
        op.flatten(op.shape_of(tensor((2,))))


def test_broadcast_to():
    assert shape_of(op.broadcast_to(tensor((3, 1)), (2, 3, 4)).struct_info) == (2, 3, 4)
    assert op.broadcast_to(tensor((1,)), (n, m)).struct_info.shape == (n, m)
    with pytest.raises(StructInfoError, match=r"cannot broadcast \(3, 2\) to \(3, 4\)"):
        op.broadcast_to(tensor((3, 2)), (3, 4))
    with pytest.raises(StructInfoError, match="fewer dimensions"):
        op.broadcast_to(tensor((2, 3, 4)), (3, 4))


# -- concat / split -----------------------------------------------------------


def test_concat():
    a, b = tensor((2, 3)), tensor((5, 3), name="b")
    call = op.concat([a, b])
    assert shape_of(call.struct_info) == (7, 3) and isinstance(call.args[0], Tuple)
    call = op.concat((tensor((n, 2)), tensor((n, m))), axis=-1)
    assert prim.prove_equal(call.struct_info.shape[1], m + 2)
    assert shape_of(op.concat([a, b], axis=None).struct_info) == (21,)


def test_concat_tuple_var():
    tup = Var("t", struct_info=S.TupleStructInfo([tensor((2, 3)).struct_info] * 3))
    assert shape_of(op.concat(tup, axis=1).struct_info) == (2, 9)


def test_concat_errors():
    with pytest.raises(StructInfoError, match=r"op 'concat': shapes \(2, 3\) and \(2, 4\) differ outside axis 0"):
        op.concat([tensor((2, 3)), tensor((2, 4))])
    with pytest.raises(StructInfoError, match="ranks"):
        op.concat([tensor((2, 3)), tensor((2,))])
    with pytest.raises(StructInfoError, match="dtypes"):
        op.concat([tensor((2, 3)), tensor((2, 3), "int32")])
    with pytest.raises(StructInfoError, match="at least one"):
        op.concat([])


def test_split_sections_and_indices():
    sinfo = op.split(tensor((10, 4)), 3).struct_info
    assert [shape_of(f) for f in sinfo.fields] == [(4, 4), (4, 4), (2, 4)]
    sinfo = op.split(tensor((2, 10)), [2, 5, 20], axis=1).struct_info
    assert [shape_of(f) for f in sinfo.fields] == [(2, 2), (2, 3), (2, 5), (2, 0)]
    sinfo = op.split(tensor((n, 4)), 2).struct_info
    assert prim.evaluate(sinfo.fields[0].shape[0], {n: 7}) == 4
    assert prim.evaluate(sinfo.fields[1].shape[0], {n: 7}) == 3


def test_split_errors():
    with pytest.raises(StructInfoError, match="into 4 sections"):
        op.split(tensor((5,)), 4)
    with pytest.raises(StructInfoError, match="ascending"):
        op.split(tensor((5,)), [3, 1])
    with pytest.raises(StructInfoError, match="positive"):
        op.split(tensor((5,)), 0)
    with pytest.raises(StructInfoError, match="axis 1 is out of range"):
        op.split(tensor((5,)), 2, axis=1)


def test_shape_of():
    assert op.shape_of(tensor((n, 3))).struct_info == S.ShapeStructInfo((n, 3))
    assert op.shape_of(tensor_ndim(2)).struct_info == S.ShapeStructInfo(None, 2)
    with pytest.raises(StructInfoError, match="shape_of"):
        op.shape_of(ShapeExpr((1, 2)))


# -- take / strided_slice -----------------------------------------------------


def test_take():
    data, idx = tensor((5, 6)), tensor((2, 3), "int64", name="i")
    assert shape_of(op.take(data, idx, axis=0).struct_info) == (2, 3, 6)
    assert shape_of(op.take(data, idx, axis=-1).struct_info) == (5, 2, 3)
    assert shape_of(op.take(data, idx).struct_info) == (2, 3)
    assert op.take(tensor((n, 6)), tensor((m,), "int32"), 0).struct_info.shape[0] is m
    with pytest.raises(StructInfoError, match="indices must be integers, got float32"):
        op.take(data, tensor((2,)), axis=0)
    with pytest.raises(StructInfoError, match="mode"):
        op.take(data, idx, mode="bad")


@pytest.mark.parametrize(
    "begin, end, stride",
    [(0, 5, 1), (1, 100, 2), (-3, -1, 1), (8, 2, -1), (-1, -100, -2), (3, 3, 1), (7, 1, 1),
     (0, 2**63 - 1, 3), (-100, 4, 1)],
)
def test_strided_slice_matches_numpy(begin, end, stride):
    import numpy as np

    call = op.strided_slice(tensor((9, 2)), [0], [begin], [end], [stride])
    assert shape_of(call.struct_info) == (np.arange(9)[begin:end:stride].size, 2)


def test_strided_slice_symbolic_and_attrs():
    call = op.strided_slice(tensor((n, 8)), axes=(0, 1), begin=(1, 0), end=(2**31 - 1, 8),
                            strides=(1, 2))
    assert prim.prove_equal(call.struct_info.shape[0], prim.max_(n - 1, 0))  # x[1:] of n = 0 is empty
    assert prim.const_value(call.struct_info.shape[1]) == 4
    assert call.attrs["begin"] == (1, 0) and call.attrs["strides"] == (1, 2)
    default = op.strided_slice(tensor((n, 8)), [1], [0], [4])
    assert default.attrs["strides"] == (1,)
    assert prim.evaluate(
        op.strided_slice(tensor((n,)), [0], [-4], [-1]).struct_info.shape[0], {n: 10}
    ) == 3


@pytest.mark.parametrize("stride", [1, 2, -1, -2])
def test_strided_slice_symbolic_clamps_like_numpy(stride):
    """Regression (ONNX composition fuzz): ``x[-3:1]`` on a dim ``n`` took its
    indices as in range (n - 2 elements), so with n = 1 the kernel's one-element
    result did not fit a 3-element buffer. Every constant begin/end now clamps."""
    import numpy as np

    big = 2**31 - 1
    for begin in (-9, -3, -1, 0, 1, 4, big, -big - 1):
        for end in (-9, -3, -1, 0, 1, 4, big, -big - 1):
            dim = op.strided_slice(tensor((n,)), [0], [begin], [end], [stride]).struct_info.shape[0]
            for size in range(7):
                expect = np.arange(size)[begin:end:stride].size
                assert prim.evaluate(dim, {n: size}) == expect, (begin, end, stride, size)


def test_strided_slice_from_far_below_is_the_whole_dim():
    """Regression (ONNX composition fuzz): x[-(2**31 - 1):] on a dim n became
    min(n, 2**31 - 1) elements, which memory planning sized at its upper bound
    (a 32 GiB allocation); a begin or end beyond any dim is decided statically."""
    big = 2**31 - 1
    assert op.strided_slice(tensor((n,)), [0], [-big], [big], [1]).struct_info.shape[0] is n
    assert prim.const_value(op.strided_slice(tensor((n,)), [0], [big], [big], [1]).struct_info.shape[0]) == 0


def test_strided_slice_errors():
    with pytest.raises(StructInfoError, match="same length"):
        op.strided_slice(tensor((4,)), [0], [0, 1], [2])
    with pytest.raises(StructInfoError, match="nonzero"):
        op.strided_slice(tensor((4,)), [0], [0], [2], [0])
    with pytest.raises(StructInfoError, match="axis 1 is out of range"):
        op.strided_slice(tensor((4,)), [1], [0], [2])


def test_shape_to_tensor():
    call = op.shape_to_tensor(op.shape_of(tensor((n, 3, 2))))
    assert call.struct_info == S.TensorStructInfo((3,), "int64")
    unknown = Var("s", struct_info=S.ShapeStructInfo(ndim=-1))
    assert op.shape_to_tensor(unknown).struct_info == S.TensorStructInfo(None, "int64", 1)
    with pytest.raises(StructInfoError, match="shape_to_tensor.*expr must be a shape"):
        op.shape_to_tensor(tensor((2,)))


def test_non_ir_arguments_are_named():
    import numpy as np

    with pytest.raises(StructInfoError, match="op 'add': argument 1 must be an IR expression, got ndarray"):
        op.add(tensor((2,)), np.ones(2))
    with pytest.raises(StructInfoError, match="op 'concat': cannot make a tensor from <object"):
        op.concat([tensor((2,)), object()])
