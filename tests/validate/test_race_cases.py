"""Third-party kernels of a race capture (lapis.gpu.race) become validation cases with a sampled clock."""

import json

import pytest

from lapis.captures.readers import read_race
from lapis.errors import CaptureError
from lapis.validate.timelines import (_third_party_clock, measured_cases, post_probe_agreement, probe_to_post,
                                      probe_to_sampled)

PROV = {"gpu": "NVIDIA H200", "date": "2026-12-01T20:00:00+00:00", "commit": "0" * 40, "dirty": False,
        "command": "python -m lapis.gpu.race --out x", "source_blobs": {}}


def _kernel(us, mhz):
    return {"median_us": us, "spread_pct": 0.5, "speedup_to_reference": {"median": 1.0},
            "clock": {"mhz_median": mhz, "mhz_min": mhz, "mhz_max": mhz, "source": "sampled"}}


def _race(root, results):
    d = root / "race" / "h200-test"
    d.mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({"provenance": PROV, "kind": "race", "results": results}))
    return d


def test_flash_and_cudnn_rows_become_cases(tmp_path):
    _race(tmp_path, [{"shape": "8x16x4096x128", "causal": False, "flops": 1.1e12,
                      "kernels": {"cudnn": _kernel(1700.0, 1650.0), "flash": _kernel(3300.0, 1700.0),
                                  "attn_s9_tuned_s3_n128_c2": _kernel(1750.0, 1600.0)},
                      "skipped": {"fa4": "LapisError: FA4's sm90 forward is not importable here"}},
                     {"shape": "8x16x4096x128", "causal": True, "flops": 5.5e11,
                      "kernels": {"flash": _kernel(1900.0, 1710.0)}}])
    cases = {(c["variant"], c["causal"]): c for c in measured_cases(tmp_path)}
    # lapis's s9 in the row is a case too, its clock its own
    assert set(cases) == {("cudnn_fprop", False), ("flash2", False), ("flash2", True), ("s9", False)}
    assert (cases[("s9", False)]["measured_us"], cases[("s9", False)]["clock_mhz"]) == (1750.0, 1600.0)
    f = cases[("flash2", True)]
    assert f["schedule"] == "h200-flash2" and f["measured_us"] == 1900.0
    assert f["clock_mhz"] == 1710.0 and f["clock_source"] == "sampled"
    assert cases[("cudnn_fprop", False)]["schedule"] == "h200-cudnn-fprop"
    # FA2's tile at head dim 128 (Flash_fwd_kernel_traits<128, 128, 64, 4>)
    assert (f["params"]["block_m"], f["params"]["block_n"], f["params"]["warps"]) == (128, 64, 4)
    assert f["capture"] == "race/h200-test" and f["capture_date"] == "2026-12-01"


def test_configurations_seen_before_the_predictions_are_not_blind():
    from lapis.validate.timelines import blind_entries, blind_for
    entries = blind_entries()
    case = dict(schedule="h200-flash2", variant="flash2", shape="8x16x4096x128", causal=False,
                capture_date="2026-12-02")
    assert blind_for(case, entries) is None
    causal = dict(case, causal=True)
    assert blind_for(causal, entries)["set"] == "flash2_h200"


