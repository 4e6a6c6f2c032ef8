"""lapis sweep's resume store: each line is a row with its checksum; rows made under another profile, model or
lapis version are recomputed (stale); lines that fail their check (cut short, unreadable, a bad checksum, an edited
number, a duplicate key, not a valid row) are dropped, counted and recomputed; nothing under --out is followed;
one sweep at a time holds --out's lock."""

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from lapis.errors import CaptureError
from lapis.pipeline_sim import predictions
from lapis.pipeline_sim.simulate import simulate
from lapis.sweep import evaluate as ev
from lapis.sweep import store as st
from lapis.sweep.run import run_sweep
from lapis.sweep.store import LOCK_FILE, ROWS_FILE

REPO = Path(__file__).resolve().parents[2]
S8 = "h200-s8-persistent"
ARGS = (S8, ["1x2x512x128"], ["stages=2,3"])


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    """One sweep of ARGS (its result and its folder), copied by the tests instead of recomputed."""
    folder = tmp_path_factory.mktemp("first")
    return run_sweep(*ARGS, executor="serial", out=folder, figure=False), folder


def sweep(tmp_path, calls=None, monkeypatch=None):
    if calls is not None:
        real = ev.simulate_row
        monkeypatch.setattr(ev, "simulate_row", lambda t: calls.append(t.key()) or real(t))
    return run_sweep(*ARGS, executor="serial", out=tmp_path, figure=False)


def copied(first, tmp_path) -> Path:
    shutil.copy(first[1] / ROWS_FILE, tmp_path / ROWS_FILE)
    return tmp_path / ROWS_FILE


def stored(path) -> list[dict]:
    return [json.loads(x)["row"] for x in path.read_text().splitlines()]


