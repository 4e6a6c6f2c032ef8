"""The fit of the h200 profile from microbenchmark captures (lapis/model/fit.py), on synthetic captures.

The synthetic capture is built here from chosen hardware numbers (1.8 GHz, 4000 FLOP/clk, 90-cycle mbarrier
hops, 500 ns + box/20 B/ns TMA latency, ...): every expected profile value below is worked out by hand from
those numbers, never by the fit. Each repeat r scales its raw time by JITTER[r], so medians land on the chosen
numbers exactly and spread_pct = 100 * (1/0.99 - 1/1.01) = 2.0002 % for rates (values ~ 1/time).
"""

import json
import re

import pytest

from lapis.errors import CaptureError
from lapis.model import micro_campaign as mc
from lapis.model import fit

JITTER = (0.98, 0.99, 1.0, 1.01, 1.02)
CLOCK = 1.8  # GHz
RATE = {"wgmma.sustained": 4000.0, "fma.rate": 128.0, "ex2.rate": 16.0, "smem.read": 128.0, "mma_sync.rate": 2048.0}
CYCLES = {"mbarrier.pingpong": 90.0, "named_barrier.t256": 36.0, "wgmma.latency.n256.ss": 270.0,
          "timer.globaltimer": 9.0, "timer.clock64": 1.8}
ATTRS = dict(multiProcessorCount=132, sharedMemPerBlockOptin=232448, regsPerMultiprocessor=65536,
             l2CacheSize=62914560)


def tma_latency_ns(source, box):
    return (500.0 if source == "l2" else 800.0) + box / 20.0


def tma_bw(source, box, depth):  # B/ns; best: l2 box 32768 depth 4 = 9000, hbm box 16384 depth 8 = 4000
    best = {"l2": (32768, 4, 9000.0), "hbm": (16384, 8, 4000.0)}[source]
    return best[2] if (box, depth) == best[:2] else best[2] * 0.5 * depth / 8


def raw_for(m):
    p, k = m["params"], m["kind"]
    if k == "rate":
        true = RATE.get(m["name"], 100.0)
        cycles = [p["work_per_cta"] / true * j for j in JITTER]
        return dict(cycles=cycles, ns=[c / CLOCK for c in cycles])
    if k == "cycles":
        return dict(cycles=[CYCLES.get(m["name"], 50.0) * p["count"] * j for j in JITTER])
    if k == "tma_lat":
        return dict(cta_ns=[tma_latency_ns(p["source"], p["box_bytes"]) * p["loads"] * j for j in JITTER])
    return dict(span_ns=[p["bytes"] / tma_bw(p["source"], p["box_bytes"], p["depth"]) * j for j in JITTER])


def synthetic_results():
    ms = []
    for m in mc.items(132):
        ms.append(dict(m, status="ok", raw=raw_for(m)))
    return dict(device_attributes=ATTRS, repeats=len(JITTER), measurements=ms)


MICRO = "micro/h200-test/micro/results.json"


@pytest.fixture
def captures(tmp_path):
    root = tmp_path / "captures"
    (root / "micro/h200-test/micro").mkdir(parents=True)
    (root / MICRO).write_text(json.dumps(synthetic_results()))
    # kernel captures next to it: the fit must never read them
    for kind in ("gemm", "attention"):
        d = root / kind / "h200-test"
        d.mkdir(parents=True)
        (d / "manifest.json").write_text(json.dumps({"runs": [
            {"variant": "v1", "shape": "4096x4096x4096", "measured_us": 812.5, "events": [[0, 1.5], [32, 97.0]]}]}))
        (d / "results.json").write_text(json.dumps({"measured_ns": [1000.0, 1010.0], "spread_pct": 1.0}))
    man = json.loads(fit.MANIFEST.read_text())
    man["h200"]["captures"] = [MICRO]
    (tmp_path / "fit_manifest.json").write_text(json.dumps(man))
    return root, tmp_path / "fit_manifest.json"


def profile_text(captures):
    root, man = captures
    return fit.dumps(fit.fit_profile("h200", root, man))


def values(captures):
    return json.loads(profile_text(captures))["values"]


