"""lapis.model.clock on SYNTHETIC clock captures written here (tmp_path), never a measurement: the fit recovers
the coefficients the points were made with, and unusable captures are CaptureErrors."""

import json
import os

import pytest

from lapis.errors import CaptureError
from lapis.model import clock

PEAK_FLOP, PEAK_FFMA = 4096.0, 1.0  # synthetic full-duty rates per cycle


def synthetic(tmp_path, duties, mhz_of, name="h200-synthetic"):
    """A results.json shaped like lapis.gpu.capture_clock's, rates = duty x peak, clock = mhz_of(t, f)."""
    pts = [dict(status="ok", unit="synthetic", tensor_duty=t, fma_duty=f, probe_mhz=mhz_of(t, f),
                tensor_flop_per_clk_sm=t * PEAK_FLOP, ffma_per_clk_smsp=f * PEAK_FFMA) for t, f in duties]
    path = tmp_path / name / "clock" / "results.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(dict(points=pts)))
    return path


GRID = [(0, 0)] + [(d, 0) for d in (.25, .5, .75, 1)] + [(0, d) for d in (.25, .5, .75, 1)] + \
       [(.5, .5), (1, .5), (.5, 1), (1, 1)]


def knee(t, f):  # 2300 - 500 t - 150 f, capped at 1980: limited at (.75,0) (1,0) (1,.5) (.5,1) (1,1)
    return min(1980.0, 2300 - 500 * t - 150 * f)


def test_capped_fit_recovers_coefficients(tmp_path):
    m = clock.load(synthetic(tmp_path, GRID, knee))
    assert m.form == "capped-linear"
    assert m.ceiling_mhz == 1980.0
    assert m.intercept_mhz == pytest.approx(2300, abs=1e-6)
    assert m.slope_mhz == pytest.approx(dict(tensor=-500, fma=-150), abs=1e-6)
    assert m.fitted_points == 5 and m.points == 13
    assert m.rms_residual_mhz == pytest.approx(0, abs=1e-6)
    assert m.predict(1.0, 1.0) == pytest.approx(1650)
    assert m.predict(0.0, 0.0) == 1980.0  # at the ceiling
    assert m.predict(2.0, -1.0) == pytest.approx(1800)  # busy fractions clip to [0, 1]


def test_plane_without_knee(tmp_path):
    # every point below the ceiling except idle: the knee is not determined by fewer than 3 limited points
    m = clock.load(synthetic(tmp_path, [(0, 0), (1, 0), (0, 1)], lambda t, f: 1900 - 200 * t - 100 * f))
    assert m.form == "linear" and m.fitted_points == 3
    assert m.intercept_mhz == pytest.approx(1900) and m.slope_mhz == pytest.approx(dict(tensor=-200, fma=-100))


def test_predict_utilization_reads_fma_else_softmax(tmp_path):
    m = clock.load(synthetic(tmp_path, GRID, knee))
    assert m.predict_utilization(dict(tensor=1.0, fma=1.0, mufu=0.3)) == pytest.approx(1650)
    assert m.predict_utilization(dict(tensor=1.0, softmax=0.5, tma=0.6)) == pytest.approx(1725)
    assert m.predict_utilization(dict(tensor=0.6, tma=0.9)) == pytest.approx(1980)  # 2000 capped
    assert clock.activity(dict(tensor=0.2, softmax=0.4, fma=0.1)) == dict(tensor=0.2, fma=0.1)


def test_latest_capture_by_name(tmp_path):
    synthetic(tmp_path, GRID, knee, "h200-2026-01-01")
    newest = synthetic(tmp_path, GRID, lambda t, f: knee(t, f) - 10, "h200-2026-02-01")
    assert clock.latest_capture(tmp_path) == newest
    assert clock.load(root=tmp_path).ceiling_mhz == 1970.0


def test_no_capture_is_none(tmp_path):
    assert clock.latest_capture(tmp_path) is None
    assert clock.load(root=tmp_path) is None
    assert clock.load(root=tmp_path / "absent") is None


