"""Struct-info inference and errors of hetvm/op/index_nd.py and hetvm/op/dynamic.py,
with symbolic shapes."""

import pytest

import hetvm.op as op
from hetvm.errors import StructInfoError
from hetvm.ir import Var, op_info, prim
from hetvm.ir import struct_info as S
from hetvm.ir.op_registry import DeviceBehavior

n, m, k = prim.PrimVar("n"), prim.PrimVar("m"), prim.PrimVar("k")


def t(shape, dtype="float32", name="x"):
    return Var(name, struct_info=S.TensorStructInfo(shape, dtype))


def shape_str(call):
    return tuple(prim.to_str(d) for d in call.struct_info.shape)


def test_gather_nd_shapes_stay_symbolic():
    x = t((n, m, 4))
    assert shape_str(op.gather_nd(x, t((k, 2), "int64", "i"))) == ("k", "4")
    assert shape_str(op.gather_nd(x, t((k, 3), "int64", "i"))) == ("k",)
    assert shape_str(op.gather_nd(x, t((n, k, 1), "int64", "i"), batch_dims=1)) == ("n", "k", "4")
    assert op.gather_nd(x, t((n, 1), "int64", "i")).struct_info.dtype == "float32"


@pytest.mark.parametrize("indices,batch_dims,message", [
    (((2, 4), "int64"), 0, "address more dims than data has"),
    (((2, n), "int64"), 0, "the last dim of indices .* must be static"),
    (((2, 1), "float32"), 0, "indices must be integers"),
    (((3, 1), "int64"), 1, r"batch\) dims of data .* differ"),
    (((5, 1), "int64"), 1, "differ"),
])  # fmt: skip
def test_gather_nd_errors_name_the_op(indices, batch_dims, message):
    with pytest.raises(StructInfoError, match=f"op 'gather_nd': .*{message}"):
        op.gather_nd(t((4, n, 3)), t(*indices, "i"), batch_dims)


def test_scatter_nd_keeps_data_and_checks_updates():
    x = t((n, 3, 2))
    call = op.scatter_nd(x, t((k, 2), "int64", "i"), t((k, 2), name="u"), "add")
    assert call.struct_info == x.struct_info and call.attrs["reduction"] == "add"
    with pytest.raises(StructInfoError, match=r"op 'scatter_nd': updates \(k, 3\) must have shape"):
        op.scatter_nd(x, t((k, 2), "int64", "i"), t((k, 3), name="u"))
    with pytest.raises(StructInfoError, match="updates .int32. must have the dtype of data"):
        op.scatter_nd(x, t((k, 3), "int64", "i"), t((k,), "int32", "u"))
    with pytest.raises(StructInfoError, match="reduction must be one of"):
        op.scatter_nd(x, t((k, 3), "int64", "i"), t((k,), name="u"), "none")


def test_one_hot_inserts_the_depth_axis():
    idx = t((n, 3), "int64", "i")
    assert shape_str(op.one_hot(idx, 1.0, 0.0, 5)) == ("n", "3", "5")
    assert shape_str(op.one_hot(idx, 1, 0, 5, axis=0)) == ("5", "n", "3")
    assert op.one_hot(idx, 1, 0, 5).struct_info.dtype == "int64"
    with pytest.raises(StructInfoError, match="op 'one_hot': axis 3 is out of range"):
        op.one_hot(idx, 1, 0, 5, axis=3)
    with pytest.raises(StructInfoError, match="on_value .float32. and off_value .int64. must have one dtype"):
        op.one_hot(idx, 1.0, 0, 5)


def test_triangles_take_a_prim_k():
    x = t((n, m))
    assert op.tril(x, 1).struct_info == x.struct_info
    assert op.triu(x, k).struct_info == x.struct_info  # a symbolic k is fine
    with pytest.raises(StructInfoError, match="op 'triu': needs a tensor of rank >= 2"):
        op.triu(t((n,)))


