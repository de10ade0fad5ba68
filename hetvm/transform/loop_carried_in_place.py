"""LoopCarriedInPlace: a loop writes each row of a preallocated output in place.

Why: a loop (a function calling itself in tail position) that stacks one row
per iteration into a carried tensor -- an ONNX ``Scan`` output, a ``Loop``'s
scan output when its trip count is known -- is imported as
``acc' = scatter_nd(acc, [[i]], row)`` with ``acc`` allocated once, before the
loop. As written, ``scatter_nd`` copies ``acc`` whole every iteration: time
quadratic in the trip count, and two copies of the output alive at once. When
no one can see the old ``acc`` again, the copy is not needed: the call's
output ``builtin.alloc_tensor`` becomes ``vm.builtin.view_at(acc, 0, shape)``
and the kernel, finding its output is its input, writes only the row.

Runs after CallTIRRewrite (allocations are explicit) and InplaceElementwise,
before StaticPlanBlockMemory. For a call ``kernel.scatter_nd(p, idx, upd, out)``
(reduction "update") in a function ``f`` that calls itself, the rewrite needs:

* ``p`` is parameter ``k`` of ``f``, with ``out``'s shape, dtype and device,
  and nothing else in ``f`` reads ``p`` unless it is in the other branch of an
  ``If`` the call is in (the loop's exit returning ``p``): so no read of ``p``
  -- nor of a view of it -- can follow the write, and ``idx`` and ``upd`` are
  not its bytes;
* ``out`` is read by nothing but that kernel and ``f``'s one call of itself,
  at argument ``k`` only: the next iteration receives those bytes as its ``p``;
* ``f`` is used nowhere but in calls, and every call from another function
  passes at ``k`` bytes no one else holds: a variable bound to a fresh
  ``builtin.alloc_tensor`` that the caller reads nowhere else but in the
  kernel that fills it. Any other argument (a constant -- FoldConstant makes
  one of a small ``zeros`` --, a parameter of the caller, a value read after
  the loop) is first copied into a fresh allocation at the call
  (``vm.builtin.copy_to``): one copy per loop, not one per iteration.

The result of the loop then *is* that buffer, which the value analysis already
says (a loop's result may be its parameter ``k``), so the caller's kills and
plan keep it alive as long as the result is. ``mod.attrs["loop_carried_in_place"]``:
rewrites per function.
"""

from __future__ import annotations

from typing import Any

from ..analysis.reads import reads
from ..analysis.tail_calls import self_recursive
from ..ir import expr as E
from ..ir import struct_info as S
from ..ir.device_index import device_index
from ..ir.module import IRModule
from ..ir.visitor import ExprMutator
from ..op.effects import COPY_BUILTIN, kernel_op_of
from .call_tir_rewrite import UNIT, alloc_tensor_call
from .concat_in_place import PURE_VIEW_AT
from .inplace_elementwise import _same_tensor_type
from .pass_infra import Pass, PassContext
from .static_plan_block_memory import ALLOC_OP

__all__ = ["LoopCarriedInPlace"]

#: where a binding sits: the (If binding, branch) pairs from the function's body
Path = tuple[tuple[int, int], ...]


def _kernel(value: Any) -> str | None:
    if isinstance(value, E.Call) and isinstance(value.op, E.ExternFunc):
        return kernel_op_of(value.op.global_symbol)
    return None


def _is_alloc(value: Any) -> bool:
    return isinstance(value, E.Call) and isinstance(value.op, E.Op) and value.op.name == ALLOC_OP


class _Walk:
    """Every binding of a function with its path, and every read with the
    binding (None: a block's result) and path it happens at."""

    def __init__(self, func: E.Function) -> None:
        self.bindings: list[tuple[E.Binding, Path]] = []
        self.reads: dict[E.Var, list[tuple[E.Binding | None, Path]]] = {}
        self.globals: list[E.GlobalVar] = []  # every GlobalVar seen outside a call's op
        self.calls: list[tuple[E.Call, E.Binding, Path]] = []  # calls of module functions
        if isinstance(func.body, E.SeqExpr):
            self._seq(func.body, ())

    def _read(self, expr: E.Expr, binding: E.Binding | None, path: Path) -> None:
        for v in reads(expr):
            self.reads.setdefault(v, []).append((binding, path))
        self._globals(expr)

    def _globals(self, expr: E.Expr) -> None:
        stack = [expr]
        while stack:
            e = stack.pop()
            if isinstance(e, E.GlobalVar):
                self.globals.append(e)
            elif isinstance(e, E.Call):
                stack.extend(e.args)
                if not isinstance(e.op, E.GlobalVar):
                    stack.append(e.op)
            elif isinstance(e, E.Tuple):
                stack.extend(e.fields)
            elif isinstance(e, E.TupleGetItem):
                stack.append(e.tuple_value)
            elif isinstance(e, E.SeqExpr):
                for block in e.blocks:
                    stack.extend(b.value for b in block.bindings)  # type: ignore[attr-defined]
                stack.append(e.body)
            elif isinstance(e, E.If):
                stack.extend((e.cond, e.true_branch, e.false_branch))
            elif isinstance(e, E.Function):
                stack.append(e.body)

    def _seq(self, seq: E.SeqExpr, path: Path) -> None:
        for block in seq.blocks:
            for b in block.bindings:
                value = b.value  # type: ignore[attr-defined]
                self.bindings.append((b, path))
                if isinstance(value, E.If):
                    self._read(value.cond, b, path)
                    self._seq(value.true_branch, path + ((id(b), 0),))
                    self._seq(value.false_branch, path + ((id(b), 1),))
                    continue
                self._read(value, b, path)
                if isinstance(value, E.Call) and isinstance(value.op, E.GlobalVar):
                    self.calls.append((value, b, path))
        self._read(seq.body, None, path)


