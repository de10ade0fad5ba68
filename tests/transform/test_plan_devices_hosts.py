"""Device planning across hosts: host-qualified devices, link costs, stage mode, explain.

Stage mode's cut is checked against an independent count of the bytes live
across every cut point of the program (read off the IR), and against what the
parts really exchange when run (``LocalHosts``).
"""

from __future__ import annotations

import numpy as np
import pytest

import hetvm
import hetvm.op as R
from hetvm.distributed import LocalHosts, check_memory_limits, memory_by_device, schedule_of
from hetvm.distributed.worker import as_numpy_tree
from hetvm.ir import BlockBuilder, TensorStructInfo, Var
from hetvm.testing.multi_host import HOST_A_CPU, HOST_B_CPU, HOST_B_SIM, cut_bytes, inputs_for, mlp
from hetvm.transform.device_planning.devices import (
    device_key,
    key_host,
    key_kind,
    parse_device_name,
)
from hetvm.transform.device_planning.stages import Link, LinkCosts
from hetvm.transform.normalize import Normalize
from hetvm.transform.plan_devices import plan_module

STAGES = ["hostA/cpu", "hostB/sim:0"]
#: a slow network: transfers dominate, so the cut must be the one crossing the fewest bytes
SLOW_LINK = {"cross_host": {"bandwidth": 1e6, "latency": 1e-3}}


def test_the_same_device_on_two_hosts_is_two_devices():
    a, b = hetvm.remote("hostA", "sim", 0), hetvm.remote("hostB", "sim", 0)
    assert device_key(a) != device_key(b)
    assert key_host(device_key(b)) == "hostB" and key_kind(device_key(b)) == "sim"
    assert parse_device_name("hostB/sim:0") == device_key(b)
    assert parse_device_name("sim:0") == ("sim", 0, "global")


