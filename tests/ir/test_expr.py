"""Every node kind constructs, is immutable and carries struct info."""

import dataclasses

import numpy as np
import pytest

import hetvm.op as op
from hetvm.errors import StructInfoError
from hetvm.ir import (
    Attrs,
    BindingBlock,
    Call,
    Constant,
    DataflowBlock,
    DataflowVar,
    DataTypeImm,
    ExternFunc,
    FuncStructInfo,
    Function,
    GlobalVar,
    If,
    MatchCast,
    ObjectStructInfo,
    Op,
    PrimStructInfo,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    ShapeStructInfo,
    Span,
    StringImm,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
    VarBinding,
    const,
    prim,
)
from hetvm.ir import expr as E

n = prim.PrimVar("n")
T = TensorStructInfo((n, 4), "float32")


def test_var_and_dataflow_var():
    x = Var("x", struct_info=T)
    d = DataflowVar("d", struct_info=T)
    assert x.struct_info is T and x.name_hint == "x"
    assert isinstance(d, Var)
    assert repr(x) == "Var(x)" and repr(d) == "DataflowVar(d)"
    assert x != Var("x", struct_info=T)  # variables are compared by identity


def test_var_takes_struct_info_positionally_as_tvm():
    from hetvm.script import relax as R

    x = Var("x", R.Tensor((2, 3), "float32"))
    assert x.struct_info == TensorStructInfo((2, 3), "float32")
    d = DataflowVar("d", R.Tensor(("n",), "float32"))
    assert d.struct_info.shape[0].name == "n"
    assert Var("y", struct_info=x.struct_info).struct_info is x.struct_info
    assert dataclasses.replace(x, name_hint="z").struct_info is x.struct_info


def test_nodes_are_immutable():
    x = Var("x", struct_info=T)
    with pytest.raises(dataclasses.FrozenInstanceError):
        x.name_hint = "y"  # type: ignore[misc]
    y = E.replace(x, name_hint="y")
    assert y.name_hint == "y" and x.name_hint == "x"


def test_global_var_equal_by_name():
    assert GlobalVar("f") == GlobalVar("f")
    assert hash(GlobalVar("f")) == hash(GlobalVar("f"))
    assert GlobalVar("f") != GlobalVar("g")


def test_op_is_unique_per_name():
    assert Op.get("add") is Op.get("add")
    with pytest.raises(StructInfoError, match="unknown op 'ad'.*add"):
        Op.get("ad")


def test_extern_func_is_impure_callable():
    f = ExternFunc("my_kernel")
    assert isinstance(f.struct_info, FuncStructInfo) and f.struct_info.purity is False


def test_constant_infers_shape_and_dtype():
    c = Constant(np.zeros((2, 3), "float32"))
    assert c.struct_info == TensorStructInfo((2, 3), "float32")
    assert const(True).struct_info == TensorStructInfo((), "bool")
    assert const([1, 2], "int32").struct_info == TensorStructInfo((2,), "int32")
    assert isinstance(Constant([1.0]).data, np.ndarray)


def test_tuple_and_get_item():
    x = Var("x", struct_info=T)
    s = ShapeExpr((n, 2))
    t = Tuple([x, s])
    assert isinstance(t.fields, tuple)
    assert t.struct_info == TupleStructInfo([T, ShapeStructInfo((n, 2))])
    assert TupleGetItem(t, 1).struct_info == ShapeStructInfo((n, 2))
    assert TupleGetItem(t, -1).struct_info == ShapeStructInfo((n, 2))
    with pytest.raises(StructInfoError, match="index 2 out of range"):
        TupleGetItem(t, 2)
    with pytest.raises(StructInfoError, match="not a tuple"):
        TupleGetItem(x, 0)
    obj = Var("o", struct_info=ObjectStructInfo())
    assert TupleGetItem(obj, 5).struct_info == ObjectStructInfo()
    assert Tuple([Var("u")]).struct_info is None  # unknown until normalised


def test_shape_prim_and_immediates():
    s = ShapeExpr((n, 3))
    assert s.values == (n, prim.IntImm(3))
    assert s.struct_info == ShapeStructInfo((n, 3))
    assert PrimValue(5).struct_info == PrimStructInfo("int64", prim.IntImm(5))
    assert PrimValue(n).struct_info.value is n
    assert PrimValue(1.5).struct_info.dtype == "float32"
    assert StringImm("hi").struct_info == ObjectStructInfo()
    assert DataTypeImm("float32").struct_info == ObjectStructInfo()
    assert E.shape([1, 2]).values == (prim.IntImm(1), prim.IntImm(2))
    assert E.prim_value(3).value == prim.IntImm(3)


def test_call_normalises_fields_and_infers():
    x = Var("x", struct_info=T)
    c = op.add(x, x)
    assert isinstance(c, Call) and c.op is Op.get("add")
    assert c.args == (x, x) and isinstance(c.attrs, Attrs)
    assert c.struct_info == T
    raw = Call(Op.get("exp"), [x], {"k": 1}, [T])
    assert isinstance(raw.args, tuple) and isinstance(raw.sinfo_args, tuple)
    assert raw.attrs["k"] == 1 and raw.struct_info is None


def test_attrs_are_immutable_and_hashable():
    a = Attrs({"axis": [1, 2], "name": "x"})
    with pytest.raises(TypeError):
        a["axis"] = 3
    with pytest.raises(TypeError):
        a.update(x=1)
    assert hash(a) == hash(Attrs({"name": "x", "axis": (1, 2)}))
    assert a.with_(name="y")["name"] == "y" and a["name"] == "x"


