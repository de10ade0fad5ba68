"""The memory plan of a multi-host program per host and device, and memory limits.

A device's need is the most any one of its host's parts plans on it (the
part's arena, or its predicted peak where that is exact; see
``Executable.memory_plan``) plus the values that stay on it between parts (kept
for a later part of the same host; counted all at once, an upper bound).
Parameters and constants are not in a part's plan and are not counted.
"""

from __future__ import annotations

from typing import Mapping

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


def memory_by_device(exe: Executable, function: str = "main") -> dict[str, dict]:
    """Per device (``"hostB/sim:0"``): ``need_bytes``, the part needing most, its bytes, kept bytes."""
    raw = (exe.metadata.get(PARTS_ATTR) or {}).get(function) or {}
    report = exe.metadata.get("memory_plan_report") or {}
    names = _device_names(exe)
    out: dict[str, dict] = {}
    for part in raw.get("parts", []):
        for index, facts in (report.get(part["function"]) or {}).items():
            name = names[int(index)] if 0 <= int(index) < len(names) else str(index)
            need = int(facts.get("planned_bytes") or 0)
            if facts.get("predicted_peak_exact") is True:
                need = max(need, int(facts.get("predicted_peak_bytes") or 0))
            entry = out.setdefault(name, {"part_bytes": 0, "part": None, "kept_bytes": 0, "parts": {}})
            entry["parts"][part["function"]] = need
            if need >= entry["part_bytes"]:
                entry["part_bytes"], entry["part"] = need, part["function"]
        for value in part.get("keep", []):
            dev = (part.get("devices") or {}).get(value)
            if dev is not None:
                entry = out.setdefault(dev, {"part_bytes": 0, "part": None, "kept_bytes": 0, "parts": {}})
                entry["kept_bytes"] += int((part.get("sizes") or {}).get(value, 0))
    for entry in out.values():
        entry["need_bytes"] = entry["part_bytes"] + entry["kept_bytes"]
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
            raise MemoryPlanError(
                f"the placement does not fit {device}: {entry['part']} plans {entry['part_bytes']} bytes there and "
                f"{entry['kept_bytes']} bytes stay there between parts, {entry['need_bytes']} bytes in all, "
                f"over its limit of {int(limit)} bytes (devices planned: {', '.join(known)})"
            )
