"""CPU checks of the microbenchmark runner (lapis/gpu/capture_micro.py): constants against lapis, the
campaign's statistics and sizes, and the watchdog that turns a hung measurement into a recorded timeout."""

import json
import re
import sys
import time

import numpy as np
import pytest

from lapis.gpu import capture_micro, gen_micro_wgmma
from lapis.model import micro_campaign as mc
from lapis.layouts.canonical import canonical_layout
from lapis.layouts.descriptors.sm90 import descriptor_for
from lapis.layouts.tma.rules import check


def test_wgmma_descriptors_are_lapis_descriptors():
    a = descriptor_for(canonical_layout("K", "128B", "bf16", 64, 64), base=0).encode()
    assert capture_micro.DESC_A == a
    for n in mc.WGMMA_N:
        b = descriptor_for(canonical_layout("K", "128B", "bf16", n, 64), base=capture_micro.WGMMA_B_OFFSET).encode()
        assert capture_micro.DESC_B[n] == b, n
    # A tile (64 rows x 128 B) ends where B starts
    assert canonical_layout("K", "128B", "bf16", 64, 64).footprint_bytes == capture_micro.WGMMA_B_OFFSET


def test_tma_tensor_maps_pass_lapis_encode_rules():
    for source in ("l2", "hbm"):
        for box in mc.TMA_BOX_BYTES:
            case = capture_micro.tensor_map_case(source, box)
            assert case["box"][0] * 2 == 128 and case["box"][0] * case["box"][1] * 2 == box
            assert check(dict(case, addr_offset=0), 90) == [], (source, box)


def test_generated_wgmma_kernels_are_the_committed_file():
    assert gen_micro_wgmma.OUT.read_text() == gen_micro_wgmma.generate()


def test_campaign_names_are_unique_and_sizes_fit():
    items = mc.items(132)
    names = [m["name"] for m in items]
    assert len(names) == len(set(names))
    tma = [m for m in items if m["kind"].startswith("tma")]
    assert len(tma) == 2 * 2 * (4 * 4 - 1)  # source x SMs x (box x depth, less 32 KiB x 8 over the ring)
    for m in tma:
        p = m["params"]
        assert p["depth"] * p["box_bytes"] + 1024 <= 227 * 1024
        assert p["bytes"] == p["ctas"] * p["loads"] * p["box_bytes"]
    hbm_all = [m["params"]["bytes"] for m in tma if m["name"].startswith("tma.hbm.all")]
    assert min(hbm_all) > 4 * 50e6  # more than 4x the 50 MB L2 per launch
    lat = [m for m in tma if m["kind"] == "tma_lat"]
    assert {(m["params"]["ctas"], m["params"]["depth"]) for m in lat} == {(1, 1)}


def test_stats_median_and_iqr_by_hand():
    s = mc.stats([10.0, 12.0, 11.0, 13.0, 9.0])
    # sorted 9..13: median 11, q1 10, q3 12 -> IQR 2 -> 18.18 %
    assert s["median"] == 11.0 and abs(s["spread_pct"] - 100 * 2 / 11) < 1e-12 and s["n"] == 5


def test_derive_units():
    m = dict(kind="tma_bw", params=dict(bytes=2_000_000), raw=dict(span_ns=[1000.0]))
    assert mc.derive(m) == [2000.0]  # B/ns
    m = dict(kind="rate", params=dict(work_per_cta=8192), raw=dict(cycles=[64.0], ns=[32.0]))
    assert mc.derive(m) == [128.0] and mc.clock_ghz(m) == [2.0]
    m = dict(kind="tma_lat", params=dict(loads=4), raw=dict(cta_ns=[2400.0]))
    assert mc.derive(m) == [600.0]
    assert mc.wgmma_flop(256) == 524288


