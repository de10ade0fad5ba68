"""A small BERT-style ONNX model made with ``onnx.helper`` (tests of the command line).

What matters is what the CLI must get right without flags: int64 token ids
(``[batch, sequence]``, symbolic) feeding an embedding ``Gather`` through a
``Cast``/``Reshape``, token-type ids feeding a 2-row table, and an
``attention_mask`` turned into an additive mask (``(1 - mask) * -10000``).
Node names are set, so errors can be checked to name them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

VOCAB = 30
TYPES = 2
HIDDEN = 8


def bert_like_model(vocab: int = VOCAB, types: int = TYPES, hidden: int = HIDDEN) -> Any:
    """ids, token types, mask ``[batch, sequence]`` -> hidden states ``[batch, sequence, hidden]``."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def init(name: str, arr: np.ndarray) -> Any:
        return numpy_helper.from_array(arr, name)

    inits = [
        init("word_embeddings", rng.standard_normal((vocab, hidden)).astype(np.float32)),
        init("token_type_embeddings", rng.standard_normal((types, hidden)).astype(np.float32)),
        init("one", np.array(1.0, np.float32)),
        init("neg_big", np.array(-10000.0, np.float32)),
        init("flat", np.array([-1], np.int64)),
        init("mask_axes", np.array([1], np.int64)),
        init("scale", np.array(1.0 / np.sqrt(hidden), np.float32)),
    ]
    h = helper.make_node
    nodes = [
        # ids are cast (int64 -> int32 -> int64) and flattened before the lookup, as exporters do
        h("Cast", ["input_ids"], ["ids32"], name="ids_cast", to=TensorProto.INT32),
        h("Cast", ["ids32"], ["ids64"], name="ids_cast_back", to=TensorProto.INT64),
        h("Shape", ["input_ids"], ["ids_shape"], name="ids_shape"),
        h("Reshape", ["ids64", "flat"], ["ids_flat"], name="ids_flatten"),
        h("Gather", ["word_embeddings", "ids_flat"], ["words_flat"], name="word_embedding", axis=0),
        h("Concat", ["ids_shape", "hidden_dim"], ["emb_shape"], name="emb_shape", axis=0),
        h("Reshape", ["words_flat", "emb_shape"], ["words"], name="words_reshape"),
        h("Gather", ["token_type_embeddings", "token_type_ids"], ["types"], name="token_type_embedding", axis=0),
        h("Add", ["words", "types"], ["emb"], name="emb_add"),
        # additive attention mask: (1 - mask) * -10000, broadcast over the query axis
        h("Cast", ["attention_mask"], ["mask_f"], name="mask_cast", to=TensorProto.FLOAT),
        h("Sub", ["one", "mask_f"], ["inv_mask"], name="mask_invert"),
        h("Mul", ["inv_mask", "neg_big"], ["mask_add"], name="mask_scale"),
        h("Unsqueeze", ["mask_add", "mask_axes"], ["mask_b"], name="mask_unsqueeze"),
        h("Transpose", ["emb"], ["emb_t"], name="keys_t", perm=[0, 2, 1]),
        h("MatMul", ["emb", "emb_t"], ["scores_raw"], name="scores"),
        h("Mul", ["scores_raw", "scale"], ["scores_scaled"], name="scores_scale"),
        h("Add", ["scores_scaled", "mask_b"], ["scores_masked"], name="scores_mask"),
        h("Softmax", ["scores_masked"], ["probs"], name="attention_softmax", axis=-1),
        h("MatMul", ["probs", "emb"], ["last_hidden_state"], name="context"),
    ]
    inits.append(init("hidden_dim", np.array([hidden], np.int64)))
    dims = ["batch", "sequence"]
    graph = helper.make_graph(
        nodes,
        "bert_like",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, dims),
            helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, dims),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, dims),
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [*dims, hidden])],
        initializer=inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def reference(ids: np.ndarray, types: np.ndarray, mask: np.ndarray, model: Any) -> np.ndarray:
    """The model's output computed with NumPy from its own initializers."""
    from onnx import numpy_helper

    w = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    emb = w["word_embeddings"][ids] + w["token_type_embeddings"][types]
    scores = emb @ emb.transpose(0, 2, 1) * w["scale"] + ((1 - mask.astype(np.float32)) * -10000.0)[:, None, :]
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    probs = scores / scores.sum(-1, keepdims=True)
    return probs @ emb
