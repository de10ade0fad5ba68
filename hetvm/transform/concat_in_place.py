"""ConcatInPlace: the inputs of a concatenation are computed straight into it.

Why: ``concat`` copies every input into its output, a full pass over bytes
that were written a moment before (an Inception module's four branches, a
SqueezeNet fire module's two expands, every layer of a DenseNet block). When
each input is a fresh allocation of the same block, it can instead *be* the
slice of the output that concat would copy it to: the output is allocated
first, each input becomes ``vm.builtin.view_at(output, byte_offset, shape)``,
its producer writes there, and the concat call disappears.

Runs after CallTIRRewrite (allocations are explicit ``builtin.alloc_tensor``
bindings) and before StaticPlanBlockMemory, which then plans one buffer -- the
output -- live from the first input's allocation to the last use of the
output or any input (views are aliases for the lifetimes, KillAfterLastUse
and the peak simulation alike).

A concat is rewritten when, in one binding block:

* its output is an allocation whose dimensions before the axis are all 1 (batch
  1 on channels, or axis 0), so that each input's slice is one contiguous run of
  bytes; shapes may be symbolic in variables the parameters define (the offsets
  are then expressions the VM evaluates per call);
* every input is a distinct variable bound to an allocation of the same dtype,
  device and memory scope, not yet placed into another
  concat, and neither the output nor any input is what the block returns
  (also as a field of a returned tuple: results never alias one another).

An input that is itself a rewritten concat's output can be placed too (views
of views), so a DenseNet block becomes one buffer that its layers fill. Other
concats (batch > 1 on channels, inputs that are parameters, constants, tuple
fields or values of other blocks) keep their copy.

The output now lives from its first input's allocation, so its bytes are held
while the other inputs are being computed: the most bytes live at once (the
memory plan's lower bound) may grow. The pass never lets it: per function it
tries placement with nesting, then without, and keeps the first whose lower
bound on every device is no higher than before (else the function is left as
it was). Measured (``benchmarks/onnx_models.py``, 1 thread, batch 1): SqueezeNet
-2.7%, Inception v2 -1.3%, ShuffleNet -1.8%, bounds unchanged; DenseNet-121's
nested placement was 4% faster but raised its bound from 6.89 to 7.27 MiB (the
block's final buffer held from the block's start), so DenseNet gets flat placement
(29 of its 58 concats: every other one, whose first input is a fresh allocation).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..analysis.called_ops import calls_any
from ..analysis.values import result_vars
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.visitor import ExprMutator
from ..op.effects import VIEW_AT_BUILTIN, kernel_symbol
from .pass_infra import Pass, PassContext
from .static_plan_block_memory import ALLOC_OP, lower_bounds

__all__ = ["ConcatInPlace"]

CONCAT_KERNEL = kernel_symbol("concat")
_CONCAT = frozenset({CONCAT_KERNEL})
# a view allocates nothing and writes nothing: a pure packed function
PURE_VIEW_AT = E.ExternFunc(VIEW_AT_BUILTIN, struct_info=S.FuncStructInfo(None, S.ObjectStructInfo(), purity=True))


@dataclass(frozen=True)
class _Alloc:
    """A ``builtin.alloc_tensor`` binding whose shape uses only symbolic variables
    the function's parameters define (so the allocation can move earlier)."""

    pos: int
    binding: E.VarBinding
    shape: tuple[P.PrimExpr, ...]
    dtype: str
    where: tuple  # (device index, memory scope): inputs must match the output's


def _alloc_site(pos: int, binding: E.Binding, entry_vars: set) -> _Alloc | None:
    value = getattr(binding, "value", None)
    if not (isinstance(value, E.Call) and isinstance(value.op, E.Op) and value.op.name == ALLOC_OP):
        return None
    shape_arg, dtype_arg = value.args[0], value.args[1]
    if not isinstance(shape_arg, E.ShapeExpr) or not isinstance(dtype_arg, E.DataTypeImm):
        return None
    dims = tuple(P.simplify(d) for d in shape_arg.values)
    if any(v not in entry_vars for d in dims for v in P.free_vars(d)):
        return None
    where = tuple(
        (P.const_value(a.value) if isinstance(a, E.PrimValue) else a.value if isinstance(a, E.StringImm) else a)
        for a in value.args[2:]
    )
    return _Alloc(pos, binding, dims, dtype_arg.value, where)  # type: ignore[arg-type]