CHILD = r'''
import json, sys, time
from pathlib import Path
work, start = Path(sys.argv[1]), int(sys.argv[sys.argv.index("--start") + 1])
for i in range(start, 4):
    (work / "progress").write_text(str(i))
    if i == 1:
        time.sleep(60)  # a hung bar.sync
    if i == 2:
        (work / f"res_{i}.json").write_text(json.dumps(dict(status="fault", error="illegal instruction")))
        sys.exit(3)
    (work / f"res_{i}.json").write_text(json.dumps(dict(status="ok")))
'''


class HangClock:
    """capture_micro's clock, running `step` s ahead at each reading while the child sits at item 1 (its hung
    bar.sync): the watcher's item timeout and budget fire on the hang, however slowly the machine starts the child."""

    sleep = staticmethod(time.sleep)

    def __init__(self, work, step: float):
        self.work, self.step, self.offset = work, step, 0.0

    def time(self) -> float:
        progress = self.work / "progress"
        if progress.exists() and progress.read_text() == "1":
            self.offset += self.step
        return time.time() + self.offset


def test_a_hung_measurement_becomes_a_timeout_and_the_run_goes_on(tmp_path, monkeypatch):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    monkeypatch.setattr(capture_micro, "time", HangClock(tmp_path, 100.0))
    capture_micro.run_watched(4, [sys.executable, str(script), str(tmp_path)], tmp_path, lambda m: None,
                              item_timeout_s=20.0, deadline=time.time() + 1e6)
    status = [json.loads((tmp_path / f"res_{i}.json").read_text())["status"] for i in range(4)]
    assert status == ["ok", "timeout", "fault", "ok"]


def test_the_budget_stops_the_run(tmp_path, monkeypatch):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    monkeypatch.setattr(capture_micro, "time", HangClock(tmp_path, 1000.0))  # the budget passes during the hang
    capture_micro.run_watched(4, [sys.executable, str(script), str(tmp_path)], tmp_path, lambda m: None,
                              item_timeout_s=1e6, deadline=time.time() + 500)
    assert json.loads((tmp_path / "res_1.json").read_text())["status"] == "timeout"
    assert not (tmp_path / "res_2.json").exists() and not (tmp_path / "res_3.json").exists()


def test_sampler_window_summarises_its_own_samples():
    s = capture_micro.Sampler.__new__(capture_micro.Sampler)
    s.fields = capture_micro.Sampler.FIELDS
    s.samples = [(t, [str(1700 + t), "1980", str(300 + t), "40", "0x0"]) for t in np.arange(0.0, 2.0, 0.05)]
    w = s.window(1.0, 1.2)
    assert w["sm_clock_mhz"]["min"] == 1700 + 0.95 and w["sm_clock_mhz"]["max"] == 1700 + 1.25
    assert w["clock_event_reasons"] == ["0x0"]


def test_sampler_reads_nvidia_smi_timestamps():
    import io
    s = capture_micro.Sampler.__new__(capture_micro.Sampler)
    s.fields, s.samples = capture_micro.Sampler.FIELDS, []
    s.proc = type("P", (), {"stdout": io.StringIO("2026/11/29 12:00:00.250, 1755, 1980, 650.5, 55, 0x0000000000000004\n"
                                                  "garbage\n")})()
    s._read()
    import datetime
    t = datetime.datetime(2026, 11, 29, 12, 0, 0, 250000).timestamp()
    assert s.samples == [(t, ["1755", "1980", "650.5", "55", "0x0000000000000004"])]
    w = s.window(t - 0.01, t + 0.01)
    assert w["power_w"]["median"] == 650.5 and w["clock_event_reasons"] == ["0x0000000000000004"]


