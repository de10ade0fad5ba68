"""``hetvm.explain(mod, **plan_options)``: where the device copies are, and why.

Runs the device planner on a module and returns an :class:`ExplainReport`:
``copies`` has one entry per inserted copy (value, source and destination
devices, bytes, consumers, reason, the pass that inserted it), ``totals`` sums
copies and bytes per device pair, and ``str(report)`` is a table (``rich`` when
it is installed, plain text otherwise). A module that already went through
PlanDevices is explained from its recorded ``device_copies``.
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

    def __post_init__(self) -> None:
        if not self.totals:
            for c in self.copies:
                t = self.totals.setdefault((c["src"], c["dst"]), {"copies": 0, "bytes": 0})
                t["copies"] += 1
                t["bytes"] += int(c["bytes"])

    @property
    def total_bytes(self) -> int:
        return sum(int(c["bytes"]) for c in self.copies)

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
        return {
            "copies": list(self.copies),
            "totals": [{"src": s, "dst": d, **t} for (s, d), t in sorted(self.totals.items())],
        }


def _plain_table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    fmt = "  ".join("{:<" + str(w) + "}" for w in widths)
    lines = [fmt.format(*header), fmt.format(*["-" * w for w in widths])]
    lines.extend(fmt.format(*r) for r in rows)
    return lines


def _plain_text(report: ExplainReport) -> str:
    if not report.copies:
        return "no device copies"
    lines = [f"{len(report.copies)} device copies, {report.total_bytes} bytes"]
    lines += _plain_table([c for c in _COLUMNS], report.rows())
    lines.append("")
    lines += _plain_table(["src", "dst", "copies", "bytes"], report.totals_rows())
    return "\n".join(lines)


def _rich_text(report: ExplainReport) -> str:
    from rich.console import Console
    from rich.table import Table

    if not report.copies:
        return "no device copies"
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
    return console.export_text().rstrip()


class _Null:
    def write(self, _s: str) -> int:
        return 0

    def flush(self) -> None:
        pass


def explain(mod: IRModule, **plan_options: Any) -> ExplainReport:
    """Plans ``mod``'s devices (``PlanDevices`` options) and reports every copy."""
    if "device_copies" in mod.attrs and not plan_options:
        return ExplainReport(list(mod.attrs["device_copies"]), mod)
    from .transform.normalize import Normalize
    from .transform.plan_devices import plan_module

    result = plan_module(Normalize()(mod), **plan_options)
    return ExplainReport(result.copies, result.mod)


class _CallableModule(types.ModuleType):
    """Lets ``hetvm.explain(mod)`` work even where ``hetvm.explain`` is this module."""

    def __call__(self, mod: IRModule, **plan_options: Any) -> ExplainReport:
        return explain(mod, **plan_options)


sys.modules[__name__].__class__ = _CallableModule
