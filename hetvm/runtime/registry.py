"""Global functions: user code that ``R.call_packed("name", ...)`` reaches."""

from __future__ import annotations

import difflib
from typing import Callable, TypeVar

from ..errors import HetvmRuntimeError

__all__ = ["register_func", "get_global_func", "list_global_funcs", "remove_global_func"]

F = TypeVar("F", bound=Callable)
_FUNCS: dict[str, Callable] = {}


def register_func(name: str | Callable, f: Callable | None = None, override: bool = False):
    """Registers ``f`` under ``name``; without ``f`` it is a decorator.

    ``@register_func`` on its own uses the function's ``__name__``. Registering a
    taken name raises unless ``override=True``.
    """
    if callable(name) and f is None:
        return register_func(name.__name__, name, override)
    if not isinstance(name, str) or not name:
        raise HetvmRuntimeError(f"global function name must be a non-empty string, got {name!r}")

    def do(func: F) -> F:
        if not callable(func):
            raise HetvmRuntimeError(f"global function '{name}' must be callable, got {func!r}")
        if name in _FUNCS and not override:
            raise HetvmRuntimeError(
                f"global function '{name}' is already registered (pass override=True)"
            )
        _FUNCS[name] = func
        return func

    return do(f) if f is not None else do


def get_global_func(name: str, allow_missing: bool = False) -> Callable | None:
    """The function registered as ``name``; an error suggests close names."""
    func = _FUNCS.get(name)
    if func is None and not allow_missing:
        close = difflib.get_close_matches(name, list(_FUNCS), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise HetvmRuntimeError(f"no global function named '{name}'{hint}")
    return func


def list_global_funcs() -> list[str]:
    return sorted(_FUNCS)


def remove_global_func(name: str) -> None:
    """Unregisters ``name`` (missing names are ignored)."""
    _FUNCS.pop(name, None)
