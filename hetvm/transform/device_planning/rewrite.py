"""Rewriting a module after placement: one copy per (value, destination), devices in struct info.

Every use of a tensor reads it on a device (an op's, a parameter's, the host
for an ``If`` condition ...). When the value lives elsewhere, the use reads a
copy ``R.to_vdevice(value, dst)``; the copy is made once and shared, and sits at
the end-so-far of the block that defines the value, so it comes before every
consumer (in that block, a later one or a nested branch). Hints disappear;
explicit ``to_vdevice`` calls become these copies too (named after their
variable), so an explicit copy to the device its input already lives on goes
away: such a hint or copy reads its argument itself. A copy read where a
match_cast alias was read (by an op, a hint, a return ...) is cast to the
alias's shape (``as_alias``), so no read of an alias falls back to its
source's shape. A constant read by an op needs no copy: the runtime materialises it on
the op's device, so a constant read on two devices simply appears with two
vdevices. Anywhere else (a call argument, a returned or aliased value) a
constant wanted on a non-host device is copied there with ``R.to_vdevice``, so
the copy lands in planned memory rather than in one the VM makes on the side.
"""

from __future__ import annotations

from typing import Any, Callable

from ...analysis.trip_counts import TripCount
from ...ir import expr as E
from ...ir import struct_info as S
from ...ir.module import IRModule
from ...ir.op_registry import DeviceBehavior, get_op, op_info
from ...ir.structural import structural_equal
from .collect import LOOP_ITERATIONS, Collector
from .devices import DeviceKey, DeviceTable, device_key, key_str
from .graph import CONST, Tree
from .solve import Placement

Want = Callable[[tuple[int, ...]], "DeviceKey | None"]
_PRIORITY = ["to_vdevice", "hint", "annotation", "call-arg", "return", "if-cond", "if-result", "op-input"]


class _Frame:
    """Binding lists of one SeqExpr, kept open until the SeqExpr is finished."""

    def __init__(self) -> None:
        self.blocks: list[tuple[bool, list[E.Binding]]] = []
        # copies of constants bound in this SeqExpr, one per (constant, device):
        # they dominate everything built after them here and in nested branches
        self.const_copies: dict[tuple[int, DeviceKey], E.Var] = {}

    def open(self, dataflow: bool) -> list[E.Binding]:
        lst: list[E.Binding] = []
        self.blocks.append((dataflow, lst))
        return lst

    def last(self) -> list[E.Binding]:
        return self.blocks[-1][1] if self.blocks else self.open(False)


