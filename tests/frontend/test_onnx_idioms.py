"""The shape idioms today's exporters write, each as a small hand-built graph.

Found by exporting models (tests/frontend/exported/, tools/export_models.py):
the legacy torch exporter's ``Where(Equal(shape, -1), 1, shape)`` before an
Expand, ``past_len + arange`` (a 0-d shape value used as a tensor), Slice ends
at a sentinel past the dim, Paddle's ``?`` dims, Max of shape values, and the
constant folding of T5's log(0) without NumPy warnings. Each runs on the VM and
matches onnx.reference at two sizes of its symbolic dims.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import hetvm  # noqa: E402
from hetvm.frontend import from_onnx  # noqa: E402
from hetvm.ir import prim as P  # noqa: E402

I64 = TensorProto.INT64


def _c(name: str, values, dtype=np.int64):
    arr = np.asarray(values, dtype=dtype)
    return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(arr, name))


def _vm(mod):
    return hetvm.VirtualMachine(hetvm.build(mod, target="llvm"), hetvm.cpu(0))


def _check_at(kit, model, feeds_list):
    """One executable, several input sizes, each against onnx.reference."""
    vm = _vm(from_onnx(model))
    for feeds in feeds_list:
        got = vm["main"](*feeds.values())
        got = [g.numpy() for g in got] if isinstance(got, (list, tuple)) else [got.numpy()]
        for g, e in zip(got, kit.reference(model, feeds)):
            assert g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=1e-6)


def test_expand_to_where_equal_minus_one_folds_to_the_input_dims(kit):
    """x.expand(batch, -1, -1) as the legacy exporter writes it: the shape is
    Where(Equal(s, -1), ones, s) with s = [batch, -1, -1]; dims are never -1, so
    Equal folds to [False, True, True] and the Expand's target is (batch, 1, 1)."""
    nodes = [
        helper.make_node("Shape", ["x"], ["sx"]),
        _c("i0", 0), helper.make_node("Gather", ["sx", "i0"], ["b"], axis=0),
        _c("ax", [0]), helper.make_node("Unsqueeze", ["b", "ax"], ["b1"]),
        _c("m1", [-1, -1]), helper.make_node("Concat", ["b1", "m1"], ["s"], axis=0),
        _c("three", [3]), helper.make_node("ConstantOfShape", ["three"], ["ones"],
                                           value=helper.make_tensor("v", I64, [1], [1])),
        _c("neg", -1), helper.make_node("Mul", ["ones", "neg"], ["negs"]),
        helper.make_node("Equal", ["s", "negs"], ["eq"]),
        helper.make_node("Where", ["eq", "ones", "s"], ["target"]),
        helper.make_node("Expand", ["cls", "target"], ["y"]),
    ]  # fmt: skip
    cls = np.arange(8, dtype=np.float32).reshape(1, 1, 8)
    model = kit.model(nodes, {"x": ("float32", ["batch", 4, 8])}, ["y"], {"cls": cls})
    mod = from_onnx(model)
    (ret,) = [mod["main"].ret_struct_info]
    assert P.to_str(ret.shape[0]) == "batch" and [P.const_value(d) for d in ret.shape[1:]] == [1, 8]
    _check_at(kit, model, [{"x": np.zeros((n, 4, 8), np.float32)} for n in (1, 3)])


def test_expand_to_a_shape_dim_that_is_one_at_run_time_keeps_the_static_dim(kit):
    """Expand's broadcast is two-way: a (4, 8) tensor expanded to Shape(x) =
    (1, n) stays (4, 8) wide when n is 1 at run time (and n may only be 1 or 8)."""
    nodes = [helper.make_node("Shape", ["x"], ["sx"]), helper.make_node("Expand", ["w", "sx"], ["y"])]
    w = np.arange(32, dtype=np.float32).reshape(4, 8)
    model = kit.model(nodes, {"x": ("float32", [1, "n"])}, ["y"], {"w": w})
    ret = from_onnx(model)["main"].ret_struct_info
    assert [P.const_value(d) for d in ret.shape] == [4, 8]
    _check_at(kit, model, [{"x": np.zeros((1, n), np.float32)} for n in (1, 8)])


