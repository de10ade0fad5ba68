"""ONNX ops the importer composes from existing hetvm ops (activations, reductions,
normalisations, layout ops): struct info and values against onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

RNG = np.random.default_rng(1)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


X = {"x": ("float32", [3, 4, 5])}
X4 = {"x": ("float32", [2, 4, 3, 3])}


def case(op, inputs, feeds, inits=None, opset=17, outputs=("y",), **attrs):
    return dict(op=op, inputs=inputs, feeds=feeds, inits=inits, opset=opset, outputs=outputs, attrs=attrs)


BIG = f32(3, 4, 5) * 30  # exercises exp overflow and saturation

CASES = {
    "Elu": case("Elu", X, {"x": BIG}, alpha=0.7),
    "Selu": case("Selu", X, {"x": BIG}),
    "Celu": case("Celu", X, {"x": BIG}, alpha=2.0),
    "HardSigmoid": case("HardSigmoid", X, {"x": f32(3, 4, 5) * 4}, alpha=0.3, beta=0.4),
    "HardSwish": case("HardSwish", X, {"x": f32(3, 4, 5) * 4}),
    "Softplus": case("Softplus", X, {"x": BIG}),
    "Softsign": case("Softsign", X, {"x": BIG}),
    "Mish": case("Mish", X, {"x": f32(3, 4, 5) * 5}, opset=18),
    "ThresholdedRelu": case("ThresholdedRelu", X, {"x": f32(3, 4, 5)}, alpha=0.5),
    "PRelu": case("PRelu", X, {"x": f32(3, 4, 5)}, {"slope": f32(5)}),
    "PRelu-input-slope": case("PRelu", {"x": ("float32", [3, 4, 5]), "slope": ("float32", [4, 1])},
                              {"x": f32(3, 4, 5), "slope": f32(4, 1)}),
    "Shrink": case("Shrink", X, {"x": f32(3, 4, 5)}, lambd=0.6, bias=0.25),
    "Hardmax": case("Hardmax", X, {"x": f32(3, 4, 5)}, axis=1),
    "CastLike": case("CastLike", {"x": ("float32", [3, 4])}, {"x": f32(3, 4) * 10},
                     {"like": np.zeros(1, np.int64)}, outputs={"y": "int64"}),
    "Xor": case("Xor", {"a": ("bool", [3, 4]), "b": ("bool", [4])},
                {"a": RNG.random((3, 4)) > 0.5, "b": RNG.random(4) > 0.5}, outputs={"y": "bool"}),
    "ReduceL1": case("ReduceL1", X, {"x": f32(3, 4, 5)}, axes=[1], keepdims=0),
    "ReduceL2": case("ReduceL2", X, {"x": f32(3, 4, 5)}, axes=[0, 2]),
    "ReduceLogSum": case("ReduceLogSum", X, {"x": np.abs(f32(3, 4, 5)) + 0.1}, axes=[-1]),
    "ReduceLogSumExp": case("ReduceLogSumExp", X, {"x": BIG * 10}, axes=[1], keepdims=0),
    "ReduceLogSumExp-all": case("ReduceLogSumExp", X, {"x": f32(3, 4, 5)}, keepdims=0),
    "ReduceSumSquare-opset18": case("ReduceSumSquare", X, {"x": f32(3, 4, 5)},
                                    {"axes": np.array([0, -1])}, opset=18),
    "InstanceNormalization": case("InstanceNormalization", X4, {"x": f32(2, 4, 3, 3)},
                                  {"s": f32(4), "b": f32(4)}, epsilon=1e-3),
    "GroupNormalization-21": case("GroupNormalization", X4, {"x": f32(2, 4, 3, 3)},
                                  {"s": f32(4), "b": f32(4)}, opset=21, num_groups=2),
    "LpNormalization-l2-zero": case("LpNormalization", {"x": ("float32", [2, 3])},
                                    {"x": np.array([[0, 0, 0], [3, 4, 0]], np.float32)}),
    "MeanVarianceNormalization": case("MeanVarianceNormalization", X4, {"x": f32(2, 4, 3, 3)}),
    "RMSNormalization": case("RMSNormalization", X, {"x": f32(3, 4, 5)}, {"s": f32(4, 5)},
                             opset=23, axis=1),
    "LayerNormalization-stats": case("LayerNormalization", X, {"x": f32(3, 4, 5)},
                                     {"s": f32(5), "b": f32(5)}, outputs=("y", "mean", "inv")),
    "Tile": case("Tile", X, {"x": f32(3, 4, 5)}, {"r": np.array([2, 1, 3])}),
    "Trilu-upper": case("Trilu", X, {"x": f32(3, 4, 5)}, {"k": np.array(1)}),
    "Trilu-lower": case("Trilu", X, {"x": f32(3, 4, 5)}, {"k": np.array(-1)}, upper=0),
    "DepthToSpace-DCR": case("DepthToSpace", X4, {"x": f32(2, 4, 3, 3)}, blocksize=2),
    "DepthToSpace-CRD": case("DepthToSpace", X4, {"x": f32(2, 4, 3, 3)}, blocksize=2, mode="CRD"),
    "SpaceToDepth": case("SpaceToDepth", {"x": ("float32", [1, 2, 4, 6])}, {"x": f32(1, 2, 4, 6)},
                         blocksize=2),
    "EyeLike": case("EyeLike", {"x": ("float32", [3, 4])}, {"x": f32(3, 4)}, k=1),
    "ArgMax-last": case("ArgMax", {"x": ("int64", [3, 4])}, {"x": RNG.integers(0, 2, (3, 4))},
                        outputs={"y": "int64"}, axis=1, select_last_index=1),
    "ArgMin-last-nokeep": case("ArgMin", {"x": ("int64", [3, 4])}, {"x": RNG.integers(0, 2, (3, 4))},
                               outputs={"y": "int64"}, axis=0, keepdims=0, select_last_index=1),
    "NLLLoss-mean-weight-ignore": case(
        "NegativeLogLikelihoodLoss", {"x": ("float32", [3, 5, 2]), "t": ("int64", [3, 2])},
        {"x": f32(3, 5, 2), "t": np.array([[0, 4], [2, 2], [1, 3]])}, {"w": np.abs(f32(5))},
        ignore_index=2),
    "NLLLoss-none": case("NegativeLogLikelihoodLoss", {"x": ("float32", [3, 5]), "t": ("int64", [3])},
                         {"x": f32(3, 5), "t": np.array([0, 4, 1])}, reduction="none"),
    "NLLLoss-sum": case("NegativeLogLikelihoodLoss", {"x": ("float32", [3, 5]), "t": ("int64", [3])},
                        {"x": f32(3, 5), "t": np.array([0, 4, 1])}, reduction="sum"),
    "SoftmaxCrossEntropyLoss-logprob": case(
        "SoftmaxCrossEntropyLoss", {"x": ("float32", [3, 5]), "t": ("int64", [3])},
        {"x": f32(3, 5), "t": np.array([0, 4, 1])}, outputs=("y", "logp")),
    "SoftmaxCrossEntropyLoss-ignore": case(
        "SoftmaxCrossEntropyLoss", {"x": ("float32", [2, 5, 3]), "t": ("int64", [2, 3])},
        {"x": f32(2, 5, 3), "t": np.array([[0, 4, 1], [1, 1, 3]])}, ignore_index=1),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
def test_composed_op(kit, name):
    c = CASES[name]
    model = kit.node_model(c["op"], dict(c["inputs"]), c["inits"], c["outputs"], c["opset"], **c["attrs"])
    kit.check(model, c["feeds"], rtol=1e-4, atol=1e-5)


def test_symbolic_batch_stays_symbolic(kit):
    model = kit.node_model("InstanceNormalization", {"x": ("float32", ["n", 4, 3, 3])},
                           {"s": f32(4), "b": f32(4)})  # fmt: skip
    from hetvm.frontend import from_onnx

    ret = from_onnx(model)["main"].ret_struct_info
    assert ret.ndim == 4 and ret.static_shape is None


def test_trilu_keeps_symbolic_matrix_dims(kit):
    """Trilu is R.triu/R.tril now (it needed static dims for a constant mask)."""
    from hetvm.frontend import from_onnx

    model = kit.node_model("Trilu", {"x": ("float32", [3, "m"])})
    ret = from_onnx(model)["main"].ret_struct_info
    assert ret.shape[0].value == 3 and ret.shape[1].name == "m"


def test_group_norm_rejects_a_group_count_that_does_not_divide(kit):
    from hetvm.errors import FrontendError
    from hetvm.frontend import from_onnx

    model = kit.node_model("GroupNormalization", X4, {"s": f32(4), "b": f32(4)}, opset=21, num_groups=3)
    with pytest.raises(FrontendError, match="num_groups=3 does not divide"):
        from_onnx(model)


def test_hardmax_before_opset13_coerces_to_2d(kit):
    """onnx.reference applies the opset-13 rule (one axis) to every opset, so the
    oracle here is NumPy: one 1 per row of the input viewed as (3, 20)."""
    from hetvm.frontend import from_onnx

    x = f32(3, 4, 5)
    mod = from_onnx(kit.node_model("Hardmax", X, opset=11, axis=1))
    flat = x.reshape(3, 20)
    expected = (np.arange(20) == flat.argmax(axis=1)[:, None]).astype(np.float32).reshape(3, 4, 5)
    (got,) = kit.run(mod, [x])
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("op,attrs,ref", [
    # onnx.reference's LpNormalization sums x**p (no abs) and it has no GlobalLpPool:
    # the oracle is NumPy, as the conformance cases compute it
    ("LpNormalization", {"axis": 1, "p": 1}, lambda x: x / np.abs(x).sum(axis=1, keepdims=True)),
    ("GlobalLpPool", {}, lambda x: np.sqrt((x * x).sum(axis=(2, 3), keepdims=True))),
    ("GlobalLpPool", {"p": 3},
     lambda x: (np.abs(x) ** 3).sum(axis=(2, 3), keepdims=True) ** (1 / 3)),
])  # fmt: skip
def test_lp_ops_against_numpy(kit, op, attrs, ref):
    from hetvm.frontend import from_onnx

    x = f32(2, 4, 3, 3)
    mod = from_onnx(kit.node_model(op, X4, **attrs))
    assert mod["main"].ret_struct_info.static_shape == ref(x).shape
    (got,) = kit.run(mod, [x])
    np.testing.assert_allclose(got, ref(x), rtol=1e-5, atol=1e-6)
