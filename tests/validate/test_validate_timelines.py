"""`lapis validate timelines`: the total-time error, rank agreement and first divergence, against values computed
here from the committed files and from hand-made timelines."""

import json
import random
import shutil
from pathlib import Path

import pytest

from lapis.captures.store import has_timelines
from lapis.pipeline_sim.predictions import load
from lapis.pipeline_sim.recorder import Event
from lapis.validate.timeline_align import canonical, first_divergence, steady_divergence
from lapis.validate.timelines import summarize, validate_timelines

ROOT = Path(__file__).resolve().parents[2] / "lapis"


def _committed_prediction(schedule: str, shape: str) -> float:
    """predicted_us of the cache entry with default parameters, read from the cache file (predictions.json.gz) directly."""
    cache = load(ROOT / "data" / "predictions.json.gz")
    hits = [v["predicted_us"] for k, v in cache.items() if json.loads(k)[:4] == [schedule, "h200", shape, []]]
    assert len(hits) == 1
    return hits[0]


def test_err_pct_of_one_case_from_the_files():
    # s2 at 8x16x4096x128: the capture's plain median, and the committed prediction (the kernel's parameters
    # are the schedule's own, so the default-parameter entry is the one)
    man = json.loads((ROOT / "data/captures/attention/h200-2026-11-30-probe/manifest.json").read_text())  # s2's latest
    entry = next(e for e in man["results"] if e["shape"] == "8x16x4096x128")
    measured = entry["variants"]["s2"]["plain"]["median_us"]
    mhz = entry["variants"]["s2"]["plain"]["clock_probe"]["mhz"]
    predicted = _committed_prediction("h200-s2-ws-ring", "8x16x4096x128")
    r = validate_timelines(select=lambda c: c["variant"] == "s2" and c["shape"] == "8x16x4096x128")
    (row,) = r["per_case"]
    assert row["measured_us"] == measured
    assert row["predicted_us"] == predicted and row["predicted_source"] == "cache"
    assert row["err_pct"] == pytest.approx((predicted - measured) / measured * 100, rel=1e-12)
    assert r["mape_pct"] == pytest.approx(abs(row["err_pct"]))
    blind = json.loads((ROOT / "data/blind/attention_h200.json").read_text())
    b = next(e for e in blind["entries"] if e["variant"] == "s2" and e["shape"] == "8x16x4096x128")
    assert row["blind"] and row["blind_err_pct"] == pytest.approx((b["predicted_us"] - measured) / measured * 100)
    assert row["timeline"]["iteration_ns"]["measured"] > 0 and row["first_divergence"]["matched"] > 100
    # the probe capture kept no timelines.npz: the timeline is the one of the latest capture holding it
    assert not has_timelines(ROOT / "data/captures/attention/h200-2026-11-30-probe/timelines.npz")
    # in SM cycles: the prediction at the profile clock, the measurement at the clock the probe read
    ghz = json.loads((ROOT / "data/profiles/h200.json").read_text())["values"]["clock_ghz"]["value"]
    assert 1400 < mhz < 2000 and row["clock_mhz"] == mhz
    assert row["cycles_err_pct"] == pytest.approx((predicted * ghz - measured * mhz / 1e3) / (measured * mhz / 1e3)
                                                  * 100, rel=1e-12)


def _row(variant, shape, pred, meas, runs=None):
    return dict(family="attention", variant=variant, shape=shape, causal=False, predicted_us=pred, measured_us=meas,
                err_pct=(pred - meas) / meas * 100, blind_err_pct=None, runs_us=runs or [meas],
                within_run_spread_pct=1.0)


def test_rank_agreement_on_a_hand_made_table():
    rows = [_row("a", "S", 90, 100, runs=[100, 104]),  # run-to-run spread 4%: pairs need a gap above 8%
            _row("b", "S", 80, 120),    # 20% slower than a, predicted faster: wrong
            _row("c", "S", 95, 105),    # 5% from a: not resolved; 14.3% faster than b, predicted slower: wrong
            _row("d", "S", 200, 150),   # slower than a, b, c by more than 8%, predicted slower: 3 right
            _row("a", "T", 10, 10), _row("b", "T", 30, 20)]  # another shape: 1 pair, right
    r = summarize(rows)
    assert r["spread_pct"] == pytest.approx(4.0)
    assert r["rank_pairs"] == 6
    assert r["rank_agreement"] == pytest.approx(4 / 6)
    assert r["mape_pct"] == pytest.approx((10 + 100 / 3 + 100 * 10 / 105 + 100 / 3 + 0 + 50) / 6)
    assert r["max_abs_err_pct"] == pytest.approx(50)
    assert summarize([_row("a", "S", 1, 100), _row("b", "T", 1, 200)])["rank_agreement"] is None


