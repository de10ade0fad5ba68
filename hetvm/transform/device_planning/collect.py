"""Walks a module and states its placement problem (see :mod:`.graph`).

The walk records, per binding, what the rewriter needs later (the domain an op
runs in, the copy value of a hint) so placement and rewriting agree by
construction. Which vdevices in struct info are *constraints*:

* parameters and declared return types: pins; a tensor parameter of a public
  function without an annotation is pinned to the default device when that is
  not the host (the inputs of a program built for ``cuda`` live there);
* a binding's annotation on an op result that differs from what inference
  propagates from the inputs (or on an op without tensor inputs): a pin of the op;
  an annotation equal to the propagated one is not a constraint, so a value that
  merely inherits ``sim`` from its inputs can still fall back to the CPU;
* any other annotation that differs from its value's struct info: a wanted copy.
"""

from __future__ import annotations

from typing import Callable

from ...analysis.tail_calls import self_recursive
from ...analysis.trip_counts import TripCount, trip_counts
from ...errors import DevicePlanError
from ...ir import expr as E
from ...ir import struct_info as S
from ...ir.module import IRModule
from ...ir.op_registry import DeviceBehavior, op_info
from ...ir.span import Span
from ...op.base import common_vdevice
from ...op.effects import kernel_op_of
from .devices import DeviceKey, DeviceTable, key_str
from .graph import CONST, Constraint, Demand, Problem, Tree, tensor_nbytes, where, zip_leaves

#: what the minimum cut assumes a loop's iterations to be when its trip count
#: is not known at compile time: a copy inside a loop body costs this many times
#: its bytes, one made before the loop once
LOOP_ITERATIONS = 16


def loop_weight(trips: TripCount | None) -> int:
    """The iterations a copy inside a loop is weighed by: the trip count when
    known, ``LOOP_ITERATIONS`` when not, and for a loop that runs *at most* N
    times the smaller of N and ``LOOP_ITERATIONS``; never below 1."""
    if trips is None:
        return LOOP_ITERATIONS
    return max(trips.count if trips.exact else min(trips.count, LOOP_ITERATIONS), 1)


def loop_repeats(mod: IRModule, trips: dict[str, TripCount] | None = None) -> dict[str, int]:
    """Function -> the times its body may run per call of the program: a loop
    (a function calling itself in tail position) ``loop_weight`` times per
    call, a function called from a loop body as often as that body."""
    if trips is None:
        trips = trip_counts(mod)
    calls: dict[str, set[str]] = {}
    own: dict[str, int] = {}
    for name, func in mod.functions.items():
        own[name] = loop_weight(trips.get(name)) if self_recursive(func, name) else 1
        for callee in _callees(func):
            if callee != name and callee in mod:
                calls.setdefault(callee, set()).add(name)
    out = dict(own)
    for _ in range(len(out)):  # the call graph without self-calls: settles in that many rounds
        changed = False
        for name in out:
            callers = [out[c] for c in calls.get(name, ()) if c in out]
            value = own[name] * max(callers, default=1)
            value = min(value, LOOP_ITERATIONS**4)
            if value != out[name]:
                out[name], changed = value, True
        if not changed:
            break
    return {k: v for k, v in out.items() if v != 1}


def _callees(func: E.Function) -> set[str]:
    out: set[str] = set()
    stack: list[E.Expr] = [func.body]
    while stack:
        e = stack.pop()
        if isinstance(e, E.SeqExpr):
            for block in e.blocks:
                stack.extend(b.value for b in block.bindings)  # type: ignore[attr-defined]
        elif isinstance(e, E.If):
            stack.extend((e.true_branch, e.false_branch))
        elif isinstance(e, E.Call) and isinstance(e.op, E.GlobalVar):
            out.add(e.op.name_hint)
    return out


def _flat_tensor_sinfos(sinfo: S.StructInfo | None) -> list[S.StructInfo]:
    if isinstance(sinfo, S.TensorStructInfo):
        return [sinfo]
    if isinstance(sinfo, S.TupleStructInfo):
        out: list[S.StructInfo] = []
        for f in sinfo.fields:
            out.extend(_flat_tensor_sinfos(f))
        return out
    return []


