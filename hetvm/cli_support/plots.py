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


def plot_memory(
    path: str,
    series: Mapping[str, Series],
    arenas: Sequence[Arena],
    bounds: Mapping[str, int | None] | None = None,
    planned: Mapping[str, int | None] | None = None,
    title: str = "",
    device_names: Sequence[str] = (),
) -> str:
    """Writes the picture to ``path`` (format from the extension); returns the path.

    ``device_names`` names the executable's device indices (arenas carry indices).
    """
    plt = _pyplot()
    from matplotlib.patches import Rectangle

    devices = list(series)
    ncols = max(1, len(devices))
    rows = 2 if arenas else 1
    arena_cols = max(1, len(arenas))
    cols = max(ncols, arena_cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows), squeeze=False)
    for ax in axes.flat:
        ax.set_visible(False)
    for i, dev in enumerate(devices):
        s = series[dev]
        ax = axes[0][i]
        ax.set_visible(True)
        bound = (bounds or {}).get(dev)
        arena = (planned or {}).get(dev)
        unit, scale = _unit(max(s.peak_without_kills, bound or 0, arena or 0))
        ax.step(s.steps, [v / scale for v in s.without_kills], where="post", ls="--", color="#999999",
                label=f"without kills (peak {s.peak_without_kills / scale:.2f} {unit})")  # fmt: skip
        ax.step(s.steps, [v / scale for v in s.with_kills], where="post", color="#1f78b4",
                label=f"with kills (peak {s.peak / scale:.2f} {unit})")  # fmt: skip
        if bound:
            ax.axhline(bound / scale, color="#e31a1c", lw=1, ls=":", label=f"lower bound {bound / scale:.2f} {unit}")
        if arena:
            ax.axhline(arena / scale, color="#33a02c", lw=1, ls="-.",
                       label=f"static plan {arena / scale:.2f} {unit}")  # fmt: skip
        ax.set_ylim(bottom=0)
        ax.set_title(f"bytes live on {dev}")
        ax.set_xlabel("program order (allocations and frees, tensor by tensor)")
        ax.set_ylabel(unit)
        ax.legend(fontsize=8, loc="upper left")
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
        for k, b in enumerate(arena.blocks):
            ax.add_patch(Rectangle((b.start, b.offset / scale), max(b.end - b.start, 0.6), b.size / scale,
                                   facecolor=cmap(k % 20), edgecolor="#333333", lw=0.4, alpha=0.85))  # fmt: skip
        ax.set_xlim(min((b.start for b in arena.blocks), default=0) - 1,
                    max((b.end for b in arena.blocks), default=1) + 1)  # fmt: skip
        ax.set_ylim(0, max(size / scale, 1e-9) * 1.05)
        ax.axhline(size / scale, color="#333333", lw=0.8, ls="--")
        idx = arena.device_index
        name = device_names[idx] if idx < len(device_names) else f"device {idx}"
        ax.set_title(f"arena {arena.name} on {name}: {len(arena.blocks)} tensors, "
                     f"{size / scale:.2f} {unit}", fontsize=9)  # fmt: skip
        ax.set_xlabel("binding position (lifetime)")
        ax.set_ylabel(f"offset ({unit})")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
