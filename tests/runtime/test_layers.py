"""The runtime runs artifacts without the compiler: nothing in ``hetvm/runtime``
imports the compiler's packages (issue 16's clean layers)."""

import ast
import pathlib

import hetvm

COMPILER = ("hetvm.backend", "hetvm.transform", "hetvm.analysis", "hetvm.frontend",
            "hetvm.pipeline", "hetvm.script")  # fmt: skip
RUNTIME = pathlib.Path(hetvm.__file__).parent / "runtime"


def _imports(path: pathlib.Path) -> list[str]:
    package = "hetvm." + ".".join(path.relative_to(RUNTIME.parent).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out += [name] + [f"{name}.{a.name}" for a in node.names]
    return out


def test_the_runtime_imports_no_compiler_package():
    files = sorted(RUNTIME.rglob("*.py"))
    assert len(files) > 10
    bad = {
        str(f.relative_to(RUNTIME.parent)): name
        for f in files
        for name in _imports(f)
        if name.startswith(COMPILER)
    }
    assert bad == {}


def test_the_import_resolver_sees_relative_imports():
    names = _imports(RUNTIME / "graph_executor.py")
    assert "hetvm.runtime.graph_artifact.GraphModule" in names and "hetvm.errors" in names
