"""``hetvm.explain(mod, **plan_options)``: where the device copies are, and why.

Runs the device planner on a module and returns an :class:`ExplainReport`:
``copies`` has one entry per inserted copy (value, source and destination
devices, bytes, consumers, reason, the pass that inserted it), ``totals`` sums
copies and bytes per device pair, ``transfers`` lists the copies that cross
between hosts (devices of ``hetvm.remote`` hosts), one per value and
destination host (that is what the network carries: a value read by two
devices of one host is sent there once), with bytes, reason and the time the
cost model's link gives it, and ``stages`` the cut of stage mode. ``str(report)``
is a table (``rich`` when it is installed, plain text otherwise). A module
that already went through PlanDevices is explained from its recorded
``device_copies``.

``hetvm.explain(exe)`` explains a build: its copies, its stage cut and, for
devices of several hosts, the transfers of its host schedule (``SplitHosts``),
which is what the runtime sends. Explaining a module plans it as it stands,
while ``hetvm.build`` first folds constants and fuses convolution epilogues,
so a module's report can name other values and cut other op positions than
its build's (the bytes at a cut are the same values' bytes).
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field
from typing import Any

from .ir.module import IRModule

__all__ = ["explain", "ExplainReport"]

_COLUMNS = ("value", "function", "src", "dst", "bytes", "consumers", "reason", "pass")


@dataclass
class ExplainReport:
    """Every copy of a device plan, with totals per (source, destination) pair."""

    copies: list[dict]
    module: IRModule | None = None
    totals: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    stages: dict | None = None
    #: a build's host schedules (``host_parts``: function -> schedule); its transfers are the report's
    schedules: dict | None = None
    #: the link model (``device_links``), where there is no module to read it from
    links: dict | None = None

    def __post_init__(self) -> None:
        if not self.totals:
            for c in self.copies:
                t = self.totals.setdefault((c["src"], c["dst"]), {"copies": 0, "bytes": 0})
                t["copies"] += 1
                t["bytes"] += int(c["bytes"])

    @property
    def total_bytes(self) -> int:
        return sum(int(c["bytes"]) for c in self.copies)

    @property
    def transfers(self) -> list[dict]:
        """Copies between hosts, one per (function, value, source host, destination host)."""
        links = _links_of(self.module, self.links)
        if self.schedules is not None:
            return _schedule_transfers(self.schedules, links)
        out: dict[tuple, dict] = {}
        for c in self.copies:
            src, dst = _host(c["src"]), _host(c["dst"])
            if src == dst:
                continue
            key = (c["function"], c["value"], src, dst)
            t = out.get(key)
            if t is None:
                nbytes = int(c["bytes"])
                out[key] = {
                    "value": c["value"], "function": c["function"], "src_host": src, "dst_host": dst,
                    "bytes": nbytes, "devices": [f"{c['src']} -> {c['dst']}"], "reason": c["reason"],
                    "seconds": links.cross_host.seconds(nbytes),
                }
            else:
                t["devices"].append(f"{c['src']} -> {c['dst']}")
        return list(out.values())

    @property
    def transfer_bytes(self) -> int:
        return sum(t["bytes"] for t in self.transfers)

    def transfer_rows(self) -> list[list[str]]:
        return [[t["value"], t["function"], f"{t['src_host']} -> {t['dst_host']}", str(t["bytes"]),
                 f"{t['seconds'] * 1e3:.3f}", ", ".join(t["devices"]), t["reason"]] for t in self.transfers]  # fmt: skip

    def rows(self) -> list[list[str]]:
        out = []
        for c in self.copies:
            where = f" (line {c['line']})" if c.get("line") is not None and "line" not in c["reason"] else ""
            out.append([
                str(c["value"]), str(c["function"]), c["src"], c["dst"], str(c["bytes"]),
                ", ".join(c["consumers"]), c["reason"] + where, c["pass"],
            ])
        return out

    def totals_rows(self) -> list[list[str]]:
        return [[s, d, str(t["copies"]), str(t["bytes"])] for (s, d), t in sorted(self.totals.items())]

    def __str__(self) -> str:
        try:
            return _rich_text(self)
        except ImportError:
            return _plain_text(self)

    def to_json(self) -> dict[str, Any]:
        out = {
            "copies": list(self.copies),
            "totals": [{"src": s, "dst": d, **t} for (s, d), t in sorted(self.totals.items())],
        }
        transfers = self.transfers
        if transfers:
            out["transfers"] = transfers
        if self.stages is not None:
            out["stages"] = self.stages
        return out


_TRANSFER_COLUMNS = ["value", "function", "hosts", "bytes", "ms (model)", "devices", "reason"]


def _host(device: str) -> str | None:
    host, sep, _ = device.rpartition("/")
    return host if sep else None


def _links_of(mod: IRModule | None, spec: dict | None = None) -> Any:
    from .transform.device_planning.stages import LinkCosts

    if spec is None and mod is not None:
        spec = mod.attrs.get("device_links")
    return LinkCosts.of(spec or None)


def _schedule_transfers(schedules: dict, links: Any) -> list[dict]:
    """The transfers of host schedules, in the report's form."""
    out = []
    for function, schedule in schedules.items():
        for t in schedule.get("transfers", []):
            nbytes = int(t["bytes"])
            out.append({
                "value": t["value"], "function": function, "src_host": t["src"], "dst_host": t["dst"],
                "bytes": nbytes, "devices": list(t.get("devices") or []), "reason": t.get("reason", "-"),
                "seconds": links.cross_host.seconds(nbytes),
            })
    return out


