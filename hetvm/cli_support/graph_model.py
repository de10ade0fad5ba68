"""The dataflow graph of ``main`` as plain nodes and edges, for drawing.

Read from the module after device planning (or before, when the program runs
on one device): each op call is a node on the device its result's struct info
names; ``to_vdevice`` (and ``hint_on_device``) calls become *copy* nodes of
their own, so a picture shows exactly where data moves. Tuples, projections
and plain re-bindings are looked through to the node that produced the data.
Constants are not drawn (the runtime places them where they are read).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.module import IRModule

__all__ = ["Node", "Graph", "extract_graph", "COPY_OPS"]

COPY_OPS = frozenset({"to_vdevice", "hint_on_device"})


@dataclass
class Node:
    id: str
    label: str
    kind: str  # "input" | "op" | "copy" | "output" | "call"
    device: str | None
    detail: str = ""


@dataclass
class Graph:
    nodes: list[Node] = field(default_factory=list)
    edges: list[tuple[str, str]] = field(default_factory=list)
    name: str = "main"

    def devices(self) -> list[str]:
        return list(dict.fromkeys(n.device for n in self.nodes if n.device))

    def node(self, nid: str) -> Node:
        return next(n for n in self.nodes if n.id == nid)


def _device_of(sinfo: Any, default: str | None) -> str | None:
    if isinstance(sinfo, S.TensorStructInfo):
        if sinfo.vdevice is not None:
            return f"{sinfo.vdevice.kind}:{sinfo.vdevice.vdevice_id}"
        return default
    if isinstance(sinfo, S.TupleStructInfo):
        for f in sinfo.fields:
            d = _device_of(f, None)
            if d is not None:
                return d
        return default
    return None


def _shape_text(sinfo: Any) -> str:
    if isinstance(sinfo, S.TensorStructInfo):
        dims = "?" if sinfo.shape is None else "x".join(P.to_str(d) for d in sinfo.shape)
        return f"{dims} {sinfo.dtype or ''}".strip()
    if isinstance(sinfo, S.TupleStructInfo):
        return f"tuple({len(sinfo.fields)})"
    return ""


def _op_name(call: E.Call) -> str:
    op = call.op
    if isinstance(op, E.Op):
        return op.name
    if isinstance(op, E.GlobalVar):
        return f"call {op.name_hint}"
    if isinstance(op, E.ExternFunc):
        return f"packed {op.global_symbol}"
    return "call"


def extract_graph(mod: IRModule, func_name: str = "main", default_device: str | None = None,
                  origins: dict[str, Any] | None = None) -> Graph:  # fmt: skip
    """The graph of ``func_name``; ``default_device`` for values without a vdevice.

    ``origins`` (variable -> :class:`~.naming.Origin`, followed through the build)
    names each node's ONNX node; without it the importer's table is read, which
    is right only for the module as imported (later passes reuse its names)."""
    func = mod[func_name]
    graph = Graph(name=func_name)
    producers: dict[E.Var, list[str]] = {}
    node_of = mod.attrs.get("onnx_node_of", {}) or {}

    def sources(expr: Any) -> list[str]:
        if isinstance(expr, E.Var):
            return producers.get(expr, [])
        if isinstance(expr, E.Tuple):
            return [s for f in expr.fields for s in sources(f)]
        if isinstance(expr, E.TupleGetItem):
            return sources(expr.tuple_value)
        return []

    for p in func.params:
        nid = f"in_{p.name_hint}"
        graph.nodes.append(Node(nid, p.name_hint, "input", _device_of(p.struct_info, default_device),
                                _shape_text(p.struct_info)))  # fmt: skip
        producers[p] = [nid]

    count = 0
    for binding in E.bindings_of(func.body.blocks):
        var, value = binding.var, E.binding_value(binding)
        if isinstance(value, E.Call):
            count += 1
            nid = f"n{count}"
            name = _op_name(value)
            kind = "copy" if name in COPY_OPS else ("call" if name.startswith("call ") else "op")
            label = name
            detail = _shape_text(var.struct_info)
            if origins is not None:
                origin = origins.get(var.name_hint)
                if origin is not None and origin.node:
                    detail = f"{origin.node} · {detail}"
            elif node_of.get(var.name_hint):
                detail = f"{node_of[var.name_hint][0]} · {detail}"
            dev = _device_of(var.struct_info, default_device)
            if kind == "copy":  # short labels: a diamond has little room
                src = value.args[0] if value.args else None
                label = f"copy to {dev}" if dev else "copy"
                detail = getattr(src, "name_hint", "") or detail
            graph.nodes.append(Node(nid, label, kind, dev, detail))
            for src in dict.fromkeys(s for a in value.args for s in sources(a)):
                graph.edges.append((src, nid))
            producers[var] = [nid]
        elif isinstance(value, E.If):
            count += 1
            nid = f"n{count}"
            graph.nodes.append(Node(nid, "if", "op", _device_of(var.struct_info, default_device),
                                    _shape_text(var.struct_info)))  # fmt: skip
            for src in sources(value.cond):
                graph.edges.append((src, nid))
            producers[var] = [nid]
        else:
            producers[var] = sources(value)

    body = func.body.body
    outs = body.fields if isinstance(body, E.Tuple) else (body,)
    for i, out in enumerate(outs):
        nid = f"out{i}"
        label = f"output {i}" if len(outs) > 1 else "output"
        origin = (origins or {}).get(getattr(out, "name_hint", ""))
        if origin is not None:
            label = origin.tensor
        graph.nodes.append(Node(nid, label, "output",
                                _device_of(getattr(out, "struct_info", None), default_device),
                                _shape_text(getattr(out, "struct_info", None))))  # fmt: skip
        for src in sources(out):
            graph.edges.append((src, nid))
    return graph
