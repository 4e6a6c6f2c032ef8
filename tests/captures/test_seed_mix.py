"""lapis.captures.seed_mix: loops, roles and mixes from a listing, and the shipped B200 seed capture."""

import json

import pytest

from lapis.captures import seed_mix
from lapis.data import CAPTURES
from lapis.errors import CaptureError

# A hand-written sm_100a-style listing: a 9-instruction loop 0x10..0x90 (an MMA issue and its commit, a TMEM
# load, an exp) that waits on an mbarrier whose retry sits after EXIT (0xb0..0xc0, branching back into the loop).
WORD = "/* 0x000fe20000000000 */"
LINES = [(0x00, "MOV R0, RZ"), (0x10, "UTCHMMA gdesc[UR6], gdesc[UR10], tmem[UR5], tmem[UR8], idesc[UR9], !UPT"),
         (0x20, "UTCBAR [UR4], URZ"), (0x30, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R20+URZ], R25"),
         (0x40, "@!P0 BRA 0xb0"), (0x50, "LDTM.x8 R4, tmem[UR4]"), (0x60, "FMNMX3 R4, R4, R5, R6, !PT"),
         (0x70, "MUFU.EX2 R1, R4"), (0x80, "FADD R0, R0, R1"), (0x90, "@P1 BRA 0x10"), (0xa0, "EXIT"),
         (0xb0, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R20+URZ], R25"), (0xc0, "@!P0 BRA 0xb0"), (0xd0, "BRA 0x50")]
LISTING = "\tcode for sm_100a\n\t\tFunction : toy\n" + "".join(
    f"        /*{a:04x}*/   {t} ;   /* 0x0000000000000000 */\n        {WORD}\n" for a, t in LINES)


def test_loop_record_of_a_toy_listing(tmp_path):
    (tmp_path / "toy.sass").write_text(LISTING)
    r = seed_mix.kernel_record(tmp_path / "toy.sass")
    assert r["instructions"] == 14 and r["wait_loops"] == 1
    # MOV and FMNMX3 on alu; four BRAs on adu; two SYNCS on lsu
    assert r["pipes"] == {"fma": 1, "alu": 2, "xu": 1, "lsu": 2, "tensor": 2, "tmem": 1, "cbu": 1, "adu": 4}
    (loop,) = r["loops"]
    assert (loop["head"], loop["branch"], loop["depth"], loop["instructions"]) == ("0x10", "0x90", 0, 9)
    assert loop["role"] == "serial"  # an MMA issue and an exp in one loop: k01's single role
    assert loop["ops"]["MUFU.EX2"] == 1 and loop["ops"]["LDTM.x8"] == 1
    assert loop["pipes"] == {"fma": 1, "alu": 1, "xu": 1, "lsu": 1, "tensor": 2, "tmem": 1, "adu": 2}
    # LDTM -> FMNMX3 -> MUFU -> FADD: 4 instructions in one pass; only the FADD's R0 is carried, so the chain
    # grows by that one instruction per further iteration
    assert loop["chain_first"] == 4 and loop["chain_per_iteration"] == 1
    # the same chain at each link's sm_100 latency (smsp_sm100.json): TMEM load 16 + ALU 4 + MUFU 18 + FMA 4
    assert loop["chain_links"] == {"tmem": 1, "alu": 1, "xu": 1, "fma": 1} and loop["chain_cycles"] == 42
    # one warp alone: every control word here says stall 1 and sets no scoreboard, so it issues one a cycle
    assert loop["warp_cycles"] == 9


def test_roles_by_first_rule():
    from collections import Counter
    assert seed_mix.role_of(Counter({"UTCHMMA": 8, "UTCBAR": 1})) == "mma"
    assert seed_mix.role_of(Counter({"LDTM.x32": 4, "STTM.x32": 4, "FMUL": 8})) == "correction"
    assert seed_mix.role_of(Counter({"UTMALDG.2D": 2, "SYNCS.ARRIVE.TRANS64": 1})) == "load"
    assert seed_mix.role_of(Counter({"LDTM.x8": 1, "MUFU.EX2": 8})) == "softmax"
    assert seed_mix.role_of(Counter({"IADD3": 1})) == "other"


def test_a_missing_listing_is_a_capture_error(tmp_path):
    with pytest.raises(CaptureError, match="has a listing"):
        seed_mix.capture(tmp_path, dict(kernels={"k01": "kernels/k01.cu"}))


SHIPPED = CAPTURES / "seeds" / "b200-481f9aa" / "manifest.json"


def _loop(kernel, role, depth):
    return next(lp for lp in kernel["loops"] if lp["role"] == role and lp["depth"] == depth)


def test_shipped_b200_capture_counts_what_the_sources_issue():
    man = json.loads(SHIPPED.read_text())
    assert man["provenance"]["repository"] == "IaroslavElistratov/b200-attention"
    assert man["provenance"]["flags"].startswith("-arch=sm_100a")
    assert list(man["kernels"]) == [f"k{n:02d}" for n in range(1, 19)]
    k01, k18 = man["kernels"]["k01"], man["kernels"]["k18"]
    # k01: one serial loop; per K/V tile 8 QK + 8 PV tcgen05.mma (head dim 128 / K 16 each) and 128 + 1 __expf
    serial = _loop(k01, "serial", 0)
    assert serial["ops"]["UTCHMMA"] == 16 and serial["ops"]["MUFU.EX2"] == 129
    # k18: the roles of the source's warp split, each with its K/V-tile loop nested in the persistent loop
    assert {lp["role"] for lp in k18["loops"]} == {"load", "mma", "softmax", "correction"}
    # MMA: two Q stages x (8 PV + 8 QK) per K/V tile
    assert _loop(k18, "mma", 1)["ops"]["UTCHMMA"] == 32
    # softmax: 12 of every 16 exps on MUFU (96 of 128) + the rescale's; the other 32 as 16 pairs of 3 packed FMAs
    soft = _loop(k18, "softmax", 1)
    assert soft["ops"]["MUFU.EX2"] == 97 and soft["ops"]["FFMA2"] == 48
    # correction: O (128 columns) in x8 TMEM loads and stores for each of the two Q stages, one FMUL per value
    corr = _loop(k18, "correction", 1)
    assert corr["ops"]["LDTM.x8"] == corr["ops"]["STTM.x8"] == 2 * 16 and corr["ops"]["FMUL"] == 2 * 128


def test_shipped_capture_shows_the_minor_steps_source_changes():
    k = json.loads(SHIPPED.read_text())["kernels"]
    # k15 loads S as x16 without a wait each: 8 x16 + 4 x8 rereads instead of k14's 16 x8 + 4 x8
    assert _loop(k["k14"], "softmax", 1)["ops"]["LDTM.x8"] == 20 and _loop(k["k15"], "softmax", 1)["ops"]["LDTM.x16"] == 8
    # k16 sums the 96 cached exps pairwise: 48 more packed adds (FADD2.FTZ), about 96 fewer scalar FADDs
    s15, s16 = _loop(k["k15"], "softmax", 1)["ops"], _loop(k["k16"], "softmax", 1)["ops"]
    assert s16["FADD2.FTZ"] - s15["FADD2.FTZ"] == 48 and s15["FADD"] - s16["FADD"] >= 90
    # k18 (k17's body) keeps the MMA warp's barrier phases in bitmasks: k16's indexed phase arrays live in local memory
    mma16, mma18 = _loop(k["k16"], "mma", 1)["ops"], _loop(k["k18"], "mma", 1)["ops"]
    assert any(op.startswith("LDL") for op in mma16) and not any(op.startswith(("LDL", "STL")) for op in mma18)



def test_shipped_capture_times_the_deferred_score_loads():
    k = json.loads(SHIPPED.read_text())["kernels"]
    s14, s15 = _loop(k["k14"], "softmax", 1), _loop(k["k15"], "softmax", 1)
    # one rowmax chain over x16 loads instead of x8 ones: 45 fewer ALU links (FMNMX) in the chain
    assert s14["chain_links"]["alu"] - s15["chain_links"]["alu"] == 45
    assert (s14["chain_cycles"], s15["chain_cycles"]) == (594, 410)
    # one deferred wait instead of one per x8 load: one warp alone takes 1236 cycles a tile, not 1375
    assert (s14["warp_cycles"], s15["warp_cycles"]) == (1375, 1236)


def test_shipped_capture_shows_the_exp_steps():
    k = json.loads(SHIPPED.read_text())["kernels"]
    row = {name: _loop(k[name], "softmax", 0)["ops"] for name in ("k07", "k08", "k09")}
    # k07 (__expf) and k08 (ex2.approx) put all 128 exps of a row and the rescale's on MUFU
    assert row["k07"]["MUFU.EX2"] == row["k08"]["MUFU.EX2"] == 129
    # k09 moves 4 of every 16 to the cubic: 96 + 1 on MUFU, 16 pairs x 3 packed Horner FMAs
    assert row["k09"]["MUFU.EX2"] == 97 and row["k09"]["FFMA2"] == 48
    # k08 folds the log2(e) scale into the score multiply: fewer FMA-pipe instructions than k07's __expf
    assert _loop(k["k08"], "softmax", 0)["pipes"]["fma"] < _loop(k["k07"], "softmax", 0)["pipes"]["fma"]


def test_shipped_capture_shows_the_swizzle_step_cuts_tma_issues():
    k = json.loads(SHIPPED.read_text())["kernels"]
    tma = {name: sum(c for op, c in _loop(k[name], "serial", 0)["ops"].items() if op.startswith("UTMALDG"))
           for name in ("k02", "k03")}
    # no swizzle: K in 16 boxes of 8 columns, V in 16 x 16 boxes of 8 x 8; SW128: K in 2 boxes, V in 16 x 2
    assert tma == {"k02": 16 + 256, "k03": 2 + 32}


def test_without_constants_a_loop_keeps_its_counts_and_chain_but_no_cycles(tmp_path):
    (tmp_path / "toy.sass").write_text(LISTING)
    (loop,) = seed_mix.kernel_record(tmp_path / "toy.sass", None)["loops"]
    assert loop["pipes"] == {"fma": 1, "alu": 1, "xu": 1, "lsu": 1, "tensor": 2, "tmem": 1, "adu": 2}
    assert (loop["chain_first"], loop["chain_per_iteration"]) == (4, 1)
    assert not {"chain_links", "chain_cycles", "warp_cycles"} & set(loop)
    man = seed_mix.capture(tmp_path, dict(kernels={"toy": dict(knobs="WORK=w4x1")}, date="d", commit="c",
                                          repository="r", nvcc="n", flags="f", cuobjdump="o"), None)
    assert man["constants"] is None
    assert man["kernels"]["toy"]["knobs"] == "WORK=w4x1" and "file" not in man["kernels"]["toy"]


def test_an_mma_sync_loop_with_exps_is_serial():
    from collections import Counter
    assert seed_mix.role_of(Counter({"HMMA.16816.F32": 16, "MUFU.EX2": 10, "SHFL.BFLY": 8})) == "serial"


def test_the_shipped_b200_roles_follow_from_their_ops():
    # every B200 loop's stored role is what the rules give its ops now: no B200 loop has HMMA
    for kernel in json.loads(SHIPPED.read_text())["kernels"].values():
        for lp in kernel["loops"]:
            assert seed_mix.role_of(lp["ops"]) == lp["role"]
            assert not any(op.startswith("HMMA") for op in lp["ops"])


EMMY = CAPTURES / "seeds" / "emmy-0.3.22" / "manifest.json"


def _emmy_ops(name):
    (lp,) = json.loads(EMMY.read_text())["kernels"][name]["loops"]
    return lp["ops"]


def test_shipped_emmy_capture_has_one_kv_loop_per_move_without_cycles():
    man = json.loads(EMMY.read_text())
    assert man["constants"] is None and man["provenance"]["flags"].endswith("code=sm_120a -cubin")
    assert list(man["kernels"]) == ["m01", "m02-m04", "m05", "m06", "m07-printed",
                                    "w4x1-m01", "w4x1-m02-m04", "w4x1-m05", "w4x1-m06", "w4x1-m07"]
    for k in man["kernels"].values():
        (lp,) = k["loops"]
        assert lp["role"] == "serial" and "warp_cycles" not in lp


def test_shipped_emmy_capture_shows_each_moves_feature():
    # w1x1, 16 keys a step: QK 4 head-dim steps x 2 key atoms + PV 8 channel atoms; f2x2 doubles the rows
    assert _emmy_ops("m01")["HMMA.16816.F32"] == 16 and _emmy_ops("m07-printed")["HMMA.16816.F32"] == 32
    # w4x1, 64 keys a step: (4 x 8) + (4 x 8) per 16-row chain, two chains at f2x8
    assert _emmy_ops("w4x1-m06")["HMMA.16816.F32"] == 64 and _emmy_ops("w4x1-m07")["HMMA.16816.F32"] == 128
    # m01 reads K and V from gmem, 16 bits a load (2 x 2 halves per B fragment): (8 + 8) x 4; Q not in the loop
    assert _emmy_ops("m01")["LDG.E.U16.CONSTANT"] == 64 and not any(op.startswith("LDSM") for op in _emmy_ops("m01"))
    # m02: cp.async fill (16 B a lane) and ldmatrix drain; m05 the same fill, one wait per tile instead of two
    assert _emmy_ops("m02-m04")["LDGSTS.E.BYPASS.128"] == 8 and _emmy_ops("m02-m04")["DEPBAR.LE"] == 2
    assert _emmy_ops("m05")["DEPBAR.LE"] == 1
    # m06: two TMA boxes (K, V) per tile on an mbarrier, no cp.async
    assert _emmy_ops("m06")["UTMALDG.4D"] == 2 and "LDGSTS.E.BYPASS.128" not in _emmy_ops("m06")
    # the C->A repack: 4 cvt.rn.f16x2.f32 per 16 keys per chain (w4x1-m07: 4 key blocks x 2 chains)
    assert _emmy_ops("m01")["F2FP.F16.F32.PACK_AB"] == 4 and _emmy_ops("w4x1-m07")["F2FP.F16.F32.PACK_AB"] == 32