def test_skipped_kernels_are_counted_and_a_bad_time_refused(tmp_path):
    d = _race(tmp_path, [{"shape": "8x16x4096x128", "causal": False, "flops": 1.1e12,
                          "kernels": {"cudnn": _kernel(1700.0, 1650.0)},
                          "skipped": {"fa4": "LapisError: FA4's sm90 forward is not importable here"}}])
    assert read_race(d).not_compared == {"LapisError: FA4's sm90": 1}
    man = json.loads((d / "manifest.json").read_text())
    man["results"][0]["kernels"]["cudnn"]["median_us"] = -3.0
    (d / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(CaptureError):
        read_race(d)


def _probed(us, mhz, sampled):
    return {"median_us": us, "spread_pct": 0.5, "speedup_to_reference": {"median": 1.0},
            "clock": {"mhz_median": mhz, "mhz_min": mhz, "mhz_max": mhz, "source": "probe",
                      "sampled_mhz_median": sampled}}


def test_a_third_party_clock_takes_the_rows_probe_to_sample_ratio(tmp_path):
    # lapis's kernels in the row ran at 1450 and 1500 MHz by their probes while nvidia-smi sampled 1650 and
    # 1660: their median ratio (1450/1650 + 1500/1660) / 2 scales cuDNN's 1700 MHz sample; a row without a
    # probed kernel keeps its sample
    _race(tmp_path, [{"shape": "8x16x4096x128", "causal": False, "flops": 1.1e12,
                      "kernels": {"cudnn": _kernel(1700.0, 1700.0),
                                  "attn_s17_one_sync_s2_n128_c2": _probed(1780.0, 1450.0, 1650.0),
                                  "attn_s18_bar_hoist_s2_n128_c2": _probed(1760.0, 1500.0, 1660.0)}},
                     {"shape": "8x16x4096x128", "causal": True, "flops": 5.5e11,
                      "kernels": {"cudnn": _kernel(1100.0, 1530.0)}}])
    cases = {(c["variant"], c["causal"]): c for c in measured_cases(tmp_path)}
    c = cases[("cudnn_fprop", False)]
    assert c["clock_mhz"] == pytest.approx(1700.0 * (1450.0 / 1650.0 + 1500.0 / 1660.0) / 2, rel=1e-12)
    assert c["clock_source"] == "sampled x probe ratio" and c["clock_sampled_mhz"] == 1700.0
    assert cases[("s17", False)]["clock_mhz"] == 1450.0  # a probed kernel keeps its probe
    causal = cases[("cudnn_fprop", True)]
    assert causal["clock_mhz"] == 1530.0 and causal["clock_source"] == "sampled"


def test_the_cycles_error_reports_the_sample_beside_the_corrected_clock():
    from lapis.validate.timelines import _profile_clock_ghz, cycles
    case = dict(measured_us=1000.0, clock_mhz=1500.0, clock_source="sampled x probe ratio", clock_sampled_mhz=1700.0)
    got = cycles(1000.0 * 1.5 / _profile_clock_ghz(), case)  # predicted cycles = 1.5e6, measured 1.5e6
    assert got["clock"] == {"mhz": 1500.0, "source": "sampled x probe ratio", "sampled_mhz": 1700.0}
    assert got["cycles_err_pct"] == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("field", ["mhz_median", "sampled_mhz_median"])
@pytest.mark.parametrize("bad", [0, -1500.0, float("nan"), float("inf"), "1500", True])
def test_a_probed_clock_that_is_not_a_positive_number_is_refused(tmp_path, field, bad):
    k = _probed(1760.0, 1500.0, 1660.0)
    k["clock"][field] = bad
    e = {"shape": "8x16x4096x128", "causal": False, "flops": 1.1e12,
         "kernels": {"cudnn": _kernel(1700.0, 1700.0), "attn_s18_bar_hoist_s2_n128_c2": k}}
    with pytest.raises(CaptureError, match=f"attn_s18_bar_hoist_s2_n128_c2.clock.{field}"):
        probe_to_sampled(e)
    _race(tmp_path, [e])
    with pytest.raises(CaptureError, match="positive finite number"):  # the reader's schema refuses it first
        measured_cases(tmp_path)


@pytest.mark.parametrize("bad", [0, float("nan"), "1700", True])
def test_a_third_party_sample_that_is_not_a_positive_number_is_refused(bad):
    k = _kernel(1700.0, bad)
    with pytest.raises(CaptureError, match="cudnn.clock.mhz_median"):
        _third_party_clock(k, 0.9, "cudnn")


def test_a_probed_kernel_without_a_sample_gives_no_ratio():
    # races before the sampled field: the probe alone cannot scale a third-party sample
    k = _probed(1760.0, 1500.0, 1660.0)
    del k["clock"]["sampled_mhz_median"]
    assert probe_to_sampled({"kernels": {"attn_s18_bar_hoist_s2_n128_c2": k}}) is None
    assert _third_party_clock(_kernel(1700.0, 1700.0), None, "cudnn") == (1700.0, "sampled", 1700.0)


def _post(k, post):
    """Kernel row k with the post-batch probe's clock (lapis.gpu.race): median `post`, one reading per round."""
    k["clock"].update(post_mhz_median=post, post_mhz=[post] * 5)
    return k


def test_a_third_party_clock_is_its_post_batch_probe_times_the_in_kernel_ratio(tmp_path):
    # cuDNN's post-batch probe read 1460 MHz; s18 in the same row ran at 1500 MHz by its own probe and 1485 by the
    # post-batch one, so cuDNN's clock is 1460 x 1500 / 1485. FA2 in the row has no post-batch probe (an older
    # capture's row) and keeps the sample x probe ratio. The head-dim-64 row has no lapis kernel: its FA4 takes the
    # capture's ratio, the median of s18's 1500/1485 and s17's 1400/1470
    _race(tmp_path, [{"shape": "8x16x4096x128", "causal": False, "flops": 1.1e12,
                      "kernels": {"cudnn": _post(_kernel(1700.0, 1700.0), 1460.0), "flash": _kernel(3300.0, 1650.0),
                                  "attn_s18_bar_hoist_s2_n128_c2": _post(_probed(1760.0, 1500.0, 1650.0), 1485.0)}},
                     {"shape": "8x16x4096x128", "causal": True, "flops": 5.5e11,
                      "kernels": {"attn_s17_one_sync_s2_n128_c2": _post(_probed(1000.0, 1400.0, 1600.0), 1470.0)}},
                     {"shape": "8x16x4096x64", "causal": False, "flops": 5.5e11,
                      "kernels": {"fa4": _post(_kernel(1000.0, 1900.0), 1800.0)}}])
    cases = {(c["variant"], c["shape"], c["causal"]): c for c in measured_cases(tmp_path)}
    c = cases[("cudnn_fprop", "8x16x4096x128", False)]
    assert c["clock_mhz"] == pytest.approx(1460.0 * 1500.0 / 1485.0, rel=1e-12)
    assert (c["clock_source"], c["clock_sampled_mhz"]) == ("post-batch probe x probe ratio", 1700.0)
    f = cases[("flash2", "8x16x4096x128", False)]
    assert f["clock_mhz"] == pytest.approx(1500.0, rel=1e-12) and f["clock_source"] == "sampled x probe ratio"
    assert cases[("s18", "8x16x4096x128", False)]["clock_mhz"] == 1500.0  # a lapis kernel keeps its own probe
    hd = cases[("fa4_sm90", "8x16x4096x64", False)]
    assert hd["clock_mhz"] == pytest.approx(1800.0 * (1500.0 / 1485.0 + 1400.0 / 1470.0) / 2, rel=1e-12)
    # a post-batch probe with no in-kernel probe to scale it, and without a sample (nvidia-smi read nothing), is
    # the clock all the same
    k = {"median_us": 1700.0, "spread_pct": 0.5, "clock": {"post_mhz_median": 1460.0, "post_mhz": [1460.0] * 5}}
    assert _third_party_clock(k, None, "fa4") == (1460.0, "post-batch probe", None)


def test_probe_to_post_is_the_median_in_kernel_over_post_batch_ratio():
    rows = [{"kernels": {"attn_s18_bar_hoist_s2_n128_c2": _post(_probed(1760.0, 1500.0, 1650.0), 1600.0),
                         "attn_s17_one_sync_s2_n128_c2": _post(_probed(1780.0, 1450.0, 1650.0), 1610.0),
                         "attn_s16_early_pack_s2_n128_c2": _probed(1790.0, 1440.0, 1650.0),  # no post probe
                         "cudnn": _post(_kernel(1700.0, 1700.0), 1650.0)}}]  # no in-kernel probe
    assert probe_to_post(rows) == pytest.approx((1500.0 / 1600.0 + 1450.0 / 1610.0) / 2, rel=1e-12)
    assert probe_to_post([{"kernels": {"cudnn": _post(_kernel(1700.0, 1700.0), 1650.0)}}]) is None


@pytest.mark.parametrize("bad", [0, -1460.0, float("nan"), float("inf"), "1460", True])
def test_a_post_batch_probe_that_is_not_a_positive_number_is_refused(tmp_path, bad):
    k = _post(_kernel(1700.0, 1700.0), bad)
    with pytest.raises(CaptureError, match="cudnn.clock.post_mhz_median"):
        _third_party_clock(k, 0.9, "cudnn")
    _race(tmp_path, [{"shape": "8x16x4096x128", "causal": False, "flops": 1.1e12, "kernels": {"cudnn": k}}])
    with pytest.raises(CaptureError, match="positive finite number"):  # the reader's schema refuses it first
        measured_cases(tmp_path)


def test_the_post_batch_probe_is_read_against_lapis_kernels_own_probes(tmp_path):
    assert post_probe_agreement(tmp_path) is None  # no race capture
    # lapis's rows: post-batch / in-kernel 1485/1500 = 0.99, 1515/1500 = 1.01, 1470/1400 = 1.05 -> median 1.01 over
    # 3 rows; cuDNN's post-batch probe has no in-kernel probe to be read against, and s17's row has no post probe
    _race(tmp_path, [{"shape": "8x16x4096x128", "causal": False, "flops": 1.1e12,
                      "kernels": {"cudnn": _post(_kernel(1700.0, 1700.0), 1460.0),
                                  "attn_s17_one_sync_s2_n128_c2": _probed(1780.0, 1450.0, 1650.0),
                                  "attn_s18_bar_hoist_s2_n128_c2": _post(_probed(1760.0, 1500.0, 1650.0), 1485.0)}},
                     {"shape": "8x16x4096x128", "causal": True, "flops": 5.5e11,
                      "kernels": {"attn_s18_bar_hoist_s2_n128_c2": _post(_probed(990.0, 1500.0, 1660.0), 1515.0),
                                  "attn_s17_one_sync_s2_n128_c2": _post(_probed(1000.0, 1400.0, 1600.0), 1470.0)}}])
    got = post_probe_agreement(tmp_path)
    assert got["rows"] == 3 and got["median_ratio"] == pytest.approx(1.01, rel=1e-12)


def test_captures_without_the_post_batch_probe_give_no_agreement(tmp_path):
    _race(tmp_path, [{"shape": "8x16x4096x128", "causal": False, "flops": 1.1e12,
                      "kernels": {"cudnn": _kernel(1700.0, 1700.0),
                                  "attn_s18_bar_hoist_s2_n128_c2": _probed(1760.0, 1500.0, 1650.0)}}])
    assert post_probe_agreement(tmp_path) is None


def test_a_race_after_a_bench_capture_times_the_case_and_the_bench_keeps_its_timeline():
    """s7 at 4x16x8192x128: benched with timelines on 2026-11-30 (attention/h200-2026-11-30-probe), raced on
    2026-12-02 (race/h200-2026-12-02-s7, 3694.3 us at 1499.0 MHz by its probe)."""
    from lapis.data import CAPTURES
    race = json.loads((CAPTURES / "race" / "h200-2026-12-02-s7" / "manifest.json").read_text())
    row = next(e for e in race["results"] if e["shape"] == "4x16x8192x128" and not e["causal"])
    k = row["kernels"]["attn_s7_cond_rescale_s2_n128_c2"]
    case = next(c for c in measured_cases(CAPTURES) if c["variant"] == "s7" and c["shape"] == "4x16x8192x128")
    assert case["capture"] == "race/h200-2026-12-02-s7" and case["capture_date"] == "2026-12-02"
    assert (case["measured_us"], case["clock_mhz"]) == (k["median_us"], k["clock"]["mhz_median"])
    assert case["timeline_capture"].startswith("attention/h200-2026-11-30") and case["timeline"]
    assert len(case["runs_us"]) >= 2  # the bench's median and the race's


@pytest.mark.parametrize("bad", [1e300, 5001.0, 99.0, 1e-300])
def test_a_race_clock_that_is_no_sm_clock_is_refused(tmp_path, bad):
    # a positive finite number the schema lets through, but no SM clock (lapis.model.clock.PROBE_MHZ: 100-5000 MHz)
    with pytest.raises(CaptureError, match="between 100 and 5000 MHz") as e:
        _third_party_clock(_post(_kernel(1700.0, 1700.0), bad), None, "cudnn")
    assert "cudnn.clock.post_mhz_median" in str(e.value)
    with pytest.raises(CaptureError, match="attn_s18_bar_hoist_s2_n128_c2.clock.post_mhz_median"):
        probe_to_post([{"kernels": {"attn_s18_bar_hoist_s2_n128_c2": _post(_probed(1760.0, 1500.0, 1650.0), bad)}}])
    # lapis's own kernel: its probe is the case's clock; the error names the capture and the row
    _race(tmp_path, [{"shape": "8x16x4096x128", "causal": False, "flops": 1.1e12,
                      "kernels": {"cudnn": _kernel(1700.0, 1700.0)}},
                     {"shape": "8x16x4096x128", "causal": True, "flops": 5.5e11,
                      "kernels": {"attn_s9_tuned_causal_s3_n128_c2": _kernel(1750.0, bad)}}])
    where = (f"race/h200-test: results[1] (8x16x4096x128, causal True): "
             f"kernels.attn_s9_tuned_causal_s3_n128_c2.clock.mhz_median = {bad!r}")
    for fn in (measured_cases, post_probe_agreement):
        with pytest.raises(CaptureError, match="between 100 and 5000 MHz") as e:
            fn(tmp_path)
        assert where in str(e.value)


def _dated(root, name, date, us):
    d = root / "race" / name
    d.mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({"provenance": dict(PROV, date=date), "kind": "race", "results": [
        {"shape": "8x16x4096x128", "causal": False, "flops": 1.1e12, "kernels": {"cudnn": _kernel(us, 1700.0)}}]}))


