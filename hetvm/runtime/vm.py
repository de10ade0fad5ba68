"""The virtual machine: runs an Executable's functions on real device memory.

``VirtualMachine(exe, devices=None, allocator="pooled", poison=False, trace=False,
pool_options=None, threads=None)`` maps the executable's devices to runtime
devices (in order), gives each device an allocator (``pool_options`` configure
a pooled one: ``max_pool_bytes``, ``idle_calls``, see :mod:`.pool`), and
compiles every function once (see :mod:`.codegen`). ``threads=n`` runs every
call under one budget of ``n`` threads shared by BLAS and the generated kernels
(see :mod:`.threads`); None leaves the process's thread pools as they are.
``vm["main"](*args)`` / ``vm.invoke("main", *args)`` take NumPy arrays or
NDArrays and return NDArrays (tuples as tuples).

A failing call raises a hetvm error naming function and pc (and kernel); all
memory the call allocated goes back to the allocators at once, for any
exception (a KeyboardInterrupt too), so the VM stays usable.

Threads: one VM may be called from several threads at once. Each outer call
gets its own :class:`~.vm_state.CallState` (registers are the generated
function's locals; the blocks it allocated, its trace), so a failing call
frees only its own blocks; what the calls share (:class:`~.vm_state.VMState`,
the allocators) is read-only or locked. See docs/DESIGN_NOTES.md, Runtime.
"""

from __future__ import annotations

import functools
import threading
import traceback
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import HetvmError, HetvmRuntimeError, MemoryPlanError
from .allocators import make_allocator
from .bytecode import Call, Executable, KernelCall, debug_label, format_instruction
from .codegen import CompiledFunction, TailCall, _registers_of, compile_function
from .device import Device, device, get_api
from .memory import ADOPTED, Allocator
from .ndarray import NDArray, ShapeTuple
from .shapes import ShapeBinder
from .threads import ThreadBudget, check_threads
from .values import param_checker
from .vm_state import CallState, VMState

__all__ = ["VirtualMachine"]


