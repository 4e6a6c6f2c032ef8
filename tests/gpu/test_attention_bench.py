"""The attention benchmark's host side on a CPU: shape rules, FLOPs, smem and timeline sizes, the blind file,
the sanitizer's log parsing and bf16 helpers, timeline decode with the plan's vocabulary
(synthetic inputs only; no GPU results)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from lapis.errors import ScheduleError
from lapis.gpu import attention_plan, bench_attention as ba, harness, sanitize_attention as sa


def instantiated(name: str) -> list[str]:
    """The template arguments attention_variants.inc (generated from the catalog) builds the variant's entry point
    with: STAGES, BN, CONSUMER_WGS, WS, then Features' twenty-two."""
    inc = attention_plan.KERNELS.joinpath("attention_variants.inc").read_text()
    call = f"LAPIS_ATTENTION({ba.kernel_name(ba.VARIANTS[name])}, "
    line = next(x for x in inc.splitlines() if x.startswith(call))
    return line[len(call):line.index(")")].replace(",", "").split()


def test_shapes_must_tile_and_have_head_dim_128():
    assert ba.check_shape(ba.VARIANTS["s2"], "8x16x4096x128") == (8, 16, 4096, 128)
    with pytest.raises(ScheduleError, match="multiple of the kernel's block_n"):
        ba.check_shape(ba.VARIANTS["s1"], "1x2x576x128")  # 576 = 9 x 64: block_m fits, block_n 128 does not
    with pytest.raises(ScheduleError, match="head dim 128"):
        ba.check_shape(ba.VARIANTS["s1"], "1x2x512x64")
    with pytest.raises(ScheduleError, match="BxHxLxD"):
        ba.parse_shape("4096x128")
    r = subprocess.run([sys.executable, "-m", "lapis.gpu.bench_attention", "--out", "/tmp/x", "--shapes",
                        "1x1x100x128"], capture_output=True, text=True)
    assert r.returncode != 0 and "pad L to a multiple of 128" in r.stderr


