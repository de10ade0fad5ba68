"""The copy report: from ``hetvm.explain`` when present, else from the IR.

The device planner's ``explain`` gives the reasons; when a build of hetvm has
no ``explain`` (or it fails on a program) the command line still lists every
``to_vdevice`` the planned module contains, with both devices and its bytes,
so ``hetvm run``/``explain`` never print "no copies" when copies exist.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.module import IRModule

__all__ = ["CopyEntry", "CopyReport", "copies_from_module"]


@dataclass
class CopyEntry:
    value: str
    src: str
    dst: str
    bytes: int | None
    consumers: list[str] = field(default_factory=list)
    reason: str = "-"
    pass_name: str = "PlanDevices"


@dataclass
class CopyReport:
    copies: list[CopyEntry] = field(default_factory=list)


def _dev(sinfo: Any, default: str) -> str:
    if isinstance(sinfo, S.TensorStructInfo) and sinfo.vdevice is not None:
        return f"{sinfo.vdevice.kind}:{sinfo.vdevice.vdevice_id}"
    return default


def _nbytes(sinfo: Any) -> int | None:
    if isinstance(sinfo, S.TensorStructInfo) and sinfo.shape is not None and sinfo.dtype:
        dims = [P.const_value(d) for d in sinfo.shape]
        if all(d is not None for d in dims):
            return int(np.prod(dims, dtype=np.int64)) * np.dtype(sinfo.dtype).itemsize
    return None


def copies_from_module(mod: IRModule, default: str = "cpu:0") -> CopyReport:
    """One entry per ``to_vdevice`` in the module's functions."""
    report = CopyReport()
    for fname, func in mod.functions.items():
        if not isinstance(func, E.Function):
            continue
        bindings = list(E.bindings_of(func.body.blocks))
        users: dict[E.Var, list[str]] = {}
        for b in bindings:
            value = E.binding_value(b)
            if isinstance(value, E.Call):
                for a in value.args:
                    if isinstance(a, E.Var):
                        users.setdefault(a, []).append(b.var.name_hint)
        for b in bindings:
            value = E.binding_value(b)
            if not (isinstance(value, E.Call) and isinstance(value.op, E.Op) and value.op.name == "to_vdevice"):
                continue
            src = value.args[0]
            report.copies.append(
                CopyEntry(
                    value=getattr(src, "name_hint", "?") + ("" if fname == "main" else f" (in {fname})"),
                    src=_dev(getattr(src, "struct_info", None), default),
                    dst=_dev(b.var.struct_info, default),
                    bytes=_nbytes(b.var.struct_info),
                    consumers=users.get(b.var, []),
                )
            )
    return report
