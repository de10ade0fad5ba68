"""Analyses read IR and run no passes: nothing in ``hetvm/analysis`` imports the
passes, the code generators or the pipeline (issue 16's clean layers)."""

import ast
import pathlib

import hetvm

PASSES = ("hetvm.transform", "hetvm.backend", "hetvm.pipeline", "hetvm.frontend", "hetvm.runtime")
ANALYSIS = pathlib.Path(hetvm.__file__).parent / "analysis"


def _imported(path: pathlib.Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            # hetvm/analysis/x.py: level 1 is hetvm.analysis, level 2 is hetvm
            base = ["hetvm", "analysis"][: 3 - node.level] if node.level else []
            out.append(".".join(base + ([node.module] if node.module else [])))
    return out


def test_analyses_import_no_pass():
    files = sorted(ANALYSIS.glob("*.py"))
    assert len(files) > 8
    bad = {f.name: name for f in files for name in _imported(f) if name.startswith(PASSES)}
    assert bad == {}


def test_the_resolver_sees_relative_imports():
    names = _imported(ANALYSIS / "memory_plan.py")
    assert "hetvm.analysis.liveness" in names and "hetvm.ir.module" in names
