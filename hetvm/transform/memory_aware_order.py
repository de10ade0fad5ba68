"""MemoryAwareOrder: a topological order of each dataflow block that lowers the peak.

Why: the memory plan can do no better than the most bytes live at once *in the
order it is given*; the order an exporter or a frontend wrote is rarely the
one that holds the least (which branch of an Inception module runs first, when
a DenseNet layer's input is dropped). PyTorch Inductor reorders for memory,
and joint order-and-address solvers (MODeL, SERENITY) show the schedule alone
is worth a lot. This pass tries several orders and keeps the best:

* the given order;
* greedy by memory freed: among the ready bindings, the one whose execution
  frees the most bytes net of what it allocates (ties: the earliest given);
* depth-first post-orders from the block's results, operands visited in the
  given order, in reverse, and heaviest result first (Sethi-Ullman-like).

Each is scored by a simulation of the planner's own rules at the op level: a
binding's result takes its bytes (64-byte aligned) from its position to its
last reader; a view op (``effects=VIEW``) shares its input's bytes; an
element-wise op InplaceElementwise would run in place (same shape and dtype,
the input's last reader) takes its input's bytes; parameters, constants,
values of other blocks and returned values take none (the planner leaves
returned tensors outside the arena); values read after the block live to its
end. The order with the lowest peak wins and replaces the block's when it is
lower than the given order's (ties keep the given order, so a second run
changes nothing). Each heuristic is O(n log n) or O(n * ready), so compile
time stays near linear.

Effects: a binding that is not a pure call (an impure op, a ``match_cast``,
which defines shape variables later bindings may use) is a barrier: the block
is reordered only between barriers, so impure ops keep their relative order
and everything stays where its shape variables are defined.

The planner's own bytes have the last word: when some block was reordered, the
module is lowered as the pipeline does up to the planner (LegalizeOps ...
InplaceElementwise) with the given and with the chosen orders, and a function
keeps its new order only if the planner's lower bound (the most bytes live at
once, which its packing meets on every program measured) is lower. That costs
two more lowerings, only when a reorder is proposed.

What it did goes to ``mod.attrs["memory_order"]``: per function, the simulated
peak of the given and of the chosen order, the planner's bound for both, and
which heuristic won (``hetvm plan`` prints it).
"""

from __future__ import annotations

import heapq
from typing import Any, Callable, Sequence

from ..analysis.reads import reads
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.op_registry import op_info
from ..op.effects import is_view_op
from .inplace_elementwise import FUSED, INPLACE_SAFE
from .pass_infra import Pass, PassContext

__all__ = ["MemoryAwareOrder", "ORDER_ATTR", "simulate_peak"]

ORDER_ATTR = "memory_order"
ALIGN = 64
MAX_READY = 64  # the greedy scores at most this many ready bindings per step