def test_v2_campaign_names_sizes_and_spread_coverage():
    v2 = mc.items_v2(132)
    names = [m["name"] for m in mc.all_items(132)]
    assert len(names) == len(set(names)) and len(v2) == 3 * 2 + 2 + 4
    assert 25e6 < mc.TMA_TENSOR_BYTES["l2spread"] < 50e6  # more than half of the 50 MB L2, less than all of it
    for m in v2:
        p = m["params"]
        tiles = mc.TMA_TENSOR_BYTES["l2spread"] // p["box_bytes"]
        if m["kind"] == "tma_bw":
            assert p["bytes"] == p["ctas"] * p["loads"] * p["box_bytes"]
            starts = p["cta_stride"] * (np.arange(132) // p["group"])
            covered = np.zeros(tiles, bool)  # the untimed warm-up launch reads every tile: all are resident
            for s in starts:
                covered[(s + np.arange(p["loads"])) % tiles] = True
            assert covered.all() and starts.max() < tiles, m["name"]
            assert len(set(starts)) == 132 // p["group"]
        else:
            assert capture_micro.MIX_OPERAND_BYTES + p["depth"] * p["box_bytes"] + 1024 <= 227 * 1024
            assert p["work_per_cta"] == 2 * p["iters"] * 8 * 2 * 64 * p["n"] * 16
    assert mc.MIX_REFERENCE in names


def test_v3_softmax_items_cover_every_flavour_at_one_and_two_warpgroups():
    v3 = mc.items_v3(132)
    assert {(m["params"]["flavour"], m["params"]["warpgroups"]) for m in v3} == {
        (f, w) for f in ("exp2f", "ex2", "ex2_cond", "emu8", "emu4") for w in (1, 2)}
    for m in v3:  # one 64 x 128 tile per warpgroup per iteration; 128 threads per warpgroup
        p = m["params"]
        assert m["kind"] == "rate" and p["threads"] == 128 * p["warpgroups"]
        assert p["work_per_cta"] == p["warpgroups"] * p["iters"] and p["ctas"] == 132
        assert capture_micro.source_of(m["kernel"]) == "micro_softmax_v1"
    assert abs(mc.SOFTMAX_SCALE_LOG2 - np.log2(np.e) / np.sqrt(128)) < 1e-15


def test_overlap_is_the_hidden_share_of_the_shorter_run():
    def rate(cycles):  # a rate measurement of one job per CTA taking `cycles`
        return dict(kind="rate", params=dict(work_per_cta=1), raw=dict(cycles=[cycles], ns=[cycles], distinct_sms=[1]))
    assert mc.overlap(rate(1000.0), rate(800.0), rate(1800.0)) == [0.0]  # serialized: the sum
    assert mc.overlap(rate(1000.0), rate(800.0), rate(1000.0)) == [1.0]  # the shorter one fully hidden
    assert mc.overlap(rate(1000.0), rate(800.0), rate(1400.0)) == [0.5]
    names = {m["name"] for m in mc.items_v3_mix(132)}
    assert names == {f"mixsm.{f}.{p}" for f in ("exp2f", "ex2_cond") for p in ("tensor", "softmax", "both")}


def test_v2_tensor_maps_and_kernel_sources():
    for box in mc.SPREAD_BOXES:
        case = capture_micro.tensor_map_case("l2spread", box)
        assert check(dict(case, addr_offset=0), 90) == [], box
    for m in mc.all_items(132):
        src = capture_micro.source_of(m["kernel"])
        text = (capture_micro.KERNEL_DIR / f"{src}.cu").read_text()
        kernel = m["kernel"].replace("micro_mix_wgmma_tma_n", "MIX_KERNEL(")
        if kernel.startswith("micro_softmax_"):  # MICRO_SOFTMAX(flavour, ...) defines both warpgroup counts
            kernel = f"MICRO_SOFTMAX({m['params']['flavour']}, "
        if kernel.startswith("micro_mixsm_"):
            kernel = f"MICRO_MIXSM({m['params']['flavour']}, "
        if kernel.startswith("micro_mixsm2_"):
            kernel = f"MICRO_MIXSM2({m['params']['flavour']}, "
        if kernel.startswith("micro_contend_"):
            kernel = f"MICRO_CONTEND({m['params']['flavour']}, "
        if kernel.startswith("micro_contend3_"):
            kernel = f"MICRO_CONTEND3({m['params']['flavour']}, "
        if kernel.startswith("micro_beside_"):
            kernel = f"MICRO_BESIDE({m['params']['cls']}, "
        if kernel.startswith("micro_density_"):  # micro_density_<class>_c<CH>: MICRO_DENSITY(<class>, ..., <CH>)
            cls, ch = kernel.removeprefix("micro_density_").rsplit("_c", 1)
            assert re.search(rf"^MICRO_DENSITY\({cls}, \w+, {ch}\)$", text, re.M), m["kernel"]
            kernel = f"MICRO_DENSITY({cls}, "
        if kernel.startswith("micro_sweep_"):  # micro_sweep_<class>_c<CH>: MICRO_SWEEP(<class>, ..., <CH>)
            cls, ch = kernel.removeprefix("micro_sweep_").rsplit("_c", 1)
            assert re.search(rf"^MICRO_SWEEP\({cls}, \w+, {ch}\)$", text, re.M), m["kernel"]
            kernel = f"MICRO_SWEEP({cls}, "
        if kernel.startswith("micro_chain_n128_"):  # micro_chain_n128_<src>_k<K>: MICRO_CHAIN(<src>, <K>, <0|1|2>)
            src_, k = kernel.removeprefix("micro_chain_n128_").rsplit("_k", 1)
            kernel = f"MICRO_CHAIN({src_}, {k}, {('ss', 'rs', 'pair').index(src_)})"
        if kernel.startswith("micro_tma_tile_"):  # micro_tma_tile_<set>: MICRO_TMA_TILE_FIXED(<set>, its boxes)
            (ac, ar), (bc, br), _ = mc.TILE_SETS[m["params"]["set"]]
            kernel = f"MICRO_TMA_TILE_FIXED({m['params']['set']}, {ac}, {ar}, {bc}, {br})"
        assert kernel in text, (m["kernel"], src)
    # the mix kernel's TMA ring starts after A (8 KiB) and the largest B (256 x 64 bf16)
    mix = (capture_micro.KERNEL_DIR / "micro_mix_v1.cu").read_text()
    assert "OPERAND_BYTES = 64 * 64 * 2 + 256 * 128;" in mix and capture_micro.MIX_OPERAND_BYTES == 8192 + 32768


def test_contend_items_pair_every_role_and_outlast_the_leader():
    items = mc.items_v3_contend(132)
    names = {m["name"] for m in items}
    # GEMM-only pairs once; the four pairs with a softmax per flavour
    assert names == ({"contend.exp2f.t", "contend.exp2f.tt"}
                     | {f"contend.{f}.{p}" for f in mc.SOFTMAX_FLAVOURS for p in ("s", "ss", "ts", "st")})
    ts = next(m for m in items if m["name"] == "contend.ex2_cond.ts")
    assert ts["kind"] == "contend" and ts["params"]["roles"] == 1 | (2 << 2)  # WG0 GEMM pair, WG1 softmax
    assert ts["params"]["threads"] == 256 and ts["params"]["follow_iters"] == 3072 and ts["params"]["iters"] == 1024
    m = dict(ts, raw=dict(cycles=[2048000.0], follower_rate=[0.001]))
    assert mc.derive(m) == [0.0005] and mc.follower_rate(m) == [0.001]


def test_turnover_gap_is_next_entry_minus_previous_exit_per_sm():
    # SM 0: CTAs [100, 1100] and [1300, 2300] (gap 200); SM 1: [0, 1000], [1150, 2150], [2250, 3250] (150, 100);
    # rows out of order
    rec = [[0, 0, 1300, 2300, 0], [0, 0, 0, 1000, 1], [0, 0, 100, 1100, 0], [0, 0, 2250, 3250, 1],
           [0, 0, 1150, 2150, 1]]
    got = capture_micro.turnover_gaps(rec)
    assert got["gap_ns"] == 150 and got["pairs"] == 3 and got["cta_ns"] == 1000 and got["distinct_sms"] == 2
    m = next(m for m in mc.all_items(132) if m["name"] == "launch.turnover")
    assert m["params"]["ctas"] == 16 * 132 and mc.derive(dict(m, raw=dict(gap_ns=[150.0]))) == [150.0]


def test_turnover_gaps_skip_ctas_that_never_wrote_and_empty_input():
    rec = [[0, 0, 0, 1000, 0], [0, 0, 1200, 2200, 0], [0, 0, 0, 0, 0]]  # the last never ran: all zeros
    got = capture_micro.turnover_gaps(rec)
    assert got["gap_ns"] == 200 and got["pairs"] == 1 and got["distinct_sms"] == 1
    empty = capture_micro.turnover_gaps([])
    assert empty["pairs"] == 0 and empty["gap_ns"] != empty["gap_ns"]  # NaN: the fit refuses it


def test_v4_beside_items_roles_and_sizing():
    """micro_beside_v1.cu's roles word: warpgroup 0 at bits 0-1, warpgroup 1 at 2-3 (1 wgmma, 2 the class), the wgmma
    mode at 4-5; the follower is sized to outlast the leader's window 6 times at its alone speed."""
    items = {m["name"]: m["params"] for m in mc.items_v4_beside(132)}
    assert len(items) == 3 + 4 * len(mc.BESIDE_CLASSES)
    assert items["beside.wgmma.rs"]["roles"] == 0b01_00_01 and items["beside.wgmma.rs"]["follow_iters"] == 0
    assert items["beside.ffma.alone"]["roles"] == 0b00_00_10
    p = items["beside.ex2.pair"]
    assert p["roles"] == 0b10_01_10 and p["iters"] == 300_000 // 512 and p["follow_iters"] == 1_800_000 // 1210
    for p in items.values():
        if p["follow"]:
            assert p["follow_iters"] * mc.BESIDE_UNIT_CYCLES[p["follow"]] >= 5 * mc.BESIDE_WINDOW_CYCLES


def _contend_item():
    return next(m for m in mc.items_v4_beside(132) if m["name"] == "beside.ffma.ss")


def _record(ctas=4):
    # clk0, clk1, ns0, ns1, smid, follower units at the flag, follower clock at the flag
    return np.array([[100, 1100, 0, 500, k, 50, 600] for k in range(ctas)], dtype=np.int64)


def test_contend_values_by_hand():
    v = capture_micro.contend_values(_record(), _contend_item()["params"])
    assert v == dict(cycles=1000.0, ns=500.0, distinct_sms=4, follower_rate=0.1)  # 50 units / 500 clk


def test_a_follower_record_of_zeros_fails_the_measurement():
    rec = _record()
    rec[2, 5:] = 0
    with pytest.raises(RuntimeError, match="never saw the leader's flag"):
        capture_micro.contend_values(rec, _contend_item()["params"])


def test_a_leader_record_of_zeros_fails_the_measurement():
    rec = _record()
    rec[1, :4] = 0  # an unwritten leader record: its window would be 0 cycles and its SM 0
    with pytest.raises(RuntimeError, match="leader's window is not after its start"):
        capture_micro.contend_values(rec, _contend_item()["params"])


def test_contend3_items_roles_and_sizes():
    items = {m["name"]: m["params"] for m in mc.items_v6_contend3(132)}
    assert len(items) == 31  # 7 states x 5 flavours, the GEMM-only state once
    sst, tss = items["contend3.ex2_cond.sst"], items["contend3.ex2_cond.tss"]
    assert sst["roles"] == 0b01_10_10 and sst["threads"] == 384 and sst["iters"] == 1536
    assert tss["roles"] == 0b10_10_01 and tss["iters"] == 2048
    assert sst["follow_iters"] == 8192 and tss["follow_iters"] == 4608  # the longer-lived follower role's count
    assert items["contend3.exp2f.s"]["roles"] == 0b10 and items["contend3.exp2f.s"]["follow_iters"] == 0


def test_v7_density_items_roles_sizes_and_source():
    """micro_beside_v2.cu: the class stream leads (role 2 at bits 0-1), wgmma from shared memory follows (1 at bits
    2-3, mode 0); the follower outlasts 6 leader windows at 512 cycles a unit; every kernel is in micro_beside_v2."""
    items = {m["name"]: m for m in mc.items_v7_density(132)}
    assert len(items) == 1 + 2 * 5  # wgmma alone; FFMA at 1-3 chains and FMNMX at 1-2, alone and beside
    assert items["density.wgmma.ss"]["params"]["roles"] == 0b01 and items["density.wgmma.ss"]["params"]["iters"] == 585
    ss = items["density.fmnmx_c2.ss"]
    assert ss["kernel"] == "micro_density_fmnmx_c2" and ss["kind"] == "contend"
    assert ss["params"]["roles"] == 0b00_01_10 and ss["params"]["chains"] == 2
    assert ss["params"]["iters"] == 6250 and ss["params"]["follow_iters"] == 3515
    assert items["density.ffma_c3.alone"]["params"]["roles"] == 0b10 and items["density.ffma_c3.alone"]["params"][
        "follow_iters"] == 0
    assert {capture_micro.source_of(m["kernel"]) for m in items.values()} == {"micro_beside_v2"}


def test_v9_sweep_items_run_version_7_states_at_more_chains():
    """micro_beside_v3.cu: version 7's roles and sizes (so its rows compare with version 7's) at FFMA 4-8 chains and
    FMNMX 3-4, every kernel in micro_beside_v3, no name shared with version 7."""
    items = {m["name"]: m for m in mc.items_v9_sweep(132)}
    assert len(items) == 1 + 2 * 7  # wgmma alone; FFMA at 4-8 chains and FMNMX at 3-4, alone and beside
    v7 = {m["name"]: m for m in mc.items_v7_density(132)}
    ss, ss7 = items["sweep.ffma_c6.ss"], v7["density.ffma_c2.ss"]
    assert ss["kernel"] == "micro_sweep_ffma_c6" and ss["params"]["chains"] == 6
    assert {k: v for k, v in ss["params"].items() if k != "chains"} == {
        k: v for k, v in ss7["params"].items() if k != "chains"}
    assert items["sweep.wgmma.ss"]["params"] == v7["density.wgmma.ss"]["params"]
    assert items["sweep.fmnmx_c4.alone"]["params"]["roles"] == 0b10
    assert {capture_micro.source_of(m["kernel"]) for m in items.values()} == {"micro_beside_v3"}
    assert not set(items) & set(v7) and all(n.startswith("sweep.") for n in items)


def test_contend3_values_by_hand():
    p = next(m for m in mc.items_v6_contend3(132) if m["name"] == "contend3.ex2.sst")["params"]
    assert capture_micro.contend_words(p) == 9
    rec = np.array([[100, 1100, 0, 500, k, 50, 600, 30, 400] for k in range(3)], dtype=np.int64)
    v = capture_micro.contend_values(rec, p)
    assert v == dict(cycles=1000.0, ns=500.0, distinct_sms=3, follower_rate=0.1, follower2_rate=0.1)
    rec[1, 7] = 0  # the second follower never saw the flag
    with pytest.raises(RuntimeError, match="never saw the leader's flag"):
        capture_micro.contend_values(rec, p)


def test_a_truncated_result_file_is_a_fault_not_a_lost_campaign(tmp_path):
    f = tmp_path / "res_0.json"
    f.write_text(json.dumps(dict(status="ok", raw=dict(cycles=[1.0] * 11)))[:20])
    res = capture_micro.read_result(f)
    assert res["status"] == "fault" and "res_0.json unreadable" in res["error"]
    assert capture_micro.read_result(tmp_path / "res_1.json")["status"] == "skipped"
    f.write_text("[1, 2]")
    assert capture_micro.read_result(f)["status"] == "fault"


def test_a_zero_cycle_window_is_a_fault_not_a_crash():
    m = dict(_contend_item(), status="ok", raw=dict(cycles=[1000.0, 0.0, 1000.0], ns=[1.0] * 3))
    capture_micro.finish(m)
    assert m["status"] == "fault" and "ZeroDivisionError" in m["error"] and "value" not in m
    m = dict(_contend_item(), status="ok", raw=dict(cycles=[1000.0, 1000.0, 2000.0], ns=[1.0] * 3))
    capture_micro.finish(m)
    assert m["status"] == "ok" and m["value"]["median"] == m["params"]["work_per_cta"] / 1000.0


def test_the_worker_writes_a_result_whole(tmp_path):
    capture_micro._write_result(tmp_path / "res_3.json", dict(status="ok"))
    assert json.loads((tmp_path / "res_3.json").read_text()) == dict(status="ok")
    assert [p.name for p in tmp_path.iterdir()] == ["res_3.json"]


def _contend3_params(name="contend3.ex2.sst"):
    return next(m for m in mc.items_v6_contend3(132) if m["name"] == name)["params"]


@pytest.mark.parametrize("rec, p, shape", [
    (_record(), _contend3_params(), "9 words per CTA (with params follow2): got shape (4, 7)"),
    (_record(), _contend3_params("contend3.exp2f.s"), "9 words per CTA (with params follow2): got shape (4, 7)"),
    (np.hstack([_record(), _record()[:, 5:]]), _contend_item()["params"],
     "7 words per CTA (without params follow2): got shape (4, 9)"),
    (_record()[:, :5], _contend_item()["params"], "7 words per CTA (without params follow2): got shape (4, 5)"),
    (_record()[0], _contend_item()["params"], "7 words per CTA (without params follow2): got shape (7,)"),
    (_record(0).reshape(0, 7), _contend_item()["params"], "7 words per CTA (without params follow2): got shape (0, 7)"),
])
def test_a_record_of_the_wrong_width_fails_the_measurement(rec, p, shape):
    """A version-6 record read as a version-5 one (or the reverse), a flat or empty one: the measurement fails
    (it raised an IndexError for a 7-word record with follow2, ignored a 9-word one's second follower, and gave
    NaN cycles for no CTA)."""
    with pytest.raises(RuntimeError) as exc:
        capture_micro.contend_values(rec, p)
    assert str(exc.value) == "a contend record is one row of " + shape


@pytest.mark.parametrize("col", [5, 7])
def test_a_follower_word_past_2_63_fails_the_measurement(col):
    """The device writes uint64 words; read as int64, a corrupt one past 2**63 is negative units at the flag: the
    measurement fails instead of reporting a negative follower rate."""
    rec = np.array([[100, 1100, 0, 500, k, 50, 600, 30, 400] for k in range(3)], dtype=np.uint64)
    rec[1, col] = 2**64 - 50
    with pytest.raises(RuntimeError) as exc:
        capture_micro.contend_values(rec.astype(np.int64), _contend3_params())
    assert str(exc.value) == "a follower's units at the flag are below zero: the record is corrupt"


def test_a_tile_timing_of_zero_or_below_is_a_fault_and_the_depth_fits_the_kernel():
    item = next(m for m in mc.items_v10_tile(132) if m["name"] == "tmatile.sw128.fixed.one.d2")
    for ns in ([0.0] * 3, [-5.0, 60000.0, 60000.0]):
        m = dict(item, status="ok", raw=dict(cta_ns=ns, cycles=[1.0] * 3))
        capture_micro.finish(m)
        assert m["status"] == "fault" and "value" not in m
    m = dict(item, status="ok", raw=dict(cta_ns=[60704.0] * 3, cycles=[1.2e5] * 3))
    capture_micro.finish(m)
    assert m["status"] == "ok" and m["value"]["median"] == 60704.0 / 64
    text = (capture_micro.KERNEL_DIR / "micro_tma_v3.cu").read_text()
    assert f"constexpr uint32_t MAX_DEPTH = {capture_micro.MAX_TILE_DEPTH};" in text
    assert max(m["params"]["depth"] for m in mc.items_v10_tile(132)) <= capture_micro.MAX_TILE_DEPTH
