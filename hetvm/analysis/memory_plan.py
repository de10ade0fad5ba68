"""The memory plan's report, and an invariant check that no live tensors overlap.

``memory_plan_report(mod)`` answers "how good is the plan and what will the
runtime see": per function and device index, the arena bytes, the lower bound
any plan must meet, the bytes without any reuse, whether returned tensors sit
in the plan, and the peak the runtime allocator will report for one call
(simulated, see ``hetvm.analysis.peak``: on the lowered
program as it is, or right after planning with the kills the liveness
analysis says KillAfterLastUse will insert -- the report runs no pass).

``check_no_overlap(mod)`` re-derives every carved tensor's lifetime and byte
range from the IR itself (not from the plan's facts) and raises
``MemoryPlanError`` naming both tensors when two live at once share a byte.
"""

from __future__ import annotations

from typing import Any

from ..errors import MemoryPlanError
from ..ir import expr as E
from ..ir import prim as P
from ..ir.module import IRModule
from ..op.effects import is_carve, is_kill, is_storage_alloc
from .liveness import analyze_liveness, conflicts
from .peak import predict_peak
from .sizes import declared_upper_bounds, shape_nbytes

__all__ = ["memory_plan_report", "check_no_overlap", "PLAN_ATTR"]

PLAN_ATTR = "memory_plan"


def _op_name(value: Any) -> str | None:
    if isinstance(value, E.Call) and isinstance(value.op, E.Op):
        return value.op.name
    return None


def _bindings(seq: E.SeqExpr):
    """Every binding of a body, branches of Ifs included."""
    for block in seq.blocks:
        for b in block.bindings:
            yield b
            value = b.value  # type: ignore[attr-defined]
            if isinstance(value, E.If):
                yield from _bindings(value.true_branch)
                yield from _bindings(value.false_branch)


def _kills_pending(mod: IRModule) -> bool:
    """True unless the module is already after LowerAllocTensor + KillAfterLastUse
    (then its kills are still to come: the simulation replays them)."""
    has_kill = False
    for func in mod.functions.values():
        for b in _bindings(func.body):
            name = _op_name(b.value)  # type: ignore[attr-defined]
            if name == "builtin.alloc_tensor":
                return True
            has_kill |= is_kill(b.value)  # type: ignore[attr-defined]
    return not has_kill


def memory_plan_report(mod: IRModule) -> dict[str, dict[int, dict[str, Any]]]:
    """Per function name, per device index: the plan's figures.

    Keys of each device entry: ``planned_bytes``, ``lower_bound_bytes``,
    ``no_reuse_bytes``, ``outputs_in_plan``, ``predicted_peak_bytes`` (None when
    a size is unbounded), ``predicted_peak_exact`` (False when symbolic sizes
    were counted at their upper bound or an If path cap was hit),
    ``memory_scope``, ``num_planned``, ``unplanned`` (name, reason, nbytes).
    Device keys are ints (JSON turns them into strings).
    ``predicted_peak_bytes`` counts only what the call allocates: parameters
    come from outside.
    """
    plan = mod.attrs.get(PLAN_ATTR)
    if not isinstance(plan, dict) or "functions" not in plan:
        raise MemoryPlanError(
            "module has no memory plan (mod.attrs['memory_plan']); run StaticPlanBlockMemory first"
        )
    # right after planning, the kills are the liveness analysis's kill points
    # (what KillAfterLastUse will insert), replayed by the simulation: no pass runs
    derive_kills = _kills_pending(mod)
    report: dict[str, dict[int, dict[str, Any]]] = {}
    for name, facts in plan["functions"].items():
        if name not in mod:
            continue
        prediction = predict_peak(mod, name, derive_kills)
        devices: dict[int, dict[str, Any]] = {}
        fact_devs = {int(k): v for k, v in facts.get("devices", {}).items()}
        for dev in sorted(set(fact_devs) | set(prediction.peak)):
            d = fact_devs.get(dev, {})
            devices[dev] = {
                "planned_bytes": d.get("planned_bytes", 0),
                "lower_bound_bytes": d.get("lower_bound_bytes", 0),
                "no_reuse_bytes": d.get("no_reuse_bytes", 0),
                "outputs_in_plan": bool(facts.get("outputs_in_plan", False)),
                "predicted_peak_bytes": prediction.peak.get(dev, 0),
                "predicted_peak_exact": prediction.complete and prediction.exact.get(dev, True),
                "memory_scope": d.get("memory_scope", "global"),
                "num_planned": d.get("num_planned", 0),
                "unplanned": [
                    {k: u[k] for k in ("name", "reason", "nbytes")}
                    for u in facts.get("unplanned", [])
                    if u.get("device") == dev
                ],
            }
        report[name] = devices
    return report


