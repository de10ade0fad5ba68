"""SplitHosts: a program over two hosts' devices becomes per-host parts of one executable.

The parts run in this process (``hetvm.distributed.LocalHosts``, no Ray) must
give the single-process run's result, receive exactly the bytes the schedule
plans, and receive a value read by two devices of one host once.
"""

from __future__ import annotations

import numpy as np
import pytest

import hetvm
from hetvm.distributed import LocalHosts, schedule_of
from hetvm.distributed.worker import as_numpy_tree
from hetvm.script import from_source, print_module
from hetvm.testing.multi_host import (
    ALTERNATING,
    HOST_A_CPU,
    HOST_B_SIM,
    inputs_for,
    mlp,
    pinned_pair,
)


def _run_both(mod):
    exe = hetvm.build(mod)
    args = inputs_for(mod)
    single = as_numpy_tree(hetvm.VirtualMachine(exe)["main"](*args))
    hosts = LocalHosts(exe)
    return exe, single, hosts(*args), hosts


def test_parts_alternate_hosts_and_match_the_single_process_run():
    mod = from_source(ALTERNATING)
    exe, single, split, hosts = _run_both(mod)
    schedule = schedule_of(exe)
    assert [p.host for p in schedule.parts] == ["hostA", "hostB", "hostA", "hostB"]
    assert all(p.function in exe.functions for p in schedule.parts)
    np.testing.assert_array_equal(split, single)
    # a on hostA is kept there for part 2; b comes back from hostB; c goes to hostB
    assert schedule.parts[0].keep == ["a"]
    assert {t["value"]: (t["src"], t["dst"]) for t in schedule.transfers} == {
        "a": ("hostA", "hostB"), "b": ("hostB", "hostA"), "c": ("hostA", "hostB"),
    }
    received = {h: s["received_bytes"] for h, s in hosts.stats().items()}
    assert received == {"hostA": schedule.bytes_to("hostA"), "hostB": schedule.bytes_to("hostB")}
    assert sum(received.values()) == schedule.transfer_bytes == 3 * 4 * 8 * 4


def test_a_value_read_by_two_devices_of_a_host_is_sent_there_once():
    mod = pinned_pair()
    exe, single, split, hosts = _run_both(mod)
    copies = [(c["value"], c["dst"]) for c in exe.metadata["device_copies"]]
    assert ("b", "hostB/sim:0") in copies and ("b", "hostB/cpu:0") in copies
    schedule = schedule_of(exe)
    b = [t for t in schedule.transfers if t["value"] == "b"]
    assert len(b) == 1 and b[0]["bytes"] == 4 * 8 * 4 and sorted(b[0]["copies"]) == ["b_hostB_cpu0", "b_hostB_sim0"]
    assert sorted(b[0]["devices"]) == ["hostB/cpu:0", "hostB/sim:0"]
    assert b[0]["reason"] == "R.hint_on_device(..., hostB/sim:0)"  # the planner's, from device_copies
    np.testing.assert_array_equal(split, single)
    assert hosts.stats()["hostB"]["received_bytes"] == schedule.bytes_to("hostB")
    assert hosts.stats()["hostB"]["requests_held"] == 0  # the request's values were dropped


def test_one_host_needs_no_parts_and_runs_main_itself():
    mod = mlp(layers=2, width=8, batch=2, devices=[HOST_A_CPU])
    exe = hetvm.build(mod)
    schedule = schedule_of(exe)
    assert [(p.function, p.host) for p in schedule.parts] == [("main", "hostA")]
    assert schedule.transfers == []
    args = inputs_for(mod)
    np.testing.assert_array_equal(LocalHosts(exe)(*args), as_numpy_tree(hetvm.VirtualMachine(exe)["main"](*args)))


TUPLE_RESULT = ALTERNATING.replace("R.output(e)\n        return e", "R.output(e, a)\n        return (e, a)")


def test_a_tuple_result_comes_back_from_both_hosts():
    mod = from_source(TUPLE_RESULT)
    exe, single, split, _ = _run_both(mod)
    assert isinstance(split, tuple) and len(split) == 2
    for got, want in zip(split, single):
        np.testing.assert_array_equal(got, want)


def test_a_module_without_hosts_has_no_schedule():
    mod = mlp(layers=1, width=8, batch=2)
    exe = hetvm.build(mod.with_global_infos(vdevice=[hetvm.ir.VDevice("llvm", 0)]))
    assert "host_parts" not in exe.metadata
    with pytest.raises(hetvm.DistributedError, match="without devices of named hosts"):
        schedule_of(exe)


BRANCH_ON_TWO_HOSTS = '''
@I.ir_module
class M:
    I.module_global_infos({"vdevice": [I.vdevice({"kind": "llvm", "tag": "host:hostA"}, 0),
                                       I.vdevice({"kind": "sim", "tag": "host:hostB"}, 0)]})
    @R.function
    def main(c: R.Tensor((), "bool", "llvm:0"), x: R.Tensor((4,), "float32", "llvm:0")):
        if c:
            y: R.Tensor((4,), "float32", "sim:0") = R.exp(x)
            z: R.Tensor((4,), "float32", "llvm:0") = R.add(y, y)
        else:
            z: R.Tensor((4,), "float32", "llvm:0") = R.negative(x)
        return z
'''


def test_control_flow_across_hosts_is_refused():
    with pytest.raises(hetvm.DevicePlanError, match="'z' in 'main' is control flow whose branches copy"):
        hetvm.build(from_source(BRANCH_ON_TWO_HOSTS))


def test_the_text_form_records_hosts_and_reads_back():
    mod = mlp(layers=1, width=8, batch=2, devices=[HOST_A_CPU, HOST_B_SIM])
    text = print_module(mod)
    assert '"tag": "host:hostB"' in text
    back = from_source(text)
    assert [v.host for v in back.vdevices] == ["hostA", "hostB"]
    assert str(back.vdevices[1]) == "hostB/sim:0"


def test_executable_devices_name_their_host():
    exe = hetvm.build(from_source(ALTERNATING))
    assert [(d["kind"], d.get("host")) for d in exe.devices] == [("cpu", "hostA"), ("sim", "hostB")]


def test_remote_rejects_a_bad_host_name():
    with pytest.raises(hetvm.DevicePlanError, match="host name"):
        hetvm.remote("a/b", "sim", 0)
