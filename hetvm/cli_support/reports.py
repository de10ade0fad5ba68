"""Report tables for the commands: outputs, copies and memory.

Each function turns facts (arrays, the planner's explain report, the memory
plan, the VM's memory report) into a :class:`~.console.Table`, so commands
only choose which tables to print and tests can read the rows.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import numpy as np

from .console import Table, format_bytes, short_bytes

__all__ = ["outputs_table", "copies_table", "transfers_table", "memory_table", "memory_rows", "plan_of"]


def outputs_table(outputs: Sequence[np.ndarray], names: Sequence[str] | None = None) -> Table:
    """Shape, dtype and value statistics of each output."""
    t = Table("Outputs", ["output", "shape", "dtype", "min", "max", "mean", "finite"])
    for i, arr in enumerate(outputs):
        name = names[i] if names and i < len(names) else f"output {i}"
        a = np.asarray(arr)
        if a.size and a.dtype.kind in "fiub":
            af = a.astype(np.float64)
            stats = [f"{af.min():.4g}", f"{af.max():.4g}", f"{af.mean():.4g}"]
            finite = "yes" if np.isfinite(af).all() else "NO"
        else:
            stats, finite = ["-", "-", "-"], "-"
        t.add(name, tuple(a.shape), a.dtype, *stats, finite)
    return t


def _field(entry: Any, *names: str, default: Any = None) -> Any:
    for n in names:
        if isinstance(entry, Mapping) and n in entry:
            return entry[n]
        if hasattr(entry, n):
            return getattr(entry, n)
    return default


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple, set, frozenset)):
        return ", ".join(_text(v) for v in value) or "-"
    return str(value)


def copies_of(report: Any) -> list[Any]:
    """The copy entries of an explain report (object or dict)."""
    if report is None:
        return []
    copies = _field(report, "copies", default=None)
    return list(copies) if copies is not None else []


def _named(text: str, names: Mapping[str, Any] | None) -> str:
    """``text`` with each quoted IR value ('probs1') in the model's name ('probs')."""
    if not names:
        return text
    from .naming import display

    return re.sub(r"'([^']+)'", lambda m: f"'{display(m.group(1), names)}'" if m.group(1) in names else m.group(0),
                  text)  # fmt: skip


def copies_table(report: Any, names: Mapping[str, Any] | None = None) -> Table:
    """Every copy the device planner inserted, with totals; reasons as numbered notes.

    ``names`` (IR value -> :class:`~.naming.Origin`, of the planned module) puts
    the model's tensor and node names in place of the IR's."""
    from .naming import display

    names = names or {}
    t = Table("Device copies", ["#", "value", "made by", "from", "to", "bytes", "read by"])
    totals: dict[tuple[str, str], list[int]] = {}
    for i, c in enumerate(copies_of(report), 1):
        src = _text(_field(c, "src", "source", "src_device", "from_device"))
        dst = _text(_field(c, "dst", "destination", "dst_device", "to_device"))
        nbytes = _field(c, "bytes", "nbytes", "num_bytes")
        value = _text(_field(c, "value", "name", "var"))
        origin = names.get(value)
        consumers = _field(c, "consumers", "users") or []
        readers = [display(str(v), names) for v in consumers] if isinstance(consumers, (list, tuple)) else [str(consumers)]
        t.add(
            i,
            display(value, names),
            origin.node_text() if origin is not None else "-",
            src,
            dst,
            format_bytes(nbytes) if isinstance(nbytes, int) else _text(nbytes),
            ", ".join(dict.fromkeys(readers)) or "-",
        )
        reason = _named(_text(_field(c, "reason", "why")), names)
        inserted = _text(_field(c, "pass_name", "inserted_by", "pass", default="PlanDevices"))
        if inserted == "<input>":
            reason += " (a to_vdevice written in the program itself)"
        elif inserted not in ("PlanDevices", "-"):
            reason += f" (inserted by {inserted})"
        t.notes.append(f"{display(value, names)} to {dst}: {reason}")
        entry = totals.setdefault((src, dst), [0, 0])
        entry[0] += 1
        entry[1] += nbytes if isinstance(nbytes, int) else 0
    if totals:
        t.footer = "totals: " + "; ".join(
            f"{s} -> {d}: {n} cop{'y' if n == 1 else 'ies'}, {format_bytes(b)}"
            for (s, d), (n, b) in sorted(totals.items())
        )
    elif report is None:
        t.footer = "(a single device: no copies)"
    return t


