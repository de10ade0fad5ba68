"""A symbolic arena re-packed at a call's sizes, once per distinct sizes.

Why: a plan built without bounds is one formula for every size (sound for all
of them, what ``memory_plan()`` reports and ``--fit`` sizes), but one packing
order cannot suit every size when sizes are not comparable for all values
(a transformer's ``seq x seq`` scores against its ``seq x hidden`` states):
on the exported GPT-2 and BERTs the formula is 20-45% above a static build at
the same sizes while the constant packer meets the lower bound there. So
when a call's dims are known, the arena's tensors -- the same ones, with the
same lifetimes -- are packed again at those sizes by the planner's constant
packer, and the offsets are cached per dims tuple (ONNX Runtime caches its
memory patterns per input shape in the same way). The formula's offsets are
kept wherever they are no larger, so the arena a call uses is never above the
formula at its sizes.

``memory_plan(dims=...)`` asks the same :class:`PlanSpecialiser` (the packer is
deterministic), so the predicted peak is what the VM then measures.

The spec comes from the build (``StaticPlanBlockMemory`` writes it into the
arena's facts, ``"specialise"``) or from an exported file, so it is checked
before use: a malformed one is an error naming the arena, never a crash.
The packer is the planner's own (:mod:`hetvm.arena_packing`): the call-time and
the build-time packings are one algorithm.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Mapping, Sequence

from ..arena_packing import Buffer, pack
from ..errors import HetvmRuntimeError
from .shapes import eval_prim, validate_prim

__all__ = ["PlanSpecialiser", "CACHE_SIZE", "arena_specs"]

CACHE_SIZE = 256  # dims tuples remembered per executable (least recently used dropped)


class _Spec:
    """One arena's tensors: names, sizes, lifetimes, paths, formula offsets."""

    __slots__ = ("dims", "names", "sizes", "intervals", "paths", "offsets", "total", "alignment", "index")

    def __init__(self, raw: Any, alignment: Any, where: str) -> None:
        def bad(what: str) -> HetvmRuntimeError:
            return HetvmRuntimeError(f"memory plan of {where}: malformed call-time specialisation ({what})")

        if not isinstance(raw, dict) or not isinstance(raw.get("buffers"), list):
            raise bad("no buffer list")
        dims = raw.get("dims")
        if not isinstance(dims, list) or not all(isinstance(d, str) and d for d in dims):
            raise bad("'dims' must be a list of names")
        if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment <= 0:
            raise bad(f"alignment {alignment!r}")
        self.dims = tuple(dims)
        self.alignment = alignment
        self.names: list[str] = []
        self.sizes: list[Any] = []
        self.intervals: list[tuple] = []
        self.paths: list[tuple] = []
        self.offsets: list[Any] = []
        for k, b in enumerate(raw["buffers"]):
            if not isinstance(b, dict) or not isinstance(b.get("name"), str):
                raise bad(f"buffer {k}")
            try:
                validate_prim(b.get("size"), where)
                validate_prim(b.get("offset"), where)
                intervals = tuple((int(lo), int(hi)) for lo, hi in b.get("intervals", ()))
                path = tuple((int(i), int(br)) for i, br in b.get("path", ()))
            except (TypeError, ValueError) as err:
                raise bad(f"buffer {b['name']!r}: {err}") from None
            if any(lo > hi for lo, hi in intervals):
                raise bad(f"buffer {b['name']!r}: an interval ends before it starts")
            self.names.append(b["name"])
            self.sizes.append(b["size"])
            self.intervals.append(intervals)
            self.paths.append(path)
            self.offsets.append(b["offset"])
        total = raw.get("total")
        if not isinstance(total, list) or not total:
            raise bad("'total' must be a list of candidates")
        for t in total:
            validate_prim(t, where)
        self.total = total
        self.index = {n: k for k, n in enumerate(self.names)}
        if len(self.index) != len(self.names):
            raise bad("two buffers share a name")

    def place(self, values: Sequence[int]) -> tuple[int, tuple[int, ...]]:
        """(arena bytes, offsets in buffer order) at these dim values."""
        env = dict(zip(self.dims, (int(v) for v in values)))
        sizes = [int(eval_prim(s, env)) for s in self.sizes]
        if any(n < 0 for n in sizes):
            raise HetvmRuntimeError(f"a planned tensor has a negative size at {env}")
        formula_offsets = tuple(int(eval_prim(o, env)) for o in self.offsets)
        formula_total = max(int(eval_prim(t, env)) for t in self.total)
        buffers = [Buffer(k, n, self.intervals[k], self.paths[k]) for k, n in enumerate(sizes)]
        packed = pack(buffers, self.alignment)
        if packed.total >= formula_total:
            return formula_total, formula_offsets
        return packed.total, tuple(packed.offsets[k] for k in range(len(sizes)))