def test_fitted_values_equal_the_numbers_worked_out_by_hand(captures):
    v = values(captures)
    assert v["clock_ghz"]["value"] == 1.8
    assert v["tensor_flop_per_clk_sm"]["value"] == 4000
    assert v["fma_per_clk_sm"]["value"] == 128 and v["mufu_ex2_per_clk_sm"]["value"] == 16
    assert v["smem_bytes_per_clk_sm"]["value"] == 128 and v["mma_sync_flop_per_clk_sm"]["value"] == 2048
    assert v["sm_count"]["value"] == 132 and v["smem_bytes_per_block"]["value"] == 232448
    assert v["l2_bytes"] == dict(value=62914560, unit="B", source=v["l2_bytes"]["source"])
    assert v["l2_bytes"]["source"].endswith("device_attributes.l2CacheSize (cudaGetDeviceProperties)")
    # rates ~ 1/time: q1 = t/1.01, q3 = t/0.99
    assert v["fma_per_clk_sm"]["spread_pct"] == 2.0


def test_cycles_become_ns_through_the_fitted_clock(captures):
    v = values(captures)
    assert v["mbarrier_wake_ns"]["value"] == 50.0  # 90 cycles / 1.8 GHz
    assert v["named_barrier_ns"]["value"] == 20.0  # 36 / 1.8
    assert v["wgmma_latency_ns"]["value"] == 150.0  # 270 / 1.8
    assert v["globaltimer_read_ns"]["value"] == 5.0 and v["clock64_read_ns"]["value"] == 1.0
    # a latency ~ time: q1 = 0.99 t, q3 = 1.01 t -> 2 %
    assert v["mbarrier_wake_ns"]["spread_pct"] == 2.0


def test_tma_bandwidth_is_bytes_over_ns_in_tb_s_and_latency_is_the_zero_byte_intercept(captures):
    v = values(captures)
    assert v["l2_tb_s"]["value"] == 9.0  # 9000 B/ns = 9e12 B/s
    assert v["hbm_tb_s"]["value"] == 4.0
    assert "tma.hbm.all.box16384.d8" in v["hbm_tb_s"]["source"]
    assert v["tma_latency_ns"]["value"] == 500.0  # 500 ns + box / 20 B/ns
    assert v["tma_latency_hbm_ns"]["value"] == 800.0
    assert v["tma_latency_ns"]["unit"] == "ns" and v["hbm_tb_s"]["unit"] == "TB/s"


def test_every_simulator_key_keeps_its_unit_and_every_value_names_its_source(captures):
    current = json.loads((fit.PROFILES / "h200.json").read_text())["values"]
    v = values(captures)
    # the synthetic capture is v1 only: the keys only v2's l2share and mix measurements and v3's softmax ones give
    # are absent
    v3 = {f"softmax_tiles_per_clk_sm_{f}_wg{w}" for f in mc.SOFTMAX_FLAVOURS for w in (1, 2)}
    v3 |= {f"softmax_wgmma{k}_overlap_{f}" for f in mc.MIXSM_FLAVOURS for k in ("", "_pair")} & set(current)
    v3 |= {"gemm_pair_cycles", "gemm_pair_cycles_two_wgs"}  # the softmax states are not fitted (lapis.model.contend)
    v3 |= {"cta_turnover_ns"}
    v3 |= {f"bar_hop_cycles_{form}" for form in ("imm", "pred", "reg")} | {"bar_sync_present_cycles",
                                                                          "mbarrier_ready_wait_cycles"}  # v5
    assert set(current) - set(v) == {"l2_shared_tb_s", "tensor_flop_per_clk_sm_under_tma",
                                     "tma_bytes_per_ns_sm_under_wgmma", "tma_latency_under_wgmma_ns"} | v3
    for key, entry in current.items():
        if key in v:
            assert v[key]["unit"] == entry["unit"], key
    for key, entry in v.items():
        assert {"value", "unit", "source"} <= set(entry)
        if key in fit.DIRECT or key in fit.BANDWIDTH or key in fit.LATENCY:
            assert entry["source"].startswith(MICRO) and "spread_pct" in entry


def test_without_captures_the_datasheet_values_stay(tmp_path):
    man = json.loads(fit.MANIFEST.read_text())
    man["h200"]["captures"] = []
    (tmp_path / "m.json").write_text(json.dumps(man))
    prof = fit.fit_profile("h200", tmp_path, tmp_path / "m.json")
    assert prof["values"] == man["h200"]["datasheet"] and prof["fitted_from"] == {}


def test_doubling_every_kernel_capture_timing_leaves_the_profile_byte_identical(captures):
    root, _ = captures
    before = profile_text(captures)
    n = 0
    for kind in ("gemm", "attention"):
        for f in (root / kind).rglob("*.json"):
            text = f.read_text()
            doubled = re.sub(r"\d+\.?\d*", lambda m: repr(2 * float(m.group())), text)
            assert doubled != text
            f.write_text(doubled)
            n += 1
    assert n == 4
    assert profile_text(captures) == before


