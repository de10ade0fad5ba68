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
4. Devices of several hosts: hosts first, then devices. The cuts above run over
   hosts, each value weighted by its time on the cross-host link (latency +
   bytes / bandwidth, per copy: one copy per (value, destination host), what
   the network carries), so a few small transfers can cost more than one
   larger; then each host's domains are cut over that host's devices by bytes
   (every copy within a host uses the one intra-host link). A cross-host copy
   is taken to cost more than any copy within a host, as the default links
   say (10 Gbit/s and 200 us against 16 GB/s and 10 us).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ...errors import DevicePlanError
from .devices import DeviceKey, DeviceTable, device_key, key_host, key_str
from .graph import Problem, Value, where
from .mincut import min_cut_hyper
from .stages import LinkCosts


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


def solve(problem: Problem, table: DeviceTable, links: LinkCosts | None = None) -> Placement:
    links = links or LinkCosts()
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
    cons = consumers(problem)
    hosts = list(dict.fromkeys(key_host(k) for k in keys if key_host(k) is not None))
    if len(hosts) < 2:
        bytes_weight = _bytes_weight(problem)
        order = [k for k in keys if k in wanted and k != default]
        placed = _cuts(problem, cons, roots, device, allowed, order, default, lambda k: k, bytes_weight)
        for r, d in placed.items():
            device[r] = d
            reason[r] = f"placed on {key_str(d)} by the minimum cut (fewest bytes copied)"
    else:
        _place_across_hosts(problem, cons, roots, device, reason, allowed, wanted, keys, default, hosts, links)
    for r in roots:
        if r not in device:
            ok = allowed.get(r, keys)
            device[r] = default if default in ok else ok[-1]
            reason[r] = f"the default device {key_str(device[r])}"
    return Placement(device, reason, problem)


def _bytes_weight(problem: Problem) -> Callable[[Value], int]:
    """A copy's weight within one link: its bytes (per loop iteration), ties to fewer copies."""
    unit = len(problem.values) + 1
    return lambda val: val.nbytes * problem.repeats.get(val.func, 1) * unit + 1


def _place_across_hosts(
    problem: Problem, cons: dict, roots: list[int], device: dict[int, DeviceKey], reason: dict[int, str],
    allowed: dict[int, list[DeviceKey]], wanted: set[DeviceKey], keys: list[DeviceKey], default: DeviceKey,
    hosts: list[str], links: LinkCosts,
) -> None:
    """Hosts first, then the devices of each host (see the module docstring)."""
    def host(k: DeviceKey) -> str:
        return key_host(k) or hosts[0]

    cross = links.cross_host

    def cross_weight(val: Value) -> int:  # picoseconds on the cross-host link, per copy
        return int(round(problem.repeats.get(val.func, 1) * cross.seconds(max(val.nbytes, 1)) * 1e12)) + 1

    fixed_h = {r: host(k) for r, k in device.items()}
    allowed_h: dict[int, list[str]] = {}
    for r, ok in allowed.items():
        hs = list(dict.fromkeys(host(k) for k in ok))
        if len(hs) == 1:
            fixed_h[r] = hs[0]
        else:
            allowed_h[r] = hs
    default_h = host(default)
    wanted_h = {host(k) for k in wanted} | set(fixed_h.values())
    order_h = [h for h in hosts if h in wanted_h and h != default_h]
    placed_h = _cuts(problem, cons, roots, fixed_h, allowed_h, order_h, default_h, host, cross_weight)
    host_of_root = {**fixed_h, **placed_h}
    for r, hs in allowed_h.items():
        host_of_root.setdefault(r, default_h if default_h in hs else hs[-1])
    bytes_weight = _bytes_weight(problem)
    for h in hosts:
        mine = [r for r in roots if host_of_root.get(r) == h]
        local_default = default if host(default) == h else next(k for k in keys if host(k) == h)
        fixed_d = {r: device[r] for r in mine if r in device}
        allowed_d: dict[int, list[DeviceKey]] = {}
        for r in mine:
            if r in device:
                continue
            ok = [k for k in allowed[r] if host(k) == h]
            if len(ok) == 1:
                fixed_d[r] = ok[0]
                device[r] = ok[0]
                reason[r] = f"placed on {h} by the minimum cut between hosts (cross-host link: " \
                            f"{cross.bandwidth:.3g} B/s, {cross.latency:.3g} s); only {key_str(ok[0])} there can run it"
            else:
                allowed_d[r] = ok
        wanted_d = {k for k in wanted if host(k) == h} | set(fixed_d.values())
        for ok in allowed_d.values():
            if local_default not in ok:
                wanted_d.update(ok)
        order_d = [k for k in keys if k in wanted_d and k != local_default]
        placed = _cuts(problem, cons, mine, fixed_d, allowed_d, order_d, local_default, lambda k: k, bytes_weight,
                       in_scope=lambda kind, what, h=h: (host_of_root.get(what) == h if kind == "dom" else host(what) == h))  # type: ignore[arg-type,misc]  # fmt: skip
        for r in allowed_d:
            d = placed.get(r)
            if d is None:
                d = local_default if local_default in allowed_d[r] else allowed_d[r][-1]
                why = f"the default device of {h}, {key_str(d)}"
            else:
                why = f"placed on {key_str(d)} by the minimum cut within {h} (fewest bytes copied)"
            device[r] = d
            moved = f"placed on {h} by the minimum cut between hosts" if r in placed_h else f"on {h}"
            reason[r] = f"{moved}; {why}"


def _cuts(
    problem: Problem,
    cons: dict[int, list[tuple[str, object]]],
    roots: list[int],
    fixed: dict[int, Any],
    allowed: dict[int, list[Any]],
    order: list[Any],
    default: Any,
    group: Callable[[DeviceKey], Any],
    weight: Callable[[Value], int],
    in_scope: Callable[[str, object], bool] | None = None,
) -> dict[int, Any]:
    """One minimum cut per place of ``order`` ("this place or a later one", the default
    last); a place is a device or a host (``group`` maps a device to it). Returns the
    free roots' places; a root no cut claimed is left out (the default's side)."""
    where_is = dict(fixed)
    out: dict[int, Any] = {}
    for i, d in enumerate(order):
        remaining = set(order[i:]) | {default}
        free = [r for r in roots if r not in where_is and r in allowed]
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
            kind: str, what: object, d: Any = d, index: dict[int, int] = index, s_node: int = s_node, t_node: int = t_node,
        ) -> int:
            if kind == "dev":
                return s_node if group(what) == d else t_node  # type: ignore[arg-type]
            if what in where_is:
                return s_node if where_is[what] == d else t_node  # type: ignore[index]
            return index[what]  # type: ignore[index]

        edges: list[tuple[list[int], int]] = []
        for v, lst in cons.items():
            val = problem.values[v]
            places = [("dom", problem.find(val.domain))] + list(lst)
            if in_scope is not None:
                places = [(k, c) for k, c in places if in_scope(k, c)]
            members = [node(k, c) for k, c in places]
            if len(set(members)) < 2 or set(members) == {s_node, t_node}:
                continue
            edges.append((members, weight(val)))
        side, _ = min_cut_hyper(len(index) + 2, src_fixed, sink_fixed, edges)
        for r in free:
            if side[index[r]]:
                where_is[r] = d
                out[r] = d
    return out
