"""Predicted against measured over every validated case: a scatter with y = x, and the progression bars.

Input rows are `lapis.validate.timelines` per_case entries (times in µs; rows without a prediction are left
out). Bare Agg Figures (no pyplot).
"""

from __future__ import annotations

__all__ = ["scatter", "progression"]

BAND = 0.10  # the ±10% band the max-error goal draws
COLOURS = ("#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363", "#d6616b", "#8c6d31", "#17becf", "#bcbd22")
MARKERS = ("o", "s", "^", "D")  # past the colours, the next marker: every variant keeps its own (colour, marker)


def _figure(size):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=size)
    FigureCanvasAgg(fig)
    return fig


def scatter(rows: list[dict], path=None, title: str = "Predicted against measured kernel time (H200)"):
    """Log-log scatter of predicted_us against measured_us, one colour and marker per variant (hollow: causal), with
    y = x and a ±10% band. Saves a PNG at `path` if given; returns the Figure. ValueError without rows."""
    rows = [r for r in rows if r.get("predicted_us") is not None]
    if not rows:
        raise ValueError("no rows to draw")
    fig = _figure((6.4, 5.6))
    ax = fig.add_subplot(1, 1, 1)
    lo = min(min(r["predicted_us"], r["measured_us"]) for r in rows) / 1.3
    hi = max(max(r["predicted_us"], r["measured_us"]) for r in rows) * 1.3
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8, label="y = x")
    ax.fill_between([lo, hi], [lo * (1 - BAND), hi * (1 - BAND)], [lo * (1 + BAND), hi * (1 + BAND)],
                    color="#bdbdbd", alpha=0.4, label=f"±{BAND:.0%}")
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    for i, v in enumerate(variants):
        mine = [r for r in rows if r["variant"] == v]
        for causal in (False, True):
            pts = [r for r in mine if bool(r.get("causal")) == causal]
            if pts:
                c, m = COLOURS[i % len(COLOURS)], MARKERS[i // len(COLOURS) % len(MARKERS)]
                ax.scatter([r["measured_us"] for r in pts], [r["predicted_us"] for r in pts], s=28, marker=m,
                           facecolors="none" if causal else c, edgecolors=c,
                           label=f"{v}{' causal' if causal else ''}", gid=f"points:{v}:{int(causal)}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured µs (plain build, median)")
    ax.set_ylabel("predicted µs (h200 profile, schedule alone)")
    ax.grid(linestyle=":", linewidth=0.5)
    ax.legend(fontsize=7, loc="upper left", frameon=False)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def progression(rows: list[dict], path=None, title: str = "Hopper progression: predicted and measured",
                ylabel: str = "µs (lower is faster)"):
    """One panel per (shape, causal): predicted and measured bars side by side per variant, in the rows'
    order. A row without measured_us (a prediction only) gets its predicted bar alone. Saves a PNG at `path`
    if given; returns the Figure. ValueError without rows."""
    rows = [r for r in rows if r.get("predicted_us") is not None]
    if not rows:
        raise ValueError("no rows to draw")
    groups = list(dict.fromkeys((r["shape"], bool(r.get("causal"))) for r in rows))
    width = max(len([r for r in rows if (r["shape"], bool(r.get("causal"))) == g]) for g in groups)
    fig = _figure((max(6.0, 0.55 * width + 2) * min(len(groups), 3) / 1.6, 3.2 * -(-len(groups) // 3)))
    for i, g in enumerate(groups):
        ax = fig.add_subplot(-(-len(groups) // 3), min(len(groups), 3), i + 1)
        mine = [r for r in rows if (r["shape"], bool(r.get("causal"))) == g]
        xs = range(len(mine))
        ax.bar([x - 0.2 for x in xs], [r["predicted_us"] for r in mine], 0.4, color="#3182bd",
               label="predicted", gid="bars:predicted")
        meas = [(x, r["measured_us"]) for x, r in zip(xs, mine) if r.get("measured_us") is not None]
        if meas:
            ax.bar([x + 0.2 for x, _ in meas], [m for _, m in meas], 0.4, color="#e6550d",
                   label="measured (plain build)", gid="bars:measured")
        ax.set_xticks(list(xs))
        long = len(mine) > 6 or max(len(r["variant"]) for r in mine) > 6  # names that would overlap flat
        ax.set_xticklabels([r["variant"] for r in mine], fontsize=7, rotation=30 if long else 0,
                           ha="right" if long else "center")
        ax.set_title(f"{g[0]}{' causal' if g[1] else ''}", fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="y", linestyle=":", linewidth=0.5)
        ax.set_axisbelow(True)
        if i == 0:
            ax.set_ylabel(ylabel, fontsize=8)
            ax.legend(fontsize=7, frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
