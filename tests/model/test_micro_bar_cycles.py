"""micro_campaign.bar_cycles: campaign version 5's values read back from a results.json, on the hand-written parser
fixture tests/data/micro/bar-parser-fixture.json (not a capture) and broken copies of it."""

import json
from pathlib import Path

import pytest

from lapis.errors import CaptureError
from lapis.model import micro_campaign as mc

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "micro" / "bar-parser-fixture.json"


def _doc():
    return json.loads(FIXTURE.read_text())


def test_the_fixture_values_and_only_the_bar_measurements():
    assert mc.bar_cycles(_doc(), "fixture") == {"bar.hop.reg.t384": 51.0, "bar.try_wait.t256": 12.0}


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["measurements"][1].update(status="timeout"), "bar.hop.reg.t384 status 'timeout'"),
    (lambda d: d["measurements"][2]["value"].update(unit="ns"), "bar.try_wait.t256"),
    (lambda d: d["measurements"][2]["value"].update(median=0.0), "positive median in cycles"),
    (lambda d: d["measurements"][1].pop("value"), "bar.hop.reg.t384 status 'ok' value {}"),
])
def test_a_bar_measurement_without_a_usable_value_is_refused(edit, words):
    d = _doc()
    edit(d)
    with pytest.raises(CaptureError, match=words) as e:
        mc.bar_cycles(d, "x/results.json")
    assert "x/results.json" in str(e.value) and "benchmarks/h200_bar.sh" in str(e.value)


def test_a_capture_without_bar_measurements_or_a_list_is_refused():
    d = _doc()
    d["measurements"] = d["measurements"][:1]
    with pytest.raises(CaptureError, match="holds bar.\\* measurements: got f: none of 1"):
        mc.bar_cycles(d, "f")
    with pytest.raises(CaptureError, match="holds a 'measurements' list"):
        mc.bar_cycles({"measurements": {}}, "f")
    with pytest.raises(CaptureError, match="holds a 'measurements' list"):
        mc.bar_cycles([1, 2], "f")
