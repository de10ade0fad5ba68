"""ONNX ``If``: branches read the enclosing graph's values, several outputs,
shapes that differ per branch, nested Ifs, a condition known at import time
(only the taken branch is kept), checked against onnx.reference on the CPU and
on sim + CPU; and unsupported operators inside subgraphs are listed."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import hetvm  # noqa: E402
from hetvm.errors import FrontendError  # noqa: E402
from hetvm.frontend import from_onnx  # noqa: E402
from hetvm.ir import VDevice  # noqa: E402
from hetvm.ir import expr as E  # noqa: E402
from hetvm.ir import prim as P  # noqa: E402
from hetvm.ir.visitor import post_order_visit  # noqa: E402

F = TensorProto.FLOAT


def _branch(name: str, nodes: list, outs: list[str], inits: dict | None = None):
    outputs = [helper.make_tensor_value_info(o, F, None) for o in outs]
    init = [onnx.numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in (inits or {}).items()]
    return helper.make_graph(nodes, name, [], outputs, init)


def _model(nodes: list, inputs: dict, outputs: dict, inits: dict | None = None):
    """``outputs``: name -> shape (a name for a dim that differs per branch)."""
    g_in = [helper.make_tensor_value_info(n, dt, shape) for n, (dt, shape) in inputs.items()]
    g_out = [helper.make_tensor_value_info(o, F, shape) for o, shape in outputs.items()]
    init = [onnx.numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()]
    model = helper.make_model(
        helper.make_graph(nodes, "m", g_in, g_out, init), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model


def _ifs(mod) -> list[E.If]:
    found: list[E.If] = []
    post_order_visit(mod["main"], lambda e: found.append(e) if isinstance(e, E.If) else None)
    return found


def _op_names(mod) -> list[str]:
    names: list[str] = []
    post_order_visit(mod["main"], lambda e: names.append(e.op.name) if isinstance(e, E.Call) and isinstance(e.op, E.Op) else None)
    return names


def _run(mod, feeds: list[np.ndarray], heterogeneous: bool = False) -> list[np.ndarray]:
    if heterogeneous:
        from hetvm.cli_support.placement import pin_params

        mod = pin_params(mod.with_global_infos(vdevice=[VDevice("sim", 0), VDevice("llvm", 0)]), VDevice("sim", 0))
        vm = hetvm.VirtualMachine(hetvm.build(mod), [hetvm.device("sim", 0), hetvm.cpu(0)])
    else:
        vm = hetvm.VirtualMachine(hetvm.build(mod, target="llvm"), hetvm.cpu())
    out = vm["main"](*(feeds if heterogeneous else [hetvm.nd.array(f) for f in feeds]))
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    if heterogeneous:
        assert vm.memory_report()["sim:0"]["peak_bytes"] > 0  # it really ran on the accelerator
    return [o.copyto(hetvm.cpu(0)).numpy() for o in outs]


def _check(model, feeds: dict[str, np.ndarray], heterogeneous: bool = False):
    mod = from_onnx(model)
    expected = ReferenceEvaluator(model).run(None, feeds)
    got = _run(mod, list(feeds.values()), heterogeneous)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == np.shape(e)
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    return mod


def _sign_model():
    """out = (x + y if sum(x) > 0 else x - y * w) * y; both branches read x and y
    from the enclosing graph, the else branch has an initializer of its own."""
    then = _branch("then", [helper.make_node("Add", ["x", "y"], ["t"])], ["t"])
    other = _branch("else", [helper.make_node("Mul", ["y", "w"], ["yw"]),
                             helper.make_node("Sub", ["x", "yw"], ["e"])], ["e"], {"w": 3.0})  # fmt: skip
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"]),
        helper.make_node("If", ["c"], ["z"], name="pick", then_branch=then, else_branch=other),
        helper.make_node("Mul", ["z", "y"], ["out"]),
    ]
    inputs = {"x": (F, [2, 3]), "y": (F, [2, 3])}
    return _model(nodes, inputs, {"out": [2, 3]}, {"zero": np.array(0, np.float32)})


@pytest.mark.parametrize("heterogeneous", [False, True], ids=["cpu", "sim+cpu"])
@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["then", "else"])
def test_run_time_condition_takes_each_branch(sign, heterogeneous):
    rng = np.random.default_rng(0)
    x = (sign * rng.uniform(0.1, 1.0, (2, 3))).astype(np.float32)
    y = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    mod = _check(_sign_model(), {"x": x, "y": y}, heterogeneous)
    assert len(_ifs(mod)) == 1
    assert mod.attrs["onnx_node_of"]["t"] == ("pick/then/Add_0", "Add")


def test_constant_condition_keeps_only_the_taken_branch():
    for flag, expected_op in ((True, "add"), (False, "subtract")):
        then = _branch("then", [helper.make_node("Add", ["x", "x"], ["t"])], ["t"])
        other = _branch("else", [helper.make_node("Sub", ["x", "one"], ["e"])], ["e"], {"one": 1.0})
        nodes = [helper.make_node("If", ["flag"], ["y"], then_branch=then, else_branch=other)]
        model = _model(nodes, {"x": (F, [3])}, {"y": [3]}, {"flag": np.array([flag])})
        x = np.arange(3, dtype=np.float32)
        mod = _check(model, {"x": x})
        assert not _ifs(mod)
        assert _op_names(mod) == [expected_op]


def test_shape_comparison_decides_the_branch_at_import_time():
    """``if Shape(x)[0] == 4`` on a static shape folds: only one branch is imported."""
    then = _branch("then", [helper.make_node("Neg", ["x"], ["t"])], ["t"])
    other = _branch("else", [helper.make_node("Abs", ["x"], ["e"])], ["e"])
    nodes = [
        helper.make_node("Shape", ["x"], ["sh"]),
        helper.make_node("Gather", ["sh", "zero"], ["d0"], axis=0),
        helper.make_node("Equal", ["d0", "four"], ["c"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
    ]
    inits = {"zero": np.array(0, np.int64), "four": np.array(4, np.int64)}
    model = _model(nodes, {"x": (F, [4, 2])}, {"y": [4, 2]}, inits)
    mod = _check(model, {"x": np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2)})
    assert not _ifs(mod)


def test_branch_shapes_differ_and_several_outputs():
    """then: (x[:2], x); else: (x, x * 2) -- output 0 has 2 or 4 rows, output 1
    always 4: it keeps a static shape, output 0 gets a symbolic row count."""
    starts, ends, axes = "st", "en", "ax"
    then = helper.make_graph(
        [helper.make_node("Slice", ["x", starts, ends, axes], ["a"]), helper.make_node("Identity", ["x"], ["b"])],
        "then", [], [helper.make_tensor_value_info(n, F, None) for n in ("a", "b")],
        [onnx.numpy_helper.from_array(np.array([v], np.int64), k) for k, v in ((starts, 0), (ends, 2), (axes, 0))],
    )  # fmt: skip
    other = _branch("else", [helper.make_node("Identity", ["x"], ["c"]),
                             helper.make_node("Add", ["x", "x"], ["d"])], ["c", "d"])  # fmt: skip
    nodes = [
        helper.make_node("If", ["cond"], ["p", "q"], then_branch=then, else_branch=other),
        helper.make_node("Relu", ["p"], ["rp"]),
        helper.make_node("Relu", ["q"], ["rq"]),
    ]
    model = _model(nodes, {"cond": (TensorProto.BOOL, []), "x": (F, [4, 3])}, {"rp": ["n", 3], "rq": [4, 3]})
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    for cond in (True, False):
        mod = _check(model, {"cond": np.array(cond), "x": x})
    rets = mod["main"].ret_struct_info.fields
    assert rets[0].ndim == 2 and rets[0].static_shape is None
    casts = [b.struct_info for blk in mod["main"].body.blocks for b in blk.bindings if isinstance(b, E.MatchCast)]
    assert [P.const_value(d) for d in casts[0].shape] == [None, 3]  # rows differ, columns agree
    assert rets[1].static_shape == (4, 3)


def test_nested_if_and_a_one_element_condition():
    inner = helper.make_graph(
        [helper.make_node("Mul", ["x", "x"], ["sq"])], "inner_then", [], [helper.make_tensor_value_info("sq", F, None)]
    )
    inner_else = _branch("inner_else", [helper.make_node("Neg", ["x"], ["ng"])], ["ng"])
    then = _branch("then", [
        helper.make_node("ReduceMax", ["x"], ["mx"], keepdims=1),
        helper.make_node("Less", ["mx", "half"], ["c2"]),
        helper.make_node("If", ["c2"], ["r"], name="inner", then_branch=inner, else_branch=inner_else),
    ], ["r"], {"half": [0.5]})  # fmt: skip
    other = _branch("else", [helper.make_node("Abs", ["x"], ["ab"])], ["ab"])
    nodes = [helper.make_node("If", ["c1"], ["y"], name="outer", then_branch=then, else_branch=other)]
    model = _model(nodes, {"c1": (TensorProto.BOOL, [1]), "x": (F, [3])}, {"y": [3]})
    mod = None
    for c1, scale in ((True, 0.1), (True, 1.0), (False, 1.0)):
        x = (scale * np.array([-0.5, 0.2, 0.9])).astype(np.float32)
        mod = _check(model, {"c1": np.array([c1]), "x": x})
    assert len(_ifs(mod)) == 2


def test_unsupported_op_inside_a_branch_is_listed_with_its_node():
    then = _branch("then", [helper.make_node("Bernoulli", ["x"], ["t"])], ["t"])
    other = _branch("else", [helper.make_node("Relu", ["x"], ["e"])], ["e"])
    nodes = [helper.make_node("If", ["c"], ["y"], name="gate", then_branch=then, else_branch=other)]
    model = _model(nodes, {"c": (TensorProto.BOOL, []), "x": (F, [3])}, {"y": [3]})
    with pytest.raises(FrontendError, match=r"1 unsupported ONNX operator\(s\): Bernoulli \(opset 17\) inside a subgraph of If node 'gate'"):
        from_onnx(model)
    assert hetvm.frontend.onnx_importer.unsupported_ops(model) == [("Bernoulli", 17)]
