"""Byte sizes of allocations, static or bounded by declared upper bounds.

A symbolic dimension can be planned only if every variable in it has an upper
bound declared in the function attribute ``tir_var_upper_bound``
(``{"n": 128}``); the arena is sized for the bound and the VM checks the
bound when the variable is bound at run time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import MemoryPlanError
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S

__all__ = [
    "SizeBound",
    "declared_lower_bounds",
    "declared_upper_bounds",
    "shape_nbytes",
    "symbolic_nbytes",
    "tensor_nbytes",
]

UPPER_BOUND_ATTR = "tir_var_upper_bound"
LOWER_BOUND_ATTR = "tir_var_lower_bound"


@dataclass(frozen=True)
class SizeBound:
    """``nbytes`` is the exact size when ``exact``, else an upper bound; None if
    unbounded, and then ``expr`` is the exact size as an expression (when the
    shape is known)."""

    nbytes: int | None
    exact: bool
    expr: P.PrimExpr | None = None


def declared_upper_bounds(func: E.Function, where: str = "") -> dict[str, int]:
    """The function's ``tir_var_upper_bound`` as name -> int, validated."""
    return _declared_bounds(func, UPPER_BOUND_ATTR, "upper", where)


def declared_lower_bounds(func: E.Function, where: str = "") -> dict[str, int]:
    """The function's ``tir_var_lower_bound`` as name -> int, validated (TVM's
    planner rejects a list-valued bound the same way)."""
    return _declared_bounds(func, LOWER_BOUND_ATTR, "lower", where)


def _declared_bounds(func: E.Function, attr: str, kind: str, where: str) -> dict[str, int]:
    raw: Any = func.attrs.get(attr) or {}
    if not isinstance(raw, Mapping):
        raise MemoryPlanError(
            f"function {where or '?'}: attribute {attr} must map variable names "
            f"to integers, got {type(raw).__name__}"
        )
    out: dict[str, int] = {}
    for name, value in raw.items():
        v = P.const_value(value) if isinstance(value, P.PrimExpr) else value
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise MemoryPlanError(
                f"function {where or '?'}: {kind} bound of '{name}' in {attr} must be "
                f"a non-negative integer, got {value!r}"
            )
        out[str(name)] = int(v)
    return out


def _dim_bound(dim: P.PrimExpr, bounds: Mapping[str, int]) -> int | None:
    c = P.const_value(dim)
    if c is not None:
        return max(c, 0)
    var_bounds = {v: (0, bounds[v.name]) for v in P.free_vars(dim) if v.name in bounds}
    hi = P.upper_bound(dim, var_bounds)
    return None if hi is None else max(hi, 0)


def shape_nbytes(shape: tuple[P.PrimExpr, ...], dtype: str, bounds: Mapping[str, int]) -> SizeBound:
    """Bytes of a dense tensor of ``shape``/``dtype`` (bounded when symbolic)."""
    total = S.dtype_nbytes(dtype)
    exact = True
    for dim in shape:
        if P.const_value(dim) is None:
            exact = False
        hi = _dim_bound(dim, bounds)
        if hi is None:
            return SizeBound(None, False, _product(shape, dtype))
        total *= hi
    return SizeBound(total, exact)


def _product(shape: tuple[P.PrimExpr, ...], dtype: str) -> P.PrimExpr:
    total: P.PrimExpr = P.IntImm(S.dtype_nbytes(dtype))
    for dim in shape:
        total = P.mul(total, dim)
    return P.simplify(total)


def tensor_nbytes(alloc: E.Call, bounds: Mapping[str, int]) -> SizeBound:
    """Size of a ``builtin.alloc_tensor(shape, dtype, dev)`` call."""
    shape_expr, dtype_imm = alloc.args[0], alloc.args[1]
    if not isinstance(shape_expr, E.ShapeExpr) or not isinstance(dtype_imm, E.DataTypeImm):
        return SizeBound(None, False)
    return shape_nbytes(shape_expr.values, dtype_imm.value, bounds)


def symbolic_nbytes(alloc: E.Call) -> P.PrimExpr | None:
    """Exact bytes of a ``builtin.alloc_tensor(shape, dtype, dev)`` call as an
    expression in its shape variables (None when the shape is not spelled out)."""
    shape_expr, dtype_imm = alloc.args[0], alloc.args[1]
    if not isinstance(shape_expr, E.ShapeExpr) or not isinstance(dtype_imm, E.DataTypeImm):
        return None
    return _product(shape_expr.values, dtype_imm.value)
