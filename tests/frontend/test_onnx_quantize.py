"""ONNX QuantizeLinear / DequantizeLinear (opsets 10-25): one-node models run on
hetvm's VM against onnx.reference, with scales and zero points as initializers
(reshaped at import time) and as graph inputs (reshaped in the program)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from hetvm.errors import FrontendError  # noqa: E402
from hetvm.frontend import from_onnx  # noqa: E402
from hetvm.testing.ir_query import op_names  # noqa: E402

RNG = np.random.default_rng(11)
_SLOTS = ("x", "scale", "zero_point")
_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535)}


def qmodel(
    op: str,
    feeds: dict[str, np.ndarray],
    inits: dict[str, np.ndarray] | None = None,
    opset: int = 21,
    dims: dict[str, list[Any]] | None = None,
    types: dict[str, int] | None = None,
    **attrs: Any,
) -> Any:
    """A one-node model; ``feeds`` (graph inputs) and ``inits`` are named after the
    slots x, scale, zero_point. ``types`` gives an input an ONNX element type NumPy
    has no array for (float8, int4); its shape is then ``dims``'s."""
    inits = inits or {}
    types = types or {}
    present = {**feeds, **inits, **types}
    ins = [s for s in _SLOTS if s in present]
    node = helper.make_node(op, ins, ["y"], name="q", **attrs)
    g_in = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), (dims or {}).get(n, list(a.shape)))
        for n, a in feeds.items()
    ] + [helper.make_tensor_value_info(n, t, (dims or {})[n]) for n, t in types.items()]  # fmt: skip
    g_init = [numpy_helper.from_array(np.asarray(a), n) for n, a in inits.items()]
    graph = helper.make_graph([node], "quantize", g_in, [helper.make_empty_tensor_value_info("y")], g_init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model = onnx.shape_inference.infer_shapes(model)
    onnx.checker.check_model(model)
    return model


def reference(op: str, feeds: dict[str, np.ndarray], inits: dict[str, np.ndarray], opset: int, **attrs: Any) -> np.ndarray:
    """onnx.reference's output; it has no DequantizeLinear before opset 19, whose
    semantics opsets 10 and 13 share, so those run as opset 19."""
    if op == "DequantizeLinear":
        opset = max(opset, 19)
    model = qmodel(op, {**feeds, **inits}, opset=opset, **attrs)
    return np.asarray(ReferenceEvaluator(model).run(None, {**feeds, **inits})[0])


def check(kit: Any, op: str, x: np.ndarray, params: dict[str, np.ndarray], opset: int, where: str,
          **attrs: Any) -> np.ndarray:  # fmt: skip
    """hetvm equals onnx.reference exactly (value and dtype); ``where`` puts the
    scale and zero point in initializers or graph inputs."""
    feeds = {"x": x, **(params if where == "input" else {})}
    model = qmodel(op, feeds, params if where == "init" else {}, opset=opset, **attrs)
    expected = reference(op, {"x": x}, params, opset, **attrs)
    (got,) = kit.run(from_onnx(model), list(feeds.values()))
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got.dtype, expected.dtype)
    np.testing.assert_array_equal(got, expected)
    return got