def _timeline(ctas, delay_at=None, delay=0.0, prefix=""):
    """Two work items of 6 K/V tiles each (QK 100 ns, softmax 200, PV 100 per tile) on one consumer role."""
    out, t = [], 0.0
    for n, cta in enumerate(ctas):
        for k in range(6):
            for op, ns in (("QK", 100.0), ("softmax", 200.0), ("PV", 100.0)):
                if (n, k, op) == delay_at:
                    t += delay
                out.append(Event(prefix + "consumer0", op, t, t + ns, cta=cta, work_item=cta, k_index=k))
                t += ns
    return out


def _kernel_names(events):
    """The kernel's record names (lapis/gpu/kernels/attention_plan.json) for QK and PV."""
    return [Event(e.role, {"QK": "issue QK", "PV": "issue PV"}.get(e.op, e.op), e.start_ns, e.end_ns, cta=e.cta,
                  work_item=e.work_item, k_index=e.k_index) for e in events]


def test_first_divergence_aligns_by_logical_ids():
    names = {"QK": "wgmma QK", "softmax": "softmax ex2", "PV": "wgmma PV"}
    pred = [Event(e.role, names[e.op], e.start_ns, e.end_ns, cta=e.cta, work_item=e.work_item, k_index=e.k_index)
            for e in _timeline((0, 1), prefix="cta0/")]
    pred.append(Event("tma", "TMA K", 0.0, 50.0))  # a hardware unit: no counterpart, dropped
    # the hardware numbers its CTAs 26 and 40, records in another order, and item 1's softmax of tile 2 starts
    # 500 ns late: everything after it is 500 ns late too
    meas = _kernel_names(_timeline((26, 40), delay_at=(1, 2, "softmax"), delay=500.0))
    random.Random(0).shuffle(meas)
    p, m = canonical(pred, "attention"), canonical(meas, "attention")
    assert {e.role for e in p} == {"consumer0"} and {e.op for e in p} == {"QK", "softmax", "PV"}
    d = first_divergence(p, m, iteration_ns=400.0, tolerance_pct=10.0)
    assert (d["role"], d["op"], d["work_item"], d["k_index"]) == ("consumer0", "softmax", 1, 2)
    assert d["offset_ns"] == pytest.approx(500.0) and d["offset_pct"] == pytest.approx(125.0)
    assert d["measured_ns"] - d["predicted_ns"] == pytest.approx(500.0)
    assert d["span"]["from_op"] == "QK" and d["span"]["measured_ns"] - d["span"]["predicted_ns"] == pytest.approx(500)
    assert d["matched"] == 2 * 6 * 3 and d["diverged"]
    # inside the steady state of the middle item (ordinal 1 of 0, 1), anchored at its tile 2: the same point
    st = steady_divergence(p, m, iteration_ns=400.0)
    assert (st["op"], st["work_item"], st["k_index"], st["offset_ns"]) == ("softmax", 1, 2, pytest.approx(500.0))
    assert st["matched"] == 4 * 3
    same = first_divergence(p, canonical(_kernel_names(_timeline((26, 40))), "attention"), iteration_ns=400.0)
    assert not same["diverged"] and same["offset_ns"] == 0.0


def test_cli_json_smoke(tmp_path, capsys):
    from lapis.cli import main
    shutil.copytree(ROOT / "data/captures/gemm/h200-2026-11-29-n256", tmp_path / "gemm/h200-2026-11-29-n256")
    assert main(["validate", "timelines", "--json", "--captures", str(tmp_path), "--figures",
                 str(tmp_path / "fig")]) == 0
    r = json.loads(capsys.readouterr().out)
    assert {"cases", "mape_pct", "mape_pct_blind", "max_abs_err_pct", "rank_pairs", "rank_agreement", "spread_pct",
            "per_case"} <= set(r)
    assert r["cases"] == 2 and r["rank_pairs"] == 0 and r["rank_agreement"] is None
    assert {c["shape"] for c in r["per_case"]} == {"4096x4096x4096", "8192x8192x8192"}
    for c in r["per_case"]:
        assert {"variant", "shape", "causal", "predicted_us", "measured_us", "err_pct", "blind",
                "first_divergence"} <= set(c)
    assert (tmp_path / "fig" / "validation_scatter.png").stat().st_size > 0
    assert len(list((tmp_path / "fig").glob("validation_gantt_*.png"))) == 2


