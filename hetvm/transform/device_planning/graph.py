"""The placement problem: values, domains and demands collected from a module.

* A **value** is one runtime tensor (a leaf of a variable's struct info): a
  parameter, an op result, a call result, an ``If`` result, or a *copy value*
  (``hint_on_device`` / ``to_vdevice``: the same data as its ``origin`` wanted on a
  device). Aliases (``y = x``, tuples, projections, match_cast) are the same value.
* A **domain** is a group of values that must share one device: the outputs of
  one op (the op runs where they live), a call's results and the callee's
  result. Domains are merged with union-find; a pin, a kernel restriction and
  a label travel with the root.
* A **demand** says "value v is read on the device of domain w" (an op input, a
  call argument, a branch result) or "on device d" (a hint, an explicit copy,
  an ``If`` condition on the host, a declared return type). A demand the
  placement does not meet costs one copy, shared by every demand for the same
  (value, device).

Variables map to *trees* of value ids: an int for a tensor, a tuple for a
tuple, ``None`` for anything else and :data:`CONST` for a constant (the runtime
materialises constants on the device that reads them, so they never need a copy).
Only a constant's own names (``y = c``, a hint or copy of one) are :data:`CONST`:
a match_cast of a constant, or a tuple holding one, is bound once on one device,
so each such leaf is a value of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from ...analysis.trip_counts import TripCount
from ...errors import DevicePlanError
from ...ir import prim as P
from ...ir import struct_info as S
from ...ir.span import Span
from .devices import DeviceKey, key_str

CONST = -1
Tree = Union[int, tuple, None]

#: fallback extent of a symbolic dimension without a declared upper bound, for costs only
UNKNOWN_DIM = 64


def where(span: Span | None) -> str:
    return f" at {span}" if span is not None else ""


@dataclass
class Constraint:
    """Why a domain must be on a device (a pin), for error messages and explain."""

    device: DeviceKey
    what: str
    span: Span | None = None

    def describe(self) -> str:
        return f"{self.what} wants {key_str(self.device)}{where(self.span)}"


@dataclass
class Domain:
    id: int
    label: str
    span: Span | None = None
    op: str | None = None
    pin: Constraint | None = None
    #: devices this domain may not use, with the reason (missing kernels)
    excluded: dict[DeviceKey, str] = field(default_factory=dict)


@dataclass
class Value:
    id: int
    name: str
    func: str
    nbytes: int
    domain: int
    origin: int | None = None
    span: Span | None = None
    sinfo: Any = None


@dataclass
class Demand:
    """Value ``value`` is read on domain ``domain`` or on device ``device``."""

    value: int
    kind: str  # op-input | call-arg | return | if-result | if-cond | hint | to_vdevice | annotation
    consumer: str
    reason: str
    span: Span | None = None
    domain: int | None = None
    device: DeviceKey | None = None


class Problem:
    """All values, domains (union-find) and demands of a module."""

    def __init__(self) -> None:
        self.values: list[Value] = []
        self.domains: list[Domain] = []
        self.parent: list[int] = []
        self.demands: list[Demand] = []
        #: function name -> how many times one call of ``main`` may run its body
        #: (a loop's iterations, see :func:`loop_repeats`); 1 when absent
        self.repeats: dict[str, int] = {}
        #: functions that are loops (call themselves in tail position)
        self.loops: set[str] = set()
        #: loops whose iterations are known at compile time (see analysis/trip_counts.py)
        self.trip_counts: dict[str, TripCount] = {}

    # -- domains -------------------------------------------------------------
    def new_domain(self, label: str, span: Span | None = None, op: str | None = None) -> int:
        d = Domain(len(self.domains), label, span, op)
        self.domains.append(d)
        self.parent.append(d.id)
        return d.id

    def find(self, d: int) -> int:
        root = d
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[d] != root:
            self.parent[d], d = root, self.parent[d]
        return root

    def pin(self, d: int, constraint: Constraint, value_name: str) -> None:
        dom = self.domains[self.find(d)]
        if dom.pin is not None and dom.pin.device != constraint.device:
            raise DevicePlanError(
                f"value '{value_name}' cannot satisfy both constraints: "
                f"{dom.pin.describe()}, and {constraint.describe()}"
            )
        if dom.pin is None:
            dom.pin = constraint

    def union(self, a: int, b: int, value_name: str) -> int:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return ra
        if rb < ra:
            ra, rb = rb, ra
        da, db = self.domains[ra], self.domains[rb]
        if db.pin is not None:
            self.pin(ra, db.pin, value_name)
        for k, why in db.excluded.items():
            da.excluded.setdefault(k, why)
        self.parent[rb] = ra
        return ra

    # -- values --------------------------------------------------------------
    def new_value(
        self, name: str, func: str, nbytes: int, domain: int, span: Span | None = None,
        origin: int | None = None, sinfo: Any = None,
    ) -> int:
        v = Value(len(self.values), name, func, nbytes, domain, origin, span, sinfo)
        self.values.append(v)
        return v.id

    def root_value(self, v: int) -> int:
        """The value whose data a copy value carries (itself for a produced value)."""
        while self.values[v].origin is not None:
            v = self.values[v].origin  # type: ignore[assignment]
        return v

    def demand(self, d: Demand) -> None:
        if d.value != CONST:
            self.demands.append(d)


# --------------------------------------------------------------------------
# trees
# --------------------------------------------------------------------------


def leaves(tree: Tree) -> list[int]:
    """Value ids of a tree in order (constants and non-tensors left out)."""
    if tree is None or tree == CONST:
        return []
    if isinstance(tree, int):
        return [tree]
    out: list[int] = []
    for t in tree:
        out.extend(leaves(t))
    return out


def zip_leaves(a: Tree, b: Any) -> list[tuple[int, Any]]:
    """Pairs of (value leaf of ``a``, matching leaf of ``b``) for same-shaped trees."""
    if a is None or a == CONST:
        return []
    if isinstance(a, int):
        return [(a, b)]
    out: list[tuple[int, Any]] = []
    if isinstance(b, tuple) and len(b) == len(a):
        for x, y in zip(a, b):
            out.extend(zip_leaves(x, y))
    return out


def tensor_nbytes(sinfo: S.TensorStructInfo, bounds: dict[str, int]) -> int:
    """Bytes of a tensor for the cost model (symbolic dims use bounds or a fallback)."""
    if sinfo.dtype is None:
        item = 4
    else:
        try:
            item = S.dtype_nbytes(sinfo.dtype)
        except Exception:  # noqa: BLE001 - an odd dtype costs like float32
            item = 4
    if sinfo.shape is None:
        dims = [UNKNOWN_DIM] * max(sinfo.ndim, 1)
    else:
        dims = []
        for d in sinfo.shape:
            c = P.const_value(d)
            if c is None:
                c = bounds.get(P.to_str(d), UNKNOWN_DIM)
            dims.append(int(c))
    n = item
    for d in dims:
        n *= max(d, 0)
    return n
