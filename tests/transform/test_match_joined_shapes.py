"""MatchJoinedShapes: tensors whose shape was lost at an If join (or a call
returning ``ndim`` only) get a shape again through a match_cast."""

import numpy as np
import pytest

import hetvm
from hetvm.errors import StructInfoError
from hetvm.ir import MatchCast
from hetvm.ir.structural import structural_equal
from hetvm.script import from_source, print_module
from hetvm.transform import LegalizeOps
from hetvm.transform.match_joined_shapes import MatchJoinedShapes

HEADER = """
# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tir as T

@I.ir_module
class Module:
"""

JOIN = HEADER + """
    @R.function
    def main(c: R.Tensor((), dtype="bool"), x: R.Tensor(("n", 4), dtype="float32"),
             y: R.Tensor(("m", 4), dtype="float32")) -> R.Tensor(dtype="float32", ndim=2):
        n = T.int64()
        m = T.int64()
        if c:
            z = R.add(x, x)
        else:
            z = R.multiply(y, y)
        w = R.exp(z)
        return w
"""


def _casts(mod):
    body = mod["main"].body
    return [b for block in body.blocks for b in block.bindings if isinstance(b, MatchCast)]


def test_join_of_different_shapes_gets_a_cast_keeping_agreed_dims():
    mod = from_source(JOIN)
    with pytest.raises(StructInfoError, match="no known shape"):
        LegalizeOps()(mod)  # why the pass exists
    out = MatchJoinedShapes()(mod)
    (cast,) = _casts(out)
    dims = cast.struct_info.shape
    assert dims[1].value == 4 and dims[0].name == "z_dim0"
    text = print_module(out)
    assert "R.exp(z1)" in text and "R.match_cast(z," in text
    assert structural_equal(from_source(text), out)  # the text form round-trips
    assert print_module(MatchJoinedShapes()(out)) == text  # idempotent
    assert print_module(mod) == print_module(from_source(JOIN))  # input untouched


def test_built_program_runs_both_branches():
    mod = from_source(JOIN)
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    y = np.arange(20, dtype=np.float32).reshape(5, 4) / 10
    vm = hetvm.VirtualMachine(hetvm.build(mod))
    np.testing.assert_allclose(vm["main"](np.array(True), x, y).numpy(), np.exp(x + x), rtol=1e-6)
    np.testing.assert_allclose(vm["main"](np.array(False), x, y).numpy(), np.exp(y * y), rtol=1e-6)


def test_call_returning_rank_only_is_cast():
    src = HEADER + """
    @R.function
    def helper(x: R.Tensor(("n", 3), dtype="float32")) -> R.Tensor(dtype="float32", ndim=2):
        n = T.int64()
        y = R.add(x, x)
        return y

    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor(dtype="float32", ndim=2):
        cls = Module
        h = cls.helper(x)
        r = R.negative(h)
        return r
"""
    mod = from_source(src)
    out = MatchJoinedShapes()(mod)
    (cast,) = _casts(out)
    assert [d.name for d in cast.struct_info.shape] == ["h_dim0", "h_dim1"]
    x = np.ones((2, 3), np.float32)
    got = hetvm.VirtualMachine(hetvm.build(mod))["main"](x).numpy()
    np.testing.assert_array_equal(got, -(x + x))


def test_same_shapes_and_unknown_dtypes_are_left_alone():
    same = JOIN.replace('("m", 4)', '("n", 4)').replace("        m = T.int64()\n", "")
    mod = from_source(same)
    assert MatchJoinedShapes()(mod) is mod
    no_dtype = HEADER + """
    @R.function
    def main(c: R.Tensor((), dtype="bool"), x: R.Tensor((2, 4), dtype="float32"),
             y: R.Tensor((3, 4), dtype="int32")) -> R.Tensor(ndim=2):
        if c:
            z = R.add(x, x)
        else:
            z = R.add(y, y)
        return z
"""
    mod = from_source(no_dtype)
    assert MatchJoinedShapes()(mod) is mod


def test_nested_if_and_name_clash():
    src = HEADER + """
    @R.function
    def main(c: R.Tensor((), dtype="bool"), x: R.Tensor(("z_dim0", 4), dtype="float32"),
             y: R.Tensor(("m", 4), dtype="float32")) -> R.Tensor(dtype="float32", ndim=2):
        z_dim0 = T.int64()
        m = T.int64()
        if c:
            if c:
                z = R.add(x, x)
            else:
                z = R.add(y, y)
            q = R.exp(z)
        else:
            q = R.multiply(y, y)
        return q
"""
    mod = from_source(src)
    out = MatchJoinedShapes()(mod)
    text = print_module(out)
    assert "z_dim0_1" in text  # the parameter's symbolic name is not reused
    x = np.ones((2, 4), np.float32)
    y = np.full((3, 4), 2, np.float32)
    vm = hetvm.VirtualMachine(hetvm.build(mod))
    np.testing.assert_allclose(vm["main"](np.array(True), x, y).numpy(), np.exp(x + x), rtol=1e-6)
    np.testing.assert_array_equal(vm["main"](np.array(False), x, y).numpy(), y * y)
