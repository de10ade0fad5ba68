"""Tables, headings and progress bars, with ``rich`` when installed.

Reports are data first (a title, column names, rows of strings) and rendered
here, so the same report prints as a rich table in a terminal and as aligned
plain text when rich is missing or output is redirected (``--plain``).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import sys
import textwrap
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence, TextIO

__all__ = ["Table", "Console", "format_bytes", "short_bytes", "wrap"]


def format_bytes(n: int | float | None) -> str:
    """Bytes in binary units (``1.5 MiB``); ``-`` for unknown."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{value:.2f} GiB"  # pragma: no cover - loop always returns


def short_bytes(n: int | float | None) -> str:
    """Bytes in binary units to three significant digits (``224 KiB``, ``3.75 MiB``),
    for tables that must fit 80 columns; ``-`` for unknown."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            if unit == "B":
                return f"{int(value)} B"
            digits = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
            return f"{value:.{digits}f} {unit}"
        value /= 1024
    return f"{value:.0f} GiB"  # pragma: no cover - loop always returns


def wrap(text: str, width: int, indent: str = "") -> list[str]:
    """``text`` wrapped to ``width`` columns, continuation lines indented by ``indent``."""
    out: list[str] = []
    for para in text.splitlines() or [""]:
        out += textwrap.wrap(para, width=max(width, 20), subsequent_indent=indent,
                             break_long_words=True, break_on_hyphens=False) or [""]  # fmt: skip
    return out


def _wrap_cell(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width``, broken at spaces or after a ``/``
    (exported tensor names are paths: ``/model/layer.0/attention/Softmax_output_0``)."""
    if len(text) <= width:
        return [text]
    lines: list[str] = []
    line = ""
    for token in re.findall(r"\s+|[^\s/]*/|[^\s/]+", text):
        if token.isspace():
            if line:
                line += " "
            continue
        while len(token) > width:  # a piece longer than the column: cut it
            if line:
                lines.append(line.rstrip())
                line = ""
            lines.append(token[:width])
            token = token[width:]
        if len(line) + len(token) > width:
            lines.append(line.rstrip())
            line = ""
        line += token
    if line.strip():
        lines.append(line.rstrip())
    return lines or [""]


def _two_lines(heading: str) -> int:
    """The narrowest width that wraps ``heading`` on at most two lines."""
    for w in range(1, len(heading) + 1):
        if len(textwrap.wrap(heading, w, break_long_words=False)) <= 2:
            return w
    return len(heading)


def _terminal_width() -> int:
    """Columns of the terminal (``COLUMNS`` when set); 100 when unknown."""
    return shutil.get_terminal_size((100, 24)).columns


@dataclass
class Table:
    """A report table: rendered by :class:`Console`, inspectable in tests.

    ``footer`` is a summary line (totals); ``legend`` says how to read the
    columns; ``notes`` are numbered remarks printed under the table (long
    reasons that would make a column nine lines tall at 80 columns)."""

    title: str
    columns: Sequence[str]
    rows: list[Sequence[Any]] = field(default_factory=list)
    footer: str | None = None
    legend: str | None = None
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: Any) -> None:
        self.rows.append([str(c) for c in cells])

    def under(self, width: int) -> list[str]:
        """The lines printed under the table: footer, notes, legend, wrapped."""
        lines: list[str] = []
        for part in (self.footer or "").splitlines():
            lines += wrap(part, width, "  ")
        for i, note in enumerate(self.notes, 1):
            lines += wrap(f"[{i}] {note}", width, "    ")
        if self.legend:
            lines += wrap(self.legend, width, "  ")
        return lines

    def plain(self, width: int | None = None) -> str:
        """The table as aligned plain text, wrapped to ``width`` columns when given."""
        cells = [list(self.columns)] + [[str(c) for c in r] for r in self.rows]
        ncols = len(self.columns)
        widths = [max(len(r[i]) for r in cells) for i in range(ncols)]
        if width is not None and sum(widths) + 2 * (ncols - 1) > width:
            # first let headings take two lines (cells keep their width), then shrink
            floor = [max((len(w) for w in col.split()), default=1) for col in self.columns]
            body = [max((len(str(r[i])) for r in cells[1:]), default=0) for i in range(ncols)]
            widths = [max(b, _two_lines(c), f) for b, c, f in zip(body, self.columns, floor)]
            while sum(widths) + 2 * (ncols - 1) > width:
                i = max(range(ncols), key=lambda k: widths[k] - floor[k])
                if widths[i] <= max(floor[i], 6):
                    break
                widths[i] -= 1
        lines = [self.title]
        for k, r in enumerate(cells):
            parts = [_wrap_cell(c, w) for c, w in zip(r, widths)]
            for j in range(max(len(p) for p in parts)):
                row = [(p[j] if j < len(p) else "").ljust(w) for p, w in zip(parts, widths)]
                lines.append("  ".join(row).rstrip())
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
        if not self.rows:
            lines.append("(none)")
        lines += self.under(width or 10_000)
        return "\n".join(lines)