def test_each_line_is_a_row_with_the_sha256_of_its_canonical_json(first):
    _, folder = first
    lines = (folder / ROWS_FILE).read_bytes().splitlines(keepends=True)
    assert len(lines) == 2
    for raw in lines:
        rec = json.loads(raw)
        assert sorted(rec) == ["format", "row", "sha256"] and rec["format"] == "lapis.sweep-row/1"
        body = json.dumps(rec["row"], sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
        assert rec["sha256"] == hashlib.sha256(body).hexdigest() and raw == st.line(rec["row"])


def test_rows_carry_the_profile_and_model_hashes_and_the_version(first):
    import lapis
    rows = stored(first[1] / ROWS_FILE)
    want = dict(profile=predictions.profile_hash("h200"), model=predictions.model_hash(), version=lapis.__version__)
    assert len(rows) == 2 and all(r["stamp"] == want for r in rows)


def test_a_changed_model_makes_every_stored_row_stale(first, tmp_path, monkeypatch):
    store = copied(first, tmp_path)
    # a row stored under an older model, with numbers that model gave (here: made up, 1 TFLOP/s)
    rows = stored(store)
    rows[0].update(tflops=1.0, stamp=dict(rows[0]["stamp"], model="0" * 16))
    store.write_bytes(b"".join(st.line(r) for r in rows))
    calls = []
    again = sweep(tmp_path, calls, monkeypatch)
    assert again["counts"]["stale"] == 1 and again["counts"]["computed"] == 1 and calls == [rows[0]["key"]]
    assert again["csv"] == first[0]["csv"]
    full = simulate(S8, "h200", "1x2x512x128", dict(stages=2))
    assert again["rows"][0]["tflops"] == full["tflops"]
    calls.clear()
    monkeypatch.setattr(predictions, "model_hash", lambda: "f" * 16)  # the simulator's sources edited
    third = sweep(tmp_path)  # simulate_row is still counted into calls
    assert third["counts"]["stale"] == 2 and len(calls) == 2


def test_a_row_stored_without_its_checksum_is_recomputed(first, tmp_path, monkeypatch):
    store = copied(first, tmp_path)
    rows = stored(store)
    store.write_text(json.dumps(rows[0]) + "\n" + st.line(rows[1]).decode())  # a bare row, no checksum
    calls = []
    again = sweep(tmp_path, calls, monkeypatch)
    assert again["dropped_partial_lines"] == 1 and calls == [rows[0]["key"]] and again["csv"] == first[0]["csv"]


@pytest.mark.parametrize("bad", [b"\xff\xfe not utf-8", b"42", b'"a string"', b'{"key": "x"}', b"[1, 2]"])
def test_lines_that_are_not_rows_are_dropped_and_recomputed(first, tmp_path, monkeypatch, bad):
    store = copied(first, tmp_path)
    lines = store.read_bytes().splitlines()
    store.write_bytes(lines[0] + b"\n" + bad + b"\n")  # the second row replaced by garbage
    calls = []
    again = sweep(tmp_path, calls, monkeypatch)
    assert again["dropped_partial_lines"] == 1 and len(calls) == 1 and again["csv"] == first[0]["csv"]


@pytest.mark.parametrize("tflops", [-5.0, "fast", float("nan"), 0.0, float("inf")])
def test_a_row_with_a_bad_number_is_dropped_not_ranked(first, tmp_path, monkeypatch, tflops):
    store = copied(first, tmp_path)
    rows = stored(store)
    rows[1]["tflops"] = tflops
    body = json.dumps(rows[1], sort_keys=True, separators=(",", ":")).encode()  # json writes NaN and Infinity
    rec = dict(format=st.FORMAT, row=rows[1], sha256=hashlib.sha256(body).hexdigest())  # its checksum matches
    store.write_text(st.line(rows[0]).decode() + json.dumps(rec) + "\n")
    calls = []
    again = sweep(tmp_path, calls, monkeypatch)
    assert again["dropped_partial_lines"] == 1 and calls == [rows[1]["key"]]
    assert again["ranked"] == first[0]["ranked"] and again["csv"] == first[0]["csv"]


def changed_digit(raw: bytes) -> bytes:
    i = raw.index(b'"tflops":') + len(b'"tflops":')
    return raw[:i] + (b"9" if raw[i:i + 1] != b"9" else b"8") + raw[i + 1:]  # 23.4 -> 93.4: other valid JSON


CORRUPTIONS = {
    "a changed digit": changed_digit,
    "a duplicate key": lambda raw: raw.replace(b',"wall_s":', b',"tflops":999.0,"wall_s":', 1),  # the last wins
    "fits flipped": lambda raw: raw.replace(b'"fits":true', b'"fits":false', 1),
    "a bad checksum": lambda raw: re.sub(rb'"sha256":"[0-9a-f]{64}"', b'"sha256":"' + b"0" * 64 + b'"', raw),
}


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_a_corrupted_row_is_recomputed_and_counted(first, tmp_path, monkeypatch, capsys, how):
    """Each corruption leaves valid JSON of a plausible row; none of them is resumed as it is."""
    store = copied(first, tmp_path)
    lines = store.read_bytes().splitlines()
    bad = CORRUPTIONS[how](lines[0])
    assert bad != lines[0] and json.loads(bad)  # still JSON, and read as plain JSON another row (or checksum)
    assert (json.loads(bad)["row"] != json.loads(lines[0])["row"]) != (how == "a bad checksum")
    store.write_bytes(bad + b"\n" + lines[1] + b"\n")
    calls = []
    capsys.readouterr()
    again = sweep(tmp_path, calls, monkeypatch)
    key = json.loads(lines[0])["row"]["key"]
    assert calls == [key] and again["dropped_partial_lines"] == 1
    assert again["csv"] == first[0]["csv"] and again["ranked"] == first[0]["ranked"]
    cause = "unreadable" if how == "a duplicate key" else "bad checksum"
    assert f"1 stored line(s) failed their check (1 {cause})" in capsys.readouterr().err
    kept = store.read_bytes().splitlines()  # compacted: the good row and the recomputed one, nothing else
    assert len(kept) == 2 and lines[1] in kept and all(st.read_line(x)[0] for x in kept)


def test_a_folder_in_place_of_the_store_is_refused(tmp_path):
    (tmp_path / ROWS_FILE).mkdir()
    with pytest.raises(CaptureError, match="rows.jsonl in a sweep's output folder must be a regular file.*is a "
                                           "folder"):
        sweep(tmp_path)


@pytest.mark.parametrize("name", [ROWS_FILE, "sweep.csv", "summary.json", "pareto.png", LOCK_FILE])
def test_a_symlink_under_out_is_refused_by_name_and_its_target_untouched(first, tmp_path, name):
    out = tmp_path / "out"
    out.mkdir()
    target = tmp_path / "precious.txt"
    text = (first[1] / ROWS_FILE).read_bytes() + b"not a row\n" if name == ROWS_FILE else b"precious\n"
    target.write_bytes(text)
    (out / name).symlink_to(target)
    with pytest.raises(CaptureError, match=f"{name} in a sweep's output folder must be a regular file.*is a "
                                           "symlink.*fix: remove or rename"):
        run_sweep(*ARGS, executor="serial", out=out)
    assert target.read_bytes() == text and (out / name).is_symlink()
    assert not (out / "summary.json").exists() or name == "summary.json"


@pytest.mark.parametrize("name", [ROWS_FILE, "summary.json"])
def test_a_fifo_under_out_is_refused_without_blocking(tmp_path, name):
    os.mkfifo(tmp_path / name)

    def hung(*_):
        raise TimeoutError("the sweep blocked on a FIFO")
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    try:
        with pytest.raises(CaptureError, match=f"{name} in a sweep's output folder must be a regular file.*is a "
                                               "FIFO"):
            sweep(tmp_path)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_the_lock_is_released_when_the_sweep_returns(first):
    assert not (first[1] / LOCK_FILE).exists()


HOLDER = r"""
import sys, time
from lapis.sweep import evaluate as ev
from lapis.sweep.run import run_sweep
def slow(task):
    print("running", flush=True)
    time.sleep(60)
ev.simulate_row = slow
run_sweep("h200-s8-persistent", ["1x2x512x128"], ["stages=2,3"], executor="serial", out=sys.argv[1], figure=False)
"""


def test_a_second_sweep_on_one_out_stops_naming_the_first_and_a_dead_ones_lock_is_taken_over(tmp_path, capsys):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              env=env)
    try:
        assert holder.stdout.readline() == "running\n"  # the first sweep is computing its first row
        lock = json.loads((tmp_path / LOCK_FILE).read_text())
        assert lock["pid"] == holder.pid and lock["host"] == socket.gethostname() and lock["started"]
        with pytest.raises(CaptureError, match=f"another lapis sweep is writing to this --out: got {tmp_path}/"
                                               f"sweep.lock held by pid {holder.pid} on host '{lock['host']}', "
                                               f"started {lock['started']}"):
            sweep(tmp_path)
    finally:
        holder.kill()
        holder.wait()
    capsys.readouterr()
    again = sweep(tmp_path)  # the first sweep was killed: its lock is stale
    assert again["counts"]["computed"] == 2
    assert f"took over {tmp_path}/sweep.lock: it was held by pid {holder.pid}" in capsys.readouterr().err
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_lock_from_another_host_is_never_taken_over(tmp_path):
    (tmp_path / LOCK_FILE).write_text(json.dumps(dict(pid=1, host="elsewhere", started="2026-01-01T00:00:00Z")))
    with pytest.raises(CaptureError, match="held by pid 1 on host 'elsewhere'.*if that sweep is no longer "
                                           "running, remove"):
        sweep(tmp_path)