def test_the_last_capture_is_the_last_in_utc(tmp_path):
    # -a ran at 2026-12-02T01:00+09:00, i.e. 2026-12-01T16:00 UTC, four hours before -b: -b's 1800 us is the case's
    # time and its day the case's; compared as written, -a's "2026-12-02" would have won
    _dated(tmp_path, "h200-a", "2026-12-02T01:00:00+09:00", 1700.0)
    _dated(tmp_path, "h200-b", "2026-12-01T20:00:00+00:00", 1800.0)
    (case,) = measured_cases(tmp_path)
    assert (case["capture"], case["measured_us"], case["capture_date"]) == ("race/h200-b", 1800.0, "2026-12-01")
    assert case["runs_us"] == [1700.0, 1800.0]


@pytest.mark.parametrize("bad", ["garbage", "", "2026-12-02", "2026-12-01T20:00:00"])
def test_a_capture_date_without_a_time_and_offset_is_refused(tmp_path, bad):
    # "garbage" sorted after every real date and was the case's capture_date (blind_for compared against it)
    _dated(tmp_path, "h200-a", bad, 1700.0)
    with pytest.raises(CaptureError, match="ISO 8601 with a time and a UTC offset") as e:
        measured_cases(tmp_path)
    assert f"race/h200-a: provenance.date = {bad!r}" in str(e.value)