def _nbytes(sinfo: S.StructInfo | None, env: dict[str, int] | None = None) -> int:
    """Aligned bytes of a value; a symbolic dim at its value in ``env`` (by
    variable name), or 0 bytes where it has none."""
    if isinstance(sinfo, S.TensorStructInfo):
        if sinfo.shape is None or sinfo.dtype is None:
            return 0
        n = 1
        for d in sinfo.shape:
            v = P.const_value(d)
            if v is None:
                v = _at(d, env)
            if v is None:
                return 0
            n *= v
        bits = _dtype_bits(sinfo.dtype)
        return -(-(n * bits // 8) // ALIGN) * ALIGN
    if isinstance(sinfo, S.TupleStructInfo):
        return sum(_nbytes(f, env) for f in sinfo.fields)
    return 0


def _at(dim: P.PrimExpr, env: dict[str, int] | None) -> int | None:
    """A symbolic dim's value where ``env`` gives each of its variables."""
    if not env:
        return None
    values = {}
    for v in P.free_vars(dim):
        if v.name not in env:
            return None
        values[v] = env[v.name]
    try:
        out = P.evaluate(dim, values)
    except (ZeroDivisionError, ArithmeticError):
        return None
    return max(0, int(out))


#: the sizes a block with symbolic shapes is judged at: every variable at one
#: value, and each variable large with the others small (a transformer's
#: seq x seq against seq x hidden cross between them). No variable is 1: there
#: a dim's tensors are mostly below the 64-byte alignment, so the bytes compared
#: would be the alignment's, not the order's (RoBERTa's depth-first order is 20%
#: lower at every seq >= 4 and 27% higher at batch = seq = 1, a few hundred bytes)
SAME_VALUES = (4, 16, 64, 512)
LARGE, SMALL = 512, 4


def representative_dims(names: Sequence[str]) -> list[dict[str, int]]:
    """The shape environments an order is scored at when sizes are symbolic."""
    names = sorted(set(names))
    if not names:
        return []
    envs = [{n: v for n in names} for v in SAME_VALUES]
    if len(names) > 1:
        envs += [{n: (LARGE if n == big else SMALL) for n in names} for big in names]
    return envs


def _symbolic_names(bindings: Sequence[E.Binding]) -> set[str]:
    out: set[str] = set()

    def walk(sinfo: Any) -> None:
        if isinstance(sinfo, S.TensorStructInfo) and sinfo.shape is not None:
            for d in sinfo.shape:
                out.update(v.name for v in P.free_vars(d))
        elif isinstance(sinfo, S.TupleStructInfo):
            for f in sinfo.fields:
                walk(f)

    for b in bindings:
        walk(b.var.struct_info)
    return out


def _dtype_bits(dtype: str) -> int:
    if dtype == "bool":
        return 8
    digits = "".join(ch for ch in dtype if ch.isdigit())
    return int(digits) if digits else 32


def _op_name(value: Any) -> str | None:
    if isinstance(value, E.Call) and isinstance(value.op, E.Op):
        return value.op.name
    return None


def _is_view(value: Any) -> bool:
    if isinstance(value, (E.Var, E.TupleGetItem)):
        return True
    name = _op_name(value)
    return name is not None and is_view_op(name)


def _is_barrier(value: Any) -> bool:
    if isinstance(value, E.Call):
        if isinstance(value.op, E.Op):
            return not op_info(value.op).pure
        return True  # packed functions, calls of functions: kept in place
    return not isinstance(value, (E.Var, E.Tuple, E.TupleGetItem, E.Constant, E.ShapeExpr, E.PrimValue))


def _inplace_candidate(value: Any) -> bool:
    name = _op_name(value)
    if name in INPLACE_SAFE:
        return True
    if name == FUSED:
        program = value.attrs.get("program") if hasattr(value.attrs, "get") else None
        return bool(program) and bool(program[-1]) and program[-1][0] in INPLACE_SAFE
    return False


def _same_type(a: S.StructInfo | None, b: S.StructInfo | None) -> bool:
    if not (isinstance(a, S.TensorStructInfo) and isinstance(b, S.TensorStructInfo)):
        return False
    if a.dtype != b.dtype or a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return False
    if a.vdevice != b.vdevice:
        return False
    return all(P.const_value(P.simplify(P.sub(x, y))) == 0 for x, y in zip(a.shape, b.shape))


class _Segment:
    """A run of reorderable bindings: dependencies and the cost model's facts."""

    def __init__(
        self, bindings: Sequence[E.Binding], live_out: set, returned: set, env: dict[str, int] | None = None
    ) -> None:
        self.bindings = list(bindings)
        n = len(self.bindings)
        index = {b.var: i for i, b in enumerate(self.bindings)}
        self.reads: list[list[int]] = []  # per binding: producers in the segment it reads (with repeats)
        self.users: list[list[int]] = [[] for _ in range(n)]
        for i, b in enumerate(self.bindings):
            got = [index[v] for v in reads(b.value) if v in index]  # type: ignore[attr-defined]
            self.reads.append(got)
            for j in dict.fromkeys(got):
                self.users[j].append(i)
        self.size = [0 if b.var in returned else _nbytes(b.var.struct_info, env) for b in self.bindings]
        self.view = [_is_view(b.value) for b in self.bindings]  # type: ignore[attr-defined]
        self.tuple = [isinstance(b.value, E.Tuple) for b in self.bindings]  # type: ignore[attr-defined]
        for i in range(n):
            if self.view[i] or self.tuple[i]:
                self.size[i] = 0
        self.inplace = [_inplace_candidate(b.value) for b in self.bindings]  # type: ignore[attr-defined]
        self.live_out = [b.var in live_out for b in self.bindings]
        self.same = [
            [j for j in dict.fromkeys(self.reads[i]) if _same_type(self.bindings[j].var.struct_info, b.var.struct_info)]
            for i, b in enumerate(self.bindings)
        ]


def simulate_peak(seg: _Segment, order: Sequence[int]) -> int:
    """The most bytes live at once when ``seg`` runs in ``order`` (see the module doc)."""
    n = len(seg.bindings)
    root = list(range(n))
    pending = [0] * n  # unexecuted reads of each root's group
    held = [False] * n  # whether a root's bytes are live
    keep = [False] * n  # a root's group reaches a value read after the segment
    alias: list[list[int] | None] = [None] * n  # for views and tuples: what they name
    cur = peak = 0

    def find(i: int) -> int:
        while root[i] != i:
            root[i] = root[root[i]]
            i = root[i]
        return i

    def roots_of(i: int) -> set[int]:
        names = alias[i]
        if names is None:
            return {find(i)}
        out: set[int] = set()
        for a in names:
            out |= roots_of(a)
        return out

    for i in order:
        srcs = list(dict.fromkeys(seg.reads[i]))
        joined = -1
        if (seg.view[i] or seg.tuple[i]) and srcs:
            alias[i] = srcs if seg.tuple[i] else srcs[:1]
            for r in roots_of(i):
                pending[r] += len(seg.users[i])
                keep[r] |= seg.live_out[i]
        else:
            if seg.inplace[i]:
                for j in seg.same[i]:
                    rs = roots_of(j)
                    if len(rs) != 1:
                        continue
                    (r,) = rs
                    readers = sum(1 for s in srcs if r in roots_of(s))
                    if held[r] and not keep[r] and pending[r] == readers:
                        joined = r
                        break
            if joined >= 0:
                root[i] = joined
                pending[joined] += len(seg.users[i])
                keep[joined] |= seg.live_out[i]
            else:
                pending[i] = len(seg.users[i])
                keep[i] = seg.live_out[i]
                held[i] = True
                cur += seg.size[i]
                peak = max(peak, cur)
        touched: set[int] = set()
        for j in srcs:
            for r in roots_of(j):
                pending[r] -= 1
                touched.add(r)
        if alias[i] is None:
            touched.add(find(i))
        for r in touched:
            if held[r] and pending[r] <= 0 and not keep[r]:
                held[r] = False
                cur -= seg.size[r]
    return peak


def _greedy(seg: _Segment) -> list[int]:
    """Ready bindings scored by bytes freed minus bytes allocated, a few at a time."""
    n = len(seg.bindings)
    indeg = [len(set(r)) for r in seg.reads]
    left = [len(u) for u in seg.users]  # readers not yet run, per producer
    ready = [i for i in range(n) if indeg[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        window = heapq.nsmallest(MAX_READY, ready)
        best, best_score = window[0], None
        for i in window:
            freed = sum(seg.size[j] for j in set(seg.reads[i]) if left[j] == 1 and not seg.live_out[j])
            alloc = 0 if seg.view[i] else seg.size[i]
            if seg.inplace[i] and any(left[j] == 1 and not seg.live_out[j] for j in seg.same[i]):
                alloc = 0
            score = freed - alloc
            if best_score is None or score > best_score:
                best, best_score = i, score
        ready.remove(best)
        heapq.heapify(ready)
        order.append(best)
        for j in set(seg.reads[best]):
            left[j] -= 1
        for u in seg.users[best]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(ready, u)
    return order


def _dfs(seg: _Segment, arrange: Callable[[list[int]], list[int]]) -> list[int]:
    """Post-order from the sinks (bindings nobody in the segment reads), in given
    order; each binding's producers visited in ``arrange``'s order."""
    n = len(seg.bindings)
    done = [False] * n
    order: list[int] = []
    for sink in [i for i in range(n) if not seg.users[i]] + list(range(n)):
        if done[sink]:
            continue
        stack: list[tuple[int, int]] = [(sink, 0)]
        children: dict[int, list[int]] = {}
        while stack:
            node, k = stack.pop()
            if done[node]:
                continue
            kids = children.get(node)
            if kids is None:
                kids = children[node] = arrange(list(dict.fromkeys(seg.reads[node])))
            while k < len(kids) and done[kids[k]]:
                k += 1
            if k < len(kids):
                stack.append((node, k + 1))
                stack.append((kids[k], 0))
            else:
                done[node] = True
                order.append(node)
    return order


def _orders(seg: _Segment) -> list[tuple[str, list[int]]]:
    n = len(seg.bindings)
    given = list(range(n))
    heavy = lambda kids: sorted(kids, key=lambda j: (-seg.size[j], j))  # noqa: E731
    return [
        ("given", given),
        ("greedy-freed", _greedy(seg)),
        ("dfs", _dfs(seg, lambda kids: kids)),
        ("dfs-reversed", _dfs(seg, lambda kids: kids[::-1])),
        ("dfs-heaviest-first", _dfs(seg, heavy)),
    ]


def _choose(seg: _Segment, stats: dict) -> tuple[str, list[int]] | None:
    """The order with the lowest simulated peak, when it is below the given one's."""
    scored = [(simulate_peak(seg, order), k, name, order) for k, (name, order) in enumerate(_orders(seg))]
    given_peak = scored[0][0]
    best_peak, _, best_name, best_order = min(scored)
    stats["given"] += given_peak
    stats["chosen"] += min(best_peak, given_peak)
    return (best_name, best_order) if best_peak < given_peak else None


def _choose_symbolic(
    run: Sequence[E.Binding], outside: set, returned: set, envs: list[dict[str, int]], stats: dict
) -> tuple[str, list[int]] | None:
    """With symbolic sizes one order must serve every size: each heuristic runs
    at each representative size, every order found is scored at all of them,
    and the one whose worst peak relative to the given order's is lowest wins --
    only when it is nowhere above the given order and somewhere below.
    ``stats`` gets the peaks at the first size where the winner gains most."""
    segs = [_Segment(run, outside, returned, env) for env in envs]
    candidates: dict[tuple[int, ...], str] = {}
    for seg in segs:
        for name, order in _orders(seg):
            candidates.setdefault(tuple(order), name)
    given = tuple(range(len(run)))
    given_peaks = [max(1, simulate_peak(seg, given)) for seg in segs]
    best: tuple[float, float, list[int]] | None = None
    best_key: tuple[int, ...] = given
    for order in candidates:
        peaks = [simulate_peak(seg, order) for seg in segs]
        ratios = [p / g for p, g in zip(peaks, given_peaks)]
        key = (max(ratios), sum(ratios))
        if best is None or key < best[:2]:
            best, best_key = (key[0], key[1], peaks), order
    assert best is not None
    worst, _, peaks = best
    gains = [g - p for p, g in zip(peaks, given_peaks)]
    k = max(range(len(envs)), key=lambda i: gains[i])
    stats["given"] += given_peaks[k]
    stats["chosen"] += min(peaks[k], given_peaks[k])
    stats.setdefault("dims", envs[k])
    if worst > 1 or sum(peaks) >= sum(given_peaks):
        return None
    return candidates[best_key], list(best_key)


def _reorder_block(block: E.DataflowBlock, live_out: set, returned: set, stats: dict) -> E.DataflowBlock:
    bindings = list(block.bindings)
    out: list[E.Binding] = []
    run: list[E.Binding] = []
    changed = False

    def flush() -> None:
        nonlocal changed
        if len(run) > 2:
            outside = live_out | {b.var for b in run if b.var in live_out}
            envs = representative_dims(_symbolic_names(run))
            if envs:
                best = _choose_symbolic(run, outside, returned, envs, stats)
            else:
                best = _choose(_Segment(run, outside, returned), stats)
            if best is not None:
                name, order = best
                out.extend(run[i] for i in order)
                stats["heuristics"][name] = stats["heuristics"].get(name, 0) + 1
                changed = True
                run.clear()
                return
        out.extend(run)
        run.clear()

    for b in bindings:
        if isinstance(b, E.MatchCast) or _is_barrier(getattr(b, "value", None)):
            flush()
            out.append(b)
        else:
            run.append(b)
    flush()
    if not changed:
        return block
    return E.DataflowBlock(tuple(out), span=block.span)


def _reorder_function(func: E.Function, stats: dict) -> E.Function:
    body = func.body
    returned = set(reads(body.body))
    all_blocks = list(body.blocks)
    new_blocks = []
    changed = False
    for k, block in enumerate(all_blocks):
        if not isinstance(block, E.DataflowBlock):
            new_blocks.append(block)
            continue
        live_out = set(returned)
        for other_k, other in enumerate(all_blocks):
            if other_k != k:
                for b in other.bindings:
                    live_out.update(reads(b.value) if not isinstance(b, E.MatchCast) else reads(b.value))  # type: ignore[attr-defined]
        new = _reorder_block(block, live_out, returned, stats)
        changed |= new is not block
        new_blocks.append(new)
    if not changed:
        return func
    return E.replace(func, body=E.SeqExpr(tuple(new_blocks), body.body, struct_info=body.struct_info, span=body.span))


class MemoryAwareOrder(Pass):
    """See the module docstring."""

    def __init__(self) -> None:
        super().__init__("MemoryAwareOrder")

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        funcs: dict[str, E.Function] = dict(mod.functions)
        report: dict[str, Any] = {}
        proposed: dict[str, E.Function] = {}
        stats_of: dict[str, dict[str, Any]] = {}
        for name, func in mod.functions.items():
            stats: dict[str, Any] = {"given": 0, "chosen": 0, "heuristics": {}}
            new = _reorder_function(func, stats)
            if new is not func:
                proposed[name], stats_of[name] = new, stats
        if not proposed:
            return mod
        # the planner's own bytes decide: the most bytes live at once after the
        # passes up to the planner, with the given and with the chosen orders
        # (at every representative size where sizes are symbolic)
        envs_of = {name: representative_dims(_function_dims(funcs[name])) for name in proposed}
        given_bounds = _planner_bounds(mod, envs_of)
        chosen_bounds = _planner_bounds(mod.with_functions({**funcs, **proposed}), envs_of)
        for name, new in proposed.items():
            before, after = given_bounds.get(name), chosen_bounds.get(name)
            if before is not None and after is not None and not _lower(after, before):
                continue  # the simulation was wrong here: keep the given order
            funcs[name] = new
            stats = stats_of[name]
            at = _env_index(envs_of[name], stats.get("dims"))
            report[name] = {
                "given_peak_bytes": stats["given"],
                "chosen_peak_bytes": stats["chosen"],
                "heuristics": stats["heuristics"],
                "planner_bound_given": None if before is None else before[at],
                "planner_bound_chosen": None if after is None else after[at],
            }
            if "dims" in stats:
                report[name]["dims"] = dict(stats["dims"])
        if not report:
            return mod
        out = mod.with_functions(funcs)
        out.attrs[ORDER_ATTR] = report
        return out


def _lower(after: tuple[int, ...], before: tuple[int, ...]) -> bool:
    """Nowhere higher and somewhere lower."""
    return all(a <= b for a, b in zip(after, before)) and any(a < b for a, b in zip(after, before))


def _env_index(envs: list[dict[str, int]], dims: dict[str, int] | None) -> int:
    return envs.index(dims) if dims in envs else 0


def _function_dims(func: E.Function) -> set[str]:
    return _symbolic_names([b for block in func.body.blocks for b in block.bindings])


def _planner_bounds(mod: IRModule, envs_of: dict[str, list[dict[str, int]]]) -> dict[str, tuple[int, ...] | None]:
    """Per function, the planner's lower bound (all devices) after lowering
    ``mod`` as the pipeline does up to the planner -- one figure, or one per
    representative size (``envs_of``) where sizes are symbolic; None where
    that fails (the simulation's choice then stands)."""
    from .call_tir_rewrite import CallTIRRewrite
    from .concat_in_place import ConcatInPlace
    from .inplace_elementwise import InplaceElementwise
    from .legalize_ops import LegalizeOps
    from .pass_infra import Sequential
    from .static_plan_block_memory import lower_bounds, lower_bounds_at
    from .to_non_dataflow import ToNonDataflow

    try:
        lowered = Sequential([LegalizeOps(), ToNonDataflow(), CallTIRRewrite(), ConcatInPlace(),
                              InplaceElementwise()])(mod)  # fmt: skip
    except Exception:  # noqa: BLE001 - the real pipeline reports what is wrong
        return {}
    out: dict[str, tuple[int, ...] | None] = {}
    for name, envs in envs_of.items():
        try:
            if envs:
                out[name] = tuple(lower_bounds_at(name, lowered[name], lowered, envs))
            else:
                out[name] = (sum(lower_bounds(name, lowered[name], lowered).values()),)
        except Exception:  # noqa: BLE001
            out[name] = None
    return out
