"""No import cycle in hetvm (issue 16's clean layers): the modules' top-level
imports form no loop, so every module can be imported alone and each layer
depends only on those below it. Imports inside functions are deliberate lazy
edges and ``if TYPE_CHECKING:`` blocks are no edges at all; both are ignored.

A registry's package ``__init__`` that imports its member modules (to register
them) keeps the registry in a module of its own (``frontend/onnx_ops/registry.py``):
members import that module, never the package."""

import ast
import functools
import pathlib

import hetvm

ROOT = pathlib.Path(hetvm.__file__).parent


def _modules() -> dict[str, tuple[pathlib.Path, list[str]]]:
    out = {}
    for f in ROOT.rglob("*.py"):
        parts = ["hetvm", *f.relative_to(ROOT).with_suffix("").parts]
        package = parts[:-1]
        if parts[-1] == "__init__":
            parts = package = parts[:-1]
        out[".".join(parts)] = (f, package)
    return out


@functools.lru_cache(maxsize=1)
def _graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, (f, package) in mods.items():
        deps: set[str] = set()
        for node in ast.parse(f.read_text()).body:  # top level only
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                for a in node.names:
                    full = f"{module}.{a.name}"
                    deps.add(full if full in mods else module)
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_module_imports_itself_through_others():
    graph = _graph()
    assert len(graph) > 100 and "hetvm.runtime.pool" in graph["hetvm.runtime"]
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_runtime_reaches_no_compiler_module():
    graph = _graph()
    seen, todo = set(), [m for m in graph if m.startswith("hetvm.runtime")]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(graph[m])
    compiler = ("hetvm.backend", "hetvm.transform", "hetvm.analysis", "hetvm.pipeline", "hetvm.frontend")
    assert sorted(m for m in seen if m.startswith(compiler)) == []
