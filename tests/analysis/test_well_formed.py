"""Each well-formedness rule: one program that keeps it, one that breaks it."""

import pytest

import hetvm.op as op
from hetvm.analysis import check_well_formed, well_formed
from hetvm.errors import HetvmError, WellFormedError
from hetvm.ir import (
    BindingBlock,
    BlockBuilder,
    Call,
    DataflowBlock,
    DataflowVar,
    ExternFunc,
    Function,
    GlobalVar,
    If,
    IRModule,
    MatchCast,
    ObjectStructInfo,
    PrimStructInfo,
    SeqExpr,
    ShapeExpr,
    ShapeStructInfo,
    TensorStructInfo,
    Tuple,
    Var,
    VarBinding,
    VDevice,
    prim,
)

F2 = TensorStructInfo((2,), "float32")
CUDA = VDevice("cuda", 0)


def tv(name, sinfo=F2):
    return Var(name, struct_info=sinfo)


def dv(name, sinfo=F2):
    return DataflowVar(name, struct_info=sinfo)


def fn(params, blocks, body, **kw):
    return Function(params, SeqExpr(blocks, body), **kw)


def mod_of(*named, vdevices=None):
    infos = {"vdevice": vdevices} if vdevices is not None else {}
    return IRModule(dict(named), infos)


def bind(var, value):
    return VarBinding(var, value)


def assert_bad(mod_or_func, *fragments, **kw):
    assert not well_formed(mod_or_func, **kw)
    with pytest.raises(WellFormedError) as info:
        check_well_formed(mod_or_func, **kw)
    for frag in fragments:
        assert frag in str(info.value), (frag, str(info.value))
    return str(info.value)


def assert_good(mod_or_func, **kw):
    check_well_formed(mod_or_func, **kw)
    assert well_formed(mod_or_func, **kw)


# -- a realistic module built with the BlockBuilder is well formed --------------


def test_builder_output_is_well_formed():
    n = prim.PrimVar("n")
    x = tv("x", TensorStructInfo((n, 4), "float32", vdevice=CUDA))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(op.exp(x))
            b = bb.emit_output(op.add(a, x))
        s = bb.emit(ShapeExpr((n * 2, 2)))
        bb.emit_func_output(Tuple([b, s]))
    mod = bb.get().with_global_infos(vdevice=[CUDA])
    assert_good(mod)


def test_error_names_function_and_binding():
    x, y, z = tv("x"), tv("y"), tv("z")
    f = fn([x], [BindingBlock([bind(z, op.add(x, y))])], z)
    text = assert_bad(mod_of(("main", f)), "function 'main'", "z", "'y'", "not defined")
    assert "R.add(x, y)" in text


def test_only_modules_and_functions_are_checked():
    with pytest.raises(WellFormedError, match="IRModule or a Function"):
        check_well_formed(42)  # type: ignore[arg-type]
    assert issubclass(WellFormedError, HetvmError)


# -- SSA --------------------------------------------------------------------------


def test_ssa_var_bound_twice():
    x, y = tv("x"), tv("y")
    good = fn([x], [BindingBlock([bind(y, op.exp(x))])], y)
    assert_good(good)
    bad = fn([x], [BindingBlock([bind(y, op.exp(x)), bind(y, op.exp(x))])], y)
    assert_bad(bad, "'y' is bound twice")
    rebinds_param = fn([x], [BindingBlock([bind(x, op.exp(x))])], x)
    assert_bad(rebinds_param, "'x' is bound twice")


def test_ssa_across_functions():
    x, y = tv("x"), tv("y")
    f = fn([x], [], x)
    g = fn([y], [], y)
    assert_good(mod_of(("f", f), ("g", g)))
    shared = fn([x], [], x)
    assert_bad(mod_of(("f", f), ("g", shared)), "'x' is bound twice", "in function 'f'")


# -- defined before use, scoping -----------------------------------------------------


