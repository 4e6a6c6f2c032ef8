"""The seeds chart: the B200 progression as lines per shape, the Emmy moves as bars, from the rows given."""

import pytest

from lapis.figures.seeds import seeds_progression


def test_lines_per_shape_and_bars_per_move_hold_the_rows(tmp_path):
    b200 = [dict(kernel=k, shape=s, measured_pct=m, predicted_pct=p)
            for k, s, m, p in ((1, "4K", 14.2, 20.0), (2, "4K", 15.1, 19.0), (1, "8K", 14.1, 21.0),
                               (2, "8K", 15.0, 22.0))]
    emmy = [dict(move="m01", measured_us=612.0, predicted_us=500.0), dict(move="m02", measured_us=510.0,
                                                                       predicted_us=322.0)]
    fig = seeds_progression(b200, emmy, tmp_path / "s.png")
    lines, bars = fig.axes[0], fig.axes[1]
    got = {ln.get_gid(): ln.get_xydata().tolist() for ln in lines.get_lines()}
    assert got == {"measured:4K": [[1, 14.2], [2, 15.1]], "predicted:4K": [[1, 20.0], [2, 19.0]],
                   "measured:8K": [[1, 14.1], [2, 15.0]], "predicted:8K": [[1, 21.0], [2, 22.0]]}
    heights = {}
    for p in bars.patches:
        heights.setdefault(p.get_gid(), []).append(p.get_height())
    assert heights == {"bars:measured": [612.0, 510.0], "bars:predicted": [500.0, 322.0]}
    assert [t.get_text() for t in bars.get_xticklabels()] == ["m01", "m02"]
    assert (tmp_path / "s.png").stat().st_size > 10_000


def test_no_rows_is_an_error():
    with pytest.raises(ValueError, match="no rows"):
        seeds_progression([], [])
