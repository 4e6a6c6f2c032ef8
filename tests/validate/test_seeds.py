"""`lapis validate seeds`: the seed write-ups' tables as data (lapis/data/seeds/) beside the predictions."""

import json

import pytest

from lapis.cli.main import main
from lapis.data import SEEDS
from lapis.errors import CaptureError
from lapis.validate import seeds


@pytest.fixture(scope="module")
def report():
    return seeds.validate_seeds()


def _b200(r, kernel, shape):
    return next(x for x in r["b200"]["rows"] if x["kernel"] == kernel and x["shape"] == shape)


def test_b200_table_is_the_repository_readme(report):
    # benchmarks/README.md of IaroslavElistratov/b200-attention at 4626fa6
    assert report["b200"]["source"]["commit"] == "4626fa6b78c31c062ec8708e694c669fe2a6f49c"
    assert _b200(report, 1, "4K")["measured_pct"] == 14.2
    assert _b200(report, 3, "16K")["measured_pct"] == 26.2
    assert _b200(report, 11, "8K")["measured_pct"] == 83.0
    assert _b200(report, 18, "16K")["measured_pct"] == 94.1
    # the reference is a same-run FA4: the paper's TFLOP/s (benchmarks/registry.py) x about 97% (README.md)
    assert report["b200"]["fa4_paper_tflops"] == {"4K": 1532, "8K": 1579, "16K": 1601}
    assert report["b200"]["fa4_same_run_fraction"] == 0.97
    assert report["b200"]["fa4_reference_tflops"] == pytest.approx({"4K": 1486.04, "8K": 1531.63, "16K": 1552.97})
    assert report["b200"]["shapes"] == {"4K": "8x16x4096x128", "8K": "4x16x8192x128", "16K": "2x16x16384x128"}
    assert len(report["b200"]["rows"]) == 18 * 3


def test_b200_kernels_map_to_the_chapters_in_order(report):
    assert _b200(report, 1, "4K")["schedule"] == "b200-k01-baseline"
    assert _b200(report, 14, "8K")["schedule"] == "b200-k14-persistent"
    assert _b200(report, 15, "8K")["schedule"] == "b200-m1-deferred-score-load"
    assert _b200(report, 18, "4K")["schedule"] == "b200-m4-tma-l2-promotion"


def test_b200_error_is_points_of_the_stated_fa4(report):
    row = _b200(report, 7, "8K")
    assert row["predicted_pct"] - row["measured_pct"] == pytest.approx(row["error"])
    tflops = seeds.predictions.predict(row["schedule"], "b200", "4x16x8192x128", {}, seeds.predictions.load())[0]
    assert row["predicted_pct"] == pytest.approx(100 * tflops["tflops"] / (0.97 * 1579))
    assert row["measured_pct"] == 58.5
    # kernel 2 moves 0.9 points at 4K: below the 1-point bar, so its direction is not scored
    step = _b200(report, 2, "4K")["step"]
    assert step["measured_change"] == pytest.approx(0.9) and step["scored"] is False and step["hit"] is None


def test_emmy_times_as_stated_or_derived(report):
    rows = report["rtx5090"]["rows"]
    assert [r["schedule"] for r in rows] == [f"sm120-m0{i}-{n}" for i, n in enumerate(
        ("tensor-cores", "smem-staging", "c-to-a-repack", "q-hoist", "cp-async-ring", "tma", "register-tiling"), 1)]
    assert [round(r["measured_us"], 1) for r in rows] == [612.0, 510.0, 271.0, 233.0, 221.9, 213.4, 204.7]
    assert [r["derived"] for r in rows] == [False, True, False, False, True, True, False]
    assert report["rtx5090"]["shape"] == "1x8x4096x64"
    assert {m["move"] for m in report["rtx5090"]["refused"]} == {
        "warp-scoped barrier", "fast exp", "deeper rings (d3, d4)", "warp specialization"}


