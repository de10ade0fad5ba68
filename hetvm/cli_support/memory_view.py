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
from typing import Any, Mapping, Sequence

import numpy as np

from ..ir import expr as E
from ..ir import prim as P
from ..ir.module import IRModule
from ..op.effects import Result, symbol_effects

__all__ = ["Series", "live_series", "Block", "Arena", "CopyEvent", "Step", "Layout", "program_layout", "arena_layout", "unplanned_of"]


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
    """One tensor of the static plan: where (bytes) and when (binding positions).

    ``tensor``/``node`` are the model's names for it (naming.py) and ``op`` the
    kernel that writes it; ``outside`` says why a tensor is not in an arena
    (``returned``: a result outlives the call, so it cannot share an arena)."""

    name: str
    offset: int
    size: int
    start: int
    end: int
    tensor: str = ""
    node: str = "-"
    op: str = "-"
    device_index: int = 0
    outside: str = ""

    @property
    def label(self) -> str:
        return self.tensor or self.name


@dataclass
class Arena:
    name: str
    device_index: int
    size: int | None
    blocks: list[Block] = field(default_factory=list)
    outside_plan: bool = False

    @property
    def used(self) -> int:
        return max((b.offset + b.size for b in self.blocks), default=0)


@dataclass
class CopyEvent:
    """A copy between devices at a binding position of the lowered program."""

    position: int
    value: str
    src_index: int
    dst_index: int
    bytes: int
    copy_var: str


@dataclass
class Step:
    """One kernel call (or copy) of the lowered program, for the time axis."""

    position: int
    op: str
    output: str
    device_index: int


@dataclass
class Layout:
    """The lowered program's memory as the plan laid it out, on one time axis."""

    length: int
    arenas: list[Arena] = field(default_factory=list)
    copies: list[CopyEvent] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)

    @property
    def planned(self) -> list[Arena]:
        return [a for a in self.arenas if not a.outside_plan]

    @property
    def outside(self) -> list[Block]:
        return [b for a in self.arenas if a.outside_plan for b in a.blocks]

    def live(self, device_index: int, kills: bool = True) -> list[int]:
        """Bytes of tensors live at each position on one device (arenas' tensors,
        and the tensors outside the plan); without kills nothing is freed."""
        out = [0] * (self.length + 1)
        for a in self.arenas:
            if a.device_index != device_index:
                continue
            for b in a.blocks:
                end = b.end if kills else self.length
                for t in range(b.start, min(end, self.length) + 1):
                    out[t] += b.size
        return out


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


def _packed(value: Any) -> tuple[str, int] | None:
    """(kernel or builtin name, device index) of a ``call_packed``."""
    if not (isinstance(value, E.Call) and isinstance(value.op, E.ExternFunc)):
        return None
    name = value.op.global_symbol
    attrs = getattr(value, "attrs", None)
    dev = attrs.get("device_index", 0) if hasattr(attrs, "get") else 0
    return name, int(dev or 0)


def is_view_builtin(kernel: str) -> bool:
    """A builtin that makes a view of a tensor (declared VIEW): a tensor first seen by
    one is written through its views (ConcatInPlace computes a concatenation's parts
    straight into it)."""
    return symbol_effects(kernel).result is Result.VIEW


def _short(kernel: str) -> str:
    if kernel == "vm.builtin.copy_to":
        return "copy"
    for prefix in ("kernel.", "vm.builtin."):
        if kernel.startswith(prefix):
            return kernel[len(prefix):]
    return kernel