def ties(scale: float, n: int = 9) -> np.ndarray:
    """Values whose quotient by ``scale`` is exactly k + 0.5 (round-half-to-even decides)."""
    return ((np.arange(n) - n // 2 + 0.5) * scale).astype(np.float32)


F32 = np.float32
QUANTIZE: dict[str, tuple[np.ndarray, dict[str, np.ndarray], int, dict[str, Any]]] = {
    # per tensor: ties, saturation on both sides, each output dtype
    "10-uint8-ties": (np.concatenate([ties(2.0), [600.0, -600.0]]).astype(F32),
                      {"scale": F32(2.0), "zero_point": np.uint8(128)}, 10, {}),  # fmt: skip
    "10-default-uint8-no-zero-point": (np.array([-3.0, 0.4, 1.5, 2.5, 999.0], F32), {"scale": F32(0.5)}, 10, {}),
    "13-int8-ties-saturate": (np.concatenate([ties(0.25), [100.0, -100.0]]).astype(F32),
                              {"scale": F32(0.25), "zero_point": np.int8(-3)}, 13, {}),  # fmt: skip
    "21-int16": (RNG.standard_normal(12).astype(F32) * 5e3, {"scale": F32(0.1), "zero_point": np.int16(100)}, 21, {}),
    "21-uint16-saturate": (np.array([-7.5, 0.5, 1.5, 3e4, 7e4, -1.0], F32),
                           {"scale": F32(0.5), "zero_point": np.uint16(3)}, 21, {}),  # fmt: skip
    "21-one-element-scale": (RNG.standard_normal((3, 4)).astype(F32) * 20,
                             {"scale": np.array([0.5], F32), "zero_point": np.array([7], np.int8)}, 21, {}),  # fmt: skip
    # per axis
    "13-axis-default": (RNG.standard_normal((2, 3, 4)).astype(F32) * 50,
                        {"scale": np.array([0.5, 1.0, 2.0], F32), "zero_point": np.array([0, 128, 250], np.uint8)},
                        13, {}),  # fmt: skip
    "13-axis-0": (RNG.standard_normal((3, 5)).astype(F32) * 50,
                  {"scale": np.array([0.5, 1.0, 2.0], F32), "zero_point": np.array([-5, 0, 5], np.int8)},
                  13, {"axis": 0}),  # fmt: skip
    "21-axis-neg-int16": (RNG.standard_normal((2, 4)).astype(F32) * 1e4,
                          {"scale": np.array([0.25, 0.5, 1.0, 2.0], F32), "zero_point": np.array([0, 9, -9, 1], np.int16)},
                          21, {"axis": -1}),  # fmt: skip
    "25-axis-uint16": (RNG.standard_normal((4, 2)).astype(F32) * 1e4,
                       {"scale": np.array([0.3, 0.7, 1.1, 4.0], F32), "zero_point": np.array([0, 1, 30000, 65535], np.uint16)},
                       25, {"axis": 0}),  # fmt: skip
    # blocked: block divides the axis, and a remainder block
    "21-blocked-uint8": (RNG.standard_normal((3, 6)).astype(F32) * 100,
                         {"scale": RNG.uniform(0.5, 2, (3, 3)).astype(F32),
                          "zero_point": RNG.integers(0, 255, (3, 3)).astype(np.uint8)},
                         21, {"axis": 1, "block_size": 2}),  # fmt: skip
    "21-blocked-remainder-int8": (RNG.standard_normal((7, 2, 2)).astype(F32) * 100,
                                  {"scale": RNG.uniform(0.5, 2, (3, 2, 2)).astype(F32),
                                   "zero_point": RNG.integers(-100, 100, (3, 2, 2)).astype(np.int8)},
                                  21, {"axis": 0, "block_size": 3}),  # fmt: skip
    "21-blocked-symmetric-output-dtype": (RNG.standard_normal((2, 5)).astype(F32) * 1e4,
                                          {"scale": np.array([[0.5, 2.0, 3.0], [1.0, 0.25, 9.0]], F32)},
                                          21, {"axis": 1, "block_size": 2, "output_dtype": TensorProto.INT16}),  # fmt: skip
    "23-output-dtype-uint16": (np.array([0.5, 1.5, 2.5, -2.5, 70000.0], F32), {"scale": F32(1.0)},
                               23, {"output_dtype": TensorProto.UINT16}),  # fmt: skip
    # other input dtypes and the division's precision
    "19-float16-ties": (ties(0.5, 15).astype(np.float16), {"scale": np.float16(0.5), "zero_point": np.int8(1)}, 19, {}),
    "10-int32-x": (np.array([-1000, -3, 0, 5, 7, 1001, 2**30], np.int32),
                   {"scale": F32(2.0), "zero_point": np.uint8(100)}, 10, {}),  # fmt: skip
    "23-precision-float32": (RNG.uniform(-36, 36, 256).astype(np.float16),
                             {"scale": np.float16(0.3), "zero_point": np.int8(0)}, 23,
                             {"precision": TensorProto.FLOAT}),  # fmt: skip
    "23-float16-scale-float32-x": (RNG.uniform(-10, 10, (64, 3)).astype(F32),
                                   {"scale": np.array([0.3, 0.7, 0.1], np.float16),
                                    "zero_point": np.array([1, 2, 3], np.uint8)}, 23, {}),  # fmt: skip
}


@pytest.mark.parametrize("where", ["init", "input"])
@pytest.mark.parametrize("name", list(QUANTIZE))
def test_quantize_matches_reference(kit, name, where):
    x, params, opset, attrs = QUANTIZE[name]
    got = check(kit, "QuantizeLinear", x, params, opset, where, **attrs)
    lo, hi = _RANGES[str(got.dtype)]
    if "saturate" in name:  # the cases meant to saturate do, on both ends they reach
        assert got.max() == hi and (got.min() == lo or lo == 0)


@pytest.mark.parametrize("name", ["23-precision-float32", "23-float16-scale-float32-x"])
def test_division_runs_in_the_reference_precision(kit, name):
    """float32 here (precision=FLOAT; NumPy's promotion of float32 x and a float16
    scale), on data where dividing in float16 would round some quotients differently."""
    x, params, opset, attrs = QUANTIZE[name]
    got = check(kit, "QuantizeLinear", x, params, opset, "init", **attrs)
    scale = params["scale"].reshape((1,) * (x.ndim - params["scale"].ndim) + params["scale"].shape)
    halves = np.rint(x.astype(np.float16) / scale.astype(np.float16)).astype(np.float32)
    zp = params["zero_point"].reshape(scale.shape).astype(np.float32)
    lo, hi = _RANGES[str(got.dtype)]
    assert not np.array_equal(got, np.clip(halves + zp, lo, hi).astype(got.dtype))


def test_ties_round_to_even(kit):
    """k + 0.5 rounds to the even neighbour: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> 0, -1.5 -> -2."""
    x = ties(1.0, 8)
    got = check(kit, "QuantizeLinear", x, {"scale": F32(1.0), "zero_point": np.int8(0)}, 13, "init")
    np.testing.assert_array_equal(got, np.rint(x).astype(np.int8))
    assert not np.array_equal(got, np.floor(x + 0.5).astype(np.int8))  # not half-up


DEQUANTIZE: dict[str, tuple[np.ndarray, dict[str, np.ndarray], int, dict[str, Any]]] = {
    "10-uint8": (np.arange(0, 256, 17, dtype=np.uint8), {"scale": F32(0.37), "zero_point": np.uint8(128)}, 10, {}),
    "13-int8-axis": (RNG.integers(-128, 128, (2, 3, 4)).astype(np.int8),
                     {"scale": np.array([0.1, 2.0, 3.3], F32), "zero_point": np.array([-1, 0, 5], np.int8)},
                     13, {}),  # fmt: skip
    "19-int32-no-zero-point": (np.array([-(2**31), -7, 0, 3, 2**24 + 1, 2**31 - 1], np.int32),
                               {"scale": F32(0.3)}, 19, {}),  # fmt: skip
    "19-int32-zero-point": (np.array([-(2**30), -7, 0, 3, 2**24 + 1, 2**30], np.int32),
                            {"scale": F32(0.3), "zero_point": np.int32(12345)}, 19, {}),  # fmt: skip
    "19-float16-scale": (RNG.integers(0, 256, (3, 4)).astype(np.uint8),
                         {"scale": np.float16(0.0123), "zero_point": np.uint8(3)}, 19, {}),  # fmt: skip
    "21-int16-blocked": (RNG.integers(-32768, 32768, (2, 7)).astype(np.int16),
                         {"scale": RNG.uniform(0.01, 1, (2, 3)).astype(F32),
                          "zero_point": RNG.integers(-100, 100, (2, 3)).astype(np.int16)},
                         21, {"axis": 1, "block_size": 3}),  # fmt: skip
    "21-uint16-axis": (RNG.integers(0, 65536, (4, 3)).astype(np.uint16),
                       {"scale": np.array([0.5, 1e-3, 7.0, 2.0], F32),
                        "zero_point": np.array([0, 32768, 65535, 1], np.uint16)}, 21, {"axis": 0}),  # fmt: skip
    "23-output-float16": (RNG.integers(-128, 128, (5,)).astype(np.int8),
                          {"scale": F32(0.013), "zero_point": np.int8(-2)}, 23,
                          {"output_dtype": TensorProto.FLOAT16}),  # fmt: skip
    "25-float16-scale-output-float32": (RNG.integers(0, 256, (2, 4)).astype(np.uint8),
                                        {"scale": np.array([[0.5, 0.25], [3.0, 0.125]], np.float16)},
                                        25, {"axis": 1, "block_size": 2, "output_dtype": TensorProto.FLOAT}),  # fmt: skip
}


@pytest.mark.parametrize("where", ["init", "input"])
@pytest.mark.parametrize("name", list(DEQUANTIZE))
def test_dequantize_matches_reference(kit, name, where):
    x, params, opset, attrs = DEQUANTIZE[name]
    check(kit, "DequantizeLinear", x, params, opset, where, **attrs)


@pytest.mark.parametrize("dtype", list(_RANGES))
def test_round_trip_every_integer_type(kit, dtype):
    """Quantize then dequantize in one graph, per axis, with run-time scales: each
    integer output type, saturated at both ends of its range."""
    lo, hi = _RANGES[dtype]
    zp = np.array([lo + (hi - lo) // 3, (lo + hi) // 2], dtype)
    scale = np.array([0.5, 3.0], F32)
    x = RNG.uniform(-1.2, 1.2, (3, 2, 4)).astype(F32) * (hi - lo) * scale[:, None]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)]  # fmt: skip
    ins = {"x": x, "s": scale, "z": zp}
    g_in = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in ins.items()]
    outs = [helper.make_empty_tensor_value_info(n) for n in ("q", "y")]
    graph = helper.make_graph(nodes, "roundtrip", g_in, outs)
    model = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]))
    expected = [np.asarray(o) for o in ReferenceEvaluator(model).run(None, ins)]
    got = kit.run(from_onnx(model), list(ins.values()))
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)
    assert got[0].min() == lo and got[0].max() == hi


