"""Packed-function calls: ``call_dps_packed`` (an op), ``call_packed`` (a plain
Call of an ExternFunc, as in Relax) and ``null_value``."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import StructInfoError
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.vdevice import VDevice
from .attrs import as_tuple_arg
from .base import DeviceBehavior, describe_arg, fail, make_call, register_op
from .effects import NO_MEMORY

__all__ = ["call_dps_packed", "call_packed", "null_value"]


def _as_extern(op: str, func: Any) -> E.Expr:
    if isinstance(func, str):
        return E.ExternFunc(func)
    if isinstance(func, E.Expr):
        return func
    raise fail(op, f"func must be an ExternFunc or a name, got {func!r}")


def _out_sinfo(op: str, out_sinfo: Any) -> S.StructInfo:
    """One struct info; a list of several becomes a TupleStructInfo (as in Relax)."""
    if isinstance(out_sinfo, (list, tuple)):
        items = list(out_sinfo)
        if len(items) == 1:
            out_sinfo = items[0]
        else:
            out_sinfo = S.TupleStructInfo(items)
    if not isinstance(out_sinfo, S.StructInfo):
        raise fail(op, f"out_sinfo must be struct info, got {out_sinfo!r}")
    return out_sinfo


def _infer_call_dps_packed(call: E.Call) -> S.StructInfo:
    if not call.sinfo_args:
        raise fail("call_dps_packed", "needs out_sinfo (the struct info of its outputs)")
    if not isinstance(call.args[1].struct_info, S.TupleStructInfo):
        raise fail("call_dps_packed", f"args must be a tuple, got {describe_arg(call.args[1])}")
    return call.sinfo_args[0]


register_op(
    "call_dps_packed",
    _infer_call_dps_packed,
    num_inputs=2,
    attr_names=("op_attrs", "device"),
    device_behavior=DeviceBehavior.MEMORY,
    description="destination-passing call of a packed function (kernel)",
)
register_op(
    "null_value",
    lambda call: S.ObjectStructInfo(),
    num_inputs=0,
    device_behavior=DeviceBehavior.MEMORY,
    description="a null object",
    effects=NO_MEMORY,
)


def call_dps_packed(
    func: Any,
    args: Any,
    out_sinfo: Any,
    op_attrs: Mapping[str, Any] | None = None,
    device: VDevice | None = None,
) -> E.Call:
    """Calls ``func`` with ``args`` plus freshly allocated outputs described by ``out_sinfo``.

    ``op_attrs`` and ``device`` are set by LegalizeOps (CONTRACTS.md section 2);
    they are stored only when given.
    """
    op = "call_dps_packed"
    attrs: dict[str, Any] = {}
    if op_attrs is not None:
        attrs["op_attrs"] = E.Attrs(dict(op_attrs))
    if device is not None:
        if not isinstance(device, VDevice):
            raise fail(op, f"device must be a VDevice, got {device!r}")
        attrs["device"] = device
    if isinstance(args, E.Expr) and not isinstance(args.struct_info, S.TupleStructInfo):
        args = E.Tuple((args,))  # TVM: one bare argument is a tuple of one
    call_args = [_as_extern(op, func), as_tuple_arg(op, args)]
    return make_call(op, call_args, attrs, [_out_sinfo(op, out_sinfo)])


def _packed_arg(value: Any) -> E.Expr:
    if isinstance(value, E.Expr):
        return value
    if isinstance(value, str):
        return E.StringImm(value)
    if isinstance(value, (bool, np.bool_)):
        return E.PrimValue(int(value))
    if isinstance(value, (int, float, np.integer, np.floating)):
        return E.PrimValue(value.item() if isinstance(value, np.generic) else value)
    if isinstance(value, P.PrimExpr):  # TVM prints prim values bare: T.float32(2.5), n * 2
        return E.PrimValue(value)
    raise StructInfoError(f"call_packed: cannot pass {value!r} as an argument")


def call_packed(
    func: Any,
    *args: Any,
    sinfo_args: S.StructInfo | Sequence[S.StructInfo] | None = None,
    **attrs: Any,
) -> E.Call:
    """``R.call_packed(name, *args, sinfo_args=...)``: a Call of ``ExternFunc(name)``.

    Not an op. The struct info is ``sinfo_args[0]``, or Object when none is given.
    Extra keywords become ``Call.attrs`` (e.g. ``op_attrs``, ``device_index``).
    """
    callee = _as_extern("call_packed", func)
    if sinfo_args is None:
        sinfos: tuple[S.StructInfo, ...] = ()
    elif isinstance(sinfo_args, S.StructInfo):
        sinfos = (sinfo_args,)
    else:
        sinfos = tuple(sinfo_args)
    for s in sinfos:
        if not isinstance(s, S.StructInfo):
            raise StructInfoError(f"call_packed: sinfo_args must be struct info, got {s!r}")
    sinfo = sinfos[0] if sinfos else S.ObjectStructInfo()
    norm = {k: (E.Attrs(v) if isinstance(v, dict) else v) for k, v in attrs.items()}
    return E.Call(
        callee, tuple(_packed_arg(a) for a in args), E.Attrs(norm), sinfos, struct_info=sinfo
    )


def null_value() -> E.Call:
    """A null object (``R.null_value()``)."""
    return make_call("null_value", [])
