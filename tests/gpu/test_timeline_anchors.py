"""Timeline clock anchors (harness.cuh ANCHOR, harness.anchored_to_ns) on a CPU: device rows in %clock64 cycles
with hand-built anchors -> records in %globaltimer ns, anchors dropped, counts and overflow as before; both
benchmarks save the converted rows; the device and host constants agree; the cost microbenchmark builds and
its runner's arithmetic holds on a fake device. Inputs are synthetic (no GPU results)."""

import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from lapis.captures.store import open_timelines, timeline_files
from lapis.errors import CaptureError
from lapis.gpu import attention_plan, gemm_plan, harness, timeline_cost

KERNELS = Path(harness.__file__).parent / "kernels"
C = 0x80  # completion bit


def anchor(cycles: int, ns: int, cta: int, sm: int):
    """An anchor record as harness.cuh's anchor_record writes it: ns split low/high into work_item/k_index."""
    high = ns >> 32
    return (cycles, cta, ns & 0xFFFFFFFF, high - (1 << 32) if high >= 1 << 31 else high, sm, 0xFF, 0x7F)


def device_rows(ctas, slots):
    """RECORD_DTYPE [len(ctas), slots] as the kernel leaves it. ctas: [(open, close, [(cycles, role, op, k)])],
    open/close = (cycles, ns); records beyond the room (slots - 2) are dropped, as the cursor drops them."""
    raw = np.zeros((len(ctas), slots), harness.RECORD_DTYPE)
    for cta, (opening, closing, recs) in enumerate(ctas):
        raw[cta, 0] = anchor(*opening, cta, 10 + cta)
        raw[cta, -1] = anchor(*closing, cta, 10 + cta)
        for i, (c, role, op, k) in enumerate(recs[:slots - 2]):
            raw[cta, 1 + i] = (c, cta, 7, k, 10 + cta, role, op)
    return raw


def interleaved_rows(ctas, slots, roles):
    """RECORD_DTYPE [len(ctas), slots] and counts as the interleaving kernel leaves them. ctas: [(open, close,
    {role: [(cycles, op, k)]})]; record k of role r lands in slot 1 + r + roles * k while that is before the
    closing anchor's slot, else it is only counted; unreached slots stay zero (holes)."""
    raw = np.zeros((len(ctas), slots), harness.RECORD_DTYPE)
    counts = np.zeros(len(ctas), np.uint32)
    for cta, (opening, closing, per_role) in enumerate(ctas):
        raw[cta, 0] = anchor(*opening, cta, 10 + cta)
        raw[cta, -1] = anchor(*closing, cta, 10 + cta)
        for role, recs in per_role.items():
            counts[cta] += len(recs)
            for k, (c, op, kk) in enumerate(recs):
                if 1 + role + roles * k < slots - 1:
                    raw[cta, 1 + role + roles * k] = (c, cta, 7, kk, 10 + cta, role, op)
    return raw, counts


G0 = 5_000_000_123_456  # > 2^32 ns: the anchor's high word matters
C0 = 9_000_000
# CTA 0: 19800 cycles over 10000 ns (1980 MHz); CTA 1: 5000 cycles over 5000 ns (1000 MHz); 4 records each
CTAS = [((C0, G0), (C0 + 19_800, G0 + 10_000), [(C0 + 1, 0, 0, -1), (C0 + 3, 1, 0, -1), (C0 + 198, 0, 2, 0),
                                                 (C0 + 19_800, 1, 3 | C, 0)]),
        ((100, 7 << 32), (5_100, (7 << 32) + 5_000), [(100, 0, 0, -1), (2_600, 0, 1 | C, 0), (5_099, 0, 2, 0),
                                                      (5_100, 0, 1 | C, 1)])]


def test_cycles_map_to_ns_between_each_ctas_anchors():
    raw = device_rows(CTAS, slots=2 + 4)
    counts = np.array([4, 4], np.uint32)
    rec, mhz = harness.anchored_to_ns(raw, counts)
    assert rec.shape == (2, 4) and rec.dtype == harness.RECORD_DTYPE
    # CTA 0: ns = cycles * 10000 / 19800, rounded: 1 -> 0.505 -> 1, 3 -> 1.515 -> 2, 198 -> 100, 19800 -> 10000
    assert rec["t_ns"][0].tolist() == [G0 + 1, G0 + 2, G0 + 100, G0 + 10_000]
    # CTA 1: one cycle per ns, from its own anchors (its clock and globaltimer are not CTA 0's)
    assert rec["t_ns"][1].tolist() == [(7 << 32) + 0, (7 << 32) + 2_500, (7 << 32) + 4_999, (7 << 32) + 5_000]
    assert mhz.tolist() == [1980.0, 1000.0]
    assert (rec["op"] != harness.ANCHOR_OP).all() and (rec["role"] != harness.ANCHOR_ROLE).all()
    for f in ("cta", "work_item", "k_index", "sm", "role", "op"):  # everything but the time is the device's
        assert (rec[f] == raw[:, 1:-1][f]).all(), f


