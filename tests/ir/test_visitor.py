"""ExprVisitor / ExprMutator: walking, identity on no change, re-inference, rewrites."""

import hetvm.op as op
from hetvm.analysis import check_well_formed
from hetvm.ir import (
    BlockBuilder,
    Call,
    ExprMutator,
    ExprVisitor,
    If,
    Op,
    PrimStructInfo,
    TensorStructInfo,
    TupleStructInfo,
    Var,
    VarBinding,
    assert_structural_equal,
    post_order_visit,
    prim,
)
from hetvm.ir import expr as E


def build_module(shape=None):
    n = prim.PrimVar("n")
    x = Var("x", struct_info=TensorStructInfo(shape or (n, 4), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(op.exp(x))
            b = bb.emit(op.negative(a))
            c = bb.emit(op.add(a, b))
            out = bb.emit_output(c)
        bb.emit_func_output(out)
    return bb.get()


def build_with_if():
    x = Var("x", struct_info=TensorStructInfo((2,), "float32"))
    c = Var("c", struct_info=PrimStructInfo("bool"))
    bb = BlockBuilder()
    with bb.function("main", [x, c]):
        bb.begin_scope()
        t = bb.end_scope(bb.emit(op.exp(x)))
        bb.begin_scope()
        f = bb.end_scope(bb.emit(op.negative(x)))
        r = bb.emit(If(c, t, f))
        bb.emit_func_output(r)
    return bb.get()


def op_names(func):
    return [
        b.value.op.name
        for block in func.body.blocks
        for b in block.bindings
        if isinstance(b.value, Call)
    ]


def test_visitor_sees_every_node():
    mod = build_with_if()
    seen = []
    post_order_visit(mod["main"], lambda e: seen.append(type(e).__name__))
    assert seen[-1] == "Function"
    assert seen.count("Call") == 2 and seen.count("If") == 1 and seen.count("SeqExpr") == 3

    class Defs(ExprVisitor):
        def __init__(self):
            self.defs = []

        def visit_var_def(self, var):
            self.defs.append(var.name_hint)

    v = Defs()
    v.visit_expr(mod["main"])
    assert v.defs[:2] == ["x", "c"] and len(v.defs) == 5


def test_mutator_that_changes_nothing_returns_the_same_objects():
    mod = build_module()
    assert ExprMutator().visit_module(mod) is mod
    func = mod["main"]
    assert ExprMutator(mod).visit_expr(func) is func
    mod2 = build_with_if()
    assert ExprMutator().visit_module(mod2) is mod2


class ExpToSqrt(ExprMutator):
    def visit_call(self, call):
        call = super().visit_call(call)
        if isinstance(call, Call) and call.op is Op.get("exp"):
            return op.sqrt(call.args[0])
        return call


def test_rewrite_keeps_untouched_parts_and_input():
    mod = build_module()
    before = mod["main"]
    new = ExpToSqrt().visit_module(mod)
    assert new is not mod and mod["main"] is before  # the input is not mutated
    assert op_names(new["main"]) == ["sqrt", "negative", "add"]
    assert op_names(before) == ["exp", "negative", "add"]
    check_well_formed(new)


def test_changed_struct_info_is_reinferred_and_vars_renewed():
    n = prim.PrimVar("n")
    mod = build_module((n, 4))
    old_x = mod["main"].params[0]
    new_x = Var("x", struct_info=TensorStructInfo((8, 4), "float32"))

    class Specialise(ExprMutator):
        def visit_var_def(self, var):
            if var is old_x:
                self.var_remap[var] = new_x
                return new_x
            return var

    new = Specialise().visit_module(mod)
    func = new["main"]
    assert func.params == (new_x,)
    bindings = [b for block in func.body.blocks for b in block.bindings]
    old_bindings = [b for block in mod["main"].body.blocks for b in block.bindings]
    for b, old in zip(bindings, old_bindings):
        assert b.var is not old.var and b.var.name_hint == old.var.name_hint
        assert b.var.struct_info == TensorStructInfo((8, 4), "float32")
    # the signature is re-derived: the old one named the now-undefined n
    assert func.ret_struct_info == TensorStructInfo((8, 4), "float32")
    check_well_formed(new)
    assert_structural_equal(new, build_module((8, 4)))


def test_mutator_can_drop_and_add_bindings():
    mod = build_module()

    class DropNegAddExp(ExprMutator):
        def visit_var_binding(self, binding):
            value = binding.value
            if isinstance(value, Call) and value.op is Op.get("negative"):
                # replace `b = negative(a)` by two bindings computing exp(exp(a))
                first = self.emit(op.exp(self.visit_expr(binding.value.args[0])), "t", dataflow=True)
                self.var_remap[binding.var] = self.emit(op.exp(first), "t", dataflow=True)
                return
            super().visit_var_binding(binding)

    new = DropNegAddExp().visit_module(mod)
    assert op_names(new["main"]) == ["exp", "exp", "exp", "add"]
    names = [b.var.name_hint for block in new["main"].body.blocks for b in block.bindings]
    assert len(set(names)) == len(names) and "t" in names and "t1" in names
    check_well_formed(new)

    class DropAll(ExprMutator):
        def visit_binding(self, binding):
            self.var_remap[binding.var] = mod["main"].params[0]

    emptied = DropAll().visit_module(mod)
    assert emptied["main"].body.blocks == ()
    check_well_formed(emptied)


def test_mutator_rewrites_inside_if_branches():
    mod = build_with_if()
    new = ExpToSqrt().visit_module(mod)
    if_binding = new["main"].body.blocks[0].bindings[0]
    assert isinstance(if_binding, VarBinding) and isinstance(if_binding.value, If)
    assert if_binding.value.true_branch.blocks[0].bindings[0].value.op is Op.get("sqrt")
    assert if_binding.value.false_branch is mod["main"].body.blocks[0].bindings[0].value.false_branch
    check_well_formed(new)


def test_tuple_get_item_of_a_rewritten_tuple_folds():
    x = Var("x", struct_info=TensorStructInfo((2,), "float32"))
    t = Var("t", struct_info=TupleStructInfo([x.struct_info]))
    m = ExprMutator()
    m.var_remap[t] = E.Tuple([x])
    assert m.visit_expr(E.TupleGetItem(t, 0)) is x


def test_a_pinned_vdevice_survives_retyping_upstream():
    """A rewrite upstream whose inferred struct info gains a vdevice retypes every
    later binding; a binding annotated with another vdevice (a user's pin) keeps
    it, so the device planner still sees the pin."""
    from hetvm.ir import VDevice

    sim, cpu = VDevice("sim", 0), VDevice("llvm", 0)
    x = Var("x", struct_info=TensorStructInfo((2, 3), "float32", vdevice=sim))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        a = Var("a", struct_info=TensorStructInfo((2, 3), "float32"))  # no vdevice yet
        bb.emit_binding(VarBinding(a, op.exp(x)))
        b = Var("b", struct_info=TensorStructInfo((2, 3), "float32"))
        bb.emit_binding(VarBinding(b, op.negative(a)))
        pinned = Var("pinned", struct_info=TensorStructInfo((2, 3), "float32", vdevice=cpu))
        bb.emit_binding(VarBinding(pinned, op.add(b, b)))
        bb.emit_func_output(pinned)
    mod = bb.get()
    new = ExpToSqrt().visit_module(mod)
    bindings = [b for block in new["main"].body.blocks for b in block.bindings]
    assert bindings[0].var.struct_info.vdevice == sim  # retyped from sqrt(x)
    assert bindings[-1].var.struct_info.vdevice == cpu
