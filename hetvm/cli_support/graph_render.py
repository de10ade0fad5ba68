"""Drawing a :class:`~.graph_model.Graph`: Graphviz dot text and SVG.

The dot text is written here (no graphviz Python package). SVG comes from the
``dot`` program when it is installed and from :func:`layered_svg` otherwise —
a layered layout of our own (layers by longest path from the inputs, a dummy
point for each layer an edge skips, barycentre ordering), so ``hetvm show
--format svg`` works on any machine, CI included, and shows branches and skips.
"""

from __future__ import annotations

import html
import shutil
import subprocess
from typing import Sequence

from ..errors import HetvmError
from .graph_model import Graph

__all__ = ["device_colors", "to_dot", "to_svg", "layered_svg"]

_PALETTE = ["#a6cee3", "#fdbf6f", "#b2df8a", "#cab2d6", "#fb9a99", "#ffff99", "#1f78b4", "#33a02c"]
COPY_COLOR = "#e31a1c"


def device_colors(devices: Sequence[str]) -> dict[str, str]:
    """A fixed colour per device: the CPU first, then the others in order."""
    ordered = sorted(dict.fromkeys(devices), key=lambda d: (not d.startswith("cpu"), devices.index(d)))
    return {d: _PALETTE[i % len(_PALETTE)] for i, d in enumerate(ordered)}


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(graph: Graph) -> str:
    """Graphviz text: nodes filled by device, copies as red diamonds, a legend."""
    colors = device_colors(graph.devices())
    lines = [f"digraph {_quote(graph.name)} {{", "  rankdir=TB;",
             '  node [style="filled,rounded", shape=box, fontname="Helvetica", fontsize=10];',
             '  edge [color="#555555", arrowsize=0.6];']  # fmt: skip
    for n in graph.nodes:
        fill = colors.get(n.device or "", "#eeeeee")
        parts = [n.label] + ([n.detail] if n.detail else []) + ([f"@{n.device}"] if n.device else [])
        label = '"' + "\\n".join(_quote(p)[1:-1] for p in parts) + '"'
        attrs = [f"label={label}", f'fillcolor="{fill}"']
        if n.kind == "copy":
            attrs += ["shape=diamond", f'color="{COPY_COLOR}"', "penwidth=2"]
        elif n.kind in ("input", "output"):
            attrs += ["shape=ellipse", 'style="filled"']
        lines.append(f"  {n.id} [{', '.join(attrs)}];")
    for a, b in graph.edges:
        lines.append(f"  {a} -> {b};")
    if colors:
        lines.append("  subgraph cluster_legend {")
        lines.append('    label="devices"; fontname="Helvetica"; fontsize=10; style=dashed;')
        for i, (dev, fill) in enumerate(colors.items()):
            lines.append(f'    legend{i} [label={_quote(dev)}, fillcolor="{fill}", shape=box];')
        lines.append(f'    legend_copy [label="copy", shape=diamond, color="{COPY_COLOR}", fillcolor="#ffffff"];')
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_svg(graph: Graph, prefer_graphviz: bool = True) -> str:
    """SVG via ``dot -Tsvg`` when installed, else the built-in layered layout."""
    exe = shutil.which("dot") if prefer_graphviz else None
    if exe:
        try:
            done = subprocess.run([exe, "-Tsvg"], input=to_dot(graph).encode(), capture_output=True,
                                  timeout=120, check=False)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            done = None
        if done is not None and done.returncode == 0:
            return done.stdout.decode("utf-8")
    return layered_svg(graph)


# -- the built-in layout -----------------------------------------------------
# A layered (Sugiyama-style) layout: layers by longest path from the inputs; an
# edge that skips layers gets a dummy point in every layer it crosses, so a
# residual connection runs beside the chain instead of hidden behind its nodes;
# nodes and dummies are ordered by a few barycentre sweeps down and up.
_W, _H, _GX, _GY, _PAD, _DUMMY = 150, 46, 24, 34, 20, 14


def _depths(graph: Graph, preds: dict[str, list[str]]) -> dict[str, int]:
    depth: dict[str, int] = {}
    for n in graph.nodes:  # nodes come in program order: predecessors first
        depth[n.id] = 1 + max((depth.get(p, 0) for p in preds[n.id]), default=-1)
    last = max(depth.values(), default=0)
    for n in graph.nodes:
        if n.kind == "output":
            depth[n.id] = last
    return depth


def _layout(graph: Graph) -> tuple[list[list[str]], dict[tuple[str, str], list[str]]]:
    """Layers of node and dummy ids, and each edge's chain of ids (dummies between)."""
    ids = {n.id for n in graph.nodes}
    preds: dict[str, list[str]] = {n.id: [] for n in graph.nodes}
    edges = [(a, b) for a, b in graph.edges if a in ids and b in ids]
    for a, b in edges:
        preds[b].append(a)
    depth = _depths(graph, preds)
    nlayers = max(depth.values(), default=0) + 1
    layers: list[list[str]] = [[] for _ in range(nlayers)]
    for n in graph.nodes:
        layers[depth[n.id]].append(n.id)
    up: dict[str, list[str]] = {i: [] for i in ids}
    down: dict[str, list[str]] = {i: [] for i in ids}
    chains: dict[tuple[str, str], list[str]] = {}
    for k, (a, b) in enumerate(edges):
        chain = [a]
        for d in range(depth[a] + 1, depth[b]):
            dummy = f"~{k}_{d}"
            layers[d].append(dummy)
            up[dummy], down[dummy] = [], []
            chain.append(dummy)
        chain.append(b)
        for u, v in zip(chain, chain[1:]):
            down[u].append(v)
            up[v].append(u)
        chains[(a, b)] = chain
    pos = {i: float(k) for layer in layers for k, i in enumerate(layer)}

    def sweep(order: range, neighbours: dict[str, list[str]]) -> None:
        for li in order:
            layer = layers[li]
            layer.sort(key=lambda i: (sum(pos[j] for j in neighbours[i]) / len(neighbours[i])
                                      if neighbours[i] else pos[i]))  # fmt: skip
            for k, i in enumerate(layer):
                pos[i] = float(k)

    for _ in range(3):
        sweep(range(1, nlayers), up)
        sweep(range(nlayers - 2, -1, -1), down)
    sweep(range(1, nlayers), up)
    return [layer for layer in layers if layer], chains


