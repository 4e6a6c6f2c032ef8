"""The predicted-against-measured bars: the report's kernel chart as one panel per shape, readable at its dpi,
every group labelled with its build."""

import matplotlib.image as mpimg
import pytest
from matplotlib.colors import to_hex

from lapis.figures.predicted_measured import build_label, predicted_measured_bars
from lapis.report.kernels import SERIES, kernel_rows

SHAPES = ["8x16x4096x128", "4x16x8192x128", "2x16x16384x128", "16x16x2048x128", "32x16x1024x128"]


@pytest.fixture(scope="module")
def rows():
    return kernel_rows()


def _ticks(ax):
    return [t.get_text().replace("\n", " ") for t in ax.get_xticklabels()]


def test_the_kernel_chart_is_one_panel_per_shape_at_most_2000_px_wide(rows, tmp_path):
    path = tmp_path / "kernels_tflops.png"
    # called as lapis.report.kernels calls it
    fig = predicted_measured_bars(rows, path, title="t", series=SERIES, label=lambda r: f"{r['variant']}\n{r['shape']}",
                                  ylabel="TFLOP/s")
    height, width = mpimg.imread(path).shape[:2]
    assert width <= 2000 and width == pytest.approx((1.1 * 12 + 2) * 110, abs=2)  # 12 builds per shape, dpi 110
    assert height == pytest.approx((1.2 + 3.4 * 5) * 110, abs=2)
    assert [ax.get_title(loc="left") for ax in fig.axes] == SHAPES
    for ax, shape in zip(fig.axes, SHAPES):
        mine = [r for r in rows if r["shape"] == shape]
        ticks = _ticks(ax)
        assert len(ticks) == len(mine) == len(set(ticks))  # every group labelled, no two alike
        assert ticks[:3] == ["s1", "s2", "s3"] and "s9" in ticks and "s9 causal heavy_first" in ticks
        measured = [p for p in ax.patches if p.get_gid() == "bars:measured_tflops"]
        assert {to_hex(p.get_facecolor()) for p in measured} == {"#e6550d"}
        assert len(measured) == len(mine)
    # one y scale for every panel
    assert len({ax.get_ylim() for ax in fig.axes}) == 1


def test_build_label_names_what_differs_within_a_variant():
    a = dict(variant="s9", causal=False, params=dict(stages=3))
    b = dict(variant="s9", causal=True, params=dict(stages=3, causal=1, persistent_order="heavy_first"))
    c = dict(variant="s6_emu8", causal=False, params=dict(emulate_frac=0.125))
    d = dict(variant="s6_emu8", causal=False, params=dict(emulate_frac=0.25))
    rows = [a, b, c, d]
    assert [build_label(r, rows) for r in rows] == ["s9", "s9 causal heavy_first", "s6_emu8 emulate_frac=0.125",
                                                    "s6_emu8 emulate_frac=0.25"]


def test_few_rows_stay_one_panel_with_their_labels():
    rows = [dict(variant=f"v{i}", shape="2048x2048x2048", predicted_tflops=500.0 + i, measured_tflops=480.0,
                 q1_tflops=490.0, q3_tflops=470.0) for i in range(3)]
    fig = predicted_measured_bars(rows)
    assert len(fig.axes) == 1 and _ticks(fig.axes[0]) == ["v0 2048³", "v1 2048³", "v2 2048³"]
    assert fig.get_size_inches()[0] == pytest.approx(8.0)