def test_flops_smem_and_threads_by_hand():
    assert ba.flops("8x16x4096x128") == 4 * 8 * 16 * 4096 ** 2 * 128
    plan = attention_plan.load()
    # Q 64 x 128 bf16 + stages x (K 128 x 128 + V 128 x 128) bf16 + 1 KiB alignment slack
    assert ba.smem_bytes(ba.VARIANTS["s1"], plan) == 16384 + 1 * 65536 + 1024
    assert ba.smem_bytes(ba.VARIANTS["s2"], plan) == 16384 + 2 * 65536 + 1024
    assert ba.smem_bytes(ba.VARIANTS["s2"], plan) + 1024 <= 227 * 1024
    assert (ba.threads(ba.VARIANTS["s1"]), ba.threads(ba.VARIANTS["s2"])) == (128, 256)
    # s3: Q 128 x 128 bf16 (two 64-row halves) + 2 x (K + V) + 1 KiB; a producer WG + 2 consumer WGs
    assert ba.smem_bytes(ba.VARIANTS["s3"], plan) == 32768 + 2 * 65536 + 1024
    assert ba.threads(ba.VARIANTS["s3"]) == 384 and ba.q_operand(ba.VARIANTS["s3"], plan)["box"] == [64, 128]
    assert ba.kernel_name(ba.VARIANTS["s3"]) == "attn_s3_two_consumers_s2_n128_c2"
    assert ba.kernel_name(ba.VARIANTS["s2"]) == "attn_s2_ws_ring_s2_n128_c1"
    assert instantiated("s1") == ("1 128 1 false false false false 0 false false 1 false false false 1 false "
                                  "false false false false false false false false false false false").split()
    assert instantiated("s2") == ("2 128 1 true false false false 0 false false 1 false false false 1 false "
                                  "false false false false false false false false false false false").split()
    assert instantiated("s3") == ("2 128 2 true false false false 0 false false 1 false false false 1 false "
                                  "false false false false false false false false false false false").split()
    # s4: s3's tiles, warpgroups and smem (K and V slots are freed apart, not sized apart)
    assert ba.smem_bytes(ba.VARIANTS["s4"], plan) == 32768 + 2 * 65536 + 1024
    assert ba.threads(ba.VARIANTS["s4"]) == 384 and ba.q_operand(ba.VARIANTS["s4"], plan)["box"] == [64, 128]
    assert ba.kernel_name(ba.VARIANTS["s4"]) == "attn_s4_pingpong_s2_n128_c2"
    assert instantiated("s4") == ("2 128 2 true true false false 0 false false 1 false false false 1 false "
                                  "false false false false false false false false false false false").split()
    # s5: s4's tiles and turns, QK_j and PV_{j-1} issued back to back in a turn
    assert ba.smem_bytes(ba.VARIANTS["s5"], plan) == 32768 + 2 * 65536 + 1024 and ba.threads(ba.VARIANTS["s5"]) == 384
    assert ba.kernel_name(ba.VARIANTS["s5"]) == "attn_s5_intra_overlap_s2_n128_c2"
    assert instantiated("s5") == ("2 128 2 true true true false 0 false false 1 false false false 1 false "
                                  "false false false false false false false false false false false").split()
    # s6 at emulate_frac 0, 1/8 (EMU 4), 1/4 (EMU 2); s7 adds the conditional rescale, threshold 8 in log2 units
    assert instantiated("s6") == ("2 128 2 true true true true 0 false false 1 false false false 1 false "
                                  "false false false false false false false false false false false").split()
    assert instantiated("s6_emu8") == ("2 128 2 true true true true 4 false false 1 false false false 1 false "
                                       "false false false false false false false false false false false").split()
    assert instantiated("s6_emu4") == ("2 128 2 true true true true 2 false false 1 false false false 1 false "
                                       "false false false false false false false false false false false").split()
    assert instantiated("s7") == ("2 128 2 true true true true 0 true false 1 false false false 1 false "
                                  "false false false false false false false false false false false").split()
    assert "constexpr float RESCALE_THRESHOLD = 8.f;" in attention_plan.KERNELS.joinpath("attention_softmax.cuh").read_text()
    assert [ba.sim_params(ba.VARIANTS[v]).get("emulate_frac") for v in ("s6", "s6_emu8", "s6_emu4", "s7")] == [
        0.0, 0.125, 0.25, 0.0]
    assert ba.sim_params(ba.VARIANTS["s7"])["threshold"] == 8.0 and "threshold" not in ba.sim_params(ba.VARIANTS["s6"])
    assert ba.kernel_name(ba.VARIANTS["s6_emu8"]) == "attn_s6_exp2_emu8_s2_n128_c2"
    # s8: s7 on a persistent grid of one CTA per SM, with a second Q slot (32 KiB more shared memory)
    assert instantiated("s8") == ("2 128 2 true true true true 0 true true 2 false false false 1 false "
                                  "false false false false false false false false false false false").split()
    assert ba.smem_bytes(ba.VARIANTS["s8"], plan) == 2 * 32768 + 2 * 65536 + 1024
    assert ba.grid(ba.VARIANTS["s8"], "8x16x4096x128") == (132, 1) and ba.grid(ba.VARIANTS["s8"], "1x1x256x128") == (2, 1)
    assert ba.grid(ba.VARIANTS["s7"], "8x16x4096x128") == (32, 128)
    assert ba.items_per_cta(ba.VARIANTS["s8"], "8x16x4096x128") == 32  # 4096 items over 132 CTAs: 31.03 -> 32
    assert ba.items_per_cta(ba.VARIANTS["s7"], "8x16x4096x128") == 1
    # s9: s8 with 3 stages and one Q slot: 32 KiB + 3 x 64 KiB + 1 KiB align
    assert instantiated("s9") == ("3 128 2 true true true true 0 true true 1 false false false 1 false "
                                  "false false false false false false false false false false false").split()
    assert instantiated("s10") == ("3 128 2 true true true true 0 true true 1 false false true 1 false "
                                   "false false false false false false false false false false false").split()
    assert instantiated("s11") == ("3 128 2 true true true true 0 true true 1 false false true 4 false "
                                   "false false false false false false false false false false false").split()
    assert instantiated("s12") == ("2 128 2 true true true true 0 true true 2 false false true 4 false "
                                   "false false false false false false false false false false false").split()
    assert instantiated("s13") == ("2 128 2 true true true true 0 true true 2 false false true 1 false "
                                   "false false false false false false false false false false false").split()
    assert instantiated("s14") == ("2 128 2 true true true true 0 true true 2 false false true 1 true "
                                   "false false false false false false false false false false false").split()
    assert instantiated("s15") == ("2 128 2 true true true true 0 true true 2 false false true 1 true true false "
                                   "false false false false false false false false false").split()
    # s16: s15 with P_j packed before the conditional O rescale (EARLY_PACK)
    assert instantiated("s16") == ("2 128 2 true true true true 0 true true 2 false false true 1 true true true "
                                   "false false false false false false false false false").split()
    # s17: s16 with the GEMM turn's wait as one bar.sync on a register barrier id (ONE_SYNC)
    assert instantiated("s17") == ("2 128 2 true true true true 0 true true 2 false false true 1 true true true "
                                   "true false false false false false false false false").split()
    # s18: s17 with the consumer's mbarrier addresses held in registers across the loop (BAR_HOIST)
    assert instantiated("s18") == ("2 128 2 true true true true 0 true true 2 false false true 1 true true true "
                                   "true true false false false false false false false").split()
    # s19: s18 with the turn's K and V waits tested before its bar.sync (EARLY_TEST)
    assert instantiated("s19") == ("2 128 2 true true true true 0 true true 2 false false true 1 true true true "
                                   "true true true false false false false false false").split()
    # s20: s18 with the turn's K and V waits as spins with no watchdog (SPIN_WAIT)
    assert instantiated("s20") == ("2 128 2 true true true true 0 true true 2 false false true 1 true true true "
                                   "true true false true false false false false false").split()
    # s21: s20 with the producer's slot waits suspended until the slot frees (SLEEP_ACQUIRE, the nineteenth flag)
    assert instantiated("s21") == ("2 128 2 true true true true 0 true true 2 false false true 1 true true true "
                                   "true true false true true false false false false").split()
    # s25: s24 (early_item, the twenty-first Features flag) with the 64-bit descriptor adds (DESC64, the 22nd);
    # s26: s25 with the split tail (SPLIT_TAIL, the last)
    assert instantiated("s25") == ("2 128 2 true true true true 0 true true 2 false false true 2 true true true "
                                   "true true false true true true true true false").split()
    assert instantiated("s26") == ("2 128 2 true true true true 0 true true 2 false false true 2 true true true "
                                   "true true false true true true true true true").split()
    assert ba.smem_bytes(ba.VARIANTS["s9"], plan) == 32768 + 3 * 65536 + 1024 <= 227 * 1024 - 1024
    with pytest.raises(ScheduleError, match="multiple of the kernel's block_m"):
        ba.check_shape(ba.VARIANTS["s3"], "1x2x576x128")  # 576 = 4.5 x 128


