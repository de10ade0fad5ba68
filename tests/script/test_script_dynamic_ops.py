"""TVMScript of the ops in hetvm/op/index_nd.py and hetvm/op/dynamic.py: a program
that binds data-dependent lengths with match_cast parses, prints back to the same
text, and runs at two sizes from one executable."""

import numpy as np

import hetvm
from hetvm.ir import assert_structural_equal
from hetvm.script import from_source, print_module

SOURCE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 3), "float32"), i: R.Tensor(("k", 2), "int64"), b: R.Tensor((3,), "int64")):
        n = T.int64()
        k = T.int64()
        lo = T.int64()
        hi = T.int64()
        step = T.int64()
        nz = T.int64()
        with R.dataflow():
            g = R.gather_nd(x, i, batch_dims=0)
            s = R.scatter_nd(x, i, g, reduction="add")
            lower = R.tril(x, 1)
            upper = R.triu(x, -1)
            hot = R.one_hot(R.arange(0, n, 1), 1.5, 0.0, 4, -1)
            bounds = R.match_cast(R.tensor_to_shape(b), R.Shape([lo, hi, step]))
            r = R.arange(lo, hi, step, dtype="int32")
            cnt = R.reshape(R.sum(R.astype(R.astype(x, "bool"), "int64")), R.shape([1]))
            c = R.match_cast(R.tensor_to_shape(cnt), R.Shape([nz]))
            idx = R.nonzero(x, c)
            R.output(s, lower, upper, hot, r, idx)
        return (s, lower, upper, hot, r, idx)
'''


def test_script_prints_back_and_runs_at_two_sizes():
    mod = from_source(SOURCE)
    text = print_module(mod)
    assert "R.nonzero(x, c)" in text and "R.arange(lo, hi, step, dtype=\"int32\")" in text
    again = from_source(text)
    assert_structural_equal(mod, again)
    assert print_module(again) == text
    vm = hetvm.VirtualMachine(hetvm.build(mod, target="llvm"))
    rng = np.random.default_rng(1)
    for n, bounds in ((4, (1, 8, 3)), (2, (3, 10, 4))):
        x = rng.integers(-1, 2, (n, 3)).astype(np.float32)
        i = np.array([[0, 2], [n - 1, -3], [0, 2]])
        s, lower, upper, hot, r, idx = (v.numpy() for v in vm["main"](x, i, np.array(bounds)))
        expect_s = x.copy()
        np.add.at(expect_s, (i[:, 0], i[:, 1] % 3), x[i[:, 0], i[:, 1]])
        np.testing.assert_array_equal(s, expect_s)
        np.testing.assert_array_equal(lower, np.tril(x, 1))
        np.testing.assert_array_equal(upper, np.triu(x, -1))
        np.testing.assert_array_equal(hot, np.where(np.arange(n)[:, None] == np.arange(4), 1.5, 0.0))
        np.testing.assert_array_equal(r, np.arange(*bounds, dtype=np.int32))
        np.testing.assert_array_equal(idx, np.array(np.nonzero(x)))


SOURCE_MORE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 3), "float32"), m: R.Tensor(("n", 2, 2), "float64")):
        n = T.int64()
        u = T.int64()
        with R.dataflow():
            top = R.topk(x, 2, axis=1, ret_type="both", largest=False, dtype="int64")
            d = R.det(m)
            c = R.match_cast(R.tensor_to_shape(R.unique_count(x, axis=None)), R.Shape([u]))
            uniq = R.unique(x, c, sorted=True, axis=None)
            one = R.const([1], "int64")
            steps = R.range_length(one, R.const([9], "int64"), one)
            R.output(top, d, uniq, steps)
        return (top, d, uniq, steps)
"""


def test_tuple_results_and_hetvm_only_ops_print_back():
    mod = from_source(SOURCE_MORE)
    text = print_module(mod)
    again = from_source(text)
    assert_structural_equal(mod, again)
    assert print_module(again) == text
    vm = hetvm.VirtualMachine(hetvm.build(mod, target="llvm"))
    x = np.array([[3, 1, 2], [1, 1, 0]], np.float32)
    m = np.random.default_rng(2).standard_normal((2, 2, 2))
    (values, indices), d, (y, first, inverse, counts), steps = vm["main"](x, m)
    np.testing.assert_array_equal(values.numpy(), [[1, 2], [0, 1]])
    np.testing.assert_array_equal(indices.numpy(), [[1, 2], [2, 0]])
    np.testing.assert_allclose(d.numpy(), np.linalg.det(m))
    np.testing.assert_array_equal(y.numpy(), [0, 1, 2, 3])
    np.testing.assert_array_equal(counts.numpy(), [1, 3, 1, 1])
    assert steps.numpy().tolist() == [8]