def _residual(width: int = 16) -> hetvm.ir.IRModule:
    """A chain with a wide skip: cutting inside the skip costs two tensors, after it one."""
    x = Var("x", struct_info=TensorStructInfo((4, width), "float32"))
    w = Var("w", struct_info=TensorStructInfo((width, width), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            a = bb.emit(R.exp(x), name_hint="a")
            b = bb.emit(R.matmul(a, w), name_hint="b")
            c = bb.emit(R.tanh(b), name_hint="c")
            d = bb.emit(R.add(c, a), name_hint="d")  # a skips b, c
            e = bb.emit(R.sum(d, axis=[1], keepdims=True), name_hint="e")  # small
            f = bb.emit(R.multiply(R.negative(e), e), name_hint="f")
            g = bb.emit(R.sigmoid(f), name_hint="g")
            out = bb.emit_output(g)
        bb.emit_func_output(out)
    return bb.get().with_global_infos(vdevice=[HOST_A_CPU, HOST_B_SIM])


def _crossing_bytes(mod) -> list[int]:
    """Bytes of values made before each top-level op and read at or after it."""
    return [b for _, b in cut_bytes(Normalize()(mod)["main"])]


def test_stage_mode_cuts_where_the_fewest_bytes_cross_on_a_slow_link():
    mod = _residual()
    result = plan_module(Normalize()(mod), stages=STAGES, links=SLOW_LINK)
    stages = result.mod.attrs["device_stages"]
    assert stages["boundary_bytes"] == [min(_crossing_bytes(mod))] == [4 * 4]
    exe = hetvm.build(mod, plan_devices_options={"stages": STAGES, "links": SLOW_LINK})
    schedule = schedule_of(exe)
    assert [p.host for p in schedule.parts] == ["hostA", "hostB"]
    assert schedule.transfer_bytes == stages["boundary_bytes"][0]
    args = inputs_for(mod)
    hosts = LocalHosts(exe)
    np.testing.assert_allclose(hosts(*args), as_numpy_tree(hetvm.VirtualMachine(exe)["main"](*args)), rtol=0, atol=0)
    assert hosts.stats()["hostB"]["received_bytes"] == schedule.transfer_bytes


def test_stage_mode_balances_compute_when_links_are_fast():
    mod = mlp(layers=6, width=32, batch=4)
    result = plan_module(Normalize()(mod), stages=STAGES, links={"cross_host": {"bandwidth": 1e15, "latency": 0}})
    stages = result.mod.attrs["device_stages"]
    (a0, b0), (a1, b1) = stages["ranges"]
    assert a0 == 0 and b1 == stages["ops"] - 1 and a1 == b0 + 1
    assert abs((b0 - a0) - (b1 - a1)) <= 1  # equal layers: an even split
    # every layer's activation is one (4, 32) float32 tensor
    assert stages["boundary_bytes"] == [4 * 32 * 4]
    report = hetvm.explain(mod, stages=STAGES)
    assert [(t["value"], t["src_host"], t["dst_host"], t["bytes"]) for t in report.transfers] == [
        (report.transfers[0]["value"], "hostA", "hostB", 4 * 32 * 4)
    ]
    assert "cross-host transfers" in str(report) and "stage 2 on hostB/sim:0" in str(report)


def test_stage_mode_keeps_pins_and_missing_kernels():
    mod = mlp(layers=4, width=8, batch=2, devices=[HOST_A_CPU, HOST_B_CPU, HOST_B_SIM])
    result = plan_module(Normalize()(mod), stages=["hostA/cpu", "hostB/sim:0"],
                         missing_kernels={"hostB/sim:0": {"nn.relu"}})  # fmt: skip
    skipped = result.mod.attrs["device_stages"]["skipped"]
    assert skipped and all("nn.relu" in why for why in skipped.values())
    relus = [c for c in result.copies if c["dst"] == "hostB/sim:0"]
    assert relus  # the second stage's relus run elsewhere and their results come back
    exe = hetvm.build(mod, plan_devices_options={"stages": ["hostA/cpu", "hostB/sim:0"],
                                                 "missing_kernels": {"hostB/sim:0": {"nn.relu"}}})  # fmt: skip
    args = inputs_for(mod)
    np.testing.assert_array_equal(LocalHosts(exe)(*args), as_numpy_tree(hetvm.VirtualMachine(exe)["main"](*args)))


def test_stage_mode_errors_name_the_device():
    mod = mlp(layers=2, width=8, batch=2)
    with pytest.raises(hetvm.DevicePlanError, match="stages: device hostC/sim:0 is not declared"):
        plan_module(Normalize()(mod), stages=["hostA/cpu", "hostC/sim:0"])
    with pytest.raises(hetvm.DevicePlanError, match="unknown link 'network'"):
        plan_module(Normalize()(mod), stages=STAGES, links={"network": {}})


def test_links_default_and_override():
    links = LinkCosts.of({"cross_host": {"bandwidth": 2e9}})
    assert links.cross_host == Link(2e9, LinkCosts().cross_host.latency)
    assert links.between("hostA/cpu", "hostA/sim:0") is links.intra_host
    assert links.between("hostA/cpu", "hostB/sim:0") is links.cross_host
    assert links.cross_host.seconds(2_000_000) == pytest.approx(links.cross_host.latency + 1e-3)


def test_memory_plan_per_host_and_device_and_limits():
    mod = mlp(layers=4, width=16, batch=4)
    exe = hetvm.build(mod, plan_devices_options={"stages": STAGES})
    plan = memory_by_device(exe)
    assert set(plan) == {"hostA/cpu:0", "hostB/sim:0"}
    need = plan["hostB/sim:0"]["need_bytes"]
    assert need > 0 and plan["hostB/sim:0"]["part"] == "main__part1"
    check_memory_limits(exe, {"hostB/sim:0": need})
    with pytest.raises(hetvm.MemoryPlanError, match=f"does not fit hostB/sim:0: main__part1 plans {need} bytes"):
        LocalHosts(exe, memory_limits={"hostB/sim:0": need - 1})


def test_explain_lists_a_value_read_by_two_devices_of_a_host_as_one_transfer():
    from hetvm.testing.multi_host import pinned_pair

    report = hetvm.explain(pinned_pair())
    b = [t for t in report.transfers if t["value"] == "b"]
    assert len(b) == 1 and b[0]["bytes"] == 4 * 8 * 4
    assert sorted(b[0]["devices"]) == ["hostA/cpu:0 -> hostB/cpu:0", "hostA/cpu:0 -> hostB/sim:0"]
    assert report.transfer_bytes < report.total_bytes  # the copies count b twice, the network once
    assert report.to_json()["transfers"] == report.transfers