def _race_with_post(tmp_path, **clock):
    k = _post(_kernel(1700.0, 1700.0), 1460.0)
    k["round_median_us"] = [1700.0] * 5
    k["clock"].update(clock)
    for key in [key for key, v in clock.items() if v is None]:
        del k["clock"][key]
    return _race(tmp_path, [{"shape": "8x16x4096x128", "causal": False, "flops": 1.1e12, "kernels": {"cudnn": k}}])


@pytest.mark.parametrize("clock, words", [
    (dict(post_mhz=[]), "post_mhz: 0 readings"),
    (dict(post_mhz=[1460.0] * 6), "post_mhz: 6 readings"),  # 5 rounds
    (dict(post_mhz_median=1500.0), "post_mhz_median: 1500.0, the median of post_mhz 1460.0"),
    (dict(post_mhz=[1400.0, 1460.0, 1470.0, 1480.0]), "the median of post_mhz 1465.0"),
    (dict(post_mhz_median=None), "post_mhz and post_mhz_median together"),
    (dict(post_mhz=None), "post_mhz and post_mhz_median together"),
    (dict(source="probed"), "clock.source is one of 'probe', 'sampled'"),
])
def test_the_race_reader_holds_the_post_batch_probe_to_the_protocols_record(tmp_path, clock, words):
    d = _race_with_post(tmp_path, **clock)
    with pytest.raises(CaptureError) as e:
        read_race(d)
    assert words in str(e.value) and "results[0].kernels.cudnn.clock" in str(e.value)


