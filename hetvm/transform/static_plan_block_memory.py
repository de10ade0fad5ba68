"""StaticPlanBlockMemory: pack a function's allocations into per-device arenas.

Input is the IR after CallTIRRewrite: ``lv = R.builtin.alloc_tensor(shape,
dtype, dev)`` bindings. Each plannable one becomes

    arena = R.memory.alloc_storage(R.shape([nbytes]), dev, scope, "uint8")   # at the top
    lv = R.memory.alloc_tensor(arena, offset, shape, dtype)

with one arena per (device, memory scope) and function. Where TVM gives each
tensor a whole storage token reused only for the same dtype and a similar size,
hetvm places tensors at byte offsets, so tensors of any dtype share bytes
whenever their lifetimes (see ``memory_planning.lifetimes``) are disjoint;
several packing orders are tried and the smallest arena kept.

Left as ``builtin.alloc_tensor`` (LowerAllocTensor gives each its own
storage): tensors the function returns (they outlive the call; unless
``plan_outputs=True``, which keeps the whole arena alive as long as an output
is) and symbolic shapes without a declared upper bound. A function that
already holds planned storage is left alone, so running the pass twice gives
the same module as running it once.

The plan's facts (sizes, lower bound, offsets, what was left out and why) go to
``mod.attrs["memory_plan"]`` as plain JSON-able data; see
``hetvm.analysis.memory_plan.memory_plan_report``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..analysis.free_vars import definable_symbolic_vars
from ..analysis.sizes import (
    declared_lower_bounds,
    declared_upper_bounds,
    symbolic_nbytes,
    tensor_nbytes,
)
from ..analysis.symbolic_bytes import (
    ByteMax,
    format_bytes_expr,
    is_nonnegative,
    provably_le,
    serialize,
)
from ..arena_packing import DEFAULT_ALIGNMENT, Buffer, max_live_bytes, pack
from ..errors import MemoryPlanError
from ..ir import expr as E
from ..ir import prim as P
from ..ir.module import IRModule
from .lower_alloc_tensor import alloc_storage_call, alloc_tensor_from_storage
from .memory_planning.lifetimes import analyze_lifetimes
from .memory_planning.symbolic_packing import SymbolicBuffer, max_live_symbolic, pack_symbolic
from .pass_infra import Pass, PassContext

__all__ = ["StaticPlanBlockMemory", "PLAN_ATTR", "plan_function", "lower_bounds", "lower_bounds_at"]

PLAN_ATTR = "memory_plan"
PLAN_VERSION = 1
ALLOC_OP = "builtin.alloc_tensor"
PLANNED_OPS = frozenset({"memory.alloc_storage", "memory.alloc_tensor"})


def _op_name(value: Any) -> str | None:
    if isinstance(value, E.Call) and isinstance(value.op, E.Op):
        return value.op.name
    return None


def is_unplanned_alloc(binding: E.Binding) -> bool:
    """A ``builtin.alloc_tensor`` binding (what this pass plans)."""
    return isinstance(binding, E.VarBinding) and _op_name(binding.value) == ALLOC_OP


def _already_planned(seq: E.SeqExpr) -> bool:
    for block in seq.blocks:
        for b in block.bindings:
            value = b.value  # type: ignore[attr-defined]
            if _op_name(value) in PLANNED_OPS:
                return True
            if isinstance(value, E.If) and (
                _already_planned(value.true_branch) or _already_planned(value.false_branch)
            ):
                return True
    return False


@dataclass
class _Site:
    """One allocation: where it goes and how big it is."""

    var: E.Var
    call: E.Call
    device: int
    scope: str
    nbytes: int | None
    exact: bool
    expr: P.PrimExpr | None = None  # the exact size where it depends on unbounded variables

    @property
    def size(self) -> P.PrimExpr:
        return self.expr if self.expr is not None else P.IntImm(self.nbytes or 0)


def _site(var: E.Var, call: E.Call, mod: IRModule, fname: str) -> tuple[int, str]:
    dev_arg = call.args[2] if len(call.args) > 2 else None
    dev = P.const_value(dev_arg.value) if isinstance(dev_arg, E.PrimValue) else None
    if dev is None:
        raise MemoryPlanError(
            f"function {fname}: allocation '{var.name_hint}' has no constant device index"
        )
    vdevs = mod.vdevices
    if vdevs and not 0 <= dev < len(vdevs):
        raise MemoryPlanError(
            f"function {fname}: allocation '{var.name_hint}' is on device index {dev}, but the "
            f"module declares {len(vdevs)} vdevice(s)"
        )
    if not vdevs and dev != 0:
        raise MemoryPlanError(
            f"function {fname}: allocation '{var.name_hint}' is on device index {dev}, but the "
            "module declares no vdevices (only index 0 exists)"
        )
    scope = vdevs[dev].memory_scope if vdevs else "global"
    if len(call.args) > 3 and isinstance(call.args[3], E.StringImm):
        scope = call.args[3].value
    return dev, scope


def _names_in(func: E.Function) -> set[str]:
    names = {p.name_hint for p in func.params}

    def walk(seq: E.SeqExpr) -> None:
        for block in seq.blocks:
            for b in block.bindings:
                names.add(b.var.name_hint)
                value = b.value  # type: ignore[attr-defined]
                if isinstance(value, E.If):
                    walk(value.true_branch)
                    walk(value.false_branch)

    walk(func.body)
    return names


def _unique(hint: str, used: set[str]) -> str:
    name, n = hint, 0
    while name in used:
        n += 1
        name = f"{hint}{n}"
    used.add(name)
    return name


def _rewrite_seq(seq: E.SeqExpr, planned: dict[E.Var, tuple[E.Var, P.IntLike]]) -> E.SeqExpr:
    changed = False
    blocks = []
    for block in seq.blocks:
        bindings = []
        block_changed = False
        for b in block.bindings:
            value = b.value  # type: ignore[attr-defined]
            if b.var in planned and is_unplanned_alloc(b):
                arena, offset = planned[b.var]
                new_value = alloc_tensor_from_storage(arena, offset, b.var.struct_info)  # type: ignore[arg-type]
                b = E.VarBinding(b.var, new_value, span=b.span)
                block_changed = True
            elif isinstance(value, E.If):
                tb = _rewrite_seq(value.true_branch, planned)
                fb = _rewrite_seq(value.false_branch, planned)
                if tb is not value.true_branch or fb is not value.false_branch:
                    new_if = E.If(value.cond, tb, fb, struct_info=value.struct_info, span=value.span)
                    b = E.replace(b, value=new_if)
                    block_changed = True
            bindings.append(b)
        if block_changed:
            block = type(block)(tuple(bindings), span=block.span)
            changed = True
        blocks.append(block)
    if not changed:
        return seq
    return E.SeqExpr(tuple(blocks), seq.body, struct_info=seq.struct_info, span=seq.span)


def _entry_vars(func: E.Function) -> set[P.PrimVar]:
    """Shape variables the parameters define: bound before the body runs, so
    an arena sized by them can be allocated at the top."""
    return {v for p in func.params for v in definable_symbolic_vars(p.struct_info)}


def _symbolic_size(call: E.Call, entry: set[P.PrimVar]) -> tuple[P.PrimExpr | None, str]:
    """The exact size of an allocation with unbounded variables, or why it
    cannot be planned."""
    expr = symbolic_nbytes(call)
    if expr is None:
        return None, "shape not known when the function starts"
    late = [v.name for v in P.free_vars(expr) if v not in entry]
    if late:
        return None, (
            f"shape uses {', '.join(late)}, bound inside the function (not by a parameter), "
            "so the arena cannot be sized at the call's start"
        )
    if not is_nonnegative(expr):
        return None, f"size {format_bytes_expr(expr)} is not provably >= 0"
    return expr, ""


def _undeclared(call: E.Call, bounds: dict[str, int]) -> bool:
    """The allocation's shape uses a variable without a declared upper bound."""
    shape = call.args[0]
    return isinstance(shape, E.ShapeExpr) and any(
        v.name not in bounds for d in shape.values for v in P.free_vars(d)
    )