class VirtualMachine:
    """A register VM over one Executable; see the module docstring."""

    def __init__(
        self,
        exe: Executable,
        devices: Sequence[Device | str] | None = None,
        allocator: str = "pooled",
        poison: bool = False,
        trace: bool = False,
        pool_options: dict[str, Any] | None = None,
        threads: int | None = None,
    ) -> None:
        if not isinstance(exe, Executable):
            raise HetvmRuntimeError(f"VirtualMachine needs an Executable, got {type(exe).__name__}")
        exe.validate()
        self.exe = exe
        self.poison = bool(poison)
        self.trace = bool(trace)
        self.threads = check_threads(threads, "VirtualMachine(threads=...)")
        self._budget = ThreadBudget(self.threads) if self.threads is not None else None
        self.exe_devices = self._resolve_devices(devices)
        check_plan_fits(exe, self.exe_devices)
        self._allocators: dict[Device, Allocator] = {}
        for dev in self.exe_devices:
            if dev not in self._allocators:
                alloc = make_allocator(allocator, dev, poison=self.poison, **(pool_options or {}))
                if self.trace:  # events are the trace's (_tls.call is set only then)
                    alloc.on_event = self._alloc_event
                self._allocators[dev] = alloc
        self.allocators_by_index = [self._allocators[d] for d in self.exe_devices]
        self.state = VMState(exe, self.exe_devices, self.allocators_by_index, self._enter,
                             trace=self.trace, poison=self.poison)  # fmt: skip
        self._builtins = self.state.builtins
        self._last_events: list[dict] = []
        self._tls = threading.local()  # the trace's current call, per thread
        self._busy_lock = threading.Lock()
        self._busy = 0  # outer calls running now (any thread)
        self._compiled: dict[str, CompiledFunction] = {}
        self._by_file: dict[str, CompiledFunction] = {}
        for name, func in exe.functions.items():
            cf = compile_function(self.state, func)
            cf.checkers = [param_checker(info, f"parameter '{p}'", self.state.device_of, func.sym_bounds,
                                         raw=i in cf.raw_params)
                           for i, (info, p) in enumerate(zip(func.param_info, func.params))]  # fmt: skip
            self._compiled[name] = cf
            self._by_file[cf.filename] = cf

    # -- set-up --------------------------------------------------------------
    def _resolve_devices(self, devices: Sequence[Device | str] | None) -> list[Device]:
        wanted = self.exe.devices or [{"kind": "cpu", "index": 0}]
        if devices is None:
            try:
                return [device(d["kind"], d["index"]) for d in wanted]
            except HetvmError as exc:
                raise HetvmRuntimeError(f"executable device list: {exc}") from None
        if isinstance(devices, (Device, str)):
            devices = [devices]
        out = [d if isinstance(d, Device) else device(d) for d in devices]
        if len(out) != len(wanted):
            names = ", ".join(f"{d['kind']}:{d['index']}" for d in wanted)
            raise HetvmRuntimeError(
                f"the executable uses {len(wanted)} device(s) ({names}), "
                f"but {len(out)} were given"
            )
        return out

    # -- calling -------------------------------------------------------------
    def __getitem__(self, name: str) -> Callable[..., Any]:
        if name not in self._compiled:
            raise HetvmRuntimeError(self._no_function(name))
        return functools.partial(self.invoke, name)

    def _no_function(self, name: str) -> str:
        return f"the executable has no function '{name}' (has: {', '.join(self._compiled)})"

    def invoke(self, name: str, *args: Any) -> Any:
        """Runs function ``name``; NumPy inputs go to the parameters' devices.

        Safe to call from several threads at once (see the module docstring)."""
        if name not in self._compiled:
            raise HetvmRuntimeError(self._no_function(name))
        call = CallState(self.state)
        with self._busy_lock:
            if self._busy == 0:  # the VM was idle: the report covers from here
                for alloc in self._allocators.values():
                    alloc.begin_call()
            self._busy += 1
        outer_trace = getattr(self._tls, "call", None) if self.trace else None
        if self.trace:
            self._tls.call = call
        budget = self._budget
        token = budget.apply() if budget is not None else None
        try:
            # kernels give IEEE results (log(0) = -inf, 0/0 = nan) without NumPy's
            # warnings, as ONNX Runtime and TVM do: a model's masked rows are not errors
            with np.errstate(all="ignore"):
                out = self._enter(name, args, call, True)
        except BaseException as exc:
            # any exception, KeyboardInterrupt too: the call's blocks go back now,
            # not when the traceback (which holds its registers) is collected
            located = self._locate(exc) if isinstance(exc, Exception) else exc
            traceback.clear_frames(exc.__traceback__)
            call.free_all()
            if located is exc:
                raise
            raise located from exc
        finally:
            if budget is not None:
                budget.restore(token)
            with self._busy_lock:
                self._busy -= 1
            if self.trace:
                self._tls.call = outer_trace
                self._last_events = call.events
        return _owned(out)

    def _enter(self, name: str, args: tuple, call: CallState, convert: bool = False) -> Any:
        """Runs ``name`` inside ``call``; ``convert``: NumPy arguments become tensors
        (the outer call; a call between VM functions passes tensors).

        A function that calls another in tail position returns a ``TailCall``
        instead (see ``codegen.TailCall``); the call is made here, in a loop, after
        that frame has gone: a loop written as a tail-recursive function runs in
        constant stack and holds no iteration's registers but the values passed on."""
        while True:
            cf = self._compiled[name]
            func = cf.func
            if len(args) != len(func.params):
                raise HetvmRuntimeError(
                    f"function '{name}' takes {len(func.params)} argument(s) "
                    f"({', '.join(func.params)}), given {len(args)}"
                )
            env: dict[str, int] = {}
            binder = ShapeBinder(env, func.sym_bounds, name)
            values = [check(a, binder, convert) for a, check in zip(args, cf.checkers)]
            binder.finish()
            args = ()  # the frame's parameters are held by ``values`` alone
            out = cf.fn(call, env, *values)
            if out.__class__ is not TailCall:
                return out
            values = None  # type: ignore[assignment]  # this frame's parameters go now
            name, args, out = out.name, out.args, None
            convert = False

    # -- memory --------------------------------------------------------------
    def _alloc_event(self, kind: str, dev: Device, nbytes: int) -> None:
        call = getattr(self._tls, "call", None)
        if call is not None:
            call.event(kind, dev, nbytes)

    def memory_report(self) -> dict[str, dict]:
        """Per device: peak_bytes, bytes_in_use, pool_bytes, alloc_calls since the VM
        was last idle (the last call, when calls do not overlap), and the pool's
        make-up (see ``PooledAllocator.stats``)."""
        return {str(dev): alloc.stats() for dev, alloc in self._allocators.items()}

    @property
    def events(self) -> list[dict]:
        """The event trace of the last call to finish (``trace=True``):
        alloc/free/copy/kill."""
        return list(self._last_events)

    def allocator(self, dev: Device | str | int) -> Allocator:
        """The allocator of a device (a Device, "sim:1", or an executable index)."""
        if isinstance(dev, int):
            return self.allocators_by_index[dev]
        return self._allocators[dev if isinstance(dev, Device) else device(dev)]

    def release_pools(self) -> None:
        """Returns every pooled block to its device, and drops this thread's kernel
        scratch buffers (see ``hetvm.kernels.scratch``)."""
        from ..kernels import scratch

        for alloc in self._allocators.values():
            alloc.release_all()
        scratch.release()

    def source(self, name: str) -> str:
        """The generated Python source of a function (for debugging)."""
        return self._compiled[name].source

    # -- errors --------------------------------------------------------------
    def _locate(self, exc: Exception) -> Exception:
        """``exc`` with function/pc added, or a HetvmRuntimeError wrapping it."""
        frames = []
        tb = exc.__traceback__
        while tb is not None:
            cf = self._by_file.get(tb.tb_frame.f_code.co_filename)
            if cf is not None:
                frames.append((cf, cf.linemap.get(tb.tb_lineno), tb.tb_frame))
            tb = tb.tb_next
        if not frames or getattr(exc, "_hetvm_located", False):
            return exc
        cf, pc, frame = frames[-1]
        pc = getattr(exc, "_hetvm_pc", pc)  # a kernel of a segment (runtime/segments.py)
        local = _peek_locals(frame)
        ins = cf.func.instructions[pc] if pc is not None else None
        where = f"function '{cf.func.name}', pc {pc}"
        # the model's node first: that is what the user knows
        node = debug_label(cf.func.debug_info.get(pc)) if pc is not None else ""
        at = f" at {node}" if node else ""
        if ins is not None:
            where += f": {format_instruction(ins)}"
        chain = [f"'{c.func.name}' pc {p}" for c, p, _ in frames[:-1]]
        if chain:
            where += f" (called from {' <- '.join(reversed(chain))})"
        env = local.get("E")
        if isinstance(env, dict) and env:  # the sizes a shape came from
            where += " with " + ", ".join(f"{k} = {v}" for k, v in env.items())
        if isinstance(exc, HetvmError):
            if "function '" + cf.func.name + "', pc" not in str(exc):
                place = f"{node} in {where}" if node else f"in {where}"
                exc.args = (f"{exc.args[0] if exc.args else exc} [{place}]",) + exc.args[1:]
            exc._hetvm_located = True  # type: ignore[attr-defined]
            return exc
        empty = []
        if ins is not None:
            for r in _read_registers(ins):
                if local.get(f"r{r}", 0) is None:
                    empty.append(f"r{r}")
        if empty:
            what = f"register {', '.join(dict.fromkeys(empty))} is empty (killed or never set)"
        elif isinstance(ins, KernelCall):
            what = f"kernel '{ins.op}' on {self.exe_devices[ins.device]} failed"
        else:
            what = "instruction failed"
        out = HetvmRuntimeError(f"{what}{at} in {where}: {type(exc).__name__}: {exc}")
        out._hetvm_located = True  # type: ignore[attr-defined]
        return out

    def __repr__(self) -> str:
        devs = ", ".join(str(d) for d in self.exe_devices)
        return f"VirtualMachine(functions={list(self._compiled)}, devices=[{devs}])"


