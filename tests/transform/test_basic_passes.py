import hetvm.op as op
from hetvm.ir import (
    BindingBlock,
    DataflowBlock,
    DataflowVar,
    Function,
    IRModule,
    SeqExpr,
    TensorStructInfo,
    Var,
    VarBinding,
    assert_structural_equal,
    structural_equal,
)
from hetvm.transform import (
    BindingOrigin,
    CanonicalizeBindings,
    DeadCodeElimination,
    Normalize,
    PassContext,
    PassTimer,
    PrintIR,
    Sequential,
    ToNonDataflow,
)

T = TensorStructInfo((4, 8), "float32")


def _module(bindings, params, body, dataflow=False):
    block = (DataflowBlock if dataflow else BindingBlock)(tuple(bindings))
    return IRModule({"main": Function(tuple(params), SeqExpr((block,), body))})


def test_normalize_binds_nested_calls_in_order():
    x = Var("x", struct_info=T)
    out = Var("out", struct_info=T)
    nested = op.add(op.exp(x), op.negative(x))
    mod = _module([VarBinding(out, nested)], [x], out)
    new = Normalize()(mod)
    bindings = new["main"].body.blocks[0].bindings
    assert [b.value.op.name for b in bindings] == ["exp", "negative", "add"]
    assert bindings[2].value.args == (bindings[0].var, bindings[1].var)
    assert mod["main"].body.blocks[0].bindings[0].value is nested  # input untouched


def test_normalize_twice_is_once():
    x = Var("x", struct_info=T)
    out = Var("out", struct_info=T)
    mod = _module([VarBinding(out, op.add(op.exp(x), x))], [x], out)
    once = Normalize()(mod)
    assert_structural_equal(Normalize()(once), once)
    assert Normalize()(once) is once


def test_canonicalize_removes_trivial_rebindings():
    x = Var("x", struct_info=T)
    a = Var("a", struct_info=T)
    b = Var("b", struct_info=T)
    c = Var("c", struct_info=T)
    mod = _module([VarBinding(a, op.exp(x)), VarBinding(b, a), VarBinding(c, op.add(b, b))], [x], c)
    new = CanonicalizeBindings()(mod)
    bindings = new["main"].body.blocks[0].bindings
    assert len(bindings) == 2
    assert bindings[1].value.args == (bindings[0].var, bindings[0].var)


def test_canonicalize_keeps_dataflow_var_escape():
    x = Var("x", struct_info=T)
    lv = DataflowVar("lv", struct_info=T)
    gv = Var("gv", struct_info=T)
    mod = _module([VarBinding(lv, op.exp(x)), VarBinding(gv, lv)], [x], gv, dataflow=True)
    new = CanonicalizeBindings()(mod)
    assert len(new["main"].body.blocks[0].bindings) == 2


def test_dce_removes_dead_chain(two_inputs, build_main):
    x, y = two_inputs

    def body(bb, x, y):
        dead = bb.emit(op.exp(x))
        bb.emit(op.add(dead, dead))
        return op.add(x, y)

    mod = build_main([x, y], body)
    new = DeadCodeElimination()(mod)
    names = [b.value.op.name for b in new["main"].body.blocks[0].bindings]
    assert names == ["add"]


def test_dce_drops_unreachable_private_functions(two_inputs, build_main):
    x, y = two_inputs
    mod = build_main([x, y], lambda bb, x, y: op.add(x, y))
    helper = mod["main"]
    from hetvm.ir import Attrs
    from hetvm.ir.expr import replace

    mod = mod.with_function("unused", replace(helper, attrs=Attrs({"private": True})))
    mod = mod.with_function("public_helper", helper)
    new = DeadCodeElimination()(mod)
    assert set(new.functions) == {"main", "public_helper"}


def test_dce_entry_functions_spellings(two_inputs, build_main):
    """TVM's DeadCodeElimination(entry_functions=None) means the public functions;
    a named private function is kept as a root."""
    x, y = two_inputs
    mod = build_main([x, y], lambda bb, x, y: op.add(x, y))
    from hetvm.ir import Attrs
    from hetvm.ir.expr import replace

    mod = mod.with_function("kept", replace(mod["main"], attrs=Attrs({"private": True})))
    assert set(DeadCodeElimination(entry_functions=None)(mod).functions) == {"main"}
    assert set(DeadCodeElimination(entry_functions=["kept"])(mod).functions) == {"main", "kept"}


def test_to_non_dataflow(two_inputs, build_main):
    x, y = two_inputs
    mod = build_main([x, y], lambda bb, x, y: bb.emit(op.add(x, y)))
    new = ToNonDataflow()(mod)
    for block in new["main"].body.blocks:
        assert type(block) is BindingBlock
        for b in block.bindings:
            assert not isinstance(b.var, DataflowVar)
    assert not structural_equal(new, mod)


def test_instruments_time_print_and_origin(two_inputs):
    x, y = two_inputs
    out = Var("out", struct_info=T)
    mod = _module([VarBinding(out, op.add(op.exp(x), y))], [x, y], out)
    timer, origin, printed = PassTimer(), BindingOrigin(), []
    with PassContext(instruments=[timer, origin, PrintIR(["Normalize"], printer=printed.append)]):
        new = Sequential([Normalize(), ToNonDataflow()])(mod)
    assert [name for name, _ in timer.timings] == ["Normalize", "ToNonDataflow"]
    assert len(printed) == 1 and printed[0].startswith("# IR after Normalize")
    new_var = new["main"].body.blocks[0].bindings[0].var
    assert origin.pass_of(new_var) == "Normalize"
    assert origin.pass_of(out) == "<input>"


def test_disabled_pass_is_skipped(two_inputs):
    x, y = two_inputs
    out = Var("out", struct_info=T)
    mod = _module([VarBinding(out, op.add(op.exp(x), y))], [x, y], out)
    with PassContext(disabled_pass=["Normalize"]):
        assert Normalize()(mod) is mod