def _exclusive(a: Path, b: Path) -> bool:
    """Whether two paths are in different branches of one If (never both run)."""
    for x, y in zip(a, b):
        if x != y:
            return x[0] == y[0]
    return False


def _candidates(name: str, func: E.Function, walk: _Walk) -> list[tuple[int, E.VarBinding]]:
    """(parameter index, the output's alloc binding) of each scatter this loop
    may do in place (the conditions inside ``f``)."""
    params = {p: k for k, p in enumerate(func.params)}
    binding_of = {b.var: (b, path) for b, path in walk.bindings}
    self_calls = [(c, path) for c, _, path in walk.calls if c.op.name_hint == name]  # type: ignore[attr-defined]
    if len(self_calls) != 1:
        return []
    (self_call, _), = self_calls
    out = []
    for b, path in walk.bindings:
        call = b.value  # type: ignore[attr-defined]
        if _kernel(call) != "scatter_nd" or len(call.args) != 4:
            continue
        attrs = call.attrs.get("op_attrs") if hasattr(call.attrs, "get") else None
        if not hasattr(attrs, "get") or attrs.get("reduction", "update") != "update":
            continue
        p, dest = call.args[0], call.args[3]
        if not (isinstance(p, E.Var) and p in params and isinstance(dest, E.Var) and dest in binding_of):
            continue
        k = params[p]
        alloc, alloc_path = binding_of[dest]
        if not (isinstance(alloc, E.VarBinding) and _is_alloc(alloc.value) and alloc_path == path):
            continue
        if not _same_tensor_type(p.struct_info, dest.struct_info) or not _same_device(p, dest):
            continue
        if any(r is not b and not _exclusive(rp, path) for r, rp in walk.reads.get(p, [])):
            continue
        dest_reads = [r for r, _ in walk.reads.get(dest, [])]
        if len(dest_reads) != 2 or b not in dest_reads:
            continue
        (other,) = [r for r in dest_reads if r is not b]
        if other is None or other.value is not self_call:  # type: ignore[attr-defined]
            continue
        if [j for j, a in enumerate(self_call.args) if a is dest] != [k]:
            continue
        out.append((k, alloc))
    return out


def _same_device(a: E.Var, b: E.Var) -> bool:
    sa, sb = a.struct_info, b.struct_info
    if not (isinstance(sa, S.TensorStructInfo) and isinstance(sb, S.TensorStructInfo)):
        return False
    va, vb = sa.vdevice, sb.vdevice
    return va is None or vb is None or va == vb


def _caller_copies(name: str, k: int, param: E.Var, walks: dict[str, _Walk]) -> dict[str, list[E.Binding]] | None:
    """The calls of ``name`` from other functions that must give the loop a
    fresh copy of argument ``k`` (it is not a fresh allocation read nowhere
    else but in the kernel filling it: a constant, a parameter, a value read
    again), by caller; None when ``name`` is used as a value (who knows what
    receives it) or an argument cannot be copied (shape or dtype unknown)."""
    out: dict[str, list[E.Binding]] = {}
    for caller, walk in walks.items():
        if any(g.name_hint == name for g in walk.globals):
            return None
        if caller == name:
            continue
        binding_of = {b.var: b for b, _ in walk.bindings}
        for call, cb, _ in walk.calls:
            if call.op.name_hint != name:  # type: ignore[attr-defined]
                continue
            if k >= len(call.args):
                return None
            if not _fresh_for(call.args[k], k, call, cb, walk, binding_of):
                sinfo = call.args[k].struct_info
                if not (isinstance(sinfo, S.TensorStructInfo) and sinfo.shape is not None and sinfo.dtype is not None):
                    return None
                out.setdefault(caller, []).append(cb)
    return out