def test_cli_without_capture_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(clock, "CLOCK_CAPTURES", tmp_path)
    monkeypatch.setattr(clock, "load", lambda path=None, root=tmp_path: None)
    assert clock.main([]) == 2
    assert "no clock capture" in capsys.readouterr().err


def test_cli_prints_fit(tmp_path, capsys):
    assert clock.main([str(synthetic(tmp_path, GRID, knee))]) == 0
    out = capsys.readouterr().out
    assert "capped-linear: clock_mhz = min(1980, 2300.0 -500.0 x busy_tensor -150.0 x busy_fma)" in out


@pytest.mark.parametrize("doc,rule", [
    ("not json", "results.json with a list of points"),
    (json.dumps(dict(nothing=1)), "results.json with a list of points"),
    (json.dumps(dict(points={"a": 1})), "points are a list"),
    (json.dumps(dict(points=[dict(status="ok", tensor_duty=0, fma_duty=0, probe_mhz=-5, tensor_flop_per_clk_sm=0,
                                  ffma_per_clk_smsp=0)] * 3)), "probe_mhz > 0"),
    (json.dumps(dict(points=[dict(status="ok", tensor_duty=0, fma_duty=0, probe_mhz="fast",
                                  tensor_flop_per_clk_sm=0, ffma_per_clk_smsp=0)])), "probe_mhz > 0"),
    (json.dumps(dict(points=[dict(status="fault", error="x")] * 5)), "at least 3 measured points"),
])
def test_bad_captures_are_capture_errors(tmp_path, doc, rule):
    path = tmp_path / "results.json"
    path.write_text(doc)
    with pytest.raises(CaptureError, match=rule):
        clock.load(path)


def test_missing_file_and_idle_unit(tmp_path):
    with pytest.raises(CaptureError, match="list of points"):
        clock.load(tmp_path / "nope.json")
    path = synthetic(tmp_path, [(0, 0), (0, .5), (0, 1)], lambda t, f: 1980 - 100 * f)  # tensor never busy
    with pytest.raises(CaptureError, match="keeps the tensor pipe busy"):
        clock.load(path)


@pytest.mark.parametrize("mhz, rule", [
    (1e9, r"probe_mhz > 0 \(within \[100, 5000\] MHz\).*'probe_mhz': 1000000000.0"),  # was the model's ceiling
    (1.0, r"probe_mhz > 0 \(within \[100, 5000\] MHz\).*'probe_mhz': 1.0"),
])
def test_an_implausible_probed_clock_is_refused(tmp_path, mhz, rule):
    path = synthetic(tmp_path, GRID, lambda t, f: mhz if (t, f) == (1, 1) else knee(t, f))
    with pytest.raises(CaptureError, match=rule):
        clock.load(path)


def test_a_fit_that_predicts_a_clock_below_the_floor_is_refused(tmp_path):
    # every probe in range, but the plane through the limited points reaches 2300 - 2100 - 150 = 50 MHz at full
    # duty: the timelines would have divided cycles by it
    path = synthetic(tmp_path, GRID, lambda t, f: min(1980.0, 2300 - 2100 * t - 150 * f) if t < 1 or f < 1 else 105)
    with pytest.raises(CaptureError, match="a clock fit predicts at least 100 MHz at every duty: got .* MHz at "
                                           "tensor 1 fma 1"):
        clock.load(path)


def test_a_fifo_is_refused_not_read(tmp_path):
    fifo = tmp_path / "clock" / "results.json"
    fifo.parent.mkdir()
    os.mkfifo(fifo)  # read_text would block for ever
    with pytest.raises(CaptureError, match="is a regular file: got .*FIFO"):
        clock.load(fifo)
    with pytest.raises(CaptureError, match="is a regular file: got .*a directory"):
        clock.load(tmp_path)


@pytest.mark.parametrize("argv, code, words", [(["--help"], 0, "usage: python -m lapis.model.clock"),
                                                (["--bogus"], 2, "unrecognized arguments: --bogus")])
def test_cli_options_are_options_not_paths(argv, code, words, capsys):
    # both were read as the path of a results.json ("--help: FileNotFoundError")
    with pytest.raises(SystemExit) as e:
        clock.main(argv)
    out = capsys.readouterr()
    assert e.value.code == code and words in out.out + out.err


