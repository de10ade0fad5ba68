"""Declaring upper bounds of a function's shape variables (``batch <= 32``).

Why: a symbolic dim without a bound is planned with expressions (sizes known
per call); with a declared bound the static plan is sized once for the bound,
as TVM's ``tir_var_upper_bound``, and the VM refuses a larger value when the
variable is bound at run time. ``from_onnx(..., dim_bounds=...)`` and
``hetvm run/plan --bound NAME=N`` come here.
"""

from __future__ import annotations

from typing import Mapping

from ..analysis.free_vars import sinfo_symbolic_vars
from ..analysis.sizes import UPPER_BOUND_ATTR
from ..errors import MemoryPlanError
from ..ir import expr as E
from ..ir.module import IRModule

__all__ = ["declare_dim_bounds", "shape_var_names"]


def shape_var_names(func: E.Function) -> list[str]:
    """The symbolic dims the function's parameters mention, in order."""
    names: dict[str, None] = {}
    for p in func.params:
        for v in sinfo_symbolic_vars(p.struct_info):
            names.setdefault(v.name, None)
    return list(names)


def declare_dim_bounds(mod: IRModule, bounds: Mapping[str, int], function: str = "main") -> IRModule:
    """``mod`` with ``bounds`` (name -> largest value) merged into the
    function's ``tir_var_upper_bound``; a name the function has no dim of, or
    a bound below 1, is an error naming it."""
    if not bounds:
        return mod
    if function not in mod:
        raise MemoryPlanError(f"dim bounds: the module has no function '{function}'")
    func = mod[function]
    known = shape_var_names(func)
    unknown = sorted(set(bounds) - set(known))
    if unknown:
        raise MemoryPlanError(
            f"dim bounds: '{function}' has no symbolic dim {', '.join(repr(u) for u in unknown)}; "
            f"its dims are {', '.join(known) if known else '(none: every shape is static)'}"
        )
    for name, value in bounds.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise MemoryPlanError(f"dim bounds: the bound of '{name}' must be an integer >= 1, got {value!r}")
    merged = dict(func.attrs.get(UPPER_BOUND_ATTR) or {})
    merged.update({k: int(v) for k, v in bounds.items()})
    return mod.with_function(function, E.replace(func, attrs=func.attrs.with_(**{UPPER_BOUND_ATTR: merged})))
