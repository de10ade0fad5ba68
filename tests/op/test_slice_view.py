"""strided_slice as a view (vm.builtin.slice_view): a slice that is one contiguous
run of its input's bytes makes no copy, on every executor; any other slice keeps
its kernel. Added as a view builtin needing only the op's definition
(hetvm/op/index.py), its kernel (hetvm/kernels/view_kernels.py) and these tests."""

import numpy as np
import pytest

import hetvm
from hetvm.errors import HetvmRuntimeError
from hetvm.graph_executor import create as create_graph_executor
from hetvm.kernels.view_kernels import place_view
from hetvm.pipeline import lower
from hetvm.script import from_source
from hetvm.testing.interpreter import Interpreter

SLICE = "vm.builtin.slice_view"


def _module(shape, slice_args, out_shape, dtype="float32"):
    return from_source(f'''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor({shape}, dtype="{dtype}")) -> R.Tensor({out_shape}, dtype="{dtype}"):
        a = R.exp(x)
        s = R.strided_slice(a, {slice_args})
        t = R.negative(s)
        return t
''')


def _symbols(mod):
    text = lower(mod).script()
    return SLICE in text, "kernel.strided_slice" in text


CASES = [  # (shape, slice, numpy index, becomes a view)
    ((4, 3), "axes=[0], begin=[1], end=[3]", np.s_[1:3], True),
    ((1, 6, 2), "axes=[1], begin=[2], end=[5]", np.s_[:, 2:5], True),
    ((3, 4, 2), "axes=[0, 1], begin=[2, 1], end=[3, 3]", np.s_[2:3, 1:3], True),
    ((5, 2), "axes=[0], begin=[-2], end=[100]", np.s_[-2:100], True),
    ((4, 3), "axes=[0], begin=[3], end=[0], strides=[-1]", np.s_[3:0:-1], False),  # reversed rows
    ((4, 3), "axes=[1], begin=[0], end=[2]", np.s_[:, 0:2], False),  # rows of 3, 2 kept
    ((6, 2), "axes=[0], begin=[1], end=[2], strides=[2]", np.s_[1:2:2], True),  # one row
]


@pytest.mark.parametrize("shape, spec, index, is_view", CASES)
def test_contiguous_slices_are_views_on_every_executor(shape, spec, index, is_view):
    x = np.linspace(-1, 1, int(np.prod(shape)), dtype="float32").reshape(shape)
    want = -np.exp(x)[index]
    mod = _module(shape, spec, want.shape)
    assert _symbols(mod) == (is_view, not is_view)
    vm = hetvm.VirtualMachine(hetvm.build(mod), poison=True)
    np.testing.assert_allclose(vm["main"](x).numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(Interpreter(lower(mod)).run("main", x), want, rtol=1e-6)
    gm = hetvm.build(mod, executor="graph")
    ex = create_graph_executor(gm.graph, gm.lib, [hetvm.cpu(0)])
    ex.run(x=x)
    np.testing.assert_allclose(ex.get_output(0).numpy(), want, rtol=1e-6)


def test_a_view_of_a_symbolic_shape_is_placed_at_run_time():
    mod = from_source('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 3), dtype="float32")) -> R.Tensor((1, 3), dtype="float32"):
        n = T.int64()
        a = R.exp(x)
        s = R.strided_slice(a, axes=[0], begin=[-1], end=[n])
        t = R.negative(s)
        return t
''')
    assert _symbols(mod) == (True, False)
    vm = hetvm.VirtualMachine(hetvm.build(mod), poison=True)
    for n in (2, 5):
        x = np.arange(3 * n, dtype="float32").reshape(n, 3) / 10
        np.testing.assert_allclose(vm["main"](x).numpy(), -np.exp(x)[-1:], rtol=1e-6)


def test_the_placement():
    # rows 1..2 of a (4, 3) float32: from byte 12, 2 x 3
    assert place_view(SLICE, (4, 3), 4, ([0], [1], [3], [1])) == (12, (2, 3))
    # x[1, 2:4] of (2, 5): element 7
    assert place_view(SLICE, (2, 5), 2, ([0, 1], [1, 2], [2, 4], [1, 1])) == (14, (1, 2))
    assert place_view(SLICE, (3, 2), 4, ([0], [2], [1], [1]))[1] == (0, 2)  # empty
    with pytest.raises(HetvmRuntimeError, match="not one contiguous run"):
        place_view(SLICE, (4, 3), 4, ([1], [0], [2], [1]))
