"""IRModule: the unit passes transform — functions by name plus global infos."""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from ..errors import WellFormedError
from .expr import Function, GlobalVar
from .vdevice import VDevice


class IRModule:
    """Functions keyed by name, plus ``global_infos`` (e.g. ``{"vdevice": [...]}``).

    Passes treat modules as values: :meth:`with_function` and friends return a
    new module and leave this one unchanged. ``mod["main"] = f`` is allowed
    for users building a module by hand, but no pass does it to its input.
    """

    __slots__ = ("functions", "global_infos", "attrs")

    def __init__(
        self,
        functions: Mapping[str | GlobalVar, Function] | None = None,
        global_infos: Mapping[str, Any] | None = None,
        attrs: Mapping[str, Any] | None = None,
    ) -> None:
        self.functions: dict[str, Function] = {}
        for key, func in (functions or {}).items():
            name = key.name_hint if isinstance(key, GlobalVar) else key
            self.functions[name] = func
        self.global_infos: dict[str, Any] = {
            k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in (global_infos or {}).items()
        }
        self.attrs: dict[str, Any] = dict(attrs or {})

    # -- access ---------------------------------------------------------
    def __getitem__(self, name: str | GlobalVar) -> Function:
        key = name.name_hint if isinstance(name, GlobalVar) else name
        try:
            return self.functions[key]
        except KeyError:
            raise WellFormedError(
                f"module has no function '{key}' (it has: {', '.join(self.functions) or 'none'})"
            ) from None

    def __setitem__(self, name: str | GlobalVar, func: Function) -> None:
        key = name.name_hint if isinstance(name, GlobalVar) else name
        self.functions[key] = func

    def __contains__(self, name: object) -> bool:
        key = name.name_hint if isinstance(name, GlobalVar) else name
        return key in self.functions

    def __iter__(self) -> Iterator[str]:
        return iter(self.functions)

    def __len__(self) -> int:
        return len(self.functions)

    def items(self):
        return self.functions.items()

    def get_global_var(self, name: str) -> GlobalVar:
        if name not in self.functions:
            raise WellFormedError(f"module has no function '{name}'")
        return GlobalVar(name, struct_info=self.functions[name].struct_info)

    def get_global_vars(self) -> list[GlobalVar]:
        return [self.get_global_var(n) for n in self.functions]

    @property
    def vdevices(self) -> list[VDevice]:
        """The declared vdevices, in declaration order (the VM's device order)."""
        return list(self.global_infos.get("vdevice", []))

    # -- functional updates ----------------------------------------------
    def copy(self) -> IRModule:
        return IRModule(self.functions, self.global_infos, self.attrs)

    def with_function(self, name: str, func: Function) -> IRModule:
        new = self.copy()
        new.functions[name] = func
        return new

    def with_functions(self, functions: Mapping[str, Function]) -> IRModule:
        """A module whose functions are exactly ``functions`` (same infos)."""
        return IRModule(functions, self.global_infos, self.attrs)

    def without_function(self, name: str) -> IRModule:
        new = self.copy()
        new.functions.pop(name, None)
        return new

    def with_global_infos(self, **infos: Any) -> IRModule:
        new = self.copy()
        new.global_infos.update(infos)
        return new

    # -- text ------------------------------------------------------------
    def script(self, **kwargs: Any) -> str:
        """The module as TVMScript text."""
        from ..script.printer import print_module  # late: script sits above ir

        return print_module(self, **kwargs)

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        return f"IRModule({', '.join(self.functions)})"