def check_plan_fits(exe: Executable, devices: Sequence[Device]) -> None:
    """Raises MemoryPlanError when a function's static memory plan alone needs more
    bytes on a device than its capacity (before anything runs).

    Needed is the planned arena, or the predicted peak where the plan says it is
    exact (arena, outputs and other fixed-size allocations of one call)."""
    report = exe.metadata.get("memory_plan_report")
    if not isinstance(report, dict):
        return
    for fn, per_device in report.items():
        if not isinstance(per_device, dict):
            continue
        for index, facts in per_device.items():
            try:
                i = int(index)
            except (TypeError, ValueError):
                continue
            if not 0 <= i < len(devices):
                continue
            dev = devices[i]
            capacity = get_api(dev).capacity
            if capacity is None or not isinstance(facts, dict):
                continue
            needed = _int_or_zero(facts.get("planned_bytes"))
            if facts.get("predicted_peak_exact") is True:
                needed = max(needed, _int_or_zero(facts.get("predicted_peak_bytes")))
            least = _int_or_zero(facts.get("least_bytes"))  # a symbolic plan at dims of 1
            if least > capacity:
                dims = ", ".join(f"{d}=1" for d in facts.get("free_dims") or ())
                raise MemoryPlanError(
                    f"the memory plan of function '{fn}' does not fit on {dev} at any size: even at "
                    f"{dims} it needs at least {least} bytes (lower bound "
                    f"{(facts.get('formulas') or {}).get('lower_bound_bytes', '?')}), the device's "
                    f"capacity is {capacity} bytes"
                )
            if needed > capacity:
                raise MemoryPlanError(
                    f"the memory plan of function '{fn}' does not fit on {dev}: it needs "
                    f"{needed} bytes, the device's capacity is {capacity} bytes"
                )


def _peek_locals(frame: Any) -> dict:
    """A copy of a frame's locals. The frame's own snapshot (``f_locals``) is
    emptied: it would keep the registers' tensors, and their memory, alive for
    as long as the exception lives."""
    snapshot = frame.f_locals
    out = dict(snapshot)
    snapshot.clear()
    return out


def _read_registers(ins: Any) -> list[int]:
    """The registers an instruction reads (a failing call never set its ``dst``)."""
    if isinstance(ins, Call):
        return [v for t, v in ins.args if t == "r"]
    return _registers_of(ins)


def _int_or_zero(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _owned(value: Any) -> Any:
    """Returned tensors belong to the caller: no later Kill may release them, and
    one over an input's own bytes (a NumPy argument read in place,
    ``ndarray.adopt``) is replaced by a copy, so results never alias the
    caller's arrays."""
    if value.__class__ is NDArray:
        if value.allocation.chunk is ADOPTED:
            value = value.copyto(value.device)
        value._killable = False
        return value
    if isinstance(value, tuple) and not isinstance(value, ShapeTuple):
        return tuple(_owned(v) for v in value)
    return value