def test_equal_of_a_dim_and_a_negative_constant_is_false():
    from hetvm.frontend.fold import decide_equal

    n = P.PrimVar("n")
    assert decide_equal(n, -1) is False
    assert decide_equal(P.add(n, 1), 0) is False
    assert decide_equal(n, n) is True
    assert decide_equal(n, 4) is None  # depends on n
    assert decide_equal(n, P.PrimVar("m")) is None


def test_zero_d_shape_value_plus_arange_is_a_run_time_tensor(kit):
    """GPT-2 with a cache: position ids = past_len + arange(seq), with past_len a
    0-d value taken from Shape(past); it becomes a 0-d int64 tensor."""
    nodes = [
        helper.make_node("Shape", ["past"], ["sp"]),
        _c("i2", 2), helper.make_node("Gather", ["sp", "i2"], ["past_len"], axis=0),
        helper.make_node("Add", ["past_len", "steps"], ["y"]),
    ]  # fmt: skip
    model = kit.model(nodes, {"past": ("float32", [1, 2, "past", 4]), "steps": ("int64", ["seq"])},
                      {"y": "int64"})
    _check_at(kit, model, [{"past": np.zeros((1, 2, p, 4), np.float32), "steps": np.arange(s)}
                           for p, s in ((0, 1), (5, 3))])


@pytest.mark.parametrize("end", [10**9, 2**31 - 1, 2**63 - 1])
def test_slice_end_past_any_dim_means_to_the_end(kit, end):
    """paddle2onnx and some torch idioms end a Slice at 1e9; on a symbolic dim
    the result is ``n - 1`` long, not ``min(n, 1e9) - 1`` (which memory planning
    sized at 1e9)."""
    model = kit.node_model("Slice", {"x": ("float32", ["n", 4])},
                           {"s": np.array([1]), "e": np.array([end]), "a": np.array([0])})
    ret = from_onnx(model)["main"].ret_struct_info
    assert "1000000000" not in P.to_str(ret.shape[0]) and P.upper_bound(ret.shape[0]) is None
    _check_at(kit, model, [{"x": np.ones((n, 4), np.float32) * n} for n in (1, 5)])


def test_slice_start_before_any_dim_with_negative_step(kit):
    model = kit.node_model("Slice", {"x": ("float32", ["n"])},
                           {"s": np.array([-1]), "e": np.array([-(10**9)]), "a": np.array([0]),
                            "st": np.array([-1])})  # fmt: skip
    _check_at(kit, model, [{"x": np.arange(n, dtype=np.float32)} for n in (1, 4)])


def test_question_mark_dims_are_distinct(kit):
    """paddle2onnx writes '?' for every free dim: an image's H and W are two dims."""
    model = kit.node_model("Relu", {"x": ("float32", ["?", 3, "?", "?"])})
    (x,) = from_onnx(model)["main"].params
    n, _, h, w = x.struct_info.shape
    assert len({id(n), id(h), id(w)}) == 3
    assert all(isinstance(d, P.PrimVar) for d in (n, h, w))
    _check_at(kit, model, [{"x": np.random.default_rng(0).standard_normal((2, 3, 5, 7)).astype(np.float32)}])


def test_named_dims_stay_shared(kit):
    model = kit.node_model("Add", {"a": ("float32", ["batch", "?"]), "b": ("float32", ["batch", "?"])})
    a, b = from_onnx(model)["main"].params
    assert a.struct_info.shape[0] is b.struct_info.shape[0]
    assert a.struct_info.shape[1] is not b.struct_info.shape[1]