def _collect_sites(name: str, func: E.Function, mod: IRModule, plan_outputs: bool):
    """The function's lifetimes, its plannable allocations grouped by (device,
    scope), the allocations left out (with why), and each device's scope."""
    bounds = declared_upper_bounds(func, name)
    declared_lower_bounds(func, name)  # validated only: sizes are planned from upper bounds
    life = analyze_lifetimes(func, is_unplanned_alloc, mod, name)
    entry = _entry_vars(func)
    unplanned: list[dict[str, Any]] = []
    groups: dict[tuple[int, str], list[_Site]] = {}
    devices: dict[int, str] = {}
    for var in life.roots:
        call = life.binding_of[var].value  # type: ignore[attr-defined]
        dev, scope = _site(var, call, mod, name)
        size = tensor_nbytes(call, bounds)
        devices.setdefault(dev, scope)
        site = _Site(var, call, dev, scope, size.nbytes, size.exact)
        reason = None
        if var in life.escaping and not plan_outputs:
            reason = "returned"
        elif size.nbytes is None or _undeclared(call, bounds):
            # exact where a variable has no declared bound (min(seq, 64) x 128 too:
            # sizing it at its bound would waste bytes at every smaller seq)
            expr, why = _symbolic_size(call, entry)
            if expr is not None:
                site.nbytes, site.exact, site.expr = None, True, expr
            elif size.nbytes is None:
                reason = why  # else: planned at its bound, as it was
        if reason is not None:
            entry_facts: dict[str, Any] = {"name": var.name_hint, "device": dev, "reason": reason, "nbytes": size.nbytes}
            expr = symbolic_nbytes(call) if size.nbytes is None else None
            if expr is not None:
                entry_facts["nbytes_formula"] = format_bytes_expr(expr)
            unplanned.append(entry_facts)
            continue
        groups.setdefault((dev, scope), []).append(site)
    return life, groups, unplanned, devices


