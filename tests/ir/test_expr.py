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