@pytest.mark.parametrize("fit_on, check_on", [("h200-2026-12-02", "h200-2026-12-02-run2"),
                                              ("h200-2026-12-02-run2", "h200-2026-12-02")])
def test_a_fit_on_one_run_predicts_the_other(fit_on, check_on):
    """The clock model across runs: two H200 runs of the clock microbenchmark (2026-12-02, 01:33 and 04:02 UTC,
    fresh machines), each fit predicting the other's 26 probed clocks (mean |error| 1.7% and 2.1%, largest 4.2%
    and 6.4%). Idle and FMA-only points agree within 10 MHz; at full tensor duty run 2 held 1643-1660 MHz where
    run 1 held 1579-1628, and at both units busy 1729-1780 against 1683-1737."""
    root = clock.CLOCK_CAPTURES
    model = clock.fit(clock.read_points(root / fit_on / "clock" / "results.json"))
    pts = clock.read_points(root / check_on / "clock" / "results.json")
    err = [abs(model.predict(t, f) / p["probe_mhz"] - 1) for (t, f), p in zip(clock.busy(pts), pts)]
    assert len(err) == 26
    assert sum(err) / len(err) < 0.025 and max(err) < 0.07


@pytest.mark.parametrize("key, value, shown", [
    ("tensor_flop_per_clk_sm", 1e30, "tensor_flop_per_clk_sm 1e+30"),
    ("tensor_flop_per_clk_sm", 8193.0, "tensor_flop_per_clk_sm 8193"),
    ("ffma_per_clk_smsp", 2.5, "ffma_per_clk_smsp 2.5")])
def test_a_rate_past_twice_the_peak_is_refused(tmp_path, key, value, shown):
    path = synthetic(tmp_path, GRID, knee)
    doc = json.loads(path.read_text())
    doc["points"][7][key] = value
    path.write_text(json.dumps(doc))
    with pytest.raises(CaptureError) as e:
        clock.load(path)
    most = {"tensor_flop_per_clk_sm": "8192", "ffma_per_clk_smsp": "2"}[key]
    assert str(e.value) == (f"a clock point's {key} is at most {most} (twice the peak of the pipe): got {path}: "
                            f"point 7: {shown}; fix: drop the point or re-capture with benchmarks/h200_clock.sh "
                            "(lapis.gpu.capture_clock)")


def test_rates_at_twice_the_peak_are_kept(tmp_path):
    path = synthetic(tmp_path, GRID, knee)
    doc = json.loads(path.read_text())
    doc["points"][4].update(tensor_flop_per_clk_sm=8192.0, ffma_per_clk_smsp=2.0)
    path.write_text(json.dumps(doc))
    assert len(clock.read_points(path)) == 13


def test_cli_marks_the_points_the_plane_was_fitted_to(tmp_path, capsys):
    assert clock.main([str(synthetic(tmp_path, GRID, knee))]) == 0
    rows = [r for r in capsys.readouterr().out.splitlines() if " tensor " in r and "busy" in r]
    marked = [r[2:r.index(":")] for r in rows if r.startswith("* ")]
    assert len(rows) == 13  # knee(): limited at (.75, 0) (1, 0) (1, .5) (.5, 1) (1, 1), the rest at 1980 MHz
    assert marked == ["tensor 0.75 fma 0.00", "tensor 1.00 fma 0.00", "tensor 1.00 fma 0.50",
                      "tensor 0.50 fma 1.00", "tensor 1.00 fma 1.00"]  # in GRID's order
    assert all(r.startswith("  tensor ") for r in rows if not r.startswith("* "))


def test_cli_marks_every_point_of_a_plane_without_knee(tmp_path, capsys):
    path = synthetic(tmp_path, [(0, 0), (1, 0), (0, 1)], lambda t, f: 1900 - 200 * t - 100 * f)
    assert clock.main([str(path)]) == 0
    rows = [r for r in capsys.readouterr().out.splitlines() if "busy" in r and "measured" in r]
    assert [r[:9] for r in rows] == ["* tensor "] * 3