def test_rescale_stats_divides_by_the_row_tiles_past_the_first():
    # 1x2x512x128 at block_n 128: 2 x 512 rows, 4 tiles -> 3 tiles after the first: 3072 row-tiles
    assert ba.rescale_stats(768, "1x2x512x128", 128) == dict(rescales=768, row_tiles=3072, frequency=0.25)


def test_timeline_capacity_covers_the_kernels_records():
    # L = 1024, block_n 128: 8 tiles. s1's consumer: start, wait Q, 9 per tile (wait empty, issue TMA + 7), end.
    # s2: producer start, 2 per tile; consumer start, wait Q, 7 per tile, end.
    assert ba.timeline_capacity(ba.VARIANTS["s1"], 1024) >= 2 + 9 * 8 + 1
    assert ba.timeline_capacity(ba.VARIANTS["s2"], 1024) >= (1 + 2 * 8) + (2 + 7 * 8 + 1)
    # s3: the producer's, and two consumer warpgroups' records each (start, wait Q, 7 per tile, epilogue)
    assert ba.timeline_capacity(ba.VARIANTS["s3"], 1024) >= (1 + 2 * 8) + 2 * (2 + 7 * 8 + 1)
    # s4: the producer waits and issues K and V apart (4 per tile); a consumer's step j of 0..8: wait K (j < 8),
    # turn, wait V + issue PV (j > 0), issue QK (j < 8), wait QK/PV, softmax (j < 8) -> 8 + 9 + 16 + 8 + 9 + 8
    assert ba.timeline_capacity(ba.VARIANTS["s4"], 1024) >= (1 + 4 * 8) + 2 * (2 + 58 + 1)
    # s5: s4's records plus, per tile, wait PV (j > 0) and O rescale: 58 + 7 + 8
    assert ba.timeline_capacity(ba.VARIANTS["s5"], 1024) >= (1 + 4 * 8) + 2 * (2 + 73 + 1)


