"""What the parser knows while it reads one module and one function: namespace
aliases, module-level shape variables, the vdevice list, and the function's
variable scopes. Plain data; the evaluator and statement parser share it."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Callable

from ..ir import expr as E
from ..ir import prim as P
from ..ir.vdevice import VDevice
from ._diag import Diagnostics

# Default names of the dialect namespaces; imports may add aliases.
DEFAULT_ALIASES = {"R": "relax", "I": "ir", "T": "tir"}
NAMESPACE_OF_MODULE = {"relax": "relax", "ir": "ir", "tir": "tir", "tirx": "tir"}


@dataclass
class ModuleEnv:
    """Module-wide facts: aliases, module-level shape variables, vdevices, functions."""

    diag: Diagnostics
    aliases: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_ALIASES))
    typevars: dict[str, str] = field(default_factory=dict)  # name -> dtype
    vdevices: list[VDevice] = field(default_factory=list)
    class_name: str | None = None
    function_names: list[str] = field(default_factory=list)
    global_var: Callable[[str, ast.AST], E.GlobalVar] | None = None
    #: local functions lifted to module functions (script/_local_functions.py), by name
    lifted: dict[str, E.Function] = field(default_factory=dict)
    #: names of lifted functions being parsed (reserved, so nested lifts do not clash)
    reserved: set[str] = field(default_factory=set)


class FunctionScope:
    """Relax variables (a stack of scopes) and shape variables of one function."""

    def __init__(self) -> None:
        self.frames: list[dict[str, E.Var]] = [{}]
        self.syms: dict[str, P.PrimVar] = {}
        self.module_aliases: set[str] = set()
        self.left_dataflow: set[str] = set()
        self.taken: set[str] = set()  # every name the source uses (for fresh names)
        self.local_functions: dict = {}  # name -> _local_functions.LocalFunction
        # integer R.Prim variables read as shape expressions: (var, frame id) -> PrimVar,
        # and the match_casts binding them that the next binding must be preceded by
        self.prim_values: dict = {}
        self.pending: list = []
        self._fresh_counts: dict[str, int] = {}

    def lookup(self, name: str) -> E.Var | None:
        for frame in reversed(self.frames):
            if name in frame:
                return frame[name]
        return None

    def bind(self, name: str, var: E.Var) -> None:
        self.frames[-1][name] = var
        self.left_dataflow.discard(name)

    def visible_names(self) -> list[str]:
        names: set[str] = set(self.syms)
        for frame in self.frames:
            names.update(frame)
        return sorted(names)

    def fresh(self, hint: str) -> str:
        """A name no source variable uses (``lv``, ``lv1`` ...), for flattened values."""
        n = self._fresh_counts.get(hint, -1)
        while True:
            n += 1
            name = hint if n == 0 else f"{hint}{n}"
            if name not in self.taken:
                self._fresh_counts[hint] = n
                self.taken.add(name)
                return name
