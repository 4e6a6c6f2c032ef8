"""lapis.model.stall_samples on the committed H200 source pages: s19's (diagnostic/h200-2026-12-02-s19-source) and
FA4's sm90 forward (ncu/h200-2026-12-02-source), both at 8x16x4096x128 non-causal."""

import json

import pytest

from lapis.data import CAPTURES
from lapis.errors import CaptureError
from lapis.model import stall_samples as ss

S19 = CAPTURES / "diagnostic" / "h200-2026-12-02-s19-source"
FA4 = CAPTURES / "ncu" / "h200-2026-12-02-source"
TILES_PER_SM = 8 * 16 * 32 * 32 / 132  # K/V-tile iterations of 8x16x4096x128 over the H200's 132 SMs


def cycles_per_tile(capture, kernel):
    metrics = json.loads((capture / "manifest.json").read_text())["kernels"][kernel]["metrics"]
    return metrics["sm__cycles_elapsed.max"]["value"] / TILES_PER_SM


def parts(capture, kernel):
    loop = ss.hot_loop(ss.read_page(capture / f"{kernel}_source.csv.gz"))
    return ss.segments(loop, cycles_per_tile(capture, kernel)), loop


def test_the_hot_loops_are_the_kv_tile_loops_with_two_gemm_groups():
    for capture, kernel in ((S19, "s19"), (FA4, "fa4")):
        _, loop = parts(capture, kernel)
        assert sum(ins.opcode.startswith("HGMMA") for ins in loop) == 16
        assert {ins.count for ins in loop} >= {1015808}  # 126976 iterations x 8 consumer warps


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
