"""The parser: TVMScript text -> IRModule, by reading Python's ``ast``.

``from_source`` takes a string holding one ``@I.ir_module`` class (or one
``@R.function``), with its import lines present, commented out or absent.
Module-level ``n = TypeVar("n")`` / ``n = T.int64()`` lines declare shape
variable names (each function gets its own variables). Nothing in the text
is executed.
"""

from __future__ import annotations

import ast
import textwrap
from typing import Any

from ..errors import HetvmError, ParseError
from ..ir import expr as E
from ..ir.module import IRModule
from ._diag import Diagnostics, did_you_mean
from ._env import NAMESPACE_OF_MODULE, ModuleEnv
from ._eval import Evaluator, Namespace, is_dtype
from ._function import FunctionParser
from ._values import plain_data_problem

__all__ = ["from_source", "parse_class_source", "parse_function_source"]


def _parse_python(text: str, diag: Diagnostics) -> ast.Module:
    try:
        return ast.parse(text)
    except SyntaxError as e:
        line = (e.lineno or 1) + diag.line_offset
        col = max((e.offset or 1) - 1, 0) + diag.col_offset
        src = diag.lines[line - 1] if 0 < line <= len(diag.lines) else None
        raise ParseError(
            f"invalid Python syntax: {e.msg}",
            filename=diag.filename,
            line=line,
            column=col,
            source_line=src,
        ) from None


def _dedent(text: str) -> tuple[str, int]:
    """Dedented text and how many columns were removed."""
    dedented = textwrap.dedent(text)
    for orig, new in zip(text.splitlines(), dedented.splitlines()):
        if new.strip():
            return dedented, len(orig) - len(new)
    return dedented, 0


class ModuleParser:
    """Parses an ``@I.ir_module`` class: global infos, then functions on demand."""

    def __init__(self, env: ModuleEnv, cdef: ast.ClassDef) -> None:
        self.env = env
        self.cdef = cdef
        self.defs: dict[str, ast.FunctionDef] = {}
        self.done: dict[str, E.Function] = {}
        self.in_progress: list[str] = []
        self.global_infos: dict[str, Any] = {}
        self.attrs: dict[str, Any] = {}
        env.class_name = cdef.name
        env.global_var = self.global_var

    def err(self, node: ast.AST | None, message: str) -> ParseError:
        return self.env.diag.error(node, message)

    def parse(self) -> IRModule:
        ev = Evaluator(self.env)
        _check_decorator(ev, self.cdef, "ir_module", "I.ir_module")
        for stmt in self.cdef.body:
            if isinstance(stmt, ast.FunctionDef):
                if stmt.name in self.defs:
                    raise self.err(stmt, f"function '{stmt.name}' is defined twice")
                self.defs[stmt.name] = stmt
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                self._module_call(ev, stmt.value)
            elif isinstance(stmt, ast.Pass) or (
                isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            ):
                continue
            else:
                raise self.err(stmt, f"unsupported statement in an @I.ir_module class: {type(stmt).__name__}")
        self.env.function_names = list(self.defs)
        for name in self.defs:
            self.function(name)
        return IRModule(
            {**{name: self.done[name] for name in self.defs}, **self.env.lifted}, self.global_infos, self.attrs
        )

    def _module_call(self, ev: Evaluator, call: ast.Call) -> None:
        head = ev.eval(call.func)
        if not (isinstance(head, Namespace) and head.kind == "ir"):
            raise self.err(call, "only I.module_global_infos(...) and I.module_attrs(...) may be called in a module class")
        fname = f"I.{head.dotted}"
        if head.dotted not in ("module_global_infos", "module_attrs"):
            raise self.err(call.func, f"{fname}(...) is not supported in a module class")
        a = ev.bind_args(call, fname, ["value"], 1)
        value = ev.eval(a["value"])
        if not isinstance(value, dict):
            raise self.err(a["value"], f"{fname} takes a dict literal")
        problem = plain_data_problem(value, fname)
        if problem is not None:
            raise self.err(a["value"], problem)
        if head.dotted == "module_attrs":
            self.attrs.update(value)
            return
        for key, item in value.items():
            if key == "vdevice":
                from ..ir.vdevice import VDevice

                items = list(item) if isinstance(item, (list, tuple)) else [item]
                if not all(isinstance(v, VDevice) for v in items):
                    raise self.err(a["value"], 'the "vdevice" list must hold I.vdevice(...) entries')
                self.env.vdevices = items
                self.global_infos["vdevice"] = items
            else:
                self.global_infos[key] = item

    def function(self, name: str) -> E.Function:
        if name in self.done:
            return self.done[name]
        fdef = self.defs[name]
        self.in_progress.append(name)
        try:
            func = FunctionParser(self.env, fdef).parse()
        finally:
            self.in_progress.pop()
        self.done[name] = func
        return func

    def global_var(self, name: str, node: ast.AST) -> E.GlobalVar:
        if name not in self.defs:
            raise self.err(
                node, f"the module has no function '{name}'" + did_you_mean(name, self.defs)
            )
        if name in self.in_progress:
            sinfo = FunctionParser(self.env, self.defs[name]).signature_sinfo()
        else:
            sinfo = self.function(name).struct_info
        return E.GlobalVar(name, struct_info=sinfo, span=self.env.diag.span(node))


