"""Passes (one per file) and the pass infrastructure.

Each pass is usable alone: ``hetvm.transform.KillAfterLastUse()(mod)``.
"""

from .call_tir_rewrite import CallTIRRewrite
from .canonicalize_bindings import CanonicalizeBindings
from .concat_in_place import ConcatInPlace
from .dead_code_elimination import DeadCodeElimination
from .fold_constant import FoldConstant
from .fold_scale_axis import FoldScaleAxis
from .fuse_channel_affine import FuseChannelAffine
from .fuse_conv_epilogue import FuseConvEpilogue
from .fuse_ops import FuseOps
from .fuse_pool_epilogue import FusePoolEpilogue
from .inplace_elementwise import InplaceElementwise
from .kill_after_last_use import KillAfterLastUse
from .legalize_ops import LegalizeOps
from .loop_carried_in_place import LoopCarriedInPlace
from .lower_alloc_tensor import LowerAllocTensor
from .match_joined_shapes import MatchJoinedShapes
from .memory_aware_order import MemoryAwareOrder
from .normalize import Normalize
from .pass_infra import (
    BindingOrigin,
    FunctionPass,
    ModulePass,
    Pass,
    PassContext,
    PassInfo,
    PassInstrument,
    PassTimer,
    PrintIR,
    Sequential,
    function_pass,
    module_pass,
)
from .plan_devices import PlanDevices
from .reorder_pool_conv import ReorderPoolConv
from .split_hosts import SplitHosts
from .static_plan_block_memory import StaticPlanBlockMemory
from .to_non_dataflow import ToNonDataflow

__all__ = [
    "CallTIRRewrite",
    "ConcatInPlace",
    "InplaceElementwise",
    "LoopCarriedInPlace",
    "MemoryAwareOrder",
    "CanonicalizeBindings",
    "DeadCodeElimination",
    "FoldConstant",
    "FoldScaleAxis",
    "FuseChannelAffine",
    "FuseConvEpilogue",
    "FuseOps",
    "FusePoolEpilogue",
    "KillAfterLastUse",
    "LegalizeOps",
    "LowerAllocTensor",
    "MatchJoinedShapes",
    "Normalize",
    "ReorderPoolConv",
    "SplitHosts",
    "BindingOrigin",
    "FunctionPass",
    "ModulePass",
    "Pass",
    "PassContext",
    "PassInfo",
    "PassInstrument",
    "PassTimer",
    "PrintIR",
    "Sequential",
    "function_pass",
    "module_pass",
    "ToNonDataflow",
    "PlanDevices",
    "StaticPlanBlockMemory",
]