def test_use_before_definition():
    x, a, b = tv("x"), tv("a"), tv("b")
    good = fn([x], [BindingBlock([bind(a, op.exp(x)), bind(b, op.exp(a))])], b)
    assert_good(good)
    bad = fn([x], [BindingBlock([bind(b, op.exp(a)), bind(a, op.exp(x))])], b)
    assert_bad(bad, "'a' is used but not defined")
    undefined_result = fn([x], [], tv("ghost"))
    assert_bad(undefined_result, "'ghost'", "result")


def _if_program(*, true_reads_sibling=False, escape=False):
    x, c = tv("x"), tv("c", PrimStructInfo("bool"))
    t, f, r, after = tv("t"), tv("f"), tv("r"), tv("after")
    false_value = op.exp(t) if true_reads_sibling else op.negative(x)
    tb = SeqExpr([BindingBlock([bind(t, op.exp(x))])], t)
    fb = SeqExpr([BindingBlock([bind(f, false_value)])], f)
    tail = op.add(r, t) if escape else op.add(r, x)
    blocks = [BindingBlock([bind(r, If(c, tb, fb, struct_info=F2)), bind(after, tail)])]
    return fn([x, c], blocks, after)


def test_if_branches_see_outer_vars_only():
    assert_good(_if_program())
    assert_bad(_if_program(true_reads_sibling=True), "'t' is used outside the scope")
    assert_bad(_if_program(escape=True), "'t' is used outside the scope", "after")


def test_if_condition_must_be_a_scalar():
    x, r = tv("x"), tv("r")
    tb, fb = SeqExpr([], x), SeqExpr([], x)
    good = fn([x, c := tv("c", TensorStructInfo((), "bool"))], [BindingBlock([bind(r, If(c, tb, fb, struct_info=F2))])], r)
    assert_good(good)
    vec = tv("v", TensorStructInfo((2,), "bool"))
    bad = fn([x, vec], [BindingBlock([bind(r, If(vec, tb, fb, struct_info=F2))])], r)
    assert_bad(bad, "If condition must be a scalar")


# -- dataflow vars --------------------------------------------------------------------


def test_dataflow_var_stays_in_its_block():
    x, lv, gv = tv("x"), dv("lv"), tv("gv")
    good = fn([x], [DataflowBlock([bind(lv, op.exp(x)), bind(gv, op.exp(lv))])], gv)
    assert_good(good)
    escapes = fn([x], [DataflowBlock([bind(lv, op.exp(x))])], lv)
    assert_bad(escapes, "DataflowVar 'lv' is used outside the dataflow block")
    later = tv("later")
    escapes_to_binding = fn(
        [x], [DataflowBlock([bind(lv, op.exp(x))]), BindingBlock([bind(later, op.exp(lv))])], later
    )
    assert_bad(escapes_to_binding, "DataflowVar 'lv'", "later")


def test_dataflow_var_bound_outside_dataflow_block():
    x, lv = tv("x"), dv("lv")
    bad = fn([x], [BindingBlock([bind(lv, op.exp(x))])], x)
    assert_bad(bad, "DataflowVar 'lv' is bound outside a dataflow block")
    bad_param = fn([dv("p")], [], tv("x"))
    assert_bad(bad_param, "parameter 'p'", "DataflowVar")


# -- purity -----------------------------------------------------------------------------


def _printer_call(arg):
    return Call(ExternFunc("print"), [arg], sinfo_args=[ObjectStructInfo()], struct_info=ObjectStructInfo())


def test_dataflow_block_holds_only_pure_calls():
    x, lv, o = tv("x"), dv("lv"), dv("o", ObjectStructInfo())
    assert_good(fn([x], [DataflowBlock([bind(lv, op.exp(x))])], x))
    bad = fn([x], [DataflowBlock([bind(o, _printer_call(x))])], x, is_pure=False)
    assert_bad(bad, "dataflow block calls 'print', which is impure")
    kill = Call(op.vm.kill_object(x).op, [x], struct_info=ObjectStructInfo())
    bad_op = fn([x], [DataflowBlock([bind(o, kill)])], x, is_pure=False)
    assert_bad(bad_op, "op 'vm.kill_object'", "impure")


