"""BlockBuilder: names, A-normal form, dataflow rules, match_cast, calls between functions."""

import pytest

import hetvm.op as op
from hetvm.analysis import check_well_formed
from hetvm.errors import StructInfoError, WellFormedError
from hetvm.ir import (
    BlockBuilder,
    Call,
    DataflowBlock,
    DataflowVar,
    Function,
    GlobalVar,
    If,
    IRModule,
    MatchCast,
    PrimStructInfo,
    SeqExpr,
    ShapeStructInfo,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
    prim,
)
from hetvm.ir import expr as E


def tvar(name, shape, dtype="float32"):
    return Var(name, struct_info=TensorStructInfo(shape, dtype))


def bindings(func: Function):
    return [b for block in func.body.blocks for b in block.bindings]


def test_names_are_unique_per_function():
    x = tvar("x", (2,))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        a = bb.emit(op.exp(x))
        b = bb.emit(op.exp(a))
        c = bb.emit(op.exp(b), "x")  # clashes with the parameter
        d = bb.emit(op.exp(c), "lv1")  # clashes with an emitted name
        bb.emit_func_output(d)
    names = [a.name_hint, b.name_hint, c.name_hint, d.name_hint]
    assert names[:2] == ["lv", "lv1"]
    assert len(set(names + ["x"])) == 5
    check_well_formed(bb.get())


def test_nested_calls_are_flattened_to_a_normal_form():
    x = tvar("x", (2, 3))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        out = bb.emit(op.add(op.exp(x), op.negative(op.exp(x))))
        bb.emit_func_output(out)
    func = bb.get()["main"]
    values = [b.value for b in bindings(func)]
    assert [v.op.name for v in values] == ["exp", "exp", "negative", "add"]
    for v in values:
        assert all(E.is_leaf(a) for a in v.args)
    assert func.ret_struct_info == TensorStructInfo((2, 3), "float32")
    check_well_formed(bb.get())


def test_tuple_fields_are_flattened_and_output_is_bound():
    x = tvar("x", (2,))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        t = bb.emit(Tuple([op.exp(x), x]))
        item = bb.emit(TupleGetItem(t, 0))
        bb.emit_func_output([item, op.exp(item)])  # a list becomes a tuple; non-leaf is bound
    func = bb.get()["main"]
    assert isinstance(func.body.body, Tuple)  # a tuple of leaves is itself a leaf
    assert all(isinstance(f, Var) for f in func.body.body.fields)
    assert func.ret_struct_info == TupleStructInfo([TensorStructInfo((2,), "float32")] * 2)
    assert item.struct_info == TensorStructInfo((2,), "float32")
    check_well_formed(bb.get())


def test_dataflow_block_and_outputs():
    x = tvar("x", (4,))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            lv = bb.emit(op.exp(x))
            gv = bb.emit_output(op.negative(lv))
            mc = bb.match_cast(lv, TensorStructInfo(ndim=1, dtype="float32"))
        after = bb.emit(op.exp(gv))
        bb.emit_func_output(after)
    assert isinstance(lv, DataflowVar) and isinstance(mc, DataflowVar)
    assert type(gv) is Var and type(after) is Var
    blocks = bb.get()["main"].body.blocks
    assert isinstance(blocks[0], DataflowBlock) and type(blocks[1]) is E.BindingBlock
    check_well_formed(bb.get())


def test_builder_misuse_raises():
    x = tvar("x", (4,))
    bb = BlockBuilder()
    with pytest.raises(WellFormedError, match="function\\(\\) scope"):
        bb.emit(op.exp(x))
    with bb.function("main", [x]):
        with pytest.raises(WellFormedError, match="emit_output is only valid inside a dataflow"):
            bb.emit_output(op.exp(x))
        with pytest.raises(WellFormedError, match="cannot nest"):
            with bb.function("inner", [x]):
                pass
        with bb.dataflow():
            with pytest.raises(WellFormedError, match="after the dataflow"):
                bb.emit_func_output(x)
        with pytest.raises(WellFormedError, match="parameters were given twice"):
            bb.emit_func_output(x, params=[x])
        bb.emit_func_output(x)
    with pytest.raises(WellFormedError, match="no parameter list"):
        with bb.function("noparams"):
            bb.emit_func_output(x)


def test_params_may_be_given_at_the_end():
    x = tvar("x", (4,))
    bb = BlockBuilder()
    with bb.function("main"):
        y = bb.emit(op.exp(x))
        bb.emit_func_output(y, params=x)
    assert bb.get()["main"].params == (x,)


def test_leaving_a_function_scope_without_output_is_an_error():
    x = tvar("x", (4,))
    bb = BlockBuilder()
    with pytest.raises(WellFormedError, match="'main'.*emit_func_output"):
        with bb.function("main", [x]):
            bb.emit(op.exp(x))
    assert "main" not in bb.get()
    # an exception raised inside the scope is not masked by that check
    with pytest.raises(ZeroDivisionError):
        with bb.function("other", [x]):
            1 / 0  # noqa: B018


def test_match_cast_defines_new_symbolic_vars():
    x = Var("x", struct_info=TensorStructInfo(ndim=2, dtype="float32"))
    m, k = prim.PrimVar("m"), prim.PrimVar("k")
    bb = BlockBuilder()
    with bb.function("main", [x]):
        y = bb.match_cast(x, TensorStructInfo((m, k), "float32"))
        z = bb.emit(op.add(y, y))
        bb.emit_func_output(z)
    assert z.struct_info.shape == (m, k)
    # m and k are defined inside the body, so the signature keeps only rank and dtype
    assert bb.get()["main"].ret_struct_info == TensorStructInfo(ndim=2, dtype="float32")
    mc = bindings(bb.get()["main"])[0]
    assert isinstance(mc, MatchCast) and mc.var is y
    check_well_formed(bb.get())


