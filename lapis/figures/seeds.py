"""The seed write-ups' own tables against the predictions: the B200 progression and the Emmy moves.

Input rows are `lapis.validate.seeds` rows: B200 rows hold kernel, shape (a label such as "4K"), measured_pct and
predicted_pct (% of the table's same-run FA4); Emmy rows hold move, measured_us and predicted_us. Bare Agg
Figures (no pyplot).
"""

from __future__ import annotations

from lapis.figures.palette import SERIES_COLOURS, variant_style

__all__ = ["seeds_progression"]


def _figure(size):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=size)
    FigureCanvasAgg(fig)
    return fig


def seeds_progression(b200: list[dict], emmy: list[dict], path=None,
                      title: str = "The seeds' own tables: predicted against measured"):
    """Two panels. Left (axes[0]): % of FA4 against the kernel number, one colour per shape, measured solid with
    dots and predicted dashed with crosses; lines have gid "measured:SHAPE" and "predicted:SHAPE". Right
    (axes[1]): each Emmy move's µs, measured and predicted bars side by side (gids "bars:measured",
    "bars:predicted"). Saves a PNG at `path` if given (dpi 110); returns the Figure. ValueError when both row
    lists are empty."""
    if not b200 and not emmy:
        raise ValueError("no rows to draw")
    fig = _figure((13.0, 5.0))
    ax, ex = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for i, shape in enumerate(dict.fromkeys(r["shape"] for r in b200)):
        colour, _ = variant_style(i)
        mine = [r for r in b200 if r["shape"] == shape]
        ks = [r["kernel"] for r in mine]
        ax.plot(ks, [r["measured_pct"] for r in mine], color=colour, marker="o", markersize=4, linewidth=1.2,
                label=f"{shape} measured", gid=f"measured:{shape}")
        ax.plot(ks, [r["predicted_pct"] for r in mine], color=colour, marker="x", markersize=5, linewidth=1.0,
                linestyle="--", label=f"{shape} predicted", gid=f"predicted:{shape}")
    if b200:
        ax.set_xticks(sorted({r["kernel"] for r in b200}))
    ax.set_xlabel("B200 kernel (the write-up's chapter)")
    ax.set_ylabel("% of same-run FA4")
    ax.grid(linestyle=":", linewidth=0.5)
    ax.legend(fontsize=7, frameon=False, ncol=2, loc="upper left")
    ax.set_title("B200 progression (b200 profile, from the seed kernels' SASS)", fontsize=9)
    xs = range(len(emmy))
    ex.bar([x - 0.2 for x in xs], [r["measured_us"] for r in emmy], 0.4, color=SERIES_COLOURS["measured"],
           label="write-up", gid="bars:measured")
    ex.bar([x + 0.2 for x in xs], [r["predicted_us"] for r in emmy], 0.4, color=SERIES_COLOURS["predicted"],
           label="predicted", gid="bars:predicted")
    ex.set_xticks(list(xs))
    ex.set_xticklabels([r["move"] for r in emmy], fontsize=7, rotation=30, ha="right", rotation_mode="anchor")
    ex.set_ylabel("µs (lower is faster)")
    ex.grid(axis="y", linestyle=":", linewidth=0.5)
    ex.set_axisbelow(True)
    ex.legend(fontsize=7, frameon=False)
    ex.set_title("Emmy moves on the RTX 5090 (rtx5090 profile)", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
