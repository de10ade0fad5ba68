"""FuseConvEpilogue: ``nn.conv2d`` + per-channel bias ``add`` + ``nn.relu`` as one op.

Why: after FoldScaleAxis an imported CNN's convolution is followed by one
``add`` of a per-output-channel constant (its bias and the batch norm's shift)
and usually a ``nn.relu``; each is a full pass over the activation in its own
kernel, with its own output buffer. ``nn.conv2d_bias_act`` does both in place
on the convolution's output. The pattern, inside one binding block::

    y = nn.conv2d(x, W, ...)          # NCHW data, OIHW weight, NCHW result, float
    z = add(y, b)                     # optional; b a Constant of shape (C,1,1) or (1,C,1,1)
    r = nn.relu(z)                    # optional (of y when there is no add)

becomes ``r = nn.conv2d_bias_act(x, W, b', ..., activation="relu"|"none")``
with ``b'`` a Constant of shape ``(C,)`` (zeros when there was no ``add``).
Fuses only when every intermediate (``y``, and ``z`` when a relu follows) has
exactly one use in the function, the bias has the convolution's dtype and
the ``add`` does not grow the result; a lone convolution is left alone, and
the fused op is never matched again, so running the pass twice equals running
it once. The result keeps the last binding's variable. The input module is
never mutated.
"""

from __future__ import annotations

import numpy as np

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..op.base import make_call
from ._conv_chain import ConvChainRewriter, nchw_float_conv, op_name, tensor_sinfo, use_counts
from .pass_infra import FunctionPass, PassContext

__all__ = ["FuseConvEpilogue"]

_CONV_ATTRS = (
    "strides",
    "padding",
    "dilation",
    "groups",
    "data_layout",
    "kernel_layout",
    "out_layout",
    "out_dtype",
)


def _fusable_conv(value: E.Expr) -> tuple[int, str] | None:
    """(output channels, dtype) when ``value`` is a conv2d the fused kernel runs."""
    found = nchw_float_conv(value)
    return None if found is None else found[1:]


def _bias_vector(value: E.Expr, cur: E.Var, channels: int, dtype: str) -> np.ndarray | None:
    """The bias as a (C,) array when ``value`` is ``add(cur, b)`` / ``add(b, cur)``
    with ``b`` a per-channel Constant of ``dtype`` that does not grow the result."""
    if op_name(value) != "add":
        return None
    call: E.Call = value  # type: ignore[assignment]
    if len(call.args) != 2 or call.sinfo_args:
        return None
    a, b = call.args
    const = b if a is cur else a if b is cur else None
    if not isinstance(const, E.Constant) or const is cur:
        return None
    data = const.data
    if str(data.dtype) != dtype or data.shape not in ((channels, 1, 1), (1, channels, 1, 1)):
        return None
    out, src = tensor_sinfo(call), tensor_sinfo(cur)
    if out is None or src is None or out.dtype != dtype or out.shape is None or src.shape is None:
        return None
    if len(out.shape) != 4 or any(not P.prove_equal(x, y) for x, y in zip(out.shape, src.shape)):
        return None
    return np.ascontiguousarray(data.reshape(channels))


def _vdevice(var: E.Var) -> object:
    sinfo = tensor_sinfo(var)
    return sinfo.vdevice if sinfo is not None else None


def _is_relu_of(value: E.Expr, cur: E.Var) -> bool:
    if op_name(value) != "nn.relu":
        return False
    call: E.Call = value  # type: ignore[assignment]
    return len(call.args) == 1 and call.args[0] is cur and not call.sinfo_args


class _Plan:
    __slots__ = ("conv", "end", "bias", "activation")

    def __init__(self, conv: E.VarBinding, end: E.VarBinding, bias: np.ndarray, activation: str):
        self.conv = conv
        self.end = end
        self.bias = bias
        self.activation = activation


class _Fuser(ConvChainRewriter):
    def match_conv(self, value: E.Expr) -> tuple[int, str] | None:
        return _fusable_conv(value)

    def chain(
        self, conv: E.VarBinding, info: tuple[int, str], user: dict[E.Var, E.VarBinding]
    ) -> _Plan | None:
        channels, dtype = info
        cur, end = conv.var, None
        bias: np.ndarray | None = None
        activation = "none"
        if self.uses.get(cur, 0) == 1 and cur in user:
            nxt = user[cur]
            bias = _bias_vector(nxt.value, cur, channels, dtype)
            if bias is not None:
                cur, end = nxt.var, nxt
        if self.uses.get(cur, 0) == 1 and cur in user and _is_relu_of(user[cur].value, cur):
            out = tensor_sinfo(user[cur].var)
            if out is not None and out.dtype == dtype:
                end = user[cur]
                activation = "relu"
        if end is None:
            return None
        chain = [conv.var] + ([user[conv.var].var] if user[conv.var] is not end else []) + [end.var]
        if len({_vdevice(v) for v in chain}) > 1:  # a pin (vdevice) on one value only: keep it
            return None
        if bias is None:
            bias = np.zeros(channels, dtype=dtype)
        return _Plan(conv, end, bias, activation)

    def emit_plan(self, plan: _Plan, dataflow: bool) -> None:
        conv: E.Call = plan.conv.value  # type: ignore[assignment]
        data = self.visit_expr(conv.args[0])
        weight = self.visit_expr(conv.args[1])
        vdev = tensor_sinfo(conv.args[1]).vdevice  # type: ignore[union-attr]
        bias = E.Constant(plan.bias, struct_info=S.TensorStructInfo(plan.bias.shape, str(plan.bias.dtype),
                                                                    vdevice=vdev))  # fmt: skip
        attrs = {k: conv.attrs[k] for k in _CONV_ATTRS}
        attrs["activation"] = plan.activation
        value = make_call(
            "nn.conv2d_bias_act", [data, weight, bias], attrs, span=plan.end.value.span
        )
        if data is conv.args[0] and weight is conv.args[1]:
            # same inputs: the result is the replaced value's (shape, dtype and
            # vdevice -- a vdevice in struct info is a pin the planner reads)
            value = E.replace(value, struct_info=plan.end.value.struct_info)
        var = self._retype(plan.end.var, value)
        self.emit_binding(E.VarBinding(var, value, span=plan.end.span))


class FuseConvEpilogue(FunctionPass):
    """Fuses ``nn.conv2d`` with a following per-channel bias ``add`` and ``nn.relu``."""

    def __init__(self) -> None:
        super().__init__("FuseConvEpilogue")

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        if not isinstance(func, E.Function):
            return func
        return _Fuser(mod, use_counts(func)).visit_expr(func)  # type: ignore[return-value]
