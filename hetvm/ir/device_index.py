"""Mapping vdevices to the executable's device indices."""

from __future__ import annotations

from ..errors import DevicePlanError
from . import struct_info as S
from .module import IRModule
from .vdevice import VDevice


def device_index(mod: IRModule, vdevice: VDevice | None) -> int:
    """Index of ``vdevice`` in the module's vdevice list (0 when none is given)."""
    if vdevice is None:
        return 0
    vdevs = mod.vdevices
    for i, v in enumerate(vdevs):
        if v == vdevice:
            return i
    for i, v in enumerate(vdevs):  # same device, scope or attrs spelled differently
        if v.kind == vdevice.kind and v.vdevice_id == vdevice.vdevice_id:
            return i
    if not vdevs and vdevice.is_host and vdevice.vdevice_id == 0:
        return 0
    raise DevicePlanError(f"vdevice {vdevice} is not declared in the module's global_infos")


def sinfo_device_index(mod: IRModule, sinfo: S.StructInfo | None) -> int:
    """Device index of a tensor (first field of a tuple), default 0."""
    if isinstance(sinfo, S.TensorStructInfo):
        return device_index(mod, sinfo.vdevice)
    if isinstance(sinfo, S.TupleStructInfo):
        for f in sinfo.fields:
            if isinstance(f, (S.TensorStructInfo, S.TupleStructInfo)):
                return sinfo_device_index(mod, f)
    return 0
