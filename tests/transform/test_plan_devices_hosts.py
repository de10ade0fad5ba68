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
    assert "1 cross-host transfer, 512 bytes" in str(report) and "stage 2 on hostB/sim:0" in str(report)


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
    with pytest.raises(hetvm.MemoryPlanError, match=f"does not fit hostB/sim:0: .* {need} bytes in all, over its limit"):
        LocalHosts(exe, memory_limits={"hostB/sim:0": need - 1})


LAYER_BYTES = (16 * 16 + 16) * 4  # one layer's weight and bias, width 16


@pytest.mark.parametrize("constant_weights", [False, True], ids=["weights_as_inputs", "weights_as_constants"])
def test_memory_limits_count_the_weights_as_well_as_activations(constant_weights):
    """Stage 2 of a 4-layer MLP holds layers 2 and 3 on hostB/sim:0: their weights are
    refused with the activations, whether they come as inputs or as constants."""
    exe = hetvm.build(mlp(layers=4, width=16, batch=4, constant_weights=constant_weights),
                      plan_devices_options={"stages": STAGES})  # fmt: skip
    entry = memory_by_device(exe)["hostB/sim:0"]
    activation = 4 * 16 * 4  # the (4, 16) activation hostB receives
    if constant_weights:
        assert entry["param_bytes"] == activation
        assert entry["weight_bytes"] >= 2 * LAYER_BYTES  # (and the fused relu's scale of ones)
    else:
        assert entry["param_bytes"] == activation + 2 * LAYER_BYTES and entry["weight_bytes"] == 0
    activations = entry["part_bytes"] + entry["kept_bytes"]
    assert 0 < activations < 2 * LAYER_BYTES
    assert entry["need_bytes"] == entry["weight_bytes"] + entry["param_bytes"] + activations
    with pytest.raises(hetvm.MemoryPlanError) as info:
        check_memory_limits(exe, {"hostB/sim:0": activations + activation})  # room for activations only
    text = str(info.value)
    assert f"{entry['weight_bytes']} bytes of weights (constants)" in text
    assert f"takes {entry['param_bytes']} bytes of parameters" in text
    assert f"{entry['need_bytes']} bytes in all, over its limit of {activations + activation} bytes" in text


def test_explain_lists_a_value_read_by_two_devices_of_a_host_as_one_transfer():
    from hetvm.testing.multi_host import pinned_pair

    report = hetvm.explain(pinned_pair())
    b = [t for t in report.transfers if t["value"] == "b"]
    assert len(b) == 1 and b[0]["bytes"] == 4 * 8 * 4
    assert sorted(b[0]["devices"]) == ["hostA/cpu:0 -> hostB/cpu:0", "hostA/cpu:0 -> hostB/sim:0"]
    assert report.transfer_bytes < report.total_bytes  # the copies count b twice, the network once
    assert report.to_json()["transfers"] == report.transfers


def _gather(second_input) -> hetvm.ir.IRModule:  # noqa: ANN001
    """c = concat(a, b, a) of a = exp(x), b = exp(y), 1 KB each, computed on hostB (hostA's
    CPU has no exp here), read on hostA: c on hostA sends a and b (2 KB in two transfers),
    on hostB sends c (3 KB in one)."""
    x = Var("x", struct_info=TensorStructInfo((256,), "float32", vdevice=HOST_B_CPU))
    y = Var("y", struct_info=TensorStructInfo((256,), "float32", vdevice=second_input))
    bb = BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            a = bb.emit(R.exp(x), name_hint="a")
            b = bb.emit(R.exp(y), name_hint="b")
            c = bb.emit(R.concat([a, b, a]), name_hint="c")
            out = bb.emit_output(bb.emit(R.hint_on_device(c, HOST_A_CPU), name_hint="out"))
        bb.emit_func_output(out)
    devices = [HOST_A_CPU, HOST_B_CPU] + ([second_input] if second_input is not HOST_B_CPU else [])
    return bb.get().with_global_infos(vdevice=devices)


NO_EXP_ON_A = {"hostA/cpu:0": {"exp"}}


def _device_of(result, name: str) -> str:
    (b,) = [b for block in result.mod["main"].body.blocks for b in block.bindings if b.var.name_hint == name]
    return str(b.var.struct_info.vdevice)