def test_figures_must_be_a_folder(tmp_path, capsys):
    from lapis.cli import main
    (tmp_path / "f.txt").write_text("")
    assert main(["validate", "timelines", "--figures", str(tmp_path / "f.txt")]) == 2
    assert "--figures must be a folder" in capsys.readouterr().err


def test_b200_progression_is_the_committed_prediction_and_says_unvalidated(tmp_path):
    from lapis.report.validation import b200_progression
    md, rows = b200_progression(tmp_path)
    assert len(rows) == 14 * 3 and {r["schedule"] for r in rows} == {f"b200-k{i:02d}-" + n for i, n in enumerate((
        "baseline", "p-in-tmem", "swizzle", "warp-specialization", "two-q-tiles", "load-pipeline",
        "compute-pipeline", "hw-approx", "sw-exp2", "register-caching", "skip-rescale", "split-correction",
        "early-pv", "persistent"), start=1)}
    cache = load(ROOT / "data" / "predictions.json.gz")
    k07 = next(r for r in rows if r["schedule"] == "b200-k07-compute-pipeline" and r["shape"] == "8x16x4096x128")
    (want,) = [v["tflops"] for k, v in cache.items()
               if json.loads(k)[:4] == ["b200-k07-compute-pipeline", "b200", "8x16x4096x128", []]]
    assert k07["tflops"] == want and k07["measured_us"] is None
    assert "not validated on hardware" in "\n".join(md).lower()
    assert (tmp_path / "validation_b200_progression.png").stat().st_size > 0


def test_causal_rows_are_cases_of_their_own(tmp_path):
    # a synthetic capture (made here, never committed): the s4 row at 32x16x1024x128 twice, once marked causal
    # with half the time; discovered as two cases, simulated with causal=1, and never ranked against each other
    import copy
    from lapis.pipeline_sim.simulate import simulate
    man = json.loads((ROOT / "data/captures/attention/h200-2026-11-30-s4/manifest.json").read_text())
    row = next(e for e in man["results"] if e["shape"] == "32x16x1024x128")
    row["variants"] = {"s4": row["variants"]["s4"]}
    row["variants"]["s4"].pop("timeline_summary")  # no timeline: total times only
    causal = copy.deepcopy(row)
    causal["causal"] = True
    causal["variants"]["s4"]["plain"]["median_us"] /= 2
    man["results"] = [row, causal]
    (tmp_path / "attention/synthetic").mkdir(parents=True)
    (tmp_path / "attention/synthetic/manifest.json").write_text(json.dumps(man))
    r = validate_timelines(str(tmp_path))
    assert r["cases"] == 2 and [c["causal"] for c in r["per_case"]] == [False, True]
    assert r["rank_pairs"] == 0  # a 2x gap, but between a causal and a non-causal row
    params = dict(row["variants"]["s4"]["params"], causal=1)
    assert r["per_case"][1]["predicted_us"] == simulate("h200-s4-pingpong", "h200", "32x16x1024x128",
                                                         params)["predicted_us"]
    assert r["per_case"][1]["predicted_us"] < r["per_case"][0]["predicted_us"]
    assert r["per_case"][1]["measured_us"] == row["variants"]["s4"]["plain"]["median_us"] / 2
    assert not r["per_case"][1]["blind"] and r["per_case"][0]["blind"]  # the blind set has no causal entries
    assert r["post_probe_agreement"] is None  # no race capture holds a post-batch probe


