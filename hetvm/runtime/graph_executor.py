"""The graph executor: runs a static graph (see :mod:`hetvm.backend.graph_codegen`).

``create(graph, lib, devices)`` allocates every storage once on its device,
binds each kernel once (``hetvm.kernels.bind_kernel``) and turns the node list
into a list of closures; ``run()`` calls them in order. ``__copy`` nodes move
data between devices with the DeviceAPI. Every kernel input and output must
live on the node's device, or a :class:`DeviceMismatchError` names the tensor,
both devices and the node. ``create(..., debug=True)`` gives a
:class:`DebugGraphExecutor` that times every node and can dump every output.

The graph artifact (``GraphModule``, ``export_graph``, ``load_graph``) is
:mod:`.graph_artifact`; both are re-exported here.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import DeviceMismatchError, HetvmError, HetvmRuntimeError
from ..ir.op_registry import missing_part
from .allocators import make_allocator
from .bytecode import debug_label
from .device import Device, copy_array, device
from .graph_artifact import GraphModule, export_graph, load_graph, validate_graph
from .ndarray import NDArray, view
from .ndarray import array as nd_array

__all__ = [
    "create", "GraphExecutor", "DebugGraphExecutor", "GraphModule", "export_graph", "load_graph",
]


def _resolve(graph: dict, devices: Sequence[Device | str] | Device | str | None) -> list[Device]:
    wanted = graph["devices"]
    if devices is None:
        return [device(d["kind"], d["index"]) for d in wanted]
    if isinstance(devices, (Device, str)):
        devices = [devices]
    out = [d if isinstance(d, Device) else device(d) for d in devices]
    if len(out) != len(wanted):
        names = ", ".join(f"{d['kind']}:{d['index']}" for d in wanted)
        raise HetvmRuntimeError(f"the graph uses {len(wanted)} device(s) ({names}), but {len(out)} were given")
    return out


class GraphExecutor:
    """Runs one graph: ``set_input``, ``run``, ``get_output``, ``get_num_outputs``."""

    def __init__(self, graph: dict, lib: dict, devices: Sequence[Device | str] | None = None) -> None:
        validate_graph(graph, lib)
        self.graph = graph
        self.lib = lib
        self.devices = _resolve(graph, devices)
        self._allocators = {d: make_allocator("naive", d) for d in dict.fromkeys(self.devices)}
        self._storages = [self._allocators[self.devices[s["device"]]].alloc(s["bytes"]) for s in graph["storages"]]
        self.entries: list[NDArray] = [
            view(self._storages[e["storage_id"]], e["offset"], e["shape"], e["dtype"]) for e in graph["entries"]
        ]
        params = lib.get("params") or {}
        for name, eid in graph["params"].items():
            if name not in params:
                raise HetvmRuntimeError(f"graph parameter '{name}' is missing from the library")
            self._write(eid, params[name], name)
        self._steps: list[tuple[dict, Callable[[], None]]] = [
            (n, self._compile_located(i, n)) for i, n in enumerate(graph["nodes"]) if n["op"] != "null"
        ]

    # -- set-up ------------------------------------------------------------------
    def _write(self, eid: int, value: Any, what: str) -> None:
        dst = self.entries[eid]
        if isinstance(value, NDArray):
            src_dev, src = value.device, value._data
        else:
            host = np.asarray(value)
            src_dev, src = device("cpu", 0), host
        if tuple(src.shape) != dst.shape or str(src.dtype) != dst.dtype:
            raise HetvmRuntimeError(
                f"input '{what}': expected {dst.shape} {dst.dtype}, given {tuple(src.shape)} {src.dtype}")
        copy_array(src_dev, src, dst.device, dst._data)

    def _compile_located(self, index: int, node: dict) -> Callable[[], None]:
        try:
            return self._compile(index, node)
        except HetvmError:
            raise
        except Exception as exc:  # a kernel refusing its attributes, say
            raise HetvmRuntimeError(f"{_node_label(index, node)}: cannot bind: {type(exc).__name__}: {exc}") from exc

    def _compile(self, index: int, node: dict) -> Callable[[], None]:
        node_dev = self._node_device(node)
        if node["op"] == "__copy":
            src = self.entries[node["inputs"][0]["entry"]]
            dst = self.entries[node["outputs"][0]]
            if dst.device is not node_dev:
                raise self._mismatch(node, index, "destination", dst.device, node_dev)
            return lambda: copy_array(src.device, src._data, dst.device, dst._data)
        from ..kernels import bind_kernel

        k = self.lib["kernels"][node["lib"]]
        part = missing_part(k["op"], node_dev.api.missing_kernels)
        if part is not None:
            fused = "" if part == k["op"] else f" (which '{k['op']}' fuses)"
            raise HetvmRuntimeError(
                f"node {index} ('{node.get('binding', k['op'])}'): {node_dev} has no kernel for '{part}'{fused}")
        fn = bind_kernel(k["op"], node_dev.kind, node_dev.api.xp, dict(k["attrs"]))
        args: list[Any] = []

        def on_device(eid: int) -> Any:
            nd = self.entries[eid]
            if nd.device is not node_dev:
                raise self._mismatch(node, index, f"entry {eid}", nd.device, node_dev)
            return nd._data

        for a in node["inputs"]:
            if "entry" in a:
                args.append(on_device(a["entry"]))
            elif "tuple" in a:  # a tuple of tensors reaches the kernel as a list of arrays
                args.append([on_device(eid) for eid in a["tuple"]])
            else:
                args.append(tuple(a["imm"]) if isinstance(a["imm"], list) else a["imm"])
        for eid in node["outputs"]:
            nd = self.entries[eid]
            if nd.device is not node_dev:
                raise self._mismatch(node, index, f"output entry {eid}", nd.device, node_dev)
            args.append(nd._data)
        return lambda: fn(*args)

    def _node_device(self, node: dict) -> Device:
        want = node["device"]
        for i, d in enumerate(self.graph["devices"]):
            if d["kind"] == want["kind"] and d["index"] == want["index"]:
                return self.devices[i]
        raise HetvmRuntimeError(f"node device {want} is not in the graph's device list")

    @staticmethod
    def _mismatch(node: dict, index: int, what: str, got: Device, want: Device) -> DeviceMismatchError:
        label = node.get("binding") or node.get("name")
        return DeviceMismatchError(
            f"node {index} '{node['op']}:{label}': tensor {what} lives on {got}, but the node runs on {want}")

    # -- API -------------------------------------------------------------------------
    def set_input(self, key: str | int | None = None, value: Any = None, **kwargs: Any) -> None:
        """Sets an input (by name or position) or several as keywords; params too."""
        items = list(kwargs.items())
        if key is not None:
            items.insert(0, (key, value))
        names = list(self.graph["inputs"])
        for k, v in items:
            name = names[k] if isinstance(k, int) else k
            eid = self.graph["inputs"].get(name, self.graph["params"].get(name))
            if eid is None:
                raise HetvmRuntimeError(f"the graph has no input '{name}' (inputs: {', '.join(names)})")
            self._write(eid, v, name)

    def run(self, **inputs: Any) -> None:
        if inputs:
            self.set_input(**inputs)
        with np.errstate(all="ignore"):  # IEEE results without warnings, as the VM's
            self._run_steps()

    def _run_steps(self) -> None:
        for node, step in self._steps:
            try:
                step()
            except HetvmError:
                raise
            except Exception as exc:  # a kernel's own error, with the node that ran it
                # (the graph's numbering, as at bind time: steps skip the input nodes)
                label = _node_label(self.graph["nodes"].index(node), node)
                raise HetvmRuntimeError(f"{label}: {type(exc).__name__}: {exc}") from exc

    def get_num_outputs(self) -> int:
        return len(self.graph["outputs"])

    def get_output(self, index: int) -> NDArray:
        """Output ``index`` as a fresh NDArray on its device (later runs do not change it)."""
        src = self.entries[self.graph["outputs"][index]]
        out = nd_array(np.empty(src.shape, src.dtype), src.device)
        copy_array(src.device, src._data, out.device, out._data)
        return out

    def memory_report(self) -> dict[str, dict]:
        """Per device, as the VM's: peak_bytes, bytes_in_use, pool_bytes, alloc_calls;
        and ``params_bytes``, ``inputs_bytes``: what of that holds params and inputs.

        A graph allocates every storage once, when it is created, and keeps them
        across runs, so the peak is the sum of its storages on that device and
        ``alloc_calls`` their count. The VM counts neither its constants nor the
        caller's inputs, so ``peak_bytes - params_bytes - inputs_bytes`` is the
        figure to set beside a VM's peak."""
        report = {str(dev): {**alloc.stats(), "params_bytes": 0, "inputs_bytes": 0}
                  for dev, alloc in self._allocators.items()}  # fmt: skip
        for key, names in (("params_bytes", self.graph["params"]), ("inputs_bytes", self.graph["inputs"])):
            for sid in {self.graph["entries"][eid]["storage_id"] for eid in names.values()}:
                storage = self.graph["storages"][sid]
                report[str(self.devices[storage["device"]])][key] += int(storage["bytes"])
        return report

    def get_input(self, name: str) -> NDArray:
        return self.entries[self.graph["inputs"][name]]