def test_the_manifest_cannot_name_a_kernel_capture(captures, tmp_path):
    root, man = captures
    spec = json.loads(man.read_text())
    for bad in ("gemm/h200-test/results.json", "attention/h200-test/results.json", "micro/../gemm/micro/results.json"):
        spec["h200"]["captures"] = [bad]
        man.write_text(json.dumps(spec))
        with pytest.raises(CaptureError, match="microbenchmark captures only"):
            fit.fit_profile("h200", root, man)


def _used_measurements(prof):
    return set(re.findall(r"(?:[a-z0-9_]+\.)+[a-z0-9_]+(?=[ ,)])", " ".join(
        e["source"].split(": ", 1)[1] for e in prof["values"].values() if e["source"].startswith(MICRO))))


def test_perturbing_any_single_measurement_the_fit_uses_changes_the_profile_values(captures):
    root, _ = captures
    base = json.loads(profile_text(captures))
    used = _used_measurements(base) & {m["name"] for m in mc.items(132)}
    assert len(used) >= 20  # the DIRECT keys, 2 best bandwidths, 8 one-box latencies
    original = (root / MICRO).read_text()
    for name in sorted(used):
        res = json.loads(original)
        m = next(x for x in res["measurements"] if x["name"] == name)
        key = next(iter(m["raw"]))
        m["raw"][key][2] *= 0.9  # one repeat of one measurement, the one at the median
        (root / MICRO).write_text(json.dumps(res))
        assert json.loads(profile_text(captures))["values"] != base["values"], name
    (root / MICRO).write_text(original)


def test_perturbing_any_byte_of_the_micro_capture_changes_the_profile(captures):
    root, _ = captures
    before = profile_text(captures)
    res = json.loads((root / MICRO).read_text())
    unused = next(m for m in res["measurements"] if m["name"] == "tma.l2.all.box4096.d1")
    unused["raw"]["span_ns"][0] += 1.0
    (root / MICRO).write_text(json.dumps(res))
    after = profile_text(captures)
    assert after != before and json.loads(after)["fitted_from"][MICRO].startswith("sha256:")


def test_output_is_deterministic_and_sorted(captures, tmp_path):
    root, man = captures
    out1, out2 = tmp_path / "a.json", tmp_path / "b.json"
    assert fit.main(["--captures", str(root), "--manifest", str(man), "--out", str(out1)]) == 0
    assert fit.main(["--captures", str(root), "--manifest", str(man), "--out", str(out2)]) == 0
    assert out1.read_bytes() == out2.read_bytes()
    keys = list(json.loads(out1.read_text())["values"])
    assert keys == sorted(keys)


def test_a_failed_measurement_leaves_the_datasheet_value(captures):
    root, _ = captures
    res = json.loads((root / MICRO).read_text())
    for m in res["measurements"]:
        if m["name"] == "ex2.rate":
            m.update(status="timeout", raw={})
    (root / MICRO).write_text(json.dumps(res))
    v = values(captures)
    assert v["mufu_ex2_per_clk_sm"]["value"] == 16 and v["mufu_ex2_per_clk_sm"]["source"].startswith("FA4 talk")


# ------------------------------------------------------------------------------ campaign version 2 --
# A second capture file with the v2 measurements (issue 6), chosen numbers: spread L2 7000 B/ns at box 16384
# depth 4 (3000 elsewhere), shared-box groups 8000 (g2) and 6000 (g4) B/ns; the GEMM-like mix
# (n128, box 16384, depth 4) at 1.5 GHz, 3200 FLOP/clk/SM and 60 B/ns of TMA per SM; the other mixes at
# 1.6 GHz, 3500 FLOP/clk, 50 B/ns. The v2 file also re-measures fma.rate at 64/clk: the later file wins.

MICRO2 = "micro/h200-test-v2/micro/results.json"


def raw_v2(m):
    p = m["params"]
    if m["kind"] == "mix":
        ref = m["name"] == mc.MIX_REFERENCE
        clock, rate, bpn = (1.5, 3200.0, 60.0) if ref else (1.6, 3500.0, 50.0)
        cycles = [p["work_per_cta"] / rate * j for j in JITTER]
        return dict(cycles=cycles, ns=[c / clock for c in cycles], tma_bytes_per_ns=[bpn * j for j in JITTER])
    if m["name"].startswith("tma.l2share."):
        bw = 8000.0 if p["group"] == 2 else 6000.0
    else:
        bw = 7000.0 if (p["box_bytes"], p["depth"]) == (16384, 4) else 3000.0
    return dict(span_ns=[p["bytes"] / bw * j for j in JITTER])


