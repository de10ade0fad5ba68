"""Read-only facts about IR: well-formedness, free variables, who reads what, the
value and liveness analyses, the memory plan's report and checks. Analyses
import no pass (tests/analysis/test_layers.py)."""

from .free_vars import (
    all_vars,
    bound_vars,
    definable_symbolic_vars,
    free_symbolic_vars,
    free_vars,
    sinfo_symbolic_vars,
)
from .liveness import Liveness, analyze_liveness
from .memory_plan import check_no_overlap, memory_plan_report
from .reads import collect_uses, reads
from .values import FunctionValues, analyze_values
from .well_formed import check_well_formed, well_formed

__all__ = [
    "FunctionValues",
    "Liveness",
    "all_vars",
    "analyze_liveness",
    "analyze_values",
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
