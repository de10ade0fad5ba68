"""Graph-executor codegen: a lowered static program -> graph JSON, kernel library, params.

Input is ``main`` after the build pipeline (PlanDevices ... KillAfterLastUse):
explicit storages (``memory.alloc_storage`` / ``vm.alloc_storage`` /
``builtin.alloc_tensor``), tensors carved at offsets, kernel calls
``call_packed("kernel.<op>", ins..., outs...)``, ``vm.builtin.copy_to`` and views.
Kills are dropped: a graph preallocates its storages once, shared across runs,
so memory reuse is what StaticPlanBlockMemory planned. Control flow, calls of
other functions and symbolic shapes are refused (use ``executor="vm"``).

The graph (plain JSON):

* ``devices``: ``[{"kind", "index", "memory_scope"}]`` in vdevice order;
* ``storages``: ``[{"id", "bytes", "device"}]`` (device = index into ``devices``);
* ``entries``: ``[{"id", "shape", "dtype", "storage_id", "offset", "device": {"kind",
  "index"}}]``, every tensor the program touches;
* ``nodes`` in execution order: ``{"op": "null", "name", "outputs"}`` for inputs
  and params, ``{"op": "kernel", "name", "lib", "inputs", "outputs", "device"}``,
  ``{"op": "__copy", "inputs", "outputs", "src_device", "device"}`` where data moves;
  a kernel node made for an ONNX node also has ``"onnx_node": {"node", "op_type",
  "inputs", "source"}`` (optional; errors name it);
  an input is ``{"entry": id}``, ``{"tuple": [id, ...]}`` (a tuple of tensors, as
  ``concat`` takes) or ``{"imm": value}``;
* ``inputs`` (name -> entry), ``params`` (name -> entry), ``outputs`` (entries) and
  ``output_tuple`` (whether main returns a tuple).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..analysis.tail_calls import self_recursive
from ..errors import HetvmError
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.device_index import device_index
from ..ir.module import IRModule
from ..kernels.view_kernels import place_view, view_kernel
from ..op.effects import COPY_BUILTIN, kernel_op_of
from ..runtime.graph_artifact import GRAPH_FORMAT_VERSION, GraphModule
from .vm_codegen import _plain, debug_info_of, device_descriptors

__all__ = ["GraphModule", "graph_codegen"]


def _static(values: tuple[P.PrimExpr, ...] | None, what: str) -> list[int]:
    out = []
    for v in values or ():
        c = P.const_value(v)
        if c is None:
            raise HetvmError(f"graph executor: {what} has a symbolic shape; use executor='vm'")
        out.append(int(c))
    if values is None:
        raise HetvmError(f"graph executor: {what} has an unknown shape; use executor='vm'")
    return out


def _prim(e: E.Expr) -> Any:
    if isinstance(e, E.PrimValue):
        return P.const_value(e.value) if not isinstance(e.value, P.FloatImm) else e.value.value
    if isinstance(e, (E.StringImm, E.DataTypeImm)):
        return e.value
    if isinstance(e, E.ShapeExpr):
        return _static(e.values, "a shape argument")
    raise HetvmError(f"graph executor: expected an immediate, got {type(e).__name__}")


class _GraphBuilder:
    def __init__(self, mod: IRModule) -> None:
        self.mod = mod
        self.devices = device_descriptors(mod)
        self.storages: list[dict] = []
        self.entries: list[dict] = []
        self.nodes: list[dict] = []
        self.kernels: list[dict] = []
        self.kernel_index: dict[str, int] = {}
        self.params: dict[str, np.ndarray] = {}
        self.param_entry: dict[tuple[int, int], int] = {}
        self.ref: dict[E.Var, Any] = {}

    def dev(self, i: int) -> dict:
        d = self.devices[i]
        return {"kind": d["kind"], "index": d["index"]}

    def storage(self, nbytes: int, dev: int) -> int:
        self.storages.append({"id": len(self.storages), "bytes": int(nbytes), "device": int(dev)})
        return len(self.storages) - 1

    def entry(self, sid: int, offset: int, shape: list[int], dtype: str) -> int:
        dev = self.storages[sid]["device"]
        self.entries.append({"id": len(self.entries), "shape": list(shape), "dtype": dtype,
                             "storage_id": sid, "offset": int(offset), "device": self.dev(dev)})
        return len(self.entries) - 1

    def own_entry(self, sinfo: S.TensorStructInfo, dev: int, what: str) -> int:
        shape = _static(sinfo.shape, what)
        nbytes = S.dtype_nbytes(sinfo.dtype or "float32") * int(np.prod(shape, dtype=np.int64))
        return self.entry(self.storage(nbytes, dev), 0, shape, sinfo.dtype or "float32")

    def const_entry(self, c: E.Constant, dev: int) -> int:
        key = (id(c), dev)
        if key not in self.param_entry:
            name = f"p{len(self.params)}"
            self.params[name] = np.asarray(c.data)
            eid = self.own_entry(S.TensorStructInfo(c.data.shape, str(c.data.dtype)), dev, "a constant")
            self.param_entry[key] = eid
            self.nodes.append({"op": "null", "name": name, "outputs": [eid], "param": True})
        return self.param_entry[key]

    def source_entry(self, e: E.Expr, what: str) -> int:
        """The entry a copy or a view reads: a tensor variable's, or a constant's
        param on the device it was planned on (the host when unplanned)."""
        if isinstance(e, E.Var) and isinstance(self.ref.get(e), int):
            return self.ref[e]
        if isinstance(e, E.Constant):
            vdev = e.struct_info.vdevice if isinstance(e.struct_info, S.TensorStructInfo) else None
            return self.const_entry(e, device_index(self.mod, vdev) if vdev is not None else 0)
        raise HetvmError(f"graph executor: {what} of a {type(e).__name__} needs executor='vm'")

    def arg(self, e: E.Expr, dev: int) -> dict:
        if isinstance(e, E.Var):
            r = self.ref.get(e)
            if isinstance(r, list):  # a tuple of tensors (concat's input)
                return {"tuple": self._tuple_entries(r, e.name_hint)}
            if not isinstance(r, int):
                raise HetvmError(f"graph executor: '{e.name_hint}' is not a tensor entry")
            return {"entry": r}
        if isinstance(e, E.Constant):
            return {"entry": self.const_entry(e, dev)}
        if isinstance(e, E.Tuple):
            fields = [self.arg(f, dev) for f in e.fields]
            if not all("entry" in f for f in fields):
                raise HetvmError("graph executor: a tuple argument of non-tensors needs executor='vm'")
            return {"tuple": [f["entry"] for f in fields]}
        return {"imm": _prim(e)}

    @staticmethod
    def _tuple_entries(ref: list, name: str) -> list[int]:
        if not all(isinstance(r, int) for r in ref):
            raise HetvmError(f"graph executor: '{name}' is a nested tuple; use executor='vm'")
        return ref

    def build(self) -> GraphModule:
        if "main" not in self.mod:
            raise HetvmError("graph executor: the module has no 'main'")
        for name, f in self.mod.functions.items():
            if self_recursive(f, name):  # a static graph has no way to repeat a node
                raise HetvmError(
                    f"graph executor: function '{name}' is a loop (it calls itself in tail "
                    "position); loops run on the VM: use executor='vm'"
                )
        if len(self.mod.functions) != 1:
            raise HetvmError("graph executor: calls between functions need executor='vm'")
        func = self.mod["main"]
        inputs = {}
        for p in func.params:
            if not isinstance(p.struct_info, S.TensorStructInfo):
                raise HetvmError(f"graph executor: parameter '{p.name_hint}' is not a tensor")
            eid = self.own_entry(p.struct_info, device_index(self.mod, p.struct_info.vdevice), p.name_hint)
            self.ref[p] = eid
            inputs[p.name_hint] = eid
            self.nodes.append({"op": "null", "name": p.name_hint, "outputs": [eid]})
        for block in func.body.blocks:
            for b in block.bindings:
                self.binding(b)
        out = self.value(func.body.body)
        outs = self._tuple_entries(out, "the result of main") if isinstance(out, list) else [out]
        graph = {
            "format_version": GRAPH_FORMAT_VERSION,
            "devices": self.devices,
            "storages": self.storages,
            "entries": self.entries,
            "nodes": self.nodes,
            "inputs": inputs,
            "params": {n["name"]: n["outputs"][0] for n in self.nodes if n.get("param")},
            "outputs": outs,
            "output_tuple": isinstance(out, list),
        }
        # the params travel with the library so create(graph, lib, devices) has them
        lib = {"format_version": GRAPH_FORMAT_VERSION, "kernels": self.kernels, "params": self.params}
        return GraphModule(graph, lib, self.params)

    def value(self, e: E.Expr) -> Any:
        if isinstance(e, E.Var):
            return self.ref.get(e)
        if isinstance(e, E.Tuple):
            return [self.value(f) for f in e.fields]
        if isinstance(e, E.TupleGetItem):
            t = self.value(e.tuple_value)
            return t[e.index]
        if isinstance(e, E.Constant):
            return self.const_entry(e, 0)
        raise HetvmError(f"graph executor: cannot return a {type(e).__name__}")

    def binding(self, b: E.Binding) -> None:
        v = b.value  # type: ignore[attr-defined]
        if isinstance(b, E.MatchCast) or isinstance(v, E.If):
            raise HetvmError("graph executor: control flow and match_cast need executor='vm'")
        if not isinstance(v, E.Call):
            self.ref[b.var] = self.value(v)
            return
        op = v.op
        a = v.args
        if isinstance(op, E.Op):
            name = op.name
            if name in ("memory.kill_tensor", "memory.kill_storage", "vm.kill_object"):
                return
            if name in ("memory.alloc_storage", "vm.alloc_storage"):
                # the size is in bytes whatever the dtype hint (as the VM reads it)
                nbytes = int(np.prod(_prim(a[0]), dtype=np.int64))
                self.ref[b.var] = ("storage", self.storage(nbytes, int(_prim(a[1]))))
                return
            if name in ("memory.alloc_tensor", "vm.alloc_tensor"):
                st = self.ref[a[0]]
                self.ref[b.var] = self.entry(st[1], int(_prim(a[1])), _prim(a[2]), _prim(a[3]))
                return
            if name == "builtin.alloc_tensor":
                sinfo = b.var.struct_info
                assert isinstance(sinfo, S.TensorStructInfo)
                self.ref[b.var] = self.own_entry(sinfo, int(_prim(a[2])), b.var.name_hint)
                return
            raise HetvmError(f"graph executor: op '{name}' is not supported; use executor='vm'")
        if isinstance(op, E.ExternFunc):
            sym = op.global_symbol
            kernel = kernel_op_of(sym)
            if kernel is not None:
                self.kernel(b, kernel, v)
                return
            if sym == COPY_BUILTIN:
                src, dst = self.source_entry(a[0], "a copy"), None
                dev = int(_prim(a[1]))
                if len(a) > 2 and isinstance(a[2], E.Var):
                    dst = self.ref[a[2]]
                else:
                    e = self.entries[src]
                    nbytes = S.dtype_nbytes(e["dtype"]) * int(np.prod(e["shape"], dtype=np.int64))
                    dst = self.entry(self.storage(nbytes, dev), 0, e["shape"], e["dtype"])
                self.nodes.append({"op": "__copy", "name": b.var.name_hint, "inputs": [{"entry": src}],
                                   "outputs": [dst], "src_device": self.entries[src]["device"],
                                   "device": self.dev(dev)})
                self.ref[b.var] = dst
                return
            if view_kernel(sym) is not None:  # an entry over the source's bytes
                src = self.entries[self.source_entry(a[0], "a view")]
                itemsize = S.dtype_nbytes(src["dtype"])
                offset, dims = place_view(sym, src["shape"], itemsize, [_prim(x) for x in a[1:]])
                self.ref[b.var] = self.entry(src["storage_id"], src["offset"] + offset, list(dims), src["dtype"])
                return
            raise HetvmError(f"graph executor: packed function '{sym}' is not supported; use executor='vm'")
        raise HetvmError("graph executor: calls between functions need executor='vm'")

    def kernel(self, b: E.Binding, op: str, call: E.Call) -> None:
        dev = int(call.attrs.get("device_index", 0))
        nout = int(call.attrs.get("num_outputs", 1))
        attrs = _plain(dict(call.attrs.get("op_attrs", {})))
        key = repr((op, attrs, self.devices[dev]["kind"]))
        if key not in self.kernel_index:
            self.kernel_index[key] = len(self.kernels)
            self.kernels.append({"op": op, "attrs": attrs, "kind": self.devices[dev]["kind"]})
        args = [self.arg(x, dev) for x in call.args]
        ins, outs = args[: len(args) - nout], args[len(args) - nout:]
        node = {"op": "kernel", "name": op, "lib": self.kernel_index[key], "inputs": ins,
                "outputs": [o["entry"] for o in outs], "device": self.dev(dev),
                "binding": b.var.name_hint}  # fmt: skip
        origin = debug_info_of(b.span or call.span)
        if origin is not None:  # the model's node, for errors (optional in the JSON)
            node["onnx_node"] = origin
        self.nodes.append(node)


def graph_codegen(mod: IRModule, metadata: dict | None = None) -> GraphModule:
    """Compiles ``main`` of a lowered module for the graph executor."""
    gm = _GraphBuilder(mod).build()
    gm.graph["metadata"] = dict(metadata or {})
    return gm