def test_blind_file_mirrors_the_benchmark_cases():
    from lapis.validate.blind import cases, load
    d = load("attention_h200")
    keys = ("variant", "schedule", "gpu", "shape", "params")
    assert [{k: e[k] for k in keys} for e in d["entries"]] == cases("attention_h200")
    assert {(e["variant"], e["shape"]) for e in d["entries"]} == {(v, s) for v in ("s1", "s2")
                                                                  for s in ba.DEFAULT_SHAPES}
    for e in d["entries"]:
        assert e["params"] == dict(block_m=64, block_n=128, stages=1 if e["variant"] == "s1" else 2, consumer_wgs=1)
        b, h, seq, dd = (int(x) for x in e["shape"].split("x"))
        assert abs(e["tflops"] - 4 * b * h * seq * seq * dd / e["predicted_us"] / 1e6) < 0.1


@pytest.mark.parametrize("name, variant, schedule", [("attention_h200_s8", "s8", "h200-s8-persistent"),
                                                      ("attention_h200_s3s4", "s3", "h200-s3-two-consumers"),
                                                      ("attention_h200_s4", "s4", "h200-s4-pingpong"),
                                                      ("attention_h200_s5", "s5", "h200-s5-intra-overlap")])
def test_per_variant_blind_files_are_sets_of_their_own_with_the_kernel_parameters(name, variant, schedule):
    from lapis.validate import blind as blind_predictions
    d = blind_predictions.load(name)
    keys = ("variant", "schedule", "gpu", "shape", "params")
    assert [{k: e[k] for k in keys} for e in d["entries"]] == blind_predictions.SETS[name]()
    assert [(e["variant"], e["shape"]) for e in d["entries"]] == [(variant, s) for s in ba.DEFAULT_SHAPES]
    for e in d["entries"]:
        assert e["schedule"] == schedule
        extra = dict(emulate_frac=0.0, threshold=8.0) if variant == "s8" else {}
        regs = dict(regs_producer=40, regs_consumer=232) if variant == "s8" else dict(regs_producer=24,
                                                                                        regs_consumer=240)
        assert e["params"] == dict(block_m=128, block_n=128, stages=2, consumer_wgs=2, **regs, **extra)
        b, h, seq, dd = (int(x) for x in e["shape"].split("x"))
        assert abs(e["tflops"] - 4 * b * h * seq * seq * dd / e["predicted_us"] / 1e6) < 0.1