def program_layout(lowered: IRModule, func_name: str = "main", names: Mapping[str, Any] | None = None,
                   unplanned: Mapping[str, str] | None = None) -> Layout:  # fmt: skip
    """The arenas, the tensors outside them, the copies and the kernel calls of
    ``func_name``, all on the axis of its binding positions.

    ``names`` (variable -> :class:`~.naming.Origin`) gives each tensor the model's
    names; ``unplanned`` (tensor -> reason, from the memory plan) marks storages
    outside the plan. A returned tensor is outside the plan whatever it says.
    """
    from .naming import display

    names = names or {}
    func = lowered[func_name]
    bindings = list(E.bindings_of(func.body.blocks))
    returned = {v.name_hint for v in _vars_in(func.body.body)}
    storages: dict[E.Var, Arena] = {}
    placed: dict[E.Var, tuple[Arena, int, int, int]] = {}
    writer: dict[E.Var, str] = {}
    last_use: dict[E.Var, int] = {}
    killed_at: dict[E.Var, int] = {}
    device_of: dict[E.Var, int] = {}
    layout = Layout(len(bindings))
    for pos, b in enumerate(bindings):
        value = E.binding_value(b)
        op = _op(value)
        if op == "memory.alloc_storage":
            storages[b.var] = Arena(b.var.name_hint, _int(value.args[1]) or 0, _int(value.args[0]))
        elif op == "memory.alloc_tensor" and value.args and value.args[0] in storages:
            count = _int(value.args[2])
            size = (count or 0) * np.dtype(_dtype(value.args[3]) or "float32").itemsize
            placed[b.var] = (storages[value.args[0]], _int(value.args[1]) or 0, size, pos)
            device_of[b.var] = storages[value.args[0]].device_index
        elif op in ("memory.kill_tensor", "memory.kill_storage") and value.args and isinstance(value.args[0], E.Var):
            killed_at.setdefault(value.args[0], pos)
            continue
        packed = _packed(value)
        if packed is not None:
            kernel, dev = packed
            args = [a for a in value.args if isinstance(a, E.Var)]
            outs = [a for a in args if a in placed and a not in writer]
            for o in outs:  # destination-passing: the first call to see a tensor writes it
                writer[o] = "in place (views)" if is_view_builtin(kernel) else _short(kernel)
            out_name = outs[-1].name_hint if outs else b.var.name_hint
            if is_view_builtin(kernel) and args and args[0] in device_of:
                device_of[b.var] = device_of[args[0]]  # a view lives where its tensor does
            if kernel == "vm.builtin.copy_to" and len(value.args) >= 3 and isinstance(value.args[0], E.Var):
                dst = value.args[2]
                src_dev = device_of.get(value.args[0], -1)
                dst_dev = _int(value.args[1])
                layout.copies.append(CopyEvent(pos, display(value.args[0].name_hint, names),
                                               src_dev, dst_dev if dst_dev is not None else dev,
                                               placed[dst][2] if dst in placed else 0,
                                               getattr(dst, "name_hint", "")))  # fmt: skip
                dev = dst_dev if dst_dev is not None else dev
            layout.steps.append(Step(pos, _short(kernel), display(out_name, names), dev))
        for v in _vars_in(value):
            last_use[v] = pos
    for v in _vars_in(func.body.body):
        last_use[v] = len(bindings)
    unplanned = dict(unplanned or {})
    for var, (arena, offset, size, start) in placed.items():
        name = var.name_hint
        outside = unplanned.get(name) or ("returned" if name in returned else "")
        end = len(bindings) if name in returned else killed_at.get(var, last_use.get(var, start))
        origin = names.get(name)
        arena.blocks.append(Block(name, offset, size, start, max(end, start),
                                  tensor=display(name, names),
                                  node=origin.node_text() if origin is not None else "-",
                                  op=writer.get(var, "-"), device_index=arena.device_index,
                                  outside=outside))  # fmt: skip
    for arena in storages.values():
        if arena.blocks:
            arena.outside_plan = all(b.outside for b in arena.blocks)
            layout.arenas.append(arena)
    return layout


def unplanned_of(exe: Any) -> dict[str, str]:
    """Tensor -> why the memory plan left it out (``returned``, ...), from ``exe.memory_plan()``."""
    from .reports import plan_of

    out: dict[str, str] = {}
    for figures in plan_of(exe).values():
        for entry in figures.get("unplanned", []) or []:
            if isinstance(entry, Mapping) and "name" in entry:
                out[str(entry["name"])] = str(entry.get("reason", "unplanned"))
    return out


def arena_layout(lowered: IRModule, func_name: str = "main") -> list[Arena]:
    """The planned arenas of ``func_name`` and the tensors placed in them
    (storages outside the plan included, marked ``outside_plan``)."""
    return program_layout(lowered, func_name).arenas