def test_max_of_shape_values_folds(kit):
    """Reshape to (max(seq, 1), -1) and (max(seq, 0), -1): Max of shape values is a
    shape expression, and dims are never negative, so max(seq, 0) is seq."""
    nodes = [
        helper.make_node("Shape", ["x"], ["sx"]),
        _c("i0", [0]), helper.make_node("Gather", ["sx", "i0"], ["seq"], axis=0),
        _c("one", [1]), helper.make_node("Max", ["seq", "one"], ["rows"]),
        _c("zero", [0]), helper.make_node("Max", ["seq", "zero"], ["same"]),
        _c("minus", [-1]),
        helper.make_node("Concat", ["rows", "minus"], ["target"], axis=0),
        helper.make_node("Concat", ["same", "minus"], ["target2"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
        helper.make_node("Reshape", ["x", "target2"], ["z"]),
    ]  # fmt: skip
    model = kit.model(nodes, {"x": ("float32", ["seq", 4])}, ["y", "z"])
    mod = from_onnx(model)
    (x,) = mod["main"].params
    y, z = mod["main"].ret_struct_info.fields
    seq = x.struct_info.shape[0]
    assert P.prove_equal(y.shape[0], P.max_(seq, 1)) and not P.prove_equal(y.shape[0], seq)
    assert P.prove_equal(z.shape[0], seq) and P.const_value(z.shape[1]) == 4
    _check_at(kit, model, [{"x": np.arange(4 * n, dtype=np.float32).reshape(n, 4)} for n in (1, 3)])


def test_folding_log_of_zero_prints_no_numpy_warning(kit):
    """T5's relative-position buckets fold log(0) and cast -inf to int64 when the
    sequence length is static: ONNX means IEEE results, so no RuntimeWarning."""
    nodes = [helper.make_node("Log", ["z"], ["l"]), helper.make_node("Cast", ["l"], ["c"], to=I64),
             helper.make_node("Add", ["x", "c"], ["y"])]  # fmt: skip
    model = kit.model(nodes, {"x": ("int64", [2])}, {"y": "int64"}, {"z": np.array([0.0, 1.0], np.float32)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mod = from_onnx(model)
    assert mod is not None


def test_tile_by_shape_values(kit):
    """DeBERTa tiles the relative-position keys by batch: Tile's repeats are
    shape values, (batch, 1, 1) here."""
    nodes = [
        helper.make_node("Shape", ["x"], ["sx"]),
        _c("i0", [0]), helper.make_node("Gather", ["sx", "i0"], ["b"], axis=0),
        _c("ones", [1, 1]), helper.make_node("Concat", ["b", "ones"], ["reps"], axis=0),
        helper.make_node("Tile", ["table", "reps"], ["y"]),
    ]  # fmt: skip
    table = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    model = kit.model(nodes, {"x": ("float32", ["batch", 4])}, ["y"], {"table": table})
    _check_at(kit, model, [{"x": np.zeros((n, 4), np.float32)} for n in (1, 3)])


def test_shape_computed_from_tensor_values_binds_dims_at_run_time(kit):
    """ceil(n / 2) through float arithmetic (as exporters write int(math.ceil(n/2)))
    is no shape expression: the shape is read at run time and bound to fresh dims."""
    nodes = [
        helper.make_node("Shape", ["x"], ["sx"]),
        helper.make_node("Cast", ["sx"], ["f"], to=TensorProto.FLOAT),
        _c("half", [0.5, 1.0], np.float32), helper.make_node("Mul", ["f", "half"], ["g"]),
        helper.make_node("Ceil", ["g"], ["h"]), helper.make_node("Cast", ["h"], ["target"], to=I64),
        helper.make_node("ConstantOfShape", ["target"], ["zeros"],
                         value=helper.make_tensor("v", TensorProto.FLOAT, [1], [2.0])),
        helper.make_node("Expand", ["row", "target"], ["y"]),
    ]  # fmt: skip
    row = np.arange(3, dtype=np.float32).reshape(1, 3)
    model = kit.model(nodes, {"x": ("float32", ["n", 3])}, ["zeros", "y"], {"row": row})
    _check_at(kit, model, [{"x": np.zeros((n, 3), np.float32)} for n in (1, 5)])


def test_run_time_shape_of_unknown_length_is_a_clear_error(kit):
    model = kit.node_model("Reshape", {"x": ("float32", [6]), "s": ("int64", ["k"])})
    with pytest.raises(hetvm.HetvmError, match="computed at run time.*known length"):
        from_onnx(model)
