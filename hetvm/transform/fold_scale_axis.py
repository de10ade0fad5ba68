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
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.visitor import ExprMutator, ExprVisitor
from ..op.base import make_call
from .pass_infra import FunctionPass, PassContext

_FLOAT_DTYPES = ("float16", "float32", "float64")


class _UseCounter(ExprVisitor):
    """How many times each variable is read in a function (definitions excluded)."""

    def __init__(self) -> None:
        self.counts: dict[E.Var, int] = {}

    def visit_var(self, var: E.Var) -> None:
        self.counts[var] = self.counts.get(var, 0) + 1


def _op_name(value: E.Expr) -> str | None:
    if isinstance(value, E.Call) and isinstance(value.op, E.Op):
        return value.op.name
    return None


def _tensor_sinfo(expr: E.Expr) -> S.TensorStructInfo | None:
    sinfo = expr.struct_info
    return sinfo if isinstance(sinfo, S.TensorStructInfo) else None


def _foldable_conv(value: E.Expr) -> tuple[E.Constant, int, str] | None:
    """(weight, out channels, dtype) when ``value`` is a conv2d whose weight can take a scale."""
    if _op_name(value) != "nn.conv2d":
        return None
    call: E.Call = value  # type: ignore[assignment]
    if len(call.args) != 2 or not isinstance(call.args[1], E.Constant):
        return None
    at = call.attrs
    if (at.get("data_layout"), at.get("kernel_layout"), at.get("out_layout")) != ("NCHW", "OIHW", "NCHW"):
        return None
    weight: E.Constant = call.args[1]  # type: ignore[assignment]
    out = _tensor_sinfo(call)
    data = _tensor_sinfo(call.args[0])
    dtype = str(weight.data.dtype)
    if out is None or data is None or weight.data.ndim != 4 or dtype not in _FLOAT_DTYPES:
        return None
    if out.dtype != dtype or data.dtype != dtype or at.get("out_dtype") not in (None, dtype):
        return None
    if out.ndim != 4 or out.shape is None or P.const_value(out.shape[1]) != weight.data.shape[0]:
        return None
    return weight, int(weight.data.shape[0]), dtype


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
    name = _op_name(value)
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


class _Folder(ExprMutator):
    def __init__(self, mod: IRModule, uses: dict[E.Var, int]) -> None:
        super().__init__(mod)
        self.uses = uses

    # -- planning ------------------------------------------------------------
    def _plan_block(self, block: E.BindingBlock) -> tuple[dict[E.Var, _Plan], set[E.Var]]:
        user: dict[E.Var, E.VarBinding] = {}  # var -> the binding of this block reading it
        for b in block.bindings:
            if isinstance(b, E.VarBinding) and isinstance(b.value, E.Call):
                for a in b.value.args:
                    if isinstance(a, E.Var):
                        user.setdefault(a, b)
        plans: dict[E.Var, _Plan] = {}
        dropped: set[E.Var] = set()
        for b in block.bindings:
            if not isinstance(b, E.VarBinding):
                continue
            conv = _foldable_conv(b.value)
            if conv is None:
                continue
            plan = self._chain(b, conv, user)
            if plan is not None:
                plans[plan.end.var] = plan
                dropped.add(b.var)
        for plan in plans.values():
            cur = plan.conv.var
            while cur is not plan.end.var:
                nxt = user[cur]
                dropped.add(nxt.var)
                cur = nxt.var
        for end in plans:
            dropped.discard(end)
        return plans, dropped

    def _chain(
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
            out = _tensor_sinfo(nxt.var)
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

    # -- rewriting -------------------------------------------------------------
    def visit_binding_block(self, block: E.BindingBlock) -> E.BindingBlock:
        plans, dropped = self._plan_block(block)
        if not plans:
            return super().visit_binding_block(block)
        self._emitted.append([])
        for binding in block.bindings:
            var = binding.var
            if var in plans:
                self._emit_folded(plans[var], isinstance(block, E.DataflowBlock))
            elif var not in dropped:
                self.visit_binding(binding)
        out = self._emitted.pop()
        return type(block)(tuple(out), span=block.span)

    def _emit_folded(self, plan: _Plan, dataflow: bool) -> None:
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

    def __init__(self) -> None:
        super().__init__("FoldScaleAxis")

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        if not isinstance(func, E.Function):
            return func
        counter = _UseCounter()
        counter.visit_expr(func)
        return _Folder(mod, counter.counts).visit_expr(func)  # type: ignore[return-value]
