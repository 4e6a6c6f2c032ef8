"""lapis sweep's resume store: rows made under another profile, model or lapis version are recomputed (stale),
and corrupted lines (not UTF-8, not a row, non-finite or non-positive numbers) are dropped and recomputed."""

import json

import pytest

from lapis.errors import CaptureError
from lapis.pipeline_sim import predictions
from lapis.pipeline_sim.simulate import simulate
from lapis.sweep import evaluate as ev
from lapis.sweep.run import run_sweep
from lapis.sweep.store import ROWS_FILE

S8 = "h200-s8-persistent"
ARGS = (S8, ["1x2x512x128"], ["stages=2,3"])


def sweep(tmp_path, calls=None, monkeypatch=None):
    if calls is not None:
        real = ev.simulate_row
        monkeypatch.setattr(ev, "simulate_row", lambda t: calls.append(t.key()) or real(t))
    return run_sweep(*ARGS, executor="serial", out=tmp_path, figure=False)


def test_rows_carry_the_profile_and_model_hashes_and_the_version(tmp_path):
    import lapis
    sweep(tmp_path)
    rows = [json.loads(x) for x in (tmp_path / ROWS_FILE).read_text().splitlines()]
    want = dict(profile=predictions.profile_hash("h200"), model=predictions.model_hash(), version=lapis.__version__)
    assert len(rows) == 2 and all(r["stamp"] == want for r in rows)


def test_a_changed_model_makes_every_stored_row_stale(tmp_path, monkeypatch):
    first = sweep(tmp_path)
    store = tmp_path / ROWS_FILE
    # a row stored under an older model, with numbers that model gave (here: made up, 1 TFLOP/s)
    rows = [json.loads(x) for x in store.read_text().splitlines()]
    rows[0].update(tflops=1.0, stamp=dict(rows[0]["stamp"], model="0" * 16))
    store.write_text("".join(json.dumps(r) + "\n" for r in rows))
    calls = []
    again = sweep(tmp_path, calls, monkeypatch)
    assert again["counts"]["stale"] == 1 and again["counts"]["computed"] == 1 and calls == [rows[0]["key"]]
    assert again["csv"] == first["csv"]
    full = simulate(S8, "h200", "1x2x512x128", dict(stages=2))
    assert again["rows"][0]["tflops"] == full["tflops"]
    calls.clear()
    monkeypatch.setattr(predictions, "model_hash", lambda: "f" * 16)  # the simulator's sources edited
    third = sweep(tmp_path)  # simulate_row is still counted into calls
    assert third["counts"]["stale"] == 2 and len(calls) == 2


@pytest.mark.parametrize("bad", [b"\xff\xfe not utf-8", b"42", b'"a string"', b'{"key": "x"}', b"[1, 2]"])
def test_lines_that_are_not_rows_are_dropped_and_recomputed(tmp_path, monkeypatch, bad):
    first = sweep(tmp_path)
    store = tmp_path / ROWS_FILE
    lines = store.read_bytes().splitlines()
    store.write_bytes(lines[0] + b"\n" + bad + b"\n")  # the second row replaced by garbage
    calls = []
    again = sweep(tmp_path, calls, monkeypatch)
    assert again["dropped_partial_lines"] == 1 and len(calls) == 1 and again["csv"] == first["csv"]


@pytest.mark.parametrize("tflops", [-5.0, "fast", float("nan"), 0.0, float("inf")])
def test_a_row_with_a_bad_number_is_dropped_not_ranked(tmp_path, monkeypatch, tflops):
    first = sweep(tmp_path)
    store = tmp_path / ROWS_FILE
    rows = [json.loads(x) for x in store.read_text().splitlines()]
    rows[1]["tflops"] = tflops
    store.write_text("".join(json.dumps(r) + "\n" for r in rows))  # json writes NaN and Infinity
    calls = []
    again = sweep(tmp_path, calls, monkeypatch)
    assert again["dropped_partial_lines"] == 1 and calls == [rows[1]["key"]]
    assert again["ranked"] == first["ranked"] and again["csv"] == first["csv"]


def test_a_folder_in_place_of_the_store_is_refused(tmp_path):
    (tmp_path / ROWS_FILE).mkdir()
    with pytest.raises(CaptureError, match="rows.jsonl must be a file"):
        sweep(tmp_path)
