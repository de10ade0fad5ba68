"""What FoldScaleAxis and FuseConvEpilogue share: find ``nn.conv2d`` followed by a
chain of single-use bindings in one block, and replace the chain by one binding.

A subclass says which convolutions start a chain (:meth:`match_conv`), how far a
chain goes (:meth:`chain`, returning a plan with ``conv`` and ``end`` bindings, or
None) and what replaces it (:meth:`emit_plan`). A chain's replacement is emitted
where its last binding was. Chains are planned from the end of the block
backwards, and ``claimed`` holds the variables of the bindings already planned
chains replace, so where two convolutions could take in the same binding (they
meet in one ``add``) the later one does and the earlier one stops before it:
the later convolution is the nearer, so no convolution moves past another.
"""

from __future__ import annotations

from typing import Any

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.visitor import ExprMutator, ExprVisitor

FLOAT_DTYPES = ("float16", "float32", "float64")


class _UseCounter(ExprVisitor):
    def __init__(self) -> None:
        self.counts: dict[E.Var, int] = {}

    def visit_var(self, var: E.Var) -> None:
        self.counts[var] = self.counts.get(var, 0) + 1


def use_counts(func: E.Function) -> dict[E.Var, int]:
    """How many times each variable is read in a function (definitions excluded)."""
    counter = _UseCounter()
    counter.visit_expr(func)
    return counter.counts


def op_name(value: E.Expr) -> str | None:
    if isinstance(value, E.Call) and isinstance(value.op, E.Op):
        return value.op.name
    return None


def tensor_sinfo(expr: E.Expr) -> S.TensorStructInfo | None:
    sinfo = expr.struct_info
    return sinfo if isinstance(sinfo, S.TensorStructInfo) else None


def static_shape(expr: E.Expr) -> tuple[int, ...] | None:
    """``expr``'s tensor shape as ints, or None when it is unknown or symbolic."""
    sinfo = tensor_sinfo(expr)
    if sinfo is None or sinfo.shape is None:
        return None
    dims = tuple(P.const_value(d) for d in sinfo.shape)
    return None if any(d is None for d in dims) else dims  # type: ignore[return-value]


def nchw_float_conv(value: E.Expr) -> tuple[E.Call, int, str] | None:
    """(call, output channels, dtype) for an NCHW/OIHW ``nn.conv2d`` whose inputs and
    result share one float dtype and whose output channel count is static."""
    if op_name(value) != "nn.conv2d":
        return None
    call: E.Call = value  # type: ignore[assignment]
    if len(call.args) != 2 or call.sinfo_args:
        return None
    at = call.attrs
    if (at.get("data_layout"), at.get("kernel_layout"), at.get("out_layout")) != ("NCHW", "OIHW", "NCHW"):
        return None
    out = tensor_sinfo(call)
    if out is None or out.dtype not in FLOAT_DTYPES or out.shape is None or out.ndim != 4:
        return None
    if at.get("out_dtype") not in (None, out.dtype):
        return None
    for arg in call.args:
        s = tensor_sinfo(arg)
        if s is None or s.dtype != out.dtype:
            return None
    channels = P.const_value(out.shape[1])
    return (call, channels, out.dtype) if channels is not None else None


class ConvChainRewriter(ExprMutator):
    """Rewrites each block's conv chains; other bindings are visited as usual."""

    def __init__(self, mod: IRModule, uses: dict[E.Var, int]) -> None:
        super().__init__(mod)
        self.uses = uses
        self.claimed: set[E.Var] = set()

    # -- to override -----------------------------------------------------------
    def match_conv(self, value: E.Expr) -> Any:
        raise NotImplementedError

    def chain(self, conv: E.VarBinding, info: Any, user: dict[E.Var, E.VarBinding]) -> Any:
        raise NotImplementedError

    def emit_plan(self, plan: Any, dataflow: bool) -> None:
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------
    def _plan_block(self, block: E.BindingBlock) -> tuple[dict[E.Var, Any], set[E.Var]]:
        """Plans keyed by the var of their last binding, and the vars they replace."""
        user: dict[E.Var, E.VarBinding] = {}  # var -> the first binding of this block reading it
        for b in block.bindings:
            if isinstance(b, E.VarBinding) and isinstance(b.value, E.Call):
                for a in b.value.args:
                    if isinstance(a, E.Var):
                        user.setdefault(a, b)
        plans: dict[E.Var, Any] = {}
        dropped: set[E.Var] = set()
        self.claimed = set()
        for b in reversed(block.bindings):
            if not isinstance(b, E.VarBinding):
                continue
            info = self.match_conv(b.value)
            if info is None:
                continue
            plan = self.chain(b, info, user)
            if plan is None:
                continue
            plans[plan.end.var] = plan
            cur = b.var
            while cur is not plan.end.var:
                dropped.add(cur)
                cur = user[cur].var
            self.claimed |= dropped
            self.claimed.add(plan.end.var)
        return plans, dropped

    def visit_binding_block(self, block: E.BindingBlock) -> E.BindingBlock:
        plans, dropped = self._plan_block(block)
        if not plans:
            return super().visit_binding_block(block)
        dataflow = isinstance(block, E.DataflowBlock)

        def handled(binding: E.Binding) -> bool:
            if binding.var in plans:
                self.emit_plan(plans[binding.var], dataflow)
                return True
            return binding.var in dropped

        return self.rebuild_block(block, handled)
