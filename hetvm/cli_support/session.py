"""Compiling and running a placed program, keeping what the reports need.

One :class:`Compiled` holds the lowered module (for graphs and arena layouts),
the executable, the device-planner's explain report when available, and the
pass timings. :func:`run` executes it with tracing on, so the memory report and
the live-bytes plot come from the same run.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import HetvmError
from ..ir.module import IRModule
from ..transform.pass_infra import PassInstrument
from .placement import DeviceSetup, declare, device_name, pin_params

__all__ = ["Compiled", "RunResult", "compile_program", "run", "configure_runtime"]


class _Recorder(PassInstrument):
    """Keeps the module after each pass (the last one is the lowered module)."""

    def __init__(self, on_pass: Callable[[str], None] | None = None) -> None:
        self.last: IRModule | None = None
        self.after_plan: IRModule | None = None
        self.times: list[tuple[str, float]] = []
        self._t0 = 0.0
        self.on_pass = on_pass

    def run_before_pass(self, mod: IRModule, info: Any) -> None:
        self._t0 = time.perf_counter()

    def run_after_pass(self, mod: IRModule, info: Any) -> None:
        self.times.append((info.name, time.perf_counter() - self._t0))
        self.last = mod
        if info.name == "PlanDevices":
            self.after_plan = mod
        if self.on_pass is not None:
            self.on_pass(info.name)


@dataclass
class Compiled:
    """A compiled program and what the reports read from its compilation."""

    source: IRModule
    lowered: IRModule
    planned: IRModule | None
    exe: Any
    setup: DeviceSetup
    executor: str
    explain: Any = None
    pass_times: list[tuple[str, float]] = field(default_factory=list)
    #: the model's names for the variables of the lowered / planned module (naming.py)
    names: dict[str, Any] = field(default_factory=dict)
    planned_names: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunResult:
    outputs: list[np.ndarray]
    seconds: float
    memory: dict[str, dict]
    events: list[dict]
    devices: list[str]
    memory_note: str = ""  # how to read ``memory`` where it is not the VM's
    #: seconds Numba spent compiling (or loading) during the calls: the segments
    #: compile at their first call (runtime/segments.py)
    compile_seconds: float = 0.0


def _plan_options(setup: DeviceSetup) -> dict[str, Any]:
    """PlanDevices options the installed planner accepts (missing kernels, stages)."""
    if not setup.missing_kernels and not setup.stages:
        return {}
    try:
        from ..transform.plan_devices import PlanDevices  # type: ignore[import-not-found]
    except ImportError:
        return {}
    params = inspect.signature(PlanDevices).parameters
    out: dict[str, Any] = {}
    if setup.missing_kernels and "missing_kernels" in params:
        out["missing_kernels"] = {k: sorted(v) for k, v in setup.missing_kernels.items()}
    if setup.stages and "stages" in params:
        out["stages"] = list(setup.stages)
    return out


def configure_runtime(setup: DeviceSetup) -> list[Any]:
    """Runtime devices in the executable's order, sim devices told their gaps."""
    from ..runtime.device import device

    out = []
    for v in setup.vdevices:
        name = device_name(v)
        if v.kind == "sim":
            out.append(device("sim", v.vdevice_id, missing_kernels=sorted(setup.missing_kernels.get(name, ()))))
        else:
            out.append(device(v.kind, v.vdevice_id))
    return out


def copy_report(exe: Any, planned: IRModule | None, setup: DeviceSetup) -> Any:
    """The planner's copies with their reasons (``device_copies`` in the build's
    metadata), else the copies read from the planned module."""
    meta = getattr(exe, "metadata", None)
    if isinstance(meta, dict) and isinstance(meta.get("device_copies"), list):
        return {"copies": meta["device_copies"]}
    if planned is not None and isinstance(planned.attrs.get("device_copies"), list):
        return {"copies": planned.attrs["device_copies"]}
    if planned is not None:
        from .copies import copies_from_module

        return copies_from_module(planned, device_name(setup.default))
    return None