def _refused(r, schedule):
    return next(m for m in r["rtx5090"]["refused"] if m["schedule"] == schedule)


def test_refused_moves_read_the_write_up_statements(report):
    ws = _refused(report, "sm120-r4-warp-specialization")
    assert ws["stated"] == "213 vs 206 µs" and ws["baseline"] == "sm120-m07-register-tiling"
    assert ws["measured_change"] == pytest.approx(100 * (213 / 206 - 1))  # +3.4%: slower
    for name in ("sm120-r1-warp-scoped-barrier", "sm120-r2-fast-exp"):  # "~0µs"
        assert _refused(report, name)["stated"] == "~0 µs change" and _refused(report, name)["measured_change"] == 0
    for name in ("sm120-r3-ring-d3", "sm120-r3-ring-d4"):  # "occupancy loss beats extra overlap": no time
        assert _refused(report, name)["measured_change"] is None
    assert _refused(report, "sm120-r1-warp-scoped-barrier")["baseline"] == "sm120-m02-smem-staging"
    for m in report["rtx5090"]["refused"]:
        assert m["predicted_change"] == pytest.approx(100 * (m["predicted_us"] / m["baseline_predicted_us"] - 1))
    assert report["rtx5090"]["refused_summary"]["rows"] == 5


def test_refused_verdict_rule():
    assert seeds.refused_verdict(0.0, 2.9) and seeds.refused_verdict(0.0, -2.9)  # within 3 points of ~0
    assert not seeds.refused_verdict(0.0, -3.1) and not seeds.refused_verdict(0.0, 3.1)
    assert seeds.refused_verdict(3.4, 6.3) and not seeds.refused_verdict(3.4, 6.5)  # 213 vs 206 µs
    assert seeds.refused_verdict(None, 40.0) and seeds.refused_verdict(None, -2.9)  # no time stated: no gain
    assert not seeds.refused_verdict(None, -3.1)


def test_refused_change_from_the_stated_times():
    assert seeds.refused_measured_change(dict(stated_us=213.0, baseline_us=206.0), 204.7) == pytest.approx(
        100 * 7 / 206)
    assert seeds.refused_measured_change(dict(stated_delta_us=0.0), 204.7) == 0.0
    assert seeds.refused_measured_change(dict(stated_delta_us=None), 204.7) is None
    with pytest.raises(CaptureError, match="positive finite"):
        seeds.refused_measured_change(dict(move="x", stated_us=213.0, baseline_us=0), 204.7)


def test_step_direction_rule():
    assert seeds._step(10.0, 20.0, 12.0, 21.0, 1.0) == dict(measured_change=2.0, predicted_change=1.0,
                                                              scored=True, hit=True)
    assert seeds._step(10.0, 20.0, 12.0, 20.0, 1.0)["hit"] is False  # no predicted change: a miss
    assert seeds._step(10.0, 20.0, 8.0, 19.0, 1.0)["hit"] is True  # both fell
    assert seeds._step(10.0, 20.0, 10.5, 30.0, 1.0)["scored"] is False


def test_summary_counts_scored_steps_only():
    rows = [dict(schedule="a", error=2.0), dict(schedule="b", error=-4.0, step=dict(scored=True, hit=True)),
            dict(schedule="c", error=0.0, step=dict(scored=True, hit=False)),
            dict(schedule="d", error=26.0, step=dict(scored=False, hit=None))]
    assert seeds.summary(rows) == dict(rows=4, mean_abs_error=8.0, mean_abs_error_rel_pct=8.0,
                                       max_abs_error_rel_pct=26.0, open=["d"], scored_steps=2, direction_hits=1,
                                       direction_hit_rate=0.5)
    assert seeds.summary(rows, per_row=False)["open"] == []  # a mean of 8% is not past 15%