def transfers_table(exe: Any, names: Mapping[str, Any] | None = None, function: str = "main") -> Table | None:
    """What crosses the network per request, from the build's host schedule
    (``SplitHosts``): one row per (value, destination host), as the runtime sends
    it. The device copies count a value once per destination device; a value read
    by two devices of a host is one transfer here. None without named hosts."""
    from .naming import display

    meta = getattr(exe, "metadata", None)
    schedule = ((meta or {}).get("host_parts") or {}).get(function) if isinstance(meta, dict) else None
    if not schedule:
        return None
    names = names or {}
    t = Table("Cross-host transfers (per request)", ["#", "value", "from", "to", "bytes", "read on"])
    total = 0
    for i, tr in enumerate(schedule.get("transfers", []), 1):
        nbytes = int(tr["bytes"])
        total += nbytes
        t.add(i, display(str(tr["value"]), names), tr["src"], tr["dst"], format_bytes(nbytes),
              ", ".join(tr.get("devices") or []) or "-")  # fmt: skip
        t.notes.append(f"{display(str(tr['value']), names)} to {tr['dst']}: {_named(str(tr.get('reason', '-')), names)}")
    n = len(schedule.get("transfers", []))
    parts = " -> ".join(p["host"] for p in schedule.get("parts", []))
    t.footer = (f"{n} value{'' if n == 1 else 's'} sent between hosts, {format_bytes(total)} per request "
                f"(each once per destination host); parts run {parts}") if n else f"nothing crosses hosts; parts run {parts}"  # fmt: skip
    return t


def plan_of(exe: Any, lowered: Any = None, dims: Mapping[str, int] | None = None) -> dict[str, dict[str, Any]]:
    """Per device name (``cpu:0``): the memory planner's figures for ``main``
    (those that are formulas in symbolic dims evaluated at ``dims``).

    Reads ``exe.memory_plan()`` (function -> executable device index -> figures)
    and names each index after the executable's device list; empty when the
    build carries no plan.
    """
    plan: Any = None
    if hasattr(exe, "memory_plan"):
        try:
            plan = exe.memory_plan(dims=dims) if dims else exe.memory_plan()
        except Exception:  # noqa: BLE001 - a missing plan only empties a report column
            plan = None
    if not isinstance(plan, Mapping):
        return {}
    main = plan.get("main")
    if not isinstance(main, Mapping):
        return {}
    devices = list(getattr(exe, "devices", None) or [{"kind": "cpu", "index": 0}])
    out: dict[str, dict[str, Any]] = {}
    for key, figures in main.items():
        try:
            idx = int(key)
            name = f"{devices[idx]['kind']}:{devices[idx]['index']}"
        except (ValueError, IndexError, KeyError, TypeError):
            name = str(key)
        if isinstance(figures, Mapping):
            out[name] = dict(figures)
    return out


def _norm(dev: str) -> str:
    return dev.replace("llvm", "cpu")


def memory_rows(plan: Mapping[str, Mapping[str, Any]], measured: Mapping[str, Mapping[str, Any]]) -> list[dict]:
    """One dict per device: no_reuse, lower_bound, planned, measured peak, calls."""
    planned_by = {_norm(k): v for k, v in plan.items()}
    names = list(dict.fromkeys([*map(_norm, measured), *planned_by]))
    rows = []
    for dev in names:
        p = planned_by.get(dev, {})
        m = measured.get(dev, {}) or {}
        rows.append(
            {
                "device": dev,
                "no_reuse": p.get("no_reuse_bytes"),
                "lower_bound": p.get("lower_bound_bytes"),
                "planned": p.get("planned_bytes"),
                "predicted_peak": p.get("predicted_peak_bytes"),
                "peak": m.get("peak_bytes"),
                "alloc_calls": m.get("alloc_calls"),
            }
        )
    return rows


MEMORY_LEGEND = (
    "no reuse: every tensor its own buffer; lower bound: the most bytes live at one "
    "point; planned: the static plan's arena; outside: tensors outside the plan (results, "
    "which outlive the call, get storage of their own); predicted peak = planned + outside"
)


def memory_table(rows: Sequence[Mapping[str, Any]], note: str = "") -> Table:
    """Per device: what the plan promised and what the run measured (``note``
    says how to read the measured column where it is not a VM's)."""
    t = Table(
        "Memory per device",
        ["device", "no reuse", "lower bound", "planned", "outside", "predicted peak", "measured peak"],
    )
    for r in rows:
        planned, predicted = r.get("planned"), r.get("predicted_peak")
        outside = predicted - planned if isinstance(planned, int) and isinstance(predicted, int) else None
        t.add(
            r["device"],
            short_bytes(r.get("no_reuse")),
            short_bytes(r.get("lower_bound")),
            short_bytes(planned),
            short_bytes(outside),
            short_bytes(predicted),
            short_bytes(r.get("peak")),
        )
    if not rows:
        t.footer = "(no memory statistics)"
    elif all(r.get("planned") is None for r in rows):
        t.footer = "(no memory plan in this build: planned figures unavailable)"
    else:
        t.legend = MEMORY_LEGEND + "."
        calls = [f"{r['device']} {r['alloc_calls']}" for r in rows if r.get("alloc_calls") is not None]
        if calls:
            t.footer = f"allocator calls in the run: {', '.join(calls)}"
    if note:
        t.footer = f"{t.footer}\n({note})" if t.footer else f"({note})"
    return t
