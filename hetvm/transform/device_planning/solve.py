"""Placing every domain on a device: pins, kernel restrictions, then minimum cuts.

1. A pinned domain goes where its pin says; a pin on a device that lacks the
   op's kernel, or an op with a kernel on no declared device, is a
   :class:`DevicePlanError` naming the value and both constraints.
2. A domain allowed on one device only (missing kernels) goes there.
3. Free domains are placed so the fewest bytes cross devices (then the fewest
   copies). Every value is a hyperedge over its own domain and the domains and
   devices that read it: it costs ``bytes`` once per other device it is read on,
   the exact cost of "one copy per (value, destination)". With two candidate
   devices one minimum s-t cut (non-default device vs default) is optimal and
   ties go to the default device. With more, one cut per non-default device in
   declaration order ("this device or a later one"), then the default: exact for
   two devices, a good heuristic beyond.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import DevicePlanError
from .devices import DeviceKey, DeviceTable, device_key, key_str
from .graph import Problem, where
from .mincut import min_cut_hyper


@dataclass
class Placement:
    """Device and reason of each domain root; ``device_of_value`` for values."""

    device: dict[int, DeviceKey]
    reason: dict[int, str]
    problem: Problem

    def domain_device(self, dom: int) -> DeviceKey:
        return self.device[self.problem.find(dom)]

    def value_device(self, v: int) -> DeviceKey:
        return self.domain_device(self.problem.values[v].domain)

    def domain_reason(self, dom: int) -> str:
        return self.reason[self.problem.find(dom)]


def consumers(problem: Problem) -> dict[int, list[tuple[str, object]]]:
    """Per value, the places that read it: ("dom", root) or ("dev", key), in order."""
    out: dict[int, list[tuple[str, object]]] = {}
    seen: set[tuple[int, tuple[str, object]]] = set()
    for d in problem.demands:
        node: tuple[str, object] = ("dom", problem.find(d.domain)) if d.domain is not None else ("dev", d.device)
        if (d.value, node) not in seen:
            seen.add((d.value, node))
            out.setdefault(d.value, []).append(node)
    return out


def plan_cost(problem: Problem, device_of_root: dict[int, DeviceKey]) -> tuple[int, int]:
    """(bytes copied, copies) of an assignment under the one-copy-per-destination model."""
    total_bytes = copies = 0
    for v, cons in consumers(problem).items():
        here = device_of_root[problem.find(problem.values[v].domain)]
        dsts = {device_of_root[c] if k == "dom" else c for k, c in cons}  # type: ignore[index]
        dsts.discard(here)
        copies += len(dsts)
        total_bytes += len(dsts) * problem.values[v].nbytes
    return total_bytes, copies


def solve(problem: Problem, table: DeviceTable) -> Placement:
    keys = table.keys
    default = device_key(table.default)
    roots = sorted({problem.find(d.id) for d in problem.domains})
    for dom in problem.domains:  # kernel restrictions of op domains, merged on roots
        if dom.op is None:
            continue
        root = problem.domains[problem.find(dom.id)]
        for k in keys:
            why = table.lacks_kernel(dom.op, k)
            if why is not None:
                root.excluded.setdefault(k, why)
    device: dict[int, DeviceKey] = {}
    reason: dict[int, str] = {}
    allowed: dict[int, list[DeviceKey]] = {}
    for r in roots:
        dom = problem.domains[r]
        ok = [k for k in keys if k not in dom.excluded]
        if dom.pin is not None:
            if dom.pin.device in dom.excluded:
                raise DevicePlanError(
                    f"value {dom.label}{where(dom.span)} cannot satisfy both constraints: "
                    f"{dom.pin.describe()}, but {dom.excluded[dom.pin.device]}"
                )
            device[r] = dom.pin.device
            reason[r] = dom.pin.describe()
            continue
        if not ok:
            whys = "; ".join(dom.excluded.values())
            raise DevicePlanError(f"{dom.label}{where(dom.span)} has a kernel on no declared device ({whys})")
        if len(ok) == 1:
            device[r] = ok[0]
            reason[r] = "; ".join(dom.excluded.values()) or f"only {key_str(ok[0])} is allowed"
            continue
        allowed[r] = ok
    # candidate devices: those something is fixed to, plus the default, in declaration order
    wanted = set(device.values()) | {d.device for d in problem.demands if d.device is not None}
    for ok in allowed.values():
        if default not in ok:
            wanted.update(ok)
    order = [k for k in keys if k in wanted and k != default]
    cons = consumers(problem)
    weight_unit = len(problem.values) + 1
    for i, d in enumerate(order):
        remaining = set(order[i:]) | {default}
        free = [r for r in roots if r not in device]
        index: dict[int, int] = {}
        src_fixed: set[int] = set()
        sink_fixed: set[int] = set()
        for r in free:
            ok = allowed[r]
            index[r] = len(index)
            reach = [k for k in ok if k in remaining]
            if d not in ok:
                sink_fixed.add(index[r])
            elif reach == [d]:
                src_fixed.add(index[r])
        s_node, t_node = len(index), len(index) + 1
        src_fixed.add(s_node)
        sink_fixed.add(t_node)

        def node(
            kind: str, what: object, d: DeviceKey = d, index: dict[int, int] = index,
            s_node: int = s_node, t_node: int = t_node,
        ) -> int:
            if kind == "dev":
                return s_node if what == d else t_node
            r = what  # a domain root
            if r in device:
                return s_node if device[r] == d else t_node  # type: ignore[index]
            return index[r]  # type: ignore[index]

        edges: list[tuple[list[int], int]] = []
        for v, lst in cons.items():
            val = problem.values[v]
            members = [node("dom", problem.find(val.domain))] + [node(k, c) for k, c in lst]
            if len(set(members)) < 2 or set(members) == {s_node, t_node}:
                continue
            repeats = problem.repeats.get(val.func, 1)  # a copy inside a loop runs per iteration
            edges.append((members, val.nbytes * repeats * weight_unit + 1))
        side, _ = min_cut_hyper(len(index) + 2, src_fixed, sink_fixed, edges)
        for r in free:
            if side[index[r]]:
                device[r] = d
                reason[r] = f"placed on {key_str(d)} by the minimum cut (fewest bytes copied)"
    for r in roots:
        if r not in device:
            ok = allowed.get(r, keys)
            device[r] = default if default in ok else ok[-1]
            reason[r] = f"the default device {key_str(device[r])}"
    return Placement(device, reason, problem)
