"""Plain values the evaluator passes around: dialect namespaces, markers and
``R.match_cast`` forms, plus small helpers shared by the evaluator's parts."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from ..ir import expr as E
from ..ir import struct_info as S

SINFO_NAMES = ("Tensor", "Shape", "Tuple", "Object", "Any", "Prim", "Callable")
STATEMENT_FORMS = ("dataflow", "output", "func_attr", "function")
VALUE_FORMS = ("shape", "prim_value", "str", "dtype", "const", "tuple", "match_cast", "ExternFunc", "TupleGetItem")
_DTYPE = re.compile(r"^(u?int\d+|float\d+|bfloat16|bool)$")


@dataclass(frozen=True)
class Namespace:
    """``R``, ``R.nn``, ``T``, ``I`` ... : a dotted name inside a dialect."""

    kind: str  # "relax" | "ir" | "tir"
    path: tuple[str, ...] = ()

    def child(self, name: str) -> Namespace:
        return Namespace(self.kind, self.path + (name,))

    @property
    def dotted(self) -> str:
        return ".".join(self.path)

    def __str__(self) -> str:
        prefix = {"relax": "R", "ir": "I", "tir": "T"}[self.kind]
        return ".".join((prefix, *self.path))


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


MODULE_REF = _Marker("the module")
FLOAT = _Marker("float")


@dataclass
class MatchCastForm:
    """``R.match_cast(value, sinfo)``: only valid as the value of a binding."""

    value: E.Expr
    sinfo: S.StructInfo


def is_dtype(name: str) -> bool:
    return bool(_DTYPE.match(name))



def positional(ev: Any, node: ast.Call) -> list[ast.expr]:
    for a in node.args:
        if isinstance(a, ast.Starred):
            raise ev.err(a, "unsupported Python syntax here: starred argument")
    return list(node.args)


def is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None



def describe(value: Any) -> str:
    if isinstance(value, Namespace):
        return str(value)
    if isinstance(value, E.Var):
        return f"variable '{value.name_hint}'"
    if isinstance(value, E.Expr):
        return type(value).__name__
    if isinstance(value, S.StructInfo):
        return S.describe(value)
    if isinstance(value, MatchCastForm):
        return "R.match_cast(...)"
    if isinstance(value, _Marker):
        return value.name
    return repr(value)


def plain_data_problem(value: Any, where: str = "", depth: int = 0) -> str | None:
    """Why ``value`` is not attribute data the printer can write back (None if it is):
    None, bools, numbers, strings, vdevices, prim exprs, struct info, lists and dicts."""
    from ..ir import prim as P
    from ..ir.vdevice import VDevice

    if depth > 64:
        return f"{where or 'the value'} is nested too deeply"
    if value is None or isinstance(value, (bool, int, float, str, VDevice, P.PrimExpr, S.StructInfo)):
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            problem = plain_data_problem(v, f"{where}[{k!r}]", depth + 1)
            if problem is not None:
                return problem
        return None
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            problem = plain_data_problem(v, f"{where}[{i}]", depth + 1)
            if problem is not None:
                return problem
        return None
    return f"{where or 'the value'} is {type(value).__name__}, not plain data (numbers, strings, lists, dicts)"
