"""Property tests: inferred shapes agree with NumPy on random inputs."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import hetvm.op as op
from hetvm.ir import Var, prim
from hetvm.ir import struct_info as S

FAST = settings(max_examples=80, deadline=None)
dims = st.lists(st.integers(1, 5), min_size=1, max_size=4)


def tensor(shape, dtype="float32", name="x"):
    return Var(name, struct_info=S.TensorStructInfo(shape, dtype))


def static(sinfo):
    return tuple(prim.const_value(d) for d in sinfo.shape)


@FAST
@given(dim=st.integers(0, 12), begin=st.integers(-15, 15), end=st.integers(-15, 15),
       stride=st.integers(-4, 4).filter(bool))  # fmt: skip
def test_strided_slice_static_matches_numpy(dim, begin, end, stride):
    call = op.strided_slice(tensor((dim,)), [0], [begin], [end], [stride])
    assert static(call.struct_info) == (np.arange(dim)[begin:end:stride].size,)


@FAST
@given(dim=st.integers(1, 12), data=st.data())
def test_strided_slice_symbolic_in_range(dim, data):
    begin = data.draw(st.integers(0, dim))
    end = data.draw(st.integers(begin, dim))
    stride = data.draw(st.integers(1, 4))
    n = prim.PrimVar("n")
    call = op.strided_slice(tensor((n,)), [0], [begin], [end], [stride])
    got = prim.evaluate(call.struct_info.shape[0], {n: dim})
    assert got == np.arange(dim)[begin:end:stride].size


@FAST
@given(a=dims, b=dims)
def test_matmul_matches_numpy_or_refuses(a, b):
    from hetvm.errors import StructInfoError

    try:
        expect = np.matmul(np.zeros(a), np.zeros(b)).shape
    except ValueError:
        expect = None
    try:
        got = static(op.matmul(tensor(a), tensor(b, name="y")).struct_info)
    except StructInfoError:
        got = None
    assert got == expect


@FAST
@given(a=dims, b=dims, c=dims)
def test_where_broadcast_matches_numpy_or_refuses(a, b, c):
    from hetvm.errors import StructInfoError

    try:
        expect = np.broadcast_shapes(a, b, c)
    except ValueError:
        expect = None
    try:
        got = static(op.where(tensor(a, "bool"), tensor(b), tensor(c)).struct_info)
    except StructInfoError:
        got = None
    assert got == expect


@FAST
@given(shape=dims, data=st.data())
def test_split_pieces_cover_the_axis(shape, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    n = shape[axis]
    sections = data.draw(st.integers(1, n))
    chunk = -(-n // sections)
    if chunk * (sections - 1) > n:
        return  # refused: covered by test_split_errors
    sinfo = op.split(tensor(shape), sections, axis).struct_info
    sizes = [static(f)[axis] for f in sinfo.fields]
    expect = [a.shape[axis] for a in np.split(np.zeros(shape), [chunk * i for i in range(1, sections)], axis)]
    assert sizes == expect


@FAST
@given(shape=dims, data=st.data())
def test_reshape_minus_one_matches_numpy(shape, data):
    total = int(np.prod(shape))
    divisors = [d for d in range(1, total + 1) if total % d == 0]
    first = data.draw(st.sampled_from(divisors))
    call = op.reshape(tensor(shape), (first, -1))
    assert static(call.struct_info) == np.zeros(shape).reshape(first, -1).shape


@FAST
@given(shape=dims, keepdims=st.booleans(), data=st.data())
def test_reductions_match_numpy(shape, keepdims, data):
    axes = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), unique_by=lambda a: a % len(shape)))
    axis = tuple(axes) if axes else None
    expect = np.sum(np.zeros(shape), axis=axis, keepdims=keepdims).shape
    assert static(op.sum(tensor(shape), axis, keepdims).struct_info) == expect