def _buffers(life: Any, members: list[_Site]) -> list[Buffer]:
    last = max(life.num_positions - 1, 0)
    buffers = []
    for i, site in enumerate(members):
        intervals = life.intervals[site.var]
        if site.var in life.escaping:  # plan_outputs: outputs live to the end and beyond
            intervals = ((intervals[0][0], last),)
        buffers.append(Buffer(i, site.nbytes, intervals, life.path[site.var]))  # type: ignore[arg-type]
    return buffers


def lower_bounds(name: str, func: E.Function, mod: IRModule) -> dict[tuple[int, str], int]:
    """Per (device, memory scope), the most bytes of planned tensors live at once:
    the least any packing of ``func`` can need. For passes that change lifetimes
    (ConcatInPlace) and must not raise it."""
    life, groups, _, _ = _collect_sites(name, func, mod, False)
    return {
        key: max_live_bytes(_buffers(life, [m for m in members if m.expr is None]))
        for key, members in groups.items()
    }


def lower_bounds_at(name: str, func: E.Function, mod: IRModule, envs: list[dict[str, int]]) -> list[int]:
    """For each shape environment (variable name -> value), the most bytes of
    planned tensors live at once over all devices, symbolic sizes evaluated
    there: the bound :func:`lower_bounds` gives, for programs whose sizes are
    expressions (MemoryAwareOrder compares orders with it)."""
    life, groups, _, _ = _collect_sites(name, func, mod, False)
    out = []
    for env in envs:
        total = 0
        for members in groups.values():
            sized = []
            for m in members:
                if m.expr is None:
                    sized.append(m)
                    continue
                values = {v: env.get(v.name, 1) for v in P.free_vars(m.expr)}
                sized.append(_Site(m.var, m.call, m.device, m.scope, max(0, int(P.evaluate(m.expr, values))), True))
            total += max_live_bytes(_buffers(life, sized))
        out.append(total)
    return out


def _symbolic_buffers(life: Any, members: list[_Site]) -> list[SymbolicBuffer]:
    return [SymbolicBuffer(b.key, members[i].size, b.intervals, b.path) for i, b in enumerate(_buffers_of(life, members))]


def _buffers_of(life: Any, members: list[_Site]) -> list[Buffer]:
    """``_buffers`` without sizes (the symbolic planner brings its own)."""
    zeroed = [_Site(m.var, m.call, m.device, m.scope, 0, m.exact) for m in members]
    return _buffers(life, zeroed)