def arena_specs(metadata: Mapping[str, Any]) -> dict[tuple[str, str], tuple[Any, Any]]:
    """(function, arena var) -> (raw spec, alignment) for every arena the build
    planned symbolically (``metadata["memory_plan"]``)."""
    plan = metadata.get("memory_plan")
    funcs = plan.get("functions") if isinstance(plan, dict) else None
    out: dict[tuple[str, str], tuple[Any, Any]] = {}
    if not isinstance(funcs, dict):
        return out
    for fn, facts in funcs.items():
        if not isinstance(facts, dict) or not isinstance(facts.get("devices"), dict):
            continue
        for dev in facts["devices"].values():
            for arena in (dev.get("arenas") or []) if isinstance(dev, dict) else []:
                if isinstance(arena, dict) and "specialise" in arena and isinstance(arena.get("var"), str):
                    out[(str(fn), arena["var"])] = (arena["specialise"], facts.get("alignment"))
    return out


class PlanSpecialiser:
    """The placements of one executable's symbolic arenas, per dims tuple.

    Shared by every VM of the executable and by ``memory_plan(dims=...)``;
    safe to call from several threads (a lock guards the cache; two threads
    missing together compute the same placement)."""

    def __init__(self, metadata: Mapping[str, Any], cache_size: int = CACHE_SIZE) -> None:
        self._raw = arena_specs(metadata)
        self._specs: dict[tuple[str, str], _Spec] = {}
        self._cache: OrderedDict[tuple, tuple[int, tuple[int, ...]]] = OrderedDict()
        self._lock = threading.Lock()
        self.cache_size = cache_size
        self.misses = 0
        self._flat: dict[tuple, tuple[int, ...]] = {}  # the same placements flattened, read per call

    def has(self, function: str, arena: str) -> bool:
        return (function, arena) in self._raw

    def spec(self, function: str, arena: str) -> _Spec:
        key = (function, arena)
        spec = self._specs.get(key)
        if spec is None:
            if key not in self._raw:
                raise HetvmRuntimeError(f"function '{function}' has no symbolic arena '{arena}' to specialise")
            raw, alignment = self._raw[key]
            spec = self._specs[key] = _Spec(raw, alignment, f"function '{function}', arena '{arena}'")
        return spec

    def place(self, function: str, arena: str, values: Sequence[int]) -> tuple[int, tuple[int, ...]]:
        """(arena bytes, offsets in the spec's buffer order) for dim values in
        the spec's ``dims`` order."""
        key = (function, arena, tuple(int(v) for v in values))
        with self._lock:
            got = self._cache.get(key)
            if got is not None:
                self._cache.move_to_end(key)
                return got
        got = self.spec(function, arena).place(key[2])
        with self._lock:
            self.misses += 1
            self._cache[key] = got
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return got

    def bindings(self, function: str, arena: str, env: Mapping[str, int]) -> tuple[int, ...]:
        """(arena bytes, offset, ...) at the dims of a call's shape environment
        (what ``vm.builtin.arena_plan`` binds)."""
        key = (function, arena)
        spec = self._specs.get(key) or self.spec(function, arena)
        try:
            values = tuple([env[d] for d in spec.dims])
        except KeyError as err:
            raise HetvmRuntimeError(f"the arena '{arena}' of '{function}' needs dim {err} before it is placed") from None
        got = self._flat.get((function, arena, values))
        if got is None:
            total, offsets = self.place(function, arena, values)
            got = self._flat[(function, arena, values)] = (total, *offsets)
            if len(self._flat) > self.cache_size:
                self._flat.clear()  # rebuilt from the placement cache
        return got

    def place_at(self, function: str, arena: str, dims: Mapping[str, int]) -> tuple[int, tuple[int, ...]]:
        """``place`` with dims by name (every one the arena depends on must be given)."""
        spec = self.spec(function, arena)
        missing = [d for d in spec.dims if d not in dims]
        if missing:
            raise HetvmRuntimeError(f"the arena '{arena}' of '{function}' depends on {', '.join(missing)}; give it in dims")
        return self.place(function, arena, [dims[d] for d in spec.dims])