def test_impossible_match_cast_is_rejected():
    x = tvar("x", (2, 3))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with pytest.raises(StructInfoError, match="can never succeed"):
            bb.match_cast(x, TensorStructInfo((2, 4), "float32"))
        with pytest.raises(StructInfoError, match="can never succeed"):
            bb.match_cast(x, ShapeStructInfo(ndim=2))
        bb.emit_func_output(x)


def test_functions_call_each_other_with_specialised_struct_info():
    n = prim.PrimVar("n")
    p = tvar("p", (n, 4))
    bb = BlockBuilder()
    with bb.function("double", [p]):
        out = bb.emit(op.add(p, p))
        bb.emit_func_output(Tuple([out, E.ShapeExpr((n * 2,))]))
    gv = bb.get().get_global_var("double")
    assert isinstance(gv, GlobalVar)
    x = tvar("x", (8, 4))
    with bb.function("main", [x]):
        r = bb.emit(Call(gv, [x]))
        first = bb.emit(TupleGetItem(r, 0))
        bb.emit_func_output(first)
    mod = bb.get()
    assert r.struct_info == TupleStructInfo(
        [TensorStructInfo((8, 4), "float32"), ShapeStructInfo((16,))]
    )
    assert mod["main"].ret_struct_info == TensorStructInfo((8, 4), "float32")
    check_well_formed(mod)


def test_call_by_bare_global_var_uses_the_module():
    x = tvar("x", (3,))
    bb = BlockBuilder()
    with bb.function("f", [x]):
        bb.emit_func_output(bb.emit(op.exp(x)))
    y = tvar("y", (3,))
    with bb.function("main", [y]):
        r = bb.emit(Call(GlobalVar("f"), [y]))
        bb.emit_func_output(r)
    assert r.struct_info == TensorStructInfo((3,), "float32")


def test_bad_calls_between_functions():
    x = tvar("x", (3,))
    bb = BlockBuilder()
    with bb.function("f", [x]):
        bb.emit_func_output(x)
    gv = bb.get().get_global_var("f")
    with bb.function("main", [x]):
        with pytest.raises(StructInfoError, match="passes 2 argument\\(s\\) to a function of 1"):
            bb.emit(Call(gv, [x, x]))
        with pytest.raises(StructInfoError, match="unknown function 'nope'"):
            bb.emit(Call(GlobalVar("nope"), [x]))
        bb.emit_func_output(x)


def test_if_branches_via_nested_scopes():
    x = tvar("x", (2,))
    c = Var("c", struct_info=PrimStructInfo("bool"))
    bb = BlockBuilder()
    with bb.function("main", [x, c]):
        bb.begin_scope()
        t = bb.emit(op.exp(x))
        then_seq = bb.end_scope(t)
        bb.begin_scope()
        f = bb.emit(op.negative(x))
        else_seq = bb.end_scope(f)
        r = bb.emit(If(c, then_seq, else_seq))
        bb.emit_func_output(r)
    assert isinstance(then_seq, SeqExpr) and len(then_seq.blocks) == 1
    assert r.struct_info == TensorStructInfo((2,), "float32")
    check_well_formed(bb.get())


def test_get_returns_a_snapshot_and_add_func_renames():
    x = tvar("x", (2,))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(x)
    snap = bb.get()
    func = snap["main"]
    gv = bb.add_func(func, "main")
    assert gv.name_hint == "main1" and "main1" not in snap
    bb.update_func("main", Function([x], SeqExpr([], op.exp(x))))
    assert snap["main"] is func and bb.module["main"] is not func


def test_builder_extends_an_existing_module():
    x = tvar("x", (2,))
    base = BlockBuilder()
    with base.function("f", [x]):
        base.emit_func_output(x)
    mod = base.get()
    bb = BlockBuilder(mod)
    y = tvar("y", (2,))
    with bb.function("main", [y]):
        bb.emit_func_output(bb.emit(Call(GlobalVar("f"), [y])))
    assert set(bb.get().functions) == {"f", "main"} and set(mod.functions) == {"f"}
    assert isinstance(bb.get(), IRModule)


def test_symbolic_vars_defined_in_a_branch_do_not_leave_it():
    x = Var("x", struct_info=TensorStructInfo(ndim=1, dtype="float32"))
    c = Var("c", struct_info=PrimStructInfo("bool"))
    m = prim.PrimVar("m")
    bb = BlockBuilder()
    with bb.function("main", [x, c]):
        bb.begin_scope()
        y = bb.match_cast(x, TensorStructInfo((m,), "float32"))
        then_seq = bb.end_scope(bb.emit(op.exp(y)))
        bb.begin_scope()
        else_seq = bb.end_scope(x)
        r = bb.emit(If(c, then_seq, else_seq))
        bb.emit_func_output(r)
    assert then_seq.body.struct_info.shape == (m,)
    assert then_seq.struct_info == TensorStructInfo(ndim=1, dtype="float32")
    assert r.struct_info == TensorStructInfo(ndim=1, dtype="float32")
    check_well_formed(bb.get())
