"""Shared by the ``@I.ir_module`` and ``@R.function`` decorators: find the
decorated object's source and the shape-variable names and namespace aliases
visible where it was defined (read from the caller's namespace, not run)."""

from __future__ import annotations

import inspect
import typing
from types import FrameType, ModuleType
from typing import Any

from ..errors import ParseError
from ._env import NAMESPACE_OF_MODULE


class SymbolicVarDecl:
    """What ``T.int64()`` returns when Python runs it at module level: a marker
    the decorators read as a shape-variable declaration."""

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"T.{self.dtype}()"


def source_of(obj: Any) -> tuple[str, str | None, int]:
    """Source text, file name and first line of a class or function."""
    try:
        lines, first = inspect.getsourcelines(obj)
    except (OSError, TypeError) as e:
        raise ParseError(
            f"cannot read the source of '{getattr(obj, '__name__', obj)}' ({e}); "
            "use hetvm.script.from_source(text) instead"
        ) from None
    return "".join(lines), inspect.getsourcefile(obj), first


def caller_names(frame: FrameType | None) -> dict[str, Any]:
    """Aliases of the script namespaces and shape-variable names at the caller."""
    aliases: dict[str, str] = {}
    typevars: dict[str, str] = {}
    if frame is not None:
        scope = {**frame.f_globals, **frame.f_locals}
        for name, value in scope.items():
            if isinstance(value, typing.TypeVar):
                typevars[name] = "int64"
            elif isinstance(value, SymbolicVarDecl):
                typevars[name] = value.dtype
            elif isinstance(value, ModuleType):
                short = value.__name__.rsplit(".", 1)[-1]
                package = value.__name__.rsplit(".", 1)[0]
                if short in NAMESPACE_OF_MODULE and package.endswith("script"):
                    aliases[name] = NAMESPACE_OF_MODULE[short]
    return {"aliases": aliases, "typevars": typevars}


def in_class_body(func: Any) -> bool:
    """True for a method being defined in a class body (its qualname says so)."""
    parts = getattr(func, "__qualname__", "").split(".")
    return len(parts) >= 2 and parts[-2] != "<locals>"