def test_quotients_past_int32_saturate_as_the_spec_says(kit):
    """round(x / scale) beyond int32 (and infinities) saturates; onnx.reference casts
    through int32 there, so this one is checked against the specification's formula."""
    x = np.array([1e10, -1e10, np.inf, -np.inf, 3e9, 2.5], F32)
    for dtype in ("uint8", "int16"):
        zp = np.array(7, dtype)
        model = qmodel("QuantizeLinear", {"x": x}, {"scale": F32(0.5), "zero_point": zp}, opset=21)
        (got,) = kit.run(from_onnx(model), [x])
        lo, hi = _RANGES[dtype]
        spec = np.clip(np.rint(x.astype(np.float64) / 0.5) + 7, lo, hi).astype(dtype)
        np.testing.assert_array_equal(got, spec)


def test_symbolic_batch_with_run_time_scale(kit):
    """Dims other than the quantization axis may be symbolic."""
    x = RNG.standard_normal((5, 3)).astype(F32) * 100
    params = {"scale": np.array([0.5, 1.0, 2.0], F32), "zero_point": np.array([1, 2, 3], np.int8)}
    model = qmodel("QuantizeLinear", {"x": x, **params}, opset=13, dims={"x": ["n", 3]})
    (got,) = kit.run(from_onnx(model), [x, *params.values()])
    np.testing.assert_array_equal(got, reference("QuantizeLinear", {"x": x}, params, 13))