def test_the_race_reader_takes_the_protocols_post_batch_probe(tmp_path):
    # 4 of 5 rounds read the probe: median of 1400, 1460, 1470, 1480 is 1465
    d = _race_with_post(tmp_path, post_mhz=[1400.0, 1460.0, 1470.0, 1480.0], post_mhz_median=1465.0)
    assert read_race(d).manifest["results"][0]["kernels"]["cudnn"]["clock"]["post_mhz_median"] == 1465.0


def test_a_race_capture_without_its_manifest_is_refused_not_skipped(tmp_path):
    import shutil

    from lapis.data import CAPTURES
    for name in ("h200-2026-12-02-fa2", "h200-2026-12-02-s14"):
        shutil.copytree(CAPTURES / "race" / name, tmp_path / "race" / name)
    assert {c["capture"] for c in measured_cases(tmp_path)} >= {"race/h200-2026-12-02-s14"}
    (tmp_path / "race" / "h200-2026-12-02-s14" / "manifest.json").unlink()  # capture.json and the log stay
    with pytest.raises(CaptureError) as e:
        measured_cases(tmp_path)
    assert e.value.rule.startswith("every capture folder holds its manifest.json")
    assert e.value.value == f"{tmp_path}/race/h200-2026-12-02-s14: capture.json is there, manifest.json is not"
    assert e.value.fix.startswith("restore manifest.json from git, or capture")