class Rewriter:
    def __init__(self, mod: IRModule, table: DeviceTable, col: Collector, placement: Placement) -> None:
        self.mod = mod
        self.table = table
        self.col = col
        self.pl = placement
        self.problem = placement.problem
        self.new_var: dict[E.Var, E.Var] = {}
        self.const_of: dict[E.Var, E.Constant] = {}
        self.home: dict[int, tuple[E.Var, tuple[int, ...], list[E.Binding]]] = {}
        self.refs: dict[int, E.Var] = {}
        self.copies: dict[tuple[int, DeviceKey], E.Var] = {}
        self.defined_in: dict[E.Var, list[E.Binding]] = {}
        self.recasts: dict[tuple[E.Var, E.Var], E.Var] = {}
        self.copy_order: list[tuple[int, DeviceKey]] = []
        self.consts: dict[tuple[int, DeviceKey], E.Constant] = {}
        self.cur: list[E.Binding] = []
        self.frames: list[_Frame] = []
        self.func_sinfo: dict[str, S.FuncStructInfo] = {}
        self.used_names: set[str] = set()

    # -- devices ---------------------------------------------------------------
    def vdev(self, key: DeviceKey):
        return self.table.vdevice(key)

    def dev_tree(self, tree: Tree) -> Any:
        if tree is None:
            return None
        if tree == CONST:
            return device_key(self.table.default)
        if isinstance(tree, int):
            return self.pl.value_device(tree)
        return tuple(self.dev_tree(t) for t in tree)

    def with_devices(self, sinfo: S.StructInfo | None, devs: Any) -> S.StructInfo | None:
        if isinstance(sinfo, S.TensorStructInfo) and isinstance(devs, tuple) and len(devs) == 3 and isinstance(devs[0], str):
            vd = self.vdev(devs)
            return sinfo if sinfo.vdevice == vd else sinfo.with_vdevice(vd)
        if isinstance(sinfo, S.TupleStructInfo) and isinstance(devs, tuple) and len(devs) == len(sinfo.fields):
            return S.TupleStructInfo([self.with_devices(f, d) for f, d in zip(sinfo.fields, devs)])  # type: ignore[misc]
        return sinfo

    def renew(self, var: E.Var, sinfo: S.StructInfo | None) -> E.Var:
        if sinfo is None or (var.struct_info is not None and structural_equal(var.struct_info, sinfo, map_free_vars=False)):
            return var
        return type(var)(var.name_hint, struct_info=sinfo, span=var.span)

    def fresh_name(self, hint: str) -> str:
        name, n = hint, 0
        while name in self.used_names:
            n += 1
            name = f"{hint}{n}"
        self.used_names.add(name)
        return name

    # -- values ----------------------------------------------------------------
    def set_homes(self, old_tree: Tree, var: E.Var, block: list[E.Binding], path: tuple[int, ...] = ()) -> None:
        if old_tree is None or old_tree == CONST:
            return
        if isinstance(old_tree, int):
            if old_tree not in self.home and self.problem.values[old_tree].origin is None:
                self.home[old_tree] = (var, path, block)
            return
        for i, t in enumerate(old_tree):
            self.set_homes(t, var, block, path + (i,))

    def ref(self, v: int) -> E.Var:
        """A variable holding value ``v`` where it lives (projections bound once)."""
        if v in self.refs:
            return self.refs[v]
        var, path, block = self.home[v]
        cur: E.Expr = var
        for depth, i in enumerate(path):
            item = E.TupleGetItem(cur, i)
            tmp = E.Var(self.fresh_name(f"{var.name_hint}_{'_'.join(map(str, path[: depth + 1]))}"),
                        struct_info=item.struct_info)
            block.append(E.VarBinding(tmp, item))
            cur = tmp
        assert isinstance(cur, E.Var)
        self.refs[v] = cur
        return cur

    def materialize(self, v: int, dst: DeviceKey, name: str | None = None) -> E.Var:
        r = self.problem.root_value(v)
        if self.pl.value_device(r) == dst:
            return self.ref(r)
        key = (r, dst)
        if key in self.copies:
            return self.copies[key]
        src = self.ref(r)
        val = self.problem.values[r]
        sinfo = val.sinfo.with_vdevice(self.vdev(dst))
        kind = dst[0].replace("/", "_") + str(dst[1])  # "hostB/sim" -> hostB_sim
        # an explicit copy keeps its own variable name; a planned one gets a fresh one
        label = name or self.fresh_name(f"{val.name.replace('[', '_').replace(']', '')}_{kind}")
        copy = E.Var(label, struct_info=sinfo)
        call = E.Call(get_op("to_vdevice"), (src,), E.Attrs({"dst_vdevice": self.vdev(dst)}),
                      struct_info=sinfo, span=val.span)
        self.home[r][2].append(E.VarBinding(copy, call, span=val.span))
        self.copies[key] = copy
        self.copy_order.append(key)
        return copy

    def const_on(self, c: E.Constant, dst: DeviceKey | None) -> E.Constant:
        if dst is None or not isinstance(c.struct_info, S.TensorStructInfo):
            return c
        key = (id(c), dst)
        if key not in self.consts:
            self.consts[key] = E.Constant(c.data, struct_info=c.struct_info.with_vdevice(self.vdev(dst)), span=c.span)
        return self.consts[key]

    def const_value(self, c: E.Constant, dst: DeviceKey | None, op_operand: bool) -> E.Expr:
        """``c`` on ``dst``; outside an op's operands, a device other than the host
        gets a real copy (bound here) that the memory planner sees."""
        if op_operand or dst is None or not isinstance(c.struct_info, S.TensorStructInfo):
            return self.const_on(c, dst)
        vdev = self.vdev(dst)
        if vdev.is_host:
            return self.const_on(c, dst)
        key = (id(c), dst)
        for frame in reversed(self.frames):  # one copy per (constant, device) in scope
            if key in frame.const_copies:
                return frame.const_copies[key]
        src = self.const_on(c, device_key(self.table.host))
        sinfo = c.struct_info.with_vdevice(vdev)
        copy = E.Var(self.fresh_name(f"const_{dst[0].replace('/', '_')}{dst[1]}"), struct_info=sinfo)
        call = E.Call(get_op("to_vdevice"), (src,), E.Attrs({"dst_vdevice": vdev}), struct_info=sinfo, span=c.span)
        self.cur.append(E.VarBinding(copy, call, span=c.span))
        if self.frames:
            self.frames[-1].const_copies[key] = copy
        return copy

    def const_source(self, expr: E.Expr) -> E.Constant | None:
        """The constant ``expr`` is (itself, or a variable bound to one)."""
        if isinstance(expr, E.Constant):
            return expr
        if isinstance(expr, E.Var):
            return self.const_of.get(expr)
        return None

    # -- expressions -------------------------------------------------------------
    def satisfied(self, tree: Tree, want: Want, path: tuple[int, ...]) -> bool:
        if tree is None or tree == CONST:
            return True
        if isinstance(tree, int):
            k = want(path)
            return k is None or k == self.pl.value_device(tree)
        return all(self.satisfied(t, want, path + (i,)) for i, t in enumerate(tree))

    def bind_here(self, expr: E.Expr, hint: str) -> E.Var:
        if isinstance(expr, E.Var):
            return expr
        var = E.Var(self.fresh_name(hint), struct_info=expr.struct_info)
        self.cur.append(E.VarBinding(var, expr))
        return var

    def rebuild_tree(self, base: E.Expr, tree: Tree, want: Want, path: tuple[int, ...], hint: str) -> E.Expr:
        if self.satisfied(tree, want, path):
            return self.bind_here(base, hint) if isinstance(base, E.TupleGetItem) else base
        if isinstance(tree, int):
            return self.as_alias(base, self.materialize(tree, want(path)), hint)  # type: ignore[arg-type]
        assert isinstance(tree, tuple)
        return E.Tuple(tuple(
            self.rebuild_tree(E.TupleGetItem(base, i), t, want, path + (i,), f"{hint}_{i}")
            for i, t in enumerate(tree)
        ))

    def as_alias(self, alias: E.Expr, copy: E.Var, hint: str) -> E.Expr:
        """``copy`` (of the root value) where ``alias`` was read. An alias made by a
        match_cast knows a shape the root does not (``(d0, d1)`` for ``(n, n)``); a
        match_cast of the copy keeps that shape, so later struct info stays exact.

        The cast is bound once per (alias, copy), right after the later of the two
        definitions: in a branch it would count as defining the shape variables
        there, and the branch's result would lose its shape when leaving it."""
        want, got = alias.struct_info, copy.struct_info
        if not (isinstance(want, S.TensorStructInfo) and isinstance(got, S.TensorStructInfo)):
            return copy
        if want.shape is None or (got.shape is not None and structural_equal(
                S.TensorStructInfo(want.shape, want.dtype), S.TensorStructInfo(got.shape, got.dtype),
                map_free_vars=False)):  # fmt: skip
            return copy
        key = (alias, copy) if isinstance(alias, E.Var) else None
        if key is not None and key in self.recasts:
            return self.recasts[key]
        target = S.TensorStructInfo(want.shape, want.dtype or got.dtype, vdevice=got.vdevice)
        cast = E.Var(self.fresh_name(f"{hint}_{copy.name_hint}"), struct_info=target)
        binding = E.MatchCast(cast, copy, target)
        block = self.defined_in.get(alias) if key is not None else None  # type: ignore[arg-type]
        if block is None:
            self.cur.append(binding)
            return cast
        after = max(_index_of(block, alias), _index_of(block, copy))  # type: ignore[arg-type]
        block.insert(after + 1, binding)
        self.recasts[key] = cast  # type: ignore[index]
        self.defined_in[cast] = block  # a hint's result may be the cast, and be cast again
        return cast

    def rebuild(self, expr: E.Expr, want: Want, path: tuple[int, ...] = (), op_operand: bool = False) -> E.Expr:
        """``expr`` (old IR) with every tensor leaf on the device ``want`` names
        (``op_operand``: ``expr`` is an operand of an op, which reads constants
        wherever it runs)."""
        if isinstance(expr, E.Constant):
            return self.const_value(expr, want(path), op_operand)
        if isinstance(expr, E.Var):
            if expr in self.const_of:
                dst = want(path) or device_key(self.table.default)
                return self.const_value(self.const_of[expr], dst, op_operand)
            tree = self.col.env.get(expr)
            new = self.new_var.get(expr, expr)
            return self.rebuild_tree(new, tree, want, path, expr.name_hint)
        if isinstance(expr, E.Tuple):
            fields = tuple(self.rebuild(f, want, path + (i,), op_operand) for i, f in enumerate(expr.fields))
            return E.Tuple(fields, span=expr.span)
        if isinstance(expr, E.TupleGetItem):
            base = self.rebuild(expr.tuple_value, lambda _p: None, op_operand=True)
            tree = self.col.tree_of(expr)
            return self.rebuild_tree(E.TupleGetItem(base, expr.index, span=expr.span), tree, want, path, "item")
        return expr

    @staticmethod
    def everywhere(key: DeviceKey | None) -> Want:
        return lambda _p: key

    def tree_want(self, devs: Any) -> Want:
        def want(path: tuple[int, ...]) -> DeviceKey | None:
            d = devs
            for i in path:
                if not (isinstance(d, tuple) and not (len(d) == 3 and isinstance(d[0], str))):
                    return None
                d = d[i] if i < len(d) else None
            return d if isinstance(d, tuple) and len(d) == 3 and isinstance(d[0], str) else None

        return want

    # -- module ------------------------------------------------------------------
    def run(self) -> IRModule:
        for name, func in self.mod.functions.items():
            params = [self.with_devices(p.struct_info, self.dev_tree(t)) for p, t in zip(func.params, self.col.param_trees[name])]
            ret = self.with_devices(func.ret_struct_info, self.dev_tree_domains(self.col.ret_domains[name]))
            self.func_sinfo[name] = S.FuncStructInfo(params, ret, func.is_pure)  # type: ignore[arg-type]
        funcs = {name: self.function(name, func) for name, func in self.mod.functions.items()}
        return IRModule(funcs, self.mod.global_infos, self.mod.attrs)

    def dev_tree_domains(self, tree: Tree) -> Any:
        if tree is None:
            return None
        if isinstance(tree, int):
            return self.pl.domain_device(tree)
        return tuple(self.dev_tree_domains(t) for t in tree)

    def function(self, name: str, func: E.Function) -> E.Function:
        self.used_names = set()
        _collect_names(func, self.used_names)
        frame = _Frame()
        prologue = frame.open(False)
        params = []
        for p, sinfo in zip(func.params, self.func_sinfo[name].params or ()):
            new = self.renew(p, sinfo)
            self.new_var[p] = new
            params.append(new)
            self.set_homes(self.col.env.get(p), new, prologue)
        ret_devs = self.dev_tree_domains(self.col.ret_domains[name])
        body = self.seq(func.body, self.tree_want(ret_devs), frame)
        ret = self.func_sinfo[name].ret
        return E.Function(params, body, ret, func.is_pure, func.attrs, span=func.span)

    def seq(self, seq: E.SeqExpr, want: Want, frame: _Frame | None = None) -> E.SeqExpr:
        frame = frame or _Frame()
        outer = self.cur
        self.frames.append(frame)
        for block in seq.blocks:
            self.cur = frame.open(isinstance(block, E.DataflowBlock))
            for b in block.bindings:
                self.binding(b)
        self.cur = frame.last()
        body = self.rebuild(seq.body, want)
        body = self.bind_here(body, "ret") if isinstance(body, E.TupleGetItem) else body
        self.frames.pop()
        self.cur = outer
        blocks = [
            (E.DataflowBlock if df else E.BindingBlock)(tuple(lst)) for df, lst in frame.blocks if lst
        ]
        return E.SeqExpr(blocks, body, span=seq.span)

    def emit(self, old: E.Binding, var: E.Var, value: E.Expr, sinfo: S.StructInfo | None) -> None:
        new = self.renew(var, sinfo)
        self.new_var[var] = new
        if isinstance(old, E.MatchCast):
            self.cur.append(E.MatchCast(new, value, self.with_devices(old.struct_info, self.dev_tree(self.col.env.get(var))), span=old.span))  # type: ignore[arg-type]
        else:
            self.cur.append(E.VarBinding(new, value, span=old.span))
        self.defined_in[new] = self.cur
        self.set_homes(self.col.env.get(var), new, self.cur)

    def binding(self, b: E.Binding) -> None:
        var = b.var
        value = b.value  # type: ignore[attr-defined]
        tree = self.col.env.get(var)
        devs = self.dev_tree(tree)
        sinfo = self.with_devices(var.struct_info, devs)
        if not isinstance(b, E.MatchCast) and self.const_source(value) is not None:
            # a constant, or another name of one (y = c): read wherever it is needed
            const = self.const_source(value)
            self.const_of[var] = const
            self.emit(b, var, self.const_on(const, device_key(self.table.default)), self.with_devices(var.struct_info, device_key(self.table.default)))
            return
        if isinstance(value, E.Call):
            self.call(b, var, value, tree, devs, sinfo)
            return
        if isinstance(value, E.If):
            cond = self.rebuild(value.cond, self.everywhere(device_key(self.table.host)))
            tb = self.seq(value.true_branch, self.tree_want(devs))
            fb = self.seq(value.false_branch, self.tree_want(devs))
            self.emit(b, var, E.If(cond, tb, fb, struct_info=sinfo, span=value.span), sinfo)
            return
        # aliases: y = x, tuples, projections, match_cast
        new_value = self.rebuild(value, self.tree_want(devs))
        self.emit(b, var, new_value, sinfo)

    def call(self, b: E.Binding, var: E.Var, call: E.Call, tree: Tree, devs: Any, sinfo: S.StructInfo | None) -> None:
        op = call.op
        if isinstance(op, E.Op):
            info = op_info(op)
            beh = info.device_behavior
            if beh in (DeviceBehavior.ANNOTATION, DeviceBehavior.CROSS_DEVICE):
                if tree == CONST:
                    # a constant has no home: it is materialised wherever it is read,
                    # so a hint or copy of one needs no copy at all
                    src = self.rebuild(call.args[0], self.tree_want(devs))
                    const = self.const_source(call.args[0])
                    if const is not None:
                        self.const_of[var] = const  # its readers see the constant itself
                    self.emit(b, var, src, src.struct_info)
                    return
                if isinstance(tree, int) and tree != CONST:
                    dst = self.pl.value_device(tree)
                    arg = call.args[0]
                    arg_tree = self.col.env.get(arg) if isinstance(arg, E.Var) else None
                    if isinstance(arg_tree, int) and arg_tree != CONST and self.pl.value_device(arg_tree) == dst:
                        # already there: the argument itself (a match_cast alias keeps its shape)
                        got = self.new_var.get(arg, arg)  # type: ignore[arg-type]
                    else:
                        got = self.materialize(tree, dst, var.name_hint if beh is DeviceBehavior.CROSS_DEVICE else None)
                        if isinstance(arg, E.Var):  # read where the argument was: cast to an alias's shape
                            got = self.as_alias(self.new_var.get(arg, arg), got, arg.name_hint)
                    if isinstance(var, E.DataflowVar) or not isinstance(got, E.DataflowVar):
                        self.new_var[var] = got
                        return
                    self.emit(b, var, got, got.struct_info)
                    return
                src = self.rebuild(call.args[0], lambda _p: None)
                self.emit(b, var, src, src.struct_info)
                return
            if beh is DeviceBehavior.HOST_ONLY:
                args = tuple(self.rebuild(a, lambda _p: None) for a in call.args)
                # the call's own struct info carries the host too: lowering allocates
                # its result where the call's struct info says, and an op's inference
                # from shape arguments names no device (so the default one was used)
                new_call = E.replace(call, args=args, struct_info=self.with_devices(call.struct_info, devs))
                self.emit(b, var, new_call, sinfo)
                return
        if isinstance(op, E.GlobalVar) and op.name_hint in self.col.param_trees:
            fs = self.func_sinfo[op.name_hint]
            args = tuple(
                self.rebuild(a, self.tree_want(self.dev_tree(pt)))
                for a, pt in zip(call.args, self.col.param_trees[op.name_hint])
            )
            gv = E.GlobalVar(op.name_hint, struct_info=fs)
            new_call = E.replace(call, op=gv, args=args, struct_info=self.with_devices(call.struct_info, devs))
            self.emit(b, var, new_call, sinfo)
            return
        dom = self.col.op_domain.get(b)
        dev = self.pl.domain_device(dom) if dom is not None else None
        want = self.everywhere(dev)
        is_op = isinstance(op, E.Op)
        args = tuple(
            self.rebuild(a, want, op_operand=is_op) if not isinstance(a, (E.ExternFunc, E.GlobalVar, E.Op)) else a
            for a in call.args
        )
        sinfo_args = call.sinfo_args
        if isinstance(op, E.Op) and op.name == "call_dps_packed" and sinfo_args and dev is not None:
            sinfo_args = (self.with_devices(sinfo_args[0], _broadcast(sinfo_args[0], dev)),) + sinfo_args[1:]
        new_call = E.replace(call, args=args, sinfo_args=sinfo_args, struct_info=self.with_devices(call.struct_info, devs))
        self.emit(b, var, new_call, sinfo)

    # -- report ------------------------------------------------------------------
    def copy_records(self) -> list[dict]:
        """One JSON-able record per inserted copy: value, devices, bytes, consumers, reason."""
        by_key: dict[tuple[int, DeviceKey], list] = {k: [] for k in self.copy_order}
        for d in self.problem.demands:
            r = self.problem.root_value(d.value)
            dst = self.pl.domain_device(d.domain) if d.domain is not None else d.device
            if (r, dst) in by_key:
                by_key[(r, dst)].append(d)
        out = []
        for (r, dst), demands in by_key.items():
            val = self.problem.values[r]
            src = self.pl.value_device(r)
            demands.sort(key=lambda d: _PRIORITY.index(d.kind) if d.kind in _PRIORITY else 99)
            first = demands[0] if demands else None
            consumers: list[str] = []
            for d in demands:
                if d.consumer not in consumers:
                    consumers.append(d.consumer)
            reason = first.reason if first is not None else "planned copy"
            if first is not None and first.domain is not None:
                why = self.pl.domain_reason(first.domain)
                if _specific(why):
                    reason += f"; it runs on {key_str(dst)} because {why}"
            src_reason = self.pl.domain_reason(val.domain)
            if _specific(src_reason):
                reason += f"; '{val.name}' is on {key_str(src)} because {src_reason}"
            loop = val.func if val.func in self.problem.loops else None
            trips = self.problem.trip_counts.get(loop) if loop is not None else None
            if loop is not None:  # the copy sits in a loop body: it runs on every iteration
                reason += f"; made on every iteration of loop '{loop}' ({_iterations(trips, val.nbytes)})"
            else:
                into = [d.consumer.split("(")[0] for d in demands if d.kind == "call-arg"]
                entered = [f for f in into if f in self.problem.loops]
                if entered:
                    known = self.problem.trip_counts.get(entered[0])
                    its = known.describe() if known is not None else "unknown trip count"
                    reason += f"; made once, before loop '{entered[0]}' (not per iteration; {its})"
            span = first.span if first is not None else val.span
            out.append({
                "value": val.name,
                "copy": self.copies[(r, dst)].name_hint,
                "function": val.func,
                "src": key_str(src),
                "dst": key_str(dst),
                "bytes": int(val.nbytes),
                "per_iteration_of": loop,
                # the copies one entry of that loop makes: its trip count (None: unknown)
                "trip_count": None if trips is None else trips.count,
                "trip_count_exact": None if trips is None else trips.exact,
                "consumers": consumers,
                "reason": reason,
                "kind": first.kind if first is not None else "planned",
                "line": None if span is None else span.line,
                "source": None if span is None else str(span),
                "pass": "<input>" if any(d.kind == "to_vdevice" for d in demands) else "PlanDevices",
            })
        return out


