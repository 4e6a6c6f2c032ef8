"""Interleaved timeline rows (harness.cuh Timeline::record: record n of role r in slot 1 + r + R * n, one register-
or shared-memory cursor per role, no atomic) on a CPU: rows with holes convert and decode to the same events as
the same records recorded contiguously; one role's overflow is counted and costs no other role a record; counts
are records attempted; the anchors keep their fixed slots; the committed captures (recorded contiguously) read
exactly as before; the benchmarks size every role's share. Inputs are synthetic (no GPU results)."""

import re
from pathlib import Path

import numpy as np
import pytest

from lapis.captures.store import open_timelines, timeline_files
from lapis.errors import CaptureError
from lapis.gpu import attention_plan, bench_attention, bench_gemm, gemm_plan, harness
from tests.gpu.test_timeline_anchors import anchor, device_rows, interleaved_rows

C = 0x80  # completion bit
ROLES = ("producer", "consumer0", "consumer1")
OPS = ("start", "wait empty", "issue TMA", "wait full", "issue wgmma", "wait wgmma", "epilogue")
G0, C0 = 5_000_000_123_456, 9_000_000
# one CTA at 2 cycles per ns: per role, (cycles, op, k) in the role's order; consumer1 records least
PER_ROLE = {0: [(C0 + 2, 0, -1), (C0 + 40, 1 | C, 0), (C0 + 60, 2, 0), (C0 + 300, 1 | C, 1)],
            1: [(C0 + 10, 0, -1), (C0 + 90, 3 | C, 0), (C0 + 120, 4, 0), (C0 + 180, 5 | C, 0), (C0 + 400, 6, -1)],
            2: [(C0 + 12, 0, -1), (C0 + 500, 6, -1)]}
OPEN, CLOSE = (C0, G0), (C0 + 2_000, G0 + 1_000)


def contiguous(per_role):
    """The same records as the shared-cursor kernel wrote them: one row in time order, no holes."""
    recs = sorted((c, role, op, k) for role, rs in per_role.items() for c, op, k in rs)
    return device_rows([(OPEN, CLOSE, recs)], slots=2 + len(recs))


def without_ids(events):
    return sorted(tuple(sorted((k, v) for k, v in e.items() if k != "id")) for e in events)


def test_interleaved_rows_with_holes_decode_like_a_contiguous_recording():
    raw, counts = interleaved_rows([(OPEN, CLOSE, PER_ROLE)], slots=2 + 3 * 6, roles=3)
    assert counts.tolist() == [11]
    # record n of role r in slot 1 + r + 3 n: consumer1's second record in slot 6, its slots 9, 12, ... holes
    assert raw["role"][0, [1, 2, 3, 4, 5, 6]].tolist() == [0, 1, 2, 0, 1, 2] and raw["t_ns"][0, 6] == C0 + 500
    assert (raw["t_ns"][0, [9, 12, 15, 18]] == 0).all() and raw["t_ns"][0, 10] == C0 + 300
    rec, mhz = harness.anchored_to_ns(raw, counts)
    ref, ref_mhz = harness.anchored_to_ns(contiguous(PER_ROLE), counts)
    assert rec.shape == (1, 18) and mhz.tolist() == ref_mhz.tolist() == [2000.0]
    # compacted: the 11 records first, in slot order (each role's order kept), then 7 all-zero holes
    assert rec["role"][0, :11].tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 0, 1, 1]
    assert (rec[0, 11:] == np.zeros(7, harness.RECORD_DTYPE)).all()
    assert rec["t_ns"][0, :4].tolist() == [G0 + 1, G0 + 5, G0 + 6, G0 + 20]  # (cycles - C0) / 2 ns
    assert harness.written(rec, counts).sum() == 11
    got, want = harness.decode_timeline(rec, counts, ROLES, OPS), harness.decode_timeline(ref, counts, ROLES, OPS)
    assert len(got["events"]) == 8 and without_ids(got["events"]) == without_ids(want["events"])
    assert got["overflow"] == want["overflow"] == {} and got["t0_ns"] == want["t0_ns"] == G0 + 1
    wait_full = [e for e in got["events"] if e["op"] == "wait full"]
    assert [(e["role"], e["start_ns"], e["end_ns"]) for e in wait_full] == [("consumer0", 4, 44)]


def test_one_roles_overflow_is_counted_and_costs_no_other_role_a_record():
    # 9 record slots for 3 roles: 3 each; consumer0 attempts 5 (2 lost), the producer 4 (1 lost)
    raw, counts = interleaved_rows([(OPEN, CLOSE, PER_ROLE)], slots=2 + 9, roles=3)
    assert counts.tolist() == [11] and raw["op"][0, [0, -1]].tolist() == [0x7F, 0x7F]  # anchors kept their slots
    rec, _ = harness.anchored_to_ns(raw, counts)
    ok = harness.written(rec, counts)
    assert ok.sum() == 8  # producer 3 + consumer0 3 + consumer1 2
    assert np.bincount(rec["role"][ok], minlength=3).tolist() == [3, 3, 2]
    d = harness.decode_timeline(rec, counts, ROLES, OPS)
    assert d["overflow"] == {0: 3}  # 11 attempted - 8 written
    by_role = {r: [e["op"] for e in d["events"] if e["role"] == r] for r in ROLES}
    assert by_role == {"producer": ["wait empty", "issue TMA"], "consumer0": ["wait full", "issue wgmma"],
                       "consumer1": ["epilogue"]}  # every role's first records, consumer1 complete


