"""lapis.model.profile.load_profile on the shipped profiles and on damaged copies of them."""

import json
import shutil

import pytest

from lapis.data import PROFILES
from lapis.errors import CaptureError, ScheduleError
from lapis.model import profile


def test_the_shipped_profiles_load_with_their_sm_counts():
    assert {n: profile.load_profile(n)["sm_count"] for n in profile.profiles()} == {
        "b200": 148, "h200": 132, "rtx5090": 170}


@pytest.fixture
def copy(tmp_path, monkeypatch):
    """A copy of the shipped profiles that load_profile reads; edit(fn) rewrites h200.json through fn(data)."""
    for f in PROFILES.glob("*.json"):
        shutil.copy(f, tmp_path / f.name)
    monkeypatch.setattr(profile, "PROFILES", tmp_path)

    def edit(fn):
        path = tmp_path / "h200.json"
        data = json.loads(path.read_text())
        path.write_text(json.dumps(fn(data)))
    return tmp_path, edit


def _set(key, value):
    def fn(d):
        d["values"][key]["value"] = value
        return d
    return fn


@pytest.mark.parametrize("value", [0, -132, float("nan"), float("inf"), "132", True, None, [132]])
def test_a_value_that_is_not_a_finite_number_above_zero_is_named(copy, value):
    _, edit = copy
    edit(_set("sm_count", value))
    with pytest.raises(CaptureError, match=r"finite number above zero.*sm_count = .*git checkout"):
        profile.load_profile("h200")


@pytest.mark.parametrize("text, why", [("", "readable JSON"), ("{\"values\": ", "readable JSON"),
                                       ("[1, 2]", "name, arch and a non-empty values"),
                                       ('{"name": "h200", "arch": "sm90", "values": {}}', "non-empty values"),
                                       ('{"name": "h200", "values": {"sm_count": {}}}', "name, arch")])
def test_a_file_that_is_not_a_profile_is_a_capture_error_naming_it(copy, text, why):
    where, _ = copy
    (where / "h200.json").write_text(text)
    with pytest.raises(CaptureError, match=why) as e:
        profile.load_profile("h200")
    assert "h200.json" in str(e.value)


def test_bytes_that_are_not_utf8_are_a_capture_error(copy):
    where, _ = copy
    (where / "h200.json").write_bytes(b"\xff\xfe{}")
    with pytest.raises(CaptureError, match="readable JSON"):
        profile.load_profile("h200")


def test_a_value_without_its_source_and_an_unknown_name_stay_schedule_errors(copy):
    _, edit = copy

    def drop(d):
        del d["values"]["sm_count"]["source"]
        return d
    edit(drop)
    with pytest.raises(ScheduleError, match="without unit or source.*h200.sm_count"):
        profile.load_profile("h200")
    with pytest.raises(ScheduleError, match="unknown GPU profile.*use one of b200, h200, rtx5090"):
        profile.load_profile("h100")


def test_lapis_simulate_with_a_zero_sm_count_exits_2_naming_the_value(copy, capsys):
    from lapis.cli.main import main
    _, edit = copy
    edit(_set("sm_count", 0))
    assert main(["simulate", "--schedule", "h200-s9-tuned", "--shape", "1x16x1024x128"]) == 2
    err = capsys.readouterr().err
    assert "sm_count = 0" in err and "Traceback" not in err