def _transfers_title(report: ExplainReport) -> str:
    n = len(report.transfers)
    return f"{n} cross-host transfer{'' if n == 1 else 's'}, {report.transfer_bytes} bytes"


def _stage_lines(stages: dict) -> list[str]:
    lines = [f"stage mode: {len(stages['devices'])} stages over {stages['ops']} ops of main, "
             f"bottleneck {stages['bottleneck_s'] * 1e3:.3f} ms (model)"]  # fmt: skip
    for i, (dev, (a, b), (first, last), sec) in enumerate(
        zip(stages["devices"], stages["ranges"], stages["first_last"], stages["compute_s"])
    ):
        lines.append(f"  stage {i + 1} on {dev}: ops {a}..{b} ('{first}' .. '{last}'), compute {sec * 1e3:.3f} ms")
        if i < len(stages["boundary_bytes"]):
            lines.append(f"    -> {stages['boundary_bytes'][i]} bytes to the next stage, "
                         f"{stages['transfer_s'][i] * 1e3:.3f} ms")  # fmt: skip
    return lines


def _plain_table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    fmt = "  ".join("{:<" + str(w) + "}" for w in widths)
    lines = [fmt.format(*header), fmt.format(*["-" * w for w in widths])]
    lines.extend(fmt.format(*r) for r in rows)
    return lines


def _plain_text(report: ExplainReport) -> str:
    extra = _extra_lines(report)
    if not report.copies:
        return "\n".join(["no device copies"] + extra)
    lines = [f"{len(report.copies)} device copies, {report.total_bytes} bytes"]
    lines += _plain_table([c for c in _COLUMNS], report.rows())
    lines.append("")
    lines += _plain_table(["src", "dst", "copies", "bytes"], report.totals_rows())
    return "\n".join(lines + extra)


def _extra_lines(report: ExplainReport) -> list[str]:
    """The cross-host transfers and the stage cut, as plain lines."""
    lines: list[str] = []
    transfers = report.transfers
    if transfers:
        lines += ["", _transfers_title(report)]
        lines += _plain_table(_TRANSFER_COLUMNS, report.transfer_rows())
    if report.stages is not None:
        lines += [""] + _stage_lines(report.stages)
    return lines


def _rich_text(report: ExplainReport) -> str:
    from rich.console import Console
    from rich.table import Table

    if not report.copies:
        return "\n".join(["no device copies"] + _extra_lines(report))
    console = Console(width=160, record=True, file=_Null(), color_system=None)
    table = Table(title=f"{len(report.copies)} device copies, {report.total_bytes} bytes")
    for c in _COLUMNS:
        table.add_column(c, overflow="fold")
    for r in report.rows():
        table.add_row(*r)
    totals = Table(title="totals per device pair")
    for c in ("src", "dst", "copies", "bytes"):
        totals.add_column(c)
    for r in report.totals_rows():
        totals.add_row(*r)
    console.print(table)
    console.print(totals)
    if report.transfers:
        cross = Table(title=_transfers_title(report))
        for c in _TRANSFER_COLUMNS:
            cross.add_column(c, overflow="fold")
        for r in report.transfer_rows():
            cross.add_row(*r)
        console.print(cross)
    text = console.export_text().rstrip()
    if report.stages is not None:
        text += "\n\n" + "\n".join(_stage_lines(report.stages))
    return text


class _Null:
    def write(self, _s: str) -> int:
        return 0

    def flush(self) -> None:
        pass


def explain(mod: IRModule | Any, **plan_options: Any) -> ExplainReport:
    """Plans ``mod``'s devices (``PlanDevices`` options) and reports every copy; an
    executable (``hetvm.build``'s) is reported from what its build recorded."""
    meta = getattr(mod, "metadata", None)
    if not isinstance(mod, IRModule) and isinstance(meta, dict):
        if plan_options:
            raise TypeError("explain(exe) reports a finished build; plan options apply to a module")
        return ExplainReport(list(meta.get("device_copies") or []), None, stages=meta.get("device_stages"),
                             schedules=meta.get("host_parts"), links=meta.get("device_links"))  # fmt: skip
    if "device_copies" in mod.attrs and not plan_options:
        return ExplainReport(list(mod.attrs["device_copies"]), mod, stages=mod.attrs.get("device_stages"),
                             schedules=mod.attrs.get("host_parts"))  # fmt: skip
    from .transform.normalize import Normalize
    from .transform.plan_devices import plan_module

    result = plan_module(Normalize()(mod), **plan_options)
    return ExplainReport(result.copies, result.mod, stages=result.mod.attrs.get("device_stages"))


class _CallableModule(types.ModuleType):
    """Lets ``hetvm.explain(mod)`` work even where ``hetvm.explain`` is this module."""

    def __call__(self, mod: IRModule | Any, **plan_options: Any) -> ExplainReport:
        return explain(mod, **plan_options)


sys.modules[__name__].__class__ = _CallableModule