class Console:
    """Where the command line prints; rich when available and wanted."""

    def __init__(self, plain: bool = False, file: TextIO | None = None) -> None:
        self.file = file if file is not None else sys.stdout
        self._rich: Any = None
        if not plain:
            try:
                from rich.console import Console as RichConsole
            except ImportError:
                RichConsole = None  # noqa: N806 - optional dependency
            if RichConsole is not None:
                self._rich = RichConsole(file=self.file, highlight=False, soft_wrap=True)

    @property
    def rich(self) -> bool:
        return self._rich is not None

    @property
    def width(self) -> int:
        """Columns to fill: rich's idea of the terminal, else the terminal's."""
        return self._rich.width if self._rich is not None else _terminal_width()

    def print(self, text: str = "") -> None:
        if self._rich is not None:
            self._rich.print(text, markup=False)
        else:
            print(text, file=self.file)

    def paragraph(self, text: str, indent: str = "") -> None:
        """``text`` wrapped to the width, continuation lines indented by ``indent``."""
        for line in wrap(text, self.width, indent):
            self.print(line)

    def heading(self, text: str) -> None:
        if self._rich is not None:
            self._rich.rule(text, style="bold")
        else:
            print(f"\n== {text} ==", file=self.file)

    def table(self, table: Table) -> None:
        if self._rich is None:
            print(table.plain(self.width), file=self.file)
            return
        from rich import box
        from rich.table import Table as RichTable

        rt = RichTable(title=table.title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0),
                       pad_edge=False, show_edge=False)  # fmt: skip
        for col in table.columns:
            # a heading wraps between words, never inside one ("predict / ed peak")
            rt.add_column(col, overflow="fold", min_width=max(len(w) for w in col.split()))
        for row in table.rows:
            rt.add_row(*[str(c) for c in row])
        if not table.rows:
            rt.add_row(*(["(none)"] + [""] * (len(table.columns) - 1)))
        self._rich.print(rt)
        for line in table.under(self.width):
            self._rich.print(line, markup=False)

    @contextlib.contextmanager
    def status(self, text: str) -> Iterator[None]:
        """A spinner while a long step (import, build) runs; silent without rich."""
        if self._rich is None or not self._rich.is_terminal:
            yield
            return
        with self._rich.status(text):
            yield

    @contextlib.contextmanager
    def progress(self, text: str, total: int) -> Iterator[Any]:
        """A progress bar; yields ``advance(n=1)``. Silent without rich or a terminal."""
        if self._rich is None or not self._rich.is_terminal:
            yield lambda n=1: None
            return
        from rich.progress import Progress

        with Progress(console=self._rich, transient=True) as bar:
            task = bar.add_task(text, total=total)
            yield lambda n=1: bar.advance(task, n)
