"""Kernels of hetvm/op/index_nd.py and hetvm/op/dynamic.py against loops over
NumPy: empty tensors, negative indices, integer dtypes, and clear errors."""

import itertools

import numpy as np
import pytest

from hetvm.errors import HetvmRuntimeError
from hetvm.kernels import get_kernel, has_kernel

RNG = np.random.default_rng(5)
OPS = ("gather_nd", "scatter_nd", "one_hot", "tril", "triu", "arange", "range_length", "nonzero", "topk", "det", "unique_count", "unique")


def run(op, attrs, *args, shape, dtype="float32"):
    out = np.full(shape, 7, dtype=dtype)
    get_kernel(op, "cpu")(np, attrs, *args, out)
    return out


def test_every_kind_has_the_kernels():
    assert all(has_kernel(op, k) for op in OPS for k in ("cpu", "sim", "cuda"))


def gather_nd_loop(data, indices, b):
    """ONNX GatherND by its definition, one index tuple at a time."""
    batch = data.shape[:b]
    out = []
    for bi in itertools.product(*map(range, batch)):
        idx = indices[bi].reshape(-1, indices.shape[-1])
        out.append([data[bi][tuple(t)] for t in idx])
    shape = indices.shape[:-1] + data.shape[b + indices.shape[-1] :]
    return np.asarray(out, dtype=data.dtype).reshape(shape)


@pytest.mark.parametrize("dshape,ishape,b", [
    ((3, 4), (2, 2), 0), ((3, 4), (2, 1), 0), ((3, 4, 2), (5, 2), 0), ((2, 3, 4), (2, 1), 1),
    ((2, 3, 4), (2, 5, 2), 1), ((2, 2, 3, 4), (2, 2, 1), 2), ((0, 4), (0, 1), 0), ((3, 4), (0, 2), 0),
])  # fmt: skip
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_gather_nd_matches_its_definition(dshape, ishape, b, dtype):
    data = RNG.integers(-50, 50, dshape).astype(dtype)
    m = ishape[-1]
    dims = dshape[b : b + m]
    # negative indices too: every value in [-d, d)
    cols = [RNG.integers(-d, d, ishape[:-1]) if d else np.zeros(ishape[:-1], np.int64) for d in dims]
    indices = np.stack(cols, -1).astype(np.int64) if cols else np.zeros(ishape, np.int64)
    expect = gather_nd_loop(data, np.where(indices < 0, indices + np.array(dims), indices), b)
    got = run("gather_nd", {"batch_dims": b}, data, indices, shape=expect.shape, dtype=dtype)
    np.testing.assert_array_equal(got, expect)


def test_gather_nd_out_of_range_is_a_clear_error():
    data = np.zeros((3, 4), np.float32)
    with pytest.raises(HetvmRuntimeError, match=r"op 'gather_nd': index 4 is out of range for a dim of size 4"):
        run("gather_nd", {"batch_dims": 0}, data, np.array([[0, 4]]), shape=(1,))
    with pytest.raises(HetvmRuntimeError, match=r"index -4 is out of range for a dim of size 3"):
        run("gather_nd", {"batch_dims": 0}, data, np.array([[-4]]), shape=(1, 4))
    # several bad indices: the first position of the index tuple that has one is named
    bad = np.array([[0, 9], [5, 0], [1, -7]])
    with pytest.raises(HetvmRuntimeError, match=r"index 5 is out of range for a dim of size 3 \(position 0"):
        run("gather_nd", {"batch_dims": 0}, data, bad, shape=(3,))


def scatter_nd_loop(data, indices, updates, reduction):
    out = data.copy()
    fn = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}.get(reduction)
    m = indices.shape[-1]
    for pos in itertools.product(*map(range, indices.shape[:-1])):
        t = tuple(indices[pos])
        out[t] = updates[pos] if fn is None else fn(out[t], updates[pos])
    assert out.shape[m:] == updates.shape[len(indices.shape) - 1 :]
    return out


@pytest.mark.parametrize("reduction", ["update", "add", "mul", "min", "max"])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_scatter_nd_matches_its_definition(reduction, dtype):
    data = RNG.integers(-9, 9, (4, 3, 2)).astype(dtype)
    unique = reduction == "update"  # duplicates are undefined without a reduction
    idx = np.array([[0, 1], [3, -1], [-4, 0]] + ([] if unique else [[3, 2], [0, 1]]))
    updates = RNG.integers(-9, 9, (len(idx), 2)).astype(dtype)
    expect = scatter_nd_loop(data, np.where(idx < 0, idx + np.array([4, 3]), idx), updates, reduction)
    got = run("scatter_nd", {"reduction": reduction}, data, idx, updates, shape=data.shape, dtype=dtype)
    np.testing.assert_array_equal(got, expect)


