"""The schedules of kernels lapis did not write: h200-flash2 (FlashAttention-2, torch SDPA's flash backend) and
h200-fa4-sm90 (FA4's CuTe-DSL Hopper forward). The structural numbers are written here from the public sources
(flash-attention csrc/flash_attn/src/flash_fwd_launch_template.h, kernel_traits.h, softmax.h; flash_attn/cute/
interface.py, flash_fwd_sm90.py, tile_scheduler.py), never read from the modules under test."""

import pytest

from lapis.errors import ScheduleError
from lapis.model import warp_loop
from lapis.model.profile import load_profile
from lapis.pipeline_sim.schedules import fa2_flash, fa4_sm90
from lapis.pipeline_sim.simulate import simulate

P = load_profile("h200")


def run(name: str, shape: str, **params) -> dict:
    return simulate(name, "h200", shape, params)


# --- FlashAttention-2 -------------------------------------------------------------------------------------------

# head dim -> (kBlockM, kBlockN, kNWarps, kSmemSize B): run_mha_fwd_hdim64/128/256 on an sm90 part with 227 KiB per
# block and 228 KiB per SM; kSmemSize = (kBlockM + 2 kBlockN) D 2 B (Share_Q_K_smem false)
FA2_TRAITS = {64: (128, 128, 4, 49152), 128: (128, 64, 4, 65536), 256: (64, 64, 4, 98304)}


@pytest.mark.parametrize("d", sorted(FA2_TRAITS))
def test_flash2_takes_fa2s_sm90_traits_for_each_head_dim(d):
    bm, bn, warps, smem = FA2_TRAITS[d]
    prm, fit = fa2_flash.resolve(P, (8, 16, 4096, d), {})
    assert (prm["block_m"], prm["block_n"], prm["warps"]) == (bm, bn, warps)
    # 255 registers x 128 threads, allocated per warp in 256-register units: 2 CTAs of 32768 fill 65536
    assert fit["smem_bytes"] == smem and fit["ctas_per_sm"] == 2


def test_flash2_per_tile_costs_follow_the_source_and_sass_instruction_counts():
    c = fa2_flash.Flash2Costs.of(P, (1, 1, 1024, 128), dict(fa2_flash.DEFAULTS, loop_smsp=0), {})
    smsp_mma = P.per_ns("mma_sync_flop_per_clk_sm") / 4
    # a warp's 32 rows x 64 keys x D 128: (32/16) x (64/8) x (128/16) = 128 mma.sync m16n8k16 for QK, as many for PV
    # (the measured SASS: 256 HMMA per warp and tile)
    assert c.qk_ns == pytest.approx(128 * 4096 / smsp_mma) and c.pv_ns == pytest.approx(128 * 4096 / smsp_mma)
    mufu = 32 / (P.per_ns("mufu_ex2_per_clk_sm") / 4)
    fp32 = 32 / (P.per_ns("fma_per_clk_sm") / 4)
    # MUFU: 4 rescale factors + the first row's 16 exponentials before PV, the other 48 among PV (SASS: 68)
    assert (c.gap_mufu_ns, c.first_gap_mufu_ns, c.pv_mufu_ns) == pytest.approx((20 * mufu, 16 * mufu, 48 * mufu))
    # issue: row max 64 + 8 FMNMX and 8 SHFL; before PV 16 per-row ops, 16 x 7 for the first row, 16 for the
    # rescale factors' exp2f and 128 O FMUL; among PV 48 x 7 and 32 F2FP. Sum 720 of the SASS's 724 (its 72 FSETP
    # hold 4 more than one per exponential)
    assert c.max_issue_ns == pytest.approx(80 * fp32)
    assert (c.gap_issue_ns, c.first_gap_issue_ns, c.pv_issue_ns) == pytest.approx((272 * fp32, 128 * fp32,
                                                                                 368 * fp32))
    assert (c.qk_bytes, c.pv_bytes) == ((32 + 64) * 128 * 2, 64 * 128 * 2)  # Q re-read each tile, and K; V


