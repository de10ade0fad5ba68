"""FoldScaleAxis: fold per-output-channel scales (and shifts) into the convolution.

Why: imported CNNs run batch normalisation with constant statistics as a
``multiply`` and an ``add`` by per-channel constants right after a
convolution (some models stack two of them, or add the convolution's own bias
first). Each is a full pass over the activation in its own kernel, while the
scale is free when it is baked into the weights, which is what ONNX Runtime
does. For ``y = nn.conv2d(x, W)`` (NCHW data, OIHW weight, any ``groups``)
followed by a chain of ``multiply``/``add`` by per-channel constants::

    (conv(x, W) + b1) * s1 * s2 + b2  ==  conv(x, W * (s1 * s2)[o]) + (b1 * s1 * s2 + b2)

so the chain becomes one convolution whose weight is a new Constant (computed
with NumPy at compile time, in float64, stored in the weight's dtype) and at
most one ``add`` of a per-channel constant. Results agree with the unfolded
program up to float rounding.

Folds only when it is exact in that sense: the weight and every scale/shift
are Constants of the convolution's (floating-point) dtype; a scale or shift
broadcasts as a scalar, ``(C,1,1)`` or ``(1,C,1,1)`` (one value per output
channel, never growing the result); scales are finite; the convolution's
result and every value inside the chain have no other use (the unscaled value
would still be needed) and the chain stays inside one binding block. The
chain stops at the first step that does not qualify; what it already covered
is folded. A chain that would not save a kernel (just one ``add``) is left
alone, so running the pass twice equals running it once. The input module is
never mutated: new bindings, constants and functions are built.
"""

from __future__ import annotations

import numpy as np

from ..ir import expr as E
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..op.base import make_call
from ._conv_chain import ConvChainRewriter, nchw_float_conv, op_name, tensor_sinfo, use_counts
from .pass_infra import FunctionPass, PassContext


def _foldable_conv(value: E.Expr) -> tuple[E.Constant, int, str] | None:
    """(weight, out channels, dtype) when ``value`` is a conv2d whose weight can take a scale."""
    found = nchw_float_conv(value)
    if found is None:
        return None
    call, channels, dtype = found
    weight = call.args[1]
    if not isinstance(weight, E.Constant) or weight.data.ndim != 4 or weight.data.shape[0] != channels:
        return None
    return weight, channels, dtype


def _channel_vector(const: E.Expr, channels: int, dtype: str) -> np.ndarray | None:
    """The constant as one float64 value per channel, when it broadcasts as (1,C,1,1)."""
    if not isinstance(const, E.Constant) or str(const.data.dtype) != dtype:
        return None
    data = const.data
    if data.ndim > 4:
        return None
    shape = (1,) * (4 - data.ndim) + data.shape
    if shape[0] != 1 or shape[2] != 1 or shape[3] != 1 or shape[1] not in (1, channels):
        return None
    vec = data.reshape(shape[1]).astype(np.float64)
    return np.broadcast_to(vec, (channels,)).copy()


def _affine_step(value: E.Expr, cur: E.Var) -> tuple[str, E.Expr] | None:
    """``("multiply"|"add", constant operand)`` when ``value`` is ``cur`` op constant."""
    name = op_name(value)
    if name not in ("multiply", "add"):
        return None
    call: E.Call = value  # type: ignore[assignment]
    if len(call.args) != 2 or call.sinfo_args:
        return None
    a, b = call.args
    if a is cur and b is not cur:
        return name, b  # type: ignore[return-value]
    if b is cur and a is not cur:
        return name, a  # type: ignore[return-value]
    return None


class _Plan:
    """One chain to rewrite: the conv binding, the bindings it replaces, the result."""

    __slots__ = ("conv", "end", "weight", "bias")

    def __init__(self, conv: E.VarBinding, end: E.VarBinding, weight: E.Constant, bias: E.Constant | None):
        self.conv = conv
        self.end = end
        self.weight = weight
        self.bias = bias


class _Folder(ConvChainRewriter):
    def match_conv(self, value: E.Expr) -> tuple[E.Constant, int, str] | None:
        return _foldable_conv(value)

    def chain(
        self, conv: E.VarBinding, info: tuple[E.Constant, int, str], user: dict[E.Var, E.VarBinding]
    ) -> _Plan | None:
        weight, channels, dtype = info
        scale = np.ones(channels)
        bias: np.ndarray | None = None
        n_mul = n_add = 0
        cur, end = conv.var, None
        while self.uses.get(cur, 0) == 1 and cur in user:
            nxt = user[cur]
            step = _affine_step(nxt.value, cur)
            if step is None:
                break
            kind, operand = step
            vec = _channel_vector(operand, channels, dtype)
            out = tensor_sinfo(nxt.var)
            if vec is None or out is None or out.dtype != dtype:
                break
            if kind == "multiply":
                if not np.all(np.isfinite(vec)):
                    break
                scale = scale * vec
                bias = None if bias is None else bias * vec
                n_mul += 1
            else:
                bias = vec if bias is None else bias + vec
                n_add += 1
            cur, end = nxt.var, nxt
        if end is None or (n_mul == 0 and n_add < 2):
            return None
        if n_mul:
            folded = (weight.data.astype(np.float64) * scale[:, None, None, None]).astype(dtype)
            new_weight = E.Constant(folded, struct_info=_like(weight, folded))
        else:
            new_weight = weight
        new_bias = None
        if bias is not None:
            arr = bias.astype(dtype).reshape(channels, 1, 1)
            new_bias = E.Constant(arr, struct_info=_like(weight, arr))
        return _Plan(conv, end, new_weight, new_bias)

    def emit_plan(self, plan: _Plan, dataflow: bool) -> None:
        conv: E.Call = plan.conv.value  # type: ignore[assignment]
        data = self.visit_expr(conv.args[0])
        if data is conv.args[0]:  # same input, weight of the same shape, dtype and vdevice
            new_conv = E.replace(conv, args=(data, plan.weight))
        else:
            new_conv = self.normalize(E.replace(conv, args=(data, plan.weight), struct_info=None))
        if plan.bias is None:
            value = new_conv
        else:
            tmp = self.emit(new_conv, plan.conv.var.name_hint, dataflow=dataflow)
            value = make_call("add", [tmp, plan.bias], span=plan.end.value.span)
        var = self._retype(plan.end.var, value)
        self.emit_binding(E.VarBinding(var, value, span=plan.end.span))


def _like(weight: E.Constant, data: np.ndarray) -> S.TensorStructInfo:
    """Struct info for a new constant, on the weight's vdevice (if it names one)."""
    vdev = weight.struct_info.vdevice if isinstance(weight.struct_info, S.TensorStructInfo) else None
    return S.TensorStructInfo(data.shape, str(data.dtype), vdevice=vdev)


class FoldScaleAxis(FunctionPass):
    """Folds per-channel ``multiply``/``add`` chains after ``nn.conv2d`` into its weight."""

    required_ops = frozenset({"nn.conv2d"})

    def __init__(self) -> None:
        super().__init__("FoldScaleAxis")

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        if not isinstance(func, E.Function):
            return func
        return _Folder(mod, use_counts(func)).visit_expr(func)  # type: ignore[return-value]