def test_an_overflowed_cta_keeps_both_anchors_and_its_overflow_count():
    raw = device_rows(CTAS, slots=2 + 3)  # 3 record slots: each CTA attempted 4
    counts = np.array([4, 9], np.uint32)
    assert raw["op"][:, -1].tolist() == [0x7F, 0x7F]  # the closing anchor has its own slot
    rec, mhz = harness.anchored_to_ns(raw, counts)
    assert rec.shape == (2, 3) and mhz.tolist() == [1980.0, 1000.0]
    assert rec["t_ns"][0].tolist() == [G0 + 1, G0 + 2, G0 + 100]
    d = harness.decode_timeline(rec, counts, ("producer", "consumer0"), ("start", "wait", "issue", "done"))
    assert d["overflow"] == {0: 1, 1: 6} and d["t0_ns"] == 7 << 32  # CTA 1 ran first


def test_slots_past_a_ctas_count_are_left_as_written():
    raw = device_rows(CTAS[:1], slots=2 + 6)
    rec, _ = harness.anchored_to_ns(raw, np.array([2], np.uint32))  # records 3 and 4 are past the count
    assert rec["t_ns"][0].tolist() == [G0 + 1, G0 + 2, C0 + 198, C0 + 19_800, 0, 0]


def test_converted_rows_decode_like_rows_recorded_in_ns():
    """A row recorded in cycles at 2 cycles/ns decodes to the same events as the same row recorded in ns."""
    ns_rows = [(1000, 0, 0, -1), (1064, 1, 0, -1), (1096, 0, 1 | C, 0), (1160, 0, 2, 0), (1800, 1, 3 | C, 0)]
    g0, c0 = 990, 40_000
    in_ns = np.zeros((1, 5), harness.RECORD_DTYPE)
    for i, (t, role, op, k) in enumerate(ns_rows):
        in_ns[0, i] = (t, 0, 7, k, 10, role, op)
    cycles = [(c0 + 2 * (t - g0), role, op, k) for t, role, op, k in ns_rows]
    raw = device_rows([((c0, g0), (c0 + 2 * 1000, g0 + 1000), cycles)], slots=7)
    counts = np.array([5], np.uint32)
    rec, mhz = harness.anchored_to_ns(raw, counts)
    assert (rec == in_ns).all() and mhz.tolist() == [2000.0]
    roles, ops = ("producer", "consumer0"), ("start", "wait empty", "issue TMA", "wait full")
    assert harness.decode_timeline(rec, counts, roles, ops) == harness.decode_timeline(in_ns, counts, roles, ops)


def test_a_row_without_anchors_or_with_a_stopped_clock_is_refused():
    raw = device_rows(CTAS, slots=6)
    bad = raw.copy()
    bad["op"][1, -1] = 2  # the kernel never ran finish for CTA 1 (or the buffer was sized without timeline_slots)
    with pytest.raises(CaptureError, match="CTA 1: first op 0x7f, last op 0x2"):
        harness.anchored_to_ns(bad, np.array([4, 4], np.uint32))
    stopped = raw.copy()
    stopped["t_ns"][0, -1] = stopped["t_ns"][0, 0]
    with pytest.raises(CaptureError, match="CTA 0: 0 cycles"):
        harness.anchored_to_ns(stopped, np.array([4, 4], np.uint32))
    with pytest.raises(CaptureError, match="two anchor slots"):
        harness.anchored_to_ns(raw[:, :1], np.array([0, 0], np.uint32))


def test_anchors_one_tick_apart_give_one_time_and_no_clock():
    raw = device_rows([((500, 64), (900, 64), [(700, 0, 0, -1)])], slots=3)
    rec, mhz = harness.anchored_to_ns(raw, np.array([1], np.uint32))
    assert rec["t_ns"].tolist() == [[64]] and np.isnan(mhz[0])


