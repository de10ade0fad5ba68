"""ReorderPoolConv: swaps an average pool and a 1x1 convolution that follow each
other when the other order does less work.

Why: both are linear and act on different axes. A 1x1 convolution with stride 1
and no padding mixes channels at each position; an average pool mixes positions
within each channel, with weights that depend on the position only (the window
and, at the borders, its count). So ``avg_pool2d(conv2d(x)) == conv2d(avg_pool2d(x))``
in real arithmetic; in floating point the sums are only reassociated. Which
order costs less depends on the shapes:

* DenseNet's transition layers convolve a 56x56 map, then pool it 2x2 with
  stride 2: pooling first leaves the convolution a quarter of the positions
  (DenseNet-121: 2.8 -> 0.7 ms of convolution for 0.4 -> 0.7 ms of pooling);
* Inception's pool branches average 576 channels over 3x3 windows, then project
  them to 64-128: convolving first pools only the projected channels.

The pattern, inside one binding block::

    y = nn.conv2d(x, W)        # 1x1, stride 1, dilation 1, no padding; NCHW / OIHW, float
    z = nn.avg_pool2d(y)       # NCHW

or the same two ops in the other order. ``y`` must have no other reader; the pair
is rewritten in the other order where ``z`` was bound, and the result keeps
``z``'s variable. Nothing between them is crossed: the pass runs before
FuseConvEpilogue, so a convolution's bias is still an ``add`` after the pair and
stays there (a bias would not commute with a pool that counts padding).
Shapes must be static (the cost model needs them), and all three values must
have the same vdevice (a pin on one is kept).

Cost model, in multiply-adds: the convolution ``O * I * positions``; the pool
``_POOL_COST`` per element of its row and column folds (``hetvm/kernels/pool.py``),
one NumPy element operation costing about as much as 25 multiply-adds of a
BLAS product (measured on OpenBLAS and NumPy 2, 1 thread). The pair is swapped
only when the other order is estimated at most ``_GAIN`` of the current one, so
running the pass twice equals running it once.
"""

from __future__ import annotations

from ..ir import expr as E
from ..ir.module import IRModule
from ..ir.visitor import ExprMutator
from ..op.base import make_call
from ._conv_chain import nchw_float_conv, op_name, static_shape, tensor_sinfo, use_counts
from .pass_infra import FunctionPass, PassContext

__all__ = ["ReorderPoolConv"]

_POOL_COST = 25
_GAIN = 0.8


def _pointwise_conv(value: E.Expr) -> E.Call | None:
    """The call when ``value`` is a 1x1, stride-1, unpadded, undilated NCHW conv2d."""
    found = nchw_float_conv(value)
    if found is None:
        return None
    call = found[0]
    weight = static_shape(call.args[1])
    at = call.attrs
    if weight is None or weight[2:] != (1, 1):
        return None
    if tuple(at.get("strides", (1, 1))) != (1, 1) or tuple(at.get("dilation", (1, 1))) != (1, 1):
        return None
    if any(int(p) for p in at.get("padding", (0, 0, 0, 0))):
        return None
    return call


def _avg_pool(value: E.Expr) -> E.Call | None:
    if op_name(value) != "nn.avg_pool2d":
        return None
    call: E.Call = value  # type: ignore[assignment]
    if len(call.args) != 1 or call.sinfo_args:
        return None
    if call.attrs.get("layout", "NCHW") != "NCHW" or call.attrs.get("out_layout") not in (None, "NCHW"):
        return None
    return call


def _conv_cost(conv: E.Call, data: tuple[int, ...]) -> int:
    """Multiply-adds of the 1x1 convolution over ``data``'s (N, H, W) positions."""
    o, i = static_shape(conv.args[1])[:2]  # type: ignore[index]
    return o * i * data[0] * data[2] * data[3]


def _pool_cost(pool: E.Call, data: tuple[int, ...], out: tuple[int, ...]) -> int:
    kh, kw = (int(k) for k in pool.attrs.get("pool_size", (1, 1)))
    n, c, _, w = data
    oh, ow = out[2], out[3]
    return _POOL_COST * n * c * (oh * w * kh + oh * ow * kw)


def _pooled_shape(pool: E.Call, channels: int, data: tuple[int, ...]) -> tuple[int, ...]:
    """The pool's output shape for ``data`` with ``channels`` channels (the spatial
    result does not depend on the channel count)."""
    out = static_shape(pool)
    return (data[0], channels, out[2], out[3])  # type: ignore[index]


