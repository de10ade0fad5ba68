"""The graph executor: runs a static graph (see :mod:`hetvm.backend.graph_codegen`).

``create(graph, lib, devices)`` allocates every storage once on its device,
binds each kernel once (``hetvm.kernels.bind_kernel``) and turns the node list
into a list of closures; ``run()`` calls them in order. ``__copy`` nodes move
data between devices with the DeviceAPI. Every kernel input and output must
live on the node's device, or a :class:`DeviceMismatchError` names the tensor,
both devices and the node. ``create(..., debug=True)`` gives a
:class:`DebugGraphExecutor` that times every node and can dump every output.

Artifacts: ``export_graph(module, path)`` / ``load_graph(path)`` write one zip
with ``manifest.json`` (format, version, member hashes), ``graph.json``,
``lib.json`` and ``params.npz`` (loaded with ``allow_pickle=False``).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import time
import zipfile
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import ArtifactError, DeviceMismatchError, HetvmError, HetvmRuntimeError
from ..ir.op_registry import missing_part
from .device import Device, copy_array, device
from .memory import make_allocator
from .ndarray import NDArray, np_dtype, view
from .ndarray import array as nd_array

__all__ = ["create", "GraphExecutor", "DebugGraphExecutor", "export_graph", "load_graph"]

FORMAT_NAME = "hetvm-graph"
FORMAT_VERSION = 1


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
        _validate(graph, lib)
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
    from ..backend.graph_codegen import GraphModule

    if isinstance(graph, GraphModule):
        graph, lib = graph.graph, graph.lib
    if isinstance(lib, GraphModule):
        lib = lib.lib
    if isinstance(graph, str):
        graph = json.loads(graph)
    cls = DebugGraphExecutor if debug else GraphExecutor
    return cls(graph, lib, devices)


# --------------------------------------------------------------------------
# validation and artifacts
# --------------------------------------------------------------------------


def _node_label(index: int, node: dict) -> str:
    return f"graph node {index} '{node.get('op')}:{node.get('binding') or node.get('name')}'"


def _validate(graph: Any, lib: Any) -> None:
    """Structure checks of a graph and its library (a loaded file may have been
    edited and re-hashed): every reference in range, every entry inside its
    storage. A malformed field is an ArtifactError, never a crash."""
    try:
        _validate_fields(graph, lib)
    except ArtifactError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError) as err:
        raise ArtifactError(f"invalid graph: malformed field ({type(err).__name__}: {err})") from None


def _validate_fields(graph: Any, lib: Any) -> None:
    def need(cond: bool, msg: str) -> None:
        if not cond:
            raise ArtifactError(f"invalid graph: {msg}")

    def index(value: Any, n: int) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < n

    need(isinstance(graph, dict) and isinstance(lib, dict), "graph and lib must be dicts")
    for key in ("devices", "storages", "entries", "nodes", "inputs", "params", "outputs"):
        need(key in graph, f"missing '{key}'")
    storages, entries = graph["storages"], graph["entries"]
    n_st, n_en = len(storages), len(entries)
    for s in storages:
        need(index(s["device"], len(graph["devices"])) and isinstance(s["bytes"], int) and s["bytes"] >= 0,
             f"bad storage {s}")  # fmt: skip
    for e in entries:
        need(index(e["storage_id"], n_st), f"entry {e.get('id')} names storage {e['storage_id']}")
        shape, offset = e["shape"], e["offset"]
        need(isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)
             and isinstance(offset, int) and offset >= 0, f"entry {e.get('id')}: bad shape or offset")  # fmt: skip
        try:
            itemsize = np_dtype(e["dtype"]).itemsize
        except HetvmRuntimeError as err:
            raise ArtifactError(f"invalid graph: entry {e.get('id')}: {err}") from None
        nbytes = math.prod(shape) * itemsize
        need(offset + nbytes <= storages[e["storage_id"]]["bytes"],
             f"entry {e.get('id')} ({nbytes} bytes at offset {offset}) does not fit its storage")  # fmt: skip
    for d in graph["devices"]:
        need(isinstance(d["kind"], str) and isinstance(d["index"], int) and d["index"] >= 0, f"bad device {d}")
    kernels = lib.get("kernels", [])
    for k in kernels:
        need(isinstance(k["op"], str) and isinstance(k["attrs"], dict), f"bad kernel {k}")
    for n in graph["nodes"]:
        need(n.get("op") in ("null", "kernel", "__copy"), f"unknown node op {n.get('op')!r}")
        need(isinstance(n.get("outputs", []), list) and isinstance(n.get("inputs", []), list),
             f"node {n.get('name')!r}: inputs and outputs must be lists")  # fmt: skip
        for e in n.get("outputs", []):
            need(index(e, n_en), f"node output {e} out of range")
        for a in n.get("inputs", []):
            entries_in = a.get("tuple") if isinstance(a.get("tuple"), list) else [a.get("entry")]
            need("imm" in a or all(index(e, n_en) for e in entries_in), f"bad node input {a}")
        if n["op"] == "null":
            continue
        dev = n["device"]
        need(isinstance(dev, dict) and isinstance(dev["kind"], str) and isinstance(dev["index"], int),
             f"node {n.get('name')!r}: bad device {dev}")  # fmt: skip
        if n["op"] == "kernel":
            need(index(n.get("lib", -1), len(kernels)), f"node names kernel {n.get('lib')}")
        else:
            need(len(n["inputs"]) == 1 and "entry" in n["inputs"][0] and len(n["outputs"]) == 1,
                 f"copy node {n.get('name')!r} needs one input entry and one output")  # fmt: skip
    for group in ("inputs", "params"):
        need(isinstance(graph[group], dict) and all(index(e, n_en) for e in graph[group].values()),
             f"an entry of '{group}' is out of range")  # fmt: skip
    for e in graph["outputs"]:
        need(index(e, n_en), f"output {e} out of range")


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def export_graph(module: Any, path: str) -> None:
    """Writes graph, library and params of a GraphModule to one file."""
    graph, lib = module.graph, module.lib
    params = lib.get("params") or {}
    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v) for k, v in params.items()})
    members = {
        "graph.json": json.dumps(graph, sort_keys=True).encode(),
        "lib.json": json.dumps({k: v for k, v in lib.items() if k != "params"}, sort_keys=True).encode(),
        "params.npz": buf.getvalue(),
    }
    manifest = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION,
                "members": {k: _sha(v) for k, v in members.items()}}
    path = os.fspath(path)
    tmp = f"{path}.tmp-{os.getpid()}"  # atomic: a reader never sees half a file
    try:
        with zipfile.ZipFile(tmp, "w") as zf:
            zf.writestr("manifest.json", json.dumps(manifest))
            for k, v in members.items():
                zf.writestr(k, v)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load_graph(path: str):
    """Loads what :func:`export_graph` wrote, checking format, version and hashes."""
    from ..backend.graph_codegen import GraphModule

    try:
        with zipfile.ZipFile(path) as zf:
            manifest = json.loads(zf.read("manifest.json"))
            if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME \
                    or manifest.get("format_version") != FORMAT_VERSION:
                raise ArtifactError(f"{path}: not a hetvm graph of format version {FORMAT_VERSION}")
            members = manifest.get("members")
            if not isinstance(members, dict) or set(members) != {"graph.json", "lib.json", "params.npz"}:
                raise ArtifactError(f"{path}: the manifest does not list graph.json, lib.json and params.npz")
            data = {}
            for name, digest in members.items():
                blob = zf.read(name)
                if _sha(blob) != digest:
                    raise ArtifactError(f"{path}: member '{name}' does not match its hash (tampered or truncated)")
                data[name] = blob
        graph = json.loads(data["graph.json"])
        lib = json.loads(data["lib.json"])
        if not isinstance(graph, dict) or not isinstance(lib, dict):
            raise ArtifactError(f"{path}: graph.json and lib.json must hold JSON objects")
        with np.load(io.BytesIO(data["params.npz"]), allow_pickle=False) as npz:
            lib["params"] = {k: npz[k] for k in npz.files}
    except ArtifactError:
        raise
    except (zipfile.BadZipFile, KeyError, ValueError, OSError, EOFError) as err:
        raise ArtifactError(f"{path}: cannot read graph artifact ({err})") from None
    _validate(graph, lib)
    return GraphModule(graph, lib, lib["params"])
