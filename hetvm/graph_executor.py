"""``hetvm.graph_executor.create(graph, lib, devices)`` (re-exported from the runtime)."""

from .runtime.graph_executor import (
    DebugGraphExecutor,
    GraphExecutor,
    create,
    export_graph,
    load_graph,
)

__all__ = ["create", "GraphExecutor", "DebugGraphExecutor", "export_graph", "load_graph"]