def _pack_group(life: Any, members: list[_Site], alignment: int, bounds: dict[str, int]):
    """Offsets (ints, or expressions where a size is symbolic), the arena's
    size, the lower bound, the no-reuse bytes (ByteMax / expressions), the
    strategy and, for a symbolic arena, what the call-time specialisation
    re-packs (:func:`_specialisation`; None otherwise)."""
    if all(m.expr is None for m in members):
        buffers = _buffers(life, members)
        result = pack(buffers, alignment)
        offsets: dict[int, P.IntLike] = dict(result.offsets)
        total, lower = ByteMax([result.total]), ByteMax([max_live_bytes(buffers)], cap=None)
        return offsets, total, lower, P.IntImm(sum(b.size for b in buffers)), result.strategy, None
    sym = _symbolic_buffers(life, members)
    result = pack_symbolic(sym, alignment, bounds)
    no_reuse: P.PrimExpr = P.IntImm(0)
    for b in sym:
        no_reuse = P.add(no_reuse, b.size)
    spec = _specialisation(members, sym, result.offsets, result.total)
    return dict(result.offsets), result.total, max_live_symbolic(sym), no_reuse, result.strategy, spec


def _specialisation(
    members: list[_Site], sym: list[SymbolicBuffer], offsets: dict[int, P.PrimExpr], total: ByteMax
) -> dict[str, Any] | None:
    """What the VM needs to re-pack a symbolic arena at a call's sizes with the
    constant packer (``hetvm.runtime.plan_specialise``): per tensor its name,
    exact size, lifetime, branch path and symbolic offset, plus the arena's
    formula. JSON only. None when two tensors share a name (the code generator
    finds each tensor by name) or a size is not an expression of shape
    variables: the arena then keeps its symbolic offsets."""
    names = [m.var.name_hint for m in members]
    if len(set(names)) != len(names):
        return None
    dims: set[str] = set()
    buffers = []
    for m, b in zip(members, sym):
        dims |= {v.name for v in P.free_vars(b.size)}
        buffers.append({
            "name": m.var.name_hint,
            "size": serialize(P.simplify(b.size)),
            "intervals": [[int(lo), int(hi)] for lo, hi in b.intervals],
            "path": [[int(i), int(br)] for i, br in b.path],
            "offset": serialize(P.simplify(offsets[b.key])),
        })  # fmt: skip
    if not dims:
        return None
    return {"dims": sorted(dims), "buffers": buffers, "total": total.serialize()}


def _least_bytes(lower: ByteMax) -> int | None:
    """For a symbolic lower bound: its value with every dim at 1, when that is
    proven to be the least it takes for all dims >= 1 (some candidate is at
    least it everywhere) -- what a VM can refuse before any call, since no
    call with non-empty dims needs fewer bytes. None when constant or unproven."""
    if lower.constant is not None:
        return None
    ones = {v.name: 1 for v in lower.free_vars()}
    k = lower.evaluate(ones)
    if k > 0 and any(provably_le(P.IntImm(k), t, 1) for t in lower.terms):
        return k
    return None


def _figure(facts: dict[str, Any], key: str, value: ByteMax) -> None:
    """``facts[key]`` as an int when it is one; else None, with the expression
    (``key_expr``: serialised candidates of a maximum) and its formula."""
    const = value.constant
    if const is not None:
        facts[key] = const
        return
    facts[key] = None
    facts[f"{key}_expr"] = value.serialize()
    facts.setdefault("formulas", {})[key] = value.formula()


