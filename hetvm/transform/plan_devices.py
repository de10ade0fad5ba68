"""PlanDevices: decide where every tensor lives and insert the copies that moves need.

One module pass. It gathers the constraints of the whole module (parameter,
result and binding annotations, ``R.hint_on_device``, explicit ``R.to_vdevice``,
host-only values, ``If`` conditions read on the host, ops a device has no kernel
for), unifies devices over bindings, tuples, ``If`` and calls between functions,
places every free value so the fewest bytes cross devices (a minimum cut; ties
go to the default device) and inserts exactly one ``R.to_vdevice`` per (value,
destination device). See :mod:`hetvm.transform.device_planning`.

Decisions:

* **Default device**: ``default_vdevice`` when given (``hetvm.build`` passes its
  target), else the first declared vdevice, else the host CPU; it is added to
  ``global_infos["vdevice"]`` when missing.
* **A function called from two devices** keeps one body and gets copies at the
  call boundary: its parameters and result are placed once, by the min cut over
  all call sites together. Cloning per device signature would multiply code and
  compile time, and a body's own pins and missing kernels hold for every clone
  anyway; the cut already puts the boundary where it is cheapest.
* **Stage mode** (``stages=["hostA/cpu", "hostB/sim:0"]``) cuts ``main``'s ops
  into contiguous pipeline stages first (see ``device_planning/stages.py``);
  ``links`` configures the bandwidth and latency of the cost model's links
  (within a host, between hosts). The chosen cut is ``mod.attrs["device_stages"]``.
* **Missing kernels** are known at compile time from the kernel registry, from
  ``missing_kernels`` in a vdevice's target attributes, and from the
  ``missing_kernels={"sim:0": {"nn.softmax"}}`` option (see ``devices.py``).

Afterwards every tensor has a declared vdevice, ``check_device_plan`` holds and
``mod.attrs["device_copies"]`` lists every copy with its reason.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from ..errors import DevicePlanError
from ..ir.module import IRModule
from ..ir.vdevice import VDevice
from .device_planning.check import check_device_plan
from .device_planning.collect import Collector
from .device_planning.devices import DeviceTable, device_key, key_host
from .device_planning.rewrite import Rewriter
from .device_planning.solve import Placement, plan_cost, solve
from .device_planning.stages import LinkCosts, StagePlan, plan_stages
from .pass_infra import Pass, PassContext

__all__ = ["PlanDevices", "check_device_plan", "plan_module"]


class PlanResult:
    """Everything a plan decided (for explain, tests and benchmarks)."""

    def __init__(
        self, mod: IRModule, table: DeviceTable, placement: Placement, copies: list[dict],
        stages: StagePlan | None = None,
    ) -> None:
        self.mod = mod
        self.table = table
        self.placement = placement
        self.copies = copies
        self.stages = stages

    @property
    def modeled_cost(self) -> tuple[int, int]:
        """(bytes, copies) of the placement under the one-copy-per-destination model."""
        return plan_cost(self.placement.problem, self.placement.device)


def plan_module(
    mod: IRModule,
    default_vdevice: VDevice | str | None = None,
    host_vdevice: VDevice | str | None = None,
    missing_kernels: Mapping[str | VDevice, Iterable[str]] | None = None,
    check_kernels: bool = True,
    stages: Sequence[str | VDevice] | None = None,
    links: LinkCosts | Mapping[str, Any] | None = None,
) -> PlanResult:
    """Plans ``mod`` and returns the new module with the plan's details."""
    table = DeviceTable.from_module(mod, default_vdevice, host_vdevice, missing_kernels, check_kernels)
    link_costs = LinkCosts.of(links)
    collector = Collector(mod, table)
    problem = collector.run()
    stage_plan = None
    if stages:
        if "main" not in mod.functions:
            raise DevicePlanError("stages: the module has no function 'main' to cut into stages")
        stage_plan = plan_stages(problem, table, collector.op_domain, mod["main"], list(stages), link_costs)
    placement = solve(problem, table, link_costs)
    rewriter = Rewriter(mod, table, collector, placement)
    out = rewriter.run()
    copies = rewriter.copy_records()
    used = set(placement.device.values())
    declared = list(mod.vdevices)
    for v in table.declared[len(declared):]:  # the default (always) and the host (when used)
        if v == table.default or device_key(v) in used:
            declared.append(v)
    out = IRModule(out.functions, {**out.global_infos, "vdevice": declared}, dict(out.attrs))
    out.attrs["device_copies"] = copies
    if stage_plan is not None:
        out.attrs["device_stages"] = stage_plan.to_json()
    if links is not None or stage_plan is not None or any(key_host(k) for k in table.keys):
        out.attrs["device_links"] = {
            name: {"bandwidth": link.bandwidth, "latency": link.latency}
            for name, link in (("intra_host", link_costs.intra_host), ("cross_host", link_costs.cross_host))
        }
    return PlanResult(out, table, placement, copies, stage_plan)


class PlanDevices(Pass):
    """The device-planning pass; options as in :func:`plan_module`."""

    def __init__(
        self,
        default_vdevice: VDevice | str | None = None,
        host_vdevice: VDevice | str | None = None,
        missing_kernels: Mapping[str | VDevice, Iterable[str]] | None = None,
        check_kernels: bool = True,
        check: bool = True,
        stages: Sequence[str | VDevice] | None = None,
        links: LinkCosts | Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__("PlanDevices")
        self.options = dict(
            default_vdevice=default_vdevice,
            host_vdevice=host_vdevice,
            missing_kernels=missing_kernels,
            check_kernels=check_kernels,
            stages=stages,
            links=links,
        )
        self.check = check

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        result = plan_module(mod, **self.options)  # type: ignore[arg-type]
        if self.check:
            check_device_plan(result.mod)
        return result.mod
