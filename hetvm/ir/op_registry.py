"""The operator registry: name -> inference rule, purity and device behaviour.

It lives in ``ir/`` so the BlockBuilder can infer struct info without
importing ``op/``; the ``hetvm.op`` package fills it when imported, and
``hetvm/__init__`` imports that package explicitly, so every op is
registered before any lookup (the registry never imports op definitions
behind a lookup's back).
"""

from __future__ import annotations

import difflib
import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Collection

from ..errors import StructInfoError

if TYPE_CHECKING:
    from ..op.effects import Effects
    from .expr import Call, Op
    from .struct_info import StructInfo


class DeviceBehavior(enum.Enum):
    """How an op relates to devices; the device planner reads this."""

    #: runs on the device of its tensor inputs; its outputs live there too
    FOLLOW_INPUTS = "follow_inputs"
    #: computes on the host only (shape arithmetic, shape_of, control scalars)
    HOST_ONLY = "host_only"
    #: moves data between devices (to_vdevice)
    CROSS_DEVICE = "cross_device"
    #: a hint or annotation only, no computation (hint_on_device)
    ANNOTATION = "annotation"
    #: memory management and runtime plumbing; device given by its arguments
    MEMORY = "memory"


InferFn = Callable[["Call"], "StructInfo"]


@dataclass
class OpInfo:
    """What the compiler knows about one op.

    ``attr_names`` lists the attributes the op accepts (the printer and parser
    use it); ``num_inputs`` is the exact arity, or -1 when variadic;
    ``effects`` what it does with memory (``hetvm.op.effects``; None: a pure
    computation with a result of its own).
    """

    name: str
    infer: InferFn
    pure: bool = True
    device_behavior: DeviceBehavior = DeviceBehavior.FOLLOW_INPUTS
    num_inputs: int = -1
    attr_names: tuple[str, ...] = ()
    description: str = ""
    extra: dict = field(default_factory=dict)
    effects: Effects | None = None


_REGISTRY: dict[str, OpInfo] = {}
_OPS: dict[str, Op] = {}


def register_op(
    name: str,
    infer: InferFn,
    *,
    pure: bool = True,
    device_behavior: DeviceBehavior = DeviceBehavior.FOLLOW_INPUTS,
    num_inputs: int = -1,
    attr_names: tuple[str, ...] = (),
    description: str = "",
    effects: Effects | None = None,
    **extra: object,
) -> OpInfo:
    """Registers (or replaces) an op and returns its info."""
    info = OpInfo(
        name, infer, pure, device_behavior, num_inputs, tuple(attr_names), description, dict(extra),
        effects,
    )
    _REGISTRY[name] = info
    return info


def get_op(name: str) -> Op:
    """The unique Op node for a registered op name."""
    from .expr import Op

    op = _OPS.get(name)
    if op is None:
        if name not in _REGISTRY:
            close = difflib.get_close_matches(name, list(_REGISTRY), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise StructInfoError(f"unknown op '{name}'{hint}")
        op = Op(name)
        _OPS[name] = op
    return op


def op_info(op: Op | str) -> OpInfo:
    """The registered info of an op (by node or name)."""
    name = op if isinstance(op, str) else op.name
    try:
        return _REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise StructInfoError(f"unknown op '{name}'{hint}") from None


def fused_parts(name: str) -> tuple[str, ...]:
    """The ops a fused op does the work of (``fused_from`` at registration);
    empty for other ops and for names the registry does not know."""
    info = _REGISTRY.get(name)
    return tuple(info.extra.get("fused_from", ())) if info is not None else ()


def missing_part(name: str, missing: Collection[str]) -> str | None:
    """Which of ``name`` and its fused parts is in ``missing`` (None if none is):
    a device without a kernel for ``nn.relu`` has none for a fused op that relus."""
    if not missing:
        return None
    if name in missing:
        return name
    return next((part for part in fused_parts(name) if part in missing), None)


def registered_ops() -> list[str]:
    return sorted(_REGISTRY)


def infer_call(call: Call) -> StructInfo:
    """Runs the op's inference rule, checking arity first."""
    info = op_info(call.op)  # type: ignore[arg-type]
    if info.num_inputs >= 0 and len(call.args) != info.num_inputs:
        raise StructInfoError(
            f"op '{info.name}' takes {info.num_inputs} argument(s), got {len(call.args)}"
        )
    for i, arg in enumerate(call.args):
        if arg.struct_info is None:
            raise StructInfoError(
                f"op '{info.name}': argument {i} has no struct info (normalise it first)"
            )
    return info.infer(call)
