"""Predicted against measured throughput per (variant, shape): grouped bars of TFLOP/s.

Input rows are `lapis.report.calibration.gemm_rows` entries (times in µs). Each group holds the blind
prediction, the current prediction, the measured kernel (plain build; the whisker is its IQR) and cuBLAS in the
same run. TFLOP/s = 2 M N K / time, so sizes from 2048³ to 8192³ share one axis. A bare Agg Figure (no pyplot).
"""

from __future__ import annotations

__all__ = ["predicted_measured_bars"]

SERIES = (("blind_tflops", "predicted (blind)", "#9ecae1"), ("predicted_tflops", "predicted (now)", "#3182bd"),
          ("measured_tflops", "measured (plain build)", "#e6550d"), ("cublas_tflops", "cuBLAS (same run)", "#969696"))


def _gemm_label(r: dict) -> str:
    return f"{r['variant']}\n{r['shape'].split('x')[0]}³"


def predicted_measured_bars(rows: list[dict], path=None, title: str = "", series=SERIES, label=_gemm_label,
                            ylabel: str = "TFLOP/s (bf16, 2·M·N·K / time)"):
    """Draw one group of bars per row and save a PNG at `path` (if given); returns the Figure. A series whose
    value is None in a row (no blind prediction) is left out of that group. Raises ValueError without rows.
    series: (row key, legend, colour) triples (the "measured_tflops" series gets q1/q3_tflops whiskers);
    label: row -> x tick text; ylabel: the y axis (other kernels count FLOPs their own way)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not rows:
        raise ValueError("no rows to draw")
    fig = Figure(figsize=(max(8.0, 1.1 * len(rows) + 2), 4.8))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / len(series)
    for i, (key, legend, colour) in enumerate(series):
        xs = [g + (i - (len(series) - 1) / 2) * width for g, r in enumerate(rows) if r.get(key) is not None]
        ys = [r[key] for r in rows if r.get(key) is not None]
        err = None
        if key == "measured_tflops":  # the IQR of the times, as throughput
            err = [[r[key] - r["q3_tflops"] for r in rows], [r["q1_tflops"] - r[key] for r in rows]]
        ax.bar(xs, ys, width, label=legend, color=colour, edgecolor="black", linewidth=0.3, yerr=err, capsize=2,
               gid=f"bars:{key}")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([label(r) for r in rows], fontsize=8)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", linestyle=":", linewidth=0.5)
    ax.set_axisbelow(True)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
