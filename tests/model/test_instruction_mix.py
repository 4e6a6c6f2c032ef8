"""lapis.model.instruction_mix: code regions of a kernel's SASS, their executed counts for a run, the committed mixes."""

import dataclasses
import shutil
from collections import Counter

import pytest

from lapis.errors import CaptureError
from lapis.model import instruction_mix as im
from lapis.model import sass


def _code(lines):
    return [sass.parse_instruction(text, 16 * k) for k, text in enumerate(lines)]


def test_a_wait_that_succeeds_skips_its_retry_path():
    code = _code(["SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R3", "@P0 BRA 0x40", "CS2R R4, SR_GLOBALTIMERLO",
                  "IADD3 R5, R4, R4, RZ", "FFMA R1, R2, R2, R2"])
    assert im.waits_slow_path(code) == {2, 3}
    code[1] = dataclasses.replace(code[1], predicate="!P0")  # a branch on the wait failing is not the fast path
    assert im.waits_slow_path(code) == set()


def test_a_wait_ptxas_separates_from_its_branch_keeps_its_retry_path():
    # s18's K_j wait: an IMAD.MOV between the TRYWAIT and its branch; WAIT_GAP 0 keeps that retry path counted
    code = _code(["SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R3", "IMAD.MOV.U32 R7, RZ, RZ, R6", "@P0 BRA 0x50",
                  "CS2R R4, SR_GLOBALTIMERLO", "IADD3 R5, R4, R4, RZ", "FFMA R1, R2, R2, R2"])
    assert im.WAIT_GAP == 0 and im.waits_slow_path(code) == set()
    del code[1]
    assert im.waits_slow_path(code) == {2, 3}


def test_a_wait_tested_early_skips_its_fallback_when_the_test_saw_the_tile():
    """s19: mbarrier.test_wait of K and V before the turn's bar.sync; after it, each wait is jumped over when its
    test's predicate is set, the second's search for its predicate passing the first's skipped wait and branch."""
    code = _code(["SYNCS.PHASECHK.TRANS64 P0, [UR26], R0",          # 0: test K
                  "SYNCS.PHASECHK.TRANS64 P1, [UR4], R6",           # 1: test V
                  "BAR.SYNC.DEFER_BLOCKING R7, 0x100",              # 2
                  "@P0 BRA 0x60",                                   # 3: K landed: skip 4, 5
                  "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR26], R0",  # 4
                  "@!P0 BRA 0x40",                                  # 5
                  "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR20], R24, gsb0",  # 6
                  "@P1 BRA 0xa0",                                   # 7: V landed: skip 8, 9
                  "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR18], R0",  # 8
                  "@!P0 BRA 0x80",                                  # 9
                  "HGMMA.64x128x16.F32.BF16 R88, R180, gdesc[UR16].tnspB, R88, gsb0"])  # 10
    assert im.waits_slow_path(code) == {4, 5, 8, 9}
    code[6] = dataclasses.replace(code[6], opcode="BRA", predicate="P2", target=0xa0)  # another branch in the way
    assert im.waits_slow_path(code) == {4, 5}


def test_an_early_test_before_a_loop_head_does_not_decide_the_branch_inside_the_loop():
    """From the second iteration on, P0 at the branch is the loop body's compare, not the test before the loop: the
    walk back stops at the loop head (a branch's target), so the retry wait is counted."""
    code = _code(["SYNCS.PHASECHK.TRANS64 P0, [UR26], R0",           # 0: test, before the loop
                  "FFMA R1, R2, R2, R2",                              # 1: loop head, target of 6
                  "@P0 BRA 0x40",                                     # 2
                  "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR26], R0",   # 3
                  "FFMA R1, R2, R2, R2",                              # 4: target of 2
                  "ISETP.GE.AND P0, PT, R1, R2, PT",                  # 5: P0 rewritten in the loop
                  "@P1 BRA 0x10",                                     # 6: back edge
                  "EXIT"])
    assert im.waits_slow_path(code) == set()
    code[6] = dataclasses.replace(code[6], target=0x20)  # the loop starts at the branch: the test is the writer
    assert im.waits_slow_path(code) == set()  # (2 is now a join from 6, which jumps nothing skipped)
    code[6] = dataclasses.replace(code[6], opcode="FFMA", predicate=None, target=None, dests=("R1",))  # no loop
    assert im.waits_slow_path(code) == {3}


