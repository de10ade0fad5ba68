"""Device placement ops: ``hint_on_device`` (annotation) and ``to_vdevice`` (copy)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..errors import StructInfoError
from ..ir import expr as E
from ..ir import struct_info as S
from ..ir.vdevice import VDevice
from .base import DeviceBehavior, fail, make_call, op_name, register_op, tensor_arg
from .effects import ANNOTATION

__all__ = ["device", "hint_on_device", "to_vdevice", "as_vdevice"]

# DLPack device type codes that TVM scripts may pass to R.device(...).
_DEVICE_CODES = {1: "cpu", 2: "cuda", 3: "cuda", 4: "opencl", 7: "vulkan", 8: "metal", 10: "rocm"}


def device(kind: str | int, index: int = 0) -> VDevice:
    """``R.device(kind, index)``: a VDevice for ``hint_on_device``."""
    if isinstance(kind, int) and not isinstance(kind, bool):
        if kind not in _DEVICE_CODES:
            raise StructInfoError(f"unknown device type code {kind} in R.device({kind}, {index})")
        kind = _DEVICE_CODES[kind]
    if not isinstance(kind, str) or not kind:
        raise StructInfoError(f"R.device needs a device kind such as 'cuda', got {kind!r}")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise StructInfoError(f"R.device('{kind}', ...) needs a non-negative index, got {index!r}")
    return VDevice(target=kind, vdevice_id=index)


def as_vdevice(op: str, value: Any, memory_scope: str | None = None) -> VDevice:
    """A VDevice from a VDevice or a "kind" / "kind:index" string."""
    if isinstance(value, str):
        kind, _, idx = value.partition(":")
        try:
            value = device(kind, int(idx) if idx else 0)
        except ValueError:
            raise fail(op, f"cannot read a device from {value!r} (use 'kind:index')") from None
    if not isinstance(value, VDevice):
        raise fail(op, f"dst_vdevice must be a VDevice or 'kind:index', got {value!r}")
    if memory_scope is not None and memory_scope != value.memory_scope:
        value = dataclasses.replace(value, memory_scope=memory_scope)
    return value


def _infer_with_device(call: E.Call) -> S.StructInfo:
    data = tensor_arg(call, 0, "data")
    vdev = call.attrs.get("dst_vdevice")
    if not isinstance(vdev, VDevice):
        raise fail(op_name(call), f"attribute 'dst_vdevice' must be a VDevice, got {vdev!r}")
    return data.with_vdevice(vdev)


def _infer_hint(call: E.Call) -> S.StructInfo:
    """The input's struct info, as TVM infers it until RealizeVDevice (the
    planner reads the hinted device from ``dst_vdevice``), except that a vdevice
    other than the hinted one is dropped: the values computed from the hint are
    then placed by the planner (near the hint) instead of pinned to the input's
    device, and the annotations hetvm prints stay ones TVM accepts (less specific
    than TVM's inference, never contradicting it)."""
    data = tensor_arg(call, 0, "data")
    vdev = call.attrs.get("dst_vdevice")
    if not isinstance(vdev, VDevice):
        raise fail(op_name(call), f"attribute 'dst_vdevice' must be a VDevice, got {vdev!r}")
    if data.vdevice is not None and data.vdevice != vdev:
        return data.with_vdevice(None)
    return data


register_op(
    "hint_on_device",
    _infer_hint,
    num_inputs=1,
    attr_names=("dst_vdevice",),
    device_behavior=DeviceBehavior.ANNOTATION,
    description="asks the device planner to place data on a device",
    effects=ANNOTATION,
)
register_op(
    "to_vdevice",
    _infer_with_device,
    num_inputs=1,
    attr_names=("dst_vdevice",),
    device_behavior=DeviceBehavior.CROSS_DEVICE,
    description="copies data to another device",
)


def hint_on_device(data: E.Expr, dst_vdevice: Any, memory_scope: str | None = None) -> E.Call:
    """Places ``data`` on ``dst_vdevice`` (``R.device(kind, index)`` or a VDevice).

    ``memory_scope`` is folded into the stored VDevice, so ``attrs`` hold one key;
    it may be a ``StringImm`` (older TVM scripts spell it ``R.str("global")``).
    """
    if isinstance(memory_scope, E.StringImm):
        memory_scope = memory_scope.value
    vdev = as_vdevice("hint_on_device", dst_vdevice, memory_scope)
    return make_call("hint_on_device", [data], {"dst_vdevice": vdev})


def to_vdevice(data: E.Expr, dst_vdevice: Any) -> E.Call:
    """Copies ``data`` to ``dst_vdevice``; the result lives there."""
    return make_call("to_vdevice", [data], {"dst_vdevice": as_vdevice("to_vdevice", dst_vdevice)})