def _iterations(trips: TripCount | None, nbytes: int) -> str:
    """What a copy inside a loop amounts to per entry of the loop."""
    if trips is None:
        return f"unknown trip count; the placement weighed it as {LOOP_ITERATIONS} iterations"
    total = f"{trips.count * int(nbytes):,} bytes"
    return f"{trips.describe()}: {'' if trips.exact else 'at most '}{total} per entry of the loop"


def _specific(reason: str) -> bool:
    """Whether a placement reason names a constraint (not the cut or the default)."""
    return "minimum cut" not in reason and "default device" not in reason


def _broadcast(sinfo: S.StructInfo, dev: DeviceKey) -> Any:
    if isinstance(sinfo, S.TupleStructInfo):
        return tuple(_broadcast(f, dev) for f in sinfo.fields)
    return dev


def _collect_names(func: E.Function, out: set[str]) -> None:
    for p in func.params:
        out.add(p.name_hint)

    def walk(seq: E.SeqExpr) -> None:
        for block in seq.blocks:
            for b in block.bindings:
                out.add(b.var.name_hint)
                v = b.value  # type: ignore[attr-defined]
                if isinstance(v, E.If):
                    walk(v.true_branch)
                    walk(v.false_branch)

    walk(func.body)


def _index_of(block: list[E.Binding], var: E.Var) -> int:
    """Where ``var`` is bound in ``block`` (-1 when it is bound elsewhere)."""
    return next((i for i, b in enumerate(block) if b.var is var), -1)