def test_constant_scales_are_expanded_at_import():
    """Blocked initializers are repeated with NumPy; run-time ones in the program."""
    x = RNG.standard_normal((2, 6)).astype(F32)
    params = {"scale": np.ones((2, 3), F32), "zero_point": np.ones((2, 3), np.uint8)}
    const = op_names(from_onnx(qmodel("QuantizeLinear", {"x": x}, params, axis=1, block_size=2)))
    run_time = op_names(from_onnx(qmodel("QuantizeLinear", {"x": x, **params}, axis=1, block_size=2)))
    assert "broadcast_to" not in const and "expand_dims" not in const, const
    assert run_time.count("broadcast_to") == 2, run_time


def _rejects(model: Any, opset: int, message: str, op: str = "QuantizeLinear") -> None:
    with pytest.raises(FrontendError, match=rf"{op} node 'q' \(opset {opset}\): {message}"):
        from_onnx(model)


X = RNG.standard_normal((2, 6)).astype(F32)


@pytest.mark.parametrize(
    "elem, opset, name",
    [(TensorProto.INT4, 21, "int4"), (TensorProto.UINT4, 21, "uint4"), (TensorProto.FLOAT8E4M3FN, 19, "float8_e4m3fn"),
     (TensorProto.FLOAT8E5M2, 21, "float8_e5m2"), (TensorProto.INT2, 25, "int2")],
)  # fmt: skip
def test_dtypes_the_runtime_lacks_are_rejected(elem, opset, name):
    """Zero points (quantize's output type) and quantized inputs of such dtypes name it."""
    scale = {"scale": F32(0.5)}
    model = qmodel("QuantizeLinear", {"x": X}, scale, opset=opset, types={"zero_point": elem}, dims={"zero_point": []})
    _rejects(model, opset, rf"unsupported dtype '{name}' of the zero point")
    model = qmodel("DequantizeLinear", {}, scale, opset=opset, types={"x": elem}, dims={"x": [2, 6]})
    _rejects(model, opset, rf"unsupported dtype '{name}' of x", "DequantizeLinear")