def _fresh_for(arg: E.Expr, k: int, call: E.Call, cb: E.Binding, walk: _Walk, binding_of: dict) -> bool:
    """``arg`` is a fresh allocation of the caller, passed once, read by
    nothing else than the kernel that fills it and this call."""
    if not isinstance(arg, E.Var) or [j for j, a in enumerate(call.args) if a is arg] != [k]:
        return False
    bound = binding_of.get(arg)
    if not (isinstance(bound, E.VarBinding) and _is_alloc(bound.value)):
        return False
    readers = [r for r, _ in walk.reads.get(arg, [])]
    if len(readers) != 2 or cb not in readers:
        return False
    (filler,) = [r for r in readers if r is not cb]
    value = getattr(filler, "value", None)
    return _kernel(value) is not None and bool(value.args) and value.args[-1] is arg


class _Rewrite(ExprMutator):
    """Swaps the chosen allocations for views of the loop's parameters, and
    gives the chosen calls a fresh copy of their argument."""

    def __init__(self, mod: IRModule, views: dict[E.Var, E.VarBinding], copies: dict[E.Binding, list[tuple[int, E.Var]]]) -> None:
        super().__init__()
        self.mod = mod
        self.views = views
        self.copies = copies

    def visit_binding(self, binding: E.Binding) -> None:
        new = self.views.get(binding.var)
        if new is not None:
            self.emit_binding(new)
            return
        todo = self.copies.get(binding)
        if todo is None:
            super().visit_binding(binding)
            return
        call = binding.value  # type: ignore[attr-defined]
        args = [self.visit_expr(a) for a in call.args]
        for k, param in todo:
            args[k] = self._fresh_copy(args[k], param)
        value = E.Call(call.op, tuple(args), call.attrs, call.sinfo_args, struct_info=call.struct_info, span=call.span)
        self.emit_binding(E.VarBinding(binding.var, value, span=binding.span))

    def _fresh_copy(self, arg: E.Expr, param: E.Var) -> E.Var:
        sinfo = arg.struct_info
        assert isinstance(sinfo, S.TensorStructInfo)
        vdevice = param.struct_info.vdevice if isinstance(param.struct_info, S.TensorStructInfo) else None
        sinfo = S.TensorStructInfo(sinfo.shape, sinfo.dtype, vdevice=vdevice or sinfo.vdevice)
        dev = device_index(self.mod, sinfo.vdevice)
        fresh = E.Var(self.names.unique(f"{param.name_hint}_init"), struct_info=sinfo)
        self.emit_binding(E.VarBinding(fresh, alloc_tensor_call(sinfo, dev)))
        copy = E.Call(E.ExternFunc(COPY_BUILTIN), (arg, E.PrimValue(dev), fresh), sinfo_args=(UNIT,), struct_info=UNIT)
        self.emit_binding(E.VarBinding(E.Var(self.names.unique("_"), struct_info=UNIT), copy))
        return fresh


def _view_of(param: E.Var, alloc: E.VarBinding) -> E.VarBinding:
    sinfo = alloc.var.struct_info
    value = alloc.value
    view = E.Call(PURE_VIEW_AT, (param, E.PrimValue(0), value.args[0]),  # type: ignore[attr-defined]
                  sinfo_args=(sinfo,), struct_info=sinfo, span=value.span)  # fmt: skip
    return E.VarBinding(alloc.var, view, span=alloc.span)


class LoopCarriedInPlace(Pass):
    """See the module docstring."""

    def __init__(self) -> None:
        super().__init__("LoopCarriedInPlace")

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        funcs = {n: f for n, f in mod.functions.items() if isinstance(f, E.Function)}
        loops = [n for n, f in funcs.items() if self_recursive(f, n)]
        if not loops:
            return mod
        walks = {n: _Walk(f) for n, f in funcs.items()}
        views: dict[str, dict[E.Var, E.VarBinding]] = {}
        copies: dict[str, dict[E.Binding, list[tuple[int, E.Var]]]] = {}
        counts: dict[str, int] = {}
        for name in loops:
            func = funcs[name]
            for k, alloc in _candidates(name, func, walks[name]):
                todo = _caller_copies(name, k, func.params[k], walks)
                if todo is None:
                    continue
                views.setdefault(name, {})[alloc.var] = _view_of(func.params[k], alloc)
                counts[name] = counts.get(name, 0) + 1
                for caller, bindings in todo.items():
                    for cb in bindings:
                        copies.setdefault(caller, {}).setdefault(cb, []).append((k, func.params[k]))
        if not counts:
            return mod
        new = dict(mod.functions)
        for name in set(views) | set(copies):
            new[name] = _Rewrite(mod, views.get(name, {}), copies.get(name, {})).visit_function(funcs[name])  # type: ignore[assignment]
        out = mod.with_functions(new)
        out.attrs["loop_carried_in_place"] = counts
        return out