def test_arange_length_is_a_shape_expression():
    assert shape_str(op.arange(n)) == ("n",)
    assert shape_str(op.arange(1, n, 1)) == ("T.max(n - 1, 0)",)
    assert shape_str(op.arange(0, n, 2)) == ("(n + 1) // 2",)
    assert shape_str(op.arange(n, 0, -3)) == ("(n + 2) // 3",)
    assert op.arange(0.5, 2.0, 0.25).struct_info.static_shape == (6,)
    assert op.arange(0.5, 2.0, 0.25).struct_info.dtype == "float32"
    assert op.arange(10, -3, -4, "int32").struct_info.static_shape == (4,)
    assert op.arange(5, 1).struct_info.static_shape == (0,)
    with pytest.raises(StructInfoError, match="op 'arange': step must be nonzero"):
        op.arange(0, n, 0)


def test_range_length_and_tensor_to_shape():
    one = t((1,), "int64", "a")
    assert op.range_length(one, one, one).struct_info.static_shape == (1,)
    with pytest.raises(StructInfoError, match="op 'range_length': delta must hold one value"):
        op.range_length(one, one, t((2,), "int64", "d"))
    shape = op.tensor_to_shape(t((3,), "int64", "s")).struct_info
    assert isinstance(shape, S.ShapeStructInfo) and shape.ndim == 3 and shape.values is None
    assert op_info("tensor_to_shape").device_behavior is DeviceBehavior.HOST_ONLY
    with pytest.raises(StructInfoError, match="op 'tensor_to_shape': needs an integer tensor"):
        op.tensor_to_shape(t((3,), "float32", "s"))


def test_nonzero_takes_its_length_from_a_shape():
    x = t((n, 3))
    assert op.nonzero(x).struct_info == S.TensorStructInfo(None, "int64", 2)
    assert shape_str(op.nonzero(x, (k,))) == ("2", "k")
    assert shape_str(op.nonzero(t((), name="s"), (k,))) == ("1", "k")
    for name in ("gather_nd", "scatter_nd", "one_hot", "tril", "arange", "nonzero"):
        assert op_info(name).pure and op_info(name).device_behavior is DeviceBehavior.FOLLOW_INPUTS


def test_topk_shapes_and_errors():
    x = t((n, 5))
    values, indices = op.topk(x, 3, 1, dtype="int64").struct_info.fields
    assert shape_str(op.topk(x, 3, 1, "values")) == ("n", "3") and values.dtype == "float32"
    assert indices.dtype == "int64" and indices.shape == values.shape
    assert shape_str(op.topk(x, 2, 0, "indices")) == ("2", "5")  # k of a symbolic axis: checked at run time
    with pytest.raises(StructInfoError, match=r"op 'topk': k = 6 is larger than the axis \(5\)"):
        op.topk(x, 6)
    with pytest.raises(StructInfoError, match="ret_type must be"):
        op.topk(x, 1, ret_type="all")


def test_det_of_square_matrices():
    assert shape_str(op.det(t((n, 3, 3)))) == ("n",)
    assert op.det(t((4, 4))).struct_info.static_shape == ()
    with pytest.raises(StructInfoError, match="op 'det': the last two dims must be equal"):
        op.det(t((n, 3, 4)))
    with pytest.raises(StructInfoError, match="op 'det': needs a floating-point tensor"):
        op.det(t((3, 3), "int32"))


def test_unique_results_take_their_length_from_a_shape():
    x = t((n, 3))
    y, first, inverse, counts = op.unique(x, (k,)).struct_info.fields
    assert [prim.to_str(d) for d in y.shape] == ["k"] and y.dtype == "float32"
    assert first.shape == counts.shape == (k,) and first.dtype == "int64"
    assert [prim.to_str(d) for d in inverse.shape] == ["n * 3"]
    y, _, inverse, _ = op.unique(x, (k,), True, 1).struct_info.fields
    assert [prim.to_str(d) for d in y.shape] == ["n", "k"] and inverse.static_shape == (3,)
    assert op.unique(x).struct_info.fields[0].shape is None  # no count: TVM's unknown length
    assert op.unique_count(x, 0).struct_info.static_shape == (1,)
    with pytest.raises(StructInfoError, match="op 'unique_count': axis 2 is out of range"):
        op.unique_count(x, 2)
