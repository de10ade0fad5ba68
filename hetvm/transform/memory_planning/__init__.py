"""Memory planning building blocks: lifetimes, sizes, packing, peak simulation.

``StaticPlanBlockMemory`` (one directory up) composes them; the analysis
``hetvm.analysis.memory_plan`` reuses them to report on and check a plan.
"""

from .lifetimes import FunctionLifetimes, analyze_lifetimes, intervals_overlap, merge_intervals
from .packing import Buffer, PackResult, align_up, conflict_lists, max_live_bytes, pack
from .sizes import SizeBound, declared_upper_bounds, shape_nbytes, tensor_nbytes

__all__ = [
    "Buffer",
    "FunctionLifetimes",
    "PackResult",
    "SizeBound",
    "align_up",
    "analyze_lifetimes",
    "conflict_lists",
    "declared_upper_bounds",
    "intervals_overlap",
    "max_live_bytes",
    "merge_intervals",
    "pack",
    "shape_nbytes",
    "tensor_nbytes",
]
