"""Which devices the plan actually uses, and why one is (nearly) idle.

A user who lists an accelerator first expects it to work. When a kernel it
lacks appears all through a model (softmax in every attention layer), the
cheapest plan by copied bytes is often to copy the input once and run
everything on the CPU: correct, but a surprise unless something says so.
:func:`usage_notes` counts the kernel calls each device runs in the lowered
program and, for a listed device that runs none or few, says what kept work
off it: kernels it lacks that the program needs, ``--place`` pins, or the
minimum cut.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from ..ir import expr as E
from .memory_view import is_view_builtin, program_layout
from .placement import DeviceSetup, device_name

__all__ = ["kernel_calls", "usage_notes", "NEARLY_UNUSED"]

#: a device running at most this share of the kernel calls is "nearly unused"
NEARLY_UNUSED = 0.2

_NOT_WORK = ("copy", "in place (views)")


def kernel_calls(lowered: Any, devices: Sequence[str]) -> dict[str, int]:
    """Kernel calls per device name in the lowered ``main`` (copies and views excluded)."""
    counts = {d: 0 for d in devices}
    for step in program_layout(lowered).steps:
        if step.op in _NOT_WORK or step.op.startswith(("memory.", "builtin.")) or is_view_builtin(
            "vm.builtin." + step.op
        ):
            continue
        if 0 <= step.device_index < len(devices):
            counts[devices[step.device_index]] += 1
    return counts


def _ops_of(mod: Any) -> Counter:
    func = mod.functions.get("main")
    ops: Counter = Counter()
    if isinstance(func, E.Function):
        for b in E.bindings_of(func.body.blocks):
            value = E.binding_value(b)
            if isinstance(value, E.Call) and isinstance(value.op, E.Op):
                ops[value.op.name] += 1
    return ops


def usage_notes(compiled: Any, pins: Sequence[str] = ()) -> list[str]:
    """One sentence per listed non-host device that runs no or few kernels."""
    setup: DeviceSetup = compiled.setup
    if not setup.heterogeneous:
        return []
    exe_devices = list(getattr(compiled.exe, "devices", None) or [])
    names = [f"{d['kind']}:{d['index']}" for d in exe_devices] or setup.names
    calls = kernel_calls(compiled.lowered, names)
    total = sum(calls.values())
    if total == 0:
        return []
    busiest = max(calls, key=lambda d: calls[d])
    notes = []
    for v in setup.vdevices:
        dev = device_name(v)
        if v.is_host or dev not in calls:
            continue
        n = calls[dev]
        if n > NEARLY_UNUSED * total:
            continue
        share = "runs no kernel" if n == 0 else f"runs only {n} of {total} kernel calls"
        notes.append(f"{dev} {share}: the device planner put the work on {busiest}, because "
                     f"{_why(compiled, dev, busiest, pins)}.")  # fmt: skip
    return notes


def _why(compiled: Any, dev: str, busiest: str, pins: Sequence[str]) -> str:
    missing = compiled.setup.missing_kernels.get(dev, set())
    ops = _ops_of(compiled.source)
    needed = sorted(op for op in missing if ops.get(op))
    if needed:
        uses = ", ".join(f"{op} ({ops[op]} call{'s' if ops[op] != 1 else ''})" for op in needed)
        return (f"{dev} has no kernel for {uses} and copying data to and from {busiest} around "
                f"each would move more bytes than running everything there (fewest bytes copied wins); "
                f"give {dev} those kernels, or pin ops to it with --place, to use it")
    pinned = [p for p in pins if not p.endswith(f"={dev}")]
    if pinned:
        return f"--place {', '.join(pinned)} pins work elsewhere and its neighbours follow to save copies"
    return f"running there copies fewer bytes (the minimum cut); pin ops with --place to use {dev}"