def _bracketed(k, mhz, busy=(0.99,) * 5):
    """Kernel row k with the bracket clock (lapis.gpu.protocol): median `mhz`, one reading and busy per round."""
    k["clock"].update(bracket_mhz_median=mhz, bracket_mhz=[mhz] * len(busy), busy=list(busy))
    return k


def test_a_third_party_clock_is_its_bracket_clock_where_the_batches_kept_the_gpu_busy(tmp_path):
    # cuDNN's bracket read 1420 MHz over batches 99% busy: its clock, whatever its post-batch probe and sample say.
    # FA4's batches idled (busy 0.80 in one round): its bracket holds idle clock, so the post-batch probe x ratio
    # stays its clock (s18: in-kernel 1500 / post 1485). s18's bracket 1512 against its probe 1500 is the agreement;
    # a lapis kernel whose rounds idled keeps its in-kernel probe (s17's row)
    _race(tmp_path, [{"shape": "8x16x4096x128", "causal": False, "flops": 1.1e12,
                      "kernels": {"cudnn": _bracketed(_post(_kernel(1700.0, 1700.0), 1600.0), 1420.0),
                                  "fa4": _bracketed(_post(_kernel(1600.0, 1700.0), 1560.0), 1650.0,
                                                    busy=(0.99, 0.99, 0.80, 0.99, 0.99)),
                                  "attn_s18_bar_hoist_s2_n128_c2":
                                      _bracketed(_post(_probed(1760.0, 1500.0, 1650.0), 1485.0), 1512.0)}},
                     {"shape": "4x16x8192x128", "causal": False, "flops": 1.1e12,
                      "kernels": {"attn_s17_one_sync_s2_n128_c2": _bracketed(_probed(1000.0, 1400.0, 1600.0), 1450.0,
                                                                            busy=(0.9,) * 5)}}])
    cases = {c["variant"]: c for c in measured_cases(tmp_path) if c["shape"] == "8x16x4096x128"}
    idle = next(c for c in measured_cases(tmp_path) if c["shape"] == "4x16x8192x128")
    assert (idle["clock_mhz"], idle["clock_source"]) == (1400.0, "probe") and "clock_probe_mhz" not in idle
    assert (cases["cudnn_fprop"]["clock_mhz"], cases["cudnn_fprop"]["clock_source"]) == (1420.0, "bracket probe")
    assert cases["cudnn_fprop"]["clock_sampled_mhz"] == 1700.0
    assert cases["fa4_sm90"]["clock_mhz"] == pytest.approx(1560.0 * 1500.0 / 1485.0, rel=1e-12)
    assert cases["fa4_sm90"]["clock_source"] == "post-batch probe x probe ratio"
    # lapis's kernel takes its bracket too (the batch's mean clock), its in-kernel probe (the last launch) beside it
    assert (cases["s18"]["clock_mhz"], cases["s18"]["clock_source"]) == (1512.0, "bracket probe")
    assert cases["s18"]["clock_probe_mhz"] == 1500.0
    from lapis.validate.timelines import cycles
    assert cycles(1000.0, cases["s18"])["clock"] == dict(mhz=1512.0, source="bracket probe", probe_mhz=1500.0)
    from lapis.validate.timelines import bracket_agreement
    assert bracket_agreement(tmp_path) == dict(median_ratio=1512.0 / 1500.0, min_ratio=1512.0 / 1500.0,
                                               max_ratio=1512.0 / 1500.0, rows=1)