def test_flash2_softmax_from_its_sass_by_the_smsp_model():
    c = fa2_flash.Flash2Costs.of(P, (1, 1, 1024, 128), dict(fa2_flash.DEFAULTS, softmax_smsp=1, loop_smsp=0), {})
    clk = 1 / P["clock_ghz"]
    # FA2's SASS (the ncu capture's K/V-tile loop, HMMA and LDSM left out): before PV's first mma.sync 326
    # instructions, 20 of them MUFU; among PV's 476, 48 MUFU. One issue per clock binds both (the alu pipe at 0.496
    # per clock takes 95 / 0.496 = 192 and 138 / 0.496 = 278 cycles); MUFU at the pipes capture's 0.12498560713571392
    xu = 0.12498560713571392
    assert (c.gap_issue_ns, c.pv_issue_ns) == pytest.approx((326 * clk, 476 * clk))
    assert (c.gap_mufu_ns, c.pv_mufu_ns) == pytest.approx((20 / xu * clk, 48 / xu * clk))
    # a CTA's first tile has no rescale: 16 of 20 MUFU; issue in softmax.h's counts 208 of 352 (row max 64 + 16,
    # per-row ops 16, the first row's 16 x 7; the rescale's 16 and 128 O FMUL)
    assert c.first_gap_mufu_ns == pytest.approx(16 / xu * clk)
    assert c.first_gap_issue_ns == pytest.approx(326 * 208 / 352 * clk)
    assert c.max_issue_ns == c.max_chain_ns == 0 and 0 < c.exp_tail_ns < 100 * clk
    assert run("h200-flash2", "4x16x1024x128", softmax_smsp=1, loop_smsp=0)["predicted_us"] > 0
    with pytest.raises(ScheduleError, match="softmax_smsp is 0 or 1"):
        run("h200-flash2", "1x2x1024x128", softmax_smsp=2, loop_smsp=0)


def test_in_order_issue_keeps_the_tensor_pipe_through_the_softmax_and_costs_time():
    assert run("h200-flash2", "4x16x1024x128", loop_smsp=0)["predicted_us"] > run(
        "h200-flash2", "4x16x1024x128", in_order=0, loop_smsp=0)["predicted_us"]
    with pytest.raises(ScheduleError, match="in_order is 0 or 1"):
        run("h200-flash2", "1x2x1024x128", in_order=2, loop_smsp=0)


def test_flash2_costs_its_tile_from_fa2s_compiled_loop_by_default():
    """loop_smsp = 1: a warp's tile is FA2's compiled loop on its sub-partition (lapis/data/warp_loops.json), two
    segments around the V barrier; the cycles of each are the committed file's (its own test rebuilds it from the
    SASS capture and holds it against Nsight Compute)."""
    c = fa2_flash.Flash2Costs.of(P, (1, 1, 1024, 128), dict(fa2_flash.DEFAULTS), {})
    seg = warp_loop.kernel(128, False)["loops"][-1]["segment_cycles"]
    assert c.loop_ns == pytest.approx(tuple(x / P["clock_ghz"] for x in seg))
    # 256 mma.sync per warp and tile, split by the barrier as the compiler placed them
    assert sum(c.loop_tensor_ns) == pytest.approx(256 * 4096 / (P.per_ns("mma_sync_flop_per_clk_sm") / 4))
    # the compiled loop is slower than the counts' view (its stall counts and ldmatrix wavefronts)
    assert run("h200-flash2", "4x16x1024x128")["predicted_us"] > run("h200-flash2", "4x16x1024x128",
                                                                     loop_smsp=0)["predicted_us"]


