"""Tables, headings and progress bars, with ``rich`` when installed.

Reports are data first (a title, column names, rows of strings) and rendered
here, so the same report prints as a rich table in a terminal and as aligned
plain text when rich is missing or output is redirected (``--plain``).
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence, TextIO

__all__ = ["Table", "Console", "format_bytes"]


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


@dataclass
class Table:
    """A report table: rendered by :class:`Console`, inspectable in tests."""

    title: str
    columns: Sequence[str]
    rows: list[Sequence[Any]] = field(default_factory=list)
    footer: str | None = None

    def add(self, *cells: Any) -> None:
        self.rows.append([str(c) for c in cells])

    def plain(self) -> str:
        """The table as aligned plain text."""
        cells = [list(self.columns)] + [[str(c) for c in r] for r in self.rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(self.columns))]
        lines = [self.title]
        lines.append("  ".join(c.ljust(w) for c, w in zip(cells[0], widths)).rstrip())
        lines.append("  ".join("-" * w for w in widths))
        for r in cells[1:]:
            lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if not self.rows:
            lines.append("(none)")
        if self.footer:
            lines.append(self.footer)
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

    def print(self, text: str = "") -> None:
        if self._rich is not None:
            self._rich.print(text, markup=False)
        else:
            print(text, file=self.file)

    def heading(self, text: str) -> None:
        if self._rich is not None:
            self._rich.rule(text, style="bold")
        else:
            print(f"\n== {text} ==", file=self.file)

    def table(self, table: Table) -> None:
        if self._rich is None:
            print(table.plain(), file=self.file)
            return
        from rich.table import Table as RichTable

        rt = RichTable(title=table.title, caption=table.footer, title_justify="left")
        for col in table.columns:
            rt.add_column(col, overflow="fold")
        for row in table.rows:
            rt.add_row(*[str(c) for c in row])
        if not table.rows:
            rt.add_row(*(["(none)"] + [""] * (len(table.columns) - 1)))
        self._rich.print(rt)

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
