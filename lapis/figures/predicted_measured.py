"""Predicted against measured throughput per (variant, shape): grouped bars of TFLOP/s.

Input rows are `lapis.report.calibration.gemm_rows` or `lapis.report.kernels.kernel_rows` entries. Each group
holds the blind prediction, the current prediction, the measured kernel (plain build; the whisker is its IQR)
and the vendor library in the same run. TFLOP/s = 2 M N K / time (GEMM), so sizes from 2048³ to 8192³ share
one axis. Many rows are drawn as facets, one panel per shape stacked vertically, so the figure stays at most
MAX_WIDTH_IN wide; inside a panel every group is labelled with its build (`build_label`: "s9 causal
heavy_first"). A bare Agg Figure (no pyplot).
"""

from __future__ import annotations

import textwrap

from lapis.figures.palette import SERIES_COLOURS

__all__ = ["predicted_measured_bars", "build_label"]

SERIES = (("blind_tflops", "predicted (blind)", SERIES_COLOURS["predicted (blind)"]),
          ("predicted_tflops", "predicted (now)", SERIES_COLOURS["predicted"]),
          ("measured_tflops", "measured (plain build)", SERIES_COLOURS["measured"]),
          ("cublas_tflops", "cuBLAS (same run)", SERIES_COLOURS["reference"]))
DPI = 110
MAX_WIDTH_IN = 17.5  # 1925 px at DPI
GROUP_IN = 1.1  # inches per group of bars
CHAR_IN = 0.07  # width of one 8 pt character, inches
FACET_ROWS = 12  # more rows than this, over more than one shape: one panel per shape


def _gemm_label(r: dict) -> str:
    return f"{r['variant']}\n{r['shape'].split('x')[0]}³"


def _param_text(key: str, value) -> str:
    if isinstance(value, str):
        return value
    return f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}"


def build_label(row: dict, rows: list[dict]) -> str:
    """The variant, then "causal" for a causal row, then each kernel parameter (row["params"]) whose value differs
    among the rows of `rows` with the same variant (a string value as itself, else "key=value"; the "causal"
    parameter is the flag already said). E.g. "s9 causal heavy_first" beside "s9"."""
    same = [r for r in rows if r["variant"] == row["variant"]]
    keys = sorted({k for r in same for k in r.get("params", {})} - {"causal"})
    differ = [k for k in keys if len({repr(r.get("params", {}).get(k)) for r in same}) > 1]
    parts = [row["variant"]] + (["causal"] if row.get("causal") else [])
    parts += [_param_text(k, row["params"][k]) for k in differ if k in row.get("params", {})]
    return " ".join(parts)


def _labels(rows: list[dict], label, title: str) -> list[str]:
    """label(row) per row, without a line equal to the panel's title; rows whose labels collide get their
    build_label instead, so no two groups of a panel read the same."""
    out = ["\n".join(line for line in label(r).split("\n") if line != title) for r in rows]
    dup = {t for t in out if out.count(t) > 1}
    return [build_label(r, rows) if t in dup else t for r, t in zip(rows, out)]


def _facets(rows: list[dict], facet) -> list[tuple[str, list[dict]]]:
    if facet is None:
        shapes = list(dict.fromkeys(r.get("shape") for r in rows))
        if len(rows) <= FACET_ROWS or len(shapes) < 2 or None in shapes:
            return [("", rows)]
        facet = lambda r: r["shape"]  # noqa: E731
    keys = list(dict.fromkeys(facet(r) for r in rows))
    return [(str(k), [r for r in rows if facet(r) == k]) for k in keys]


def _panel(ax, rows: list[dict], series, labels: list[str], group_in: float) -> None:
    width = 0.8 / len(series)
    for i, (key, legend, colour) in enumerate(series):
        have = [(g, r) for g, r in enumerate(rows) if r.get(key) is not None]
        if not have:
            continue
        xs = [g + (i - (len(series) - 1) / 2) * width for g, _ in have]
        ys = [r[key] for _, r in have]
        err = None
        if key == "measured_tflops" and all("q1_tflops" in r for _, r in have):  # the IQR of the times
            err = [[r[key] - r["q3_tflops"] for _, r in have], [r["q1_tflops"] - r[key] for _, r in have]]
        ax.bar(xs, ys, width, label=legend, color=colour, edgecolor="black", linewidth=0.3, yerr=err, capsize=2,
               gid=f"bars:{key}")
    chars = max(6, int(group_in / CHAR_IN))  # a label wider than its group wraps at spaces
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(["\n".join(textwrap.wrap(t, chars, break_long_words=False)) if "\n" not in t else t
                        for t in labels], fontsize=8)
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.grid(axis="y", linestyle=":", linewidth=0.5)
    ax.set_axisbelow(True)


def predicted_measured_bars(rows: list[dict], path=None, title: str = "", series=SERIES, label=_gemm_label,
                            ylabel: str = "TFLOP/s (bf16, 2·M·N·K / time)", facet=None):
    """Draw one group of bars per row and save a PNG at `path` (if given, DPI 110); returns the Figure. A series
    whose value is None in a row (no blind prediction) is left out of that group. Raises ValueError without rows.
    series: (row key, legend, colour) triples (the "measured_tflops" series gets q1/q3_tflops whiskers);
    label: row -> x tick text (a line equal to the panel's title is dropped; colliding labels become
    `build_label`s); ylabel: the y axis (other kernels count FLOPs their own way). facet: row -> panel title,
    one panel per value stacked vertically on one y scale; by default rows are split by row["shape"] when
    there are more than FACET_ROWS over several shapes. The figure is at most MAX_WIDTH_IN wide."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not rows:
        raise ValueError("no rows to draw")
    panels = _facets(list(rows), facet)
    most = max(len(p) for _, p in panels)
    width = min(MAX_WIDTH_IN, max(8.0, GROUP_IN * most + 2))
    fig = Figure(figsize=(width, 1.2 + 3.4 * len(panels)))
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(panels), 1, sharey=True, squeeze=False)[:, 0]
    for ax, (name, mine) in zip(axes, panels):
        _panel(ax, mine, series, _labels(mine, label, name), (width - 2) / len(mine))
        ax.set_ylabel(ylabel, fontsize=8)
        if name:
            ax.set_title(name, fontsize=9, loc="left")
    axes[0].legend(fontsize=8, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=len(series), frameon=False)
    if title:
        fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=DPI)
    return fig