def test_each_part_of_a_compiled_tile_is_summed_once_per_run_from_the_file():
    """A warp's QK part is the segment between the barriers; its softmax + PV part the segment after the V barrier
    plus the one before the K barrier (the loop's code order); a peeled tile has its own two. Each part's issue,
    tensor, FP32 and MUFU times are in the run's costs, summed from the committed file's segments."""
    c = fa2_flash.Flash2Costs.of(P, (1, 1, 1024, 128), dict(fa2_flash.DEFAULTS, causal=1), {})
    k = warp_loop.kernel(128, True)
    clk = 1 / P["clock_ghz"]
    mma = 4096 / (P.per_ns("mma_sync_flop_per_clk_sm") / 4)  # ns of one m16n8k16 mma.sync on an SMSP
    fma, xu = 32 / (P.per_ns("fma_per_clk_sm") / 4), 32 / (P.per_ns("mufu_ex2_per_clk_sm") / 4)  # a warp-instruction

    def part(cycles, hmma, busy):
        return (sum(cycles) * clk, sum(hmma) * mma, sum(b.get("fma", 0) for b in busy) * fma,
                sum(b.get("xu", 0) for b in busy) * xu)
    lp = k["loops"][-1]
    cy, hm, bu = lp["segment_cycles"], lp["segment_hmma"], lp["segment_busy"]
    want = (part(cy[1:2], hm[1:2], bu[1:2]), part([cy[2], cy[0]], [hm[2], hm[0]], [bu[2], bu[0]]))
    assert [pytest.approx(x) for x in want] == list(c.loop_parts)
    assert len(c.peeled_parts) == len(k["peeled"]) == 2
    for got, t in zip(c.peeled_parts, k["peeled"]):
        for i in (0, 1):
            assert got[i] == pytest.approx(part([t["segment_cycles"][i]], [t["segment_hmma"][i]],
                                                [t["segment_busy"][i]]))


def test_the_compiled_loop_costs_only_fa2s_own_tiles():
    # another tile: the counts cost it unless the caller asks for the compiled loop, which is then refused
    assert run("h200-flash2", "1x2x1024x128", block_m=64, block_n=64, warps=4)["params"]["loop_smsp"] == 0
    with pytest.raises(ScheduleError, match="whose tile is FA2's"):
        run("h200-flash2", "1x2x1024x128", block_m=64, block_n=64, warps=4, loop_smsp=1)
    with pytest.raises(ScheduleError, match="loop_smsp is 0 or 1"):
        run("h200-flash2", "1x2x1024x128", loop_smsp=2)
    with pytest.raises(ScheduleError, match="count-based costs"):
        run("h200-flash2", "1x2x1024x128", softmax_smsp=1)


def test_flash2_causal_masks_the_first_ceil_bm_over_bn_tiles_and_exits_early():
    nc = run("h200-flash2", "4x16x2048x128")
    ca = run("h200-flash2", "4x16x2048x128", causal=1)
    # 64 heads x 16 Q tiles = 1024 CTAs (4 waves of 264 slots); Q tile t visits 2 (t + 1) of 32 K/V tiles causal
    assert nc["work"]["work_items"] == ca["work"]["work_items"] == 1024
    assert ca["work"]["kv_tiles_on_this_sm"] < nc["work"]["kv_tiles_on_this_sm"]
    c = fa2_flash.Flash2Costs.of(P, (1, 16, 2048, 128), dict(fa2_flash.DEFAULTS, causal=1), {})
    assert c.masking_steps == 2
    assert ca["predicted_us"] < nc["predicted_us"]


def test_flash2_runs_without_deadlock_or_race_and_longer_sequences_take_longer():
    short = simulate("h200-flash2", "h200", "1x4x512x128", check_races=True)
    long = run("h200-flash2", "1x4x2048x128")
    assert short["races"] == [] and long["predicted_us"] > short["predicted_us"]
    assert run("h200-flash2", "1x4x2048x64")["predicted_us"] > 0
    assert run("h200-flash2", "4x16x1024x256", causal=1)["predicted_us"] < run("h200-flash2", "4x16x1024x256")[
        "predicted_us"]


def test_flash2_race_log_orders_a_k_rewrite_only_through_syncthreads():
    from lapis.pipeline_sim.races import HappensBefore

    def run_log(sync: bool) -> list:
        log = fa2_flash.CtaLog(HappensBefore())
        log.landed[("K", 1)] = log.hb.access("cp.async K[1]", "K", 0, 1, "write")
        log.waited("w0", [("K", 1)]), log.waited("w1", [("K", 1)])  # cp.async.wait_group 0 in both warps
        log.read("w0", ("K", 1))
        if sync:  # the second __syncthreads of the tile: w0's read of K 1 is before w1 passes it
            log.arrive("w0", 1), log.arrive("w1", 1), log.passed("w1", 1)
        issued = log.hb.op("w1", "cp.async K[0]")
        log.hb.access("cp.async K[0]", "K", 0, 0, "write", after=issued)
        return log.hb.races()

    assert run_log(True) == []
    races = [str(r) for r in run_log(False)]
    assert len(races) == 1 and races[0].startswith(
        "race on K[0]: w0 reads token 1 and cp.async K[0] writes token 0 are not ordered by any barrier; cause: "
        "the slot was refilled before every access of the previous token was released to the writer")


