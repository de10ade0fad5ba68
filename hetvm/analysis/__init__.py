"""Read-only facts about IR: well-formedness, free variables, uses."""

from .free_vars import (
    all_vars,
    bound_vars,
    definable_symbolic_vars,
    free_symbolic_vars,
    free_vars,
    sinfo_symbolic_vars,
)
from .memory_plan import check_no_overlap, memory_plan_report
from .reads import collect_uses, reads
from .well_formed import check_well_formed, well_formed

__all__ = [
    "all_vars",
    "check_no_overlap",
    "memory_plan_report",
    "bound_vars",
    "check_well_formed",
    "collect_uses",
    "reads",
    "definable_symbolic_vars",
    "free_symbolic_vars",
    "free_vars",
    "sinfo_symbolic_vars",
    "well_formed",
]