def _storage_sizes(func: E.Function, bounds: dict[str, int]) -> dict[E.Var, int | None]:
    out: dict[E.Var, int | None] = {}
    for b in _bindings(func.body):
        value = b.value  # type: ignore[attr-defined]
        if is_storage_alloc(value) and isinstance(value.args[0], E.ShapeExpr):
            out[b.var] = shape_nbytes(value.args[0].values, "uint8", bounds).nbytes
    return out


def _check_function(name: str, func: E.Function, mod: IRModule) -> int:
    bounds = declared_upper_bounds(func, name)
    storages = _storage_sizes(func, bounds)
    live = analyze_liveness(func, mod, name)
    value_of = live.values.value_of
    carved = [loc for loc in live.values.locs if is_carve(value_of.get(loc.var))]  # type: ignore[arg-type]
    intervals = {loc.var: live.intervals[loc] for loc in carved}
    paths = {loc.var: live.path.get(loc, ()) for loc in carved}
    groups: dict[E.Var, list[tuple[E.Var, int, int]]] = {}
    carved_from: dict[E.Expr, int] = {}
    for loc in carved:
        storage = value_of[loc.var].args[0]  # type: ignore[attr-defined,index]
        carved_from[storage] = carved_from.get(storage, 0) + 1
    for loc in carved:
        var = loc.var
        assert var is not None
        call = value_of[var]
        storage, offset_arg, shape, dtype = call.args[:4]
        offset = P.const_value(offset_arg.value) if isinstance(offset_arg, E.PrimValue) else None
        if offset is None or not isinstance(shape, E.ShapeExpr) or not isinstance(dtype, E.DataTypeImm):
            raise MemoryPlanError(
                f"function {name}: tensor '{var.name_hint}' has a non-constant offset or shape"
            )
        size = shape_nbytes(shape.values, dtype.value, bounds).nbytes
        if size is None and offset == 0 and carved_from.get(storage) == 1:
            continue  # a storage of its own (sized at run time): nothing to overlap
        if size is None:
            raise MemoryPlanError(
                f"function {name}: tensor '{var.name_hint}' is carved from storage with an "
                "unbounded symbolic size"
            )
        cap = storages.get(storage) if isinstance(storage, E.Var) else None
        if offset < 0 or (cap is not None and offset + size > cap):
            raise MemoryPlanError(
                f"function {name}: tensor '{var.name_hint}' at offset {offset} ({size} bytes) does "
                f"not fit its storage of {cap} bytes"
            )
        if isinstance(storage, E.Var):
            groups.setdefault(storage, []).append((var, offset, size))
    checked = 0
    for storage, members in groups.items():
        items = [(intervals[v], paths[v]) for v, _, _ in members]
        for i, neighbours in enumerate(conflicts(items)):
            vi, oi, si = members[i]
            for j in neighbours:
                if j <= i:
                    continue
                vj, oj, sj = members[j]
                checked += 1
                if si and sj and oi < oj + sj and oj < oi + si:
                    raise MemoryPlanError(
                        f"function {name}: tensors '{vi.name_hint}' (bytes {oi}..{oi + si} of "
                        f"'{storage.name_hint}', live {list(intervals[vi])}) and "
                        f"'{vj.name_hint}' (bytes {oj}..{oj + sj}, live "
                        f"{list(intervals[vj])}) are live at the same time and overlap"
                    )
    return checked


def check_no_overlap(mod: IRModule) -> dict[str, int]:
    """Raises MemoryPlanError if two simultaneously live tensors share bytes.

    Works on the module after StaticPlanBlockMemory or after any later pass.
    Returns, per function, how many pairs of simultaneously live tensors of
    one storage were compared (useful to see a test exercised something).
    """
    return {name: _check_function(name, func, mod) for name, func in mod.functions.items()}
