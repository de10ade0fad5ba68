"""Source locations carried by IR nodes so errors can point at a line."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Span:
    source_name: str
    line: int
    column: int = 0
    end_line: int | None = None
    end_column: int | None = None

    def __str__(self) -> str:
        return f"{self.source_name}:{self.line}:{self.column + 1}"