@pytest.fixture
def captures_v2(captures):
    root, man = captures
    ms = [dict(m, status="ok", raw=raw_v2(m)) for m in mc.items_v2(132)]
    fma = next(m for m in mc.items(132) if m["name"] == "fma.rate")
    ms.append(dict(fma, status="ok", raw=dict(cycles=[fma["params"]["work_per_cta"] / 64.0 * j for j in JITTER],
                                                      ns=[1.0] * 5)))
    (root / MICRO2).parent.mkdir(parents=True)
    (root / MICRO2).write_text(json.dumps(dict(device_attributes=ATTRS, repeats=5, measurements=ms)))
    spec = json.loads(man.read_text())
    spec["h200"]["captures"] = [MICRO, MICRO2]
    man.write_text(json.dumps(spec))
    return root, man


def test_v2_l2_is_the_spread_tensor_and_the_hot_spot_keeps_its_own_key(captures_v2):
    v = values(captures_v2)
    assert v["l2_tb_s"]["value"] == 7.0 and "tma.l2spread.all.box16384.d4" in v["l2_tb_s"]["source"]
    assert v["l2_tb_s"]["source"].startswith(MICRO2) and "not a hot spot" not in v["l2_tb_s"]["source"]
    assert v["l2_hotspot_tb_s"]["value"] == 9.0 and v["l2_hotspot_tb_s"]["source"].startswith(MICRO)
    assert v["l2_shared_tb_s"]["value"] == 8.0 and "g2" in v["l2_shared_tb_s"]["source"]
    assert v["hbm_tb_s"]["value"] == 4.0


def test_v2_clock_is_the_combined_load_clock_and_latencies_use_it(captures_v2):
    v = values(captures_v2)
    assert v["clock_ghz"]["value"] == 1.5 and mc.MIX_REFERENCE in v["clock_ghz"]["source"]
    assert v["clock_ghz_tensor_only"]["value"] == 1.8
    assert v["mbarrier_wake_ns"]["value"] == 60.0  # 90 cycles / 1.5 GHz
    assert v["wgmma_latency_ns"]["value"] == 180.0  # 270 / 1.5
    assert v["tensor_flop_per_clk_sm"]["value"] == 4000  # the peak stays wgmma.sustained's


def test_v2_mix_keys_have_units_sources_and_spreads(captures_v2):
    v = values(captures_v2)
    t, b = v["tensor_flop_per_clk_sm_under_tma"], v["tma_bytes_per_ns_sm_under_wgmma"]
    assert t["value"] == 3200 and t["unit"].startswith("FLOP/clk/SM") and t["spread_pct"] == 2.0
    assert b["value"] == 60 and b["unit"] == "B/ns per SM" and b["spread_pct"] == 2.0  # 60 * (1.01 - 0.99)
    assert t["source"].startswith(MICRO2 + ": " + mc.MIX_REFERENCE)
    # Little's law: the reference mix keeps 4 boxes of 16 KiB in flight; at 60 B/ns each spends 4 * 16384 / 60 ns
    lat = v["tma_latency_under_wgmma_ns"]
    assert lat["unit"] == "ns" and lat["value"] == pytest.approx(4 * 16384 / 60, rel=1e-3)


def test_the_later_capture_file_wins_per_measurement_name(captures_v2):
    v = values(captures_v2)
    assert v["fma_per_clk_sm"]["value"] == 64 and v["fma_per_clk_sm"]["source"].startswith(MICRO2 + ": fma.rate")
    assert set(json.loads(profile_text(captures_v2))["fitted_from"]) == {MICRO, MICRO2}


def test_v2_perturbing_any_used_measurement_of_either_file_changes_the_profile(captures_v2):
    root, _ = captures_v2
    base = json.loads(profile_text(captures_v2))["values"]
    names = {m["name"] for m in mc.all_items(132)}
    n = 0
    for rel in (MICRO, MICRO2):
        original = (root / rel).read_text()
        text = " ".join(e["source"].split(": ", 1)[1] for e in base.values() if e["source"].startswith(rel + ": "))
        used = set(re.findall(r"(?:[a-z0-9_]+\.)+[a-z0-9_]+(?=[ ,)])", text)) & names
        for name in sorted(used):
            res = json.loads(original)
            m = next(x for x in res["measurements"] if x["name"] == name)
            for series in m["raw"].values():
                series[2] *= 0.9  # the repeat at the median
            (root / rel).write_text(json.dumps(res))
            assert json.loads(profile_text(captures_v2))["values"] != base, name
            n += 1
        (root / rel).write_text(original)
    assert n == 9 + 2 + 8 + 4  # v1: 9 DIRECT names (fma.rate moved to v2), hbm, hot spot, 8 latencies; v2: 4