def plan_function(
    name: str,
    func: E.Function,
    mod: IRModule,
    *,
    plan_outputs: bool = False,
    alignment: int = DEFAULT_ALIGNMENT,
) -> tuple[E.Function, dict[str, Any]]:
    """The planned function and its plan facts (JSON-able)."""
    life, groups, unplanned, devices = _collect_sites(name, func, mod, plan_outputs)
    bounds = declared_upper_bounds(func, name)
    used_names = _names_in(func)
    arena_bindings: list[E.Binding] = []
    placement: dict[E.Var, tuple[E.Var, P.IntLike]] = {}
    sums: dict[str, dict[str, Any]] = {
        str(d): {"planned_bytes": ByteMax(), "lower_bound_bytes": ByteMax(cap=None), "no_reuse_bytes": ByteMax(cap=None)}
        for d in devices
    }
    device_facts: dict[str, dict[str, Any]] = {
        str(d): {"memory_scope": s, "num_planned": 0, "arenas": []} for d, s in sorted(devices.items())
    }
    tensor_facts: list[dict[str, Any]] = []
    for (dev, scope), members in sorted(groups.items()):
        offsets, total, lower, no_reuse, strategy, spec = _pack_group(life, members, alignment, bounds)
        hint = "arena" if len(groups) == 1 else f"arena_d{dev}" + ("" if scope == "global" else f"_{scope}")
        arena = E.Var(_unique(hint, used_names), struct_info=_OBJECT)
        arena_bindings.append(
            E.VarBinding(arena, alloc_storage_call(total.to_prim(), E.PrimValue(dev), scope, "uint8"))
        )
        for i, site in enumerate(members):
            offset = offsets[i]
            placement[site.var] = (arena, offset)
            entry: dict[str, Any] = {"name": site.var.name_hint, "device": dev}
            const_offset = P.const_value(offset)
            entry["offset"] = const_offset
            entry["nbytes"] = site.nbytes if site.expr is None else None
            entry["exact"] = site.exact or site.expr is not None
            if const_offset is None:
                entry["offset_formula"] = P.to_str(offset)  # type: ignore[arg-type]
            if site.expr is not None:
                entry["nbytes_formula"] = format_bytes_expr(site.expr)
            tensor_facts.append(entry)
        acc = sums[str(dev)]
        acc["planned_bytes"] = acc["planned_bytes"].plus(total)
        acc["lower_bound_bytes"] = acc["lower_bound_bytes"].plus(lower)
        acc["no_reuse_bytes"] = acc["no_reuse_bytes"].plus(no_reuse)
        facts = device_facts[str(dev)]
        facts["num_planned"] += len(members)
        arena_facts: dict[str, Any] = {"var": arena.name_hint, "memory_scope": scope, "strategy": strategy}
        _figure(arena_facts, "nbytes", total)
        _figure(arena_facts, "lower_bound_bytes", lower)
        if spec is not None:
            arena_facts["specialise"] = spec
        facts["arenas"].append(arena_facts)
    for dev, facts in device_facts.items():
        for key, value in sums[dev].items():
            _figure(facts, key, value)
        least = _least_bytes(sums[dev]["lower_bound_bytes"])
        if least is not None:
            facts["least_bytes"] = least
    fn_facts = {
        "outputs_in_plan": plan_outputs,
        "alignment": alignment,
        "devices": device_facts,
        "tensors": tensor_facts,
        "unplanned": unplanned,
    }
    if not placement:
        return func, fn_facts
    body = _rewrite_seq(func.body, placement)
    blocks = (E.BindingBlock(tuple(arena_bindings)),) + tuple(body.blocks)
    body = E.SeqExpr(blocks, body.body, struct_info=body.struct_info, span=body.span)
    return E.replace(func, body=body), fn_facts


_OBJECT = E.ObjectStructInfo()


class StaticPlanBlockMemory(Pass):
    """Packs each function's allocations into one arena per device and scope.

    ``plan_outputs``: also place returned tensors in the arena (TVM and the
    default keep them outside, so an output does not pin the whole arena).
    ``alignment``: byte alignment of every offset.
    """

    def __init__(self, plan_outputs: bool = False, alignment: int = DEFAULT_ALIGNMENT) -> None:
        super().__init__("StaticPlanBlockMemory")
        if alignment <= 0:
            raise MemoryPlanError(f"StaticPlanBlockMemory: alignment must be positive, got {alignment}")
        self.plan_outputs = plan_outputs
        self.alignment = alignment

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        old = mod.attrs.get(PLAN_ATTR) or {}
        old_funcs = old.get("functions", {}) if isinstance(old, dict) else {}
        funcs: dict[str, E.Function] = {}
        facts: dict[str, Any] = {}
        changed = False
        for name, func in mod.functions.items():
            if _already_planned(func.body) and name in old_funcs:
                funcs[name], facts[name] = func, old_funcs[name]
                continue
            new, fn_facts = plan_function(
                name, func, mod, plan_outputs=self.plan_outputs, alignment=self.alignment
            )
            changed |= new is not func
            funcs[name], facts[name] = new, fn_facts
        plan = {"version": PLAN_VERSION, "functions": facts}
        if not changed and old == plan:
            return mod
        out = mod.with_functions(funcs)
        out.attrs[PLAN_ATTR] = plan
        return out
