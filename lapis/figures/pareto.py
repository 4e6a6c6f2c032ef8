"""A sweep's configurations as predicted TFLOP/s (geometric mean over the shapes) against shared memory (KiB),
with the Pareto front (max TFLOP/s, min shared memory) drawn as a step line and the best few labelled.

Input: lapis.sweep.table.ranked() and pareto() dicts. Output: a PNG. matplotlib is imported inside the
function and the figure is a bare Figure rendered by Agg (no pyplot, no global backend change).
"""

from __future__ import annotations

__all__ = ["pareto_figure"]


def pareto_figure(configs: list[dict], front: list[dict], path: str, title: str, label_top: int = 3):
    """Draw the configurations (lapis.sweep.table.ranked rows: smem_bytes, geomean_tflops, runnable, config) and
    the front, label the first `label_top` configurations (right of a point in the left half of the x range,
    left of it in the right half, so labels stay inside the figure), save a PNG at `path` (dpi 120) and return
    the Figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.8))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    runnable = [c for c in configs if c["runnable"]]
    other = [c for c in configs if not c["runnable"]]
    for group, style, label in ((other, dict(color="#9ecae1"), "predicted"),
                                (runnable, dict(color="#31a354", marker="s"), "predicted, runnable kernel")):
        if group:
            ax.scatter([c["smem_bytes"] / 1024 for c in group], [c["geomean_tflops"] for c in group], s=28,
                       label=label, zorder=2, **style)
    if front:
        ax.step([c["smem_bytes"] / 1024 for c in front], [c["geomean_tflops"] for c in front], where="post",
                color="#de2d26", zorder=3, label="Pareto front (max TFLOP/s, min smem)")
        ax.scatter([c["smem_bytes"] / 1024 for c in front], [c["geomean_tflops"] for c in front], s=60,
                   facecolors="none", edgecolors="#de2d26", zorder=4)
    xs = [c["smem_bytes"] / 1024 for c in configs]
    mid = (min(xs) + max(xs)) / 2
    for c in configs[:label_top]:  # a label right of its point, or left of it in the right half (kept inside)
        right = c["smem_bytes"] / 1024 > mid
        ax.annotate(c["config"], (c["smem_bytes"] / 1024, c["geomean_tflops"]), fontsize=7, ha="right" if right
                    else "left", xytext=(-6 if right else 4, 4), textcoords="offset points", gid=f"label:{c['config']}")
    ax.set_xlabel("shared memory per CTA (KiB, the schedule's tiles)")
    ax.set_ylabel("predicted TFLOP/s (geometric mean over shapes)")
    ax.set_title(title, fontsize=9)
    ax.margins(x=0.25, y=0.12)  # room for the labels of the points at the edges
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return fig