class Collector:
    """Builds a :class:`Problem` for a module; keeps per-binding facts for rewriting."""

    def __init__(self, mod: IRModule, table: DeviceTable) -> None:
        self.mod = mod
        self.table = table
        self.problem = Problem()
        self.env: dict[E.Var, Tree] = {}
        self.param_trees: dict[str, list[Tree]] = {}
        self.ret_domains: dict[str, Tree] = {}
        #: binding -> domain of the op it runs (ops, packed calls)
        self.op_domain: dict[E.Binding, int] = {}
        #: binding -> the copy value a hint / to_vdevice / annotation introduced
        self.binding_tree: dict[E.Binding, Tree] = {}
        self._func = ""
        self._bounds: dict[str, int] = {}

    # -- entry -----------------------------------------------------------------
    def run(self) -> Problem:
        self.problem.trip_counts = trip_counts(self.mod)
        self.problem.repeats = loop_repeats(self.mod, self.problem.trip_counts)
        self.problem.loops = {n for n, f in self.mod.functions.items() if self_recursive(f, n)}
        for name, func in self.mod.functions.items():
            self._declare_function(name, func)
        for name, func in self.mod.functions.items():
            self._func = name
            self._bounds = {str(k): int(v) for k, v in dict(func.attrs.get("tir_var_upper_bound", {}) or {}).items()}
            body = self.walk_seq(func.body)
            ret = self.ret_domains[name]
            for v, dom in zip_leaves(body, ret):
                self.problem.demand(
                    Demand(v, "return", f"result of '{name}'",
                           f"result of '{name}' is returned on its declared/planned result device",
                           func.body.body.span or func.span, domain=dom)
                )
        return self.problem

    def key(self, vdev, what: str, span: Span | None) -> DeviceKey:
        try:
            return self.table.lookup(vdev, what)
        except DevicePlanError as err:
            raise DevicePlanError(f"{err}{where(span)}") from None

    # -- trees -----------------------------------------------------------------
    def make_tree(
        self, sinfo: S.StructInfo | None, name: str, domain: Callable[[tuple[int, ...]], int],
        span: Span | None, path: tuple[int, ...] = (),
    ) -> Tree:
        if isinstance(sinfo, S.TensorStructInfo):
            label = name + "".join(f"[{i}]" for i in path)
            nbytes = tensor_nbytes(sinfo, self._bounds)
            return self.problem.new_value(label, self._func, nbytes, domain(path), span, sinfo=sinfo)
        if isinstance(sinfo, S.TupleStructInfo):
            return tuple(
                self.make_tree(f, name, domain, span, path + (i,)) for i, f in enumerate(sinfo.fields)
            )
        return None

    def tree_of(self, expr: E.Expr) -> Tree:
        if isinstance(expr, E.Var):
            return self.env.get(expr)
        if isinstance(expr, E.Constant):
            return CONST
        if isinstance(expr, E.Tuple):
            return tuple(self.tree_of(f) for f in expr.fields)
        if isinstance(expr, E.TupleGetItem):
            t = self.tree_of(expr.tuple_value)
            return t[expr.index] if isinstance(t, tuple) else None
        return None

    # -- functions ---------------------------------------------------------------
    def _declare_function(self, name: str, func: E.Function) -> None:
        self._func = name
        self._bounds = {str(k): int(v) for k, v in dict(func.attrs.get("tir_var_upper_bound", {}) or {}).items()}
        trees: list[Tree] = []
        entry = not func.attrs.get("private")  # called from outside: its inputs come from the caller
        for p in func.params:
            span = p.span or func.span

            def dom(path: tuple[int, ...], p: E.Var = p, span: Span | None = span) -> int:
                d = self.problem.new_domain(f"parameter '{p.name_hint}' of '{name}'", span)
                leaf = _sinfo_at(p.struct_info, path)
                what = f"parameter '{p.name_hint}' of '{name}'"
                if isinstance(leaf, S.TensorStructInfo) and leaf.vdevice is not None:
                    key = self.key(leaf.vdevice, what, span)
                    self.problem.pin(d, Constraint(key, f"the annotation of {what}", span), p.name_hint)
                elif isinstance(leaf, S.TensorStructInfo) and entry and not self.table.default.is_host:
                    # an input of the program lives on the device it is built for (as
                    # in TVM); left free, the cut would move a whole model to the host
                    # to spare one small copy of shape work
                    key = self.key(self.table.default, what, span)
                    reason = f"{what} has no annotation: inputs live on the build's target {key_str(key)}"
                    self.problem.pin(d, Constraint(key, reason, span), p.name_hint)
                return d

            tree = self.make_tree(p.struct_info, p.name_hint, dom, span)
            self.env[p] = tree
            trees.append(tree)
        self.param_trees[name] = trees
        self.ret_domains[name] = self._ret_tree(name, func, func.ret_struct_info or func.body.struct_info)

    def _ret_tree(self, name: str, func: E.Function, sinfo: S.StructInfo | None) -> Tree:
        if isinstance(sinfo, S.TensorStructInfo):
            d = self.problem.new_domain(f"result of '{name}'", func.span)
            if sinfo.vdevice is not None:
                what = f"the declared return type of '{name}'"
                key = self.key(sinfo.vdevice, what, func.span)
                self.problem.pin(d, Constraint(key, what, func.span), f"result of {name}")
            return d
        if isinstance(sinfo, S.TupleStructInfo):
            return tuple(self._ret_tree(name, func, f) for f in sinfo.fields)
        return None

    # -- bodies ------------------------------------------------------------------
    def walk_seq(self, seq: E.SeqExpr) -> Tree:
        for block in seq.blocks:
            for b in block.bindings:
                self.binding(b)
        return self.tree_of(seq.body)

    def binding(self, b: E.Binding) -> None:
        value = b.value  # type: ignore[attr-defined]
        var = b.var
        span = b.span or value.span
        if isinstance(b, E.MatchCast):
            tree = self.annotate(var.name_hint, b.struct_info, value.struct_info, self.tree_of(value), span)
            tree = self.held_constants(var, value, tree, span)
        elif isinstance(value, E.Call):
            tree = self.call(b, var, value, span)
        elif isinstance(value, E.If):
            tree = self.if_(var, value, span)
        else:
            tree = self.tree_of(value)
            tree = self.annotate(var.name_hint, var.struct_info, value.struct_info, tree, span)
            if not isinstance(value, (E.Var, E.Constant)):  # a tuple or a projection
                tree = self.held_constants(var, value, tree, span)
        self.env[var] = tree
        self.binding_tree[b] = tree

    def held_constants(
        self, var: E.Var, value: E.Expr, tree: Tree, span: Span | None, path: tuple[int, ...] = (),
    ) -> Tree:
        """Values for the constants a binding holds other than by naming them.

        A constant is free to read anywhere only through its own names (``y = c``,
        a hint of one): the rewriter reads the constant itself there, on the
        reader's device. A match_cast of a constant, or a tuple holding one, is
        bound once (the match_cast defines shape variables, the tuple is one
        object), on one device, and its readers read that binding; so each such
        leaf is a value of its own, placed like any other, and copied (and
        explained) when it is read elsewhere. An annotation naming a device pins
        it there: the rewriter materialises the constant there directly."""
        if tree == CONST:
            sinfo = _sinfo_at(var.struct_info, path)
            if not isinstance(sinfo, S.TensorStructInfo):
                return tree
            have = _sinfo_at(value.struct_info, path)
            label = var.name_hint + "".join(f"[{i}]" for i in path)
            dom = self.problem.new_domain(f"constant held by '{label}'", span)
            if sinfo.vdevice is not None:
                key = self.key(sinfo.vdevice, f"the annotation of '{label}'", span)
                self.problem.pin(dom, Constraint(key, f"the annotation of '{label}'", span), label)
            nbytes = tensor_nbytes(have if isinstance(have, S.TensorStructInfo) else sinfo, self._bounds)
            return self.problem.new_value(label, self._func, nbytes, dom, span, sinfo=sinfo)
        if isinstance(tree, tuple):
            return tuple(self.held_constants(var, value, t, span, path + (i,)) for i, t in enumerate(tree))
        return tree

    def annotate(
        self, name: str, want: S.StructInfo | None, have: S.StructInfo | None, tree: Tree,
        span: Span | None, path: tuple[int, ...] = (),
    ) -> Tree:
        """Copy values for leaves whose annotation names another device than the value's."""
        if tree is None or tree == CONST:
            return tree
        if isinstance(tree, int):
            if not isinstance(want, S.TensorStructInfo) or want.vdevice is None:
                return tree
            have_dev = have.vdevice if isinstance(have, S.TensorStructInfo) else None
            if have_dev is not None and self.key(have_dev, name, span) == self.key(want.vdevice, name, span):
                return tree
            label = name + "".join(f"[{i}]" for i in path)
            key = self.key(want.vdevice, f"the annotation of '{label}'", span)
            return self.copy_value(tree, key, label, "annotation",
                                   f"the annotation of '{label}'{where(span)} names {key_str(key)}", span)
        fields_w = want.fields if isinstance(want, S.TupleStructInfo) else (None,) * len(tree)
        fields_h = have.fields if isinstance(have, S.TupleStructInfo) else (None,) * len(tree)
        return tuple(
            self.annotate(name, w, h, t, span, path + (i,))
            for i, (t, w, h) in enumerate(zip(tree, fields_w, fields_h))
        )

    def copy_value(self, src: int, key: DeviceKey, name: str, kind: str, reason: str, span: Span | None) -> int:
        """A value carrying ``src``'s data on device ``key`` (hint, to_vdevice, annotation)."""
        dom = self.problem.new_domain(f"{kind} '{name}'", span)
        self.problem.pin(dom, Constraint(key, reason, span), name)
        src_val = self.problem.values[src]
        v = self.problem.new_value(name, self._func, src_val.nbytes, dom, span, origin=src, sinfo=src_val.sinfo)
        self.problem.demand(Demand(src, kind, name, reason, span, device=key))
        return v

    def call(self, b: E.Binding, var: E.Var, call: E.Call, span: Span | None) -> Tree:
        op = call.op
        name = var.name_hint
        if isinstance(op, E.Op):
            info = op_info(op)
            beh = info.device_behavior
            if beh in (DeviceBehavior.ANNOTATION, DeviceBehavior.CROSS_DEVICE):
                src = self.tree_of(call.args[0])
                dst = call.attrs.get("dst_vdevice")
                kind = "hint" if beh is DeviceBehavior.ANNOTATION else "to_vdevice"
                spelled = "R.hint_on_device" if kind == "hint" else "R.to_vdevice"
                key = self.key(dst, f"{spelled} of '{name}'", span)
                if src == CONST or src is None:
                    return src
                if not isinstance(src, int):
                    raise DevicePlanError(f"{spelled} of '{name}'{where(span)} needs a tensor")
                reason = f"{spelled}(..., {key_str(key)}){where(span)}"
                return self.copy_value(src, key, name, kind, reason, span)
            if beh is DeviceBehavior.HOST_ONLY:
                if not _flat_tensor_sinfos(call.struct_info):
                    return None  # shapes and scalars: no device
                # a host computation that yields a tensor (shape_to_tensor) lives on the host
                return self.host_call(b, var, info.name, call.args, call, span)
            if beh is DeviceBehavior.MEMORY and info.name != "call_dps_packed":
                return self.pinned_by_sinfo(b, var, call, span)
            if info.name == "call_dps_packed":
                func, args = call.args
                kname = getattr(func, "global_symbol", "")
                inputs = args.fields if isinstance(args, E.Tuple) else (args,)
                kernel = kernel_op_of(kname)
                if kernel is not None:
                    return self.op_call(b, var, kernel, inputs, span, call)
                return self.host_call(b, var, kname, inputs, call, span)
            return self.op_call(b, var, info.name, call.args, span, call)
        if isinstance(op, E.GlobalVar) and op.name_hint in self.mod:
            return self.func_call(b, var, op.name_hint, call, span)
        label = getattr(op, "global_symbol", None) or getattr(op, "name_hint", "?")
        return self.host_call(b, var, str(label), call.args, call, span)

    def op_call(
        self, b: E.Binding, var: E.Var, op: str, inputs: tuple[E.Expr, ...], span: Span | None, call: E.Call
    ) -> Tree:
        name = var.name_hint
        dom = self.problem.new_domain(f"'{op}' computing '{name}' in '{self._func}'", span, op=op)
        self.op_domain[b] = dom
        in_sinfos: list[S.StructInfo] = []
        for a in inputs:
            in_sinfos.extend(_flat_tensor_sinfos(a.struct_info))
            for v in _tree_leaves(self.tree_of(a)):
                self.problem.demand(Demand(v, "op-input", name, f"input of '{op}' computing '{name}'", span, domain=dom))
        inferred = common_vdevice(in_sinfos)
        inferred_key = self.key(inferred, name, span) if inferred is not None else None
        for leaf in _flat_tensor_sinfos(var.struct_info):
            assert isinstance(leaf, S.TensorStructInfo)
            if leaf.vdevice is None:
                continue
            key = self.key(leaf.vdevice, f"the annotation of '{name}'", span)
            if key != inferred_key:
                self.problem.pin(dom, Constraint(key, f"the annotation of '{name}' ({op})", span), name)
        return self.make_tree(call.struct_info or var.struct_info, name, lambda _p: dom, span)

    def host_call(
        self, b: E.Binding, var: E.Var, label: str, inputs: tuple[E.Expr, ...], call: E.Call, span: Span | None
    ) -> Tree:
        """A packed/extern call: runs where its declared output lives, else on the host."""
        name = var.name_hint
        dom = self.problem.new_domain(f"packed call '{label}' computing '{name}'", span)
        self.op_domain[b] = dom
        outs = _flat_tensor_sinfos(call.sinfo_args[0] if call.sinfo_args else None)
        vdev = next((s.vdevice for s in outs if s.vdevice is not None), None)  # type: ignore[union-attr]
        key = self.key(vdev, f"packed call '{label}'", span) if vdev is not None else self.table_host()
        self.problem.pin(dom, Constraint(key, f"packed function '{label}'", span), name)
        for a in inputs:
            for v in _tree_leaves(self.tree_of(a)):
                self.problem.demand(Demand(v, "op-input", name, f"input of packed function '{label}'", span, domain=dom))
        return self.make_tree(call.struct_info or var.struct_info, name, lambda _p: dom, span)

    def table_host(self) -> DeviceKey:
        from .devices import device_key

        return device_key(self.table.host)

    def pinned_by_sinfo(self, b: E.Binding, var: E.Var, call: E.Call, span: Span | None) -> Tree:
        name = var.name_hint
        dom = self.problem.new_domain(f"'{call.op.name}' computing '{name}'", span)  # type: ignore[attr-defined]
        self.op_domain[b] = dom
        for leaf in _flat_tensor_sinfos(call.struct_info):
            if isinstance(leaf, S.TensorStructInfo) and leaf.vdevice is not None:
                key = self.key(leaf.vdevice, name, span)
                self.problem.pin(dom, Constraint(key, f"the allocation of '{name}'", span), name)
        return self.make_tree(call.struct_info, name, lambda _p: dom, span)

    def func_call(self, b: E.Binding, var: E.Var, callee: str, call: E.Call, span: Span | None) -> Tree:
        name = var.name_hint
        for i, (arg, ptree) in enumerate(zip(call.args, self.param_trees[callee])):
            pleaves = _tree_map(ptree, lambda v: self.problem.values[v].domain)
            for v, dom in zip_leaves(self.tree_of(arg), pleaves):
                param = self.mod[callee].params[i].name_hint
                self.problem.demand(Demand(
                    v, "call-arg", f"{callee}({param})",
                    f"function boundary: argument '{param}' of '{callee}'", span, domain=dom))
        ret = self.ret_domains[callee]

        def dom_at(path: tuple[int, ...]) -> int:
            t = ret
            for i in path:
                t = t[i] if isinstance(t, tuple) else t
            if isinstance(t, int):
                return t
            return self.problem.new_domain(f"result of '{callee}'", span)

        tree = self.make_tree(call.struct_info or var.struct_info, name, dom_at, span)
        return self.annotate(name, var.struct_info, call.struct_info, tree, span)

    def if_(self, var: E.Var, node: E.If, span: Span | None) -> Tree:
        cond = self.tree_of(node.cond)
        host = self.table_host()
        for v in _tree_leaves(cond):
            self.problem.demand(Demand(v, "if-cond", f"If at '{var.name_hint}'",
                                       f"the condition of the If binding '{var.name_hint}' is read on the host",
                                       span, device=host))
        t_tree = self.walk_seq(node.true_branch)
        f_tree = self.walk_seq(node.false_branch)
        name = var.name_hint
        tree = self.make_tree(
            node.struct_info or var.struct_info, name,
            lambda _p: self.problem.new_domain(f"If result '{name}'", span), span,
        )
        doms = _tree_map(tree, lambda v: self.problem.values[v].domain)
        for branch in (t_tree, f_tree):
            for v, dom in zip_leaves(branch, doms):
                self.problem.demand(Demand(v, "if-result", name, f"result of the If binding '{name}'", span, domain=dom))
        return tree


def _tree_leaves(tree: Tree) -> list[int]:
    from .graph import leaves

    return leaves(tree)


def _tree_map(tree: Tree, fn: Callable[[int], int]) -> Tree:
    if tree is None or tree == CONST:
        return None
    if isinstance(tree, int):
        return fn(tree)
    return tuple(_tree_map(t, fn) for t in tree)


def _sinfo_at(sinfo: S.StructInfo | None, path: tuple[int, ...]) -> S.StructInfo | None:
    for i in path:
        if not isinstance(sinfo, S.TupleStructInfo):
            return None
        sinfo = sinfo.fields[i]
    return sinfo
