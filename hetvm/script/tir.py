"""The ``T`` namespace, for shape variables only: ``n = T.int64()``,
``T.min`` / ``T.max`` in shapes, ``T.int64`` as a Prim struct info.

Write ``from hetvm.script import tir as T``. Inside a decorated function the
names are only read, never called; at module level ``n = T.int64()`` runs and
gives a marker the decorators read as a shape-variable declaration.
"""

from __future__ import annotations

import re
from typing import Any

from ._decorate import SymbolicVarDecl

_DTYPE = re.compile(r"^(u?int\d+|float\d+|bfloat16|bool)$")


def _dtype_ctor(dtype: str):
    def ctor(*args: Any) -> Any:
        return SymbolicVarDecl(dtype) if not args else args[0]

    ctor.__name__ = dtype
    ctor.__doc__ = f"``T.{dtype}()`` declares a shape variable; ``T.{dtype}(v)`` is a value."
    return ctor


int64 = _dtype_ctor("int64")
int32 = _dtype_ctor("int32")
float32 = _dtype_ctor("float32")
float64 = _dtype_ctor("float64")
bool = _dtype_ctor("bool")  # noqa: A001 - TVM's name


def min(a: Any, b: Any) -> Any:  # noqa: A001 - TVM's name
    """Placeholder for ``T.min`` in shapes (read by the parser, never run)."""
    return None


def max(a: Any, b: Any) -> Any:  # noqa: A001 - TVM's name
    """Placeholder for ``T.max`` in shapes (read by the parser, never run)."""
    return None


def __getattr__(name: str) -> Any:
    if _DTYPE.match(name):
        return _dtype_ctor(name)
    raise AttributeError(f"hetvm.script.tir has no name '{name}' (only shape variables are supported)")
