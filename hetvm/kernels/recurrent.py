"""The kernel of ``nn.recurrent_scan``: one direction of an RNN/GRU/LSTM, a loop over
the time steps in one call (NumPy or CuPy through ``xp``). Per step: one matmul
of the hidden state with ``R^T`` and the gate arithmetic of the ONNX equations;
the inputs' projection was done before the call."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .common import store
from .registry import register_kernel


def _activation(xp: Any, name: str, alpha: float, beta: float) -> Callable[[Any], Any]:
    table: dict[str, Callable[[Any], Any]] = {
        "Tanh": xp.tanh,
        "Sigmoid": lambda v: xp.tanh(v * 0.5) * 0.5 + 0.5,  # = 1 / (1 + e^-v), never overflowing
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


def _check_lengths(lens: Any, steps: int, batch: int) -> None:
    """``sequence_lens`` known only at run time: one entry per batch row, each in
    [0, steps] (ONNX Runtime refuses others too); the VM names the node."""
    values = np.asarray(lens.get() if hasattr(lens, "get") else lens).reshape(-1)
    if values.size != batch:
        raise ValueError(f"sequence_lens has {values.size} entries for a batch of {batch}")
    bad = np.flatnonzero((values < 0) | (values > steps))
    if bad.size:
        b = int(bad[0])
        raise ValueError(
            f"sequence_lens[{b}] = {int(values[b])} is outside [0, {steps}] (the sequence length); "
            f"sequence_lens = {values.tolist()}"
        )


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
    if masked:
        _check_lengths(lens, steps, h0.shape[0])
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
                zr = f(x[:, : 2 * n] + m[:, : 2 * n])  # z and r side by side: one pass
                z, r = zr[:, :n], zr[:, n:]
                cand = g(x[:, 2 * n :] + r * (m[:, 2 * n :] + extra))
            else:
                zr = f(x[:, : 2 * n] + h @ r_zr)
                z, r = zr[:, :n], zr[:, n:]
                cand = g(x[:, 2 * n :] + (r * h) @ r_h)
            new_h = cand + z * (h - cand)
            new_c = None
        else:
            f, g, h_act = acts
            gates = x + h @ r_t
            if attrs.get("peepholes"):
                i = f(gates[:, :n] + extra[:n] * c)
                forget = (1 - i) if attrs.get("input_forget") else f(gates[:, 2 * n : 3 * n] + extra[2 * n :] * c)
                new_c = forget * c + i * g(gates[:, 3 * n :])
                o = f(gates[:, n : 2 * n] + extra[n : 2 * n] * new_c)
            else:  # i, o, f side by side: one pass of f
                iof = f(gates[:, : 3 * n])
                i, o = iof[:, :n], iof[:, n : 2 * n]
                forget = (1 - i) if attrs.get("input_forget") else iof[:, 2 * n :]
                new_c = forget * c + i * g(gates[:, 3 * n :])
            new_h = o * h_act(new_c)
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
