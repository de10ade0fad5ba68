"""Source positions: ``ParseError`` with file, line, column, source line and caret,
and IR ``Span`` s, both mapped back to the original file when the parsed text
was cut out of it (the decorators parse a dedented class or function)."""

from __future__ import annotations

import ast
import difflib
from typing import Iterable

from ..errors import ParseError
from ..ir.span import Span


class Diagnostics:
    """Turns AST positions into errors and spans of the original source."""

    def __init__(
        self,
        source: str,
        filename: str | None = None,
        line_offset: int = 0,
        col_offset: int = 0,
        original_lines: list[str] | None = None,
    ) -> None:
        self.filename = filename or "<string>"
        self.line_offset = line_offset
        self.col_offset = col_offset
        self.lines = original_lines if original_lines is not None else source.splitlines()

    def position(self, node: ast.AST | None) -> tuple[int | None, int | None]:
        if node is None or not hasattr(node, "lineno"):
            return None, None
        return node.lineno + self.line_offset, node.col_offset + self.col_offset  # type: ignore[attr-defined]

    def error(self, node: ast.AST | None, message: str) -> ParseError:
        """A ParseError pointing at ``node`` (raise the result)."""
        line, col = self.position(node)
        source_line = None
        if line is not None and 0 < line <= len(self.lines):
            source_line = self.lines[line - 1]
        return ParseError(
            message, filename=self.filename, line=line, column=col, source_line=source_line
        )

    def span(self, node: ast.AST | None) -> Span | None:
        line, col = self.position(node)
        if line is None:
            return None
        end_line = getattr(node, "end_lineno", None)
        end_col = getattr(node, "end_col_offset", None)
        return Span(
            self.filename,
            line,
            col or 0,
            None if end_line is None else end_line + self.line_offset,
            None if end_col is None else end_col + self.col_offset,
        )


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """``"; did you mean a, b?"`` for the closest names, or an empty string."""
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=3, cutoff=0.6)
    return f"; did you mean {', '.join(close)}?" if close else ""