def test_dataflow_block_may_not_call_an_impure_function():
    p, x, lv, r = tv("p"), tv("x"), dv("lv"), tv("r")
    effect = fn([p], [], p, is_pure=False)
    call = Call(GlobalVar("effect"), [x], struct_info=F2)
    bad = fn([x], [DataflowBlock([bind(lv, call)])], x, is_pure=False)
    assert_bad(mod_of(("effect", effect), ("main", bad)), "function 'effect'", "impure")
    ok = fn([x], [BindingBlock([bind(r, call)])], r, is_pure=False)
    assert_good(mod_of(("effect", effect), ("main", ok)))


def test_dataflow_block_may_not_hold_control_flow():
    x, c, lv = tv("x"), tv("c", PrimStructInfo("bool")), dv("lv")
    branch = If(c, SeqExpr([], x), SeqExpr([], x), struct_info=F2)
    bad = fn([x, c], [DataflowBlock([bind(lv, branch)])], x)
    assert_bad(bad, "control flow")


def test_pure_function_may_not_call_impure():
    x, o = tv("x"), tv("o", ObjectStructInfo())
    blocks = [BindingBlock([bind(o, _printer_call(x))])]
    assert_bad(fn([x], blocks, x), "pure function calls 'print'")
    assert_good(fn([x], blocks, x, is_pure=False))
    assert_good(fn([x], blocks, x, attrs={"relax.force_pure": True}))


# -- symbolic variables ----------------------------------------------------------------


def test_symbolic_vars_come_from_params():
    n, m = prim.PrimVar("n"), prim.PrimVar("m")
    x = tv("x", TensorStructInfo((n, 4), "float32"))
    s = tv("s", ShapeStructInfo((n * 2,)))
    assert_good(fn([x], [BindingBlock([bind(s, ShapeExpr((n * 2,)))])], s))
    s2 = tv("s2", ShapeStructInfo((m,)))
    assert_bad(fn([x], [BindingBlock([bind(s2, ShapeExpr((m,)))])], s2), "'m'", "not defined")
    y = tv("y", TensorStructInfo((n + 1,), "float32"))
    assert_bad(fn([y], [], y), "parameter 'y'", "symbolic variable 'n'")


def test_match_cast_defines_symbolic_vars():
    m = prim.PrimVar("m")
    x = tv("x", TensorStructInfo(ndim=1, dtype="float32"))
    y = tv("y", TensorStructInfo((m,), "float32"))
    z = tv("z", TensorStructInfo((m,), "float32"))
    mc = MatchCast(y, x, TensorStructInfo((m,), "float32"))
    assert_good(fn([x], [BindingBlock([mc, bind(z, op.exp(y))])], z))
    early = tv("early", ShapeStructInfo((m,)))
    used_first = [BindingBlock([bind(early, ShapeExpr((m,))), mc])]
    assert_bad(fn([x], used_first, x), "symbolic variable 'm'")


def test_match_cast_must_be_possible():
    x = tv("x", TensorStructInfo((2,), "float32"))
    y = tv("y", TensorStructInfo((3,), "float32"))
    bad = fn([x], [BindingBlock([MatchCast(y, x, TensorStructInfo((3,), "float32"))])], x)
    assert_bad(bad, "can never match")


# -- struct info consistency ------------------------------------------------------------


def test_binding_annotation_must_admit_value():
    x = tv("x")
    loose = tv("loose", TensorStructInfo(ndim=1, dtype="float32"))
    assert_good(fn([x], [BindingBlock([bind(loose, op.exp(x))])], loose))
    wrong = tv("wrong", TensorStructInfo((3,), "float32"))
    assert_bad(fn([x], [BindingBlock([bind(wrong, op.exp(x))])], wrong), "'wrong'", "does not admit")


