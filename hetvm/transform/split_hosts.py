"""SplitHosts: a program whose devices sit on several machines becomes parts, one host each.

After PlanDevices every tensor has a vdevice, and a vdevice may name a host
(``hetvm.remote("hostB", "sim", 0)``). A copy whose source and destination are
on different hosts is a *transfer*; every other binding runs on the host of the
device its result lives on. This pass cuts each public function into *parts*:
maximal runs of bindings on one host, in an order that respects data
dependencies and switches host only when no binding of the current host is
ready (so a placement that goes A, B, A needs three parts, not one per binding).

Each part becomes a public function ``<func>__part<k>`` of the same module, so
the build stays **one executable**. A part's parameters are the values it
reads from outside: inputs of the function (sent by the driver), values an
earlier part on the same host computed (kept there, on their device: local
copies stay local) and values a part on another host computed (received over
the network, once per host: the transfer binding becomes a parameter on its
destination device). It returns, as one tuple, what later parts or the caller
need. The original function is kept unchanged: it runs the whole program in one
process (every host's devices then map onto the local ones), which is the
single-host reference.

The schedule is recorded in ``mod.attrs["host_parts"]`` (JSON-like, so it
travels in the executable's metadata): per function, its parts (name, host,
inputs, outputs, which outputs stay on the host and which are sent), the
function's results and every transfer (one per value and destination host) with
its bytes, the copies it serves there and the planner's reason. ``hetvm.distributed``
runs it. Values other than tensors (shapes, objects) may not cross hosts, and
control flow whose branches span hosts is refused: both get a clear error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..analysis.free_vars import free_vars
from ..errors import DevicePlanError
from ..ir import expr as E
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.op_registry import DeviceBehavior, op_info
from ..ir.visitor import ExprMutator, ExprVisitor
from .device_planning.graph import tensor_nbytes
from .pass_infra import Pass, PassContext

__all__ = ["SplitHosts", "PARTS_ATTR", "module_hosts"]

PARTS_ATTR = "host_parts"


def module_hosts(mod: IRModule) -> list[str]:
    """The hosts a module's vdevices name, in declaration order (empty: one machine)."""
    out: list[str] = []
    for v in mod.vdevices:
        if v.host is not None and v.host not in out:
            out.append(v.host)
    return out


def _tensor_leaves(sinfo: S.StructInfo | None) -> list[S.TensorStructInfo]:
    if isinstance(sinfo, S.TensorStructInfo):
        return [sinfo]
    if isinstance(sinfo, S.TupleStructInfo):
        return [t for f in sinfo.fields for t in _tensor_leaves(f)]
    return []


def _is_copy(value: E.Expr) -> bool:
    if not isinstance(value, E.Call) or not isinstance(value.op, E.Op):
        return False
    return op_info(value.op).device_behavior is DeviceBehavior.CROSS_DEVICE


@dataclass
class _Item:
    """One binding of the function, with the host it runs on."""

    binding: E.Binding
    host: str | None  # None: not a tensor, runs wherever its inputs are
    deps: list[E.Var]
    transfer_from: str | None = None  # a cross-host copy: the source's host


@dataclass
class _Part:
    host: str
    items: list[_Item] = field(default_factory=list)


class _Fresh(ExprMutator):
    """Gives every variable a function defines a fresh Var, so no Var is shared
    between a part and the original function."""

    def visit_var_def(self, var: E.Var) -> E.Var:
        fresh = type(var)(var.name_hint, struct_info=var.struct_info, span=var.span)
        self.var_remap[var] = fresh
        return fresh


class _NestedCrossHost(ExprVisitor):
    """Finds a cross-host copy inside a branch (control flow spanning hosts)."""

    def __init__(self, host_of) -> None:  # noqa: ANN001
        super().__init__()
        self.host_of = host_of
        self.found: E.Binding | None = None

    def visit_var_binding(self, binding: E.VarBinding) -> None:
        value = binding.value
        if self.found is None and _is_copy(value):
            src = self.host_of(value.args[0].struct_info)
            dst = self.host_of(binding.var.struct_info)
            if src != dst:
                self.found = binding
        super().visit_var_binding(binding)


