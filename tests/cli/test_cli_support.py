"""The pieces behind the commands: text eliding, memory series, graphs, devices."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from hetvm.cli_support.console import Table, format_bytes
from hetvm.cli_support.graph_model import Graph, Node
from hetvm.cli_support.graph_render import device_colors, layered_svg, to_dot
from hetvm.cli_support.ir_text import elide_constants
from hetvm.cli_support.memory_view import live_series
from hetvm.cli_support.placement import parse_devices, parse_missing
from hetvm.errors import DevicePlanError


def test_elide_constants_keeps_short_and_nested_structure():
    text = 'x = R.const([[1.0, 2.0], [3.0, 4.0]], "float32")\ny = R.const(' + "[" + "0.5, " * 100 + '0.5], "float32")'
    out = elide_constants(text, limit=60)
    assert 'R.const([[1.0, 2.0], [3.0, 4.0]], "float32")' in out
    assert "R.const(<elided" in out and '"float32")' in out.splitlines()[1]
    assert "0.5, 0.5" not in out


def test_live_series_with_and_without_kills():
    ev = [
        {"event": "alloc", "device": "cpu:0", "bytes": 100, "bytes_in_use": 100},
        {"event": "alloc", "device": "cpu:0", "bytes": 50, "bytes_in_use": 150},
        {"event": "kill", "device": "cpu:0", "bytes": 100},
        {"event": "free", "device": "cpu:0", "bytes": 100, "bytes_in_use": 50},
        {"event": "alloc", "device": "cpu:0", "bytes": 80, "bytes_in_use": 130},
        {"event": "alloc", "device": "sim:0", "bytes": 8, "bytes_in_use": 8},
    ]
    s = live_series(ev)
    assert s["cpu:0"].with_kills == [100, 150, 50, 130]
    assert s["cpu:0"].without_kills == [100, 150, 150, 230]
    assert s["cpu:0"].peak == 150 and s["cpu:0"].peak_without_kills == 230
    assert s["sim:0"].peak == 8


def _graph() -> Graph:
    g = Graph()
    g.nodes = [
        Node("in_x", "x", "input", "sim:0", "4 float32"),
        Node("n1", "add", "op", "sim:0", "4 float32"),
        Node("n2", "copy to cpu:0", "copy", "cpu:0", "lv"),
        Node("n3", "nn.softmax", "op", "cpu:0", 'a "quoted" <name>'),
        Node("out0", "output", "output", "cpu:0"),
    ]
    g.edges = [("in_x", "n1"), ("n1", "n2"), ("n2", "n3"), ("n3", "out0"), ("in_x", "n3")]
    return g


def test_dot_and_builtin_svg():
    g = _graph()
    dot = to_dot(g)
    assert dot.startswith('digraph "main" {') and dot.rstrip().endswith("}")
    assert 'n2 [label="copy to cpu:0\\nlv\\n@cpu:0"' in dot and "shape=diamond" in dot
    assert '\\"quoted\\"' in dot
    svg = layered_svg(g)
    root = ET.fromstring(svg)  # well-formed, escaped
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "nn.softmax" in texts and "copy between devices" in texts
    colors = device_colors(g.devices())
    assert set(colors) == {"sim:0", "cpu:0"} and colors["cpu:0"] != colors["sim:0"]


def test_parse_devices_and_errors():
    setup = parse_devices("sim:0,sim:1", parse_missing(["sim:1=nn.softmax,exp"]))
    assert setup.names == ["sim:0", "sim:1", "cpu:0"]  # a host is added
    assert setup.missing_kernels == {"sim:1": {"nn.softmax", "exp"}}
    with pytest.raises(DevicePlanError, match="listed twice"):
        parse_devices("cpu,cpu:0")
    with pytest.raises(DevicePlanError, match="not in --devices"):
        parse_devices("cpu", parse_missing(["sim:0=exp"]))


def test_table_plain_and_bytes():
    t = Table("T", ["a", "bb"])
    t.add(1, "xyz")
    assert t.plain().splitlines() == ["T", "a  bb", "-  ---", "1  xyz"]
    assert format_bytes(512) == "512 B" and format_bytes(3 * 1024 * 1024) == "3.00 MiB"
    assert format_bytes(None) == "-"
    assert np.isfinite(1.0)


def test_builtin_layout_routes_a_skip_edge_beside_the_nodes_it_skips():
    """ResNet's residual edges ran straight down one column, hidden behind the nodes
    they skip; a dummy point per skipped layer now routes them beside the chain."""
    import re

    g = Graph()
    g.nodes = [Node("in_x", "x", "input", "cpu:0"), Node("n1", "conv", "op", "cpu:0"),
               Node("n2", "relu", "op", "cpu:0"), Node("n3", "conv", "op", "cpu:0"),
               Node("n4", "add", "op", "cpu:0"), Node("out0", "output", "output", "cpu:0")]  # fmt: skip
    g.edges = [("in_x", "n1"), ("n1", "n2"), ("n2", "n3"), ("n3", "n4"), ("n1", "n4"), ("n4", "out0")]
    root = ET.fromstring(layered_svg(g))
    ns = "{http://www.w3.org/2000/svg}"
    boxes = [tuple(float(r.get(k)) for k in ("x", "y", "width", "height")) for r in root.iter(f"{ns}rect")
             if r.get("rx") == "6"]  # fmt: skip
    assert len(boxes) == 4
    paths = [p.get("d") for p in root.iter(f"{ns}path") if p.get("marker-end")]
    assert len(paths) == len(g.edges)
    skip = max(paths, key=lambda d: d.count("C"))  # n1 -> n4 crosses two layers
    points = [tuple(map(float, xy.split(","))) for xy in re.findall(r"-?[\d.]+,-?[\d.]+", skip)]
    skipped = [b for b in boxes if points[0][1] < b[1] and b[1] + b[3] < points[-1][1]]
    assert len(skipped) == 2  # relu and the second conv
    for x, y in points:
        for bx, by, bw, bh in skipped:
            assert not (bx <= x <= bx + bw and by <= y <= by + bh), (x, y)


def test_name_tracker_follows_renamed_values_to_the_model_names():
    from hetvm.cli_support.naming import NameTracker, Origin, display
    from hetvm.script import from_source

    head = "from hetvm.script import ir as I, relax as R\n\n@I.ir_module\nclass Module:\n    @R.function\n"
    sig = '    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):\n'
    source = from_source(head + sig + "        a = R.exp(x)\n        b = R.add(a, x)\n        return b\n")
    # a pass split 'a' and named the new half after it (unique("a") is "a1")
    after = from_source(head + sig + "        a1 = R.exp(x)\n        a = R.negative(a1)\n"
                        "        b = R.add(a, x)\n        zz = R.exp(b)\n        return zz\n")  # fmt: skip
    origins = {"x": Origin("input:0", None, "graph input"), "a": Origin("t/a", "node_a", "Exp"),
               "b": Origin("t/b", "node_b", "Add")}  # fmt: skip
    tracker = NameTracker(source, origins)

    class Info:
        name = "Split"

    tracker.run_after_pass(after, Info())
    names = tracker.at("Split")
    assert names["a1"] == origins["a"] and names["a"] == origins["a"] and names["b"] == origins["b"]
    assert "zz" not in names and display("zz", names) == "zz"
    assert display("a1", names) == "t/a" and names["x"].node_text() == "graph input"
    assert origins["b"].node_text() == "node_b (Add)"