def test_a_guarded_early_test_does_not_decide_the_branch():
    # @P3 may not run the test: P0 is then the ISETP's
    code = _code(["ISETP.GE.AND P0, PT, R1, R2, PT", "@P3 SYNCS.PHASECHK.TRANS64 P0, [UR26], R0", "@P0 BRA 0x50",
                  "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR26], R0", "FFMA R1, R2, R2, R2", "FFMA R1, R2, R2, R2"])
    assert im.waits_slow_path(code) == set()
    code[1] = dataclasses.replace(code[1], predicate=None)
    assert im.waits_slow_path(code) == {3, 4}


@pytest.mark.parametrize("target", [0x20, 0x0, 0x1000])  # itself, backward, outside the function
def test_a_branch_on_an_early_test_that_is_not_forward_skips_nothing(target):
    code = _code(["SYNCS.PHASECHK.TRANS64 P0, [UR26], R0", "FFMA R1, R2, R2, R2", "@P0 BRA 0x40",
                  "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR26], R0", "FFMA R1, R2, R2, R2"])
    assert im.waits_slow_path(code) == {3}
    code[2] = dataclasses.replace(code[2], target=target)
    assert im.waits_slow_path(code) == set()


def test_nsight_pipes_of_the_uniform_moves():
    assert im.ncu_pipe("R2UR") == "alu" and im.ncu_pipe("UMOV") == "other" and im.ncu_pipe("SYNCS.ARRIVE") == "other"
    assert im.ncu_pipe("FFMA.FTZ") == "fma" and im.ncu_pipe("HGMMA.64x128x16.F32.BF16") == "tensor"


def test_executed_counts_from_the_work_order():
    mix = {"block": {"fma": 10, "tensor_ops": 2, "tensor": 2}, "rescale": {"fma": 64}, "tile": {},
           "straight": {"fma": 1, "tensor_ops": 0}, "load_block": {"lsu": 3}, "load_tile": {}}
    c = im.executed(mix, tiles=2, blocks=8, ctas=2, consumer_warps=4, warps_per_cta=5, tensor_per_block=2,
                    rescale_per_block=0.25)
    # block loop: 8 blocks x 2 tensor / 2 per iteration = 8 iterations, by 4 warps; straight: 5 warps x 2 CTAs
    assert c["fma"] == 4 * 8 * (10 + 0.25 * 64) + 5 * 2 * 1
    assert c["tensor"] == 4 * 8 * 2 and c["lsu"] == 8 * 3 and c["other"] == 0
    with pytest.raises(CaptureError, match="cannot carry"):
        im.executed(dict(mix, straight={"tensor_ops": 100}), 2, 8, 2, 4, 5, 2)


def test_committed_mixes_are_of_these_sources():
    d = im.load()
    assert d["source_sha256"] == im.source_digests(), "rebuild: python -m lapis.model.instruction_mix --write"
    s9 = d["kernels"]["s9"]["regions"]
    # per K/V block: QK and PV, 8 wgmma each; ex2 flavour: 64 scores + 2 corrections on MUFU; the O rescale's
    # 64 FMULs behind the cond_rescale branch
    assert s9["block"]["tensor_ops"] == 16 and s9["block"]["xu"] == 66 and s9["rescale"]["fma"] == 64
    assert d["kernels"]["gemm"]["regions"]["block"]["tensor_ops"] == 4  # block_k 64: 4 k-steps of m64n128k16
    assert d["kernels"]["flash"]["regions"]["block"]["tensor_ops"] == 256  # mma.sync per K/V block and warp


def test_s14s_descriptor_increments_leave_less_uniform_work_in_the_kv_loop():
    k = im.load()["kernels"]
    s13, s14 = k["s13"]["regions"]["block"], k["s14"]["regions"]["block"]
    # s13 rebuilds its 24 descriptors per K/V tile (mask, shift, or on the uniform datapath, and 16 R2UR of Q's
    # descriptors, which Nsight Compute counts on alu); s14 adds a constant per K-step to a base in a uniform register
    assert (s13["uniform"], s14["uniform"]) == (77, 30)
    assert (s13["alu"], s14["alu"]) == (136, 122)
    assert (sum(s13.values()) - s13["tensor_ops"], sum(s14.values()) - s14["tensor_ops"]) == (494, 433)
    # the same loop otherwise: 16 wgmma, 66 MUFU (64 exponentials, 2 corrections)
    assert s13["tensor_ops"] == s14["tensor_ops"] == 16 and s13["xu"] == s14["xu"] == 66


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
@pytest.mark.xdist_group("attention_h200_sass")  # one compile of attention_h200.cu per run
def test_a_rebuild_gives_the_committed_mixes():
    built, committed = im.build(), im.load()
    for key, k in committed["kernels"].items():
        assert {r: Counter(c) for r, c in built["kernels"][key]["regions"].items()} == \
            {r: Counter(c) for r, c in k["regions"].items()}, key