class _Splitter:
    def __init__(self, mod: IRModule, name: str, func: E.Function, hosts: list[str]) -> None:
        self.mod = mod
        self.name = name
        self.func = func
        self.hosts = hosts
        self.bounds = {str(k): int(v) for k, v in dict(func.attrs.get("tir_var_upper_bound", {}) or {}).items()}

    def host_of(self, sinfo: S.StructInfo | None) -> str | None:
        leaves = _tensor_leaves(sinfo)
        hosts = {(t.vdevice.host if t.vdevice is not None else None) or self.hosts[0] for t in leaves}
        if len(hosts) > 1:
            raise DevicePlanError(f"a tuple in '{self.name}' holds tensors of several hosts ({', '.join(sorted(hosts))})")
        return next(iter(hosts)) if hosts else None

    # -- the items, then the parts ------------------------------------------
    def items(self) -> list[_Item]:
        out = []
        for block in self.func.body.blocks:
            for b in block.bindings:
                value = b.value  # type: ignore[attr-defined]
                host = self.host_of(b.var.struct_info)
                src = None
                if _is_copy(value):
                    src_host = self.host_of(value.args[0].struct_info)
                    if src_host != host:
                        src = src_host
                if isinstance(value, E.If):
                    finder = _NestedCrossHost(self.host_of)
                    finder.visit_expr(value)
                    if finder.found is not None:
                        raise DevicePlanError(
                            f"'{b.var.name_hint}' in '{self.name}' is control flow whose branches copy "
                            f"'{finder.found.var.name_hint}' to another host; place each branch on one host "
                            "(pin the If's inputs and result to one host's devices)"
                        )
                out.append(_Item(b, host, free_vars(value), src))
        return out

    def schedule(self, items: list[_Item]) -> list[_Part]:
        params = set(self.func.params)
        done: set[E.Var] = set(params)
        closed: set[E.Var] = set(params)  # defined by a finished part (or an input)
        pending = list(items)
        parts: list[_Part] = []
        while pending:
            first = next((it.host for it in pending if it.host is not None), self.hosts[0])
            part = _Part(first)
            progress = True
            while progress:
                progress = False
                rest = []
                for it in pending:
                    host = it.host if it.host is not None else part.host
                    ready = all(d in done for d in it.deps)
                    if it.transfer_from is not None:  # its source comes from another host's finished part
                        ready = all(d in closed for d in it.deps)
                    if host == part.host and ready:
                        part.items.append(it)
                        done.add(it.binding.var)
                        progress = True
                    else:
                        rest.append(it)
                pending = rest
            if not part.items:
                names = ", ".join(it.binding.var.name_hint for it in pending[:3])
                raise DevicePlanError(f"cannot order the parts of '{self.name}' across hosts (stuck at {names})")
            closed.update(it.binding.var for it in part.items)
            parts.append(part)
        return parts

    # -- functions and the schedule -------------------------------------------
    def run(self) -> tuple[dict[str, E.Function], dict[str, Any]]:
        items = self.items()
        parts = self.schedule(items)
        part_of: dict[E.Var, int] = {}
        for k, part in enumerate(parts):
            for it in part.items:
                part_of[it.binding.var] = k
        transfer_src: dict[E.Var, E.Var] = {}  # transfer var -> its source var
        for it in items:
            if it.transfer_from is not None:
                transfer_src[it.binding.var] = it.binding.value.args[0]  # type: ignore[attr-defined]
        param_index = {p: i for i, p in enumerate(self.func.params)}
        body = self.func.body.body
        results = _result_tree(body)
        result_vars = set(_flat(results))
        names = _ValueNames()
        # reads per part (transfer bindings are parameters, not computed there)
        local_items = [[it for it in p.items if it.transfer_from is None] for p in parts]
        reads: list[list[E.Var]] = []
        for k in range(len(parts)):
            seen: list[E.Var] = []
            defined = {it.binding.var for it in local_items[k]}
            for it in local_items[k]:
                for d in it.deps:
                    if d not in defined and d not in seen:
                        seen.append(d)
            reads.append(seen)
        # who needs what: (value var) -> hosts it is sent to / kept
        sent: dict[E.Var, list[str]] = {}
        kept: set[E.Var] = set()
        for k, part in enumerate(parts):
            for d in reads[k]:
                if d in transfer_src:
                    src = transfer_src[d]
                    if src in param_index:
                        continue  # the driver sends the input straight to this host
                    sent.setdefault(src, [])
                    if part.host not in sent[src]:
                        sent[src].append(part.host)
                elif d not in param_index and parts[part_of[d]].host == part.host and part_of[d] != k:
                    kept.add(d)
                elif d not in param_index and part_of[d] != k:
                    raise DevicePlanError(
                        f"'{d.name_hint}' of '{self.name}' is read on host {part.host} without a copy from "
                        f"{parts[part_of[d]].host}"
                    )
        for v in result_vars:
            if v in transfer_src:
                raise DevicePlanError(f"result '{v.name_hint}' of '{self.name}' is a cross-host copy")
        functions: dict[str, E.Function] = {}
        part_records = []
        for k, part in enumerate(parts):
            fname = self.name if len(parts) == 1 else f"{self.name}__part{k}"
            inputs: list[list] = []
            params: list[E.Var] = []
            for d in reads[k]:
                if d in transfer_src:
                    src = transfer_src[d]
                    if src in param_index:
                        inputs.append(["input", param_index[src]])
                    else:
                        inputs.append(["transfer", names.of(src)])
                elif d in param_index:
                    inputs.append(["input", param_index[d]])
                else:
                    inputs.append(["local", names.of(d)])
                params.append(d)
            outputs = [
                it.binding.var for it in local_items[k]
                if it.binding.var in sent or it.binding.var in kept or it.binding.var in result_vars
            ]
            if len(parts) == 1:  # the function itself runs: its own parameters, its result
                inputs = [["input", i] for i in range(len(self.func.params))]
                outputs = [v for v in dict.fromkeys(_flat(results)) if v not in param_index]
            record = {
                "function": fname,
                "host": part.host,
                "inputs": inputs,
                "outputs": [names.of(v) for v in outputs],
                "keep": [names.of(v) for v in outputs if v in kept],
                "send": {names.of(v): sent[v] for v in outputs if v in sent},
                "result": [names.of(v) for v in outputs if v in result_vars],
                "sizes": {names.of(v): self.nbytes(v) for v in outputs},
                "devices": {names.of(v): self.device_of(v) for v in outputs},
            }
            part_records.append(record)
            if len(parts) > 1:
                functions[fname] = self.part_function(fname, params, [it.binding for it in local_items[k]], outputs)
        transfers = []
        why = self.copy_records()
        for v, dsts in sent.items():
            src_host = parts[part_of[v]].host
            nbytes = self.nbytes(v)
            copies = [t for t, s in transfer_src.items() if s is v]
            for h in dsts:
                mine = [t for t in copies if self.host_of(t.struct_info) == h]
                transfers.append({
                    "value": names.of(v), "src": src_host, "dst": h, "bytes": nbytes,
                    "from_part": part_of[v], "copies": [t.name_hint for t in mine],
                    "devices": [self.device_of(t) for t in mine],
                    "reason": next((why[t.name_hint] for t in mine if t.name_hint in why), "-"),
                })
        schedule = {
            "hosts": self.hosts,
            "inputs": [self.host_of(p.struct_info) for p in self.func.params],
            "parts": part_records,
            "results": _named_tree(results, names),
            "transfers": transfers,
        }
        return functions, schedule

    def copy_records(self) -> dict[str, str]:
        """Copy variable -> the device planner's reason for it (``device_copies``)."""
        out: dict[str, str] = {}
        for c in self.mod.attrs.get("device_copies") or []:
            if c.get("function") == self.name and c.get("copy"):
                out.setdefault(str(c["copy"]), str(c.get("reason", "-")))
        return out

    def nbytes(self, v: E.Var) -> int:
        return sum(tensor_nbytes(t, self.bounds) for t in _tensor_leaves(v.struct_info))

    def device_of(self, v: E.Var) -> str | None:
        leaves = _tensor_leaves(v.struct_info)
        return str(leaves[0].vdevice) if leaves and leaves[0].vdevice is not None else None

    def part_function(self, fname: str, params: list[E.Var], bindings: list[E.Binding], outputs: list[E.Var]) -> E.Function:
        seq = E.SeqExpr([E.BindingBlock(tuple(bindings))], E.Tuple(tuple(outputs)))
        attrs = {k: v for k, v in self.func.attrs.items() if k != "global_symbol"}
        if "global_symbol" in self.func.attrs:
            attrs["global_symbol"] = fname
        func = E.Function(tuple(params), seq, None, self.func.is_pure, attrs, span=self.func.span)
        mutator = _Fresh(self.mod)
        fresh = mutator.visit_expr(func)
        assert isinstance(fresh, E.Function)
        return fresh


