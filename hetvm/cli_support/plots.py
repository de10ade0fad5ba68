"""The memory picture of ``hetvm plan --plot``, drawn with matplotlib (Agg).

Top: bytes live per device over the program, tensor by tensor (a run without
the static plan, so each intermediate is its own allocation), with the kills
and without them (nothing returned before the call ends), and the planner's
lower bound and planned arena bytes as reference lines. Bottom: each arena of the
static plan, tensors as rectangles (time × byte offset), so reuse of the same
bytes by tensors with disjoint lifetimes is visible at a glance.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..errors import HetvmError
from .memory_view import Arena, Series

__all__ = ["plot_memory"]


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise HetvmError("--plot needs matplotlib: pip install 'hetvm[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1))


def _unit(largest: float) -> tuple[str, float]:
    """The largest binary unit that keeps ``largest`` at 1 or more."""
    for name, size in _UNITS:
        if largest >= size:
            return name, float(size)
    return "B", 1.0


def _fit(labels: Sequence[str], chars: float) -> str:
    """The longest label of ``labels`` no longer than ``chars`` characters."""
    for text in labels:
        if len(text) <= chars:
            return text
    return ""


def plot_memory(
    path: str,
    series: Mapping[str, Series],
    arenas: Sequence[Arena],
    bounds: Mapping[str, int | None] | None = None,
    planned: Mapping[str, int | None] | None = None,
    title: str = "",
    device_names: Sequence[str] = (),
    predicted: Mapping[str, int | None] | None = None,
) -> str:
    """Writes the picture to ``path`` (format from the extension); returns the path.

    ``device_names`` names the executable's device indices (arenas carry indices).
    ``predicted`` (device -> predicted peak) draws the arena plus what sits outside
    the plan: a device whose results are not in the arena holds more than the arena,
    and the curve of live bytes rises above the static plan's line by exactly that.
    """
    plt = _pyplot()
    from matplotlib.patches import Rectangle

    from .console import short_bytes

    devices = list(series)
    ncols = max(1, len(devices))
    rows = 2 if arenas else 1
    arena_cols = max(1, len(arenas))
    cols = max(ncols, arena_cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.6 * cols, 4.0 * rows), squeeze=False)
    for ax in axes.flat:
        ax.set_visible(False)
    for i, dev in enumerate(devices):
        s = series[dev]
        ax = axes[0][i]
        ax.set_visible(True)
        bound = (bounds or {}).get(dev)
        arena = (planned or {}).get(dev)
        peak = (predicted or {}).get(dev)
        unit, scale = _unit(max(s.peak_without_kills, bound or 0, arena or 0, peak or 0))
        ax.step(s.steps, [v / scale for v in s.without_kills], where="post", ls="--", color="#999999",
                label=f"without kills (peak {s.peak_without_kills / scale:.2f} {unit})")  # fmt: skip
        ax.step(s.steps, [v / scale for v in s.with_kills], where="post", color="#1f78b4",
                label=f"with kills (peak {s.peak / scale:.2f} {unit})")  # fmt: skip
        if bound:
            ax.axhline(bound / scale, color="#e31a1c", lw=1, ls=":", label=f"lower bound {bound / scale:.2f} {unit}")
        if arena:
            ax.axhline(arena / scale, color="#33a02c", lw=1, ls="-.",
                       label=f"static plan (arena) {arena / scale:.2f} {unit}")  # fmt: skip
        if peak and arena is not None and peak > arena:
            ax.axhline(peak / scale, color="#6a3d9a", lw=1,
                       label=f"arena + {short_bytes(peak - arena)} outside the plan = {peak / scale:.2f} {unit}")
            ax.annotate("above the arena: results, which outlive\nthe call, sit outside the plan",
                        xy=(0.98, peak / scale), xycoords=("axes fraction", "data"), ha="right", va="top",
                        fontsize=7, color="#6a3d9a")  # fmt: skip
        ax.set_ylim(bottom=0, top=max(s.peak_without_kills, peak or 0, arena or 0, 1) / scale * 1.25)
        ax.set_title(f"bytes live on {dev}")
        ax.set_xlabel("program order (allocations and frees, tensor by tensor)")
        ax.set_ylabel(unit)
        ax.legend(fontsize=7, loc="best")
    if not devices:
        ax = axes[0][0]
        ax.set_visible(True)
        ax.text(0.5, 0.5, "no allocations traced", ha="center", va="center")
    for j, arena in enumerate(arenas):
        ax = axes[1][j]
        ax.set_visible(True)
        cmap = plt.get_cmap("tab20")
        size = arena.size if arena.size is not None else arena.used
        unit, scale = _unit(max(size, 1))
        x0 = min((b.start for b in arena.blocks), default=0) - 1
        x1 = max((b.end for b in arena.blocks), default=1) + 1
        ax.set_xlim(x0, x1)
        ax.set_ylim(0, max(size / scale, 1e-9) * 1.05)
        # characters that fit across one unit of time, at 6.5 pt a character
        width_px = ax.get_window_extent().width
        per_unit = width_px / max(x1 - x0, 1) / 6.5 * 72 / fig.dpi
        for k, b in enumerate(arena.blocks):
            color = "#f4a582" if arena.outside_plan else cmap(k % 20)
            w = max(b.end - b.start, 0.6)
            ax.add_patch(Rectangle((b.start, b.offset / scale), w, b.size / scale,
                                   facecolor=color, edgecolor="#333333", lw=0.4, alpha=0.85))  # fmt: skip
            tall = b.size / max(size, 1) > 0.06
            text = _fit([f"{b.label} · {b.op} · {short_bytes(b.size)}", f"{b.label} · {short_bytes(b.size)}",
                         b.label], w * per_unit) if tall else ""  # fmt: skip
            if text:
                ax.text(b.start + 0.15, (b.offset + b.size / 2) / scale, text, fontsize=6.5, va="center",
                        clip_on=True)  # fmt: skip
        ax.axhline(size / scale, color="#333333", lw=0.8, ls="--")
        idx = arena.device_index
        name = device_names[idx] if idx < len(device_names) else f"device {idx}"
        n = len(arena.blocks)
        if arena.outside_plan:
            why = ", ".join(sorted({b.outside for b in arena.blocks}))
            names = ", ".join(b.label for b in arena.blocks[:3])
            ax.set_title(f"outside the plan on {name} ({why}): {names}, {size / scale:.2f} {unit}\n"
                         "a result outlives the call, so it is not in the arena", fontsize=8)  # fmt: skip
        else:
            ax.set_title(f"arena {arena.name} on {name}: {n} tensor{'s' if n != 1 else ''}, "
                         f"{size / scale:.2f} {unit}", fontsize=9)  # fmt: skip
        ax.set_xlabel("binding position (lifetime)")
        ax.set_ylabel(f"offset ({unit})")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