def test_bench_and_sanitizer_take_a_variant_subset():
    r = subprocess.run([sys.executable, "-m", "lapis.gpu.bench_attention", "--out", "/tmp/x", "--variants", "s3,s99"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "unknown variants ['s99']" in r.stderr
    r = subprocess.run([sys.executable, "-m", "lapis.gpu.sanitize_attention", "--out", "/tmp/x", "--variants",
                        "s9:causal,s3:causal"], capture_output=True, text=True)  # s3 has no causal build
    assert r.returncode == 2 and "s3 has no causal build: got 's3:causal'; fix: use s9:causal" in r.stderr
    for bad, says in (("s9:bogus", "a variant is NAME or NAME:causal"), ("s9", "L must be a multiple")):
        r = subprocess.run([sys.executable, "-m", "lapis.gpu.sanitize_attention", "--out", "/tmp/x", "--variants",
                            bad, "--shape", "1x2x500x128"], capture_output=True, text=True)
        assert r.returncode == 2 and says in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-m", "lapis.gpu.bench_attention", "--out", "/tmp/x", "--variants", "s9",
                        "--causal", "--shapes", "1x2x500x128"], capture_output=True, text=True)
    assert r.returncode == 2 and "error: L must be a multiple of the kernel's block_m" in r.stderr
    assert "Traceback" not in r.stderr
    with pytest.raises(ScheduleError, match="--causal needs a variant with a causal build"):
        ba.check_shape(ba.VARIANTS["s8"], "8x16x4096x128", causal=True)
    assert ba.check_shape(ba.VARIANTS["s9"], "8x16x4096x128", causal=True) == (8, 16, 4096, 128)
    assert sa.split_variant("s9:causal") == ("s9", True) and sa.split_variant("s5") == ("s5", False)
    with pytest.raises(ScheduleError, match="NAME or NAME:causal"):
        sa.split_variant("s9:Causal")
    assert ba.kernel_name(ba.VARIANTS["s9"], causal=True) == "attn_s9_tuned_causal_s3_n128_c2"
    assert ba.flops("1x1x1024x128", causal=True) == 2.0 * 1024 * 1024 * 128
    r = subprocess.run([sys.executable, "-m", "lapis.gpu.sanitize_attention", "--out", "/tmp/x", "--variants", "s0"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "unknown variants ['s0']" in r.stderr
    assert sa.race_variant(["s1", "s2", "s3"], ba.VARIANTS) == "s2"
    assert sa.race_variant(["s3"], ba.VARIANTS) == "s3"  # the planted race needs a producer: s1 has none
    assert sa.race_variant(["s1"], ba.VARIANTS) == "s2"
    assert sa.race_variant(["s4", "s5"], ba.VARIANTS) == "s2"  # the plant is in the s1..s3 loop, not the GEMM turns
    assert sa.race_variant(["s5", "s3"], ba.VARIANTS) == "s3"


def test_sanitizer_summary_parsing():
    log = "========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 3 hazards displayed (3 errors, 0 warnings)\n"
    assert sa.error_count(log) == 3
    assert sa.error_count("========= ERROR SUMMARY: 0 errors\n") == 0
    assert sa.error_count("child crashed before the summary") is None


def test_bf16_round_trip_and_the_float64_reference():
    x = np.array([1.0, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -2.5], np.float32)
    # 1 + 2^-8 is halfway between bf16 1.0 and 1 + 2^-7: ties to even -> 1.0; 1 + 3 x 2^-8 -> 1 + 2^-6
    assert list(sa.bf16_bits(x)) == [0x3F80, 0x3F80, 0x3F82, 0xC020]
    assert list(sa.bf16_float(sa.bf16_bits(x))) == [1.0, 1.0, 1.0 + 2 ** -6, -2.5]
    q = np.zeros((1, 1, 4, 2))
    v = np.arange(8.0).reshape(1, 1, 4, 2)
    assert np.allclose(sa.reference_cpu(q, q, v)[0, 0], [[3.0, 4.0]] * 4)  # equal scores: the mean of v's rows
    k = np.array([[[[0, 0], [0, 0], [0, 0], [100, 0]]]], float)
    q1 = np.array([[[[1.0, 0]] * 4]])
    assert np.allclose(sa.reference_cpu(q1, k, v)[0, 0], [[6.0, 7.0]] * 4)  # one dominant key: its v row


def test_attention_timeline_decodes_with_the_plan_vocabulary():
    p = attention_plan.load()
    op = {o: i for i, o in enumerate(p["ops"])}
    rec = np.zeros((1, 8), harness.RECORD_DTYPE)
    rows = [(0, 1, "start", 0), (40, 1, "wait Q", 1), (100, 1, "wait K", 1), (130, 1, "issue QK", 0),
            (400, 1, "wait QK", 1), (900, 1, "softmax", 0)]
    for i, (t, role, o, done) in enumerate(rows):
        rec[0, i] = (t, 0, 0, -1 if o in ("start", "wait Q") else 0, 3, role, op[o] | (0x80 * done))
    ev = harness.decode_timeline(rec, np.array([6], np.uint32), p["roles"], p["ops"])["events"]
    assert [(e["role"], e["op"], e["start_ns"], e["end_ns"], e["kind"]) for e in ev] == [
        ("consumer0", "wait Q", 0, 40, "wait"), ("consumer0", "wait K", 40, 100, "wait"),
        ("consumer0", "issue QK", 100, 130, "issue"), ("consumer0", "wait QK", 130, 400, "wait"),
        ("consumer0", "softmax", 400, 900, "issue")]


def test_table_and_manifest_on_synthetic_results(tmp_path):
    r = dict(median_us=2000.0, spread_pct=1.0, runs=30, clocks=dict(sm_clock_mhz=dict(median=1980.0)))
    errs = {f"{v}/{b}/{k}": 0.004 for v in ("s1", "s2") for b in ba.BUILDS for k in ba.INPUTS}
    f = ba.flops("8x16x4096x128")
    res = [dict(shape="8x16x4096x128", flops=f, rel_err=errs, correct=True, sdpa=dict(cudnn=dict(r, median_us=1000.0)),
                variants=dict(s2=dict(plain=r, timeline=dict(r, median_us=2100.0), tflops=f / 2000 / 1e6,
                                      ratio_to_cudnn=0.5, instrumentation_overhead_pct=5.0)))]
    lines = ba.table(res).splitlines()
    assert lines[1].split()[:5] == ["8x16x4096x128", "sdpa-cudnn", "1000.0", "1.00", f"{f / 1000 / 1e6:.0f}"]
    assert lines[2].split()[1] == "s1" and lines[2].split()[2] == "-"  # checked, not timed
    assert lines[3].split()[1:7] == ["s2", "2000.0", "1.00", f"{f / 2000 / 1e6:.0f}", "0.500", "5.0"]
    ba.write_manifest(tmp_path, dict(gpu="(synthetic)"), {}, res, None, ["--out", "x"], 1.0)
    man = json.loads((tmp_path / "manifest.json").read_text())
    assert set(man["variants"]) == {"s1", "s2"} and man["command"] == "python -m lapis.gpu.bench_attention --out x"



def test_s6s7_blind_file_holds_the_emulate_frac_sweep_and_s7():
    from lapis.validate import blind as blind_predictions
    d = blind_predictions.load("attention_h200_s6s7")
    keys = ("variant", "schedule", "gpu", "shape", "params")
    assert [{k: e[k] for k in keys} for e in d["entries"]] == blind_predictions.SETS["attention_h200_s6s7"]()
    got = {(e["variant"], e["schedule"], e["params"].get("emulate_frac"), e["params"].get("threshold"))
           for e in d["entries"]}
    assert got == {("s6", "h200-s6-exp2", 0.0, None), ("s6_emu8", "h200-s6-exp2", 0.125, None),
                   ("s6_emu4", "h200-s6-exp2", 0.25, None), ("s7", "h200-s7-cond-rescale", 0.0, 8.0)}
    assert len(d["entries"]) == 4 * len(ba.DEFAULT_SHAPES)


def test_s9_blind_sets_hold_the_kernel_parameters_causal_and_not():
    from lapis.validate import blind as blind_predictions
    plain, causal = (blind_predictions.load(n)["entries"] for n in ("attention_h200_s9", "attention_h200_s9_causal"))
    base = dict(block_m=128, block_n=128, stages=3, consumer_wgs=2, regs_producer=40, regs_consumer=232,
                emulate_frac=0.0, threshold=8.0)
    assert [e["params"] for e in plain] == [base] * len(ba.DEFAULT_SHAPES)
    assert [e["params"] for e in causal] == [dict(base, causal=1, persistent_order="heavy_first")] * 5
    assert all(e["causal"] is True and e["schedule"] == "h200-s9-tuned" for e in causal)
    for e in causal:  # causal FLOPs: half of 4 B H L^2 D
        b, h, seq, dd = (int(x) for x in e["shape"].split("x"))
        assert abs(e["tflops"] - 2 * b * h * seq * seq * dd / e["predicted_us"] / 1e6) < 0.1


def test_the_load_free_diagnostic_is_s5_without_loads_and_never_a_default_or_a_table_row():
    assert instantiated("s5_noload") == ("2 128 2 true true true false 0 false false 1 false true false 1 false "
                                         "false false false false false false false false false false false").split()
    v = ba.VARIANTS["s5_noload"]
    differs = ("entry", "noload", "diagnostic", "blind", "sweep")  # never predicted, never a sweep row's kernel
    assert {k: x for k, x in v.items() if k not in differs} == {
        k: x for k, x in ba.VARIANTS["s5"].items() if k not in differs}
    assert (v["noload"], v["blind"], v["sweep"], v["diagnostic"]) == (True, None, (), "no K/V loads past the first fill")
    assert ba.kernel_name(v) == "attn_s5_noload_s2_n128_c2"
    r = subprocess.run([sys.executable, "-m", "lapis.gpu.bench_attention", "--help"], capture_output=True, text=True)
    assert r.returncode == 0
    assert "s5_noload" not in [n for n, x in ba.VARIANTS.items() if not x["diagnostic"]]


def test_the_clock_probe_reads_cycles_over_ns_per_cta():
    # two CTAs: 1800 cycles in 1000 ns and 3400 in 2000 ns; a third never wrote (zeros) and is left out
    words = [5, 1805, 100, 1100, 0, 3400, 50, 2050, 0, 0, 0, 0]
    r = ba.probe_clock(words)
    assert r["ctas"] == 2 and r["mhz"] == pytest.approx(1e3 * 5200 / 3000) and r["mhz_median"] == pytest.approx(1750)
    assert r["cta_us_median"] == pytest.approx(1.5) and ba.probe_clock([0] * 8) == dict(ctas=0)


@pytest.mark.parametrize("typed,named", [("--runs", "--runs >= 1"), ("--repeats", "--repeats >= 1")])
def test_a_bad_repeat_count_is_named_as_typed(tmp_path, capsys, typed, named):
    with pytest.raises(SystemExit) as e:
        ba.main([typed, "0", "--out", str(tmp_path / "out")])
    assert e.value.code == 2 and f"error: {named}, --warmup >= 0" in capsys.readouterr().err


def test_s10_work_list_holds_every_item_once_in_the_simulators_order():
    from lapis.gpu.bench_attention import worklist
    from lapis.pipeline_sim.work_order import kv_units_per_sm, section_heads

    v = ba.VARIANTS["s10"]
    wl = worklist(v, "8x16x4096x128", causal=True)
    offsets, items = wl[:133], wl[133:]
    assert wl.dtype == np.int32 and offsets[0] == 0 and offsets[-1] == len(items) == 4096
    assert sorted(items.tolist()) == list(range(4096))  # item = q tile + 32 x (b h)
    kv = [[int(i) % 32 + 1 for i in items[offsets[c]:offsets[c + 1]]] for c in range(132)]
    sim = kv_units_per_sm(128, 32, 32, 128, 128, True, 132, 1, "lpt_l2", section_heads(4096, 128))
    assert kv == [[u[0] for u in s] for s in sim]  # the kernel walks what the simulator dealt
    assert items[offsets[0]] == 31  # CTA 0 starts with the first section's longest Q tile (head 0, tile 31)
    plain = worklist(v, "32x16x1024x128", causal=False)
    assert np.diff(plain[:133]).tolist() == [32] * 4 + [31] * 128  # 4096 equal items over 132 CTAs


def test_s26_work_list_ends_on_pieces_and_carries_their_rows_counters_and_slots():
    from lapis.gpu.bench_attention import worklist

    wl = worklist(ba.VARIANTS["s26"], "8x16x4096x128", causal=False)
    offsets = wl[:133]
    assert offsets[-1] == 4092 + 32  # 31 items a CTA, then 4 items x 8 pieces on CTAs 0..31
    entries = wl[133:133 + offsets[-1]]
    assert np.diff(offsets).tolist() == [32] * 32 + [31] * 100
    assert [int(entries[offsets[c + 1] - 1]) for c in range(32)] == [-1 - i for i in range(32)]
    assert sorted(int(e) for e in entries if e >= 0) == list(range(4092))
    t = 133 + offsets[-1]
    assert (wl[t], wl[t + 1]) == (32, 4)  # pieces, split items
    rows = wl[t + 2:t + 2 + 6 * 32].reshape(32, 6)
    assert rows[:, 0].tolist() == [4092] * 8 + [4093] * 8 + [4094] * 8 + [4095] * 8  # the items left over
    assert rows[:8, 1].tolist() == [0, 4, 8, 12, 16, 20, 24, 28] and set(rows[:, 2].tolist()) == {4}
    assert rows[:, 3:].tolist() == [[g, r, 8] for g in range(4) for r in range(8)]
    slots = (t + 2 + 6 * 32 + 8 * 4 + 3) // 4 * 4  # the kernel's SplitTail::at
    assert len(wl) >= slots + 32 * 2 * 68 * 128 and not wl[t + 2 + 6 * 32:].any()  # counters and slots at 0
    causal = worklist(ba.VARIANTS["s26"], "8x16x4096x128", causal=True)
    assert causal[133 + 4096:133 + 4098].tolist() == [0, 0] and (causal[133:133 + 4096] >= 0).all()


def test_a_work_list_is_refused_for_what_the_kernel_cannot_walk():
    from lapis.gpu.bench_attention import worklist

    with pytest.raises(ScheduleError, match="variant that walks one"):
        worklist(ba.VARIANTS["s9"], "8x16x4096x128", False)
    with pytest.raises(ScheduleError, match="multiple of the kernel's block_m"):
        worklist(ba.VARIANTS["s10"], "1x1x200x128", False)  # would drop the last 72 Q rows
    with pytest.raises(ScheduleError, match="head dim 128"):
        worklist(ba.VARIANTS["s10"], "1x1x128x64", False)
    with pytest.raises(ScheduleError, match="sm_count is a positive whole number"):
        worklist(ba.VARIANTS["s10"], "1x1x256x128", False, sm_count=0)
