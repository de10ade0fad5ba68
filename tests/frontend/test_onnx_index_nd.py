"""GatherND, ScatterND, Trilu, CumSum, OneHot, NonZero and Range on symbolic dims:
each model imports once, builds once, and matches onnx.reference at two settings of
its dims, on the CPU and on sim + CPU."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import hetvm  # noqa: E402
from hetvm.cli_support.placement import pin_params  # noqa: E402
from hetvm.errors import FrontendError, HetvmError  # noqa: E402
from hetvm.frontend import from_onnx  # noqa: E402
from hetvm.ir import VDevice  # noqa: E402

RNG = np.random.default_rng(11)
TYPES = {"float32": TP.FLOAT, "int64": TP.INT64, "int32": TP.INT32, "bool": TP.BOOL, "float64": TP.DOUBLE}


def model(nodes, inputs, outputs, inits=None, opset=18):
    """``inputs``/``outputs``: name -> (dtype, shape with dim names)."""
    vi = [helper.make_tensor_value_info(n, TYPES[d], s) for n, (d, s) in inputs.items()]
    vo = [helper.make_tensor_value_info(n, TYPES[d], s) for n, (d, s) in outputs.items()]
    init = [onnx.numpy_helper.from_array(np.asarray(v), n) for n, v in (inits or {}).items()]
    m = helper.make_model(helper.make_graph(nodes, "t", vi, vo, init), opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def vms(mod):
    cpu = hetvm.VirtualMachine(hetvm.build(mod, target="llvm"))
    sim_mod = pin_params(mod.with_global_infos(vdevice=[VDevice("sim", 0), VDevice("llvm", 0)]), VDevice("sim", 0))
    sim = hetvm.VirtualMachine(hetvm.build(sim_mod), [hetvm.device("sim", 0), hetvm.cpu(0)])
    return {"cpu": cpu, "sim+cpu": sim}


def check(m, feeds_list):
    """One import and one build per device set; every feed matches onnx.reference."""
    mod = from_onnx(m)
    ref = ReferenceEvaluator(m)
    for name, vm in vms(mod).items():
        for feeds in feeds_list:
            expect = ref.run(None, feeds)
            got = vm["main"](*feeds.values())
            got = got if isinstance(got, (list, tuple)) else [got]
            for e, g in zip(expect, got):
                g = g.copyto(hetvm.cpu(0)).numpy()
                assert g.dtype == e.dtype and g.shape == e.shape, (name, g.shape, e.shape)
                np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6, err_msg=name)
    return mod


def ints(lo, hi, shape, dtype=np.int64):
    return RNG.integers(lo, hi, shape).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_gather_nd_symbolic_batch_and_negative_indices(dtype):
    m = model([helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1)],
              {"x": (dtype, ["B", "S", 4]), "i": ("int64", ["B", "K", 1])}, {"y": (dtype, ["B", "K", 4])})  # fmt: skip
    feeds = [{"x": ints(-9, 9, (b, s, 4), dtype), "i": ints(-s, s, (b, k, 1))} for b, s, k in ((2, 3, 5), (3, 1, 0))]
    mod = check(m, feeds)
    assert "R.gather_nd(x, i, batch_dims=1)" in hetvm.script.print_module(mod)


def test_gather_nd_index_out_of_range_names_the_op():
    m = model([helper.make_node("GatherND", ["x", "i"], ["y"], name="lookup")],
              {"x": ("float32", ["N", 3]), "i": ("int64", ["K", 2])}, {"y": ("float32", ["K"])})  # fmt: skip
    vm = hetvm.VirtualMachine(hetvm.build(from_onnx(m), target="llvm"))
    with pytest.raises(HetvmError, match=r"op 'gather_nd': index 3 is out of range for a dim of size 3"):
        vm["main"](np.zeros((2, 3), np.float32), np.array([[1, 3]]))


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_reductions(reduction):
    m = model([helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)],
              {"x": ("float32", ["N", 3]), "i": ("int64", ["K", 1]), "u": ("float32", ["K", 3])},
              {"y": ("float32", ["N", 3])})  # fmt: skip
    feeds = []
    for n, idx in ((4, [[0], [-1], [2]]), (2, [[1]])):
        if reduction != "none":
            idx = idx + [[0]]  # a duplicate: combined by the reduction
        i = np.array(idx, np.int64)
        feeds.append({"x": RNG.uniform(-2, 2, (n, 3)).astype(np.float32), "i": i,
                      "u": RNG.uniform(-2, 2, (len(i), 3)).astype(np.float32)})  # fmt: skip
    check(m, feeds)


@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_on_symbolic_dims(upper):
    m = model([helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper)],
              {"x": ("int64", ["B", "R", "C"])}, {"y": ("int64", ["B", "R", "C"])}, {"k": np.array(-1)})  # fmt: skip
    check(m, [{"x": ints(1, 9, (2, 3, 5))}, {"x": ints(1, 9, (1, 4, 2))}, {"x": ints(1, 9, (1, 0, 2))}])


@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum_on_symbolic_dims(exclusive, reverse):
    m = model([helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)],
              {"x": ("int32", ["B", "S"])}, {"y": ("int32", ["B", "S"])}, {"axis": np.array(1)})  # fmt: skip
    check(m, [{"x": ints(-9, 9, (2, 5), np.int32)}, {"x": ints(-9, 9, (3, 1), np.int32)}])


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_with_run_time_values(axis):
    m = model([helper.make_node("OneHot", ["i", "depth", "v"], ["y"], axis=axis)],
              {"i": ("int64", ["N", 2]), "v": ("float32", [2])}, {"y": ("float32", ["A", "B", "C"])},
              {"depth": np.array(4.0, np.float32)})  # fmt: skip
    v = np.array([-1.0, 3.0], np.float32)
    check(m, [{"i": np.array([[0, -1], [5, 3], [-4, -5]]), "v": v}, {"i": np.zeros((0, 2), np.int64), "v": v}])


def test_one_hot_float_indices():
    m = model([helper.make_node("OneHot", ["i", "depth", "v"], ["y"])],
              {"i": ("float32", ["N"])}, {"y": ("int32", ["N", 3])},
              {"depth": np.array([3], np.int64), "v": np.array([0, 7], np.int32)})  # fmt: skip
    # onnx.reference refuses float indices; the spec casts them to integers
    vm = hetvm.VirtualMachine(hetvm.build(from_onnx(m), target="llvm"))
    got = vm["main"](np.array([0.0, 2.7, -1.0], np.float32)).numpy()
    np.testing.assert_array_equal(got, np.array([[7, 0, 0], [0, 0, 7], [0, 0, 7]], np.int32))


def test_nonzero_length_is_bound_at_run_time():
    m = model([helper.make_node("NonZero", ["x"], ["y"])], {"x": ("float32", ["N", 3])}, {"y": ("int64", [2, "Z"])})
    mod = check(m, [{"x": ints(-1, 2, (4, 3)).astype(np.float32)}, {"x": np.zeros((2, 3), np.float32)},
                    {"x": np.array([[np.nan, 0, 1]], np.float32)}])  # fmt: skip
    text = hetvm.script.print_module(mod)
    assert "R.match_cast(" in text and "R.nonzero(x, " in text


def test_range_to_a_dim_is_a_shape_expression():
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "one"], ["n"], axis=0),
             helper.make_node("Range", ["two", "n", "one"], ["y"])]  # fmt: skip
    m = model(nodes, {"x": ("float32", ["B", "S"])}, {"y": ("int64", ["L"])},
              {"one": np.array(1), "two": np.array(2)})  # fmt: skip
    mod = check(m, [{"x": np.zeros((1, 5), np.float32)}, {"x": np.zeros((2, 1), np.float32)}])
    (length,) = mod["main"].ret_struct_info.shape
    assert hetvm.ir.prim.to_str(length) == "T.max(S - 2, 0)"


@pytest.mark.parametrize("dtype", ["int64", "int32", "float32"])
def test_range_of_run_time_bounds_gets_a_fresh_dim(dtype):
    scalar = {n: (dtype, []) for n in ("a", "b", "c")}
    m = model([helper.make_node("Range", ["a", "b", "c"], ["y"])], scalar, {"y": (dtype, ["L"])})
    np_dt = np.dtype(dtype)
    bounds = [(0, 5, 1), (10, -3, -4), (3, 3, 1)] if np_dt.kind == "i" else [(0.5, 2.0, 0.25), (1.0, -1.0, -0.3)]
    mod = check(m, [{k: np.array(v, np_dt) for k, v in zip("abc", b)} for b in bounds])
    assert "R.range_length(" in hetvm.script.print_module(mod)


def test_range_delta_zero_is_a_clear_error():
    m = model([helper.make_node("Range", ["a", "b", "c"], ["y"], name="steps")],
              {n: ("int64", []) for n in "abc"}, {"y": ("int64", ["L"])})  # fmt: skip
    vm = hetvm.VirtualMachine(hetvm.build(from_onnx(m), target="llvm"))
    with pytest.raises(HetvmError, match=r"op 'range_length': delta of a Range is 0"):
        vm["main"](np.array(0), np.array(4), np.array(0))
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Range", ["zero", "n", "zero"], ["y"], name="steps")]  # fmt: skip
    m = model(nodes, {"x": ("float32", ["B"])}, {"y": ("int64", ["L"])}, {"zero": np.array(0)})
    with pytest.raises(FrontendError, match=r"Range node 'steps'.*delta must be nonzero"):
        from_onnx(m)


@pytest.mark.parametrize("largest", [0, 1])
def test_top_k_on_a_symbolic_batch(largest):
    m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=largest)],
              {"x": ("float32", ["N", 6])}, {"v": ("float32", ["N", 3]), "i": ("int64", ["N", 3])},
              {"k": np.array([3])})  # fmt: skip
    check(m, [{"x": ints(0, 3, (4, 6)).astype(np.float32)}, {"x": ints(-5, 5, (1, 6)).astype(np.float32)}])


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_compress_length_is_bound_at_run_time(axis):
    attrs = {} if axis is None else {"axis": axis}
    m = model([helper.make_node("Compress", ["x", "c"], ["y"], **attrs)],
              {"x": ("int32", [3, "N"]), "c": ("bool", ["K"])}, {"y": ("int32", ["A"] if axis is None else ["A", "B"])})  # fmt: skip
    feeds = []
    for n, c in ((4, [1, 0, 1]), (2, [0, 0]), (5, [1, 1, 0, 1])):
        feeds.append({"x": ints(-9, 9, (3, n), np.int32), "c": np.array(c[: 3 if axis == 0 else n], bool)})
    check(m, feeds)


@pytest.mark.parametrize("time_axis", [0, 1])
def test_reverse_sequence_on_symbolic_dims(time_axis):
    dims = ["T", "B", 2] if time_axis == 0 else ["B", "T", 2]
    m = model([helper.make_node("ReverseSequence", ["x", "lens"], ["y"], time_axis=time_axis, batch_axis=1 - time_axis)],
              {"x": ("float32", dims), "lens": ("int64", ["B"])}, {"y": ("float32", dims)})  # fmt: skip
    feeds = []
    for t, lens in ((4, [4, 1, 3]), (2, [2, 0])):
        shape = (t, len(lens), 2) if time_axis == 0 else (len(lens), t, 2)
        feeds.append({"x": RNG.standard_normal(shape).astype(np.float32), "lens": np.array(lens)})
    check(m, feeds)


@pytest.mark.parametrize("attrs", [{}, {"sorted": 0}, {"axis": 0}, {"axis": -1, "sorted": 1}])
def test_unique_length_is_bound_at_run_time(attrs):
    outs = {"y": ("float32", ["U"] if "axis" not in attrs else ["A", "B"]), "first": ("int64", ["U"]),
            "inverse": ("int64", ["V"]), "counts": ("int64", ["U"])}  # fmt: skip
    # onnx.reference's unsorted Unique indexes a 2-D input wrongly: 1-D there
    flat = attrs == {"sorted": 0}
    m = model([helper.make_node("Unique", ["x"], list(outs), **attrs)], {"x": ("float32", ["N"] if flat else ["N", 2])}, outs)
    x1 = np.array([[1, 2], [1, 2], [0, 2], [3, 1]], np.float32)
    x2 = np.array([[5, 5]], np.float32)
    check(m, [{"x": x1.reshape(-1) if flat else x1}, {"x": x2.reshape(-1) if flat else x2}])