def _concat_parts(binding: E.Binding, tuples: dict[E.Var, E.Tuple]) -> tuple[list[E.Expr], E.Expr, int] | None:
    """(inputs, output, axis) of a concat kernel call, or None."""
    call = getattr(binding, "value", None)
    if not (isinstance(call, E.Call) and isinstance(call.op, E.ExternFunc)):
        return None
    if call.op.global_symbol != CONCAT_KERNEL or len(call.args) != 2 or call.attrs.get("num_outputs", 1) != 1:
        return None
    fields = call.args[0]
    if isinstance(fields, E.Var):
        fields = tuples.get(fields)  # type: ignore[assignment]
    if not isinstance(fields, E.Tuple):
        return None
    axis = (call.attrs.get("op_attrs") or {}).get("axis", 0)
    return list(fields.fields), call.args[1], int(axis)


class _BlockPlan:
    """Which allocations become views of which, in one binding block."""

    def __init__(self, block: E.BindingBlock, kept: set[E.Var], nested: bool, entry_vars: set) -> None:
        self.nested = nested
        self.allocs: dict[E.Var, _Alloc] = {}
        self.parent: dict[E.Var, tuple[E.Var, P.PrimExpr]] = {}  # input -> (concat output, byte offset)
        self.dropped: set[int] = set()  # positions of the concat calls made redundant
        tuples: dict[E.Var, E.Tuple] = {}
        for pos, b in enumerate(block.bindings):
            alloc = _alloc_site(pos, b, entry_vars)
            if alloc is not None:
                self.allocs[b.var] = alloc
                continue
            if isinstance(b, E.VarBinding) and isinstance(b.value, E.Tuple):
                tuples[b.var] = b.value
            parts = _concat_parts(b, tuples)
            if parts is not None and self._place(*parts, kept):
                self.dropped.add(pos)

    def _place(self, inputs: list[E.Expr], output: E.Expr, axis: int, kept: set[E.Var]) -> bool:
        out = self.allocs.get(output) if isinstance(output, E.Var) else None
        if out is None or output in kept or output in self.parent:
            return False
        ndim = len(out.shape)
        axis = axis + ndim if axis < 0 else axis
        if not 0 <= axis < ndim or any(P.const_value(d) != 1 for d in out.shape[:axis]):
            return False
        fields: list[_Alloc] = []
        for x in inputs:
            alloc = self.allocs.get(x) if isinstance(x, E.Var) else None
            if alloc is None or x in kept or x in self.parent or x is output or any(f is alloc for f in fields):
                return False
            if not self.nested and any(par is x for par, _ in self.parent.values()):
                return False  # x is a rewritten concat's output
            if alloc.dtype != out.dtype or alloc.where != out.where or len(alloc.shape) != ndim:
                return False
            others = [(a, b) for i, (a, b) in enumerate(zip(alloc.shape, out.shape)) if i != axis]
            if not all(P.prove_equal(a, b) for a, b in others):
                return False
            fields.append(alloc)
        if not P.prove_equal(functools.reduce(P.add, (f.shape[axis] for f in fields), 0), out.shape[axis]):
            return False
        run: P.PrimExpr = P.as_prim(S.dtype_nbytes(out.dtype))  # bytes per index on the axis
        for d in out.shape[axis + 1 :]:
            run = P.mul(run, d)
        offset: P.PrimExpr = P.as_prim(0)
        for f in fields:
            self.parent[f.binding.var] = (output, offset)  # type: ignore[index]
            offset = P.add(offset, P.mul(f.shape[axis], run))
        return True

    def emission(self) -> tuple[dict[int, list[E.Var]], set[E.Var]]:
        """Per position, the placed allocations (outermost first) to emit before
        that position's binding; and every variable whose binding moves."""
        children: dict[E.Var, list[E.Var]] = {}
        for child, (par, _) in self.parent.items():
            children.setdefault(par, []).append(child)
        moved = set(self.parent) | set(children)
        first: dict[E.Var, int] = {}

        def earliest(v: E.Var) -> int:  # a buffer exists before any of its parts
            if v not in first:
                first[v] = min([self.allocs[v].pos] + [earliest(c) for c in children.get(v, [])])
            return first[v]

        def depth(v: E.Var) -> int:
            return 0 if v not in self.parent else 1 + depth(self.parent[v][0])

        at: dict[int, list[E.Var]] = {}
        for v in sorted(moved, key=depth):
            at.setdefault(earliest(v), []).append(v)
        return at, moved