def _result_tree(body: E.Expr) -> Any:
    if isinstance(body, E.Var):
        return body
    if isinstance(body, E.Tuple):
        return [_result_tree(f) for f in body.fields]
    raise DevicePlanError(f"the result of a function split across hosts must be variables, got {type(body).__name__}")


def _flat(tree: Any) -> list[E.Var]:
    if isinstance(tree, list):
        return [v for t in tree for v in _flat(t)]
    return [tree]


def _named_tree(tree: Any, names: _ValueNames) -> Any:
    if isinstance(tree, list):
        return [_named_tree(t, names) for t in tree]
    return names.of(tree)


class _ValueNames:
    """A unique, stable name per variable (name hints may repeat)."""

    def __init__(self) -> None:
        self.by_var: dict[E.Var, str] = {}
        self.used: set[str] = set()

    def of(self, var: E.Var) -> str:
        name = self.by_var.get(var)
        if name is None:
            name, n = var.name_hint, 0
            while name in self.used:
                n += 1
                name = f"{var.name_hint}#{n}"
            self.used.add(name)
            self.by_var[var] = name
        return name


class SplitHosts(Pass):
    """Cuts every public function of a multi-host module into per-host parts."""

    def __init__(self) -> None:
        super().__init__("SplitHosts")

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        hosts = module_hosts(mod)
        if not hosts:
            return mod
        new_funcs = dict(mod.functions)
        schedules = {}
        for name, func in mod.functions.items():
            if not isinstance(func, E.Function) or func.attrs.get("private") or func.attrs.get("Primitive"):
                continue
            funcs, schedule = _Splitter(mod, name, func, hosts).run()
            for fname in funcs:
                if fname in new_funcs:
                    raise DevicePlanError(f"SplitHosts: the module already has a function '{fname}'")
            new_funcs.update(funcs)
            schedules[name] = schedule
        out = IRModule(new_funcs, dict(mod.global_infos), dict(mod.attrs))
        out.attrs[PARTS_ATTR] = schedules
        return out
