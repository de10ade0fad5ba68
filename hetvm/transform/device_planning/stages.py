"""Stage mode and link costs: cutting a program into contiguous pipeline stages.

``PlanDevices(stages=["hostA/cpu", "hostB/sim:0"])`` cuts the ops of ``main``
(in program order) into one contiguous run per listed device, so that with
several requests in flight each device works on a different request (a
pipeline). A cut is chosen to minimise the pipeline's bottleneck, the largest of

* each stage's compute time (estimated FLOPs over the device kind's speed), and
* each boundary's transfer time (the bytes that cross it over the link between
  the two devices: latency + bytes / bandwidth),

then the total bytes that cross, then the slowest stage's compute. Exact (dynamic programming over cut points).
The chosen cut becomes pins on the ops' domains; an op the user pinned, or one
its stage's device has no kernel for, keeps its own constraint and the min cut
places it. Everything else (parameters, copies) is placed as usual.

**Links** (:class:`LinkCosts`): one model for two devices of one host and one
for two hosts; defaults are a PCIe-like 16 GB/s and 10 us, and a 10 Gbit/s
network (1.25 GB/s) and 200 us; ``links={"cross_host": {"bandwidth": 12.5e9,
"latency": 50e-6}}`` overrides. ``explain`` uses the same model for the time of
each cross-host transfer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ...errors import DevicePlanError
from ...ir import expr as E
from ...ir import struct_info as S
from .devices import DeviceKey, DeviceTable, key_host, key_kind, key_str, parse_device_name
from .graph import Constraint, Problem, tensor_nbytes

__all__ = ["Link", "LinkCosts", "StagePlan", "plan_stages", "DEVICE_FLOPS"]

#: assumed sustained FLOP/s per device kind, for balancing stages only
DEVICE_FLOPS = {"cpu": 2e10, "sim": 2e10, "cuda": 1e13, "rocm": 1e13}


@dataclass(frozen=True)
class Link:
    """A link between two devices: bytes per second and seconds per transfer."""

    bandwidth: float
    latency: float

    def seconds(self, nbytes: int) -> float:
        return 0.0 if nbytes <= 0 else self.latency + nbytes / self.bandwidth


@dataclass(frozen=True)
class LinkCosts:
    """The links of the cost model: within one host and between hosts."""

    intra_host: Link = Link(16e9, 10e-6)
    cross_host: Link = Link(1.25e9, 200e-6)

    def between(self, a: DeviceKey | str, b: DeviceKey | str) -> Link:
        ka = parse_device_name(a) if isinstance(a, str) else a
        kb = parse_device_name(b) if isinstance(b, str) else b
        return self.intra_host if key_host(ka) == key_host(kb) else self.cross_host

    @classmethod
    def of(cls, spec: LinkCosts | Mapping[str, Any] | None) -> LinkCosts:
        """From ``None`` (defaults), a LinkCosts, or ``{"cross_host": {"bandwidth": ..., "latency": ...}}``."""
        if spec is None:
            return cls()
        if isinstance(spec, LinkCosts):
            return spec
        base = cls()
        kw: dict[str, Link] = {}
        for name, value in dict(spec).items():
            if name not in ("intra_host", "cross_host"):
                raise DevicePlanError(f"links: unknown link '{name}' (use intra_host or cross_host)")
            default = getattr(base, name)
            if isinstance(value, Link):
                kw[name] = value
                continue
            bw = float(dict(value).get("bandwidth", default.bandwidth))
            lat = float(dict(value).get("latency", default.latency))
            if bw <= 0 or lat < 0:
                raise DevicePlanError(f"links: {name} needs bandwidth > 0 and latency >= 0, got {value!r}")
            kw[name] = Link(bw, lat)
        return cls(**{**{"intra_host": base.intra_host, "cross_host": base.cross_host}, **kw})


@dataclass
class StagePlan:
    """The cut stage mode chose (for explain and tests)."""

    devices: list[str]
    #: per stage: [first op, last op] positions in main's op order, names of first and last
    ranges: list[tuple[int, int]]
    first_last: list[tuple[str, str]]
    compute_s: list[float]
    boundary_bytes: list[int]
    transfer_s: list[float]
    bottleneck_s: float
    ops: int
    skipped: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "devices": self.devices, "ranges": [list(r) for r in self.ranges],
            "first_last": [list(f) for f in self.first_last], "compute_s": self.compute_s,
            "boundary_bytes": self.boundary_bytes, "transfer_s": self.transfer_s,
            "bottleneck_s": self.bottleneck_s, "ops": self.ops, "skipped": dict(self.skipped),
        }


def _elements(sinfo: S.StructInfo | None, bounds: dict[str, int]) -> float:
    if isinstance(sinfo, S.TensorStructInfo):
        try:
            item = S.dtype_nbytes(sinfo.dtype) if sinfo.dtype else 4
        except Exception:  # noqa: BLE001 - an odd dtype counts like float32
            item = 4
        return tensor_nbytes(sinfo, bounds) / max(item, 1)
    if isinstance(sinfo, S.TupleStructInfo):
        return sum(_elements(f, bounds) for f in sinfo.fields)
    return 0.0


def _shape(sinfo: Any) -> list[int] | None:
    if not isinstance(sinfo, S.TensorStructInfo) or sinfo.shape is None:
        return None
    from ...ir import prim as P

    out = []
    for d in sinfo.shape:
        c = P.const_value(d)
        if c is None:
            return None
        out.append(int(c))
    return out


def op_flops(op: str, value: E.Call, out_sinfo: S.StructInfo | None, bounds: dict[str, int]) -> float:
    """A rough FLOP count: 2*M*N*K for matmuls, 2*out*(C/g*kh*kw) for convolutions,
    one per output element otherwise (enough to balance stages)."""
    out = _elements(out_sinfo, bounds)
    args = [a.struct_info for a in value.args if isinstance(a.struct_info, S.TensorStructInfo)]
    if op in ("matmul", "nn.dense", "nn.linear") and args:
        a = _shape(args[0])
        k = a[-1] if a else 64
        return 2.0 * out * k
    if op.startswith("nn.conv") and len(args) >= 2:
        w = _shape(args[1])
        per = 1
        for d in (w or [1, 64])[1:]:
            per *= d
        return 2.0 * out * per
    return max(out, 1.0)


def _top_level_ops(func: E.Function, op_domain: Mapping[E.Binding, int]) -> list[tuple[E.Binding, int]]:
    out = []
    for block in func.body.blocks:
        for b in block.bindings:
            if b in op_domain:
                out.append((b, op_domain[b]))
    return out


def plan_stages(
    problem: Problem,
    table: DeviceTable,
    op_domain: Mapping[E.Binding, int],
    func: E.Function,
    stages: Sequence[str | Any],
    links: LinkCosts,
) -> StagePlan:
    """Chooses the cut and pins the ops of ``func`` to their stage's device."""
    keys = [table.lookup(s, "stages") if not isinstance(s, str) else parse_device_name(s) for s in stages]
    declared = table.keys
    for k in keys:
        if k not in declared:
            raise DevicePlanError(
                f"stages: device {key_str(k)} is not declared (declared: {', '.join(map(key_str, declared))})"
            )
    if len(set(keys)) != len(keys):
        raise DevicePlanError(f"stages: a device is listed twice ({', '.join(map(key_str, keys))})")
    bounds = {str(k): int(v) for k, v in dict(func.attrs.get("tir_var_upper_bound", {}) or {}).items()}
    ops = _top_level_ops(func, op_domain)
    n, m = len(ops), len(keys)
    if n < m:
        raise DevicePlanError(f"stages: {m} stages need at least {m} ops, main has {n}")
    flops = [op_flops(problem.domains[d].op or "", b.value, b.var.struct_info, bounds) for b, d in ops]  # type: ignore[attr-defined]
    speed = [DEVICE_FLOPS.get(key_kind(k), 2e10) for k in keys]
    # bytes crossing the boundary before op position p (values made before p, read at or after p)
    pos_of_root = {problem.find(d): i for i, (_, d) in enumerate(ops)}
    last_read: dict[int, int] = {}
    for dm in problem.demands:
        if dm.domain is None:
            continue
        p = pos_of_root.get(problem.find(dm.domain))
        if p is not None:
            v = problem.root_value(dm.value)
            last_read[v] = max(last_read.get(v, -1), p)
    diff = [0] * (n + 2)
    for v, last in last_read.items():
        made = pos_of_root.get(problem.find(problem.values[v].domain))
        if made is not None and last > made:
            diff[made + 1] += problem.values[v].nbytes
            diff[last + 1] -= problem.values[v].nbytes
    crossing = [0] * (n + 1)
    run = 0
    for p in range(n + 1):
        run += diff[p]
        crossing[p] = run  # bytes crossing a cut placed just before op p
    prefix = [[0.0] * (n + 1) for _ in range(m)]
    for s in range(m):
        for i in range(n):
            prefix[s][i + 1] = prefix[s][i] + flops[i] / speed[s]
    inf = (float("inf"), float("inf"), float("inf"))
    # best[s][j]: (bottleneck, bytes, slowest stage's compute) of ops [0, j) in stages
    # 0..s, stage s ending at j; the last two break ties (a link-bound pipeline still
    # balances its stages)
    best = [[inf] * (n + 1) for _ in range(m)]
    cut = [[0] * (n + 1) for _ in range(m)]
    for j in range(1, n + 1):
        best[0][j] = (prefix[0][j], 0, prefix[0][j])
    for s in range(1, m):
        link = links.between(keys[s - 1], keys[s])
        for j in range(s + 1, n + 1):
            for i in range(s, j):
                prev = best[s - 1][i]
                if prev[0] == float("inf"):
                    continue
                work = prefix[s][j] - prefix[s][i]
                cand = (max(prev[0], work, link.seconds(crossing[i])), prev[1] + crossing[i], max(prev[2], work))
                if cand < best[s][j]:
                    best[s][j] = cand
                    cut[s][j] = i
    ends = [n]
    for s in range(m - 1, 0, -1):
        ends.append(cut[s][ends[-1]])
    ends.reverse()  # ends[s-1] = start of stage s
    starts = [0] + ends[:-1]
    ranges = [(a, b - 1) for a, b in zip(starts, ends)]
    skipped: dict[str, str] = {}
    for s, (a, b) in enumerate(ranges):
        for i in range(a, b + 1):
            binding, dom = ops[i]
            root = problem.domains[problem.find(dom)]
            name = binding.var.name_hint
            if root.pin is not None:
                if root.pin.device != keys[s]:
                    skipped[name] = f"pinned: {root.pin.describe()}"
                continue
            op = problem.domains[dom].op
            why = root.excluded.get(keys[s]) or (table.lacks_kernel(op, keys[s]) if op else None)
            if why is not None:  # its stage's device has no kernel: the min cut places it
                skipped[name] = why
                continue
            what = f"stage {s + 1} of {m} (ops {a}..{b} of main, stage mode)"
            problem.pin(root.id, Constraint(keys[s], what, binding.span), name)
    boundary = [crossing[a] for a, _ in ranges[1:]]
    transfer = [links.between(keys[s], keys[s + 1]).seconds(x) for s, x in enumerate(boundary)]
    compute = [prefix[s][b + 1] - prefix[s][a] for s, (a, b) in enumerate(ranges)]
    return StagePlan(
        [key_str(k) for k in keys], ranges,
        [(ops[a][0].var.name_hint, ops[b][0].var.name_hint) for a, b in ranges],
        compute, boundary, transfer, max(compute + transfer), n, skipped,
    )
