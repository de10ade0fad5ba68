"""FuseChannelAffine: a chain of per-channel ``multiply``/``add`` by constants,
optionally ending in ``nn.relu``, as one ``nn.scale_shift_act``.

Why: FoldScaleAxis folds a batch norm into the convolution before it, but
where there is no convolution -- DenseNet normalises each concat (and the
stem's max-pool) with ``multiply``, ``add``, ``multiply``, ``add``, ``nn.relu``
about 60 times -- each step is a full pass over the activation in its own
kernel with its own output buffer. Since

    ((x * s1 + t1) * s2 + t2)  ==  x * (s1 * s2) + (t1 * s2 + t2)

the chain becomes ``nn.scale_shift_act(x, scale, shift, activation=...)``
with ``scale`` and ``shift`` new ``(C,)`` Constants computed with NumPy at
compile time in float64 and stored in ``x``'s dtype. Results agree with the
unfused program up to float rounding.

Layout: the channel is axis 1 of a tensor of rank 2 or more (NCHW, NCL, NC
...); ``x``'s channel count must be static. A constant qualifies when it
broadcasts as one value per channel on that axis -- left-padded with ones to
``x``'s rank it is ``(1, C or 1, 1, ..., 1)``, so scalars qualify and an NC
tensor takes a ``(C,)`` vector -- and never grows the result. A per-channel
constant on another axis (NHWC) is not fused.

Fuses only when it is exact in that sense and safe: every constant is a
finite floating-point Constant of ``x``'s dtype (and so are the combined
scale and shift in that dtype); each step's operand other than the constant
is the previous step's value, which has no other use (the chain's input ``x``
may have any number); the chain stays inside one binding block and its values
carry one vdevice (a pin on one value is kept). A chain starts at the first
qualifying ``multiply``/``add``, stops at the first step that does not
qualify and ends at a ``nn.relu``. Only chains of two steps or more are fused
(one kernel instead of several); a lone ``multiply`` or ``add`` is left
alone, and the fused op never starts or continues a chain, so running the
pass twice equals running it once. The result keeps the last binding's
variable. The input module is never mutated.

Scale into the next convolution: when the chain's result has one use, as the
data of a convolution (``nn.conv2d`` or a fused conv op, NCHW/OIHW, one
group, a Constant weight of the same dtype) and every combined scale is
positive, the scale moves into that convolution's weight -- for ``s > 0``,
``relu(s*x + t) == s * relu(x + t/s)`` and a convolution is linear in each
input channel (zero padding stays zero) -- so the fused op only shifts (its
kernel then skips the multiply: one pass less over the activation). DenseNet
normalises every concat this way before a 1x1 convolution.
"""

from __future__ import annotations

import numpy as np

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.visitor import ExprMutator
from ..op.base import make_call
from ._conv_chain import FLOAT_DTYPES, op_name, tensor_sinfo, use_counts
from .pass_infra import FunctionPass, PassContext

__all__ = ["FuseChannelAffine"]

_FUSED = "nn.scale_shift_act"
_CONVS = ("nn.conv2d", "nn.conv2d_bias_act", "nn.conv2d_bias_add_act")


def _step(value: E.Expr) -> tuple[str, E.Var, E.Constant | None] | None:
    """``(kind, input, constant)`` for ``multiply``/``add`` of a Var and a Constant
    (either order), or ``("relu", input, None)``."""
    name = op_name(value)
    if name not in ("multiply", "add", "nn.relu"):
        return None
    call: E.Call = value  # type: ignore[assignment]
    if call.sinfo_args:
        return None
    if name == "nn.relu":
        return ("relu", call.args[0], None) if len(call.args) == 1 and isinstance(call.args[0], E.Var) else None
    if len(call.args) != 2:
        return None
    a, b = call.args
    if isinstance(a, E.Var) and isinstance(b, E.Constant):
        return name, a, b
    if isinstance(b, E.Var) and isinstance(a, E.Constant):
        return name, b, a
    return None


def _channel_vector(const: E.Constant, channels: int, ndim: int, dtype: str) -> np.ndarray | None:
    """The constant as one float64 value per channel (axis 1), when it broadcasts
    so against a rank-``ndim`` tensor, has ``dtype`` and is finite."""
    data = const.data
    if str(data.dtype) != dtype or data.ndim > ndim:
        return None
    shape = (1,) * (ndim - data.ndim) + tuple(data.shape)
    if any(d != 1 for i, d in enumerate(shape) if i != 1) or shape[1] not in (1, channels):
        return None
    vec = data.reshape(shape[1]).astype(np.float64)
    if not np.all(np.isfinite(vec)):
        return None
    return np.broadcast_to(vec, (channels,)).copy()


