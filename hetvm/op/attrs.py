"""Constructor-side normalisation: Python literals to IR args and canonical attrs.

Constructors accept what TVM accepts (an int for a 2-tuple, a list for a
tuple, a str for a dtype ...). They normalise here so every call of an op
carries one form of each attr, which is what the kernels, the printer and the
round-trip rule rely on.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..errors import StructInfoError
from ..ir import expr as E
from ..ir import prim as P

__all__ = [
    "as_int",
    "int_tuple",
    "padding4",
    "axes_tuple",
    "opt_axes",
    "dtype_str",
    "as_shape_arg",
    "as_prim_arg",
    "as_string_arg",
    "as_dtype_arg",
    "as_tensor_arg",
    "as_tuple_arg",
]


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def as_int(op: str, name: str, value: Any) -> int:
    """An attr that must be a Python int."""
    if isinstance(value, P.IntImm):
        return int(value.value)
    if isinstance(value, E.PrimValue) and isinstance(value.value, P.IntImm):
        return int(value.value.value)
    if not _is_int(value):
        raise StructInfoError(f"op '{op}': attribute '{name}' must be an int, got {value!r}")
    return int(value)


def _int_or_prim(op: str, name: str, value: Any) -> int | P.PrimExpr:
    if isinstance(value, E.PrimValue) and not isinstance(value.value, (P.IntImm, P.FloatImm)):
        value = value.value
    if isinstance(value, P.PrimExpr) and not isinstance(value, P.IntImm):
        return value
    return as_int(op, name, value)


def _literal_items(value: Any) -> Any:
    """A Relax tuple of prim values written where an attr takes a sequence
    (TVM: ``R.strided_slice(x, (R.prim_value(0),), ...)``) as a Python tuple."""
    if isinstance(value, E.Tuple) and all(isinstance(f, E.PrimValue) for f in value.fields):
        return tuple(value.fields)
    return value


def int_tuple(op: str, name: str, value: Any, n: int) -> tuple[int, ...]:
    """``value`` as an ``n``-tuple of ints; an int or a 1-tuple is repeated."""
    if _is_int(value) or isinstance(value, P.IntImm):
        return (as_int(op, name, value),) * n
    if not isinstance(value, (tuple, list)):
        raise StructInfoError(
            f"op '{op}': attribute '{name}' must be an int or a tuple of {n} ints, got {value!r}"
        )
    items = tuple(as_int(op, name, v) for v in value)
    if len(items) == 1:
        return items * n
    if len(items) != n:
        raise StructInfoError(
            f"op '{op}': attribute '{name}' needs {n} values, got {len(items)}: {items}"
        )
    return items


def padding4(op: str, value: Any) -> tuple[int, int, int, int]:
    """Conv/pool padding as (top, left, bottom, right), from 1, 2 or 4 values."""
    if _is_int(value) or isinstance(value, P.IntImm):
        p = as_int(op, "padding", value)
        return (p, p, p, p)
    if not isinstance(value, (tuple, list)):
        raise StructInfoError(f"op '{op}': attribute 'padding' must be ints, got {value!r}")
    items = tuple(as_int(op, "padding", v) for v in value)
    if len(items) == 1:
        return items * 4  # type: ignore[return-value]
    if len(items) == 2:
        return (items[0], items[1], items[0], items[1])
    if len(items) == 4:
        return items  # type: ignore[return-value]
    raise StructInfoError(f"op '{op}': attribute 'padding' needs 1, 2 or 4 values, got {items}")


def axes_tuple(op: str, name: str, value: Any) -> tuple[int, ...]:
    """An axis or a sequence of axes as a tuple of ints (negative allowed)."""
    value = _literal_items(value)
    if _is_int(value) or isinstance(value, (P.IntImm, E.PrimValue)):
        return (as_int(op, name, value),)
    if not isinstance(value, (tuple, list)):
        raise StructInfoError(f"op '{op}': attribute '{name}' must be ints, got {value!r}")
    return tuple(as_int(op, name, v) for v in value)


def opt_axes(op: str, name: str, value: Any) -> tuple[int, ...] | None:
    """Like :func:`axes_tuple` but keeps None ("all axes")."""
    return None if value is None else axes_tuple(op, name, value)


def prim_tuple(op: str, name: str, value: Any) -> tuple[int | P.PrimExpr, ...]:
    """A tuple of ints or symbolic expressions (strided_slice begin/end)."""
    value = _literal_items(value)
    if not isinstance(value, (tuple, list)):
        value = (value,)
    return tuple(_int_or_prim(op, name, v) for v in value)


def dtype_str(value: Any) -> str | None:
    """A dtype as its string name; None, "" and "void" mean "unspecified"."""
    if value is None:
        return None
    if isinstance(value, E.DataTypeImm):
        value = value.value
    if isinstance(value, str):
        return None if value in ("", "void") else value
    if value is bool or value is np.bool_:
        return "bool"
    try:
        return str(np.dtype(value))
    except TypeError:
        raise StructInfoError(f"not a dtype: {value!r}") from None


# --------------------------------------------------------------------------
# IR arguments
# --------------------------------------------------------------------------


def as_shape_arg(op: str, value: Any, what: str = "shape") -> E.Expr:
    """A ShapeExpr from a tuple/list of ints or PrimExprs; IR passes through."""
    if isinstance(value, E.Expr):
        return value
    if isinstance(value, (tuple, list)):
        return E.ShapeExpr(tuple(P.as_prim(v) for v in value))
    if _is_int(value):
        return E.ShapeExpr((P.as_prim(int(value)),))
    raise StructInfoError(
        f"op '{op}': {what} must be a shape (tuple of ints or ShapeExpr), got {value!r}"
    )


def as_prim_arg(op: str, value: Any, what: str = "argument") -> E.Expr:
    """A PrimValue from an int/float/PrimExpr; IR passes through."""
    if isinstance(value, E.Expr):
        return value
    if isinstance(value, (int, float, np.integer, np.floating, P.PrimExpr)):
        if isinstance(value, np.integer):
            value = int(value)
        elif isinstance(value, np.floating):
            value = float(value)
        return E.PrimValue(value)
    raise StructInfoError(f"op '{op}': {what} must be an int or PrimValue, got {value!r}")


def as_string_arg(op: str, value: Any, what: str = "argument") -> E.Expr:
    """A StringImm from a str; IR passes through."""
    if isinstance(value, E.Expr):
        return value
    if isinstance(value, str):
        return E.StringImm(value)
    raise StructInfoError(f"op '{op}': {what} must be a string, got {value!r}")


def as_dtype_arg(op: str, value: Any, what: str = "dtype") -> E.Expr:
    """A DataTypeImm from a dtype name; IR passes through."""
    if isinstance(value, E.Expr):
        return value
    name = dtype_str(value)
    if name is None:
        raise StructInfoError(f"op '{op}': {what} must be a dtype, got {value!r}")
    return E.DataTypeImm(name)


def as_tensor_arg(op: str, value: Any, dtype: str | None = None) -> E.Expr:
    """A Constant from a Python/NumPy scalar or array; IR passes through."""
    if isinstance(value, E.Expr):
        return value
    try:
        arr = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as err:
        raise StructInfoError(f"op '{op}': cannot make a tensor from {value!r}: {err}") from None
    if arr.dtype == object:
        raise StructInfoError(f"op '{op}': cannot make a tensor from {value!r:.60}")
    return E.Constant(arr)


def as_tuple_arg(op: str, value: Any) -> E.Expr:
    """A Tuple from a list/tuple of expressions; an Expr passes through."""
    if isinstance(value, E.Expr):
        return value
    if isinstance(value, (tuple, list)):
        return E.Tuple(tuple(as_tensor_arg(op, v) for v in value))
    raise StructInfoError(f"op '{op}': expected a tuple of tensors, got {value!r}")


def seq_len_check(op: str, names: Sequence[str], values: Sequence[Sequence[Any]]) -> None:
    """All named sequences must have the same length."""
    lengths = [len(v) for v in values]
    if len(set(lengths)) > 1:
        desc = ", ".join(f"{n}={len(v)}" for n, v in zip(names, values))
        raise StructInfoError(f"op '{op}': attributes need the same length, got {desc}")
