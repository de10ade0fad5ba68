"""IR text for ``hetvm show --format text``, readable for real models.

hetvm prints constants inline, as TVM 0.27 does; an imported model's weights
would bury the program under megabytes of numbers. :func:`elide_constants`
replaces every long ``R.const([...])`` literal by ``R.const(<elided N chars>)``
and drops long module attrs, leaving the structure the user came to read.
``--full`` skips the eliding.
"""

from __future__ import annotations

__all__ = ["elide_constants", "module_text"]

_MARK = "R.const("


def _skip_bracketed(text: str, i: int) -> int:
    """Index just after the bracketed literal starting at ``text[i]``."""
    depth = 0
    quote = None
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def elide_constants(text: str, limit: int = 60) -> str:
    """``text`` with constant literals longer than ``limit`` characters elided."""
    out: list[str] = []
    pos = 0
    while True:
        i = text.find(_MARK, pos)
        if i < 0:
            out.append(text[pos:])
            break
        start = i + len(_MARK)
        out.append(text[pos:start])
        if start < len(text) and text[start] in "[(":
            end = _skip_bracketed(text, start)
            literal = text[start:end]
            out.append(literal if len(literal) <= limit else f"<elided {len(literal)} chars>")
            pos = end
        else:
            pos = start
    return "".join(out)


def module_text(mod, full: bool = False) -> str:
    """The module's TVMScript; constants and big module attrs elided unless ``full``."""
    if full:
        return mod.script()
    from ..ir.module import IRModule

    slim = IRModule(mod.functions, mod.global_infos, {})
    return elide_constants(slim.script())