def compile_program(
    mod: IRModule,
    setup: DeviceSetup,
    executor: str = "vm",
    on_pass: Callable[[str], None] | None = None,
    want_explain: bool = True,
    plan_memory: bool = True,
    origins: Mapping[str, Any] | None = None,
) -> Compiled:
    """Declares the devices, builds for them and keeps the lowered module.

    ``origins`` (variable -> :class:`~.naming.Origin` of the source) are followed
    through the passes, so reports can name lowered values as the model does."""
    import hetvm

    from .naming import NameTracker

    placed = mod
    if setup.heterogeneous or setup.missing_kernels:
        placed = pin_params(declare(mod, setup), setup.default)
    recorder = _Recorder(on_pass)
    tracker = NameTracker(mod, origins or {})
    target = "llvm" if setup.default.is_host else device_name(setup.default)
    exe = hetvm.build(
        placed,
        target=target,
        target_host="llvm",
        executor=executor,
        plan_memory=plan_memory,
        instruments=[recorder, tracker],
        plan_devices_options=_plan_options(setup) or None,
    )
    if recorder.last is None:  # pragma: no cover - the pipeline always runs passes
        raise HetvmError("the build ran no passes")
    report = copy_report(exe, recorder.after_plan, setup) if want_explain else None
    return Compiled(placed, recorder.last, recorder.after_plan, exe, setup, executor,
                    report, recorder.times, tracker.lowered, tracker.at("PlanDevices"))  # fmt: skip


def flatten_outputs(value: Any) -> list[Any]:
    """A VM result (nested tuples of tensors) as a flat list."""
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in flatten_outputs(v)]
    return [value]


def to_numpy(value: Any) -> np.ndarray:
    """A result as a host NumPy array (copied off an accelerator first)."""
    if hasattr(value, "numpy"):
        dev = getattr(value, "device", None)
        if dev is not None and getattr(dev, "kind", "cpu") != "cpu":
            from ..runtime.device import cpu

            value = value.copyto(cpu(0))
        return value.numpy()
    return np.asarray(value)


def run(compiled: Compiled, args: Sequence[np.ndarray], trace: bool = True, repeat: int = 1,
        threads: int | None = None) -> RunResult:  # fmt: skip
    """Runs ``main`` (VM or graph executor); times the last of ``repeat`` calls;
    ``threads``: the thread budget of BLAS and generated kernels (None: as the
    process has it)."""
    devices = configure_runtime(compiled.setup)
    if compiled.executor == "graph":
        from ..runtime.threads import ThreadBudget

        if threads is None:
            return _run_graph(compiled, args, devices, repeat)
        with ThreadBudget(threads):
            return _run_graph(compiled, args, devices, repeat)
    from ..kernels.codegen_numba import compile_stats
    from ..runtime.vm import VirtualMachine

    vm = VirtualMachine(compiled.exe, devices=devices, trace=trace, threads=threads)
    out = None
    seconds = 0.0
    compiling = compile_stats()["compile_seconds"]
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        out = vm["main"](*args)
        seconds = time.perf_counter() - t0
    compiling = compile_stats()["compile_seconds"] - compiling
    outputs = [to_numpy(v) for v in flatten_outputs(out)]
    return RunResult(outputs, seconds, vm.memory_report(), vm.events, [str(d) for d in devices],
                     compile_seconds=compiling)


def _run_graph(compiled: Compiled, args: Sequence[np.ndarray], devices: list[Any], repeat: int) -> RunResult:
    from .. import graph_executor  # type: ignore[attr-defined]

    graph, lib, params = _graph_parts(compiled.exe)
    gm = graph_executor.create(graph, lib, devices)
    if params:
        gm.set_input(**params)
    names = [p.name_hint for p in compiled.source["main"].params]
    for name, arr in zip(names, args):
        gm.set_input(name, arr)
    seconds = 0.0
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        gm.run()
        seconds = time.perf_counter() - t0
    outputs = [to_numpy(gm.get_output(i)) for i in range(gm.get_num_outputs())]
    # the graph holds its params and inputs in storages of its own; the VM counts
    # neither, so the figure set beside the plan leaves them out
    memory = {
        dev: {**r, "peak_bytes": r["peak_bytes"] - r.get("params_bytes", 0) - r.get("inputs_bytes", 0)}
        for dev, r in gm.memory_report().items()
    }
    note = ("graph executor: measured peak = the storages it holds for its lifetime, "
            "params and inputs left out (a graph has no kills)")  # fmt: skip
    return RunResult(outputs, seconds, memory, [], [str(d) for d in devices], note)


def _graph_parts(lib: Any) -> tuple[Any, Any, Any]:
    """(graph json, kernel library, params) of a graph-executor build."""
    if isinstance(lib, tuple):
        return (tuple(lib) + (None, None, None))[:3]
    graph = lib.get_graph_json() if hasattr(lib, "get_graph_json") else getattr(lib, "graph", None)
    kernels = lib.get_lib() if hasattr(lib, "get_lib") else lib
    params = lib.get_params() if hasattr(lib, "get_params") else getattr(lib, "params", None)
    return graph, kernels, params