def _same_shape(a: S.TensorStructInfo | None, b: S.TensorStructInfo) -> bool:
    if a is None or a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return False
    return all(P.prove_equal(x, y) for x, y in zip(a.shape, b.shape))


class _Chain:
    """One chain being grown: its input, bindings and the combined affine map."""

    __slots__ = ("x", "sinfo", "channels", "bindings", "scale", "shift", "const_vdevice", "closed", "conv",
                 "conv_weight")

    def __init__(self, x: E.Var, sinfo: S.TensorStructInfo, channels: int, const_vdevice: object):
        self.x = x
        self.sinfo = sinfo
        self.channels = channels
        self.bindings: list[E.VarBinding] = []
        self.scale = np.ones(channels)
        self.shift = np.zeros(channels)
        self.const_vdevice = const_vdevice
        self.closed = False
        self.conv: E.VarBinding | None = None  # the convolution its scale moves into
        self.conv_weight: np.ndarray | None = None  # that convolution's weight, scaled

    @classmethod
    def start(cls, x: E.Var, const: E.Constant | None) -> _Chain | None:
        sinfo = tensor_sinfo(x)
        if sinfo is None or sinfo.dtype not in FLOAT_DTYPES or sinfo.shape is None or sinfo.ndim < 2:
            return None
        channels = P.const_value(sinfo.shape[1])
        if channels is None or const is None:
            return None
        return cls(x, sinfo, channels, _const_vdevice(const))

    def take(self, binding: E.VarBinding, kind: str, const: E.Constant | None) -> bool:
        """Appends ``binding`` when it continues the chain exactly; False if not."""
        out = tensor_sinfo(binding.var)
        if out is None or out.dtype != self.sinfo.dtype or not _same_shape(out, self.sinfo):
            return False
        if out.vdevice != self.sinfo.vdevice:  # a pin (vdevice) on one value only: keep it
            return False
        if kind == "relu":
            self.closed = True
        else:
            assert const is not None
            if _const_vdevice(const) != self.const_vdevice:
                return False
            vec = _channel_vector(const, self.channels, self.sinfo.ndim, self.sinfo.dtype)  # type: ignore[arg-type]
            if vec is None:
                return False
            if kind == "multiply":
                self.scale = self.scale * vec
                self.shift = self.shift * vec
            else:
                self.shift = self.shift + vec
        self.bindings.append(binding)
        return True

    @property
    def end(self) -> E.VarBinding:
        return self.bindings[-1]


def _const_vdevice(const: E.Constant) -> object:
    sinfo = tensor_sinfo(const)
    return sinfo.vdevice if sinfo is not None else None