def test_seq_expr_if_function_and_bindings():
    x = Var("x", struct_info=T)
    c = Var("c", struct_info=PrimStructInfo("bool"))
    lv = DataflowVar("lv", struct_info=T)
    gv = Var("gv", struct_info=T)
    block = DataflowBlock([VarBinding(lv, op.exp(x)), VarBinding(gv, lv)])
    assert isinstance(block, BindingBlock) and isinstance(block.bindings, tuple)
    seq = SeqExpr([block], gv)
    assert seq.struct_info == T
    branch = SeqExpr([], x)
    cond = If(c, branch, SeqExpr([], gv), struct_info=T)
    assert cond.true_branch is branch
    f = Function([x, c], seq)
    assert f.ret_struct_info == T
    assert f.struct_info == FuncStructInfo([T, PrimStructInfo("bool")], T, True)
    impure = Function([x], SeqExpr([], x), is_pure=False, attrs={"global_symbol": "f"})
    assert impure.struct_info.purity is False and isinstance(impure.attrs, Attrs)
    mc = MatchCast(Var("y", struct_info=T), x, T)
    assert E.binding_value(mc) is x
    assert list(E.bindings_of([block, BindingBlock([mc])])) == [*block.bindings, mc]


def test_function_without_param_struct_info_has_none():
    f = Function([Var("x")], SeqExpr([], Var("y", struct_info=T)))
    assert f.struct_info is None
    # n is defined by no parameter, so the signature keeps only rank and dtype
    assert f.ret_struct_info == TensorStructInfo(ndim=2, dtype="float32")
    g = Function([Var("x", struct_info=T)], SeqExpr([], Var("y", struct_info=T)))
    assert g.ret_struct_info == T


def test_is_leaf():
    x = Var("x", struct_info=T)
    for leaf in (x, GlobalVar("f"), Op.get("add"), ExternFunc("k"), const(1.0),
                 ShapeExpr((1,)), PrimValue(1), StringImm("s"), DataTypeImm("int8"),
                 Tuple([x, Tuple([x])])):  # fmt: skip
        assert E.is_leaf(leaf), leaf
    assert not E.is_leaf(op.exp(x))
    assert not E.is_leaf(Tuple([op.exp(x)]))
    assert not E.is_leaf(TupleGetItem(Tuple([x]), 0))


def test_span_is_carried():
    sp = Span("model.py", 3, 4)
    x = Var("x", struct_info=T, span=sp)
    assert x.span is sp and str(sp) == "model.py:3:5"
    assert x.with_struct_info(ShapeStructInfo(ndim=1)).span is sp


# --------------------------------------------------------------------------
# a match_cast inside an If branch and the dims the signature defines
# --------------------------------------------------------------------------

_BRANCH_MATCH_CAST = '''
@I.ir_module
class Module:
    @R.function
    def main(state: R.Tensor(["N"], dtype="float32"), A: R.Tensor(["M", 16], dtype="float32"), B: R.Tensor(["M", 32], dtype="float32"), scale: R.Prim("float32")):
        N = T.int64()
        M = T.int64()
        if N == 16:
            weights: R.Tensor([M, 16], "float32") = A * scale
            weights: R.Tensor([M, N], "float32") = R.match_cast(weights, R.Tensor([M, N], "float32"))
            weights: R.Tensor([M, N], "float32") = weights * scale
        else:
            weights: R.Tensor([M, 32], "float32") = B * scale
            weights: R.Tensor([M, N], "float32") = R.match_cast(weights, R.Tensor([M, N], "float32"))
            weights: R.Tensor([M, N], "float32") = weights * scale
        weights: R.Tensor([M, N], "float32") = weights * scale
        out: R.Tensor([M], "float32") = R.matmul(weights, state)
        return out
'''


def _if_result(mod):
    (b,) = [b for block in mod["main"].body.blocks for b in block.bindings if isinstance(b.value, E.If)]
    return b.var.struct_info


def test_a_match_cast_in_a_branch_keeps_the_dims_the_signature_defines():
    """TVM's test_transform_canonicalize_bindings case: each branch match_casts
    to [M, N], dims of the parameters; the If's result keeps [M, N] (it used to
    become ndim=2, and the annotation after it was refused)."""
    from hetvm.script import from_source

    mod = from_source(_BRANCH_MATCH_CAST)
    m, n = mod["main"].params[1].struct_info.shape[0], mod["main"].params[0].struct_info.shape[0]
    assert _if_result(mod).shape == (m, n)
    assert mod["main"].ret_struct_info.shape == (m,)


def test_a_pass_rebuilding_the_branch_keeps_those_dims():
    from hetvm.ir.visitor import ExprMutator
    from hetvm.script import from_source

    class RenameScale(ExprMutator):  # rebuilds every block that reads scale
        def visit_call(self, call):
            out = super().visit_call(call)
            return E.replace(out, span=None) if out is call else out

    mod = from_source(_BRANCH_MATCH_CAST)
    again = RenameScale().visit_module(mod)
    m, n = mod["main"].params[1].struct_info.shape[0], mod["main"].params[0].struct_info.shape[0]
    assert _if_result(again).shape == (m, n)


def test_a_dim_only_a_branch_defines_still_does_not_leave_it():
    from hetvm.script import from_source

    src = '''
@I.ir_module
class Module:
    @R.function
    def main(c: R.Tensor((), "bool"), x: R.Tensor(["N"], "float32")):
        N = T.int64()
        K = T.int64()
        if c:
            y = R.match_cast(x, R.Tensor([K], "float32"))
            z = R.add(y, y)
        else:
            z = R.add(x, x)
        return z
'''
    sinfo = _if_result(from_source(src))
    assert sinfo.shape is None and sinfo.ndim == 1
