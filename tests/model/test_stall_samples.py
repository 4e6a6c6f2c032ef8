"""lapis.model.stall_samples on the committed H200 source pages: s19's (diagnostic/h200-2026-12-02-s19-source), s26's
(diagnostic/h200-2026-12-04-s26-source) and FA4's sm90 forward (ncu/h200-2026-12-02-source), all at 8x16x4096x128
non-causal, and the L2 bytes of ncu/h200-2026-12-02-layout's FA4 runs."""

import json

import pytest

from lapis.data import CAPTURES
from lapis.errors import CaptureError
from lapis.model import stall_samples as ss

S19 = CAPTURES / "diagnostic" / "h200-2026-12-02-s19-source"
S26 = CAPTURES / "diagnostic" / "h200-2026-12-04-s26-source"
FA4 = CAPTURES / "ncu" / "h200-2026-12-02-source"
TILES_PER_SM = 8 * 16 * 32 * 32 / 132  # K/V-tile iterations of 8x16x4096x128 over the H200's 132 SMs


def cycles_per_tile(capture, kernel):
    metrics = json.loads((capture / "manifest.json").read_text())["kernels"][kernel]["metrics"]
    return metrics["sm__cycles_elapsed.max"]["value"] / TILES_PER_SM


def parts(capture, kernel):
    loop = ss.hot_loop(ss.read_page(capture / f"{kernel}_source.csv.gz"))
    return ss.segments(loop, cycles_per_tile(capture, kernel)), loop


def test_the_hot_loops_are_the_kv_tile_loops_with_two_gemm_groups():
    for capture, kernel, count in ((S19, "s19", 1015808), (FA4, "fa4", 1015808), (S26, "s26", 1015584)):
        _, loop = parts(capture, kernel)
        assert sum(ins.opcode.startswith("HGMMA") for ins in loop) == 16
        assert max(ins.count for ins in loop) == count  # 126976 iterations x 8 consumer warps (s26: 126948)


def test_segments_add_up_to_the_cycles_of_a_tile():
    seg, _ = parts(S19, "s19")
    assert seg["before_turn"] + seg["turn"] + seg["softmax"] == pytest.approx(cycles_per_tile(S19, "s19"))
    assert 0 < seg["turn_wait"] < seg["turn"]


def test_s19_and_fa4_spend_the_same_cycles_on_the_softmax_side_and_s19_more_on_the_turn_wait():
    """Same softmax instruction stream (66 MUFU.EX2, 68 FMNMX, 32 F2FP a tile in both loops): its span differs by
    under 2%; s19's consumer waits about 170 cycles a tile longer at the turn's bar.sync (268 against 100)."""
    s19, _ = parts(S19, "s19")
    fa4, _ = parts(FA4, "fa4")
    assert s19["softmax"] == pytest.approx(fa4["softmax"], rel=0.02)
    assert 1700 < fa4["softmax"] < 1800
    assert s19["turn_wait"] - fa4["turn_wait"] > 150


def test_s26_still_waits_longer_than_fa4_at_the_turn_and_spends_less_on_its_softmax_side():
    """After s20..s26 the bar.sync wait is 212 cycles a tile (s19 271, FA4 100) while s26's softmax side is shorter
    than FA4's (1672 against 1739) and its turn without that wait about as long (617 against 606)."""
    s26, _ = parts(S26, "s26")
    s19, _ = parts(S19, "s19")
    fa4, _ = parts(FA4, "fa4")
    assert round(s26["turn_wait"]) == 212 and round(fa4["turn_wait"]) == 100 and round(s19["turn_wait"]) == 271
    assert round(s26["softmax"]) == 1672 and s26["softmax"] < fa4["softmax"]
    assert s26["turn"] - s26["turn_wait"] == pytest.approx(fa4["turn"] - fa4["turn_wait"], abs=12)


