"""The ``I`` namespace: ``@I.ir_module``, ``I.module_global_infos``, ``I.vdevice``.

``@I.ir_module`` reads the class's source and parses it with ``ast``; the
class body's values are never used. Write ``from hetvm.script import ir as I``.
"""

from __future__ import annotations

import sys
from typing import Any

from ..ir.module import IRModule
from ..ir.vdevice import VDevice
from ._decorate import caller_names, source_of
from ._vdevice import make_vdevice

__all__ = ["ir_module", "module_global_infos", "module_attrs", "vdevice"]


def ir_module(cls: type) -> IRModule:
    """Decorator: the class (its source, parsed) as an IRModule."""
    from .parser import parse_class_source

    source, filename, first = source_of(cls)
    return parse_class_source(source, filename, first, **caller_names(sys._getframe(1)))


def module_global_infos(infos: dict[str, Any]) -> None:
    """Declares the module's global infos; read from the source by ``ir_module``."""


def module_attrs(attrs: dict[str, Any]) -> None:
    """Declares the module's attrs; read from the source by ``ir_module``."""


def vdevice(target: Any = "llvm", vdevice_id: int = 0, memory_scope: str = "global") -> VDevice:
    """A VDevice (target a string or TVM's dict ``{"kind": "cuda", ...}``)."""
    return make_vdevice(target, vdevice_id, memory_scope)