def test_flash2_refuses_a_head_dim_without_traits_and_tiles_that_do_not_divide():
    with pytest.raises(ScheduleError, match="head dims 64, 128, 256"):
        run("h200-flash2", "1x2x1024x96")
    with pytest.raises(ScheduleError, match="multiple of both tiles"):
        run("h200-flash2", "1x2x1000x128")


# --- FA4 sm90 ---------------------------------------------------------------------------------------------------

# head dim -> (tile_m, tile_n, consumer warpgroups, producer regs, consumer regs): _tile_size_fwd_sm90 and
# FlashAttentionForwardSm90.__call__ ({2: (240, 24), 3: (160, 32)}); num_stages = 2 for all
FA4_CONFIGS = {64: (192, 128, 3, 32, 160), 128: (128, 128, 2, 24, 240), 256: (128, 80, 2, 24, 240)}


@pytest.mark.parametrize("d", sorted(FA4_CONFIGS))
def test_fa4_sm90_takes_fa4s_tiles_warpgroups_and_register_split(d):
    bm, bn, wgs, rp, rc = FA4_CONFIGS[d]
    r = run("h200-fa4-sm90", f"1x2x1920x{d}")
    prm = r["params"]
    assert (prm["block_m"], prm["block_n"], prm["consumer_wgs"], prm["stages"]) == (bm, bn, wgs, 2)
    assert (prm["regs_producer"], prm["regs_consumer"]) == (rp, rc)
    assert fa4_sm90.fa4_flags(d)["pingpong"] is (d <= 128)  # use_scheduler_barrier: head dim <= 128 only


def test_fa4_lpt_order_walks_sections_of_heads_longest_q_tile_first():
    # L 4096, D 128: one head's K and V are 4096 x 256 x 2 B = 2 MiB; 50 MiB holds 25, swizzle 16
    order = fa4_sm90.lpt_order(32, 32, 4096, 128)
    assert order[:3] == [(0, 31), (1, 31), (2, 31)] and order[16] == (0, 30)
    assert order[16 * 32] == (16, 31) and len(order) == 32 * 32


def test_fa4_sm90_causal_takes_less_time_and_longer_sequences_more():
    assert run("h200-fa4-sm90", "2x16x2048x128", causal=1)["predicted_us"] < run(
        "h200-fa4-sm90", "2x16x2048x128")["predicted_us"]
    assert run("h200-fa4-sm90", "1x16x4096x128")["predicted_us"] > run("h200-fa4-sm90", "2x16x1024x128")[
        "predicted_us"] > 0
    assert simulate("h200-fa4-sm90", "h200", "1x2x1024x128", check_races=True)["races"] == []


# --- cuDNN sm90 flash fprop -------------------------------------------------------------------------------------

def test_cudnn_fprop_takes_its_launch_facts():
    # launch: 384 threads = producer + 2 consumer WGs (setmaxnreg 24 / 240: mean 168 = launch__registers_per_thread),
    # one CTA per SM; 232448 B of shared memory: Q 32 KiB + 3 stages of K+V 64 KiB = 229376 B; name: block_n 128
    r = run("h200-cudnn-fprop", "8x16x4096x128")
    prm = r["params"]
    assert (prm["block_m"], prm["block_n"], prm["stages"], prm["consumer_wgs"]) == (128, 128, 3, 2)
    assert prm["regs_per_thread"] == 168 and r["fit"]["ctas_per_sm"] == 1
    assert r["fit"]["smem_bytes"] == 32768 + 3 * 65536


def test_cudnn_fprop_causal_takes_less_time_and_longer_sequences_more():
    assert run("h200-cudnn-fprop", "2x16x2048x128", causal=1)["predicted_us"] < run(
        "h200-cudnn-fprop", "2x16x2048x128")["predicted_us"]
    assert run("h200-cudnn-fprop", "1x16x4096x128")["predicted_us"] > run("h200-cudnn-fprop", "2x16x1024x128")[
        "predicted_us"]
    assert simulate("h200-cudnn-fprop", "h200", "1x2x1024x128", check_races=True)["races"] == []