def test_return_struct_info_must_admit_body():
    x = tv("x")
    assert_good(fn([x], [], x, ret_struct_info=TensorStructInfo(ndim=1)))
    assert_bad(fn([x], [], x, ret_struct_info=TensorStructInfo((5,), "float32")), "return")


def test_missing_struct_info():
    x, y = Var("x"), Var("y")
    f = fn([x], [BindingBlock([bind(y, x)])], y)
    assert_bad(f, "no struct info")
    assert_good(f, check_struct_info=False)


# -- A-normal form --------------------------------------------------------------------------


def test_call_arguments_are_leaves():
    x, y = tv("x"), tv("y")
    nested = Call(op.add(x, x).op, [op.exp(x), x], struct_info=F2)
    assert_bad(fn([x], [BindingBlock([bind(y, nested)])], y), "argument 0", "not a leaf")
    t = tv("t", ObjectStructInfo())
    tuple_of_leaves = Call(ExternFunc("k"), [Tuple([x, x])], struct_info=ObjectStructInfo())
    assert_good(fn([x], [BindingBlock([bind(t, tuple_of_leaves)])], x, is_pure=False))
    tup = tv("tup", ObjectStructInfo())
    bad_tuple = Tuple([op.exp(x)])
    assert_bad(fn([x], [BindingBlock([bind(tup, bad_tuple)])], x), "tuple field")


# -- vdevices ---------------------------------------------------------------------------------


def test_vdevices_must_be_declared():
    on_cuda = TensorStructInfo((2,), "float32", vdevice=CUDA)
    x, y = tv("x", on_cuda), tv("y", on_cuda)
    f = fn([x], [BindingBlock([bind(y, op.exp(x))])], y)
    assert_good(mod_of(("main", f), vdevices=[VDevice("llvm"), CUDA]))
    assert_bad(mod_of(("main", f), vdevices=[VDevice("llvm")]), "vdevice cuda:0", "not declared")
    assert_good(f)  # a lone function has no declarations to check against


def test_vdevice_in_call_attrs_must_be_declared():
    x, y = tv("x"), tv("y")
    moved = op.to_vdevice(x, CUDA)
    y = tv("y", moved.struct_info)
    f = fn([x], [BindingBlock([bind(y, moved)])], y)
    assert_good(mod_of(("main", f), vdevices=[CUDA]))
    other = VDevice("cuda", 1)
    sneaky = Call(moved.op, moved.args, {"dst_vdevice": other}, struct_info=moved.struct_info)
    y2 = tv("y2", moved.struct_info)
    g = fn([x], [BindingBlock([bind(y2, sneaky)])], y2)
    assert_bad(mod_of(("main", g), vdevices=[CUDA]), "cuda:1")


def test_global_infos_hold_vdevices():
    assert_bad(mod_of(vdevices=["cuda"]), "not a VDevice")


# -- global vars ------------------------------------------------------------------------------


def test_global_var_calls():
    p, x, r = tv("p"), tv("x"), tv("r")
    callee = fn([p], [], p)
    good = fn([x], [BindingBlock([bind(r, Call(GlobalVar("callee"), [x], struct_info=F2))])], r)
    assert_good(mod_of(("callee", callee), ("main", good)))
    r2 = tv("r2")
    unknown = fn([x], [BindingBlock([bind(r2, Call(GlobalVar("nope"), [x], struct_info=F2))])], r2)
    assert_bad(mod_of(("main", unknown)), "'nope'", "does not define")
    r3 = tv("r3")
    arity = fn([x], [BindingBlock([bind(r3, Call(GlobalVar("callee"), [x, x], struct_info=F2))])], r3)
    assert_bad(mod_of(("callee", callee), ("main", arity)), "passes 2 argument(s)", "takes 1")