class _Fuser(ExprMutator):
    def __init__(self, mod: IRModule, uses: dict[E.Var, int]) -> None:
        super().__init__(mod)
        self.uses = uses
        self.folds: dict[E.Var, _Chain] = {}  # convolution var -> the chain it takes a scale from

    def _plan_block(self, block: E.BindingBlock) -> tuple[dict[E.Var, _Chain], set[E.Var]]:
        """Chains worth fusing keyed by their last var, and the vars they replace."""
        chains: list[_Chain] = []
        open_end: dict[E.Var, _Chain] = {}  # the last var of a chain that may still grow
        for b in block.bindings:
            if not isinstance(b, E.VarBinding):
                continue
            step = _step(b.value)
            if step is None:
                continue
            kind, cur, const = step
            chain = open_end.pop(cur, None)
            if chain is not None and self.uses.get(cur, 0) == 1 and chain.take(b, kind, const):
                pass
            elif kind == "relu":
                continue  # a relu alone saves nothing
            else:
                chain = _Chain.start(cur, const)
                if chain is None or not chain.take(b, kind, const):
                    continue
                chains.append(chain)
            if not chain.closed:
                open_end[b.var] = chain
        plans: dict[E.Var, _Chain] = {}
        dropped: set[E.Var] = set()
        for chain in chains:
            if len(chain.bindings) < 2 or not _representable(chain):
                continue
            plans[chain.end.var] = chain
            dropped.update(b.var for b in chain.bindings[:-1])
        for b in block.bindings:
            if isinstance(b, E.VarBinding) and op_name(b.value) in _CONVS:
                data = b.value.args[0]  # type: ignore[attr-defined]
                chain = plans.get(data) if isinstance(data, E.Var) else None
                if chain is not None and self.uses.get(data, 0) == 1 and _scale_folds(chain, b.value):
                    chain.conv = b
                    self.folds[b.var] = chain
        return plans, dropped

    def visit_binding_block(self, block: E.BindingBlock) -> E.BindingBlock:
        plans, dropped = self._plan_block(block)
        if not plans:
            return super().visit_binding_block(block)

        def handled(binding: E.Binding) -> bool:
            if binding.var in plans:
                self._emit_chain(plans[binding.var])
            elif binding.var in self.folds:
                self._emit_scaled_conv(binding, self.folds[binding.var])  # type: ignore[arg-type]
            else:
                return binding.var in dropped
            return True

        return self.rebuild_block(block, handled)

    def _emit_chain(self, chain: _Chain) -> None:
        dtype = chain.sinfo.dtype
        vdev = chain.const_vdevice
        consts = []
        scale, shift = chain.scale, chain.shift
        if chain.conv is not None:  # the convolution takes the scale
            scale, shift = np.ones_like(scale), shift / scale
        for vec in (scale, shift):
            arr = vec.astype(dtype)
            consts.append(E.Constant(arr, struct_info=S.TensorStructInfo(arr.shape, dtype, vdevice=vdev)))
        x = self.visit_expr(chain.x)
        end = chain.end
        activation = "relu" if chain.closed else "none"
        value = make_call(_FUSED, [x, *consts], {"activation": activation}, span=end.value.span)
        if x is chain.x:
            # same input: the result is the replaced value's (shape, dtype and
            # vdevice -- a vdevice in struct info is a pin the planner reads)
            value = E.replace(value, struct_info=end.value.struct_info)
        var = self._retype(end.var, value)
        self.emit_binding(E.VarBinding(var, value, span=end.span))


    def _emit_scaled_conv(self, binding: E.VarBinding, chain: _Chain) -> None:
        call: E.Call = binding.value  # type: ignore[assignment]
        weight: E.Constant = call.args[1]  # type: ignore[assignment]
        new_weight = E.Constant(chain.conv_weight, struct_info=weight.struct_info, span=weight.span)
        args = (self.visit_expr(call.args[0]), new_weight, *(self.visit_expr(a) for a in call.args[2:]))
        value = self.normalize(E.replace(call, args=args, struct_info=None))
        var = self._retype(binding.var, value)
        self.emit_binding(E.VarBinding(var, value, span=binding.span))


def _scale_folds(chain: _Chain, conv: E.Call) -> bool:
    """Whether ``chain``'s scale can move into ``conv``'s weight exactly: positive
    scales, one group, NCHW/OIHW, a Constant weight whose input channels are the
    chain's, and a scaled weight and shift that stay finite in the dtype. When it
    can, the scaled weight is kept on the chain."""
    at = conv.attrs
    if int(at.get("groups", 1)) != 1 or (at.get("data_layout"), at.get("kernel_layout")) != ("NCHW", "OIHW"):
        return False
    weight = conv.args[1]
    dtype = chain.sinfo.dtype
    if not isinstance(weight, E.Constant) or str(weight.data.dtype) != dtype or weight.data.ndim != 4:
        return False
    if weight.data.shape[1] != chain.channels or chain.sinfo.ndim != 4 or not np.all(chain.scale > 0):
        return False
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        scaled = (weight.data.astype(np.float64) * chain.scale[None, :, None, None]).astype(dtype)
        shift = (chain.shift / chain.scale).astype(dtype)
    if not (np.all(np.isfinite(scaled)) and np.all(np.isfinite(shift))):
        return False
    chain.conv_weight = scaled
    return True


def _representable(chain: _Chain) -> bool:
    """The combined scale and shift stay finite in the tensor's dtype (float64
    products of finite float32 values can overflow it)."""
    dtype = chain.sinfo.dtype
    with np.errstate(over="ignore"):
        return bool(np.all(np.isfinite(chain.scale.astype(dtype))) and np.all(np.isfinite(chain.shift.astype(dtype))))


class FuseChannelAffine(FunctionPass):
    """Fuses chains of per-channel ``multiply``/``add`` by constants (+ ``nn.relu``)
    into one ``nn.scale_shift_act``."""

    def __init__(self) -> None:
        super().__init__("FuseChannelAffine")

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        if not isinstance(func, E.Function):
            return func
        return _Fuser(mod, use_counts(func)).visit_expr(func)  # type: ignore[return-value]
