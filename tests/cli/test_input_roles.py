"""Roles of integer inputs (hetvm.cli_support.input_roles) and the random inputs they give."""

from __future__ import annotations

import numpy as np

import hetvm.op as R
from hetvm.cli_support.input_roles import input_roles
from hetvm.cli_support.inputs import choose_dims, make_inputs, parse_shapes
from hetvm.ir import BlockBuilder, TensorStructInfo, Var
from hetvm.ir import expr as E
from hetvm.ir import prim as P


def _program():
    """ids -> astype -> reshape -> take (5 rows) and take (2 rows); keep -> where; count unused."""
    n, s = P.PrimVar("n"), P.PrimVar("s")
    ids = Var("ids", struct_info=TensorStructInfo((n, s), "int64"))
    keep = Var("keep", struct_info=TensorStructInfo((n, s), "int32"))
    count = Var("count", struct_info=TensorStructInfo((n,), "int64"))
    bb = BlockBuilder()
    table = E.Constant(np.arange(15, dtype="float32").reshape(5, 3))
    small = E.Constant(np.arange(6, dtype="float32").reshape(2, 3))
    with bb.function("main", [ids, keep, count]):
        i32 = bb.emit(R.astype(ids, "int32"))
        flat = bb.emit(R.reshape(i32, (n * s,)))
        emb = bb.emit(R.take(table, flat, axis=0))
        emb2 = bb.emit(R.take(small, ids, axis=0))
        cond = bb.emit(R.astype(keep, "bool"))
        picked = bb.emit(R.where(cond, R.astype(ids, "float32"), E.Constant(np.array(0.0, "float32"))))
        bb.emit_func_output((emb, emb2, picked, count))
    return bb.get()["main"]


def test_indices_are_bounded_by_the_smallest_table_and_masks_found_by_use():
    roles = input_roles(_program())
    assert roles["ids"].kind == "index" and roles["ids"].bound == 2  # the 2-row table wins
    assert roles["keep"].kind == "mask" and "where" in roles["keep"].why
    assert "count" not in roles


def test_random_inputs_follow_the_roles():
    func = _program()
    env, notes = choose_dims(func.params, dims={"n": 64, "s": 32})
    args, made = make_inputs(list(func.params), env=env, roles=input_roles(func))
    ids, keep, count = args
    assert ids.shape == (64, 32) and ids.min() >= 0 and ids.max() == 1  # below 2, and both values drawn
    assert set(np.unique(keep)) == {0, 1} and (keep[:, 0] == 1).all()  # 1s first, never all padding
    assert count.max() <= 3  # no role: the plain small range
    assert notes == ["dim 'n' = 64 (--dim n=64)", "dim 's' = 32 (--dim s=32)"]
    assert any("in [0, 2)" in m for m in made)


def test_default_dims_name_their_reason():
    x = Var("x", struct_info=TensorStructInfo((P.PrimVar("N"), 3, P.PrimVar("h")), "float32"))
    y = Var("y", struct_info=TensorStructInfo((P.PrimVar("t"), 4), "float32"))
    env, notes = choose_dims([x, y])
    assert sorted(env.values()) == [1, 1, 8]
    assert notes == [
        "dim 'N' = 1 (default for a batch dim; set with --dim N=N)",
        "dim 'h' = 8 (default; set with --dim h=N)",
        "dim 't' = 1 (default for axis 0 of 'y'; set with --dim t=N)",
    ]


def test_shape_accepts_x_and_commas():
    assert parse_shapes(["a=1x128", "b=2,3", "c=batchx8"]) == {"a": [1, 128], "b": [2, 3], "c": ["batch", 8]}


def test_a_dim_broadcast_against_others_is_chosen_equal_to_them():
    """A KV-cached decoder: the mask's length is the past plus the new tokens."""
    from hetvm.cli_support.input_roles import broadcast_pairs

    b, s, past, total = (P.PrimVar(n) for n in ("batch", "seq", "past", "total"))
    x = Var("x", struct_info=TensorStructInfo((b, s, 4), "float32"))
    cache = Var("cache", struct_info=TensorStructInfo((b, past, 4), "float32"))
    mask = Var("mask", struct_info=TensorStructInfo((b, total), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x, cache, mask]):
        kv = bb.emit(R.concat((cache, x), axis=1))
        summed = bb.emit(R.sum(kv, axis=[2]))
        bb.emit_func_output(bb.emit(R.add(summed, mask)))
    func = bb.get()["main"]
    pairs = broadcast_pairs(func)
    assert [(P.to_str(a), P.to_str(c)) for a, c in pairs] == [("total", "past + seq")]
    env, notes = choose_dims(func.params, related=pairs)
    assert env[total] == env[past] + env[s] == 16
    assert "dim 'total' = 16 (equal to past + seq, which it is broadcast against; set with --dim total=N)" in notes
    env, _ = choose_dims(func.params, dims={"past": 3, "seq": 2}, related=pairs)
    assert env[total] == 5


def test_a_dim_indexed_at_arange_positions_is_chosen_that_long():
    """The dynamo export of a cached decoder reads its mask at arange(past + seq)."""
    from hetvm.cli_support.input_roles import index_extents

    b, s, past, t = (P.PrimVar(n) for n in ("batch", "seq", "past", "s22"))
    mask = Var("mask", struct_info=TensorStructInfo((b, t), "float32"))
    x = Var("x", struct_info=TensorStructInfo((b, s), "float32"))
    cache = Var("cache", struct_info=TensorStructInfo((b, past), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x, cache, mask]):
        pos = bb.emit(R.arange(0, past + s, 1, dtype="int64"))
        picked = bb.emit(R.take(mask, bb.emit(R.expand_dims(pos, axis=[0])), axis=1))
        bb.emit_func_output(picked)
    func = bb.get()["main"]
    extents = index_extents(func)
    assert [(d.name, P.to_str(n)) for d, n in extents] == [("s22", "past + seq")]
    env, notes = choose_dims(func.params, dims={"past": 4, "seq": 1}, extents=extents)
    assert env[t] == 5
    assert "dim 's22' = 5 (equal to past + seq, the positions it is indexed at; set with --dim s22=N)" in notes


def test_a_dim_named_as_a_sum_or_total_is_the_past_plus_the_sequence():
    def params(*names):
        dims = [P.PrimVar(n) for n in names]
        return [Var(f"p{i}", struct_info=TensorStructInfo((d,), "float32")) for i, d in enumerate(dims)], dims

    ps, (seq, past, total) = params("seq", "past", "total")
    env, notes = choose_dims(ps, dims={"seq": 3, "past": 6})
    assert env[total] == 9 and "dim 'total' = 9 (equal to past + seq, as its name says" in notes[2]
    ps, (a, b, summed) = params("sequence_length", "past_sequence_length", "past_sequence_length + sequence_length")
    env, _ = choose_dims(ps, dims={"sequence_length": 2, "past_sequence_length": 5})
    assert env[summed] == 7
    ps, dims = params("total", "t2")  # nothing to add up: a default
    env, _ = choose_dims(ps)
    assert env[dims[0]] == env[dims[1]] == 8
