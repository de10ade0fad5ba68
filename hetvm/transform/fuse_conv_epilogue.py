"""FuseConvEpilogue: ``nn.conv2d`` + per-channel bias ``add`` + residual ``add`` +
``nn.relu`` as one op.

Why: after FoldScaleAxis an imported CNN's convolution is followed by one
``add`` of a per-output-channel constant (its bias and the batch norm's shift),
in a ResNet block by an ``add`` of the shortcut tensor, and usually by a
``nn.relu``; each is a full pass over the activation in its own kernel, with
its own output buffer. The fused ops do them in place on the convolution's
output. The pattern, inside one binding block::

    y = nn.conv2d(x, W, ...)          # NCHW data, OIHW weight, NCHW result, float
    z = add(y, b)                     # optional; b a Constant of shape (C,1,1) or (1,C,1,1)
    s = add(z, t)                     # optional; t any tensor of exactly s's shape and dtype
    r = nn.relu(s)                    # optional (of the last value before it)

becomes ``r = nn.conv2d_bias_act(x, W, b', ..., activation="relu"|"none")``,
or ``r = nn.conv2d_bias_add_act(x, W, b', t, ..., activation=...)`` when there
is a residual ``t``, with ``b'`` a Constant of shape ``(C,)`` (zeros when there
was no bias ``add``). Either operand order of an ``add`` matches. A chain may
also start at a ``nn.conv2d_bias_act`` with ``activation="none"`` (its bias
kept): then only the residual ``add`` and the ``nn.relu`` are taken in.

Fuses only when it is exact and safe: every intermediate (the convolution's
result and each value but the last) has exactly one use in the function; the
bias and the residual have the convolution's dtype; no ``add`` grows the
result (the residual's shape equals the result's, no broadcasting); the chain
stays in one binding block and does not take in a binding another chain
already took (in ``relu(conv_a + conv_b)`` the first convolution in block
order gets the ``add``, the second is its residual). The residual is read
after the kernel has written its output; the memory planner never places an
op's output over one of its inputs (see ``hetvm/kernels/fused.py``). A lone
convolution is left alone, and a finished fused op is never matched again, so
running the pass twice equals running it once. The result keeps the last
binding's variable. The input module is never mutated.
"""

from __future__ import annotations

import numpy as np

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..op.base import make_call
from ..op.nn.conv import ATTRS as CONV_ATTRS
from ._conv_chain import (
    FLOAT_DTYPES,
    ConvChainRewriter,
    nchw_float_conv,
    op_name,
    tensor_sinfo,
    use_counts,
)
from .pass_infra import FunctionPass, PassContext

__all__ = ["FuseConvEpilogue"]

_FUSED = "nn.conv2d_bias_act"
_FUSED_RESIDUAL = "nn.conv2d_bias_add_act"


class _Start:
    """Where a chain starts: a bare conv2d (a bias may follow) or an unfinished
    ``nn.conv2d_bias_act`` (its bias is kept)."""

    __slots__ = ("channels", "dtype", "bias")

    def __init__(self, channels: int, dtype: str, bias: E.Expr | None):
        self.channels = channels
        self.dtype = dtype
        self.bias = bias


def _chain_start(value: E.Expr) -> _Start | None:
    found = nchw_float_conv(value)
    if found is not None:
        return _Start(found[1], found[2], None)
    if op_name(value) != _FUSED:
        return None
    call: E.Call = value  # type: ignore[assignment]
    at = call.attrs
    if len(call.args) != 3 or call.sinfo_args or at.get("activation") != "none":
        return None
    if (at.get("data_layout"), at.get("kernel_layout"), at.get("out_layout")) != ("NCHW", "OIHW", "NCHW"):
        return None
    out = tensor_sinfo(call)
    if out is None or out.dtype not in FLOAT_DTYPES or out.shape is None or out.ndim != 4:
        return None
    channels = P.const_value(out.shape[1])
    return None if channels is None else _Start(channels, out.dtype, call.args[2])


def _add_operands(value: E.Expr, cur: E.Var) -> E.Expr | None:
    """The other operand when ``value`` is ``add(cur, t)`` or ``add(t, cur)``."""
    if op_name(value) != "add":
        return None
    call: E.Call = value  # type: ignore[assignment]
    if len(call.args) != 2 or call.sinfo_args:
        return None
    a, b = call.args
    if a is cur and b is not cur:
        return b
    if b is cur and a is not cur:
        return a
    return None


def _same_shape(a: S.TensorStructInfo | None, b: S.TensorStructInfo | None) -> bool:
    """Both known, of equal rank and provably equal dimensions."""
    if a is None or b is None or a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return False
    return all(P.prove_equal(x, y) for x, y in zip(a.shape, b.shape))


def _bias_vector(value: E.Expr, cur: E.Var, channels: int, dtype: str) -> np.ndarray | None:
    """The bias as a (C,) array when ``value`` is ``add(cur, b)`` / ``add(b, cur)``
    with ``b`` a per-channel Constant of ``dtype`` that does not grow the result."""
    const = _add_operands(value, cur)
    if not isinstance(const, E.Constant):
        return None
    data = const.data
    if str(data.dtype) != dtype or data.shape not in ((channels, 1, 1), (1, channels, 1, 1)):
        return None
    out = tensor_sinfo(value)
    if out is None or out.dtype != dtype or out.ndim != 4 or not _same_shape(out, tensor_sinfo(cur)):
        return None
    return np.ascontiguousarray(data.reshape(channels))


