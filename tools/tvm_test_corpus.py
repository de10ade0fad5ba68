"""How much of TVM's own relax test corpus hetvm's parser reads, unmodified.

    python tools/tvm_test_corpus.py /path/to/tvm [--files a.py,b.py] [--show-failures N]

Reads TVM's test files with ``ast`` (nothing in them is run), takes every
``@I.ir_module`` class and every ``@R.function`` at any depth, keeps those free
of TIR (no ``@T.prim_func``, no ``R.call_tir*``) that the test expects to parse
(not inside ``with pytest.raises(...)``; tests marked ``xfail`` are left out), and
parses each with ``hetvm.script.from_source``. Prints the figure and the most
common failure messages, so the compatibility claim stays measured.

The default file list is the one issue 20 measured with: the pass tests of the
memory and device passes, LegalizeOps, CanonicalizeBindings, DCE, the VM
build/codegen tests and the TVMScript parser/printer tests.
"""

from __future__ import annotations

import argparse
import ast
import collections
import os
import re
import sys
import textwrap
from dataclasses import dataclass

DEFAULT_FILES = (
    "test_kill_after_last_use.py",
    "test_transform_static_plan_block_memory.py",
    "test_transform_realize_vdevice.py",
    "test_transform.py",
    "test_lower_alloc_tensor.py",
    "test_transform_legalize_ops.py",
    "test_transform_canonicalize_bindings.py",
    "test_transform_dead_code_elimination.py",
    "test_vm_build.py",
    "test_vm_codegen_only.py",
    "test_tvmscript_parser.py",
    "test_tvmscript_printer_relax.py",
)

_HEADER = "from tvm.script import ir as I, relax as R, tir as T\n"


@dataclass
class Candidate:
    """One module (or standalone function) of a test file."""

    file: str
    line: int
    name: str
    source: str
    has_tir: bool
    negative: bool
    xfail: bool = False


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _is_module_or_function(node: ast.AST) -> bool:
    if not isinstance(node, (ast.ClassDef, ast.FunctionDef)):
        return False
    for deco in node.decorator_list:
        name = _dotted(deco)
        if isinstance(node, ast.ClassDef) and name.endswith("ir_module"):
            return True
        if isinstance(node, ast.FunctionDef) and re.fullmatch(r"(R|relax|tvm\.script\.relax)\.function", name):
            return True
    return False


def _has_tir(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, (ast.FunctionDef, ast.ClassDef)):
            if any(_dotted(d).endswith("prim_func") for d in sub.decorator_list):
                return True
        if isinstance(sub, ast.Call) and _dotted(sub.func).split(".")[-1].startswith("call_tir"):
            return True
    return False


def _is_raises(item: ast.withitem) -> bool:
    name = _dotted(item.context_expr)
    return name.endswith("raises") or name.endswith("expect_failure")


def _xfail(node: ast.FunctionDef) -> bool:
    return any("xfail" in _dotted(d) for d in node.decorator_list)


def candidates(path: str) -> list[Candidate]:
    """The modules of one file, outermost only (a module's own functions are part of it)."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    tree = ast.parse(text)
    found: list[Candidate] = []

    def visit(node: ast.AST, negative: bool, xfail: bool) -> None:
        for child in ast.iter_child_nodes(node):
            neg, xf = negative, xfail
            if isinstance(child, ast.With) and any(_is_raises(i) for i in child.items):
                neg = True
            if isinstance(child, ast.FunctionDef) and _xfail(child):
                xf = True
            if _is_module_or_function(child):
                start = min([d.lineno for d in child.decorator_list] + [child.lineno])
                lines = text.splitlines()
                end = child.end_lineno or start
                src = "\n".join(lines[start - 1 : end])
                found.append(
                    Candidate(
                        os.path.basename(path), start, child.name, textwrap.dedent(src), _has_tir(child),
                        neg, xf,
                    )
                )
                continue
            visit(child, neg, xf)

    visit(tree, False, False)
    return found


def _short(message: str) -> str:
    first = message.strip().splitlines()[0] if message.strip() else message
    first = re.sub(r"^.*?:\d+:\d+: ", "", first)
    first = re.sub(r"'[^']*'", "'…'", first)
    return first[:110]


def measure(tvm_root: str, files: tuple[str, ...]) -> dict[str, object]:
    """Parses every candidate; returns counts and the failures."""
    from hetvm.errors import HetvmError
    from hetvm.script import from_source

    every: list[Candidate] = []
    for name in files:
        path = os.path.join(tvm_root, "tests", "python", "relax", name)
        if os.path.exists(path):
            every.extend(candidates(path))
    every = [c for c in every if not c.xfail]  # TVM itself fails these: neither side counts
    wanted = [c for c in every if not c.has_tir and not c.negative]
    ok: list[Candidate] = []
    failures: list[tuple[Candidate, str]] = []
    for cand in wanted:
        try:
            from_source(_HEADER + cand.source, filename=f"{cand.file}:{cand.line}")
            ok.append(cand)
        except HetvmError as e:
            failures.append((cand, str(e)))
        except Exception as e:  # noqa: BLE001 - a crash is a finding; count and show it
            failures.append((cand, f"CRASH {type(e).__name__}: {e}"))
    negatives = [c for c in every if not c.has_tir and c.negative]
    accepted_negatives = []
    for cand in negatives:
        try:
            from_source(_HEADER + cand.source)
            accepted_negatives.append(cand)
        except Exception:  # noqa: BLE001 - rejection in any form is what is counted
            pass
    return {
        "total": len(every),
        "tir_free": len(wanted),
        "parsed": ok,
        "failures": failures,
        "negatives": negatives,
        "accepted_negatives": accepted_negatives,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tvm_root", help="a checkout of apache/tvm")
    parser.add_argument("--files", default=",".join(DEFAULT_FILES), help="comma-separated test file names")
    parser.add_argument("--show-failures", type=int, default=0, help="print this many failures in full")
    args = parser.parse_args(argv)
    result = measure(args.tvm_root, tuple(f for f in args.files.split(",") if f))
    parsed, failures = result["parsed"], result["failures"]
    tir_free = result["tir_free"]
    pct = 100.0 * len(parsed) / tir_free if tir_free else 0.0
    print(f"modules: {result['total']}; TIR-free, expected to parse: {tir_free}; "
          f"hetvm parses {len(parsed)} ({pct:.0f}%)")
    print(f"negative (TIR-free, inside pytest.raises): {len(result['negatives'])}; "
          f"hetvm accepts {len(result['accepted_negatives'])}")
    for cand in result["accepted_negatives"]:
        print(f"  accepted negative: {cand.file}:{cand.line} {cand.name}")
    counts = collections.Counter(_short(msg) for _, msg in failures)
    print("failures by message:")
    for msg, n in counts.most_common():
        print(f"  {n:4d}  {msg}")
    for cand, msg in failures[: args.show_failures]:
        print(f"--- {cand.file}:{cand.line} {cand.name}\n{msg}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