def test_b200_relative_error_and_what_stays_open(report):
    row = _b200(report, 7, "4K")  # 58.2% of FA4 measured
    assert row["error_rel_pct"] == pytest.approx(100 * (row["predicted_pct"] / 58.2 - 1))
    b, e = report["b200"]["summary"], report["rtx5090"]["summary"]
    rel = [abs(r["predicted_pct"] / r["measured_pct"] - 1) * 100 for r in report["b200"]["rows"]]
    assert b["mean_abs_error_rel_pct"] == pytest.approx(sum(rel) / 54) and b["max_abs_error_rel_pct"] == max(rel)
    # the B200 goal is a mean of 15%: 25.1% today, with every profile value from a public source (the late
    # chapters run past FA4: kernel 14 at 125% of it at 4K)
    assert b["open"] == ["mean"] and b["mean_abs_error_rel_pct"] == pytest.approx(25.1, abs=0.05)
    assert _b200(report, 14, "4K")["predicted_pct"] == pytest.approx(125.3, abs=0.05)
    # the Emmy goal is every move: the tensor cores, smem staging (~510 µs derived from the stated 1.20x) and the
    # C->A repack are past 15% (all predicted fast: L2 latency 130 ns, its public figure)
    assert e["open"] == ["sm120-m01-tensor-cores", "sm120-m02-smem-staging", "sm120-m03-c-to-a-repack"]


def test_emmy_derivation_refuses_a_move_with_neither_time_nor_factor():
    with pytest.raises(CaptureError, match="states its time"):
        seeds.emmy_measured_us(dict(moves=[dict(move="x", stated_us=None, stated_speedup=None)]))


def test_a_missing_or_short_table_is_a_capture_error(tmp_path, monkeypatch):
    monkeypatch.setattr(seeds, "B200_TABLE", tmp_path / "absent.json")
    with pytest.raises(CaptureError, match="readable JSON"):
        seeds.validate_seeds()
    short = json.loads((SEEDS / "b200_progression.json").read_text())
    short["kernels"] = short["kernels"][:17]
    (tmp_path / "short.json").write_text(json.dumps(short))
    monkeypatch.setattr(seeds, "B200_TABLE", tmp_path / "short.json")
    with pytest.raises(CaptureError, match="17 rows"):
        seeds.validate_seeds()


