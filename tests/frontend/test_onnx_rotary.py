"""ONNX RotaryEmbedding (opset 23): one-node models run on hetvm's VM against
onnx.reference, over 3-D and 4-D inputs, interleaved or halved rotation, full and
partial rotary dims, with and without position_ids."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from hetvm.errors import FrontendError  # noqa: E402
from hetvm.frontend import from_onnx  # noqa: E402
from hetvm.testing.ir_query import op_names  # noqa: E402

RNG = np.random.default_rng(23)
_SLOTS = ("X", "cos_cache", "sin_cache", "position_ids")


def rope_model(
    feeds: dict[str, np.ndarray],
    inits: dict[str, np.ndarray] | None = None,
    dims: dict[str, list[Any]] | None = None,
    types: dict[str, int] | None = None,
    **attrs: Any,
) -> Any:
    """A one-node RotaryEmbedding model; inputs are named after the slots, from
    ``feeds`` (graph inputs) or ``inits``; ``types`` overrides an input's element type."""
    inits = inits or {}
    present = {**feeds, **inits}
    ins = [s for s in _SLOTS if s in present]
    node = helper.make_node("RotaryEmbedding", ins, ["Y"], name="rope", **attrs)
    g_in = [
        helper.make_tensor_value_info(n, (types or {}).get(n, helper.np_dtype_to_tensor_dtype(a.dtype)),
                                      (dims or {}).get(n, list(a.shape)))
        for n, a in feeds.items()
    ]  # fmt: skip
    g_init = [numpy_helper.from_array(a, n) for n, a in inits.items()]
    graph = helper.make_graph([node], "rope", g_in, [helper.make_empty_tensor_value_info("Y")], g_init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model = onnx.shape_inference.infer_shapes(model)
    out = model.graph.output[0].type.tensor_type
    if not out.elem_type:  # shape inference gave up (a configuration the tests reject)
        out.elem_type = g_in[0].type.tensor_type.elem_type
        out.shape.SetInParent()
    onnx.checker.check_model(model)
    return model


def inputs(rank: int, rot: int = 0, positions: bool = True, b: int = 2, h: int = 3, s: int = 5, d: int = 8,
           max_pos: int = 16, dtype: str = "float32") -> dict[str, np.ndarray]:  # fmt: skip
    """X of the rank's layout with caches for ``rot`` (0: the head size) rotated channels."""
    x = RNG.standard_normal((b, h, s, d) if rank == 4 else (b, s, h * d)).astype(dtype)
    half = (rot or d) // 2
    cache = (max_pos, half) if positions else (b, s, half)
    angles = RNG.uniform(0, 2 * np.pi, cache)
    out = {"X": x, "cos_cache": np.cos(angles).astype(dtype), "sin_cache": np.sin(angles).astype(dtype)}
    if positions:
        out["position_ids"] = RNG.integers(0, max_pos, (b, s)).astype(np.int64)
    return out


def check(kit: Any, feeds: dict[str, np.ndarray], inits: dict[str, np.ndarray] | None = None,
          rtol: float = 1e-6, **kw: Any) -> np.ndarray:  # fmt: skip
    model = rope_model(feeds, inits, **kw)
    expected = np.asarray(ReferenceEvaluator(model).run(None, feeds)[0])
    (got,) = kit.run(from_onnx(model), list(feeds.values()))
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol)
    return got


@pytest.mark.parametrize(
    "rank, interleaved, rot, positions",
    list(itertools.product((3, 4), (0, 1), (0, 4), (True, False))),
)
def test_rotary_matches_reference(kit, rank, interleaved, rot, positions):
    feeds = inputs(rank, rot, positions)
    attrs: dict[str, Any] = {"interleaved": interleaved, "rotary_embedding_dim": rot}
    if rank == 3:
        attrs["num_heads"] = 3
    got = check(kit, feeds, **attrs)
    x = feeds["X"]
    # the channels past the rotary dim pass through; the rotated ones change
    head = x.reshape(2, 5, 3, 8) if rank == 3 else x.transpose(0, 2, 1, 3)
    out = got.reshape(2, 5, 3, 8) if rank == 3 else got.transpose(0, 2, 1, 3)
    width = rot or 8
    np.testing.assert_array_equal(out[..., width:], head[..., width:])
    assert not np.allclose(out[..., :width], head[..., :width])