def kv_wait_share(loop):
    """The loop's samples stalled on the long scoreboard at each mbarrier try-wait's retry branch (the first BRA
    after a SYNCS.PHASECHK: the consumer waiting for a K or V tile to land), over all its samples."""
    waits = 0
    for i, ins in enumerate(loop):
        if ins.opcode.startswith("SYNCS.PHASECHK"):
            branch = next(b for b in loop[i + 1:] if b.opcode.startswith("BRA"))
            waits += branch.reasons.get("long_sb", 0)
    return waits / sum(ins.samples for ins in loop)


def test_s26_waits_for_its_kv_tiles_less_than_fa4_so_l2_traffic_is_not_fa4s_lead():
    """L2 slice traffic at 8x16x4096x128 is about twice FA4's for s26 (7.60 GB against 4.16 GB in one run; the K/V
    bytes 4096 CTAs of 128 Q rows request: 4096 x 2 MiB = 8.6 GB), with the same DRAM bytes. It does not set FA4's
    lead: s26's consumers wait for K/V tiles 1.7% of their loop samples (46 cycles a tile), FA4's 3.3% (87), and
    FA4 on B,H,S,D views moves 1.6 GB more through L2 at the same cycles (ncu/h200-2026-12-02-layout)."""
    s26_run = json.loads((S26 / "manifest.json").read_text())["kernels"]
    assert s26_run["s26"]["metrics"]["lts__t_bytes.sum"]["value"] == 7603691360.0
    assert s26_run["fa4"]["metrics"]["lts__t_bytes.sum"]["value"] == 4160510752.0
    dram = [s26_run[k]["metrics"]["dram__bytes_read.sum"]["value"] for k in ("s26", "fa4")]
    assert dram[0] == pytest.approx(dram[1], rel=0.001)
    _, s26 = parts(S26, "s26")
    _, fa4 = parts(FA4, "fa4")
    assert round(1000 * kv_wait_share(s26)) == 17 and round(1000 * kv_wait_share(fa4)) == 33
    layout = json.loads((CAPTURES / "ncu" / "h200-2026-12-02-layout" / "manifest.json").read_text())["kernels"]
    l2 = {k: layout[k]["metrics"]["lts__t_bytes.sum"]["value"] for k in ("fa4", "fa4_bhsd")}
    cycles = {k: layout[k]["metrics"]["sm__cycles_elapsed.avg"]["value"] for k in ("fa4", "fa4_bhsd")}
    assert l2["fa4_bhsd"] - l2["fa4"] > 1.6e9
    assert cycles["fa4_bhsd"] == pytest.approx(cycles["fa4"], rel=0.001)


def test_a_page_without_stall_samples_is_refused():
    with pytest.raises(CaptureError, match="stall-sample columns"):
        ss.read_page('"Address","Source","Instructions Executed"\n"0x10","  FADD R1, R2, R3","4"\n')


def test_a_page_without_executed_instructions_is_refused():
    page = ss.read_page('"Address","Source","Instructions Executed","Warp Stall Sampling (All Samples)"\n'
                        '"0x10","  FADD R1, R2, R3","0","0"\n')
    with pytest.raises(CaptureError, match="none executed"):
        ss.hot_loop(page)


def test_a_loop_without_a_gemm_turn_is_refused():
    loop = [ss.Sampled("FADD R1, R2, R3", "FADD", 8, 5, {"wait": 5})]
    with pytest.raises(CaptureError, match="BAR.SYNC, then HGMMAs, then a BAR.ARV"):
        ss.segments(loop, 100.0)


HEADER = '"Address","Source","Instructions Executed","Warp Stall Sampling (All Samples)","stall_barrier"\n'
TURN = [("BAR.SYNC.DEFER_BLOCKING R7, 0x100", 8, 4, 3), ("HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24", 8, 10, 0),
        ("BAR.ARV 0x1, 0x100", 8, 1, 0), ("FADD R1, R2, R3", 8, 5, 0)]


def page_text(rows):
    return HEADER + "".join(f'"0x{16 * i:x}","{src}","{n}","{s}","{b}"\n' for i, (src, n, s, b) in enumerate(rows))