def test_cli_table_and_json(capsys):
    assert main(["validate", "seeds"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("B200: % of FA4 (measured: IaroslavElistratov/b200-attention@4626fa6")
    rows = [line for line in out if "goal: " not in line]
    assert sum(" b200-" in line for line in rows) == 54 and sum(" sm120-m0" in line for line in rows) == 7
    assert [line.split("; ")[-1] for line in out if "goal: " in line] == [
        "goal: mean |relative error| <= 15%: not met, still open: mean",
        "goal: every move within 15%: not met, still open: sm120-m01-tensor-cores, sm120-m02-smem-staging, "
        "sm120-m03-c-to-a-repack"]
    assert sum(" sm120-r" in line for line in out) == 5  # the refused moves, d3 and d4 apart
    assert out[-1].startswith("direction hit rate, both tables: ")
    assert main(["validate", "seeds", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert set(r) == {"b200", "rtx5090", "summary"}
    s = r["summary"]
    assert s["scored_steps"] == r["b200"]["summary"]["scored_steps"] + r["rtx5090"]["summary"]["scored_steps"]
    assert 0 <= s["direction_hit_rate"] <= 1


@pytest.mark.parametrize("edit, match", [
    (lambda d: d["kernels"][0]["pct_of_fa4"].update({"4K": "fourteen"}), "positive finite numbers"),
    (lambda d: d["fa4_paper_tflops"].update({"4K": 0}), "positive finite numbers"),
    (lambda d: d["fa4_paper_tflops"].update({"4K": -5.0}), "positive finite numbers"),
    (lambda d: d.update(fa4_same_run_fraction=0), "positive finite numbers"),
    (lambda d: d["fa4_paper_tflops"].pop("8K"), "hold their measured fields"),
    (lambda d: d["kernels"][0].pop("pct_of_fa4"), "hold their measured fields"),
])
def test_a_bad_value_in_the_b200_table_is_a_capture_error(tmp_path, monkeypatch, edit, match):
    import json

    from lapis.errors import CaptureError
    from lapis.validate import seeds

    doc = json.loads(seeds.B200_TABLE.read_text())
    edit(doc)
    bad = tmp_path / "b200_progression.json"
    bad.write_text(json.dumps(doc))
    monkeypatch.setattr(seeds, "B200_TABLE", bad)
    with pytest.raises(CaptureError, match=match):
        seeds.validate_seeds()


@pytest.mark.parametrize("value", [0, -3, float("nan"), 1e-320, 0.001])
def test_a_measured_pct_near_zero_is_refused_not_an_infinite_relative_error(tmp_path, monkeypatch, capsys, value):
    """A measured % of FA4 of 1e-320 (or 0.001) gave error_rel_pct +inf (printed Infinity by --json) or a
    300-digit one; 0, below zero and NaN were refused already."""
    doc = json.loads(seeds.B200_TABLE.read_text())
    doc["kernels"][1]["pct_of_fa4"]["4K"] = value
    bad = tmp_path / "b200_progression.json"
    bad.write_text(json.dumps(doc))
    monkeypatch.setattr(seeds, "B200_TABLE", bad)
    assert main(["validate", "seeds", "--json"]) == 2
    out, err = capsys.readouterr()
    assert json.loads(out)["error"] == (
        f"a seed table's measured values are positive finite numbers (at least 0.01): got {bad}: kernel 2 "
        f"pct_of_fa4[4K] = {value!r}; fix: restore it from the lapis repository (lapis/data/seeds/)")
    assert "Traceback" not in err


def test_a_refused_move_without_a_schedule_is_a_capture_error(tmp_path, monkeypatch):
    doc = json.loads(seeds.EMMY_TABLE.read_text())
    doc["refused"].append(dict(move="split-K", stated_delta_us=None))
    bad = tmp_path / "emmy_moves.json"
    bad.write_text(json.dumps(doc))
    monkeypatch.setattr(seeds, "EMMY_TABLE", bad)
    with pytest.raises(CaptureError, match="REFUSED"):
        seeds.validate_seeds()


@pytest.mark.parametrize("table,edit,match", [
    ("B200_TABLE", lambda d: d.__setitem__("shapes", {}), "names its shapes"),
    ("B200_TABLE", lambda d: d.__setitem__("fa4_same_run_fraction", 50), r"in \(0, 1\]: got .*50.0"),
    ("EMMY_TABLE", lambda d: d["refused"][0].__setitem__("stated_delta_us", "zero"), "stated_delta_us = 'zero'"),
    ("EMMY_TABLE", lambda d: d["refused"][0].__setitem__("stated_delta_us", float("nan")), "stated_delta_us = nan"),
    ("EMMY_TABLE", lambda d: d["refused"][3].__setitem__("baseline_us", "x"), "baseline_us = 'x'"),
    ("EMMY_TABLE", lambda d: d.__setitem__("refused", []), "has its move in the Emmy table's refused list"),
])
def test_a_corrupted_seed_table_exits_2_naming_the_value(tmp_path, monkeypatch, capsys, table, edit, match):
    doc = json.loads(getattr(seeds, table).read_text())
    edit(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    monkeypatch.setattr(seeds, table, bad)
    with pytest.raises(CaptureError, match=match):
        seeds.validate_seeds()
    assert main(["validate", "seeds"]) == 2 and "fix:" in capsys.readouterr().err


def test_a_seed_table_not_in_utf8_is_a_capture_error(tmp_path, monkeypatch):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe{")
    monkeypatch.setattr(seeds, "B200_TABLE", bad)
    with pytest.raises(CaptureError, match="readable JSON file"):
        seeds.validate_seeds()
