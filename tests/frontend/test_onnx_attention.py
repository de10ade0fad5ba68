"""ONNX Attention (opsets 23-25): one-node models run on hetvm's VM against
onnx.reference's Attention (and NumPy where the reference departs from the spec)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from hetvm.errors import FrontendError  # noqa: E402
from hetvm.frontend import from_onnx  # noqa: E402

RNG = np.random.default_rng(7)

_ONNX_TYPE = {
    "float16": TensorProto.FLOAT16,
    "float32": TensorProto.FLOAT,
    "float64": TensorProto.DOUBLE,
    "int64": TensorProto.INT64,
    "int32": TensorProto.INT32,
    "bool": TensorProto.BOOL,
}
_SLOTS = ("Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen")
_OUTS = ("Y", "present_key", "present_value", "qk")


def rand(*shape: int, dtype: str = "float32") -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def attention_model(
    feeds: dict[str, np.ndarray],
    outputs: tuple[str, ...] = ("Y",),
    opset: int = 23,
    inits: dict[str, np.ndarray] | None = None,
    dims: dict[str, list[Any]] | None = None,
    **attrs: Any,
) -> Any:
    """A one-node Attention model; ``feeds``/``inits`` are named after the input slots
    (``Q``, ``K``, ``attn_mask`` ...), ``outputs`` after the output slots (``qk`` for
    the fourth); absent slots are left empty."""
    inits = inits or {}
    present = {**feeds, **inits}
    last_in = max(i for i, s in enumerate(_SLOTS) if s in present)
    ins = [s if s in present else "" for s in _SLOTS[: last_in + 1]]
    last_out = max(_OUTS.index(o) for o in outputs)
    outs = [o if o in outputs else "" for o in _OUTS[: last_out + 1]]
    node = helper.make_node("Attention", ins, outs, name="attn", **attrs)
    g_in = [
        helper.make_tensor_value_info(n, _ONNX_TYPE[str(a.dtype)], (dims or {}).get(n, list(a.shape)))
        for n, a in feeds.items()
    ]
    g_out = [helper.make_empty_tensor_value_info(o) for o in outputs]
    g_init = [onnx.numpy_helper.from_array(a, n) for n, a in inits.items()]
    graph = helper.make_graph([node], "attention", g_in, g_out, g_init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model = onnx.shape_inference.infer_shapes(model)  # output types for the checker
    for vi in model.graph.output:
        if not vi.type.tensor_type.HasField("shape"):
            vi.type.tensor_type.shape.SetInParent()
    onnx.checker.check_model(model)
    return model


def reference(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(o) for o in ReferenceEvaluator(model).run(None, feeds)]


def run_hetvm(kit: Any, model: Any, feeds: dict[str, np.ndarray], **import_kwargs: Any) -> list[np.ndarray]:
    return kit.run(from_onnx(model, **import_kwargs), list(feeds.values()))


def check(kit: Any, feeds: dict[str, np.ndarray], rtol: float = 1e-5, atol: float = 1e-5, **kw: Any) -> list:
    """hetvm's outputs equal onnx.reference's (values, shapes and dtypes)."""
    model = attention_model(feeds, **kw)
    expected = reference(model, {**feeds})
    got = run_hetvm(kit, model, feeds)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, g.dtype, e.shape, e.dtype)
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
    return got


def qkv4(b: int = 2, hq: int = 3, hkv: int = 3, sq: int = 4, skv: int = 6, d: int = 8, dv: int = 8,
         dtype: str = "float32") -> dict[str, np.ndarray]:  # fmt: skip
    return {"Q": rand(b, hq, sq, d, dtype=dtype), "K": rand(b, hkv, skv, d, dtype=dtype),
            "V": rand(b, hkv, skv, dv, dtype=dtype)}  # fmt: skip


def bool_mask(*shape: int) -> np.ndarray:
    m = RNG.random(shape) < 0.7
    m[..., 0] = True  # every row keeps a key
    return m


CASES: dict[str, tuple[dict[str, np.ndarray], dict[str, Any]]] = {
    "4d": (qkv4(), {}),
    "4d-v-head-size-differs": (qkv4(dv=5), {}),
    "4d-scale": (qkv4(), {"scale": 0.3}),
    "4d-gqa": (qkv4(hq=6, hkv=2), {}),
    "4d-mqa-causal": (qkv4(hq=4, hkv=1, sq=3, skv=5), {"is_causal": 1}),
    "4d-causal-square": (qkv4(sq=5, skv=5), {"is_causal": 1}),
    "4d-causal-wide": (qkv4(sq=3, skv=7), {"is_causal": 1}),
    "4d-bool-mask-2d": ({**qkv4(), "attn_mask": bool_mask(4, 6)}, {}),
    "4d-bool-mask-4d-causal": ({**qkv4(), "attn_mask": bool_mask(2, 3, 4, 6)}, {"is_causal": 1}),
    "4d-float-mask-3d": ({**qkv4(), "attn_mask": rand(3, 4, 6)}, {}),
    "4d-float-mask-4d-gqa": ({**qkv4(hq=6, hkv=3), "attn_mask": rand(2, 1, 4, 6)}, {}),
    "4d-softcap": (qkv4(), {"softcap": 1.5}),
    "4d-softcap-mask-mode1": ({**qkv4(), "attn_mask": rand(4, 6)},
                              {"softcap": 2.0, "qk_matmul_output_mode": 1, "outputs": ("Y", "qk")}),  # fmt: skip
    "4d-mask-mode2": ({**qkv4(), "attn_mask": rand(4, 6)}, {"qk_matmul_output_mode": 2, "outputs": ("Y", "qk")}),
    "4d-mask-mode3": ({**qkv4(), "attn_mask": bool_mask(4, 6)},
                      {"qk_matmul_output_mode": 3, "outputs": ("Y", "qk")}),  # fmt: skip
    "4d-past-present-causal": (
        {**qkv4(sq=3, skv=3), "past_key": rand(2, 3, 5, 8), "past_value": rand(2, 3, 5, 8)},
        {"is_causal": 1, "outputs": ("Y", "present_key", "present_value")},
    ),
    "4d-past-present-gqa-mask-mode0": (
        {**qkv4(hq=6, hkv=2, sq=2, skv=2), "attn_mask": rand(2, 7), "past_key": rand(2, 2, 5, 8),
         "past_value": rand(2, 2, 5, 8)},
        {"outputs": ("Y", "present_key", "present_value", "qk")},
    ),  # fmt: skip
    "3d": ({"Q": rand(2, 4, 24), "K": rand(2, 6, 24), "V": rand(2, 6, 24)}, {"q_num_heads": 3, "kv_num_heads": 3}),
    "3d-gqa-causal-mask": (
        {"Q": rand(2, 4, 32), "K": rand(2, 6, 16), "V": rand(2, 6, 12), "attn_mask": rand(4, 6)},
        {"q_num_heads": 4, "kv_num_heads": 2, "is_causal": 1},
    ),
    "3d-past-present": (
        {"Q": rand(1, 2, 12), "K": rand(1, 2, 12), "V": rand(1, 2, 12), "past_key": rand(1, 3, 4, 4),
         "past_value": rand(1, 3, 4, 4)},
        {"q_num_heads": 3, "kv_num_heads": 3, "outputs": ("Y", "present_key", "present_value")},
    ),  # fmt: skip
    "4d-fully-masked-row-bool": (
        {**qkv4(b=1, hq=2, hkv=2, sq=2, skv=2), "attn_mask": np.array([[False, False], [True, True]])},
        {"qk_matmul_output_mode": 3, "outputs": ("Y", "qk")},
    ),
    "4d-fully-masked-row-float": (
        {**qkv4(b=1, hq=1, hkv=1, sq=2, skv=3),
         "attn_mask": np.array([[-np.inf, -np.inf, -np.inf], [0.5, -np.inf, 0.0]], np.float32)},
        {},
    ),  # fmt: skip
    "4d-float64": (qkv4(dtype="float64"), {"is_causal": 1}),
    # opset 24: masks shorter than the keys are padded; nonpad_kv_seqlen (per-batch causal offset)
    "24-short-mask": ({**qkv4(), "attn_mask": rand(2, 3, 4, 4)}, {"opset": 24}),
    "24-nonpad": ({**qkv4(), "nonpad_kv_seqlen": np.array([2, 5], np.int64)}, {"opset": 24}),
    "24-nonpad-causal-gqa": (
        {**qkv4(b=3, hq=4, hkv=2, sq=2, skv=6), "nonpad_kv_seqlen": np.array([6, 3, 1], np.int64)},
        {"opset": 24, "is_causal": 1},
    ),
    "24-nonpad-bool-mask": (
        {**qkv4(sq=3), "attn_mask": bool_mask(2, 1, 3, 6), "nonpad_kv_seqlen": np.array([4, 6], np.int64)},
        {"opset": 24, "is_causal": 1, "qk_matmul_output_mode": 3, "outputs": ("Y", "qk")},
    ),
    # opset 25: sliding windows, with a static and a per-batch offset
    "25-window": (qkv4(sq=5, skv=5), {"opset": 25, "left_window_size": 1, "right_window_size": 2}),
    "25-window-causal-past": (
        {**qkv4(sq=3, skv=3), "past_key": rand(2, 3, 4, 8), "past_value": rand(2, 3, 4, 8)},
        {"opset": 25, "is_causal": 1, "left_window_size": 2, "outputs": ("Y", "present_key", "present_value")},
    ),
    "25-window-nonpad": (
        {**qkv4(sq=3, skv=8), "attn_mask": rand(1, 8), "nonpad_kv_seqlen": np.array([5, 8], np.int64)},
        {"opset": 25, "is_causal": 1, "left_window_size": 2, "right_window_size": 0},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_attention_matches_reference(kit, name):
    feeds, kw = CASES[name]
    tol = 1e-12 if "float64" in name else 1e-5
    check(kit, feeds, rtol=tol, atol=tol, **kw)


def test_fully_masked_row_is_zero(kit):
    """A row with no allowed key gives a zero output row and zero probabilities (not NaN)."""
    feeds = {**qkv4(b=1, hq=1, hkv=1, sq=2, skv=3), "attn_mask": np.array([[False] * 3, [True] * 3])}
    y, p = run_hetvm(kit, attention_model(feeds, ("Y", "qk"), qk_matmul_output_mode=3), feeds)
    assert np.all(y[0, 0, 0] == 0) and np.all(p[0, 0, 0] == 0)
    np.testing.assert_allclose(p[0, 0, 1].sum(), 1.0, rtol=1e-6)


def test_float16_with_float32_softmax(kit):
    """softmax_precision=FLOAT: float16 in and out, the softmax in float32."""
    feeds = {**qkv4(b=1, hq=2, hkv=2, sq=3, skv=3, dtype="float16"), "attn_mask": bool_mask(3, 3)}
    got = check(kit, feeds, rtol=2e-3, atol=2e-3, opset=24, outputs=("Y", "qk"), qk_matmul_output_mode=3,
                softmax_precision=int(TensorProto.FLOAT))  # fmt: skip
    assert got[0].dtype == np.float16 and got[1].dtype == np.float16


def test_mode0_with_softcap_is_the_raw_product(kit):
    """qk_matmul_output_mode=0 is the Q K^T product before the softcap (the spec and its
    function body; onnx.reference 1.23 returns the softcapped scores here)."""
    feeds = qkv4()
    model = attention_model(feeds, ("Y", "qk"), softcap=1.0, scale=0.25)
    y, qk = run_hetvm(kit, model, feeds)
    root = np.float32(np.sqrt(0.25))
    raw = (feeds["Q"] * root) @ np.swapaxes(feeds["K"] * root, -1, -2)
    np.testing.assert_allclose(qk, raw, rtol=1e-5, atol=1e-5)
    assert np.abs(raw).max() > 1.0  # else softcapping would change nothing and the test could not fail
    np.testing.assert_allclose(y, reference(model, feeds)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mask, opset", [(bool_mask(4, 6), 23), (rand(2, 1, 4, 4), 24)], ids=["bool", "short-float"])
def test_constant_mask_and_causal_fold_into_one_bias_constant(kit, mask, opset):
    """A mask given as an initializer (padded to the key length when shorter) and the
    causal frontier are combined at import time: no comparisons run in the program."""
    feeds = qkv4(sq=4, skv=6)
    model = attention_model(feeds, opset=opset, inits={"attn_mask": mask}, is_causal=1)
    mod = from_onnx(model)
    ops = {b.value.op.name for b in mod["main"].body.blocks[0].bindings if hasattr(b.value, "op")}
    assert not ops & {"where", "logical_and", "less", "less_equal", "equal", "max"}, ops
    (y,) = kit.run(mod, list(feeds.values()))
    np.testing.assert_allclose(y, reference(model, feeds)[0], rtol=1e-5, atol=1e-5)


def test_symbolic_batch(kit):
    """The batch may be symbolic; sequence lengths and heads are static."""
    feeds = {**qkv4(b=3, hq=4, hkv=2), "attn_mask": bool_mask(3, 1, 4, 6)}
    dims = {n: ["batch", *a.shape[1:]] for n, a in feeds.items()}
    model = attention_model(feeds, dims=dims, is_causal=1)
    (y,) = run_hetvm(kit, model, feeds)
    np.testing.assert_allclose(y, reference(model, feeds)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "feeds, kw, message",
    [
        ({**qkv4(), "attn_mask": np.ones((4, 6), np.int32)}, {}, "unsupported dtype int32 of attn_mask"),
        (qkv4(hq=4, hkv=3), {}, "4 query heads cannot be grouped over 3 key/value heads"),
        ({"Q": rand(2, 4, 24), "K": rand(2, 6, 24), "V": rand(2, 6, 24)}, {"q_num_heads": 5, "kv_num_heads": 3},
         "Q's hidden size 24 is not divisible by 5 heads"),  # fmt: skip
        ({**qkv4(), "attn_mask": rand(4, 7)}, {}, "attn_mask's last dim 7 exceeds the key/value length 6"),
        (qkv4(), {"opset": 24, "q_num_heads": 2}, r"q_num_heads/kv_num_heads \(2/None\) contradict"),
    ],
)
def test_unsupported_configurations_are_rejected(feeds, kw, message):
    opset = kw.pop("opset", 23)
    model = attention_model(feeds, opset=opset, **kw)
    with pytest.raises(FrontendError, match=rf"Attention node 'attn' \(opset {opset}\): .*{message}"):
        from_onnx(model)


def test_symbolic_sequence_length_is_rejected():
    feeds = qkv4()
    dims = {"Q": [2, 3, "seq", 8]}
    with pytest.raises(FrontendError, match="the query sequence length must be static"):
        from_onnx(attention_model(feeds, dims=dims, is_causal=1))