def test_a_synthetic_turn_splits_its_samples_by_part():
    """20 samples over 100 cycles: 4 before the turn (the bar.sync, 3 of them on the barrier), 11 in the turn, 5 after."""
    seg = ss.segments(ss.hot_loop(ss.read_page(page_text(TURN))), 100.0)
    assert seg == pytest.approx(dict(before_turn=20.0, turn=55.0, softmax=25.0, turn_wait=0.0))


@pytest.mark.parametrize("cell", ["1,234", "n/a", "-", "12.5", "-4", "٣"])
def test_a_count_that_is_not_a_whole_number_is_refused_with_its_cell(cell):
    text = page_text(TURN).replace('"0x10","HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24","8"',
                                   f'"0x10","HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24","{cell}"')
    with pytest.raises(CaptureError, match="whole numbers of 0 or more") as e:
        ss.read_page(text)
    assert repr(cell) in str(e.value) and "row 3" in str(e.value)


def test_a_ragged_row_is_refused_not_dropped():
    """Dropping the cut BAR.SYNC row would move the turn's boundary and still return numbers."""
    text = page_text(TURN).replace('"8","4","3"\n', '"8"\n', 1)
    with pytest.raises(CaptureError, match="as many cells as its header") as e:
        ss.read_page(text)
    assert "row 2: 3 cells against 5" in str(e.value)


def test_malformed_csv_is_a_capture_error():
    with pytest.raises(CaptureError, match="well-formed CSV"):
        ss.read_page(page_text([("F" * 200_000, 8, 1, 0)] + TURN))


@pytest.mark.parametrize("cycles", [0, -5.0, float("nan"), float("inf"), True, None, "100"])
def test_cycles_per_iteration_must_be_a_finite_positive_number(cycles):
    loop = ss.hot_loop(ss.read_page(page_text(TURN)))
    with pytest.raises(CaptureError, match="finite number of cycles above 0"):
        ss.segments(loop, cycles)


def test_a_loop_without_samples_is_refused_not_read_as_zero_cycles():
    loop = ss.hot_loop(ss.read_page(page_text([(src, n, 0, 0) for src, n, _, _ in TURN])))
    with pytest.raises(CaptureError, match="0 samples"):
        ss.segments(loop, 100.0)


@pytest.mark.parametrize("order", [(0, 1, 3), (2, 1, 0, 3), (0, 2, 1, 3)])
def test_a_turn_out_of_order_is_refused(order):
    """No BAR.ARV; the BAR.ARV before the BAR.SYNC; the first HGMMA after the last BAR.ARV."""
    loop = ss.hot_loop(ss.read_page(page_text([TURN[i] for i in order])))
    with pytest.raises(CaptureError, match="BAR.SYNC, then HGMMAs, then a BAR.ARV"):
        ss.segments(loop, 100.0)


def test_broken_empty_and_oversized_files_are_capture_errors(tmp_path, monkeypatch):
    import gzip
    from lapis.model import sass
    raw = gzip.compress(page_text(TURN * 500).encode())
    corrupt = bytearray(raw)
    corrupt[40:len(raw) - 20:7] = bytes(b ^ 0x55 for b in corrupt[40:len(raw) - 20:7])
    files = {"cut.csv.gz": (raw[:len(raw) // 2], "readable gzip"), "corrupt.csv.gz": (bytes(corrupt), "readable gzip"),
             "empty.csv": (b"", "stall-sample columns"), "latin1.csv": (page_text(TURN).replace("FADD", "FADDé")
                                                                        .encode("latin-1"), "not UTF-8")}
    for name, (data, match) in files.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(CaptureError, match=match):
            ss.read_page(tmp_path / name)
    monkeypatch.setattr(sass, "MAX_TEXT_BYTES", 100)
    with pytest.raises(CaptureError, match="longer than 100 characters"):
        ss.read_page(page_text(TURN))