def test_scatter_nd_whole_slices_empty_updates_and_errors():
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = run("scatter_nd", {"reduction": "update"}, data, np.array([[2]]), np.ones((1, 4), np.float32), shape=(3, 4))
    np.testing.assert_array_equal(got, np.concatenate([data[:2], np.ones((1, 4))]))
    none = run("scatter_nd", {"reduction": "add"}, data, np.zeros((0, 2), np.int64), np.zeros((0,), np.float32), shape=(3, 4))
    np.testing.assert_array_equal(none, data)
    with pytest.raises(HetvmRuntimeError, match=r"op 'scatter_nd': index 3 is out of range for a dim of size 3"):
        run("scatter_nd", {"reduction": "update"}, data, np.array([[3, 0]]), np.ones(1, np.float32), shape=(3, 4))


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_negative_and_out_of_range_indices(axis):
    idx = np.array([[0, -1, 3], [5, -4, -5]], np.int64)
    depth = 4
    got = run("one_hot", {"depth": depth, "axis": axis}, idx, 2.5, -1.0, shape=np.insert(np.array(idx.shape), axis % 3, depth))
    resolved = np.where(idx < 0, idx + depth, idx)
    expect = np.where(resolved[..., None] == np.arange(depth), 2.5, -1.0).astype(np.float32)
    np.testing.assert_array_equal(got, np.moveaxis(expect, -1, axis))
    assert (got == 2.5).sum() == 4  # 5 and -5 are outside [-4, 4): all off


@pytest.mark.parametrize("op,ref", [("tril", np.tril), ("triu", np.triu)])
@pytest.mark.parametrize("k", [-6, -1, 0, 2, 7])
def test_triangles_on_batches_ints_and_empty(op, ref, k):
    for shape, dtype in (((2, 3, 5), "int32"), ((4, 4), "float32"), ((0, 3), "float32"), ((3, 0, 2), "int64")):
        x = RNG.integers(1, 9, shape).astype(dtype)
        np.testing.assert_array_equal(run(op, {}, x, k, shape=shape, dtype=dtype), ref(x, k))


@pytest.mark.parametrize("start,end,step,dtype", [
    (0, 5, 1, "int64"), (10, -3, -4, "int32"), (3, 3, 1, "int64"), (0.5, 2.0, 0.25, "float32"),
    (1.0, -1.0, -0.5, "float64"),
])  # fmt: skip
def test_arange(start, end, step, dtype):
    expect = np.arange(start, end, step, dtype=dtype)
    np.testing.assert_allclose(run("arange", {}, start, end, step, shape=expect.shape, dtype=dtype), expect)


@pytest.mark.parametrize("start,limit,delta,dtype", [
    (0, 7, 2, "int64"), (10, -3, -4, "int32"), (5, 1, 1, "int64"), (1.0, 2.0, 0.3, "float32"),
    (3.0, 3.0, -1.0, "float64"),
])  # fmt: skip
def test_range_length_is_onnx_ranges_count(start, limit, delta, dtype):
    a, b, d = (np.array([v], dtype) for v in (start, limit, delta))
    expect = len(np.arange(a[0], b[0], d[0]))
    assert run("range_length", {}, a, b, d, shape=(1,), dtype="int64").tolist() == [expect]


def test_range_length_delta_zero_is_a_clear_error():
    one = np.array([1], np.int64)
    with pytest.raises(HetvmRuntimeError, match=r"op 'range_length': delta of a Range is 0"):
        run("range_length", {}, one, one + 4, one * 0, shape=(1,), dtype="int64")


@pytest.mark.parametrize("x", [
    np.array([[1, 0], [0, 3]], np.int32), np.array([0.0, np.nan, -2.0], np.float32), np.zeros((2, 0)),
    np.array(5.0), np.array([[True, False, True]]), np.zeros((3, 2), np.int64),
])  # fmt: skip
def test_nonzero(x):
    expect = np.array(np.nonzero(x.reshape(1) if x.ndim == 0 else x))
    got = run("nonzero", {}, x, (expect.shape[1],), shape=expect.shape, dtype="int64")
    np.testing.assert_array_equal(got, expect)


def test_nonzero_count_mismatch_is_a_clear_error():
    with pytest.raises(HetvmRuntimeError, match=r"op 'nonzero': the input has 2 nonzero elements, the result was sized for 3"):
        run("nonzero", {}, np.array([1, 0, 2]), (3,), shape=(1, 3), dtype="int64")