class DebugGraphExecutor(GraphExecutor):
    """Times every node of a run and can dump every node's output."""

    def run(self, dump: bool = False, **inputs: Any) -> None:  # type: ignore[override]
        if inputs:
            self.set_input(**inputs)
        self.timings: list[dict] = []
        self.dumps: dict[str, list[np.ndarray]] = {}
        for i, (node, step) in enumerate(self._steps):
            t0 = time.perf_counter()
            with np.errstate(all="ignore"):
                step()
            node_dev = self._node_device(node)
            node_dev.api.synchronize()
            label = f"{i}:{node['op']}:{node.get('binding') or node.get('name')}"
            self.timings.append({"node": label, "device": str(node_dev), "seconds": time.perf_counter() - t0})
            if dump:
                self.dumps[label] = [self._host(self.entries[e]) for e in node["outputs"]]

    @staticmethod
    def _host(nd: NDArray) -> np.ndarray:
        out = np.empty(nd.shape, nd.dtype)
        copy_array(nd.device, nd._data, device("cpu", 0), out)
        return out

    def profile(self) -> str:
        total = sum(t["seconds"] for t in self.timings) or 1e-12
        lines = [f"{t['node']:<40} {t['device']:<8} {t['seconds'] * 1e6:10.1f} us {100 * t['seconds'] / total:5.1f}%"
                 for t in self.timings]
        lines.append(f"{'total':<49} {total * 1e6:10.1f} us")
        return "\n".join(lines)


def create(graph: Any, lib: Any, devices: Sequence[Device | str] | Device | str | None = None,
           debug: bool = False) -> GraphExecutor:
    """A graph executor (``debug=True``: the timing/dumping variant)."""
    if isinstance(graph, GraphModule):
        graph, lib = graph.graph, graph.lib
    if isinstance(lib, GraphModule):
        lib = lib.lib
    if isinstance(graph, str):
        graph = json.loads(graph)
    cls = DebugGraphExecutor if debug else GraphExecutor
    return cls(graph, lib, devices)


def _node_label(index: int, node: dict) -> str:
    binding = node.get("binding")
    shown = binding if binding not in (None, "", "_") else node.get("name")  # '_': a kernel's unit result
    label = f"graph node {index} '{node.get('op')}:{shown}'"
    origin = debug_label(node.get("onnx_node"))
    return f"{label} ({origin})" if origin else label
