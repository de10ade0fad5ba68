"""``hetvm plan``'s words about a symbolic plan: its formulas, what it left out
and why, and the capacity question (``--fit``).

Read from the executable's memory plan only (``exe.memory_plan()``); the
figures that depend on dims without bounds are formulas ("802,816 x batch"),
evaluated by ``hetvm.runtime.plan_queries``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..runtime.plan_queries import MAX_SEARCH, need_at, parse_bytes
from .console import Table, format_bytes

__all__ = ["formula_lines", "unplanned_lines", "fit_table"]

_LABELS = (("planned_bytes", "planned"), ("lower_bound_bytes", "lower bound"), ("predicted_peak_bytes", "predicted peak"))


def _device_name(names: Sequence[str], index: int) -> str:
    return names[index] if 0 <= index < len(names) else f"device {index}"


MAX_FORMULA = 160  # characters of one formula printed (the whole is in exe.memory_plan())


def _short(text: str) -> str:
    if len(text) <= MAX_FORMULA:
        return text
    terms = text.count(" x ") and text.startswith("max(")
    return text[:MAX_FORMULA].rsplit(" ", 1)[0] + " ..." + (")" if terms else "")


def formula_lines(exe: Any, names: Sequence[str], function: str = "main") -> list[str]:
    """One line per device whose plan is symbolic: planned bytes, lower bound
    and predicted peak as formulas in the free dims."""
    plan = (exe.memory_plan() or {}).get(function) or {}
    out = []
    for index, facts in sorted(plan.items()):
        formulas = facts.get("formulas") or {}
        if not formulas:
            continue
        parts = [f"{label} {_short(formulas[key])}" for key, label in _LABELS if key in formulas]
        dims = ", ".join(facts.get("free_dims") or ())
        out.append(f"plan:     {_device_name(names, index)} (bytes, in {dims}): " + "; ".join(parts))
    return out


def unplanned_lines(exe: Any, names: Sequence[str], function: str = "main") -> list[str]:
    """Per device, the tensors the static plan left out, grouped by reason."""
    plan = (exe.memory_plan() or {}).get(function) or {}
    out = []
    for index, facts in sorted(plan.items()):
        by_reason: dict[str, list[str]] = {}
        for u in facts.get("unplanned") or ():
            by_reason.setdefault(str(u.get("reason", "?")), []).append(str(u.get("name", "?")))
        for reason, tensors in sorted(by_reason.items()):
            shown = ", ".join(tensors[:4]) + (f" and {len(tensors) - 4} more" if len(tensors) > 4 else "")
            count = f"{len(tensors)} tensor{'s' if len(tensors) != 1 else ''}"
            out.append(f"outside:  {_device_name(names, index)}: {count} not in the plan ({reason}): {shown}")
    return out


def fit_table(
    exe: Any, capacity: str, dims: Mapping[str, int], names: Sequence[str], function: str = "main"
) -> Table:
    """The largest value of each free dim whose need fits ``capacity`` on each device."""
    cap = parse_bytes(capacity)
    found = exe.largest_dims_that_fit(cap, dims, function)
    fixed = ", ".join(f"{k}={v}" for k, v in dims.items())
    t = Table(
        f"Largest dims that fit {format_bytes(cap)}" + (f" ({fixed})" if fixed else ""),
        ["dim", "device", "largest", "needs there", "needs at +1"],
    )
    for name, per_device in found.items():
        others = {n: 1 for n in found if n != name} | dict(dims)
        for index, value in sorted(per_device.items()):
            dev = _device_name(names, index)
            if value is None:
                t.add(name, dev, "none (1 does not fit)", format_bytes(need_at(exe, {**others, name: 1}, function)[index]), "-")
            elif value >= MAX_SEARCH:
                t.add(name, dev, "no limit", "-", "-")
            else:
                here = need_at(exe, {**others, name: value}, function)[index]
                above = need_at(exe, {**others, name: value + 1}, function)[index]
                t.add(name, dev, f"{value:,}", format_bytes(here), format_bytes(above))
    t.legend = (
        "needs: the predicted peak of one call (the plan's arena, outputs and other allocations) "
        "plus the inputs on that device and every weight (counted on each device); other free "
        "dims at their --dim value, else 1"
    )
    return t