def test_a_wait_for_a_busy_unit_joins_the_op_it_precedes():
    # the simulator's consumer1 waits 313 ns for the tensor pipe, then runs its QK: on hardware the warp issues at
    # once and the stall is inside its "issue QK" span, so the QK begins at 0 on both sides
    from lapis.validate.timeline_align import milestones
    sim = [Event("consumer1", "wait tensor", 0.0, 313.0, k_index=4, kind="wait"),
           Event("consumer1", "wgmma QK", 313.0, 626.0, k_index=4),
           Event("consumer1", "wait K", 626.0, 700.0, k_index=5, kind="wait")]  # not a unit: stays a wait
    c = canonical(sim, "attention")
    assert [(e.op, e.kind, e.k_index) for e in c] == [("QK", "issue", 4), ("QK", "issue", 4), ("wait K", "wait", 5)]
    assert milestones(c) == {(0, 4, "consumer1", "QK"): 0.0}


def test_wait_fraction_is_the_time_spent_only_waiting():
    from lapis.validate.timeline_compare import busy_fractions
    ev = [Event("c", "wgmma QK", 0.0, 100.0), Event("c", "wait wgmma", 0.0, 100.0, kind="wait"),  # waits on its op
          Event("c", "wait K", 100.0, 300.0, kind="wait"), Event("c", "softmax", 300.0, 400.0)]
    assert busy_fractions(ev) == {"c": pytest.approx(0.5)}
    assert busy_fractions(ev, waits=True) == {"c": pytest.approx(0.5)}


