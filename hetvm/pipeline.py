"""``hetvm.build``: the default compilation pipeline, from IRModule to executable.

Order matters and each step is a named pass (see ``default_pipeline``):
Normalize → FoldConstant → FoldScaleAxis → ReorderPoolConv → FuseConvEpilogue → FuseChannelAffine →
FusePoolEpilogue → PlanDevices → MatchJoinedShapes → FuseOps → MemoryAwareOrder → LegalizeOps → ToNonDataflow → SplitHosts → CallTIRRewrite → ConcatInPlace → InplaceElementwise → LoopCarriedInPlace → StaticPlanBlockMemory → LowerAllocTensor →
KillAfterLastUse, then VM codegen (or graph-executor codegen).
"""

from __future__ import annotations

import contextlib
import gc
from typing import Any, Sequence

from .analysis import called_ops
from .errors import HetvmError
from .ir.module import IRModule
from .ir.vdevice import VDevice, remote, runtime_kind
from .transform import (
    CallTIRRewrite,
    ConcatInPlace,
    DeadCodeElimination,
    FoldConstant,
    FoldScaleAxis,
    FuseChannelAffine,
    FuseConvEpilogue,
    FuseOps,
    FusePoolEpilogue,
    InplaceElementwise,
    KillAfterLastUse,
    LegalizeOps,
    LoopCarriedInPlace,
    LowerAllocTensor,
    MatchJoinedShapes,
    MemoryAwareOrder,
    Normalize,
    Pass,
    PassContext,
    PlanDevices,
    ReorderPoolConv,
    Sequential,
    SplitHosts,
    StaticPlanBlockMemory,
    ToNonDataflow,
)


def target_vdevice(target: str | dict | None) -> VDevice:
    """The vdevice a target string names (``"llvm"``, ``"sim"``, ``"cuda:1"``, ``"hostB/sim:0"``)."""
    if target is None:
        return VDevice("llvm", 0)
    if isinstance(target, dict):
        return VDevice(str(target.get("kind", "llvm")), int(target.get("device_id", 0)))
    host, sep, rest = str(target).rpartition("/")
    kind, _, idx = rest.partition(":")
    kind = kind.strip() or "llvm"
    if kind == "cpu":
        kind = "llvm"
    if sep:  # "hostB/sim:0": a device of another machine
        return remote(host.strip(), kind, int(idx) if idx else 0)
    return VDevice(kind, int(idx) if idx else 0)


def default_pipeline(
    default_vdevice: VDevice | None = None,
    host_vdevice: VDevice | None = None,
    plan_memory: bool = True,
    plan_devices_options: dict[str, Any] | None = None,
) -> Sequential:
    """The passes ``hetvm.build`` runs, as one Sequential (codegen excluded)."""
    passes: list[Pass] = [
        Normalize(),
        FoldConstant(),
        FoldScaleAxis(),
        ReorderPoolConv(),
        FuseConvEpilogue(),
        FuseChannelAffine(),
        FusePoolEpilogue(),
        DeadCodeElimination(),
        PlanDevices(
            default_vdevice=default_vdevice,
            host_vdevice=host_vdevice,
            **(plan_devices_options or {}),
        ),
        MatchJoinedShapes(),
        FuseOps(missing_kernels=(plan_devices_options or {}).get("missing_kernels")),
        MemoryAwareOrder(),
        LegalizeOps(),
        ToNonDataflow(),
        SplitHosts(),
        CallTIRRewrite(),
        DeadCodeElimination(),
        ConcatInPlace(),
        InplaceElementwise(),
        LoopCarriedInPlace(),
    ]
    if plan_memory:
        passes.append(StaticPlanBlockMemory())
    passes += [LowerAllocTensor(), KillAfterLastUse()]
    return Sequential(passes, name="hetvm.build")


