"""The validation scatter: linear axes, an error-% panel, and a colour and marker of its own per variant."""

import pytest
from matplotlib.colors import to_hex
from matplotlib.markers import MarkerStyle

from lapis.figures.validation import scatter


def _marker(name):
    m = MarkerStyle(name)
    return m.get_path().transformed(m.get_transform()).vertices.round(6).tolist()


def test_linear_axes_and_an_error_panel_that_shows_a_20_percent_miss(tmp_path):
    rows = [dict(variant="s1", causal=False, predicted_us=120.0, measured_us=100.0),
            dict(variant="s1", causal=True, predicted_us=900.0, measured_us=1000.0),
            dict(variant="s2", causal=False, predicted_us=5000.0, measured_us=5000.0),
            dict(variant="s3", causal=False, predicted_us=None, measured_us=50.0)]
    fig = scatter(rows, tmp_path / "s.png")
    main, err = fig.axes[:2]
    assert main.get_xscale() == main.get_yscale() == "linear" and err.get_yscale() == "linear"
    assert main.get_xlim()[0] == 0 and main.get_xlim()[1] == pytest.approx(5250.0)
    assert "error %" in err.get_ylabel()
    got = {c.get_gid(): c.get_offsets().tolist() for c in err.collections if (c.get_gid() or "").startswith("errors:")}
    assert got == {"errors:s1:0": [[100.0, 20.0]], "errors:s1:1": [[1000.0, -10.0]], "errors:s2:0": [[5000.0, 0.0]]}
    assert err.get_ylim() == (-35.0, 35.0)


def test_every_variant_has_a_distinct_colour_and_marker():
    rows = [dict(variant=f"v{i}", causal=False, predicted_us=10.0 + i, measured_us=11.0 + i) for i in range(12)]
    fig = scatter(rows)
    style = {}
    for c in fig.axes[0].collections:
        if (c.get_gid() or "").startswith("points:"):
            outline = c.get_paths()[0].vertices.round(6).tolist()
            style[c.get_gid().split(":")[1]] = (to_hex(c.get_edgecolor()[0]), outline)
    assert len(style) == 12
    first = [style[f"v{i}"] for i in range(9)]
    assert len({c for c, _ in first}) == 9 and len({str(p) for _, p in first}) == 9  # both differ
    assert len({(c, str(p)) for c, p in style.values()}) == 12  # no two variants share both
    assert style["v0"] == ("#1f77b4", _marker("o")) and style["v9"] == ("#1f77b4", _marker("s"))
    # the error panel draws each variant in the same style
    for c in fig.axes[1].collections:
        if (c.get_gid() or "").startswith("errors:"):
            v = c.get_gid().split(":")[1]
            assert (to_hex(c.get_edgecolor()[0]), c.get_paths()[0].vertices.round(6).tolist()) == style[v]


def test_progression_is_one_panel_per_shape_with_causal_rows_labelled():
    from lapis.figures.validation import progression
    rows = [dict(variant=v, shape=s, causal=c, predicted_us=p, measured_us=m)
            for v, s, c, p, m in (("s1", "A", False, 10.0, 12.0), ("s9", "A", False, 5.0, 6.0),
                                  ("s9", "A", True, 3.0, 4.0), ("g", "B", False, 7.0, None))]
    fig = progression(rows)
    assert [ax.get_title() for ax in fig.axes] == ["A", "B"]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["s1", "s9", "s9 causal"]
    assert all(ax.get_xlim() == (-0.6, 2.6) for ax in fig.axes)  # one bar width in every panel
    heights = {ax.get_title(): [(p.get_gid(), p.get_height()) for p in ax.patches] for ax in fig.axes}
    assert heights["B"] == [("bars:predicted", 7.0)]
    assert ("bars:measured", 4.0) in heights["A"]
