"""KillAfterLastUse: TVM's semantics (the seed case) and hetvm's If/alias extensions."""

import numpy as np

import hetvm.op as op
from hetvm.ir import (
    BindingBlock,
    ExternFunc,
    Function,
    If,
    IRModule,
    SeqExpr,
    ShapeStructInfo,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
    VarBinding,
    assert_structural_equal,
    const,
)
from hetvm.ir.expr import shape
from hetvm.transform import KillAfterLastUse

T = TensorStructInfo((16, 32), "float32")
UNIT = TupleStructInfo([])


def _fn(bindings, params, body, pure=False):
    return IRModule({"main": Function(tuple(params), SeqExpr((BindingBlock(tuple(bindings)),), body), is_pure=pure)})


def _kill_names(mod):
    out = []
    for b in mod["main"].body.blocks[0].bindings:
        name = getattr(getattr(b.value, "op", None), "name", None)
        if name in ("memory.kill_tensor", "memory.kill_storage", "vm.kill_object"):
            out.append((name, b.value.args[0].name_hint))
    return out


def _seed():
    x = Var("x", struct_info=T)
    storage = Var("storage", struct_info=op.memory.alloc_storage(shape([2048]), 0, "global", "uint8").struct_info)
    alloc_storage = op.memory.alloc_storage(shape([2048]), 0, "global", "uint8")
    y = Var("y", struct_info=T)
    alloc_y = op.memory.alloc_tensor(storage, 0, shape([16, 32]), "float32")
    dummy = Var("_dummy", struct_info=UNIT)
    packed = op.call_packed("add_tensors", x, y, sinfo_args=[UNIT])
    z = Var("z", struct_info=T)
    add = op.add(x, y)
    return x, storage, alloc_storage, y, alloc_y, dummy, packed, z, add


def test_seed_case_matches_expected():
    x, storage, alloc_storage, y, alloc_y, dummy, packed, z, add = _seed()
    before = _fn(
        [VarBinding(storage, alloc_storage), VarBinding(y, alloc_y), VarBinding(dummy, packed), VarBinding(z, add)],
        [x],
        z,
    )
    u1, u2 = Var("_", struct_info=UNIT), Var("_", struct_info=UNIT)
    expected = _fn(
        [
            VarBinding(storage, alloc_storage),
            VarBinding(y, alloc_y),
            VarBinding(u1, op.memory.kill_storage(storage)),
            VarBinding(dummy, packed),
            VarBinding(z, add),
            VarBinding(u2, op.memory.kill_tensor(y)),
        ],
        [x],
        z,
    )
    after = KillAfterLastUse()(before)
    assert_structural_equal(after, expected)
    # idempotent
    assert_structural_equal(KillAfterLastUse()(after), expected)


def test_uses_through_trivial_rebinding_count_for_original():
    x = Var("x", struct_info=T)
    a, b, c = (Var(n, struct_info=T) for n in "abc")
    mod = _fn([VarBinding(a, op.exp(x)), VarBinding(b, a), VarBinding(c, op.add(b, x))], [x], c, pure=True)
    after = KillAfterLastUse()(mod)
    names = [getattr(bd.value, "op", None) for bd in after["main"].body.blocks[0].bindings]
    assert len(names) == 3  # b = a was dropped
    assert _kill_names(after) == [("memory.kill_tensor", "a")]


def test_left_alone_constants_shapes_params_outputs():
    x = Var("x", struct_info=T)
    c = Var("c", struct_info=T)
    s = Var("s", struct_info=ShapeStructInfo([16, 32]))
    a = Var("a", struct_info=T)
    out = Var("out", struct_info=T)
    mod = _fn(
        [
            VarBinding(c, const(np.zeros((16, 32), "float32"))),
            VarBinding(s, op.shape_of(x)),
            VarBinding(a, op.add(x, c)),
            VarBinding(out, op.reshape(a, s)),
        ],
        [x],
        out,
        pure=True,
    )
    assert _kill_names(KillAfterLastUse()(mod)) == [("memory.kill_tensor", "a")]