def test_output_dtype_the_runtime_lacks_is_rejected():
    model = qmodel("QuantizeLinear", {"x": X}, {"scale": F32(0.5)}, opset=21, output_dtype=TensorProto.UINT4)
    _rejects(model, 21, "unsupported dtype 'uint4' of output_dtype")
    model = qmodel("DequantizeLinear", {"x": np.zeros(3, np.int8)}, {"scale": F32(0.5)}, opset=23,
                   output_dtype=TensorProto.BFLOAT16)  # fmt: skip
    _rejects(model, 23, "unsupported dtype 'bfloat16' of output_dtype", "DequantizeLinear")


@pytest.mark.parametrize(
    "params, attrs, message",
    [
        ({"scale": np.ones((2, 2), F32)}, {"axis": 1, "block_size": 2},
         r"block_size 2 does not fit: axis 1 of the input has 6 elements, the scale 2 blocks"),  # fmt: skip
        ({"scale": np.ones((2, 3), F32)}, {"axis": 1}, r"the scale must be a scalar or 1-D without block_size"),
        ({"scale": np.ones(4, F32)}, {"axis": 1}, r"the per-axis scale has 4 values but axis 1 of the input has 6"),
        ({"scale": np.ones((3, 3), F32)}, {"axis": 1, "block_size": 2}, r"a blocked scale's shape \(3, 3\) must equal the input's \(2, 6\) but on axis 1"),
        ({"scale": np.ones(6, F32)}, {"axis": 2}, r"axis 2 is out of range for rank 2"),
        ({"scale": np.ones(6, F32), "zero_point": np.ones(3, np.uint8)}, {},
         r"the zero point's shape \(3\) differs from the scale's \(6\)"),  # fmt: skip
    ],
)
def test_scale_shapes_outside_the_spec_are_rejected(params, attrs, message):
    _rejects(qmodel("QuantizeLinear", {"x": X}, params, opset=21, **attrs), 21, message)


def test_symbolic_quantization_axis_is_rejected():
    params = {"scale": np.ones(6, F32)}
    model = qmodel("QuantizeLinear", {"x": X}, params, opset=21, dims={"x": [2, "d"]}, axis=1)
    _rejects(model, 21, "the quantization axis 1 of the input must be static, got d")