def _check_decorator(ev: Evaluator, node: ast.ClassDef | ast.FunctionDef, attr: str, spelled: str) -> None:
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        try:
            head = ev.eval(target)
        except ParseError:
            continue
        if isinstance(head, Namespace) and head.dotted == attr:
            return
    raise ev.err(node, f"'{node.name}' must be decorated with @{spelled}")


def _module_names(env: ModuleEnv, tree: ast.Module) -> None:
    """Imports (namespace aliases) and module-level shape variable declarations."""
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                kind = NAMESPACE_OF_MODULE.get(alias.name)
                if kind is not None and (stmt.module or "").endswith("script"):
                    env.aliases[alias.asname or alias.name] = kind
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
            if not (isinstance(target, ast.Name) and isinstance(value, ast.Call)):
                continue
            func = value.func
            if isinstance(func, ast.Name) and func.id == "TypeVar":
                env.typevars[target.id] = "int64"
            elif (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and env.aliases.get(func.value.id) == "tir"
                and is_dtype(func.attr)
            ):
                env.typevars[target.id] = func.attr


def _allowed_top_level(stmt: ast.stmt) -> bool:
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.ClassDef, ast.FunctionDef, ast.Pass)):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return True
    return isinstance(stmt, ast.Assign)


def from_source(text: str, filename: str | None = None) -> IRModule:
    """Parses a script holding one ``@I.ir_module`` class (or one ``@R.function``)."""
    dedented, cols = _dedent(text)
    diag = Diagnostics(dedented, filename, 0, cols, text.splitlines())
    tree = _parse_python(dedented, diag)
    env = ModuleEnv(diag)
    _module_names(env, tree)
    classes = [s for s in tree.body if isinstance(s, ast.ClassDef)]
    funcs = [s for s in tree.body if isinstance(s, ast.FunctionDef)]
    for stmt in tree.body:
        if not _allowed_top_level(stmt):
            raise diag.error(stmt, f"unsupported top-level statement: {type(stmt).__name__}")
    if len(classes) + len(funcs) != 1:
        raise diag.error(
            (classes + funcs)[1] if len(classes) + len(funcs) > 1 else None,
            "the script must hold exactly one @I.ir_module class or one @R.function",
        )
    try:
        if classes:
            return ModuleParser(env, classes[0]).parse()
        env.function_names = [funcs[0].name]
        func = FunctionParser(env, funcs[0]).parse()
        return IRModule({funcs[0].name: func, **env.lifted})
    except ParseError:
        raise
    except HetvmError as e:  # pragma: no cover - every path converts; this is a safety net
        raise diag.error(None, str(e)) from None


def _from_snippet(
    source: str, filename: str | None, first_line: int, env_setup: dict[str, Any]
) -> tuple[ModuleEnv, ast.stmt]:
    dedented, cols = _dedent(source)
    original = None
    if filename is not None:
        try:
            with open(filename, encoding="utf-8") as fh:
                original = fh.read().splitlines()
        except OSError:
            original = None
    diag = Diagnostics(dedented, filename, first_line - 1, cols, original)
    if original is None:
        diag.lines = [""] * (first_line - 1) + source.splitlines()
    tree = _parse_python(dedented, diag)
    env = ModuleEnv(diag)
    env.aliases.update(env_setup.get("aliases", {}))
    env.typevars.update(env_setup.get("typevars", {}))
    stmt = next(s for s in tree.body if isinstance(s, (ast.ClassDef, ast.FunctionDef)))
    return env, stmt


def parse_class_source(
    source: str, filename: str | None = None, first_line: int = 1, **env_setup: Any
) -> IRModule:
    """Parses the source of a decorated class (``@I.ir_module``)."""
    env, stmt = _from_snippet(source, filename, first_line, env_setup)
    assert isinstance(stmt, ast.ClassDef)
    return ModuleParser(env, stmt).parse()


def parse_function_source(
    source: str, filename: str | None = None, first_line: int = 1, **env_setup: Any
) -> E.Function:
    """Parses the source of a decorated function (``@R.function``)."""
    env, stmt = _from_snippet(source, filename, first_line, env_setup)
    assert isinstance(stmt, ast.FunctionDef)
    func = FunctionParser(env, stmt).parse()
    if env.lifted:
        raise env.diag.error(
            stmt,
            f"function '{stmt.name}' has local functions, which hetvm lifts to module functions "
            f"({', '.join(env.lifted)}): write it inside an @I.ir_module class, or parse it "
            f"with from_source, which returns the module",
        )
    return func