def test_a_broken_or_negative_capture_is_refused_by_name(tmp_path):
    import shutil

    from lapis.errors import CaptureError
    from lapis.validate.timelines import measured_cases
    src = ROOT / "data/captures/attention/h200-2026-11-30-s5"
    dst = tmp_path / "attention" / "h200-2026-11-30-s5"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("capture.json"))  # a fresh capture: its schema is checked
    man = json.loads((dst / "manifest.json").read_text())
    man["results"][1]["variants"]["s5"]["plain"]["median_us"] = -5.0
    (dst / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(CaptureError, match=r"results\[1\]\.variants\.s5\.plain\.median_us is a positive finite number"):
        measured_cases(tmp_path)
    (dst / "manifest.json").write_text("{not json")
    with pytest.raises(CaptureError, match="a capture's JSON file is readable: got .*manifest.json"):
        measured_cases(tmp_path)


def test_a_capture_without_timelines_takes_each_cases_from_the_latest_that_has_it():
    from lapis.captures import attention as ac
    rows = [r for r in ac.measurements(ROOT / "data/captures") if r["variant"] == "s6" and r["shape"] == "4x16x8192x128"]
    assert [r["capture"] for r in rows] == ["attention/h200-2026-11-30-s6s7", "attention/h200-2026-11-30-all",
                                            "attention/h200-2026-11-30-probe"]
    assert rows[-1]["timeline_capture"] == "attention/h200-2026-11-30-all"
    assert rows[-1]["timeline_key"] == rows[1]["timeline_key"] == "s6_4x16x8192x128"
    assert rows[-1]["clock_probe_mhz"] > 1400 and rows[0]["clock_probe_mhz"] is None  # older builds had no probe


def test_the_scatter_gives_every_variant_its_own_colour_and_marker():
    from lapis.figures.validation import scatter
    rows = [dict(variant=f"v{i}", causal=False, predicted_us=10.0 + i, measured_us=11.0 + i) for i in range(14)]
    fig = scatter(rows)
    styles = set()
    for coll in fig.axes[0].collections:
        if (coll.get_gid() or "").startswith("points:"):
            face = tuple(coll.get_facecolor()[0])
            path = coll.get_paths()[0]
            styles.add((face, len(path.vertices)))  # the marker's outline: circle, square, triangle, diamond differ
    assert len(styles) == 14


def test_a_corrupt_clock_probe_and_a_changed_kernel_are_not_taken_silently():
    from lapis.captures import attention as ac
    from lapis.errors import CaptureError
    assert ac._probe_mhz({"clock_probe": {"mhz": 1650.0}}, "x") == 1650.0 and ac._probe_mhz({}, "x") is None
    for bad in ({"mhz": -1500.0}, {"mhz": 1e-3}, {"mhz": 1e9}, {"mhz": float("nan")}, {"mhz": "1500"}, [1, 2]):
        with pytest.raises(CaptureError, match="between 100 and 3000 MHz"):
            ac._probe_mhz({"clock_probe": bad}, "x")
    # a timeline is inherited only at the same kernel parameters
    old = dict(variant="s9", shape="s", causal=False, params=dict(block_n=128), timeline_key="k",
               timeline_capture="attention/old")
    new = dict(old, params=dict(block_n=64), timeline_key=None, timeline_capture=None)
    same = dict(old, timeline_key=None, timeline_capture=None)
    ac._inherit_timelines([old, new, same])
    assert new["timeline_capture"] is None and same["timeline_capture"] == "attention/old"


def test_a_truncated_timelines_file_is_named(tmp_path):
    from lapis.cli import main
    cap = tmp_path / "captures"
    # a fresh copy of the one capture (no capture.json): the packed file's own checks find the damage
    shutil.copytree(ROOT / "data/captures/attention/h200-2026-11-30-s8s9", cap / "attention/h200-2026-11-30-s8s9",
                    ignore=shutil.ignore_patterns("capture.json"))
    packed = cap / "attention/h200-2026-11-30-s8s9/timelines.packed"
    with open(packed, "r+b") as f:
        f.truncate(100_000)
    from lapis.errors import CaptureError
    with pytest.raises(CaptureError, match=f"{packed} has damaged column blocks"):
        validate_timelines(str(cap), select=lambda c: c["variant"] == "s9" and not c["causal"] and c["shape"] == "8x16x4096x128")
    assert main(["validate", "timelines", "--captures", str(cap)]) == 2


def test_the_largest_miss_states_its_error_in_cycles_too():
    from lapis.report.validation import _largest_miss
    rows = [dict(_row("s9", "a", 70.0, 100.0), cycles_err_pct=-12.5, clock_mhz=1280.0, timeline=None),
            dict(_row("s4", "a", 99.0, 100.0), cycles_err_pct=1.0, clock_mhz=1600.0, timeline=None)]
    md = "\n".join(_largest_miss(dict(per_case=rows, tolerance_pct=10.0)))
    assert "`s9` at a, -30.0%" in md and "at the 1280 MHz the run's clock probe read" in md and "-12.5%" in md
    # a third-party row's clock says how it was had; a race-only largest miss brings the largest timed one's detail
    rows[0]["clock"] = dict(mhz=1280.0, source="sampled x probe ratio", sampled_mhz=1450.0)
    rows[1]["timeline"] = dict(iteration_ns=dict(predicted=1.0, measured=1.0, err_pct=0.0), ops_ns_per_tile={},
                               roles={})
    rows[1].update(first_divergence=None, steady_divergence=None)
    md = "\n".join(_largest_miss(dict(per_case=rows, tolerance_pct=10.0)))
    assert "at the 1280 MHz the run's clock (sampled x probe ratio)" in md
    assert "### Largest miss with a measured timeline: `s4` at a, -1.0%" in md


def test_without_a_clock_capture_the_rows_are_as_before(tmp_path, monkeypatch):
    from lapis.model import clock
    from lapis.validate import timelines
    assert clock.load(root=tmp_path) is None  # an empty captures folder: no clock capture
    monkeypatch.setattr(timelines, "_clock_model", lambda: clock.load(root=tmp_path))
    r = validate_timelines(select=lambda c: c["variant"] == "s2" and c["shape"] == "8x16x4096x128")
    (row,) = r["per_case"]
    assert not any(k.startswith("clock_model") for k in row) and not any(k.startswith("clock_model") for k in r)


def test_the_shipped_clock_capture_gives_each_case_a_model_clock():
    r = validate_timelines(select=lambda c: c["variant"] == "s9" and c["shape"] == "8x16x4096x128"
                           and not c["causal"])
    row = r["per_case"][0]
    # clock/h200-2026-12-02: 1960 - 328 x tensor busy - 56 x FMA busy, capped at 1979 MHz (python -m lapis.model.clock)
    assert 1500 < row["clock_model_mhz"] < 1979 and row["clock_model_err_pct"] is not None
    assert r["clock_model_cases"] == 1


def test_the_clock_model_is_reported_per_case_from_a_synthetic_capture(tmp_path, monkeypatch):
    # SYNTHETIC capture (tmp_path): clock = min(1980, 2300 - 500 busy_tensor - 150 busy_fma)
    from lapis.model import clock
    from lapis.validate import timelines
    pts = [dict(status="ok", tensor_duty=t, fma_duty=f, probe_mhz=min(1980.0, 2300 - 500 * t - 150 * f),
                tensor_flop_per_clk_sm=4096 * t, ffma_per_clk_smsp=f)
           for t, f in ((0, 0), (.75, 0), (1, 0), (0, 1), (1, .5), (.5, 1), (1, 1))]
    path = tmp_path / "results.json"
    path.write_text(json.dumps(dict(points=pts)))
    monkeypatch.setattr(timelines, "_clock_model", lambda: clock.load(path))
    got = timelines.modelled_clock(dict(tensor=0.8, softmax=0.4, tma=0.5), dict(clock_mhz=1800.0))
    assert got["clock_model_mhz"] == pytest.approx(2300 - 400 - 60)
    assert got["clock_model_err_pct"] == pytest.approx((1840 - 1800) / 1800 * 100)
    assert timelines.modelled_clock(dict(tensor=1.0, fma=1.0), dict(clock_mhz=None)) == dict(
        clock_model_mhz=pytest.approx(1650), clock_model_err_pct=None)
    rows = [dict(_row("s9", "a", 70.0, 100.0), clock_mhz=1800.0, **got),
            dict(_row("s4", "a", 99.0, 100.0), clock_mhz=None, clock_model_mhz=1650.0, clock_model_err_pct=None)]
    s = summarize(rows)
    assert s["clock_model_cases"] == 1 and s["clock_model_mape_pct"] == pytest.approx(40 / 18)
    text = timelines.render(summarize([dict(r, first_divergence=None, steady_divergence=None) for r in rows]))
    assert "clock model (lapis.model.clock, reported, not gated): mape 2.2% over the 1 cases" in text
    assert "s9             a                False   1840 MHz (measured 1800, err +2.2%)" in text
    assert "s4             a                False   1650 MHz (measured -, err -%)" in text
    monkeypatch.setattr(timelines, "_clock_model", lambda: None)
    assert timelines.modelled_clock(dict(tensor=1.0), dict(clock_mhz=1800.0)) == {}
    assert "clock_model_cases" not in summarize([_row("s9", "a", 70.0, 100.0)])


def test_the_table_columns_line_up_whether_or_not_a_row_has_a_value():
    from lapis.validate import timelines
    rows = [dict(_row("s9", "8x16x4096x128", 70.0, 100.0), blind_err_pct=-12.5, clock_mhz=1800.0,
                 cycles_err_pct=3.0, first_divergence=None, steady_divergence=None),
            dict(_row("s4", "8x16x4096x128", 99.0, 100.0), first_divergence=None, steady_divergence=None),
            dict(_row("s2", "8x16x4096x128", 100.0, 100.0), predicted_us=None, err_pct=None, first_divergence=None,
                 steady_divergence=None)]
    lines = timelines.render(summarize(rows)).splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("variant"))
    table = lines[header + 1:header + 4]
    assert table == ["s9             8x16x4096x128    False       70.0     100.0   -30.0    -12.5  1800   +3.0  - | -",
                     "s4             8x16x4096x128    False       99.0     100.0    -1.0        -     -      -  - | -",
                     "s2             8x16x4096x128    False          -     100.0       -        -     -      -  - | -"]
    for col in ("pred µs", "err %", "blind %", "MHz", "cyc %"):  # every cell ends under its header's last char
        end = lines[header].index(col) + len(col)
        assert all(row[end - 1] != " " and row[end] == " " for row in table), col