def test_slots_and_codes_agree_with_harness_cuh_and_the_plans():
    # harness.cuh takes the record encoding from the user header (using lapis_tl::...): the constants live there
    cuh = (KERNELS / "harness.cuh").read_text()
    assert "using lapis_tl::ANCHOR;" in cuh and "using lapis_tl::anchor_record;" in cuh
    cuh += (KERNELS / "lapis_timeline.cuh").read_text()
    assert int(re.search(r"constexpr uint8_t ANCHOR = (0x[0-9A-Fa-f]+);", cuh)[1], 16) == harness.ANCHOR_OP == 0x7F
    assert int(re.search(r"constexpr uint32_t ANCHOR_SLOTS = (\d+);", cuh)[1]) == harness.ANCHOR_SLOTS == 2
    assert int(re.search(r"constexpr uint8_t ANCHOR_ROLE = (0x[0-9A-Fa-f]+);", cuh)[1], 16) == harness.ANCHOR_ROLE
    assert "r.role = ANCHOR_ROLE;" in cuh and harness.ANCHOR_ROLE == 0xFF
    assert harness.timeline_slots(77) == 79
    for plan in (attention_plan.load(), gemm_plan.load()):  # no kernel op or role collides with the anchor's
        assert len(plan["ops"]) <= 0x7F and len(plan["roles"]) < 0xFF
    src = (KERNELS / "timeline_cost.cu").read_text()
    assert int(re.search(r"constexpr int FMA_CHAIN = (\d+);", src)[1]) == timeline_cost.FMA_CHAIN


def test_committed_captures_hold_no_anchor_records():
    """Saved timelines are in ns with the anchors dropped (the format from before the anchors)."""
    caps = Path(harness.__file__).parents[1] / "data" / "captures"
    files = timeline_files(caps)  # each .npz named, held packed (lapis.captures.store)
    assert files
    for f in files:
        with open_timelines(f) as z:
            ops = [z[k]["op"] for k in z.files if k == "records" or k.endswith("/records")]
        assert ops and all(((o & 0x7F) != harness.ANCHOR_OP).all() for o in ops), f


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_timeline_cost_kernels_build_without_spills(kernel_cache):
    _, report = harness.build(timeline_cost.KERNEL, {}, kernel_cache)
    assert {f"timeline_cost_{m}" for m in timeline_cost.MODES} <= set(report)
    for name, r in report.items():
        assert r["spill_stores"] == r["spill_loads"] == 0 == r["stack_bytes"], (name, r)


def test_timeline_cost_without_a_gpu_says_what_it_needs(tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "gpu_present", lambda: False)
    assert timeline_cost.main(["--out", str(tmp_path)]) == 2
    with pytest.raises(SystemExit):
        timeline_cost.main(["--out", str(tmp_path), "--warps", "33"])


class _Device:
    """Stands in for a cupy array: .get() gives the host copy."""

    def __init__(self, a):
        self.a = a

    def get(self):
        return self.a


def test_bench_attention_saves_ns_records_and_each_ctas_clock():
    from lapis.gpu import bench_attention as ba
    raw = device_rows(CTAS, slots=harness.timeline_slots(4))
    worker = SimpleNamespace(timelines={})
    summary = ba.Worker.keep_timeline(worker, _Device(raw.view(np.uint8).ravel()),
                                      _Device(np.array([4, 4], np.uint32)), "s5_x", 4)
    z = worker.timelines
    assert z["s5_x/records"]["t_ns"][0].tolist() == [G0 + 1, G0 + 2, G0 + 100, G0 + 10_000]
    assert z["s5_x/cta_clock_mhz"].tolist() == [1980.0, 1000.0] and z["s5_x/counts"].tolist() == [4, 4]
    assert z["s5_x/cta_t_first_ns"].tolist() == [G0 + 1, 7 << 32] and summary["overflow"] == 0


def test_bench_gemm_saves_ns_records_and_each_ctas_clock(tmp_path):
    from lapis.gpu import bench_gemm
    raw = device_rows(CTAS, slots=harness.timeline_slots(4))
    counts = np.array([4, 4], np.uint32)
    rec, mhz = harness.anchored_to_ns(raw, counts)
    (tmp_path / "timelines").mkdir()
    plan = dict(roles=["producer", "consumer0"], ops=["start", "wait empty", "issue TMA", "wait full"])
    summary = bench_gemm._timeline(rec, counts, plan, tmp_path, "ws_x", mhz)
    with np.load(tmp_path / summary["file"]) as z:
        assert z["cta_clock_mhz"].tolist() == [1980.0, 1000.0]
        assert z["records"]["t_ns"][1].tolist() == [(7 << 32) + t for t in (0, 2_500, 4_999, 5_000)]
    assert summary["cta_span_us_median"] == pytest.approx((9_999 + 5_000) / 2 / 1e3)