def test_interleaved_and_halved_rotate_different_pairs(kit):
    """Interleaving pairs channels (0, 1), (2, 3) ...; halving pairs (0, 4), (1, 5) ..."""
    feeds = inputs(4, positions=False)
    halved = check(kit, feeds, interleaved=0)
    interleaved = check(kit, feeds, interleaved=1)
    assert not np.allclose(halved, interleaved)


def test_float16(kit):
    """float16 throughout, with the reference's operation order."""
    feeds = inputs(4, rot=6, dtype="float16")
    check(kit, feeds, rtol=1e-3, interleaved=1, rotary_embedding_dim=6)


def test_constant_caches_are_gathered_at_import(kit):
    """Caches and position_ids given as initializers are gathered with NumPy;
    given as inputs, the gather (take) runs in the program."""
    feeds = inputs(3, positions=True)
    x = {"X": feeds.pop("X")}
    const_model = rope_model(x, feeds, num_heads=3)
    assert "take" not in op_names(from_onnx(const_model))
    expected = np.asarray(ReferenceEvaluator(const_model).run(None, x)[0])
    (got,) = kit.run(from_onnx(const_model), [x["X"]])
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    assert op_names(from_onnx(rope_model({**x, **feeds}, num_heads=3))).count("take") == 2


def test_position_ids_broadcast_over_the_batch(kit):
    """position_ids of batch 1 serve every sample, as NumPy broadcasting does in the reference."""
    feeds = inputs(4, b=3)
    feeds["position_ids"] = feeds["position_ids"][:1]
    check(kit, feeds)


def test_symbolic_batch_and_sequence(kit):
    feeds = inputs(3, positions=True)
    dims = {"X": ["batch", "seq", 24], "position_ids": ["batch", "seq"]}
    check(kit, feeds, dims=dims, num_heads=3)
    feeds = inputs(4, positions=False)
    dims = {"X": ["batch", 3, "seq", 8], "cos_cache": ["batch", "seq", 4], "sin_cache": ["batch", "seq", 4]}
    check(kit, feeds, dims=dims)


def _rejects(model: Any, message: str) -> None:
    with pytest.raises(FrontendError, match=rf"RotaryEmbedding node 'rope' \(opset 23\): {message}"):
        from_onnx(model)


@pytest.mark.parametrize(
    "rank, rot, attrs, message",
    [
        (3, 0, {}, "a 3-D input needs the num_heads attribute"),
        (3, 0, {"num_heads": 5}, "the hidden size 24 is not divisible by num_heads 5"),
        (4, 0, {"rotary_embedding_dim": 5}, r"rotary_embedding_dim 5 must be even and in \(0, 8\]"),
        (4, 0, {"rotary_embedding_dim": 10}, r"rotary_embedding_dim 10 must be even and in \(0, 8\]"),
        (4, 6, {}, r"the last dim of cos_cache \(3\) does not match rotary_embedding_dim/2 \(4\)"),
    ],
)
def test_unsupported_configurations_are_rejected(rank, rot, attrs, message):
    _rejects(rope_model(inputs(rank, rot), **attrs), message)


def test_cache_rank_must_fit_position_ids():
    feeds = inputs(4, positions=False)
    feeds["position_ids"] = RNG.integers(0, 5, (2, 5)).astype(np.int64)
    _rejects(rope_model(feeds), r"cos_cache must be 2-D \(max_position, rot/2\) with position_ids, got rank 3")


def test_bfloat16_is_rejected():
    """bfloat16 is a dtype hetvm's runtime lacks."""
    feeds = inputs(4, positions=False)
    types = dict.fromkeys(("X", "cos_cache", "sin_cache"), TensorProto.BFLOAT16)
    _rejects(rope_model(feeds, types=types), "unsupported dtype 'bfloat16' of X")
