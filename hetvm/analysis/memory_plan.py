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

from typing import Any, Mapping

from ..errors import MemoryPlanError
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..op.effects import is_carve, is_kill, is_storage_alloc
from .liveness import analyze_liveness, conflicts
from .peak import predict_peak
from .sizes import declared_upper_bounds, shape_nbytes
from .symbolic_bytes import ByteMax, candidates_of, provably_le

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
        at_call = _specialised_prediction(mod, name, facts, derive_kills)
        devices: dict[int, dict[str, Any]] = {}
        fact_devs = {int(k): v for k, v in facts.get("devices", {}).items()}
        for dev in sorted(set(fact_devs) | set(prediction.peak)):
            d = fact_devs.get(dev, {})
            devices[dev] = entry = {
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
            _symbolic_figures(entry, d, prediction.symbolic.get(dev))
            if at_call is not None and "predicted_peak_bytes_expr" in entry:
                _specialised_figures(entry, d, at_call, dev)
        report[name] = devices
    return report


ARENA_ATOM = "%arena:"  # the name of an arena's size in a specialised prediction (no dim is named so)


def _specialised_prediction(mod: IRModule, name: str, facts: dict, derive_kills: bool) -> Any:
    """The peak simulation with the size of each arena the VM re-packs at call
    time (``"specialise"`` in its facts) as an atom ``%arena:<var>``: a
    maximum over expressions in the dims and those atoms, which
    ``memory_plan(dims=...)`` evaluates with the arenas' sizes at ``dims``
    (``runtime/plan_specialise.py``). None when the function has no such arena."""
    names = {a["var"] for d in facts.get("devices", {}).values() for a in d.get("arenas", []) if "specialise" in a}
    if not names:
        return None
    func = mod[name]
    blocks = []
    for block in func.body.blocks:
        bindings = []
        for b in block.bindings:
            value = b.value  # type: ignore[attr-defined]
            if isinstance(b, E.VarBinding) and b.var.name_hint in names and is_storage_alloc(value):
                size = E.ShapeExpr((P.PrimVar(ARENA_ATOM + b.var.name_hint),))
                b = E.VarBinding(b.var, E.replace(value, args=(size, *value.args[1:])), span=b.span)
            bindings.append(b)
        blocks.append(type(block)(tuple(bindings), span=block.span))
    body = E.SeqExpr(tuple(blocks), func.body.body, struct_info=func.body.struct_info, span=func.body.span)
    return predict_peak(mod.with_functions({**mod.functions, name: E.replace(func, body=body)}), name, derive_kills)


def _specialised_figures(entry: dict[str, Any], facts: dict[str, Any], prediction: Any, dev: int) -> None:
    """What ``memory_plan(dims=...)`` evaluates for a device with re-packed
    arenas: the peak with the arenas as atoms and, per arena, its size (an int
    for a constant arena, else its name: the VM's placement decides)."""
    peak = prediction.symbolic.get(dev)
    if peak is None:
        return
    entry["at_call"] = {
        "predicted_peak_bytes_expr": peak.serialize(),
        "arenas": [a["var"] if "specialise" in a else a.get("nbytes") for a in facts.get("arenas", [])],
    }


SYMBOLIC_FIGURES = ("planned_bytes", "lower_bound_bytes", "no_reuse_bytes", "predicted_peak_bytes")


def _symbolic_figures(entry: dict[str, Any], facts: dict[str, Any], peak: ByteMax | None) -> None:
    """Figures that depend on unbounded shape variables: the int is None, and
    ``<figure>_expr`` (serialised candidates of a maximum, for
    ``Executable.memory_plan(dims=...)``), ``formulas`` (text) and
    ``free_dims`` (the variables' names) say what it is."""
    formulas: dict[str, str] = {}
    names: set[str] = set()
    for key in SYMBOLIC_FIGURES[:3]:
        if f"{key}_expr" in facts:
            entry[f"{key}_expr"] = facts[f"{key}_expr"]
            formulas[key] = facts.get("formulas", {}).get(key, "?")
            names |= _names_in(facts[f"{key}_expr"])
    if peak is not None:
        entry["predicted_peak_bytes_expr"] = peak.serialize()
        formulas["predicted_peak_bytes"] = peak.formula()
        names |= {v.name for v in peak.free_vars()}
    if "least_bytes" in facts:
        entry["least_bytes"] = facts["least_bytes"]
    if formulas:
        entry["formulas"] = formulas
        entry["free_dims"] = sorted(names)


def _names_in(serialized: Any) -> set[str]:
    if isinstance(serialized, list) and serialized:
        if serialized[0] == "var" and len(serialized) == 2:
            return {serialized[1]}
        return set().union(*(_names_in(x) for x in serialized))
    return set()


def _storage_sizes(func: E.Function, bounds: dict[str, int]) -> dict[E.Var, P.PrimExpr | None]:
    """Each storage's size: bytes, an expression where it is symbolic without
    bounds, None where unknown."""
    out: dict[E.Var, P.PrimExpr | None] = {}
    for b in _bindings(func.body):
        value = b.value  # type: ignore[attr-defined]
        if is_storage_alloc(value) and isinstance(value.args[0], E.ShapeExpr):
            out[b.var] = _bytes(value.args[0].values, "uint8", bounds)
    return out


def _bytes(shape: tuple[P.PrimExpr, ...], dtype: str, bounds: dict[str, int]) -> P.PrimExpr:
    """Bytes of a tensor: at the declared bounds where every variable has one
    (what the plan sized for), else the exact expression."""
    bounded = shape_nbytes(shape, dtype, bounds).nbytes
    if bounded is not None:
        return P.IntImm(bounded)
    total: P.PrimExpr = P.IntImm(S.dtype_nbytes(dtype))
    for d in shape:
        total = P.mul(total, d)
    return total


class _Concrete:
    """Evaluates sizes and offsets at given dims (names -> values)."""

    def __init__(self, dims: Mapping[str, int]) -> None:
        self.dims = dims

    def __call__(self, e: P.PrimExpr) -> P.PrimExpr:
        """``e`` with the given dims substituted (another function's variables,
        not given, stay symbolic and are proven as such)."""
        env = {v: int(self.dims[v.name]) for v in P.free_vars(e) if v.name in self.dims}
        return P.substitute(e, env) if env else e


def _le(a: P.PrimExpr, b: P.PrimExpr) -> bool:
    """``a <= b`` for every value: each candidate of the maximum ``a`` is
    provably at most some candidate of ``b``."""
    rhs = candidates_of(b)
    return all(any(provably_le(x, y) for y in rhs) for x in candidates_of(a))


def _check_function(name: str, func: E.Function, mod: IRModule, dims: Mapping[str, int] | None = None) -> int:
    bounds = declared_upper_bounds(func, name)
    storages = _storage_sizes(func, bounds)
    live = analyze_liveness(func, mod, name)
    value_of = live.values.value_of
    carved = [loc for loc in live.values.locs if is_carve(value_of.get(loc.var))]  # type: ignore[arg-type]
    intervals = {loc.var: live.intervals[loc] for loc in carved}
    paths = {loc.var: live.path.get(loc, ()) for loc in carved}
    groups: dict[E.Var, list[tuple[E.Var, P.PrimExpr, P.PrimExpr]]] = {}
    carved_from: dict[E.Expr, int] = {}
    at = _Concrete(dims) if dims is not None else None
    for loc in carved:
        storage = value_of[loc.var].args[0]  # type: ignore[attr-defined,index]
        carved_from[storage] = carved_from.get(storage, 0) + 1
    for loc in carved:
        var = loc.var
        assert var is not None
        call = value_of[var]
        storage, offset_arg, shape, dtype = call.args[:4]
        if not isinstance(offset_arg, E.PrimValue) or not isinstance(shape, E.ShapeExpr) or not isinstance(dtype, E.DataTypeImm):
            raise MemoryPlanError(
                f"function {name}: tensor '{var.name_hint}' has a non-constant offset or shape"
            )
        offset = P.simplify(offset_arg.value)
        size = P.simplify(_bytes(shape.values, dtype.value, bounds))
        own = P.const_value(offset) == 0 and carved_from.get(storage) == 1
        if own and (P.const_value(size) is None or not isinstance(storage, E.Var)):
            continue  # a storage of its own (sized at run time): nothing to overlap
        cap = storages.get(storage) if isinstance(storage, E.Var) else None
        if at is not None:
            offset, size = at(offset), at(size)
            cap = None if cap is None else at(cap)
        negative = not any(provably_le(P.IntImm(0), c) for c in candidates_of(offset))
        if negative or (cap is not None and not _le(P.add(offset, size), cap)):
            raise MemoryPlanError(
                f"function {name}: tensor '{var.name_hint}' at offset {P.to_str(offset)} "
                f"({P.to_str(size)} bytes) does not fit its storage of "
                f"{'?' if cap is None else P.to_str(cap)} bytes"
                + ("" if at is not None or P.const_value(offset) is not None else " (for some value of the dims)")
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
                if _disjoint(oi, si, oj, sj):
                    continue
                raise MemoryPlanError(
                    f"function {name}: tensors '{vi.name_hint}' (bytes {P.to_str(oi)}..{P.to_str(P.add(oi, si))} of "
                    f"'{storage.name_hint}', live {list(intervals[vi])}) and "
                    f"'{vj.name_hint}' (bytes {P.to_str(oj)}..{P.to_str(P.add(oj, sj))}, live "
                    f"{list(intervals[vj])}) are live at the same time and overlap"
                    + ("" if _all_const(oi, si, oj, sj) else " (or cannot be proven apart for every value of the dims)")
                )
    return checked


def _all_const(*exprs: P.PrimExpr) -> bool:
    return all(P.const_value(e) is not None for e in exprs)


def _disjoint(oi: P.PrimExpr, si: P.PrimExpr, oj: P.PrimExpr, sj: P.PrimExpr) -> bool:
    if _all_const(oi, si, oj, sj):
        a, n, b, m = (P.const_value(e) for e in (oi, si, oj, sj))
        return not (n and m and a < b + m and b < a + n)  # type: ignore[operator]
    if P.const_value(si) == 0 or P.const_value(sj) == 0:
        return True
    return _le(P.add(oi, si), oj) or _le(P.add(oj, sj), oi)


def check_no_overlap(mod: IRModule, dims: Mapping[str, int] | None = None) -> dict[str, int]:
    """Raises MemoryPlanError if two simultaneously live tensors share bytes.

    Works on the module after StaticPlanBlockMemory or after any later pass.
    Offsets and sizes that are expressions in shape variables are proven
    apart for every value of the variables; with ``dims`` (name -> value) they
    are checked at those values instead.
    Returns, per function, how many pairs of simultaneously live tensors of
    one storage were compared (useful to see a test exercised something).
    """
    return {name: _check_function(name, func, mod, dims) for name, func in mod.functions.items()}