def test_the_measured_events_digest_hashes_the_events_repr():
    """A cached comparison's key holds events_digest: sha256 of repr(list(events)), whatever formats it."""
    import hashlib

    from lapis.validate.timelines import events_digest
    events = [Event("consumer0", "QK", 12.0, 40.5, sm=0, cta=3, work_item=1, k_index=2, kind="issue", flow_from=None,
                    id=0),
              Event("producer", "wait", 0.0, 1e-7, sm=131, cta=0, work_item=0, k_index=-1, kind="wait", flow_from=7,
                    id=1),
              Event("it's \"quoted\"", "softmax", float("nan"), 3.25, id=2)]
    for got in ([], events[:1], events):
        assert events_digest(got) == hashlib.sha256(repr(list(got)).encode()).hexdigest()[:16]
    assert events_digest(events) != events_digest(events[:2])


def test_the_clock_models_error_is_split_by_the_day_each_case_ran():
    """capture_date (measured_cases: the capture's provenance day) groups the errors; a row without one counts as
    "unknown", a row without a clock-model error not at all."""
    from lapis.validate import timelines
    rows = [dict(capture_date="2026-12-01", clock_model_err_pct=-4.0),
            dict(capture_date="2026-12-01", clock_model_err_pct=8.0),
            dict(capture_date="2026-12-02", clock_model_err_pct=3.0),
            dict(capture_date=None, clock_model_err_pct=1.0),
            dict(capture_date="2026-12-02", clock_model_err_pct=None)]
    assert timelines.clock_model_by_day(rows) == {"2026-12-01": dict(mape_pct=6.0, cases=2),
                                                  "2026-12-02": dict(mape_pct=3.0, cases=1),
                                                  "unknown": dict(mape_pct=1.0, cases=1)}


