"""``I.vdevice(target, vdevice_id, memory_scope)`` -> VDevice, shared by the
parser and the ``I`` namespace. A target may be a string or TVM's dict
(``{"kind": "cuda", "arch": "sm_80"}``); keys other than ``kind`` are kept in
``VDevice.target_attrs`` as a sorted tuple of (key, value) pairs."""

from __future__ import annotations

from typing import Any

from ..errors import ParseError
from ..ir.vdevice import VDevice


def _freeze(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    return value


def make_vdevice(target: Any = "llvm", vdevice_id: Any = 0, memory_scope: Any = "global") -> VDevice:
    """A VDevice from TVM's ``I.vdevice`` arguments."""
    attrs: tuple = ()
    if isinstance(target, dict):
        if not isinstance(target.get("kind"), str):
            raise ParseError(f"I.vdevice: a target dict needs a string 'kind', got {target!r}")
        attrs = _freeze({k: v for k, v in target.items() if k != "kind"})
        target = target["kind"]
    if not isinstance(target, str) or not target:
        raise ParseError(f"I.vdevice: target must be a string or a dict, got {target!r}")
    kind = target.split()[0]  # "llvm -mtriple=..." keeps its kind only
    if not isinstance(vdevice_id, int) or isinstance(vdevice_id, bool) or vdevice_id < 0:
        raise ParseError(f"I.vdevice: vdevice_id must be a non-negative int, got {vdevice_id!r}")
    if not isinstance(memory_scope, str):
        raise ParseError(f"I.vdevice: memory_scope must be a string, got {memory_scope!r}")
    return VDevice(kind, vdevice_id, memory_scope, attrs)