def lower(
    mod: IRModule,
    target: str | dict | None = "llvm",
    target_host: str | dict | None = None,
    plan_memory: bool = True,
    instruments: Sequence[Any] = (),
    plan_devices_options: dict[str, Any] | None = None,
) -> IRModule:
    """Runs the build pipeline and returns the lowered module (before codegen)."""
    if not isinstance(mod, IRModule):
        raise HetvmError(f"hetvm.build expects an IRModule, got {type(mod).__name__}")
    default = target_vdevice(target)
    host = target_vdevice(target_host) if target_host is not None else None
    if host is None and runtime_kind(default.target) == "cpu":
        host = default
    pipeline = default_pipeline(default, host or VDevice("llvm", 0), plan_memory, plan_devices_options)
    current = PassContext.current()
    with _gc_paused():
        try:
            if instruments:
                with PassContext(
                    opt_level=current.opt_level,
                    config=current.config,
                    instruments=list(current.instruments) + list(instruments),
                    disabled_pass=current.disabled_pass,
                ):
                    return pipeline(mod)
            return pipeline(mod)
        finally:
            called_ops.forget()  # the passes' versions of each function can go


@contextlib.contextmanager
def _gc_paused():
    """Passes build many small immutable nodes and no reference cycles; Python's
    cyclic collector would rescan them all again and again (superlinear time on
    large modules), so it is paused while the pipeline runs."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def build(
    mod: IRModule,
    target: str | dict | None = "llvm",
    target_host: str | dict | None = None,
    executor: str = "vm",
    plan_memory: bool = True,
    instruments: Sequence[Any] = (),
    plan_devices_options: dict[str, Any] | None = None,
):
    """Compiles ``mod`` for ``target``; returns an Executable (or graph library).

    ``target`` names the default device for values no annotation places
    (``"llvm"``/``"cpu"`` both mean the host CPU, ``"sim"`` the simulated
    accelerator, ``"cuda"``); ``target_host`` runs host-only values. Where the
    module declares vdevices, the VM's device list maps to them in order.
    """
    if executor not in ("vm", "graph"):
        raise HetvmError(f"unknown executor '{executor}' (expected 'vm' or 'graph')")
    _check_has_entry(mod)
    with _gc_paused():
        return _build(mod, target, target_host, executor, plan_memory, instruments, plan_devices_options)


def _check_has_entry(mod: IRModule) -> None:
    """A private function is no entry point (it has no global symbol), and dead
    code elimination drops whatever no public function reaches: a module whose
    functions are all private would build an executable with nothing to call."""
    if not isinstance(mod, IRModule):
        return  # lower() reports what it got
    funcs = mod.functions
    if funcs and all(f.attrs.get("private") for f in funcs.values()):
        names = ", ".join(sorted(funcs))
        raise HetvmError(
            f"build: every function of the module is private ({names}), so the executable "
            f"would expose none; make the entry function public (@R.function without private=True)"
        )


def _build(mod, target, target_host, executor, plan_memory, instruments, plan_devices_options):  # noqa: ANN001, ANN202
    lowered = lower(mod, target, target_host, plan_memory, instruments, plan_devices_options)
    metadata = {k: v for k, v in lowered.attrs.items() if _json_like(v)}
    if "memory_plan" in lowered.attrs:
        from .analysis.memory_plan import memory_plan_report

        report = memory_plan_report(lowered)
        metadata["memory_plan_report"] = {
            fn: {str(dev): entry for dev, entry in devs.items()} for fn, devs in report.items()
        }
    from .backend.generated_kernels import compile_generated_kernels

    generated = compile_generated_kernels(lowered)
    if generated is not None:
        metadata["generated_kernels"] = generated
    if executor == "graph":
        from .backend.graph_codegen import graph_codegen

        return graph_codegen(lowered, metadata=metadata)
    from .backend.vm_codegen import vm_codegen

    return vm_codegen(lowered, metadata=metadata)


def _json_like(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_json_like(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_like(v) for k, v in value.items())
    return False