@pytest.mark.parametrize("clock, words", [
    (dict(busy=None), "bracket_mhz, bracket_mhz_median and busy together"),
    (dict(bracket_mhz_median=None), "bracket_mhz, bracket_mhz_median and busy together"),
    (dict(busy=[0.99] * 4), "4 busy fractions"),
    (dict(bracket_mhz=[1420.0] * 6, busy=[0.99] * 6), "6 readings"),
    (dict(bracket_mhz_median=1500.0), "bracket_mhz_median is the median of bracket_mhz"),
    (dict(busy=[0.99, 0.99, -1.0, 0.99, 0.99]), "clock.busy"),
])
def test_the_race_reader_holds_the_bracket_clock_to_the_protocols_record(tmp_path, clock, words):
    k = _bracketed(_kernel(1700.0, 1700.0), 1420.0)
    k["round_median_us"] = [1700.0] * 5
    k["clock"].update(clock)
    for key in [key for key, v in clock.items() if v is None]:
        del k["clock"][key]
    d = _race(tmp_path, [{"shape": "8x16x4096x128", "causal": False, "flops": 1.1e12, "kernels": {"cudnn": k}}])
    with pytest.raises(CaptureError) as e:
        read_race(d)
    assert words in str(e.value) and "kernels.cudnn.clock" in str(e.value)


@pytest.mark.parametrize("bad", [0.0, 99.0, float("nan")])
def test_a_bracket_clock_that_is_no_sm_clock_is_refused(bad):
    with pytest.raises(CaptureError, match="cudnn.clock.bracket_mhz_median"):
        _third_party_clock(_bracketed(_kernel(1700.0, 1700.0), bad), None, "cudnn")


@pytest.mark.parametrize("clock, words", [
    (dict(busy=[5.0] * 5), "clock.busy = [5.0, 5.0, 5.0, 5.0, 5.0]"),
    (dict(bracket_mhz=[1e9, 1e9, 1420.0, 1e-6, 1e-6]), "clock.bracket_mhz[0] = 1000000000.0"),
])
def test_a_busy_fraction_above_one_or_a_reading_that_is_no_sm_clock_is_refused(tmp_path, clock, words):
    # the timed launches sit inside their bracket (busy <= 1.01); each round's reading is an SM clock, not only
    # the median (1420 here)
    k = _bracketed(_kernel(1700.0, 1700.0), 1420.0)
    k["clock"].update(clock)
    _race(tmp_path, [{"shape": "8x16x4096x128", "causal": False, "flops": 1.1e12, "kernels": {"cudnn": k}}])
    with pytest.raises(CaptureError) as e:
        measured_cases(tmp_path)
    assert words in str(e.value) and "race/h200-test: results[0]" in str(e.value)


def test_a_lapis_kernel_with_a_sampled_clock_keeps_no_probe_beside_its_bracket(tmp_path):
    _race(tmp_path, [{"shape": "8x16x4096x128", "causal": False, "flops": 1.1e12,
                      "kernels": {"attn_s18_bar_hoist_s2_n128_c2": _bracketed(_kernel(1760.0, 1650.0), 1512.0)}}])
    (case,) = measured_cases(tmp_path)
    assert (case["clock_mhz"], case["clock_source"]) == (1512.0, "bracket probe") and "clock_probe_mhz" not in case


def test_a_json_integer_past_a_floats_range_is_refused_by_name(tmp_path):
    k = _bracketed(_kernel(1700.0, 1700.0), 1420.0)
    k["clock"]["busy"] = [10**400] * 5
    d = _race(tmp_path, [{"shape": "8x16x4096x128", "causal": False, "flops": 1.1e12, "kernels": {"cudnn": k}}])
    with pytest.raises(CaptureError, match="positive finite number"):
        read_race(d)
