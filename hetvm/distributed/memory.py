"""The memory plan of a multi-host program per host and device, and memory limits.

A device's need is what a worker holds there at its fullest:

* **weights**: the constants its host's parts use on it (the VM materialises a
  constant once per device and keeps it);
* the most any one of its host's parts needs at once there: the part's plan
  (its arena, or its predicted peak where that is exact; see
  ``Executable.memory_plan``) plus the part's **parameters** on that device
  (the function's inputs, weights passed as inputs included, and the values
  received from other hosts);
* the values that stay on it between parts (kept for a later part of the same
  host; counted all at once, an upper bound).

A parameter of a symbolic shape counts at its declared upper bound, or not at
all without one (the need is then a lower bound, and says so).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..errors import MemoryPlanError
from ..runtime.bytecode import Executable
from ..transform.split_hosts import PARTS_ATTR

__all__ = ["memory_by_device", "check_memory_limits"]


def _device_names(exe: Executable) -> list[str]:
    out = []
    for d in exe.devices:
        name = f"{d['kind']}:{d['index']}"
        out.append(f"{d['host']}/{name}" if d.get("host") else name)
    return out


def _tensor_bytes(info: Any, bounds: Mapping[str, int]) -> tuple[int, bool]:
    """Bytes of a param_info entry (tuples summed) and whether every dim was known."""
    if not isinstance(info, dict):
        return 0, True
    if info.get("kind") == "tuple":
        total, exact = 0, True
        for f in info.get("fields", []):
            n, ok = _tensor_bytes(f, bounds)
            total, exact = total + n, exact and ok
        return total, exact
    if info.get("kind") != "tensor" or info.get("shape") is None or info.get("dtype") is None:
        return 0, True
    n = int(np.dtype(info["dtype"] if info["dtype"] != "bool" else np.bool_).itemsize)
    for d in info["shape"]:
        if isinstance(d, int):
            n *= d
        elif isinstance(d, list) and d[:1] == ["var"] and str(d[1]) in bounds:
            n *= int(bounds[str(d[1])])
        else:
            return 0, False
    return n, True


def _param_bytes(exe: Executable, part: Mapping[str, Any], names: list[str]) -> tuple[dict[str, int], bool]:
    """Per device name: bytes of the part's inputs and received values (not the kept ones)."""
    fn = exe.functions.get(part["function"])
    out: dict[str, int] = {}
    exact = True
    if fn is None:
        return out, exact
    bounds = {str(k): int(v) for k, v in (getattr(fn, "sym_bounds", None) or {}).items()}
    for (kind, _), info in zip(part.get("inputs", []), fn.param_info):
        if kind == "local":
            continue  # a kept value: counted under kept_bytes
        n, ok = _tensor_bytes(info, bounds)
        exact = exact and ok
        dev = info.get("device") if isinstance(info, dict) else None
        if n and dev is not None and 0 <= int(dev) < len(names):
            out[names[int(dev)]] = out.get(names[int(dev)], 0) + n
    return out, exact


def _constants_on(exe: Executable, function: str) -> set[tuple[int, int]]:
    """(constant index, device index) pairs a function materialises: a kernel's
    constant on the kernel's device, a constant copied to a device there."""
    fn = exe.functions.get(function)
    out: set[tuple[int, int]] = set()
    for ins in getattr(fn, "instructions", None) or []:
        args = getattr(ins, "args", ())
        device = getattr(ins, "device", None)
        if device is not None:  # a KernelCall
            out.update((int(a[1]), int(device)) for a in args if a[0] == "c")
        elif getattr(ins, "func", "").endswith("copy_to") and len(args) >= 2 and args[0][0] == "c" and args[1][0] == "i":
            out.add((int(args[0][1]), int(args[1][1])))
    return out


def _new_entry() -> dict:
    return {"part_bytes": 0, "part": None, "param_bytes": 0, "kept_bytes": 0, "weight_bytes": 0,
            "parts": {}, "exact": True}  # fmt: skip


def memory_by_device(exe: Executable, function: str = "main") -> dict[str, dict]:
    """Per device (``"hostB/sim:0"``): ``need_bytes`` and its terms: ``weight_bytes``
    (constants), the part needing most (``part``) with its plan (``part_bytes``) and
    parameters there (``param_bytes``), and ``kept_bytes``; ``exact`` is False where a
    parameter of unknown size was left out."""
    raw = (exe.metadata.get(PARTS_ATTR) or {}).get(function) or {}
    report = exe.metadata.get("memory_plan_report") or {}
    names = _device_names(exe)
    out: dict[str, dict] = {}
    weights: dict[str, set[int]] = {}
    for part in raw.get("parts", []):
        params, exact = _param_bytes(exe, part, names)
        plans: dict[str, int] = {}
        for index, facts in (report.get(part["function"]) or {}).items():
            name = names[int(index)] if 0 <= int(index) < len(names) else str(index)
            need = int(facts.get("planned_bytes") or 0)
            if facts.get("predicted_peak_exact") is True:
                need = max(need, int(facts.get("predicted_peak_bytes") or 0))
            plans[name] = need
        for name in set(plans) | set(params):
            entry = out.setdefault(name, _new_entry())
            need = plans.get(name, 0) + params.get(name, 0)
            entry["parts"][part["function"]] = need
            entry["exact"] = entry["exact"] and exact
            if need >= entry["part_bytes"] + entry["param_bytes"]:
                entry["part_bytes"], entry["param_bytes"] = plans.get(name, 0), params.get(name, 0)
                entry["part"] = part["function"]
        for const, dev in _constants_on(exe, part["function"]):
            if 0 <= dev < len(names):
                weights.setdefault(names[dev], set()).add(const)
        for value in part.get("keep", []):
            dev = (part.get("devices") or {}).get(value)
            if dev is not None:
                entry = out.setdefault(dev, _new_entry())
                entry["kept_bytes"] += int((part.get("sizes") or {}).get(value, 0))
    for name, consts in weights.items():
        out.setdefault(name, _new_entry())["weight_bytes"] = sum(int(exe.constants[c].nbytes) for c in consts)
    for entry in out.values():
        entry["need_bytes"] = entry["weight_bytes"] + entry["part_bytes"] + entry["param_bytes"] + entry["kept_bytes"]
    return out


def check_memory_limits(exe: Executable, limits: Mapping[str, int], function: str = "main") -> None:
    """Refuses (MemoryPlanError, with the figures) a placement that needs more than a limit."""
    plan = memory_by_device(exe, function)
    known = sorted(plan)
    for device, limit in limits.items():
        if device not in plan:
            if device not in _device_names(exe):
                raise MemoryPlanError(f"memory limit for {device}: no such device (devices: {', '.join(_device_names(exe))})")
            continue
        entry = plan[device]
        if entry["need_bytes"] > int(limit):
            part = entry["part"] or "no part"
            raise MemoryPlanError(
                f"the placement does not fit {device}: {entry['weight_bytes']} bytes of weights (constants), "
                f"{part} plans {entry['part_bytes']} bytes of activations there and takes {entry['param_bytes']} "
                f"bytes of parameters (inputs and received values), and {entry['kept_bytes']} bytes stay there "
                f"between parts: {entry['need_bytes']} bytes in all"
                + ("" if entry["exact"] else " (at least: a parameter of unknown size is not counted)")
                + f", over its limit of {int(limit)} bytes (devices planned: {', '.join(known)})"
            )