def _entry_vars(func: E.Function) -> set:
    """Symbolic variables the parameters define (a bare variable as a dimension or
    a shape value): known from the function's entry on."""
    out: set = set()
    stack = [p.struct_info for p in func.params]
    while stack:
        sinfo = stack.pop()
        if isinstance(sinfo, S.TupleStructInfo):
            stack.extend(sinfo.fields)
        elif isinstance(sinfo, (S.TensorStructInfo, S.ShapeStructInfo)):
            dims = sinfo.shape if isinstance(sinfo, S.TensorStructInfo) else sinfo.values
            out.update(d for d in dims or () if isinstance(d, P.PrimVar))
    return out


class _Rewriter(ExprMutator):
    def __init__(self, mod: IRModule, nested: bool, entry_vars: set) -> None:
        super().__init__(mod)
        self.nested = nested
        self.entry_vars = entry_vars
        self._kept: set[E.Var] = set()  # the current SeqExpr's result variables

    def visit_seq_expr(self, seq: E.SeqExpr) -> E.SeqExpr:
        outer, self._kept = self._kept, result_vars(seq)
        try:
            return super().visit_seq_expr(seq)
        finally:
            self._kept = outer

    def visit_binding_block(self, block: E.BindingBlock) -> E.BindingBlock:
        plan = _BlockPlan(block, self._kept, self.nested, self.entry_vars)
        if not plan.dropped:
            return super().visit_binding_block(block)
        at, moved = plan.emission()
        position = {id(b): pos for pos, b in enumerate(block.bindings)}

        def handled(binding: E.Binding) -> bool:
            pos = position[id(binding)]
            for v in at.get(pos, ()):
                self.emit_binding(self._placed(v, plan))
            return pos in plan.dropped or binding.var in moved

        return self.rebuild_block(block, handled)

    @staticmethod
    def _placed(var: E.Var, plan: _BlockPlan) -> E.VarBinding:
        """The allocation of ``var`` itself, or the view it becomes."""
        alloc = plan.allocs[var]
        if var not in plan.parent:
            return alloc.binding
        par, offset = plan.parent[var]
        sinfo = var.struct_info
        view = E.Call(
            PURE_VIEW_AT,
            (par, E.PrimValue(offset), alloc.binding.value.args[0]),  # type: ignore[attr-defined]
            sinfo_args=(sinfo,),
            struct_info=sinfo,
            span=alloc.binding.value.span,
        )
        return E.VarBinding(var, view, span=alloc.binding.span)


class ConcatInPlace(Pass):
    """See the module docstring."""

    def __init__(self) -> None:
        super().__init__("ConcatInPlace")

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        funcs = {name: self.transform_function(name, func, mod) for name, func in mod.functions.items()}
        changed = any(funcs[name] is not func for name, func in mod.functions.items())
        return mod.with_functions(funcs) if changed else mod

    @staticmethod
    def transform_function(name: str, func: E.Function, mod: IRModule) -> E.Function:
        """The first of nested / flat placement that keeps every device's lower
        bound; ``func`` itself when neither does (or nothing is placed)."""
        if isinstance(func, E.Function) and not calls_any(func, _CONCAT):
            return func
        before: dict | None = None
        entry_vars = _entry_vars(func)
        for nested in (True, False):
            new = _Rewriter(mod, nested, entry_vars).visit_expr(func)
            if new is func:
                return func
            if before is None:
                before = lower_bounds(name, func, mod)
            after = lower_bounds(name, new, mod)  # type: ignore[arg-type]
            if all(after[key] <= before.get(key, 0) for key in after):
                return new  # type: ignore[return-value]
        return func