def test_counts_are_records_attempted_and_written_reads_old_rows_as_their_prefix():
    """counts[cta] = records attempted, as before the interleaving; a contiguous row (the old kernels') has no
    hole within its count, so written() is the prefix min(counts, capacity) that decode used before."""
    raw = contiguous(PER_ROLE)
    rec, _ = harness.anchored_to_ns(raw, np.array([11], np.uint32))
    for n in (0, 4, 11, 15):
        assert harness.written(rec, np.array([n], np.uint32))[0].tolist() == [i < min(n, 11) for i in range(11)]
    d = harness.decode_timeline(rec, np.array([15], np.uint32), ROLES, OPS)
    assert d["overflow"] == {0: 4}  # 15 attempted, 11 slots: as counts - capacity gave before


def test_committed_captures_read_exactly_as_before():
    """Every saved row's written records are the prefix min(counts, capacity) (the old rule), so they decode
    to the same events as before the interleaving."""
    caps = Path(harness.__file__).parents[1] / "data" / "captures"
    files = timeline_files(caps)  # each .npz named, held packed (lapis.captures.store)
    assert files
    for f in files:
        with open_timelines(f) as z:
            tags = [k[:-len("records")] for k in z.files if k.endswith("records")]
            for t in tags:
                rec, counts = z[t + "records"], z[t + "counts"]
                prefix = np.arange(rec.shape[1])[None, :] < np.minimum(counts, rec.shape[1])[:, None]
                assert (harness.written(rec, counts) == prefix).all(), (f, t)


def test_role_slots_give_every_role_its_share():
    """Role r's share of C record slots at R roles: the n with r + R n < C (counted here by brute force)."""
    for per_role, roles in ((1, 1), (5, 3), (7, 2), (4, 8)):
        c = harness.role_slots(per_role, roles)
        shares = [sum(1 for n in range(c) if r + roles * n < c) for r in range(roles)]
        assert shares == [per_role] * roles, (per_role, roles)


def test_benchmarks_give_each_role_room_for_its_records():
    # gemm: producer 1 + 2 per K block, a consumer 2 + 3 per K block; K = 1024, block_k 64 -> 16 K blocks
    v = bench_gemm.VARIANTS["ws_s4_c2_n128"]
    kb = 1024 // bench_gemm.sim_params(v)["block_k"]
    assert bench_gemm.timeline_capacity(v, 1024) // 3 >= max(1 + 2 * kb, 2 + 3 * kb)
    # attention s5: a consumer warpgroup 3 + 11 per tile + 1 at 8 tiles; s4's producer 2 + 4 per tile
    assert bench_attention.timeline_capacity(bench_attention.VARIANTS["s5"], 1024) // 3 >= 3 + 11 * 8 + 1
    assert bench_attention.timeline_capacity(bench_attention.VARIANTS["s4"], 1024) // 3 >= 2 + 4 * 8
    assert bench_gemm.timeline_capacity(v, 1024) % 3 == 0 == bench_attention.timeline_capacity(
        bench_attention.VARIANTS["s5"], 1024) % 3


def test_role_codes_fit_the_rows_the_benchmarks_interleave():
    kernels = Path(harness.__file__).parent / "kernels"  # harness.cuh uses lapis_timeline.cuh's MAX_ROLES
    cuh = (kernels / "harness.cuh").read_text()
    assert "using lapis_tl::MAX_ROLES;" in cuh
    cuh += (kernels / "lapis_timeline.cuh").read_text()
    assert int(re.search(r"constexpr uint32_t MAX_ROLES = (\d+);", cuh)[1]) == harness.MAX_ROLES
    for plan_mod in (attention_plan, gemm_plan):
        plan = plan_mod.load()
        assert list(plan["roles"]) == list(plan_mod.ROLES) and 1 <= len(plan_mod.ROLES) <= harness.MAX_ROLES
        codes = {k: v for k, v in plan_mod.constants(plan).items() if k.startswith("ROLE_")}
        assert codes and max(codes.values()) < len(plan_mod.ROLES), codes


def test_a_timeline_without_its_role_count_is_refused():
    with pytest.raises(CaptureError, match="roles = 0"):
        harness.harness_args(None, 0x1000, 0x2000, 20)
    with pytest.raises(CaptureError, match="roles = 9"):
        harness.harness_args(None, 0x1000, 0x2000, 20, roles=9)
    assert int(harness.harness_args(None, 0, 0x2000, 0)["roles"]) == 0  # counts only, no rows: nothing to place


def test_holes_are_only_all_zero_records():
    """A record at t = 0 (hand-built or a clock that reads 0) is a record, not a hole."""
    rec = np.zeros((1, 3), harness.RECORD_DTYPE)
    rec[0, 0] = (0, 0, 0, -1, 0, 0, 0)
    rec[0, 1] = anchor(0, 0, 0, 0)
    assert harness.written(rec, np.array([3], np.uint32))[0].tolist() == [True, True, False]
