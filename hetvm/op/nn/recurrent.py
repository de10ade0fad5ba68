"""``nn.recurrent_scan`` (hetvm only): the recurrence of one direction of an ONNX
RNN, GRU or LSTM, all time steps in one kernel call.

Why an op: unrolled, every step is a handful of VM instructions (a slice, a
matmul, an add, a split, fused gate kernels, their allocations and kills), and
the VM's per-instruction cost dominates small recurrent layers: one kernel call
that loops over the steps is several times faster (``benchmarks/recurrent.py``)
and takes a symbolic sequence length. The input projection ``x W^T + b`` of all
steps stays outside, one matmul the planner and every device already know.

Arguments (fixed arity, so every call has one kernel signature):

* ``x_proj`` (steps, batch, gates * hidden): the projected inputs, biases added;
* ``r_t`` (hidden, gates * hidden): R transposed, gates in ONNX order;
* ``extra``: LSTM's peepholes (3 * hidden,) ``Pi, Po, Pf`` (read when
  ``peepholes``), GRU's ``Rbh`` (hidden,) (read with ``linear_before_reset``),
  otherwise unread;
* ``h0``, ``c0`` (batch, hidden): the initial state (``c0`` read by LSTM only);
* ``lens`` (batch,) int32/int64: the sequence lengths, read when ``masked``.

The result is ``(Y (steps, batch, hidden), h_n (batch, hidden), c_n (batch,
hidden))``; ``c_n`` is ``h_n`` for RNN and GRU.
"""

from __future__ import annotations

from typing import Any, Sequence

from ...ir import expr as E
from ...ir import prim as P
from ...ir import struct_info as S
from ...ir.op_registry import register_op
from ..base import common_vdevice, dims_conflict, fail, is_float, make_call, tensor_arg

__all__ = ["recurrent_scan", "GATES", "ACTIVATIONS"]

OP = "nn.recurrent_scan"
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
#: the activation functions the kernel computes (ONNX's spelling)
ACTIVATIONS = ("Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh",
               "HardSigmoid", "Elu", "Softsign", "Softplus")  # fmt: skip
ATTRS = ("kind", "activations", "alphas", "betas", "clip", "reverse", "linear_before_reset",
         "input_forget", "peepholes", "masked")  # fmt: skip


def _shape(sinfo: S.TensorStructInfo, rank: int, what: str) -> tuple[P.PrimExpr, ...] | None:
    if sinfo.ndim not in (-1, rank):
        raise fail(OP, f"{what} must be {rank}-D, got {S.describe(sinfo)}")
    return sinfo.shape


def _infer(call: E.Call) -> S.StructInfo:
    at = call.attrs
    kind = at["kind"]
    if kind not in GATES:
        raise fail(OP, f"kind must be RNN, GRU or LSTM, got {kind!r}")
    count = {"RNN": 1, "GRU": 2, "LSTM": 3}[kind]
    if len(at["activations"]) != count or len(at["alphas"]) != count or len(at["betas"]) != count:
        raise fail(OP, f"{kind} needs {count} activations with an alpha and a beta each, got {at['activations']}")
    for name in at["activations"]:
        if name not in ACTIVATIONS:
            raise fail(OP, f"unknown activation {name!r}")
    x = tensor_arg(call, 0, "x_proj")
    r_t = tensor_arg(call, 1, "r_t")
    args = [tensor_arg(call, i, what) for i, what in ((2, "extra"), (3, "h0"), (4, "c0"), (5, "lens"))]
    if x.dtype is not None and not is_float(x.dtype):
        raise fail(OP, f"x_proj must be floating point, got {x.dtype}")
    xs, rs, hs = _shape(x, 3, "x_proj"), _shape(r_t, 2, "r_t"), _shape(args[1], 2, "h0")
    out_shape = None
    if xs is not None and rs is not None:
        hidden = rs[0]
        width = P.mul(hidden, GATES[kind])
        if dims_conflict(rs[1], width) or dims_conflict(xs[2], width):
            raise fail(OP, f"x_proj {S.describe(x)} and r_t {S.describe(r_t)} do not fit {kind} "
                           f"({GATES[kind]} gates of hidden {P.to_str(hidden)})")  # fmt: skip
        if hs is not None and (dims_conflict(hs[0], xs[1]) or dims_conflict(hs[1], hidden)):
            raise fail(OP, f"h0 {S.describe(args[1])} must be (batch, hidden) = ({P.to_str(xs[1])}, {P.to_str(hidden)})")
        out_shape = (xs[0], xs[1], hidden)
    vdev = common_vdevice([x, r_t, *args])
    y = S.TensorStructInfo(out_shape, x.dtype, 3, vdev)
    state = S.TensorStructInfo(None if out_shape is None else out_shape[1:], x.dtype, 2, vdev)
    return S.TupleStructInfo([y, state, state])


register_op(OP, _infer, num_inputs=6, attr_names=ATTRS,
            description="one direction of an ONNX RNN/GRU/LSTM recurrence, every step in one call")  # fmt: skip


def recurrent_scan(
    x_proj: E.Expr, r_t: E.Expr, extra: E.Expr, h0: E.Expr, c0: E.Expr, lens: E.Expr, *,
    kind: str, activations: Sequence[str], alphas: Sequence[float], betas: Sequence[float],
    clip: float | None = None, reverse: bool = False, linear_before_reset: bool = False,
    input_forget: bool = False, peepholes: bool = False, masked: bool = False,
) -> E.Call:  # fmt: skip
    """The recurrence of one direction; see the module docstring for the arguments."""
    attrs: dict[str, Any] = {
        "kind": str(kind), "activations": tuple(str(a) for a in activations),
        "alphas": tuple(float(a) for a in alphas), "betas": tuple(float(b) for b in betas),
        "clip": None if clip is None else float(clip), "reverse": bool(reverse),
        "linear_before_reset": bool(linear_before_reset), "input_forget": bool(input_forget),
        "peepholes": bool(peepholes), "masked": bool(masked),
    }  # fmt: skip
    return make_call(OP, [x_proj, r_t, extra, h0, c0, lens], attrs)