def test_the_shipped_report_reads_the_clock_model_against_runs_of_three_days():
    """The model is fitted to a 2026-12-02 clock capture; s1's bench capture ran on 2026-11-30 (no race timed it
    since), s12's last race on 2026-12-01 (causal and not), s20's on 2026-12-02 (causal and not)."""
    r = validate_timelines(select=lambda c: c["variant"] in ("s1", "s12", "s20") and c["shape"] == "8x16x4096x128")
    days = r["clock_model_by_day"]
    assert list(days) == ["2026-11-30", "2026-12-01", "2026-12-02"]
    assert [days[d]["cases"] for d in days] == [1, 2, 2] and r["clock_model_cases"] == 5
    assert r["clock_model_fitted_to"] == "h200-2026-12-02-run2"


def test_a_case_timed_by_several_captures_takes_the_one_that_ran_last():
    """cuDNN at 8x16x4096x128 non-causal: five races of 2026-12-02 timed it, race/h200-2026-12-02-s7 at 12:42:19 UTC
    (1790.0 µs), -s20 at 12:43:29 (1826.8), -s21 at 16:35:54 (1825.1), -hd-post at 16:37:38 (1841.8) and -layout
    at 16:47:36 (1839.6), race/h200-2026-12-03-s22 at 08:18:30 the next day (1860.6), -s23 at 09:59:22
    (1836.9), -s24 at 11:05:20 (1823.2), -bracket at 15:37:39 (1807.0), -s25 at 18:43:24 (1842.4) and -s26 at
    21:44:43 (1840.4); by name -s7 sorts last of 2026-12-02's."""
    from lapis.data import CAPTURES
    from lapis.validate.timelines import measured_cases
    case = next(c for c in measured_cases(CAPTURES) if c["variant"] == "cudnn_fprop"
                and c["shape"] == "8x16x4096x128" and not c["causal"])
    assert case["capture"] == "race/h200-2026-12-03-s26" and case["measured_us"] == pytest.approx(1840.4, abs=0.05)
    assert case["capture_date"] == "2026-12-03"
    # the earlier races' times stay as runs: -layout's among them
    # (runs_us in reading order: race folders by name, so -bracket's before -s22's)
    assert pytest.approx(1839.6, abs=0.05) in case["runs_us"] and pytest.approx(1823.2, abs=0.05) in case["runs_us"]
    assert case["measured_us"] in case["runs_us"] and len(case["runs_us"]) >= 10
    assert pytest.approx(1807.0, abs=0.05) in case["runs_us"] and pytest.approx(1842.4, abs=0.05) in case["runs_us"]
    assert pytest.approx(1860.6, abs=0.05) in case["runs_us"] and pytest.approx(1836.9, abs=0.05) in case["runs_us"]


def test_a_case_the_schedule_cannot_run_says_the_limit_is_the_schedules():
    """cuDNN ran at 8x16x4096x256 (race/h200-2026-12-02-hd-post); h200-cudnn-fprop's three K+V stages do not fit
    shared memory at head dim 256: the row says the schedule cannot model it, without the schedule error's fix
    (lower stages ...), which would be advice to change a kernel that ran."""
    r = validate_timelines(select=lambda c: c["variant"] == "cudnn_fprop" and c["shape"] == "8x16x4096x256")
    (row,) = r["per_case"]
    assert row["predicted_us"] is None and row["error"].startswith(
        "not modelled: the schedule h200-cudnn-fprop cannot run this case (the schedule does not fit shared memory: ")
    assert "fix:" not in row["error"] and "458752 B > 232448 B" in row["error"]
