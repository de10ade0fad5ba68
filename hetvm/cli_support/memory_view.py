"""Memory over time, for ``hetvm plan --memory`` and its plot.

Two views:

* :func:`live_series` — bytes in use per device after every allocator event of
  a traced run (``VirtualMachine(exe, trace=True)``), *with* the kills as they
  happened, and *without* them: the running sum of allocations with no frees
  before the call returns. Without kills nothing is ever released mid-call, and
  nothing released means nothing reused, so that sum is exactly what a run of
  the same program without ``KillAfterLastUse`` would hold.
* :func:`arena_layout` — where the static memory plan put each tensor: per
  arena (``memory.alloc_storage``), every ``memory.alloc_tensor`` with its byte
  offset, size, and lifetime in binding positions (from its allocation to its
  kill, else its last use), read from the lowered module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..ir import expr as E
from ..ir import prim as P
from ..ir.module import IRModule

__all__ = ["Series", "live_series", "Block", "Arena", "arena_layout"]


@dataclass
class Series:
    """One device's bytes in use, event by event."""

    device: str
    steps: list[int] = field(default_factory=list)
    with_kills: list[int] = field(default_factory=list)
    without_kills: list[int] = field(default_factory=list)

    @property
    def peak(self) -> int:
        return max(self.with_kills, default=0)

    @property
    def peak_without_kills(self) -> int:
        return max(self.without_kills, default=0)


def live_series(events: Sequence[dict]) -> dict[str, Series]:
    """Per device, bytes live after each alloc/free event (step = event index)."""
    out: dict[str, Series] = {}
    live: dict[str, int] = {}
    total: dict[str, int] = {}
    for i, ev in enumerate(events):
        kind = ev.get("event")
        if kind not in ("alloc", "free"):
            continue
        dev = str(ev.get("device"))
        nbytes = int(ev.get("bytes") or 0)
        s = out.setdefault(dev, Series(dev))
        if kind == "alloc":
            total[dev] = total.get(dev, 0) + nbytes
        in_use = ev.get("bytes_in_use")
        if in_use is None:
            in_use = live.get(dev, 0) + (nbytes if kind == "alloc" else -nbytes)
        live[dev] = int(in_use)
        s.steps.append(i)
        s.with_kills.append(live[dev])
        s.without_kills.append(total.get(dev, 0))
    return out


@dataclass
class Block:
    name: str
    offset: int
    size: int
    start: int
    end: int


@dataclass
class Arena:
    name: str
    device_index: int
    size: int | None
    blocks: list[Block] = field(default_factory=list)

    @property
    def used(self) -> int:
        return max((b.offset + b.size for b in self.blocks), default=0)


def _op(value: Any) -> str | None:
    if isinstance(value, E.Call) and isinstance(value.op, E.Op):
        return value.op.name
    return None


def _int(expr: Any) -> int | None:
    if isinstance(expr, E.PrimValue):
        return P.const_value(expr.value)
    if isinstance(expr, E.ShapeExpr):
        vals = [P.const_value(v) for v in expr.values]
        return int(np.prod(vals)) if all(v is not None for v in vals) else None
    return None


def _dtype(expr: Any) -> str | None:
    return getattr(expr, "value", None) if isinstance(expr, (E.DataTypeImm, E.StringImm)) else None


def _vars_in(expr: Any) -> list[E.Var]:
    if isinstance(expr, E.Var):
        return [expr]
    if isinstance(expr, E.Call):
        return [v for a in expr.args for v in _vars_in(a)]
    if isinstance(expr, E.Tuple):
        return [v for f in expr.fields for v in _vars_in(f)]
    if isinstance(expr, E.TupleGetItem):
        return _vars_in(expr.tuple_value)
    return []


def arena_layout(lowered: IRModule, func_name: str = "main") -> list[Arena]:
    """The planned arenas of ``func_name`` and the tensors placed in them."""
    func = lowered[func_name]
    bindings = list(E.bindings_of(func.body.blocks))
    arenas: dict[E.Var, Arena] = {}
    placed: dict[E.Var, tuple[Arena, int, int, int]] = {}
    last_use: dict[E.Var, int] = {}
    killed_at: dict[E.Var, int] = {}
    for pos, b in enumerate(bindings):
        value = E.binding_value(b)
        op = _op(value)
        if op == "memory.alloc_storage":
            size = _int(value.args[0])
            dev = _int(value.args[1]) or 0
            arenas[b.var] = Arena(b.var.name_hint, dev, size)
        elif op == "memory.alloc_tensor" and value.args and value.args[0] in arenas:
            offset = _int(value.args[1]) or 0
            count = _int(value.args[2])
            dtype = _dtype(value.args[3]) or "float32"
            size = (count or 0) * np.dtype(dtype).itemsize
            placed[b.var] = (arenas[value.args[0]], offset, size, pos)
        elif op == "memory.kill_tensor" and value.args and isinstance(value.args[0], E.Var):
            killed_at[value.args[0]] = pos
            continue
        for v in _vars_in(value):
            last_use[v] = pos
    for v in _vars_in(func.body.body):
        last_use[v] = len(bindings)
    for var, (arena, offset, size, start) in placed.items():
        end = killed_at.get(var, last_use.get(var, start))
        arena.blocks.append(Block(var.name_hint, offset, size, start, max(end, start)))
    return [a for a in arenas.values() if a.blocks]
