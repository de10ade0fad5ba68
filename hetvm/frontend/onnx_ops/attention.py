"""ONNX ``Attention`` (opsets 23-25), decomposed into matmul, softmax and masks.

hetvm has no attention op, so the converter spells out the operator's pattern
(the specification's diagram, and ``onnx/reference/ops/op_attention.py``)::

    Q*sqrt(scale) @ (K*sqrt(scale))^T -> softcap -> + bias -> softmax -> @ V

* 3-D inputs ``(batch, seq, heads*head_size)`` are split into heads (reshape +
  permute_dims) with ``q_num_heads``/``kv_num_heads``, and the output is merged back.
* Grouped-query attention (fewer kv heads than q heads, each kv head serving
  ``q_heads / kv_heads`` consecutive q heads) reshapes Q to ``(batch, kv_heads,
  group*q_seq, head_size)`` instead of repeating K and V.
* The bias is ``float mask + where(allowed, 0, -inf)``, where ``allowed`` is the
  conjunction of a boolean mask, the causal frontier ``j <= i + offset``, the
  sliding window (opset 25) and the ``nonpad_kv_seqlen`` padding mask. What is
  known at import time (causal and window masks with a static offset, constant
  masks) is computed with NumPy; the rest (masks given as inputs, per-batch
  ``nonpad_kv_seqlen``) becomes comparisons in the program.
* A query row whose bias is all ``-inf`` (no key allowed) gives zero
  probabilities and a zero output row, as the specification requires; the
  softmax never sees such a row (it would produce NaN).

``qk_matmul_output_mode=0`` returns the raw ``Q K^T`` product, as the
specification and its function body say (onnx.reference 1.23 returns the
softcapped scores there, which differs only when ``softcap > 0``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir import expr as E
from ...ir import prim as P
from ..onnx_context import ConvertContext, NodeView
from ..onnx_types import dtype_of
from .registry import converter

_FLOATS = ("float16", "float32", "float64")




def _split_heads(ctx: ConvertContext, x: E.Expr, heads: int, what: str) -> E.Expr:
    """(batch, seq, heads*size) -> (batch, heads, seq, size)."""
    b, s, hidden = ctx.known_shape(x, what)
    width = ctx.static_dim(hidden, f"the hidden size of {what}")
    if heads <= 0 or width % heads:
        raise ctx.error(f"{what}'s hidden size {width} is not divisible by {heads} heads")
    y = ctx.call("reshape", x, (b, s, P.IntImm(heads), P.IntImm(width // heads)))
    return ctx.call("permute_dims", y, [0, 2, 1, 3])


def _causal_window(
    q_len: int, kv_len: int, offset: int, causal: bool, left: int, right: int
) -> np.ndarray:
    """Allowed (q, kv) positions for a scalar offset: ``j <= i + offset`` when causal,
    ``i + offset - left <= j <= i + offset + right`` for each non-negative bound."""
    diff = np.arange(q_len)[:, None] + offset - np.arange(kv_len)[None, :]
    allowed = np.ones((q_len, kv_len), dtype=bool)
    if causal:
        allowed &= diff >= 0
    if left >= 0:
        allowed &= diff <= left
    if right >= 0:
        allowed &= -diff <= right
    return allowed


@converter("Attention", since=23)
def _attention(ctx: ConvertContext, node: NodeView) -> Any:
    """Scaled dot-product attention; see the module docstring for the decomposition."""
    q, k, v = ctx.tensor(0, "Q"), ctx.tensor(1, "K"), ctx.tensor(2, "V")
    dtype = ctx.dtype(q)
    if dtype not in _FLOATS:
        raise ctx.error(f"unsupported dtype {dtype} of Q (float16, float32 or float64)")
    for name, t in (("K", k), ("V", v)):
        if ctx.dtype(t) != dtype:
            raise ctx.error(f"{name} has dtype {ctx.dtype(t)}, Q has {dtype}; mixed dtypes are not supported")
    rank = ctx.rank(q)
    if rank not in (3, 4) or ctx.rank(k) != rank or ctx.rank(v) != rank:
        raise ctx.error(
            f"Q, K and V must all be 3-D or all 4-D, got ranks {rank}, {ctx.rank(k)}, {ctx.rank(v)}"
        )

    mode = int(node.attr("qk_matmul_output_mode", 0))
    if mode not in (0, 1, 2, 3):
        raise ctx.error(f"qk_matmul_output_mode must be 0, 1, 2 or 3, got {mode}")
    causal = bool(node.attr("is_causal", 0))
    softcap = float(node.attr("softcap", 0.0))
    left = int(node.attr("left_window_size", -1))
    right = int(node.attr("right_window_size", -1))
    if left < -1 or right < -1:
        raise ctx.error(f"window sizes must be -1 or non-negative, got left={left}, right={right}")
    attr_q_heads, attr_kv_heads = node.attr("q_num_heads"), node.attr("kv_num_heads")

    # -- heads: everything becomes (batch, heads, seq, size) --------------------------
    if rank == 3:
        if attr_q_heads is None or attr_kv_heads is None:
            raise ctx.error("3-D inputs need the q_num_heads and kv_num_heads attributes")
        q_heads, kv_heads = int(attr_q_heads), int(attr_kv_heads)
        q = _split_heads(ctx, q, q_heads, "Q")
        k = _split_heads(ctx, k, kv_heads, "K")
        v = _split_heads(ctx, v, kv_heads, "V")
    else:
        if node.opset >= 25 and (attr_q_heads is not None or attr_kv_heads is not None):
            raise ctx.error("q_num_heads and kv_num_heads must not be given for 4-D inputs")
        q_heads = ctx.static_dim(ctx.known_shape(q, "Q")[1], "Q's head count")
        kv_heads = ctx.static_dim(ctx.known_shape(k, "K")[1], "K's head count")
        pairs = ((attr_q_heads, q_heads), (attr_kv_heads, kv_heads))
        if any(a is not None and int(a) != n for a, n in pairs):
            raise ctx.error(
                f"q_num_heads/kv_num_heads ({attr_q_heads}/{attr_kv_heads}) contradict the 4-D "
                f"inputs' head counts ({q_heads}/{kv_heads})"
            )
    v_heads = ctx.static_dim(ctx.known_shape(v, "V")[1], "V's head count")
    if v_heads != kv_heads:
        raise ctx.error(f"K has {kv_heads} heads but V has {v_heads}")
    if q_heads % kv_heads:
        raise ctx.error(f"{q_heads} query heads cannot be grouped over {kv_heads} key/value heads")
    group = q_heads // kv_heads

    # -- the key/value cache -----------------------------------------------------------
    past_k, past_v = node.input(4), node.input(5)
    nonpad = node.input(6) if node.opset >= 24 else None
    if (past_k is None) != (past_v is None):
        raise ctx.error("past_key and past_value must be given together")
    if nonpad is not None and past_k is not None:
        raise ctx.error("nonpad_kv_seqlen cannot be combined with past_key/past_value")
    past_len = 0
    if past_k is not None:
        pk, pv = ctx.tensor(4, "past_key"), ctx.tensor(5, "past_value")
        if ctx.rank(pk) != 4 or ctx.rank(pv) != 4:
            raise ctx.error("past_key and past_value must be 4-D (batch, kv_heads, past_seq, size)")
        past_len = ctx.static_dim(ctx.known_shape(pk, "past_key")[2], "the past sequence length")
        k = ctx.call("concat", E.Tuple((pk, k)), 2)
        v = ctx.call("concat", E.Tuple((pv, v)), 2)
    present_k, present_v = k, v

    batch, _, q_seq, head = ctx.known_shape(q, "Q")
    q_len = ctx.static_dim(q_seq, "the query sequence length")
    kv_len = ctx.static_dim(ctx.known_shape(k, "K")[2], "the total key/value sequence length")
    head_size = ctx.static_dim(head, "the query head size")

    # -- scores ---------------------------------------------------------------------
    scale = node.attr("scale")
    scale = 1.0 / np.sqrt(head_size) if scale is None else float(scale)
    root = np.asarray(np.sqrt(scale), dtype=dtype)
    if root != 1:
        q = ctx.call("multiply", q, ctx.const(root))
        k = ctx.call("multiply", k, ctx.const(root))
    grouped_q = q if group == 1 else ctx.call("reshape", q, (batch, kv_heads, group * q_len, head))
    raw = ctx.call("matmul", grouped_q, ctx.call("permute_dims", k, [0, 1, 3, 2]))
    if group > 1:
        raw = ctx.call("reshape", raw, (batch, q_heads, q_len, kv_len))
    capped = raw
    if softcap > 0:
        c = ctx.const(softcap, dtype)
        capped = ctx.call("multiply", ctx.call("tanh", ctx.call("divide", raw, c)), c)

    bias, masked_rows = _bias(ctx, node, dtype, batch, q_len, kv_len, past_len, causal, left, right)
    scores = capped if bias is None else ctx.call("add", capped, bias)

    # -- softmax, with fully masked rows set to zero ------------------------------------
    precision = node.attr("softmax_precision")
    sm_dtype = dtype if precision is None else dtype_of(int(precision))
    if sm_dtype not in _FLOATS:
        raise ctx.error(f"unsupported dtype {sm_dtype} of softmax_precision (float16, float32 or float64)")
    x = scores if sm_dtype == dtype else ctx.call("astype", scores, sm_dtype)
    if masked_rows is not None:
        x = ctx.call("where", masked_rows, ctx.const(0, sm_dtype), x)
    probs = ctx.call("nn.softmax", x, -1)
    if masked_rows is not None:
        probs = ctx.call("where", masked_rows, ctx.const(0, sm_dtype), probs)
    if sm_dtype != dtype:
        probs = ctx.call("astype", probs, dtype)

    # -- output ---------------------------------------------------------------------
    v_size = ctx.known_shape(v, "V")[3]
    if group > 1:
        probs_g = ctx.call("reshape", probs, (batch, kv_heads, group * q_len, kv_len))
        y = ctx.call("matmul", probs_g, v)
        y = ctx.call("reshape", y, (batch, q_heads, q_len, v_size))
    else:
        y = ctx.call("matmul", probs, v)
    if rank == 3:
        y = ctx.call("permute_dims", y, [0, 2, 1, 3])
        y = ctx.call("reshape", y, (batch, q_len, P.mul(q_heads, v_size)))

    outs: list[Any] = [y, present_k, present_v, None]
    if node.num_outputs > 3 and node.output_names[3]:
        outs[3] = (raw, capped, scores, probs)[mode]
    return outs


def _bias(
    ctx: ConvertContext,
    node: NodeView,
    dtype: str,
    batch: P.PrimExpr,
    q_len: int,
    kv_len: int,
    past_len: int,
    causal: bool,
    left: int,
    right: int,
) -> tuple[E.Expr | None, E.Expr | None]:
    """The additive bias (None when it is all zeros) and the bool (..., q, 1) rows whose
    bias is all -inf (None when no row can be)."""
    allowed_np = np.ones((q_len, kv_len), dtype=bool)  # what is known at import time
    allowed_rt: list[E.Expr] = []  # run-time bool conditions
    float_np: np.ndarray | None = None
    float_rt: E.Expr | None = None

    mask = node.input(3)
    if mask is not None:
        mdtype = ctx.dtype(mask)
        if mdtype != "bool" and mdtype not in _FLOATS:
            raise ctx.error(f"unsupported dtype {mdtype} of attn_mask (bool or float)")
        mshape = ctx.known_shape(mask, "attn_mask")
        if len(mshape) > 4:
            raise ctx.error(f"attn_mask must have rank <= 4, got {len(mshape)}")
        last = ctx.static_dim(mshape[-1], "attn_mask's last dim") if mshape else kv_len
        if last > kv_len:
            raise ctx.error(f"attn_mask's last dim {last} exceeds the key/value length {kv_len}")
        pad_value = False if mdtype == "bool" else -np.inf
        const = ctx.folded(3)
        if const is not None:
            arr = np.asarray(const)
            if last < kv_len:  # padded as the specification says: False / -inf
                width = [(0, 0)] * (arr.ndim - 1) + [(0, kv_len - last)]
                arr = np.pad(arr, width, constant_values=pad_value)
            if mdtype == "bool":
                allowed_np = allowed_np & arr
            else:
                float_np = arr.astype(dtype)
        else:
            m = ctx.tensor(3, "attn_mask")
            if last < kv_len:
                pad_shape = (*mshape[:-1], P.IntImm(kv_len - last))
                pad = ctx.call("broadcast_to", ctx.const(pad_value, mdtype), pad_shape)
                m = ctx.call("concat", E.Tuple((m, pad)), len(mshape) - 1)
            if mdtype == "bool":
                allowed_rt.append(m)
            else:
                float_rt = m if mdtype == dtype else ctx.call("astype", m, dtype)

    windowed = left >= 0 or right >= 0
    nonpad = node.input(6) if node.opset >= 24 else None
    if nonpad is not None:
        n = ctx.tensor(6, "nonpad_kv_seqlen")
        if ctx.dtype(n) != "int64" or ctx.rank(n) != 1:
            raise ctx.error("nonpad_kv_seqlen must be a 1-D int64 tensor (batch,)")
        n = ctx.call("reshape", n, (batch, 1, 1, 1))
        # key j is a real token of sample b iff j < nonpad[b]
        allowed_rt.append(ctx.call("less", ctx.const(np.arange(kv_len, dtype=np.int64)), n))
        if causal or windowed:
            # offset[b] = nonpad[b] - q_len, so i + offset[b] - j = nonpad[b] - a[i, j]
            a = np.arange(kv_len)[None, :] - np.arange(q_len)[:, None] + q_len
            if causal:
                allowed_rt.append(ctx.call("less_equal", ctx.const(a.astype(np.int64)), n))
            if left >= 0:
                allowed_rt.append(ctx.call("less_equal", n, ctx.const((a + left).astype(np.int64))))
            if right >= 0:
                allowed_rt.append(ctx.call("less_equal", ctx.const((a - right).astype(np.int64)), n))
    elif causal or windowed:
        allowed_np = allowed_np & _causal_window(q_len, kv_len, past_len, causal, left, right)

    neg = np.asarray(-np.inf, dtype=dtype)
    zero = np.asarray(0, dtype=dtype)
    if not allowed_rt and float_rt is None:
        bias_np = np.where(allowed_np, zero, neg)
        if float_np is not None:
            bias_np = (bias_np + float_np).astype(dtype)
        if not bias_np.any():
            return None, None
        rows = np.isneginf(bias_np.max(axis=-1, keepdims=True))
        return ctx.const(bias_np), (ctx.const(rows) if rows.any() else None)

    terms: list[E.Expr] = []
    if allowed_rt or not allowed_np.all():
        cond: E.Expr | None = None if allowed_np.all() else ctx.const(allowed_np)
        for c in allowed_rt:
            cond = c if cond is None else ctx.call("logical_and", cond, c)
        assert cond is not None
        terms.append(ctx.call("where", cond, ctx.const(zero), ctx.const(neg)))
    if float_rt is not None:
        terms.append(float_rt)
    if float_np is not None:
        terms.append(ctx.const(float_np))
    bias = terms[0]
    for t in terms[1:]:
        bias = ctx.call("add", bias, t)
    row_max = ctx.call("max", bias, [-1], keepdims=True)
    return bias, ctx.call("equal", row_max, ctx.const(neg))