class _Reorderer:
    """Finds the pairs of one block worth swapping: the second binding's var -> (first, second)."""

    def __init__(self, uses: dict[E.Var, int]) -> None:
        self.uses = uses

    def plan(self, block: E.BindingBlock) -> dict[E.Var, tuple[E.VarBinding, E.VarBinding]]:
        bound = {b.var: b for b in block.bindings if isinstance(b, E.VarBinding)}
        plans: dict[E.Var, tuple[E.VarBinding, E.VarBinding]] = {}
        taken: set[E.Var] = set()
        for second in block.bindings:
            if not isinstance(second, E.VarBinding) or not isinstance(second.value, E.Call):
                continue
            args = second.value.args
            first = bound.get(args[0]) if args and isinstance(args[0], E.Var) else None
            if first is None or self.uses.get(first.var, 0) != 1 or {first.var, second.var} & taken:
                continue
            if self._worth_swapping(first, second):
                plans[second.var] = (first, second)
                taken |= {first.var, second.var}
        return plans

    def _worth_swapping(self, first: E.VarBinding, second: E.VarBinding) -> bool:
        conv_first = _pointwise_conv(first.value)
        pool = _avg_pool(second.value) if conv_first is not None else _avg_pool(first.value)
        conv = conv_first if conv_first is not None else _pointwise_conv(second.value)
        if conv is None or pool is None:
            return False
        x = (conv if conv_first is not None else pool).args[0]
        shapes = [static_shape(e) for e in (x, first.var, second.var)]
        if any(s is None for s in shapes):
            return False
        if len({getattr(tensor_sinfo(e), "vdevice", None) for e in (x, first.var, second.var)}) > 1:
            return False
        data, _, out = shapes
        o = out[1]
        i = data[1]
        if conv_first is not None:  # now: conv at full size, then pool of O channels
            now = _conv_cost(conv, data) + _pool_cost(pool, (data[0], o) + data[2:], out)
            pooled = _pooled_shape(pool, i, data)
            other = _pool_cost(pool, data, pooled) + _conv_cost(conv, out)
        else:  # now: pool of I channels, then conv at the pooled size
            pooled = shapes[1]
            now = _pool_cost(pool, data, pooled) + _conv_cost(conv, pooled)  # type: ignore[arg-type]
            other = _conv_cost(conv, data) + _pool_cost(pool, (data[0], o) + data[2:], out)
        return other <= _GAIN * now


class _ReorderMutator(ExprMutator):
    def __init__(self, mod: IRModule, uses: dict[E.Var, int]) -> None:
        super().__init__(mod)
        self.reorderer = _Reorderer(uses)

    def visit_binding_block(self, block: E.BindingBlock) -> E.BindingBlock:
        plans = self.reorderer.plan(block)
        if not plans:
            return super().visit_binding_block(block)
        dropped = {first.var for first, _ in plans.values()}
        dataflow = isinstance(block, E.DataflowBlock)

        def handled(binding: E.Binding) -> bool:
            if binding.var in plans:
                self._emit_swapped(*plans[binding.var], dataflow=dataflow)
                return True
            return binding.var in dropped

        return self.rebuild_block(block, handled)

    def _emit_swapped(self, first: E.VarBinding, second: E.VarBinding, dataflow: bool) -> None:
        """``second(first(x))`` as ``first(second(x))``: the op of the second binding
        now reads ``x`` (other arguments, the weight, are kept), bound to a new
        variable named as the first's; the first op reads that, bound to the second's variable."""
        a: E.Call = first.value  # type: ignore[assignment]
        b: E.Call = second.value  # type: ignore[assignment]
        x = self.visit_expr(a.args[0])
        rest_b = [self.visit_expr(arg) for arg in b.args[1:]]
        mid = self.emit(make_call(op_name(b), [x, *rest_b], dict(b.attrs), span=b.span),
                        name_hint=f"{first.var.name_hint}_reordered", dataflow=dataflow)  # fmt: skip
        rest_a = [self.visit_expr(arg) for arg in a.args[1:]]
        outer = make_call(op_name(a), [mid, *rest_a], dict(a.attrs), span=a.span)
        var = self._retype(second.var, outer)
        self.emit_binding(E.VarBinding(var, outer, span=second.span))


class ReorderPoolConv(FunctionPass):
    """Swaps ``nn.avg_pool2d`` and a 1x1 ``nn.conv2d`` where the other order costs less."""

    required_ops = frozenset({"nn.avg_pool2d"})

    def __init__(self) -> None:
        super().__init__("ReorderPoolConv")

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        if not isinstance(func, E.Function):
            return func
        return _ReorderMutator(mod, use_counts(func)).visit_expr(func)  # type: ignore[return-value]