def test_bad_contend_and_launch_data_are_refused_by_name():
    from lapis.errors import CaptureError
    lead = dict(name="contend.exp2f.t", kind="contend", file="micro/x/micro/results.json",
                params=dict(iters=1024, work_per_cta=1024, lead="gemm", follow=None), raw=dict(cycles=[1.2e6] * 3))
    assert fit.contend_values({"contend.exp2f.t": lead})["gemm_pair_cycles"]["value"] == pytest.approx(1171.9, rel=1e-3)
    pair = dict(lead, name="contend.exp2f.tt", raw=dict(cycles=[2.1e6] * 3, follower_rate=[]))
    with pytest.raises(CaptureError, match="positive finite rates on both sides") as e:
        fit.contend_values({"contend.exp2f.tt": pair})
    assert "contend.exp2f.tt (follower)" in str(e.value)
    zero = dict(pair, raw=dict(cycles=[2.1e6] * 3, follower_rate=[0.0] * 3))
    with pytest.raises(CaptureError, match="positive finite rates"):
        fit.contend_values({"contend.exp2f.tt": zero})
    turn = dict(name="launch.turnover", kind="turnover", file="micro/x/micro/results.json",
                params=dict(what="gap"), raw=dict(gap_ns=[float("nan")] * 3))
    with pytest.raises(CaptureError, match="launch.turnover needs a gap"):
        fit.fit_values({"launch.turnover": turn}, {})


def test_a_fifo_or_damaged_results_file_is_a_capture_error_naming_it(tmp_path):
    import os
    rel = "micro/x/micro/results.json"
    (tmp_path / rel).parent.mkdir(parents=True)
    os.mkfifo(tmp_path / rel)  # opened non-blocking: the fit does not wait for a writer
    with pytest.raises(CaptureError, match="a capture the fit reads is a regular file .*not a regular file"):
        fit.load_captures(tmp_path, [rel])
    (tmp_path / rel).unlink()
    for text in ("{not json", '{"measurements": 3}', "[]"):
        (tmp_path / rel).write_text(text)
        with pytest.raises(CaptureError, match="a microbenchmark results.json holds"):
            fit.load_captures(tmp_path, [rel])


def _hop(**change):
    m = dict(name="bar.hop.reg.t384", kind="bar", file="micro/x/micro/results.json",
             params=dict(count=8192, what="cycles per GEMM-turn hand-over"), raw=dict(cycles=[289154.0] * 3))
    for k, v in change.items():
        m[k] = dict(m[k], **v)
    return {"bar.hop.reg.t384": m}


def test_a_bar_hand_over_is_its_cycles_per_count():
    v = fit.fit_values(_hop(), {})["bar_hop_cycles_reg"]
    assert v["value"] == pytest.approx(35.3, abs=0.01) and v["unit"] == "cycles"  # 289154 / 8192 = 35.297


@pytest.mark.parametrize("change, shown_value", [
    (dict(raw=dict(cycles=[-1000.0] * 3)), "cycles [-1000.0"),
    (dict(raw=dict(cycles=[0.0] * 3)), "cycles [0.0"),
    (dict(raw=dict(cycles=["289154"] * 3)), "cycles ['289154'"),
    (dict(raw=dict(cycles=[True] * 3)), "cycles [True"),
    (dict(raw=dict(cycles=[float("nan")] * 3)), "cycles [nan"),
    (dict(raw=dict(cycles=[])), "cycles []"),
    (dict(raw=dict(cycles=289154.0)), "cycles 289154.0"),
    (dict(params=dict(count=0)), "count 0"),
    (dict(params=dict(count="8192")), "count '8192'"),
    (dict(params=dict(count=True)), "count True"),
    (dict(params=dict(what=None)), "what None"),
])
def test_a_bad_bar_measurement_is_refused_by_name(change, shown_value):
    with pytest.raises(CaptureError, match="bar.hop.reg.t384 needs raw.cycles") as e:
        fit.fit_values(_hop(**change), {})
    assert shown_value in str(e.value) and "micro/x/micro/results.json" in str(e.value)


@pytest.mark.parametrize("bad", ["x", None, 1.5, True, 0, -5])
def test_a_device_attribute_that_is_not_a_whole_number_above_zero_is_a_capture_error(captures, bad):
    root, _ = captures
    doc = json.loads((root / MICRO).read_text())
    doc["device_attributes"]["l2CacheSize"] = bad
    (root / MICRO).write_text(json.dumps(doc))
    with pytest.raises(CaptureError, match=r"a device attribute is a whole number > 0 .*l2CacheSize"):
        values(captures)
