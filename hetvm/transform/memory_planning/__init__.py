"""Memory planning building blocks: the planner's view of lifetimes, and packing
(the constant packer is ``hetvm.arena_packing``: the VM re-packs symbolic
arenas with it at call time).

``StaticPlanBlockMemory`` (one directory up) composes them. The facts they
rest on are analyses (``hetvm.analysis``: values, liveness, sizes, the peak
simulation), which the report and the overlap check read too.
"""

from ...analysis.sizes import SizeBound, declared_upper_bounds, shape_nbytes, tensor_nbytes
from ...arena_packing import (
    Buffer,
    PackResult,
    align_up,
    conflict_lists,
    max_live_bytes,
    pack,
)
from .lifetimes import FunctionLifetimes, analyze_lifetimes, intervals_overlap, merge_intervals

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
