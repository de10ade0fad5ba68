"""``I.vdevice(target, vdevice_id, memory_scope)`` -> VDevice, shared by the
parser and the ``I`` namespace. A target may be a string or TVM's dict
(``{"kind": "cuda", "arch": "sm_80"}``); keys other than ``kind`` are kept in
``VDevice.target_attrs`` as a sorted tuple of (key, value) pairs.

Also the devices of ``R.hint_on_device(x, R.device(...), scope)``: which
declared vdevice a device names, and how to print one so it reads back."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ..errors import ParseError
from ..ir.vdevice import VDevice
from ..op.device import device


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


# DLPack device type codes, as TVM 0.27 prints them in ``R.device(device_type=2, index=0)``.
# Reading goes through ``hetvm.op.device``, which knows the same codes.
DLPACK_CODES = {"cpu": 1, "cuda": 2, "opencl": 4, "vulkan": 7, "metal": 8, "rocm": 10}


def resolve_device(base: VDevice, declared: list[VDevice]) -> VDevice:
    """The vdevice ``R.device(kind, index)`` names in a module declaring ``declared``.

    A device is a runtime kind and an index, so it names the first declared
    vdevice with the same runtime kind (``llvm`` and ``cpu`` are both the host)
    and id, preferring one with ``base``'s memory scope, whatever extra target
    keys that declaration carries. Undeclared, it is ``base`` itself.
    """
    same = [v for v in declared if v.kind == base.kind and v.vdevice_id == base.vdevice_id]
    exact = [v for v in same if v.memory_scope == base.memory_scope]
    return (exact or same or [base])[0]


def with_scope(vdev: VDevice, scope: str) -> VDevice:
    return vdev if vdev.memory_scope == scope else dataclasses.replace(vdev, memory_scope=scope)


def hint_device_text(vdev: VDevice, declared: list[VDevice]) -> str | None:
    """The ``R.device(...)`` arguments of ``R.hint_on_device`` that read back as ``vdev``.

    TVM's form (``R.device(device_type=2, index=0), "global"``) where the device
    has a DLPack code and reads back as exactly ``vdev``; else hetvm's
    ``R.device("sim", 0)`` (with the scope only when it is not ``"global"``);
    None when neither reads back as ``vdev`` (the caller prints the attr itself).
    """
    scope = vdev.memory_scope
    code = DLPACK_CODES.get(vdev.kind)
    if code is not None:
        back = with_scope(resolve_device(device(code, vdev.vdevice_id), declared), scope)
        if back == vdev:
            return f"R.device(device_type={code}, index={vdev.vdevice_id}), {json.dumps(scope)}"
    back = with_scope(resolve_device(device(vdev.target, vdev.vdevice_id), declared), scope)
    if back == vdev:
        tail = "" if scope == "global" else f", {json.dumps(scope)}"
        return f"R.device({json.dumps(vdev.target)}, {vdev.vdevice_id}){tail}"
    return None
