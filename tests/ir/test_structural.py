"""Structural equality and hashing: alpha-equivalence, differences, messages."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hetvm.op as op
from hetvm.ir import (
    BlockBuilder,
    Call,
    Constant,
    ExternFunc,
    IRModule,
    PrimStructInfo,
    PrimValue,
    ShapeExpr,
    TensorStructInfo,
    Tuple,
    Var,
    VDevice,
    assert_structural_equal,
    prim,
    structural_equal,
    structural_hash,
)

CUDA = VDevice("cuda", 0)


def build(
    *,
    x_name="x",
    shape=None,
    dtype="float32",
    vdevice=None,
    order=("exp", "negative"),
    clip_max=6.0,
    const_value=1.0,
    infos=None,
):
    """A small module; each keyword changes one aspect of it."""
    n = prim.PrimVar("n")
    x = Var(x_name, struct_info=TensorStructInfo(shape or (n, 4), dtype, vdevice=vdevice))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            made = {}
            for name in order:
                made[name] = bb.emit(getattr(op, name)(x))
            s = bb.emit(op.add(made["exp"], made["negative"]))
            c = bb.emit(op.clip(s, 0.0, clip_max))
            k = bb.emit(op.multiply(c, Constant(np.full((4,), const_value, dtype))))
            out = bb.emit_output(k)
        bb.emit_func_output(out)
    mod = bb.get()
    if infos is not None:
        mod = mod.with_global_infos(vdevice=infos)
    return mod


def test_alpha_equivalent_programs_are_equal_and_hash_equal():
    a, b = build(), build(x_name="renamed")
    assert structural_equal(a, b)
    assert_structural_equal(a, b)
    assert structural_hash(a) == structural_hash(b)


@pytest.mark.parametrize(
    "change",
    [
        {"shape": (8, 4)},
        {"dtype": "float64"},
        {"vdevice": CUDA},
        {"clip_max": 5.0},
        {"const_value": 2.0},
        {"order": ("negative", "exp")},
        {"infos": [CUDA]},
    ],
    ids=["shape", "dtype", "vdevice", "attr", "constant", "binding-order", "global-infos"],
)
def test_a_changed_detail_is_not_equal(change):
    a, b = build(), build(**change)
    assert not structural_equal(a, b)
    assert not structural_equal(b, a)
    with pytest.raises(AssertionError):
        assert_structural_equal(a, b)


def test_mismatch_message_has_path_and_both_sides():
    with pytest.raises(AssertionError) as info:
        assert_structural_equal(build(), build(clip_max=5.0))
    text = str(info.value)
    assert "['main']" in text and "attrs" in text and "['max']" in text
    assert "lhs: 6.0" in text and "rhs: 5.0" in text
    with pytest.raises(AssertionError) as info:
        assert_structural_equal(build(), build(dtype="float16"))
    text = str(info.value)
    assert "params[0]" in text and "dtypes differ" in text
    assert "float32" in text and "float16" in text


def test_variables_must_map_one_to_one():
    x = Var("x", struct_info=TensorStructInfo((2,), "float32"))
    y = Var("y", struct_info=TensorStructInfo((2,), "float32"))
    assert structural_equal(op.add(x, y), op.add(y, x))  # free vars map consistently
    assert not structural_equal(op.add(x, x), op.add(x, y))
    assert not structural_equal(op.add(x, y), op.add(x, x))


def test_map_free_vars_false_requires_the_same_free_vars():
    x = Var("x", struct_info=TensorStructInfo((2,), "float32"))
    y = Var("y", struct_info=TensorStructInfo((2,), "float32"))
    assert structural_equal(op.exp(x), op.exp(x), map_free_vars=False)
    assert not structural_equal(op.exp(x), op.exp(y), map_free_vars=False)
    n, m = prim.PrimVar("n"), prim.PrimVar("m")
    assert not structural_equal(
        TensorStructInfo((n,), "float32"), TensorStructInfo((m,), "float32"), map_free_vars=False
    )
    assert structural_equal(TensorStructInfo((n,), "float32"), TensorStructInfo((m,), "float32"))


def test_functions_bind_their_params_and_symbolic_vars():
    # separately built functions have their own `n`; parameters define them
    a, b = build()["main"], build()["main"]
    assert structural_equal(a, b, map_free_vars=False)


def test_free_vars_of_different_struct_info_differ():
    x = Var("x", struct_info=TensorStructInfo((2,), "float32"))
    y = Var("y", struct_info=TensorStructInfo((3,), "float32"))
    assert not structural_equal(x, y)
    assert not structural_equal(op.exp(x), op.exp(y))


def test_symbolic_shapes_compare_by_binding():
    n, m = prim.PrimVar("n"), prim.PrimVar("m")
    assert structural_equal(ShapeExpr((n, n + 1)), ShapeExpr((m, m + 1)))
    assert not structural_equal(ShapeExpr((n, n)), ShapeExpr((n, m)))
    assert not structural_equal(PrimValue(n * 2), PrimValue(n + 2))


def test_leaves_and_calls():
    assert structural_equal(ExternFunc("k"), ExternFunc("k"))
    assert not structural_equal(ExternFunc("k"), ExternFunc("j"))
    c1 = Constant(np.array([1.0, np.nan], "float32"))
    c2 = Constant(np.array([1.0, np.nan], "float32"))
    assert structural_equal(c1, c2) and structural_hash(c1) == structural_hash(c2)
    assert not structural_equal(c1, Constant(np.array([1.0, np.nan], "float64")))
    x = Var("x", struct_info=TensorStructInfo((2,), "float32"))
    s1 = TensorStructInfo((2,), "float32")
    s2 = TensorStructInfo((2,), "float16")
    assert not structural_equal(
        Call(ExternFunc("k"), [x], sinfo_args=[s1]), Call(ExternFunc("k"), [x], sinfo_args=[s2])
    )
    assert not structural_equal(Tuple([x]), Tuple([x, x]))


def test_negative_zero_equal_and_hash_equal():
    a = Constant(np.array([0.0, 1.0], "float32"))
    b = Constant(np.array([-0.0, 1.0], "float32"))
    assert structural_equal(a, b)
    assert structural_hash(a) == structural_hash(b)
    x = Var("x", struct_info=TensorStructInfo((2,), "float32"))
    c1, c2 = op.clip(x, 0.0, 1.0), op.clip(x, -0.0, 1.0)
    assert structural_equal(c1, c2)
    assert structural_hash(c1) == structural_hash(c2)


def test_modules_with_different_functions_differ():
    a = build()
    b = a.with_function("other", a["main"])
    assert not structural_equal(a, b)
    assert not structural_equal(a, a["main"])
    assert structural_equal(IRModule(), IRModule())


def test_prim_struct_info_and_purity():
    n = prim.PrimVar("n")
    assert not structural_equal(PrimStructInfo("int64", n), PrimStructInfo("int64"))
    f1, f2 = build()["main"], build()["main"]
    import dataclasses

    impure = dataclasses.replace(f2, is_pure=False, struct_info=None)
    assert not structural_equal(f1, impure)


# -- hashing agrees with equality on random programs --------------------------

UNARY = ("exp", "negative", "abs")
BINARY = ("add", "multiply")


@st.composite
def programs(draw):
    """A recipe: a dtype, a rank and a list of (op, operand indices)."""
    dtype = draw(st.sampled_from(["float32", "float16"]))
    rank = draw(st.integers(1, 2))
    steps = []
    for i in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            steps.append((draw(st.sampled_from(UNARY)), (draw(st.integers(0, i)),)))
        else:
            steps.append(
                (draw(st.sampled_from(BINARY)), (draw(st.integers(0, i)), draw(st.integers(0, i))))
            )
    return dtype, rank, tuple(steps)


def realise(recipe, param_name="x", dataflow=True):
    dtype, rank, steps = recipe
    n = prim.PrimVar("n")
    x = Var(param_name, struct_info=TensorStructInfo((n, 3)[:rank], dtype))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            values = [x]
            for name, idx in steps:
                values.append(bb.emit(getattr(op, name)(*[values[i] for i in idx])))
            out = bb.emit_output(values[-1])
        bb.emit_func_output(out)
    return bb.get()


@settings(max_examples=60, deadline=None)
@given(programs(), programs())
def test_hash_is_consistent_with_equality(r1, r2):
    a, a2 = realise(r1), realise(r1, param_name="y")
    assert structural_equal(a, a2)
    assert structural_hash(a) == structural_hash(a2)
    b = realise(r2)
    if structural_equal(a, b):
        assert structural_hash(a) == structural_hash(b)
    if r1 != r2:
        assert not structural_equal(a, b)
