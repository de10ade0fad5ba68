"""FusePoolEpilogue: a convolution's bias and relu move past the max pool that
follows it, into the pool's kernel, where they touch the pooled (smaller) tensor.

Why: a stem ``conv -> bias -> relu -> max_pool 3x3/2`` (ResNet, Inception v2,
SqueezeNet, DenseNet) adds the bias and clamps every element of the convolution's
output, then keeps a quarter of them. Adding a per-channel constant and ``relu``
are both monotone non-decreasing, so they commute with a maximum over a window of
one channel: ``max_pool(relu(x + b)) == relu(max_pool(x) + b)``, exactly (the same
additions on the same winners). ``nn.max_pool2d_bias_act`` adds and clamps in
place on the pool's output while it is in cache; as a separate op on a fresh
buffer the epilogue cost as much as it saved.

The pattern, inside one binding block, after FuseConvEpilogue::

    y = nn.conv2d_bias_act(x, W, b)      # activation "none" or "relu"; float
    z = nn.max_pool2d(y)                 # NCHW

with ``y`` read only by the pool becomes ``c = nn.conv2d(x, W)`` and
``z = nn.max_pool2d_bias_act(c, b)``. The pool's padding is its identity (-inf),
which never wins, so windows that reach into it agree too -- except a window
wholly in padding, which gives -inf before the rewrite and ``relu(-inf + b)``
after: the rewrite is made only when every window holds an input cell (static
shapes, checked per axis).
"""

from __future__ import annotations

from ..ir import expr as E
from ..ir.module import IRModule
from ..ir.visitor import ExprMutator
from ..op.base import make_call
from ._conv_chain import FLOAT_DTYPES, op_name, static_shape, tensor_sinfo, use_counts
from .pass_infra import FunctionPass, PassContext

__all__ = ["FusePoolEpilogue"]

_MONOTONE = ("none", "relu")


def _every_window_reads_input(pool: E.Call, data: tuple[int, ...], out: tuple[int, ...]) -> bool:
    """Per spatial axis, the first and the last window each cover an input cell
    (the windows between them then do too)."""
    at = pool.attrs
    k = [int(v) for v in at.get("pool_size", (1, 1))]
    s = [int(v) for v in at.get("strides", (1, 1))]
    d = [int(v) for v in at.get("dilation", (1, 1))]
    pads = [int(v) for v in at.get("padding", (0, 0, 0, 0))]
    for axis in range(2):
        size, lo = data[2 + axis], pads[axis]
        for start in (-lo, (out[2 + axis] - 1) * s[axis] - lo):
            if not any(0 <= start + i * d[axis] < size for i in range(k[axis])):
                return False
    return True


def _rewritable(conv: E.Call, pool: E.Call) -> bool:
    if op_name(conv) != "nn.conv2d_bias_act" or op_name(pool) != "nn.max_pool2d":
        return False
    if conv.attrs.get("activation", "none") not in _MONOTONE:
        return False
    if pool.attrs.get("layout", "NCHW") != "NCHW" or pool.attrs.get("out_layout") not in (None, "NCHW"):
        return False
    if conv.attrs.get("out_layout") not in (None, "NCHW") or conv.attrs.get("data_layout", "NCHW") != "NCHW":
        return False
    y, z, bias = tensor_sinfo(conv), tensor_sinfo(pool), tensor_sinfo(conv.args[2])
    if y is None or z is None or bias is None or y.dtype not in FLOAT_DTYPES or bias.dtype != y.dtype:
        return False
    if y.vdevice != z.vdevice:
        return False
    data, out = static_shape(conv), static_shape(pool)
    return data is not None and out is not None and len(data) == 4 and _every_window_reads_input(pool, data, out)


class _Fuser(ExprMutator):
    def __init__(self, mod: IRModule, uses: dict[E.Var, int]) -> None:
        super().__init__(mod)
        self.uses = uses

    def visit_binding_block(self, block: E.BindingBlock) -> E.BindingBlock:
        bound = {b.var: b for b in block.bindings if isinstance(b, E.VarBinding)}
        plans: dict[E.Var, E.VarBinding] = {}  # pool var -> the convolution's binding
        for b in block.bindings:
            if not isinstance(b, E.VarBinding) or not isinstance(b.value, E.Call) or not b.value.args:
                continue
            src = b.value.args[0]
            conv = bound.get(src) if isinstance(src, E.Var) else None
            if conv is not None and self.uses.get(src, 0) == 1 and _rewritable(conv.value, b.value):  # type: ignore[arg-type]
                plans[b.var] = conv
        if not plans:
            return super().visit_binding_block(block)
        dropped = {conv.var for conv in plans.values()}
        dataflow = isinstance(block, E.DataflowBlock)

        def handled(binding: E.Binding) -> bool:
            if binding.var in plans:
                self._emit(plans[binding.var], binding, dataflow)  # type: ignore[arg-type]
                return True
            return binding.var in dropped

        return self.rebuild_block(block, handled)

    def _emit(self, conv_b: E.VarBinding, pool_b: E.VarBinding, dataflow: bool) -> None:
        conv: E.Call = conv_b.value  # type: ignore[assignment]
        pool: E.Call = pool_b.value  # type: ignore[assignment]
        x, w, bias = (self.visit_expr(a) for a in conv.args)
        attrs = {k: v for k, v in conv.attrs.items() if k != "activation"}
        plain_call = make_call("nn.conv2d", [x, w], attrs, span=conv.span)
        # the variables keep their struct info (a vdevice the op's inference would add
        # to one would make every later binding retyped, dropping their own pins)
        cls = E.DataflowVar if dataflow else E.Var
        plain = cls(self.names.unique(conv_b.var.name_hint), struct_info=conv_b.var.struct_info)
        self.emit_binding(E.VarBinding(plain, plain_call, span=conv_b.span))
        act = conv.attrs.get("activation", "none")
        fused = make_call("nn.max_pool2d_bias_act", [plain, bias], {**pool.attrs, "activation": act}, span=pool.span)
        self.emit_binding(E.VarBinding(self.visit_var_def(pool_b.var), fused, span=pool_b.span))


class FusePoolEpilogue(FunctionPass):
    """Moves a convolution's bias and relu into the max pool that follows it."""

    required_ops = frozenset({"nn.max_pool2d"})

    def __init__(self) -> None:
        super().__init__("FusePoolEpilogue")

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        if not isinstance(func, E.Function):
            return func
        return _Fuser(mod, use_counts(func)).visit_expr(func)  # type: ignore[return-value]
