"""The TMA box-set mechanism (lapis/model/tma_boxes.py) against the H200 capture micro/h200-2026-12-04-tmatile."""

import json

import pytest

from lapis.errors import CaptureError
from lapis.model import tma_boxes


@pytest.fixture(scope="module")
def rows():
    return {r["name"]: r for r in tma_boxes.table()}


def test_the_constants_are_solved_from_the_two_16_byte_row_sets():
    c = tma_boxes.derive(tma_boxes.read_capture())
    # 272 against 32 boxes of the same 4096 16 B rows: 13488 - 4107 cycles over 240 boxes
    assert c["box_cycles"] == pytest.approx(39.09, abs=0.05)
    assert c["row_cycles"] == pytest.approx(0.697, abs=0.003)


def test_the_blind_model_missed_the_small_boxes_by_a_factor_seven(rows):
    r = rows["tmatile.noswz.fixed.all.d2"]
    assert r["measured_ns"] == pytest.approx(6814.0, abs=1)
    assert r["blind_ns"] == pytest.approx(953.5, abs=0.5)  # 64 KiB over the SM's share of 9.073 TB/s
    assert r["mechanism_ns"] / r["measured_ns"] == pytest.approx(1.0, abs=0.002)


@pytest.mark.parametrize("name", ["tmatile.sw128.fixed.one.d2", "tmatile.sw128.fixed.one.d1",
                                  "tmatile.sw128.fixed.all.d2", "tmatile.sw128big.fixed.all.d2"])
def test_the_swizzled_sets_not_solved_from_are_within_three_percent(rows, name):
    r = rows[name]
    assert not r["solved"]
    assert abs(r["mechanism_ns"] / r["measured_ns"] - 1) < 0.03, r


def test_one_sm_with_one_tile_in_flight_is_where_it_misses(rows):
    # the landing latency's tail after the unit's work is not modelled: four 128-row boxes on one SM, depth 1
    r = rows["tmatile.sw128big.fixed.one.d1"]
    assert r["mechanism_ns"] / r["measured_ns"] - 1 == pytest.approx(-0.316, abs=0.005)


def test_a_broken_capture_is_a_named_error(tmp_path):
    bad = tmp_path / "results.json"
    bad.write_text("{not json")
    with pytest.raises(CaptureError, match="readable results.json"):
        tma_boxes.read_capture(bad)
    got = json.loads(tma_boxes.CAPTURES.joinpath(*tma_boxes.CAPTURE).read_text())
    got["measurements"] = [m for m in got["measurements"] if m["name"] != tma_boxes.SOLVE[1]]
    bad.write_text(json.dumps(got))
    with pytest.raises(CaptureError, match="two items the constants are solved from"):
        tma_boxes.read_capture(bad)


def _edited(tmp_path, name, edit):
    got = json.loads(tma_boxes.CAPTURES.joinpath(*tma_boxes.CAPTURE).read_text())
    edit(next(m for m in got["measurements"] if m["name"] == name))
    path = tmp_path / "results.json"
    path.write_text(json.dumps(got))
    return path


def test_an_item_whose_params_or_timings_were_changed_is_a_named_error(tmp_path):
    edits = [("tmatile.sw128.fixed.one.d1", lambda m: m["params"].update(tiles=32), "campaign item"),
             (tma_boxes.SOLVE[0], lambda m: m["params"].update(boxes=32), "campaign item"),
             ("tmatile.sw128.fixed.one.d1", lambda m: m["raw"].update(cta_ns=[float("nan")] * 11), "finite"),
             (tma_boxes.SOLVE[1], lambda m: m["raw"].update(cycles=[0.0] * 11), "above zero"),
             (tma_boxes.SOLVE[1], lambda m: m.pop("raw"), "raw cycles and cta_ns")]
    for name, edit, words in edits:
        with pytest.raises(CaptureError, match=words):
            tma_boxes.read_capture(_edited(tmp_path, name, edit))


def test_the_command_refuses_an_unknown_argument(capsys):
    assert tma_boxes.main(["--bogus"]) == 2
    assert "takes no argument or --blind" in capsys.readouterr().err
    assert tma_boxes.main(["--blind"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(
        (tma_boxes.CAPTURES.parent / "blind" / "micro" / "tmatile.json").read_text())