class _FakeCupy:
    """Just enough of cupy for timeline_cost.measure: arrays by device pointer, and kernels that write the
    loop times (per mode: 40 ns per iteration + the mode's record cost, 2 cycles per ns) and, for the record
    modes, one anchored row with the warps' records interleaved (record_register_pair loses warp 0's last)."""

    uint8, uint32, uint64, float32 = np.uint8, np.uint32, np.uint64, np.float32
    EXTRA_NS = dict(none=0, globaltimer=90, clock64_atomic=80, clock64_register=30, record=12, record_pair=11,
                    record_register=10, record_register_pair=9)

    def __init__(self):
        self.arrays = {}
        self.cuda = SimpleNamespace(Device=lambda: SimpleNamespace(synchronize=lambda: None),
                                    runtime=SimpleNamespace(getDeviceProperties=lambda i: {"name": b"Fake H200"}))

    def zeros(self, n, dtype):
        a = _Device(np.zeros(n, dtype))
        a.data = SimpleNamespace(ptr=id(a))
        self.arrays[id(a)] = a
        return a

    def kernel(self, mode):
        def launch(grid, block, args):
            h, elapsed, iters = args[0], args[2], int(args[3])
            warps = block[0] // 32
            assert int(h["roles"]) == warps
            ns = iters * (40 + self.EXTRA_NS[mode])
            elapsed.a[:] = np.array([[ns, 2 * ns]] * warps, np.uint64).ravel()
            if mode.startswith("record"):
                n = warps * iters  # record k of warp w is the (k * warps + w)-th, 2 cycles apart
                per_role = {w: [(1000 + 2 * (k * warps + w + 1), 1, k) for k in range(iters)] for w in range(warps)}
                if mode == "record_register_pair":
                    per_role[0].pop()
                rows, counts = interleaved_rows([((1000, 7_000), (1000 + 2 * (n + 1), 7_000 + n + 1), per_role)],
                                                int(h["capacity"]), warps)
                self.arrays[int(h["timeline"])].a[:] = rows.view(np.uint8).ravel()
                self.arrays[int(h["counts"])].a[:] = counts
        return launch


def test_timeline_cost_reports_per_record_costs_against_the_baseline(monkeypatch):
    import sys
    cp = _FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(harness, "build", lambda src: ("cubin", {"timeline_cost_none": {}}))
    monkeypatch.setattr(harness, "load", lambda cubin: SimpleNamespace(
        get_function=lambda name: cp.kernel(name.removeprefix("timeline_cost_"))))
    r = timeline_cost.measure(iterations=50, warps_list=[1, 3], repeats=3)
    for w in ("1", "3"):
        rows = r["warps"][w]
        assert {m: rows[m]["ns_per_record"] for m in timeline_cost.MODES[1:]} == dict(
            globaltimer=90, clock64_atomic=80, clock64_register=30, record=12, record_pair=11, record_register=10,
            record_register_pair=9)
        assert rows["record"]["cycles_per_record"] == 24
        a = rows["record"]["rows"]
        n = 50 * int(w)
        assert a["clock_mhz"] == 2000.0 and a["records"] == a["counts"] == a["expected"] == n
        assert a["converted_span_ns"] == n - 1 and a["roles_in_order"]
        bad = rows["record_register_pair"]["rows"]  # warp 0 lost its last record
        assert bad["records"] == bad["counts"] == n - 1 and not bad["roles_in_order"]
        assert "rows" not in rows["clock64_atomic"]
    assert r["device"] == "Fake H200" and r["fma_chain"] == 16


def test_timeline_cost_lists_its_sources_and_writes_the_provenance(tmp_path, monkeypatch, capsys):
    import json

    from lapis.gpu import capture_tma
    assert timeline_cost.main(["--sources"]) == 0
    listed = capsys.readouterr().out.split()
    root = Path(harness.__file__).parents[2]
    assert "lapis/gpu/kernels/harness.cuh" in listed and all((root / p).exists() for p in listed)
    prov = tmp_path / "prov.json"
    prov.write_text(json.dumps(dict(commit="abc123", dirty=False)))
    monkeypatch.setattr(harness, "gpu_present", lambda: True)
    monkeypatch.setattr(timeline_cost, "measure", lambda iterations, warps, repeats: dict(warps={}, iterations=iterations))
    monkeypatch.setattr(capture_tma, "provenance", lambda git_file, argv, program: dict(
        json.loads(Path(git_file).read_text()), gpu="Fake H200", command=" ".join([program] + argv)))
    assert timeline_cost.main(["--out", str(tmp_path / "tc"), "--provenance", str(prov), "--iterations", "9"]) == 0
    r = json.loads((tmp_path / "tc" / "timeline_cost.json").read_text())
    assert r["provenance"]["commit"] == "abc123" and r["provenance"]["gpu"] == "Fake H200" and r["iterations"] == 9
    assert r["provenance"]["command"].startswith("python -m lapis.gpu.timeline_cost --out ")
