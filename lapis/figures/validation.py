"""Predicted against measured over every validated case: a scatter with y = x, and the progression bars.

Input rows are `lapis.validate.timelines` per_case entries (times in µs; rows without a prediction are left
out). Bare Agg Figures (no pyplot).
"""

from __future__ import annotations

from lapis.figures.palette import SERIES_COLOURS, VARIANT_COLOURS, VARIANT_MARKERS, variant_style

__all__ = ["scatter", "progression"]

BAND = 0.10  # the ±10% band the max-error goal draws
COLOURS = VARIANT_COLOURS
MARKERS = VARIANT_MARKERS


def _figure(size):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=size)
    FigureCanvasAgg(fig)
    return fig


def _err_pct(r: dict) -> float:
    return 100.0 * (r["predicted_us"] - r["measured_us"]) / r["measured_us"]


def scatter(rows: list[dict], path=None, title: str = "Predicted against measured kernel time (H200)"):
    """Two panels sharing the variants' styles. Left (axes[0]): predicted_us against measured_us on linear axes,
    with y = x and a ±10% band. Right (axes[1]): the error, 100 * (predicted - measured) / measured %, against
    measured µs (log x: the cases span decades), with 0 and ±10% lines, so a 10-30% miss reads directly.
    Each variant has its own (colour, marker) (`palette.variant_style`: the first 9 differ in both); causal
    points are hollow. Scatter collections have gid "points:VARIANT:CAUSAL" (left) and "errors:VARIANT:CAUSAL"
    (right). Saves a PNG at `path` if given; returns the Figure. ValueError without rows."""
    rows = [r for r in rows if r.get("predicted_us") is not None]
    if not rows:
        raise ValueError("no rows to draw")
    fig = _figure((12.0, 5.6))
    ax, ex = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    hi = max(max(r["predicted_us"], r["measured_us"]) for r in rows) * 1.05
    ax.plot([0, hi], [0, hi], color="black", linewidth=0.8, label="y = x")
    ax.fill_between([0, hi], [0, hi * (1 - BAND)], [0, hi * (1 + BAND)], color="#bdbdbd", alpha=0.4,
                    label=f"±{BAND:.0%}")
    ex.axhspan(-100 * BAND, 100 * BAND, color="#bdbdbd", alpha=0.4)
    ex.axhline(0, color="black", linewidth=0.8)
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    for i, v in enumerate(variants):
        c, m = variant_style(i)
        mine = [r for r in rows if r["variant"] == v]
        for causal in (False, True):
            pts = [r for r in mine if bool(r.get("causal")) == causal]
            if not pts:
                continue
            style = dict(s=30, marker=m, facecolors="none" if causal else c, edgecolors=c, linewidths=1.0)
            xs = [r["measured_us"] for r in pts]
            ax.scatter(xs, [r["predicted_us"] for r in pts], label=f"{v}{' causal' if causal else ''}",
                       gid=f"points:{v}:{int(causal)}", **style)
            ex.scatter(xs, [_err_pct(r) for r in pts], gid=f"errors:{v}:{int(causal)}", **style)
    ax.set_xlim(0, hi)
    ax.set_ylim(0, hi)
    ax.set_xlabel("measured µs (plain build, median)")
    ax.set_ylabel("predicted µs (h200 profile, schedule alone)")
    ax.grid(linestyle=":", linewidth=0.5)
    ax.legend(fontsize=7, loc="upper left", frameon=False, ncol=2 if len(variants) > 12 else 1)
    ax.set_title("predicted against measured (linear)", fontsize=9)
    ex.set_xscale("log")
    lim = max(35.0, max(abs(_err_pct(r)) for r in rows) * 1.1)
    ex.set_ylim(-lim, lim)
    ex.set_xlabel("measured µs (log)")
    ex.set_ylabel("error % = 100 (predicted - measured) / measured")
    ex.grid(linestyle=":", linewidth=0.5)
    ex.set_title(f"error per case (grey: ±{BAND:.0%}; above 0: predicted slower)", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def progression(rows: list[dict], path=None, title: str = "Hopper progression: predicted and measured",
                ylabel: str = "µs (lower is faster)"):
    """One panel per shape, three panels a row: predicted and measured bars side by side per variant, in the
    rows' order; a causal row is labelled "VARIANT causal". Every panel's x axis holds as many groups as the
    fullest one, so a bar has one width throughout. A row without measured_us (a prediction only) gets its
    predicted bar alone. Saves a PNG at `path` if given (dpi 110); returns the Figure. ValueError without rows."""
    rows = [r for r in rows if r.get("predicted_us") is not None]
    if not rows:
        raise ValueError("no rows to draw")
    groups = list(dict.fromkeys(r["shape"] for r in rows))
    width = max(len([r for r in rows if r["shape"] == g]) for g in groups)
    ncols, nrows = min(len(groups), 3), -(-len(groups) // 3)
    fig = _figure((max(6.0, 0.55 * width + 2) * ncols / 1.6, 0.5 + 3.2 * nrows))
    for i, g in enumerate(groups):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        mine = [r for r in rows if r["shape"] == g]
        xs = range(len(mine))
        ax.bar([x - 0.2 for x in xs], [r["predicted_us"] for r in mine], 0.4, color=SERIES_COLOURS["predicted"],
               label="predicted", gid="bars:predicted")
        meas = [(x, r["measured_us"]) for x, r in zip(xs, mine) if r.get("measured_us") is not None]
        if meas:
            ax.bar([x + 0.2 for x, _ in meas], [m for _, m in meas], 0.4, color=SERIES_COLOURS["measured"],
                   label="measured (plain build)", gid="bars:measured")
        names = [f"{r['variant']}{' causal' if r.get('causal') else ''}" for r in mine]
        ax.set_xticks(list(xs))
        long = len(mine) > 6 or max(len(n) for n in names) > 6  # names that would overlap flat
        ax.set_xticklabels(names, fontsize=7, rotation=30 if long else 0, ha="right" if long else "center",
                           rotation_mode="anchor")
        ax.set_xlim(-0.6, width - 0.4)
        ax.set_title(g, fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="y", linestyle=":", linewidth=0.5)
        ax.set_axisbelow(True)
        if i % ncols == 0:
            ax.set_ylabel(ylabel, fontsize=8)
        if i == 0:
            ax.legend(fontsize=7, frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_size_inches()[1]))  # room for the title
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