@pytest.mark.parametrize("second_input", [HOST_B_CPU, HOST_B_SIM], ids=["two_devices", "three_devices"])
def test_link_latency_weights_the_placement(second_input):
    mod = Normalize()(_gather(second_input))
    # 10 Gbit/s, 200 us: one 3 KB transfer (202 us) beats two 1 KB ones (402 us)
    assert _device_of(plan_module(mod, missing_kernels=NO_EXP_ON_A), "c") == "hostB/cpu:0"
    # a network without latency: the fewest bytes, a and b cross
    no_latency = {"cross_host": {"latency": 0}}
    assert _device_of(plan_module(mod, missing_kernels=NO_EXP_ON_A, links=no_latency), "c") == "hostA/cpu:0"
    for links, sent in ((None, {"c": 3 * 1024}), (no_latency, {"a": 1024, "b": 1024})):
        exe = hetvm.build(mod, plan_devices_options={"missing_kernels": NO_EXP_ON_A, "links": links})
        schedule = schedule_of(exe)
        assert {t["value"]: t["bytes"] for t in schedule.transfers} == sent
        hosts = LocalHosts(exe)
        args = inputs_for(mod)
        np.testing.assert_array_equal(hosts(*args), as_numpy_tree(hetvm.VirtualMachine(exe)["main"](*args)))
        assert hosts.stats()["hostA"]["received_bytes"] == sum(sent.values())


def test_three_devices_send_fewer_bytes_between_hosts_than_within_one():
    """y = z @ u with z (600 KB) on hostA and u (1 MB) on hostB's sim, which has no
    matmul; y is read on hostB's CPU. On hostA it sends 1 MB + 240 B over the network;
    on hostB's CPU 600 KB over the network and 1 MB within hostB (more bytes in all,
    less time: intra-host copies are 13x faster by default)."""
    z = Var("z", struct_info=TensorStructInfo((6, 25000), "float32", vdevice=HOST_A_CPU))
    u = Var("u", struct_info=TensorStructInfo((25000, 10), "float32", vdevice=HOST_B_SIM))
    bb = BlockBuilder()
    with bb.function("main", [z, u]):
        with bb.dataflow():
            y = bb.emit(R.matmul(z, u), name_hint="y")
            out = bb.emit_output(bb.emit(R.hint_on_device(y, HOST_B_CPU), name_hint="out"))
        bb.emit_func_output(out)
    mod = Normalize()(bb.get().with_global_infos(vdevice=[HOST_A_CPU, HOST_B_CPU, HOST_B_SIM]))
    result = plan_module(mod, missing_kernels={"hostB/sim:0": {"matmul"}})
    assert _device_of(result, "y") == "hostB/cpu:0"
    cross = [(c["value"], c["bytes"]) for c in result.copies if c["src"].split("/")[0] != c["dst"].split("/")[0]]
    assert cross == [("z", 6 * 25000 * 4)]
    assert [(c["value"], c["src"], c["dst"]) for c in result.copies if c["value"] == "u"] == [
        ("u", "hostB/sim:0", "hostB/cpu:0")
    ]


def test_explain_of_a_build_lists_what_its_schedule_sends():
    from hetvm.testing.multi_host import pinned_pair

    exe = hetvm.build(pinned_pair())
    report = hetvm.explain(exe)
    assert len([c for c in report.copies if c["value"] == "b"]) == 2  # b to hostB's sim and CPU
    assert [(t["value"], t["src_host"], t["dst_host"], t["bytes"], sorted(t["devices"])) for t in report.transfers] == [
        ("b", "hostA", "hostB", 4 * 8 * 4, ["hostB/cpu:0", "hostB/sim:0"])
    ]
    assert report.transfer_bytes == schedule_of(exe).transfer_bytes
    assert "1 cross-host transfer, 128 bytes" in str(report)
    with pytest.raises(TypeError, match="plan options apply to a module"):
        hetvm.explain(exe, stages=STAGES)


def test_three_hosts_in_stage_mode_send_each_boundary_once():
    devices = [hetvm.remote("hostA", "cpu", 0), HOST_B_SIM, hetvm.remote("hostC", "cpu", 0)]
    mod = mlp(layers=6, width=16, batch=4, devices=devices)
    exe = hetvm.build(mod, plan_devices_options={"stages": ["hostA/cpu", "hostB/sim:0", "hostC/cpu"]})
    stages = exe.metadata["device_stages"]
    assert stages["boundary_bytes"] == [4 * 16 * 4] * 2
    schedule = schedule_of(exe)
    assert [p.host for p in schedule.parts] == ["hostA", "hostB", "hostC"]
    assert [(t["src"], t["dst"], t["bytes"]) for t in schedule.transfers] == [
        ("hostA", "hostB", 256), ("hostB", "hostC", 256),
    ]
    args = inputs_for(mod)
    hosts = LocalHosts(exe)
    np.testing.assert_array_equal(hosts(*args), as_numpy_tree(hetvm.VirtualMachine(exe)["main"](*args)))
    assert {h: s["received_bytes"] for h, s in hosts.stats().items()} == {"hostA": 0, "hostB": 256, "hostC": 256}