def topk_loop(x, k, largest):
    """Per row: sort (value, index) pairs, the larger value (or smaller) first, then the lower index."""
    rows = x.reshape(-1, x.shape[-1])
    order = [sorted(range(len(r)), key=lambda i, r=r: (-int(r[i]) if largest else int(r[i]), i))[:k] for r in rows]
    idx = np.array(order, np.int64).reshape(x.shape[:-1] + (k,))
    return np.take_along_axis(x, idx, -1), idx


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint64"])
@pytest.mark.parametrize("axis", [-1, 0])
def test_topk_ties_keep_the_lower_index(largest, dtype, axis):
    x = RNG.integers(0, 4, (3, 6)).astype(dtype)  # many ties
    xt = np.moveaxis(x, axis, -1)
    k = 2
    values, idx = topk_loop(xt, k, largest)
    shape = np.moveaxis(values, -1, axis).shape
    outs = [np.zeros(shape, dtype), np.zeros(shape, np.int64)]
    get_kernel("topk", "cpu")(np, {"k": k, "axis": axis, "largest": largest, "ret_type": "both"}, x, *outs)
    np.testing.assert_array_equal(outs[0], np.moveaxis(values, -1, axis))
    np.testing.assert_array_equal(outs[1], np.moveaxis(idx, -1, axis))


def test_topk_of_zero_and_of_an_empty_batch():
    out = np.zeros((0, 0), np.float32), np.zeros((0, 0), np.int64)
    get_kernel("topk", "cpu")(np, {"k": 0, "axis": 1, "largest": True, "ret_type": "both"}, np.zeros((0, 4), np.float32), *out)
    got = run("topk", {"k": 0, "axis": 1, "largest": True, "ret_type": "values"}, np.ones((2, 3), np.float32), shape=(2, 0))
    assert got.shape == (2, 0)


def unique_first_occurrence(x):
    """Distinct values in order of first occurrence, by a loop."""
    seen, first = [], []
    for i, v in enumerate(x.reshape(-1).tolist()):
        if v not in seen:
            seen.append(v)
            first.append(i)
    inverse = [seen.index(v) for v in x.reshape(-1).tolist()]
    counts = [x.reshape(-1).tolist().count(v) for v in seen]
    return np.array(seen, x.dtype), np.array(first), np.array(inverse), np.array(counts)


@pytest.mark.parametrize("keep_sorted", [True, False])
@pytest.mark.parametrize("x", [np.array([[2, 1, 1], [3, 2, 0]], np.int32), np.array([1.5, -1.0, 1.5, 0.0], np.float32),
                               np.zeros((0,), np.int64)])  # fmt: skip
def test_unique_flattened(x, keep_sorted):
    y, first, inverse, counts = unique_first_occurrence(x)
    if keep_sorted:
        order = np.argsort(y, kind="stable")
        rank = np.argsort(order)
        y, first, counts, inverse = y[order], first[order], counts[order], rank[inverse] if len(inverse) else inverse
    count = run("unique_count", {"axis": None}, x, shape=(1,), dtype="int64")
    assert count.tolist() == [len(y)]
    outs = [np.zeros(len(y), x.dtype), np.zeros(len(y), np.int64), np.zeros(x.size, np.int64), np.zeros(len(y), np.int64)]
    get_kernel("unique", "cpu")(np, {"axis": None, "sorted": keep_sorted}, x, (len(y),), *outs)
    for got, want in zip(outs, (y, first, inverse, counts)):
        np.testing.assert_array_equal(got, want)


def test_unique_slices_along_an_axis_and_a_wrong_count():
    x = np.array([[1, 0, 1], [2, 5, 2]], np.int64)  # columns 0 and 2 are equal
    assert run("unique_count", {"axis": 1}, x, shape=(1,), dtype="int64").tolist() == [2]
    outs = [np.zeros((2, 2), np.int64), *(np.zeros(n, np.int64) for n in (2, 3, 2))]
    get_kernel("unique", "cpu")(np, {"axis": 1, "sorted": False}, x, (2,), *outs)
    assert outs[0].tolist() == [[1, 0], [2, 5]] and outs[2].tolist() == [0, 1, 0] and outs[3].tolist() == [2, 1]
    with pytest.raises(HetvmRuntimeError, match="op 'unique': the input has 2 distinct values, the results were sized for 3"):
        get_kernel("unique", "cpu")(np, {"axis": 1, "sorted": True}, x, (3,), np.zeros((2, 3), np.int64),
                                    *(np.zeros(n, np.int64) for n in (3, 3, 3)))  # fmt: skip