def _is_dummy(i: str) -> bool:
    return i.startswith("~")


def layered_svg(graph: Graph) -> str:
    """A self-contained SVG of the graph, top to bottom, with a device legend."""
    if not graph.nodes:
        raise HetvmError("the graph has no nodes to draw")
    colors = device_colors(graph.devices())
    layers, chains = _layout(graph)

    def row_width(layer: list[str]) -> float:
        return sum(_DUMMY if _is_dummy(i) else _W for i in layer) + _GX * (len(layer) - 1)

    widest = max(row_width(layer) for layer in layers)
    width = max(widest + 2 * _PAD, 420)
    height = len(layers) * (_H + _GY) + 2 * _PAD + 40
    xy: dict[str, tuple[float, float]] = {}  # top-left of a node; centre-top of a dummy
    for li, layer in enumerate(layers):
        x = (width - row_width(layer)) / 2
        y = _PAD + 40 + li * (_H + _GY)
        for i in layer:
            w = _DUMMY if _is_dummy(i) else _W
            xy[i] = (x + w / 2, y) if _is_dummy(i) else (x, y)
            x += w + _GX
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="Helvetica, Arial, sans-serif">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" '
           'markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>',
           '<rect width="100%" height="100%" fill="white"/>']  # fmt: skip
    lx = _PAD
    for dev, fill in colors.items():
        out.append(f'<rect x="{lx}" y="{_PAD}" width="14" height="14" fill="{fill}" stroke="#333"/>')
        out.append(f'<text x="{lx + 20}" y="{_PAD + 12}" font-size="12">{html.escape(dev)}</text>')
        lx += 30 + 8 * len(dev) + 20
    out.append(f'<polygon points="{lx + 7},{_PAD} {lx + 14},{_PAD + 7} {lx + 7},{_PAD + 14} {lx},{_PAD + 7}" '
               f'fill="white" stroke="{COPY_COLOR}" stroke-width="2"/>')  # fmt: skip
    out.append(f'<text x="{lx + 20}" y="{_PAD + 12}" font-size="12">copy between devices</text>')

    def bottom(i: str) -> tuple[float, float]:
        x, y = xy[i]
        return (x, y + _H) if _is_dummy(i) else (x + _W / 2, y + _H)

    def top(i: str) -> tuple[float, float]:
        x, y = xy[i]
        return (x, y) if _is_dummy(i) else (x + _W / 2, y)

    for chain in chains.values():
        pts = [bottom(chain[0])]
        for i in chain[1:-1]:  # through each dummy: down its whole layer
            pts += [top(i), bottom(i)]
        pts.append(top(chain[-1]))
        d = f"M{pts[0][0]:.1f},{pts[0][1]:.1f}"
        for (x1, y1), (x2, y2) in zip(pts, pts[1:]):
            mid = (y1 + y2) / 2
            d += f" C{x1:.1f},{mid:.1f} {x2:.1f},{mid:.1f} {x2:.1f},{y2:.1f}"
        out.append(f'<path d="{d}" fill="none" stroke="#555" stroke-width="1" marker-end="url(#arrow)"/>')
    for n in graph.nodes:
        x, y = xy[n.id]
        fill = colors.get(n.device or "", "#eeeeee")
        if n.kind == "copy":
            cx, cy = x + _W / 2, y + _H / 2
            out.append(f'<polygon points="{cx},{y} {x + _W},{cy} {cx},{y + _H} {x},{cy}" fill="{fill}" '
                       f'stroke="{COPY_COLOR}" stroke-width="2.5"/>')  # fmt: skip
        elif n.kind in ("input", "output"):
            out.append(f'<ellipse cx="{x + _W / 2}" cy="{y + _H / 2}" rx="{_W / 2}" ry="{_H / 2}" '
                       f'fill="{fill}" stroke="#333"/>')  # fmt: skip
        else:
            out.append(f'<rect x="{x}" y="{y}" width="{_W}" height="{_H}" rx="6" fill="{fill}" stroke="#333"/>')
        title = html.escape(f"{n.label} {n.detail} @{n.device or '?'}")
        out.append(f"<title>{title}</title>")
        out.append(f'<text x="{x + _W / 2}" y="{y + 19}" font-size="11" text-anchor="middle" '
                   f'font-weight="bold">{html.escape(_clip(n.label, 24))}</text>')  # fmt: skip
        out.append(f'<text x="{x + _W / 2}" y="{y + 34}" font-size="9" text-anchor="middle" '
                   f'fill="#333">{html.escape(_clip(n.detail, 30))}</text>')  # fmt: skip
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"
