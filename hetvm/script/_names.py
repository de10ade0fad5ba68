"""Unique, valid Python identifiers for printed variables.

Names are handed out in order of definition, so printing is deterministic
and re-printing a parsed module gives the same text. A clash gets TVM's
``_1``, ``_2`` suffix.
"""

from __future__ import annotations

import keyword
import re

# Names the printed script itself uses; a variable never takes one of them.
RESERVED = frozenset({"R", "T", "I", "cls", "Module", "metadata", "TypeVar", "float"})

_INVALID = re.compile(r"[^0-9A-Za-z_]")


def sanitize(name: str) -> str:
    """A valid identifier close to ``name``."""
    text = _INVALID.sub("_", name) or "v"
    if text[0].isdigit():
        text = "v_" + text
    if keyword.iskeyword(text):
        text += "_"
    return text


class NameTable:
    """Allocates unique identifiers within one scope (a function)."""

    def __init__(self, reserved: frozenset[str] | set[str] = RESERVED) -> None:
        self.used: set[str] = set(reserved)

    def reserve(self, name: str) -> None:
        self.used.add(name)

    def fresh(self, hint: str) -> str:
        base = sanitize(hint)
        if base not in self.used:
            self.used.add(base)
            return base
        k = 1
        while f"{base}_{k}" in self.used:
            k += 1
        name = f"{base}_{k}"
        self.used.add(name)
        return name
