"""Serialised symbolic shapes: validation, evaluation, and binding at a call.

A dimension is an int or a list ``[op, ...]`` (see :mod:`.bytecode`). Binding
follows Relax: the first plain ``["var", n]`` occurrence binds ``n``, later
ones check it, and compound dimensions are checked once every parameter is
bound. Errors name the parameter, the dimension, what was expected and what
was given.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ..errors import HetvmRuntimeError
from .bytecode import PRIM_OPS, BytecodeError

__all__ = [
    "validate_prim",
    "validate_shape",
    "eval_prim",
    "prim_to_str",
    "compile_prim",
    "ShapeBinder",
]

_PY_OPS = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "floormod": "%"}
# comparisons give a bool (0 or 1 where an integer is expected), as TVM's tir.EQ ...
_COMPARE_OPS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_COMPARE_FN = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}  # fmt: skip
MAX_DEPTH = 64


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def validate_prim(e: Any, where: str, depth: int = 0, allow_float: bool = False) -> None:
    """Raises BytecodeError unless ``e`` is a well-formed serialised PrimExpr."""
    if depth > MAX_DEPTH:
        raise BytecodeError(f"{where}: symbolic expression nested too deeply")
    if _is_int(e) or (allow_float and isinstance(e, float)):
        return
    if isinstance(e, list) and e:
        if e[0] == "var" and len(e) == 2 and isinstance(e[1], str) and e[1]:
            return
        if e[0] in PRIM_OPS and len(e) == 3:
            validate_prim(e[1], where, depth + 1)
            validate_prim(e[2], where, depth + 1)
            return
    raise BytecodeError(f"{where}: bad symbolic expression {e!r}")


def validate_shape(shape: Any, where: str) -> None:
    if not isinstance(shape, list):
        raise BytecodeError(f"{where}: a shape must be a list, got {shape!r}")
    for d in shape:
        validate_prim(d, where)


def eval_prim(e: Any, env: Mapping[str, int]) -> int:
    """The value of ``e`` under ``env``; an unbound variable is an error."""
    if not isinstance(e, list):
        return e
    op = e[0]
    if op == "var":
        try:
            return env[e[1]]
        except KeyError:
            raise HetvmRuntimeError(f"symbolic variable '{e[1]}' is not bound") from None
    a, b = eval_prim(e[1], env), eval_prim(e[2], env)
    if op in _COMPARE_FN:
        return bool(_COMPARE_FN[op](a, b))
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op in ("floordiv", "floormod"):
        if b == 0:
            raise HetvmRuntimeError(f"division by zero evaluating {prim_to_str(e)}")
        return a // b if op == "floordiv" else a % b
    if op == "min":
        return min(a, b)
    return max(a, b)


def prim_to_str(e: Any) -> str:
    if not isinstance(e, list):
        return str(e)
    if e[0] == "var":
        return e[1]
    if e[0] in _PY_OPS or e[0] in _COMPARE_OPS:
        sym = _PY_OPS.get(e[0]) or _COMPARE_OPS[e[0]]
        return f"({prim_to_str(e[1])} {sym} {prim_to_str(e[2])})"
    return f"{e[0]}({prim_to_str(e[1])}, {prim_to_str(e[2])})"


def compile_prim(e: Any, name_of: Callable[[Any], str], env: str = "E") -> str:
    """Python source computing ``e``; variable names go through ``name_of``
    (which returns a generated identifier), so no bytecode text enters source."""
    if not isinstance(e, list):
        return str(int(e)) if _is_int(e) else name_of(e)
    op = e[0]
    if op == "var":
        return f"{env}[{name_of(e[1])}]"
    a, b = compile_prim(e[1], name_of, env), compile_prim(e[2], name_of, env)
    if op in _PY_OPS:
        return f"({a} {_PY_OPS[op]} {b})"
    if op in _COMPARE_OPS:
        return f"({a} {_COMPARE_OPS[op]} {b})"
    if op not in ("min", "max"):
        raise BytecodeError(f"bad symbolic operator {op!r}")
    return f"{op}({a}, {b})"


def _fmt_shape(shape: Any) -> str:
    return "(" + ", ".join(prim_to_str(d) for d in shape) + ")"


def _suffix(shape: Any) -> str:
    return f" (shape {_fmt_shape(shape[0])}, given {tuple(shape[1])})" if shape else ""


class ShapeBinder:
    """Binds and checks symbolic variables for one function call."""

    def __init__(self, env: dict, sym_bounds: Mapping[str, Any], func: str) -> None:
        self.env = env
        self.bounds = sym_bounds
        self.func = func
        self._deferred: list[tuple[str, int, Any, int]] = []
        #: tensors a call's raw parameters were read from (values.param_checker): held
        #: as long as the binder, the length of the call
        self.keep: list[Any] = []

    def bind_dims(self, what: str, pattern: list, given: tuple) -> None:
        if len(pattern) != len(given):
            raise HetvmRuntimeError(
                f"{what} of function '{self.func}': expected {len(pattern)} dimension(s) "
                f"{_fmt_shape(pattern)}, given {len(given)}: {tuple(given)}"
            )
        for i, (p, g) in enumerate(zip(pattern, given)):
            g = int(g)
            if p.__class__ is int and p == g:  # a static dimension that matches: most of them
                continue
            self.bind_value(f"{what} dimension {i}", p, g, shape=(pattern, given))

    def bind_value(self, what: str, p: Any, g: Any, shape: Any = None) -> None:
        """Checks ``g`` against ``p`` (binding a variable); runs on every call, so
        the error text (``shape`` is for it) is made only for an error."""
        if not isinstance(p, list):
            if p != g:
                raise HetvmRuntimeError(
                    f"{what} of function '{self.func}': expected {p}, given {g}{_suffix(shape)}"
                )
            return
        if p[0] == "var":
            name = p[1]
            if name in self.env:
                if self.env[name] != g:
                    raise HetvmRuntimeError(
                        f"{what} of function '{self.func}': expected {name} = {self.env[name]} "
                        f"(bound earlier), given {g}{_suffix(shape)}"
                    )
            else:
                self.env[name] = g
                self._check_bound(name, g, what)
            return
        self._deferred.append((what, 0, p, g))

    def finish(self) -> None:
        """Checks compound dimensions once every variable is bound."""
        for what, _, p, g in self._deferred:
            try:
                want = eval_prim(p, self.env)
            except HetvmRuntimeError as exc:
                raise HetvmRuntimeError(
                    f"{what} of function '{self.func}': cannot check {prim_to_str(p)}: {exc}"
                ) from None
            if want != g:
                raise HetvmRuntimeError(
                    f"{what} of function '{self.func}': expected {prim_to_str(p)} = {want}, "
                    f"given {g}"
                )
        self._deferred.clear()

    def _check_bound(self, name: str, value: int, what: str) -> None:
        bound = self.bounds.get(name)
        if not bound:
            return
        lo, hi = bound[0], bound[1] if len(bound) > 1 else None
        if lo is not None and value < lo:
            raise HetvmRuntimeError(
                f"symbolic variable '{name}' of function '{self.func}' = {value} (from {what}) "
                f"is below its lower bound {lo}"
            )
        if hi is not None and value > hi:
            raise HetvmRuntimeError(
                f"symbolic variable '{name}' of function '{self.func}' = {value} (from {what}) "
                f"exceeds its upper bound {hi}"
            )
