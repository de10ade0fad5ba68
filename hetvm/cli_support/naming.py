"""The model's own names for the values of a compiled program.

The ONNX importer names each variable after the tensor it computes
(``mod.attrs["onnx_node_of"]``: variable -> (node name, op type)), but the
passes after it rename: a fusion splits a binding and gives the new half a
fresh name (``unique("r1")`` is ``r12``, which in a light model is also an ONNX
tensor of another node), device planning names its copies ``<value>_cpu0``,
lowering rebinds each tensor to an allocation. So the names of the lowered
program, read against the importer's table, would mislabel values.

:class:`NameTracker` follows the names through the build instead: it is a pass
instrument that, after every pass, gives each variable of ``main`` the origin
of the variable it came from — the same object, else the previous variable of
the same name (a pass rebuilt it), else the previous variable its fresh name
was made from (``hint`` + digits, longest such hint), else the source of the
copy it holds. Reports then print the ONNX tensor and node (:class:`Origin`)
for any variable of the source, the planned or the lowered module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..ir import expr as E
from ..ir.module import IRModule
from ..transform.pass_infra import PassInstrument

__all__ = ["Origin", "NameTracker", "origins_of_source", "display"]

_COPY_OPS = ("to_vdevice", "vm.builtin.copy_to")


@dataclass(frozen=True)
class Origin:
    """Where a value comes from in the model: an ONNX tensor and its node."""

    tensor: str
    node: str | None = None
    op_type: str | None = None
    copy: bool = False  # a copy of ``tensor`` onto another device

    def node_text(self) -> str:
        if self.node is None:
            return self.op_type or "-"
        return f"{self.node} ({self.op_type})" if self.op_type else self.node


def _onnx_outputs(proto: Any) -> dict[str, list[str]]:
    """Node name -> its output tensor names (unnamed nodes as the importer names them)."""
    if proto is None:
        return {}
    out: dict[str, list[str]] = {}
    for index, node in enumerate(proto.graph.node):
        name = node.name or f"{node.op_type}_{index}"
        out[name] = [o for o in node.output if o]
    return out


def _ident(name: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return out if out and not out[0].isdigit() else "_" + out


def _tensor_of(var_name: str, outputs: list[str]) -> str | None:
    """The ONNX output a variable's name was made from (``ident(output)`` + digits)."""
    best = None
    for o in outputs:
        base = _ident(o)
        rest = var_name[len(base):]
        if var_name.startswith(base) and (not rest or rest.isdigit()):
            if best is None or len(base) > len(_ident(best)):
                best = o
    return best


def origins_of_source(mod: IRModule, proto: Any = None) -> dict[str, Origin]:
    """Variable name -> origin for a module straight from the importer.

    Parameters are the graph inputs (their ONNX names come from ``proto``);
    bindings come from ``onnx_node_of``. A module from TVMScript has none:
    reports then print the variable names, which are the script's own.
    """
    node_of: Mapping[str, Any] = mod.attrs.get("onnx_node_of", {}) or {}
    outputs = _onnx_outputs(proto)
    out: dict[str, Origin] = {}
    if proto is not None and "main" in mod.functions:
        inits = {i.name for i in proto.graph.initializer}
        names = [vi.name for vi in proto.graph.input if vi.name not in inits]
        for onnx_name, param in zip(names, mod["main"].params):
            out[param.name_hint] = Origin(onnx_name, None, "graph input")
    for var_name, entry in node_of.items():
        node, op_type = entry[0], entry[1]
        tensor = _tensor_of(var_name, outputs.get(node, [])) or (outputs.get(node) or [var_name])[0]
        out[var_name] = Origin(tensor, node, op_type)
    return out


def _main(mod: IRModule) -> E.Function | None:
    func = mod.functions.get("main")
    return func if isinstance(func, E.Function) else None


class NameTracker(PassInstrument):
    """Follows the origin of every variable of ``main`` through the passes."""

    def __init__(self, source: IRModule, origins: Mapping[str, Origin]) -> None:
        self.by_var: dict[E.Var, Origin] = {}
        self.by_name: dict[str, Origin] = {}
        self.stages: dict[str, dict[str, Origin]] = {}
        self._absorb(source, dict(origins))
        self.stages["source"] = dict(self.by_name)

    def _absorb(self, mod: IRModule, named: Mapping[str, Origin] | None = None) -> None:
        previous = self.by_name
        current: dict[str, Origin] = {}
        by_var: dict[E.Var, Origin] = {}

        def origin_of(var: E.Var, value: Any) -> Origin | None:
            if named is not None:
                return named.get(var.name_hint)
            if var in self.by_var:
                return self.by_var[var]
            name = var.name_hint
            if name in previous:
                return previous[name]
            if isinstance(value, E.Call) and isinstance(value.op, E.Op) and value.op.name in _COPY_OPS:
                src = value.args[0] if value.args else None
                got = by_var.get(src) if isinstance(src, E.Var) else None
                if got is not None:
                    return Origin(got.tensor, got.node, got.op_type, copy=True)
            stem = name.rstrip("0123456789")
            for cut in range(len(name) - 1, len(stem) - 1, -1):
                if name[:cut] in previous:
                    return previous[name[:cut]]
            return None

        func = _main(mod)
        if func is None:  # a module without main (yet): keep what is known
            return
        for p in func.params:
            got = origin_of(p, None)
            if got is not None:
                by_var[p] = got
                current[p.name_hint] = got
        for b in E.bindings_of(func.body.blocks):
            value = E.binding_value(b)
            got = origin_of(b.var, value)
            if got is not None:
                by_var[b.var] = got
                current[b.var.name_hint] = got
        self.by_var, self.by_name = by_var, current

    def run_after_pass(self, mod: IRModule, info: Any) -> None:
        self._absorb(mod)
        self.stages[info.name] = dict(self.by_name)

    @property
    def lowered(self) -> dict[str, Origin]:
        """Origins of the last module seen (the lowered one after a build)."""
        return dict(self.by_name)

    def at(self, stage: str) -> dict[str, Origin]:
        """Origins after the pass ``stage`` (``source`` before any)."""
        return dict(self.stages.get(stage, {}))


def display(name: str, origins: Mapping[str, Origin] | None) -> str:
    """A variable as a person knows it: the ONNX tensor name when there is one."""
    got = (origins or {}).get(name)
    if got is None:
        return name
    return f"{got.tensor} (copy)" if got.copy else got.tensor
