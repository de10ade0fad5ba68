"""The memory picture of ``hetvm plan --plot``, drawn with matplotlib (Agg).

Top: bytes live per device over the program, with the kills (the run as it
happened) and without them (no memory returned before the call ends), with
the planner's lower bound as a reference line. Bottom: each arena of the
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


def _mib(n: float) -> float:
    return n / (1 << 20)


def plot_memory(
    path: str,
    series: Mapping[str, Series],
    arenas: Sequence[Arena],
    bounds: Mapping[str, int | None] | None = None,
    title: str = "",
) -> str:
    """Writes the picture to ``path`` (format from the extension); returns the path."""
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
        ax.step(s.steps, [_mib(v) for v in s.without_kills], where="post", ls="--", color="#999999",
                label=f"without kills (peak {_mib(s.peak_without_kills):.2f} MiB)")  # fmt: skip
        ax.step(s.steps, [_mib(v) for v in s.with_kills], where="post", color="#1f78b4",
                label=f"with kills (peak {_mib(s.peak):.2f} MiB)")  # fmt: skip
        bound = (bounds or {}).get(dev)
        if bound:
            ax.axhline(_mib(bound), color="#e31a1c", lw=1, ls=":", label=f"lower bound {_mib(bound):.2f} MiB")
        ax.set_title(f"bytes live on {dev}")
        ax.set_xlabel("program order (allocator events)")
        ax.set_ylabel("MiB")
        ax.legend(fontsize=8, loc="upper left")
    if not devices:
        ax = axes[0][0]
        ax.set_visible(True)
        ax.text(0.5, 0.5, "no allocations traced", ha="center", va="center")
    for j, arena in enumerate(arenas):
        ax = axes[1][j]
        ax.set_visible(True)
        cmap = plt.get_cmap("tab20")
        for k, b in enumerate(arena.blocks):
            ax.add_patch(Rectangle((b.start, _mib(b.offset)), max(b.end - b.start, 0.6), _mib(b.size),
                                   facecolor=cmap(k % 20), edgecolor="#333333", lw=0.4, alpha=0.85))  # fmt: skip
        size = arena.size if arena.size is not None else arena.used
        ax.set_xlim(0, max((b.end for b in arena.blocks), default=1) + 1)
        ax.set_ylim(0, max(_mib(size), 1e-6) * 1.05)
        ax.axhline(_mib(size), color="#333333", lw=0.8, ls="--")
        ax.set_title(f"arena {arena.name} (device {arena.device_index}): {len(arena.blocks)} tensors, "
                     f"{_mib(size):.2f} MiB", fontsize=9)  # fmt: skip
        ax.set_xlabel("binding position (lifetime)")
        ax.set_ylabel("offset (MiB)")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
