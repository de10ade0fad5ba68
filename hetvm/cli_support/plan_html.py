"""``hetvm plan MODEL --html plan.html``: the memory plan as one self-contained page.

In the spirit of PyTorch's memory viewer, but for the *plan* rather than a
recorded run: per device, the bytes live over the program with and without the
kills, the arena layout (byte offset x time) with every tensor a block you can
hover (tensor, op, node, bytes, lifetime), the tensors that sit outside the
plan, the copies between devices and the kernel calls on the same time axis,
and the device planner's reasons. Everything is inline (SVG drawn here, a few
lines of CSS and JavaScript for the tooltips): no network, no external
scripts, so the file opens anywhere and can be attached to a bug report.

The time axis is the lowered program's binding positions (:mod:`.memory_view`);
an allocation, a kernel call and a kill each take one position.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .console import format_bytes
from .graph_render import device_colors
from .memory_view import Arena, Block, Layout

__all__ = ["PlanPage", "render_plan_html", "page_from_compiled", "write_plan_html"]

_W = 1040  # plot width in px (the page scales it to the window)
_LEFT = 96  # room for the y-axis labels
_LIVE_H = 120
_ARENA_H = 210
_OUTSIDE_H = 46
_LANE_H = 26
_PALETTE = ["#8dd3c7", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5",
            "#bc80bd", "#ccebc5", "#ffed6f", "#a6cee3", "#b2df8a"]  # fmt: skip
_OUTSIDE_FILL = "#f4a582"


@dataclass
class PlanPage:
    """What the page shows; filled by ``hetvm plan`` (or a test)."""

    title: str
    devices: Sequence[str]  # the executable's device names, by device index
    layout: Layout
    rows: Sequence[Mapping[str, Any]] = ()  # memory_rows(): the plan's figures per device
    copies: Sequence[Mapping[str, Any]] = ()  # the planner's copy records
    notes: Sequence[str] = ()  # explain's notes (an unused device, ...)
    names: Mapping[str, Any] = field(default_factory=dict)  # planned-module origins


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _x(pos: float, length: int) -> float:
    return _LEFT + (pos / max(length, 1)) * (_W - _LEFT - 16)


def _tip(lines: Sequence[str]) -> str:
    return _esc("\n".join(lines))


def _lifetime(b: Block, length: int) -> str:
    end = "the end (returned)" if b.end >= length else str(b.end)
    return f"lifetime: position {b.start} to {end}"


def _block_tip(b: Block, dev: str, length: int) -> str:
    lines = [f"tensor: {b.label}", f"op: {b.op}", f"node: {b.node}", f"bytes: {format_bytes(b.size)} ({b.size:,})",
             _lifetime(b, length), f"device: {dev}"]  # fmt: skip
    if b.outside:
        lines.append(f"outside the plan: {b.outside}")
    else:
        lines.append(f"offset: {format_bytes(b.offset)} ({b.offset:,})")
    if b.name != b.label:
        lines.append(f"IR value: {b.name}")
    return _tip(lines)


def _axis_ticks(length: int, y: float, height: float) -> list[str]:
    out = []
    step = max(1, round(length / 10))
    for t in range(0, length + 1, step):
        x = _x(t, length)
        out.append(f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{x:.1f}" y2="{y + height:.1f}" class="grid"/>')
        out.append(f'<text x="{x:.1f}" y="{y + height + 12:.1f}" class="tick" text-anchor="middle">{t}</text>')
    return out


def _live_svg(page: PlanPage, index: int, dev: str, row: Mapping[str, Any]) -> str:
    lay = page.layout
    with_k, without_k = lay.live(index, True), lay.live(index, False)
    outside = sum(b.size for b in lay.outside if b.device_index == index)
    bound, planned = row.get("lower_bound"), row.get("planned")
    top = max([*without_k, (planned or 0) + outside, bound or 0, 1])
    y0, h = 14, _LIVE_H

    def y(v: float) -> float:
        return y0 + h - (v / top) * h

    def path(values: list[int]) -> str:
        pts = []
        for t, v in enumerate(values):
            pts.append(f"{_x(t, lay.length):.1f},{y(v):.1f}")
            pts.append(f"{_x(t + 1, lay.length):.1f},{y(v):.1f}")
        return " ".join(pts)

    out = [f'<svg class="chart" viewBox="0 0 {_W} {h + 44}" data-device="{_esc(dev)}">']
    out += _axis_ticks(lay.length, y0, h)
    for frac in (0.5, 1.0):
        out.append(f'<text x="{_LEFT - 6}" y="{y(top * frac) + 4:.1f}" class="tick" text-anchor="end">'
                   f"{_esc(format_bytes(top * frac))}</text>")  # fmt: skip
    out.append(f'<polyline points="{path(without_k)}" class="nokill" data-tip="{_tip(["without kills: nothing is freed before the call returns", f"peak {format_bytes(max(without_k))}"])}"/>')  # noqa: E501
    area = f"{_x(0, lay.length):.1f},{y(0):.1f} {path(with_k)} {_x(lay.length + 1, lay.length):.1f},{y(0):.1f}"
    out.append(f'<polygon points="{area}" class="withkill" data-tip="{_tip(["with kills: each tensor freed after its last use", f"peak {format_bytes(max(with_k))}"])}"/>')  # noqa: E501
    refs = []
    if bound:
        refs.append(("bound", bound, f"lower bound {format_bytes(bound)}: the most bytes live at one point"))
    if planned:
        refs.append(("planned", planned, f"planned arena {format_bytes(planned)}"))
    if planned is not None and outside:
        refs.append(("peak", planned + outside,
                     f"predicted peak {format_bytes(planned + outside)} = arena + {format_bytes(outside)} "
                     "outside the plan (results outlive the call)"))  # fmt: skip
    for cls, value, text in refs:
        out.append(f'<line x1="{_LEFT}" x2="{_W - 16}" y1="{y(value):.1f}" y2="{y(value):.1f}" class="{cls}" '
                   f'data-tip="{_esc(text)}"/>')  # fmt: skip
    out.append(f'<rect class="band" x="0" y="{y0}" width="0" height="{h}"/>')
    out.append(f'<text x="{_LEFT}" y="{h + 42}" class="axis">program position (bindings of the lowered main)</text>')
    out.append("</svg>")
    return "\n".join(out)


def _fit(labels: Sequence[str], width: float) -> str:
    """The longest label that fits ``width`` px (about 5.6 px a character at 10 px)."""
    for text in labels:
        if len(text) * 5.6 <= width:
            return text
    return ""


def _arena_svg(arena: Arena, dev: str, length: int, height: int, block_ids: list[str]) -> str:
    size = max(arena.size if arena.size is not None else arena.used, 1)
    y0, h = 6, height

    def y(offset: float) -> float:
        return y0 + h - (offset / size) * h

    cls = "arena outside" if arena.outside_plan else "arena"
    out = [f'<svg class="{cls}" viewBox="0 0 {_W} {h + 26}" data-device="{_esc(dev)}">']
    out.append(f'<rect x="{_LEFT}" y="{y0}" width="{_W - 16 - _LEFT}" height="{h}" class="frame"/>')
    out.append(f'<text x="{_LEFT - 6}" y="{y0 + 10}" class="tick" text-anchor="end">{_esc(format_bytes(size))}</text>')
    out.append(f'<text x="{_LEFT - 6}" y="{y0 + h}" class="tick" text-anchor="end">0</text>')
    for k, b in enumerate(arena.blocks):
        bid = f"blk{len(block_ids)}"
        block_ids.append(bid)
        x1, x2 = _x(b.start, length), _x(b.end + 1, length)
        top, bottom = y(b.offset + b.size), y(b.offset)
        fill = _OUTSIDE_FILL if arena.outside_plan else _PALETTE[k % len(_PALETTE)]
        out.append(f'<rect id="{bid}" class="block" x="{x1:.1f}" y="{top:.1f}" width="{max(x2 - x1, 2):.1f}" '
                   f'height="{max(bottom - top, 1.5):.1f}" fill="{fill}" data-start="{b.start}" data-end="{b.end}" '
                   f'data-tip="{_block_tip(b, dev, length)}"/>')  # fmt: skip
        text = _fit([f"{b.label} · {b.op} · {format_bytes(b.size)}", f"{b.label} · {format_bytes(b.size)}", b.label],
                    x2 - x1 - 4)  # fmt: skip
        if text and bottom - top >= 11:
            out.append(f'<text x="{x1 + 3:.1f}" y="{(top + bottom) / 2 + 4:.1f}" class="blabel">{_esc(text)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _lanes_svg(page: PlanPage, colors: Mapping[str, str]) -> str:
    """Kernel calls per device, and the copies between the device lanes."""
    lay, devs = page.layout, list(page.devices)
    h = _LANE_H * len(devs) + 30
    out = [f'<svg class="lanes" viewBox="0 0 {_W} {h}">']

    def lane_y(i: int) -> float:
        return 8 + i * _LANE_H

    for i, dev in enumerate(devs):
        out.append(f'<text x="{_LEFT - 6}" y="{lane_y(i) + 15:.1f}" class="tick" text-anchor="end">{_esc(dev)}</text>')
        out.append(f'<line x1="{_LEFT}" x2="{_W - 16}" y1="{lane_y(i) + 11:.1f}" y2="{lane_y(i) + 11:.1f}" class="grid"/>')
    for s in lay.steps:
        if s.op == "copy" or s.device_index >= len(devs):
            continue
        x = _x(s.position, lay.length)
        w = max(_x(s.position + 1, lay.length) - x - 1, 2)
        dev = devs[s.device_index]
        out.append(f'<rect class="step" x="{x:.1f}" y="{lane_y(s.device_index) + 3:.1f}" width="{w:.1f}" height="16" '
                   f'fill="{colors.get(dev, "#ccc")}" data-tip="{_tip([f"{s.op} -> {s.output}", f"on {dev}, position {s.position}"])}"/>')  # noqa: E501
    by_copy = {str(c.get("copy", "")): c for c in page.copies}
    for c in lay.copies:
        if not (0 <= c.src_index < len(devs) and 0 <= c.dst_index < len(devs)):
            continue
        rec = by_copy.get(c.copy_var, {})
        x = _x(c.position + 0.5, lay.length)
        ya, yb = lane_y(c.src_index) + 11, lane_y(c.dst_index) + 11
        tip = [f"copy {c.value}: {devs[c.src_index]} -> {devs[c.dst_index]}", f"bytes: {format_bytes(c.bytes)}",
               f"position {c.position}"]  # fmt: skip
        if rec.get("reason"):
            tip.append(f"why: {rec['reason']}")
        out.append(f'<line class="copy" x1="{x:.1f}" x2="{x:.1f}" y1="{ya:.1f}" y2="{yb:.1f}" data-tip="{_tip(tip)}"/>')
        out.append(f'<circle class="copy" cx="{x:.1f}" cy="{yb:.1f}" r="5" data-tip="{_tip(tip)}"/>')
    out.append(f'<text x="{_LEFT}" y="{h - 4}" class="axis">kernel calls per device (a box each) and copies '
               "between devices (red), on the same positions</text>")  # fmt: skip
    out.append("</svg>")
    return "\n".join(out)


def _summary(page: PlanPage) -> str:
    cols = ["device", "no reuse", "lower bound", "planned arena", "outside the plan", "predicted peak", "measured peak"]
    out = ['<table class="summary"><tr>' + "".join(f"<th>{c}</th>" for c in cols) + "</tr>"]
    for r in page.rows:
        outside = None
        if r.get("predicted_peak") is not None and r.get("planned") is not None:
            outside = r["predicted_peak"] - r["planned"]
        cells = [r["device"], r.get("no_reuse"), r.get("lower_bound"), r.get("planned"), outside,
                 r.get("predicted_peak"), r.get("peak")]  # fmt: skip
        out.append("<tr>" + "".join(f"<td>{_esc(c if i == 0 else format_bytes(c))}</td>" for i, c in enumerate(cells))
                   + "</tr>")  # fmt: skip
    out.append("</table>")
    out.append('<p class="legend">no reuse: every tensor its own buffer; lower bound: the most bytes live at '
               "one point of the program; planned arena: what the static plan allocates; outside the plan: "
               "tensors the plan cannot share (results outlive the call); predicted peak = arena + outside.</p>")
    return "\n".join(out)


def _reasons(page: PlanPage) -> str:
    out = ["<h2>Placement: copies and their reasons</h2>"]
    if page.notes:
        out.append('<ul class="notes">' + "".join(f"<li>{_esc(n)}</li>" for n in page.notes) + "</ul>")
    lay, devs = page.layout, list(page.devices)
    calls = {d: 0 for d in devs}
    for s in lay.steps:
        if s.op != "copy" and s.device_index < len(devs):
            calls[devs[s.device_index]] += 1
    out.append("<p>" + "; ".join(f"{_esc(d)}: {n} kernel call{'s' if n != 1 else ''}" for d, n in calls.items())
               + ".</p>")  # fmt: skip
    if not page.copies:
        out.append("<p>No copies between devices.</p>")
        return "\n".join(out)
    from .naming import display

    out.append('<table class="copies"><tr><th>value</th><th>node</th><th>from</th><th>to</th><th>bytes</th>'
               "<th>read by</th><th>reason</th></tr>")  # fmt: skip
    for c in page.copies:
        value = str(c.get("value", "?"))
        origin = page.names.get(value)
        readers = ", ".join(display(str(v), page.names) for v in c.get("consumers", []) or [])
        out.append("<tr>" + "".join(f"<td>{_esc(v)}</td>" for v in (
            display(value, page.names), origin.node_text() if origin is not None else "-", c.get("src"),
            c.get("dst"), format_bytes(c.get("bytes")), readers or "-", c.get("reason", "-"))) + "</tr>")  # fmt: skip
    out.append("</table>")
    return "\n".join(out)


_CSS = """
body{font:14px/1.4 Helvetica,Arial,sans-serif;margin:16px 24px;color:#222;max-width:1200px}
h1{font-size:20px;margin:0 0 6px} h2{font-size:16px;margin:22px 0 6px} h3{font-size:14px;margin:12px 0 2px}
svg{width:100%;height:auto;display:block;overflow:visible}
table{border-collapse:collapse;margin:6px 0} td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f3f3f3} .legend,.axis{color:#555;font-size:12px} .tick{font-size:10px;fill:#555}
.grid{stroke:#eee} .frame{fill:#fafafa;stroke:#999}
.withkill{fill:#1f78b4;fill-opacity:.35;stroke:#1f78b4;stroke-width:1.5}
.nokill{fill:none;stroke:#888;stroke-dasharray:5 3;stroke-width:1.5}
.bound{stroke:#e31a1c;stroke-dasharray:2 2;stroke-width:2} .planned{stroke:#33a02c;stroke-dasharray:7 3;stroke-width:2}
.peak{stroke:#6a3d9a;stroke-width:1.5}
.block{stroke:#333;stroke-width:.5} .block:hover,.block.hot{stroke:#000;stroke-width:2}
.blabel{font-size:10px;pointer-events:none} .band{fill:#ffd92f;fill-opacity:.35;pointer-events:none}
.copy{stroke:#e31a1c;stroke-width:3;fill:#e31a1c} .step{stroke:#555;stroke-width:.3}
.key span{display:inline-block;margin-right:14px} .key i{display:inline-block;width:22px;height:0;
 vertical-align:middle;margin-right:4px;border-top:2px solid}
#tip{position:fixed;display:none;background:#fffff0;border:1px solid #333;padding:6px 8px;font:12px/1.35 monospace;
 white-space:pre;pointer-events:none;box-shadow:2px 2px 6px rgba(0,0,0,.25);z-index:10;max-width:640px;
 white-space:pre-wrap}
"""

# hover: show the element's data-tip; over an arena block, also shade its lifetime
# in that device's live-bytes chart. "#hover=<id>" in the URL shows one element's tip
# (for links in bug reports and for tests without a pointer).
_JS = """
(function(){
var tip=document.getElementById('tip');
function show(el,x,y){tip.textContent=el.getAttribute('data-tip');tip.style.display='block';
 tip.style.left=Math.min(x+14,window.innerWidth-tip.offsetWidth-8)+'px';
 tip.style.top=Math.min(y+14,window.innerHeight-tip.offsetHeight-8)+'px';tip.setAttribute('data-for',el.id||'');
 if(el.classList.contains('block')){el.classList.add('hot');band(el,true);}}
function hide(el){tip.style.display='none';el.classList.remove('hot');band(el,false);}
function band(el,on){var sec=el.closest('section');if(!sec)return;var b=sec.querySelector('.band');if(!b)return;
 if(!on){b.setAttribute('width',0);return;}b.setAttribute('x',el.getAttribute('x'));
 b.setAttribute('width',el.getAttribute('width'));}
document.querySelectorAll('[data-tip]').forEach(function(el){
 el.addEventListener('mousemove',function(e){show(el,e.clientX,e.clientY);});
 el.addEventListener('mouseleave',function(){hide(el);});});
var m=/hover=([\\w-]+)/.exec(location.hash);if(m){var el=document.getElementById(m[1]);
 if(el){var r=el.getBoundingClientRect();show(el,r.left+r.width/2,r.top+r.height/2);}}
})();
"""


def render_plan_html(page: PlanPage) -> str:
    """The page as one HTML string (write it to a file)."""
    colors = device_colors(list(page.devices))
    lay = page.layout
    rows = {r["device"]: r for r in page.rows}
    body = [f"<h1>{_esc(page.title)}</h1>",
            '<p class="legend">Hover any block, line or mark for details. Time runs left to right in '
            "program positions of the lowered <code>main</code>; every section shares that axis.</p>",
            _summary(page)]  # fmt: skip
    block_ids: list[str] = []
    for index, dev in enumerate(page.devices):
        arenas = [a for a in lay.arenas if a.device_index == index]
        row = rows.get(dev, {})
        if not arenas and not any(s.device_index == index for s in lay.steps):
            body.append(f"<section><h2>{_esc(dev)}</h2><p>Nothing runs or is stored on {_esc(dev)}.</p></section>")
            continue
        body.append(f'<section data-device="{_esc(dev)}"><h2>{_esc(dev)}: bytes live over the program</h2>')
        body.append('<div class="key"><span><i style="border-color:#1f78b4"></i>with kills</span>'
                    '<span><i style="border-color:#888;border-top-style:dashed"></i>without kills</span>'
                    '<span><i style="border-color:#e31a1c;border-top-style:dotted"></i>lower bound</span>'
                    '<span><i style="border-color:#33a02c;border-top-style:dashed"></i>planned arena</span>'
                    '<span><i style="border-color:#6a3d9a"></i>predicted peak (arena + outside the plan)</span>'
                    "</div>")  # fmt: skip
        body.append(_live_svg(page, index, dev, row))
        for arena in arenas:
            n = len(arena.blocks)
            size = arena.size if arena.size is not None else arena.used
            if arena.outside_plan:
                why = ", ".join(sorted({b.outside for b in arena.blocks}))
                body.append(f"<h3>outside the plan on {_esc(dev)}: {n} tensor{'s' if n != 1 else ''}, "
                            f"{_esc(format_bytes(size))} ({_esc(why)}: a result outlives the call, so it "
                            "gets its own storage, counted in the predicted peak)</h3>")  # fmt: skip
                body.append(_arena_svg(arena, dev, lay.length, _OUTSIDE_H, block_ids))
            else:
                body.append(f"<h3>arena {_esc(arena.name)} on {_esc(dev)}: {n} tensor{'s' if n != 1 else ''} in "
                            f"{_esc(format_bytes(size))} (byte offset up, time right)</h3>")  # fmt: skip
                body.append(_arena_svg(arena, dev, lay.length, _ARENA_H, block_ids))
        body.append("</section>")
    body.append("<h2>Kernel calls and copies between devices</h2>")
    body.append(_lanes_svg(page, colors))
    body.append(_reasons(page))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_esc(page.title)}</title><style>{_CSS}</style></head><body>\n"
            + "\n".join(body) + '\n<div id="tip"></div>\n<script>' + _JS + "</script>\n</body></html>\n")  # fmt: skip


def page_from_compiled(compiled: Any, rows: Sequence[Mapping[str, Any]], title: str,
                       notes: Sequence[str] = ()) -> PlanPage:  # fmt: skip
    """The page of one build (:class:`~.session.Compiled` with its explain report)."""
    from .memory_view import program_layout, unplanned_of
    from .placement import device_name
    from .reports import copies_of

    layout = program_layout(compiled.lowered, names=compiled.names, unplanned=unplanned_of(compiled.exe))
    copies = [c if isinstance(c, Mapping) else vars(c) for c in copies_of(compiled.explain)]
    exe_devices = list(getattr(compiled.exe, "devices", None) or [])
    devices = [f"{d['kind']}:{d['index']}" for d in exe_devices] or [device_name(v) for v in compiled.setup.vdevices]
    return PlanPage(title, devices, layout, rows, copies, notes, compiled.planned_names)


def write_plan_html(path: str, page: PlanPage) -> str:
    """Writes the page to ``path``; returns the path."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_plan_html(page))
    return path
