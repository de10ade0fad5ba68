"""The kernel of ``nn.recurrent_scan``: one direction of an RNN/GRU/LSTM, a loop over
the time steps in one call (NumPy or CuPy through ``xp``). Per step: one matmul
of the hidden state with ``R^T`` and the gate arithmetic of the ONNX equations;
the inputs' projection was done before the call."""

from __future__ import annotations

from typing import Any, Callable

from .common import store
from .registry import register_kernel


def _activation(xp: Any, name: str, alpha: float, beta: float) -> Callable[[Any], Any]:
    if name == "Sigmoid":
        def sigmoid(v: Any) -> Any:  # 1 / (1 + e^-v) without overflow: exp of -|v| only
            e = xp.exp(-xp.abs(v))
            return xp.where(v >= 0, 1 / (1 + e), e / (1 + e))
        return sigmoid
    table: dict[str, Callable[[Any], Any]] = {
        "Tanh": xp.tanh,
        "Relu": lambda v: xp.maximum(v, 0),
        "Affine": lambda v: v * alpha + beta,
        "LeakyRelu": lambda v: xp.where(v >= 0, v, v * alpha),
        "ThresholdedRelu": lambda v: xp.where(v > alpha, v, 0),
        "ScaledTanh": lambda v: xp.tanh(v * beta) * alpha,
        "HardSigmoid": lambda v: xp.clip(v * alpha + beta, 0, 1),
        "Elu": lambda v: xp.where(v >= 0, v, (xp.exp(xp.minimum(v, 0)) - 1) * alpha),
        "Softsign": lambda v: v / (1 + xp.abs(v)),
        "Softplus": lambda v: xp.maximum(v, 0) + xp.log1p(xp.exp(-xp.abs(v))),
    }
    return table[name]


def _bounded(xp: Any, fn: Callable[[Any], Any], clip: float | None, dtype: Any) -> Callable[[Any], Any]:
    """``fn`` of the input clipped to [-clip, clip] (ONNX's ``clip``), in ``dtype``."""
    if clip is None:
        return lambda v: fn(v).astype(dtype, copy=False)
    return lambda v: fn(xp.clip(v, -clip, clip)).astype(dtype, copy=False)


@register_kernel("nn.recurrent_scan")
def recurrent_scan(xp: Any, attrs: dict, x_proj: Any, r_t: Any, extra: Any, h0: Any, c0: Any, lens: Any,
                   y: Any, h_out: Any, c_out: Any) -> None:  # fmt: skip
    kind = attrs["kind"]
    dtype = x_proj.dtype
    clip = attrs.get("clip")
    # clip bounds the gates' inputs, not the LSTM's h(C) (ONNX Runtime's reading)
    acts = [_bounded(xp, _activation(xp, name, a, b), None if k == 2 else clip, dtype)
            for k, (name, a, b) in enumerate(zip(attrs["activations"], attrs["alphas"], attrs["betas"]))]  # fmt: skip
    steps = x_proj.shape[0]
    n = r_t.shape[0]
    h = h0.copy()
    c = c0.copy() if kind == "LSTM" else None
    masked = bool(attrs.get("masked"))
    lens_col = lens.reshape(-1, 1) if masked else None
    order = range(steps - 1, -1, -1) if attrs.get("reverse") else range(steps)
    if kind == "GRU" and not attrs.get("linear_before_reset"):
        r_zr, r_h = xp.ascontiguousarray(r_t[:, : 2 * n]), xp.ascontiguousarray(r_t[:, 2 * n :])
    for t in order:
        x = x_proj[t]
        if kind == "RNN":
            new_h = acts[0](x + h @ r_t)
            new_c = None
        elif kind == "GRU":
            f, g = acts
            if attrs.get("linear_before_reset"):
                m = h @ r_t
                z = f(x[:, :n] + m[:, :n])
                r = f(x[:, n : 2 * n] + m[:, n : 2 * n])
                cand = g(x[:, 2 * n :] + r * (m[:, 2 * n :] + extra))
            else:
                m = h @ r_zr
                z = f(x[:, :n] + m[:, :n])
                r = f(x[:, n:2 * n] + m[:, n:])
                cand = g(x[:, 2 * n :] + (r * h) @ r_h)
            new_h = cand + z * (h - cand)
            new_c = None
        else:
            f, g, h_act = acts
            gates = x + h @ r_t
            pre_i, pre_o, pre_f, pre_c = (gates[:, k * n : (k + 1) * n] for k in range(4))
            if attrs.get("peepholes"):
                pre_i = pre_i + extra[:n] * c
                pre_f = pre_f + extra[2 * n :] * c
            i = f(pre_i)
            forget = (1 - i) if attrs.get("input_forget") else f(pre_f)
            new_c = forget * c + i * g(pre_c)
            if attrs.get("peepholes"):
                pre_o = pre_o + extra[n : 2 * n] * new_c
            new_h = f(pre_o) * h_act(new_c)
        if masked:
            live = t < lens_col
            store(y[t], xp.where(live, new_h, 0))
            h = xp.where(live, new_h, h)
            if new_c is not None:
                c = xp.where(live, new_c, c)
        else:
            store(y[t], new_h)
            h, c = new_h, new_c
    store(h_out, h)
    store(c_out, c if c is not None else h)