def _residual(value: E.Expr, cur: E.Var, dtype: str) -> E.Expr | None:
    """``t`` when ``value`` is ``add(cur, t)`` / ``add(t, cur)`` with ``t`` a tensor
    of exactly ``cur``'s shape and ``dtype`` (the ``add`` broadcasts nothing)."""
    other = _add_operands(value, cur)
    if other is None:
        return None
    src, res, out = tensor_sinfo(cur), tensor_sinfo(other), tensor_sinfo(value)
    if res is None or out is None or res.dtype != dtype or out.dtype != dtype:
        return None
    if not (_same_shape(res, src) and _same_shape(out, src)):
        return None
    return other


def _vdevice(var: E.Var) -> object:
    sinfo = tensor_sinfo(var)
    return sinfo.vdevice if sinfo is not None else None


def _is_relu_of(value: E.Expr, cur: E.Var) -> bool:
    if op_name(value) != "nn.relu":
        return False
    call: E.Call = value  # type: ignore[assignment]
    return len(call.args) == 1 and call.args[0] is cur and not call.sinfo_args


class _Plan:
    __slots__ = ("conv", "end", "bias", "residual", "activation")

    def __init__(
        self,
        conv: E.VarBinding,
        end: E.VarBinding,
        bias: np.ndarray | E.Expr,
        residual: E.Expr | None,
        activation: str,
    ):
        self.conv = conv
        self.end = end
        self.bias = bias
        self.residual = residual
        self.activation = activation


class _Fuser(ConvChainRewriter):
    def match_conv(self, value: E.Expr) -> _Start | None:
        return _chain_start(value)

    def _next(self, cur: E.Var, user: dict[E.Var, E.VarBinding]) -> E.VarBinding | None:
        """The single reader of ``cur`` in this block, unless another chain took it."""
        if self.uses.get(cur, 0) != 1 or cur not in user:
            return None
        nxt = user[cur]
        return None if nxt.var in self.claimed else nxt

    def chain(self, conv: E.VarBinding, start: _Start, user: dict[E.Var, E.VarBinding]) -> _Plan | None:
        channels, dtype = start.channels, start.dtype
        cur, end = conv.var, None
        links = [conv.var]
        bias: np.ndarray | E.Expr | None = start.bias
        residual: E.Expr | None = None
        activation = "none"
        nxt = self._next(cur, user)
        if nxt is not None and bias is None:
            vec = _bias_vector(nxt.value, cur, channels, dtype)
            if vec is not None:
                bias, cur, end = vec, nxt.var, nxt
                links.append(cur)
                nxt = self._next(cur, user)
        if nxt is not None:
            residual = _residual(nxt.value, cur, dtype)
            if residual is not None:
                cur, end = nxt.var, nxt
                links.append(cur)
                nxt = self._next(cur, user)
        if nxt is not None and _is_relu_of(nxt.value, cur):
            out = tensor_sinfo(nxt.var)
            if out is not None and out.dtype == dtype:
                end, activation = nxt, "relu"
                links.append(nxt.var)
        if end is None:
            return None
        if len({_vdevice(v) for v in links}) > 1:  # a pin (vdevice) on one value only: keep it
            return None
        if bias is None:
            bias = np.zeros(channels, dtype=dtype)
        return _Plan(conv, end, bias, residual, activation)

    def emit_plan(self, plan: _Plan, dataflow: bool) -> None:
        conv: E.Call = plan.conv.value  # type: ignore[assignment]
        data = self.visit_expr(conv.args[0])
        weight = self.visit_expr(conv.args[1])
        if isinstance(plan.bias, np.ndarray):
            vdev = tensor_sinfo(conv.args[1]).vdevice  # type: ignore[union-attr]
            bias: E.Expr = E.Constant(plan.bias, struct_info=S.TensorStructInfo(
                plan.bias.shape, str(plan.bias.dtype), vdevice=vdev))  # fmt: skip
            same = True
        else:
            bias = self.visit_expr(plan.bias)
            same = bias is plan.bias
        args = [data, weight, bias]
        name = _FUSED
        if plan.residual is not None:
            residual = self.visit_expr(plan.residual)
            same = same and residual is plan.residual
            args.append(residual)
            name = _FUSED_RESIDUAL
        attrs = {k: conv.attrs[k] for k in CONV_ATTRS}
        attrs["activation"] = plan.activation
        value = make_call(name, args, attrs, span=plan.end.value.span)
        if same and data is conv.args[0] and weight is conv.args[1]:
            # same inputs: the result is the replaced value's (shape, dtype and
            # vdevice -- a vdevice in struct info is a pin the planner reads)
            value = E.replace(value, struct_info=plan.end.value.struct_info)
        var = self._retype(plan.end.var, value)
        self.emit_binding(E.VarBinding(var, value, span=plan.end.span))


class FuseConvEpilogue(FunctionPass):
    """Fuses ``nn.conv2d`` with a following per-channel bias ``add``, residual
    ``add`` and ``nn.relu``."""

    required_ops = frozenset({"nn.conv2d", _FUSED})  # a conv2d_bias_act written in text takes more

    def __init__(self) -> None:
        super().__init__("FuseConvEpilogue")

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        if not isinstance(func, E.Function):
            return func
        return _Fuser(mod, use_counts(func)).visit_expr(func)  # type: ignore[return-value]
