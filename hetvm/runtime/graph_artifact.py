"""The graph artifact: what ``hetvm.build(..., executor="graph")`` makes and the
graph executor runs -- a :class:`GraphModule` (graph JSON, kernel library,
params), its checks, and its file form.

It lives in the runtime (not beside the compiler's graph codegen) so that
loading and running a graph needs no compiler: ``hetvm.backend`` imports it,
never the other way round.

File form: ``export_graph(module, path)`` / ``load_graph(path)`` write one zip
with ``manifest.json`` (format, version, member hashes), ``graph.json``,
``lib.json`` and ``params.npz`` (loaded with ``allow_pickle=False``). The
graph's fields are described in :mod:`hetvm.backend.graph_codegen`.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import zipfile
from typing import Any

import numpy as np

from ..errors import ArtifactError, HetvmRuntimeError
from .atomic_file import write_atomically
from .bytecode import debug_info_from_json, memory_plan_of
from .ndarray import np_dtype

__all__ = ["GraphModule", "GRAPH_FORMAT_VERSION", "export_graph", "load_graph", "validate_graph"]

FORMAT_NAME = "hetvm-graph"
FORMAT_VERSION = 1
GRAPH_FORMAT_VERSION = 1  # the graph's and library's own "format_version" field


class GraphModule:
    """What ``hetvm.build(..., executor="graph")`` returns: graph, library, params."""

    def __init__(self, graph: dict, lib: dict, params: dict[str, np.ndarray]) -> None:
        self.graph = graph
        self.lib = lib
        self.params = params

    def get_graph_json(self) -> dict:
        return self.graph

    def get_lib(self) -> dict:
        return self.lib

    def get_params(self) -> dict[str, np.ndarray]:
        return dict(self.params)

    @property
    def devices(self) -> list[dict]:
        """The graph's devices in vdevice order (``{"kind", "index", "memory_scope"}``)."""
        return list(self.graph.get("devices", []))

    def memory_plan(self, dims: dict | None = None) -> dict:
        """The build's memory plan, as ``Executable.memory_plan``: per function and
        device index, the planner's figures (the graph's storages realise it)."""
        return memory_plan_of(self.graph.get("metadata", {}), dims)

    def export(self, path: str | os.PathLike) -> None:
        """One file: JSON graph + library and an ``.npz`` of params, no pickle."""
        export_graph(self, path)

    def __iter__(self):  # graph, lib, params = hetvm.build(..., executor="graph")
        return iter((self.graph, self.lib, self.params))


def validate_graph(graph: Any, lib: Any) -> None:
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
            if "onnx_node" in n:  # optional provenance (graphs from before it have none)
                try:
                    debug_info_from_json([[0, n["onnx_node"]]], 1, "node")
                except HetvmRuntimeError as err:
                    raise ArtifactError(f"invalid graph: node {n.get('name')!r}: bad 'onnx_node' ({err})") from None
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


def export_graph(module: Any, path: str | os.PathLike) -> None:
    """Writes graph, library and params of a GraphModule to one file (atomically,
    see :mod:`.atomic_file`)."""
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

    def write(f: Any) -> None:
        with zipfile.ZipFile(f, "w") as zf:
            zf.writestr("manifest.json", json.dumps(manifest))
            for k, v in members.items():
                zf.writestr(k, v)

    write_atomically(path, write)


def load_graph(path: str | os.PathLike) -> GraphModule:
    """Loads what :func:`export_graph` wrote, checking format, version and hashes."""
    path = os.fspath(path)

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
    validate_graph(graph, lib)
    return GraphModule(graph, lib, lib["params"])
