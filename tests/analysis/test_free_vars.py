"""free_vars / bound_vars / all_vars / free_symbolic_vars / collect_uses."""

import hetvm.op as op
from hetvm.analysis import (
    all_vars,
    bound_vars,
    collect_uses,
    definable_symbolic_vars,
    free_symbolic_vars,
    free_vars,
    sinfo_symbolic_vars,
)
from hetvm.ir import (
    BindingBlock,
    BlockBuilder,
    FuncStructInfo,
    Function,
    If,
    MatchCast,
    PrimStructInfo,
    SeqExpr,
    ShapeExpr,
    ShapeStructInfo,
    TensorStructInfo,
    TupleStructInfo,
    Var,
    VarBinding,
    prim,
)

F2 = TensorStructInfo((2,), "float32")


def tv(name, sinfo=F2):
    return Var(name, struct_info=sinfo)


def test_free_and_bound_vars_of_a_call_and_a_function():
    x, y, z = tv("x"), tv("y"), tv("z")
    assert free_vars(op.add(x, y)) == [x, y]
    assert bound_vars(op.add(x, y)) == []
    f = Function([x], SeqExpr([BindingBlock([VarBinding(z, op.add(x, y))])], z))
    assert free_vars(f) == [y]
    assert bound_vars(f) == [x, z]
    assert all_vars(f) == [x, y, z]
    assert free_vars(f.body) == [x, y]


def test_vars_inside_if_branches():
    x, c, t, f, r = tv("x"), tv("c", PrimStructInfo("bool")), tv("t"), tv("f"), tv("r")
    tb = SeqExpr([BindingBlock([VarBinding(t, op.exp(x))])], t)
    fb = SeqExpr([BindingBlock([VarBinding(f, op.negative(x))])], f)
    branch = If(c, tb, fb, struct_info=F2)
    assert free_vars(branch) == [c, x]
    assert bound_vars(branch) == [t, f]
    func = Function([x, c], SeqExpr([BindingBlock([VarBinding(r, branch)])], r))
    uses = collect_uses(func)
    outer = func.body.blocks[0].bindings[0]
    assert uses[x] == [tb.blocks[0].bindings[0], fb.blocks[0].bindings[0]]
    assert uses[c] == [outer]
    assert uses[t] == [outer] and uses[f] == [outer]  # branch results are read by the If
    assert uses[r] == []  # read only by the function result


def test_collect_uses_lists_each_reader_once_in_order():
    x = tv("x")
    bb = BlockBuilder()
    with bb.function("main", [x]):
        a = bb.emit(op.add(x, x))
        b = bb.emit(op.multiply(a, x))
        bb.emit_func_output(b)
    func = bb.get()["main"]
    ba, bb_ = func.body.blocks[0].bindings
    uses = collect_uses(func)
    assert uses[x] == [ba, bb_]
    assert uses[a] == [bb_]
    assert uses[b] == []
    assert set(uses) == {x, a, b}


def test_symbolic_vars_of_struct_info():
    n, m = prim.PrimVar("n"), prim.PrimVar("m")
    s = TupleStructInfo([TensorStructInfo((n, m + 1), "float32"), PrimStructInfo("int64", m)])
    assert sinfo_symbolic_vars(s) == [n, m]
    assert definable_symbolic_vars(s) == [n, m]
    assert definable_symbolic_vars(TensorStructInfo((n + 1,), "float32")) == []
    fs = FuncStructInfo([TensorStructInfo((n,), "float32")], ShapeStructInfo((n,)))
    assert sinfo_symbolic_vars(fs) == [n]
    assert sinfo_symbolic_vars(fs, through_functions=False) == []


def test_free_symbolic_vars():
    n, m, k = prim.PrimVar("n"), prim.PrimVar("m"), prim.PrimVar("k")
    x = tv("x", TensorStructInfo((n, 4), "float32"))
    y = tv("y", TensorStructInfo((m, 4), "float32"))
    s = tv("s", ShapeStructInfo((n + k,)))
    blocks = [
        BindingBlock(
            [
                MatchCast(y, x, TensorStructInfo((m, 4), "float32")),
                VarBinding(s, ShapeExpr((n + k,))),
            ]
        )
    ]
    func = Function([x], SeqExpr(blocks, s))
    assert free_symbolic_vars(func) == [k]
    closed = Function([x], SeqExpr(blocks[:0], ShapeExpr((n * 2,))))
    assert free_symbolic_vars(closed) == []
