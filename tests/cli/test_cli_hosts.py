"""The command line with devices of two hosts: ``--devices hostA/cpu,hostB/sim:0 --stages all``."""

from __future__ import annotations

import re

import pytest

import hetvm
from hetvm.cli import main
from hetvm.cli_support.placement import parse_devices, parse_stages


def test_devices_of_named_hosts_parse():
    setup = parse_devices("hostA/cpu,hostB/sim:0")
    assert setup.names == ["hostA/cpu:0", "hostB/sim:0"]
    assert [v.host for v in setup.vdevices] == ["hostA", "hostB"]
    assert setup.host.host == "hostA"
    assert parse_stages("all", setup).stages == ["hostA/cpu:0", "hostB/sim:0"]
    # only hostB devices: the host CPU added is hostB's
    assert parse_devices("hostB/sim:0").names == ["hostB/sim:0", "hostB/cpu:0"]


def test_stages_must_be_listed_devices():
    setup = parse_devices("hostA/cpu,hostB/sim:0")
    with pytest.raises(hetvm.DevicePlanError, match="--stages: device 'hostC/sim:0' is not in --devices"):
        parse_stages("hostA/cpu,hostC/sim:0", setup)


def test_explain_splits_the_demo_model_over_two_hosts(capsys, demo_onnx):
    pytest.importorskip("onnx")
    code = main(["explain", demo_onnx, "--devices", "hostA/cpu,hostB/sim:0", "--stages", "all", "--plain"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "hostA/cpu:0 -> hostB/sim:0: 1 copy" in out
    assert "stage 2 of 2" in out


def test_explain_lists_one_transfer_per_value_and_host(capsys, tmp_path):
    """b is read by hostB's sim and CPU: two device copies, one value sent over the network."""
    from hetvm.script import print_module
    from hetvm.testing.multi_host import pinned_pair

    path = tmp_path / "pinned_pair.py"
    path.write_text(print_module(pinned_pair()))
    code = main(["explain", str(path), "--devices", "hostA/cpu,hostB/cpu,hostB/sim:0", "--plain"])
    out, err = capsys.readouterr()
    assert code == 0, err
    copies = out[out.index("Device copies"):out.index("Cross-host transfers")]
    assert [r[1] for r in _rows(copies, "hostA/cpu:0 +hostB/")] == ["b", "b"]  # two device copies of b
    transfers = out[out.index("Cross-host transfers"):]
    assert [r[:5] for r in _rows(transfers, "hostA +hostB ")] == [["1", "b", "hostA", "hostB", "128"]]
    assert "hostB/sim:0, hostB/cpu:0" in transfers  # b's one transfer serves both devices
    assert "1 value sent between hosts, 128 B per request" in transfers
    assert "b to hostB: R.hint_on_device(..., hostB/sim:0)" in transfers


def _rows(text: str, pattern: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if re.match(r"\d+ +\w+ +(- +)?" + pattern, line)]