def test_tuples_and_objects_get_kill_object():
    x = Var("x", struct_info=T)
    t = Var("t", struct_info=TupleStructInfo([T, T]))
    o = Var("o", struct_info=op.call_packed("make", x).struct_info)
    first = Var("first", struct_info=T)
    r = Var("r", struct_info=UNIT)
    out = Var("out", struct_info=T)
    mod = _fn(
        [
            VarBinding(t, Tuple((x, x))),
            VarBinding(o, op.call_packed("make", x)),
            VarBinding(first, TupleGetItem(t, 0)),
            VarBinding(r, op.call_packed("use", first, o, sinfo_args=[UNIT])),
            VarBinding(out, op.exp(first)),
        ],
        [x],
        out,
    )
    kills = _kill_names(KillAfterLastUse()(mod))
    # t's field 0 is the parameter x: an alias of a parameter is never killed;
    # nor is o: the opaque packed function "make" may have returned x itself
    assert ("vm.kill_object", "t") in kills
    assert all(name not in ("first", "o") for _, name in kills)
    # made from a value of the function's own, the object is killed
    e = Var("e", struct_info=T)
    o2 = Var("o", struct_info=op.call_packed("make", e).struct_info)
    mod = _fn(
        [
            VarBinding(e, op.exp(x)),
            VarBinding(o2, op.call_packed("make", e)),
            VarBinding(r, op.call_packed("use", o2, sinfo_args=[UNIT])),
            VarBinding(out, op.exp(x)),
        ],
        [x],
        out,
    )
    kills = _kill_names(KillAfterLastUse()(mod))
    assert ("vm.kill_object", "o") in kills and ("memory.kill_tensor", "e") in kills


def test_if_outer_kills_and_branch_uses_count_at_if():
    """TVM 0.27 kills nothing here; hetvm kills a, b, y, z after their last uses."""
    x = Var("x", struct_info=T)
    cond = Var("cond", struct_info=TensorStructInfo((), "bool"))
    a, b, y, z, u = (Var(n, struct_info=T) for n in "abyzu")
    t1 = Var("t1", struct_info=T)
    e1 = Var("e1", struct_info=T)
    then_seq = SeqExpr((BindingBlock((VarBinding(t1, op.add(a, a)),)),), t1)
    else_seq = SeqExpr((BindingBlock((VarBinding(e1, op.multiply(x, x)),)),), e1)
    mod = _fn(
        [
            VarBinding(a, op.exp(x)),
            VarBinding(b, op.negative(x)),
            VarBinding(y, If(cond, then_seq, else_seq)),
            VarBinding(z, op.add(y, b)),
            VarBinding(u, op.add(z, z)),
        ],
        [x, cond],
        u,
        pure=True,
    )
    after = KillAfterLastUse()(mod)
    bindings = after["main"].body.blocks[0].bindings
    order = [(getattr(bd.value, "op", None) and getattr(bd.value.op, "name", None), bd.var.name_hint, [getattr(a_, "name_hint", None) for a_ in getattr(bd.value, "args", ())]) for bd in bindings]
    kill_after = {}
    last = None
    for name, var, args in order:
        if name == "memory.kill_tensor":
            kill_after.setdefault(last, []).append(args[0])
        else:
            last = var
    assert kill_after == {"y": ["a"], "z": ["b", "y"], "u": ["z"]}
    # the branch result t1 is not killed inside the branch
    if_value = next(bd.value for bd in bindings if isinstance(bd.value, If))
    assert len(if_value.true_branch.blocks[0].bindings) == 1


def test_call_packed_result_unused_not_killed():
    x = Var("x", struct_info=T)
    r = Var("r", struct_info=UNIT)
    mod = _fn([VarBinding(r, op.call_packed(ExternFunc("side_effect"), x, sinfo_args=[UNIT]))], [x], x)
    assert _kill_names(KillAfterLastUse()(mod)) == []


def test_opaque_packed_result_may_be_its_argument():
    """A user packed function may return its argument: the argument then lives as
    long as the result (here: the result is the output, so the argument stays)."""
    x = Var("x", struct_info=T)
    a = Var("a", struct_info=T)
    out = Var("out", struct_info=T)
    mod = _fn(
        [VarBinding(a, op.exp(x)), VarBinding(out, op.call_packed("maybe_identity", a, sinfo_args=[T]))],
        [x],
        out,
    )
    assert _kill_names(KillAfterLastUse()(mod)) == []


def _kills_by_frame(seq, out, where="body"):
    for block in seq.blocks:
        for b in block.bindings:
            v = b.value
            name = getattr(getattr(v, "op", None), "name", None)
            if name in ("memory.kill_tensor", "memory.kill_storage", "vm.kill_object"):
                out.setdefault(where, []).append(v.args[0].name_hint)
            if isinstance(v, If):
                _kills_by_frame(v.true_branch, out, "then")
                _kills_by_frame(v.false_branch, out, "else")
    return out


def test_a_loop_kills_an_iteration_values_in_it_and_never_what_it_passes_on():
    from hetvm.pipeline import lower
    from hetvm.script import from_source
    from hetvm.testing.loop_programs import counting_loop

    low = lower(from_source(counting_loop(8)), target="llvm")
    kills = _kills_by_frame(low["loop"].body, {})
    # the product t is made and dies in the iteration (in the branch that makes it)
    assert "t" in kills["then"]
    # the new accumulator a and counter j go to the next iteration: no kill anywhere
    everywhere = [n for names in kills.values() for n in names]
    assert "a" not in everywhere and "j" not in everywhere
    # nor are the values the iteration received (they belong to the one before)
    assert not {"acc", "i", "e", "trips"} & set(everywhere)