def test_a_row_line_longer_than_the_cap_is_dropped_unread_and_the_rows_around_it_kept(first, tmp_path, monkeypatch,
                                                                                      capsys):
    monkeypatch.setattr(st, "ROW_LINE_BYTES", 4096)
    store = copied(first, tmp_path)
    lines = store.read_bytes().splitlines()
    store.write_bytes(lines[0] + b"\n" + b"x" * 50_000 + b"\n" + lines[1] + b"\n")
    calls = []
    capsys.readouterr()
    again = sweep(tmp_path, calls, monkeypatch)
    assert calls == [] and again["dropped_partial_lines"] == 1 and again["csv"] == first[0]["csv"]
    assert "1 stored line(s) failed their check (1 too long)" in capsys.readouterr().err
    assert store.read_bytes().splitlines() == lines  # compacted: the two rows, without the long line


def test_rows_are_read_in_pieces_of_at_most_the_cap(monkeypatch):
    import io

    class Recording(io.BytesIO):
        sizes: list = []

        def readline(self, size=-1):
            self.sizes.append(size)
            return super().readline(size)

    monkeypatch.setattr(st, "ROW_LINE_BYTES", 100)
    f = Recording(b"a" * 50 + b"\n" + b"b" * 1000 + b"\n" + b"c" * 100 + b"\n" + b"d" * 30)
    assert list(st._lines(f)) == [(b"a" * 50, ""), (b"", "too long"), (b"c" * 100, ""), (b"", "cut short")]
    assert f.sizes and max(f.sizes) == 101 and min(f.sizes) > 0  # never an unbounded readline
