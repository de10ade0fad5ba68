"""What the memory-aware passes did, in words, for ``hetvm plan``: the order
MemoryAwareOrder chose (and how many bytes it saves in its simulation) and how
many element-wise ops InplaceElementwise runs in their dying input."""

from __future__ import annotations

from typing import Any, Mapping

from .console import format_bytes


def order_lines(metadata: Mapping[str, Any] | None, function: str = "main") -> list[str]:
    """One line about the order of ``function``, one about in-place ops if any."""
    metadata = metadata or {}
    lines = []
    order = (metadata.get("memory_order") or {}).get(function)
    if order:
        given, chosen = int(order["given_peak_bytes"]), int(order["chosen_peak_bytes"])
        names = ", ".join(sorted(order.get("heuristics", {})))
        saved = (given - chosen) / given if given else 0.0
        line = (
            f"order: memory-aware ({names}): at most {format_bytes(chosen)} live instead of "
            f"{format_bytes(given)} in the given order (-{saved:.1%}, op-level simulation of the plan)"
        )
        before, after = order.get("planner_bound_given"), order.get("planner_bound_chosen")
        if before is not None and after is not None:
            line += f"; the planner's bound {format_bytes(before)} -> {format_bytes(after)}"
        lines.append(line)
    else:
        lines.append("order: the given order (no topological order of its blocks holds fewer bytes)")
    inplace = (metadata.get("inplace_elementwise") or {}).get(function)
    if inplace:
        lines.append(f"in place: {inplace} element-wise op(s) write into an input that dies there")
    return lines
