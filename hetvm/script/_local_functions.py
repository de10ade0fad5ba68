"""Local functions (a ``def`` inside an ``@R.function``), lifted while parsing.

TVM keeps a local function as a binding of a ``relax.Function`` and its
LambdaLift pass later makes it a module function. hetvm's IR has no nested
functions, so the parser lifts at once, as LambdaLift would:

* the function becomes a private module function named ``<outer>_<name>``
  (``_1``, ``_2`` ... on a clash), its parameters followed by one parameter per
  variable of the enclosing function it reads (*captured*, by name, in order of
  first use; TVM's closures bind captured values last, too);
* a call ``g(a)`` becomes ``cls.main_g(a, c)``, passing the captured values;
* a use as a value (returned, passed, put in a tuple) becomes
  ``R.make_closure(cls.main_g, (c,))`` (just ``cls.main_g`` when it captures
  nothing), which the VM calls as a closure.

Recursion works (the function's own name is visible in its body, which then
needs a return annotation, as for module functions), and so do calls between
local functions of one scope: a local function calling another captures what
that one captures. Python's scoping decides what is captured: a name bound
anywhere in the local function (a parameter, an assignment, a nested ``def``)
is its own. hetvm therefore prints the lifted module, which TVM reads too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..ir import expr as E


@dataclass
class LocalFunction:
    """A lifted local function as its scope sees it: the module function and the
    names of the enclosing variables every call passes after its arguments."""

    name: str
    gv: E.GlobalVar
    captured: tuple[str, ...]


def bound_names(fdef: ast.FunctionDef) -> set[str]:
    """Names a local function binds itself (Python's rule: bound anywhere = local)."""
    bound = {a.arg for a in fdef.args.args}
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.FunctionDef) and node is not fdef:
            bound.add(node.name)
    return bound


def read_names(fdef: ast.FunctionDef) -> list[str]:
    """Names the body (and nested bodies) read, in source order, without the
    decorators and annotations (those name dialects and shape variables)."""
    out: list[str] = []
    skip: set[int] = set()
    for node in ast.walk(fdef):
        if isinstance(node, ast.FunctionDef):
            for sub in [*node.decorator_list, *(a.annotation for a in node.args.args if a.annotation), node.returns]:
                if sub is not None:
                    skip.update(id(n) for n in ast.walk(sub))
    names = [
        n for n in ast.walk(fdef)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in skip
    ]  # fmt: skip
    names.sort(key=lambda n: (n.lineno, n.col_offset))
    for n in names:
        if n.id not in out:
            out.append(n.id)
    return out


def lifted_name(outer: str, inner: str, taken: set[str]) -> str:
    """``<outer>_<inner>`` (TVM LambdaLift's naming), made unique among ``taken``."""
    base = f"{outer}_{inner}"
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    return name
