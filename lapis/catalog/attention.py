"""The Hopper attention kernel variants: one entry per kernel of lapis/gpu/kernels/attention_h200.cu, the one place
a variant is defined.

An entry names:
- entry: the kernel's entry point, attn_<entry>_s<stages>_n<block_n>_c<consumer_wgs> (kernel_name);
- every template parameter of attention<STAGES, BN, CONSUMER_WGS, WS, Features<PP, OVERLAP, EXP2, EMU, COND, PERSIST,
  Q_SLOTS, CAUSAL, NOLOAD, WORKLIST, CHAINS, DESC_INC, LATE_V, EARLY_PACK, ONE_SYNC, BAR_HOIST, EARLY_TEST,
  SPIN_WAIT, SLEEP_ACQUIRE, CROSS, EARLY_ITEM, DESC64, SPLIT_TAIL>>, in
  lower case
  (TEMPLATE, FEATURES): stages (K/V ring slots), block_n (keys per K/V tile), consumer_wgs (consumer warpgroups, 64 Q
  rows each), ws (a producer warpgroup), and the Features flags, each the step of the table that adds it
  (attention_h200.cu: pp s4's GEMM turns, overlap s5, exp2 s6, emu s6's software exp2 on 1/8 (4) or 1/4 (2) of the
  scores, cond s7, persist s8 with q_slots Q slots, causal, noload, worklist s10's host-made work list, chains s11's
  partial maxima and sums per softmax row, desc_inc s14's wgmma descriptors advanced by constant increments from one
  base per Q slot and K/V stage, late_v s15's GEMM turn that waits for V_{j-1} after issuing QK_j, early_pack s16's
  P_j packed before the conditional O rescale, one_sync s17's GEMM-turn wait as one bar.sync on a register barrier
  id, bar_hoist s18's consumer mbarrier addresses computed once and held in registers across the K/V-tile loop,
  early_test s19's next-turn K and V waits tested during the softmax side, spin_wait s20's turn waits as spins with no
  watchdog, sleep_acquire s21's producer waits suspended until their slot frees, cross s23's GEMM turns running on
  across a persistent CTA's work items, early_item s24's next item decoded a turn ahead and 1 / l taken before the
  last PV's turn, desc64 s25's wgmma descriptors as 64-bit values advanced by 64-bit adds, split_tail s26's last
  round of work items cut into pieces along K/V, merged by the last piece);
- schedule: the simulator schedule that mirrors it (lapis/pipeline_sim/schedules/attention_h200.py), and sim: the
  simulator parameters the kernel fixes beyond its tile geometry (setmaxnreg budgets in registers per thread,
  emulate_frac, threshold in log2 units; kernel_loop: the catalog key whose compiled consumer loop costs it, where
  several kernels share a schedule); sim_params adds block_m, block_n, stages and consumer_wgs;
- blind: the blind-prediction set that predicts it at DEFAULT_SHAPES (lapis/data/blind/<blind>.json; None: none);
- sweep: the schedules whose sweep rows may run on it (lapis.sweep.runnable; empty: none);
- diagnostic: None, or why it is never a table row nor a default of the benches;
- causal_build: None, or its causal build (the same template with causal true): its entry and blind set.

`python -m lapis.catalog.generate` writes the kernel's instantiation list from this table
(lapis/gpu/kernels/attention_variants.inc, one line per entry point, in table order), after check_template has held
every entry and causal build to the template's rules (RULES: attention_h200.cu's static_asserts, ScheduleError
naming the rule and the flags it reads); lapis.gpu.bench_attention
builds and times the variants, lapis.validate.blind predicts them, lapis.sweep.runnable maps sweep rows onto them.
"""

from __future__ import annotations

from lapis.errors import ScheduleError

TEMPLATE = ("stages", "block_n", "consumer_wgs", "ws")  # attention<STAGES, BN, CONSUMER_WGS, WS, F>
FEATURES = ("pp", "overlap", "exp2", "emu", "cond", "persist", "q_slots", "causal", "noload", "worklist",
            "chains", "desc_inc", "late_v", "early_pack", "one_sync", "bar_hoist", "early_test",
            "spin_wait", "sleep_acquire", "cross", "early_item", "desc64", "split_tail")  # Features<...>

_S3_REGS = dict(regs_producer=24, regs_consumer=240)  # 24 x 128 + 240 x 256 = 64512 of 65536 registers
_S8_REGS = dict(regs_producer=40, regs_consumer=232)  # 40 x 128 + 232 x 256: at 24 the producer's item loop spills

VARIANTS = {
    "s1": dict(entry="s1_serial", stages=1, block_n=128, consumer_wgs=1, ws=False,
               pp=False, overlap=False, exp2=False, emu=0, cond=False, persist=False, q_slots=1, causal=False,
               noload=False, worklist=False, chains=1, desc_inc=False, late_v=False, early_pack=False,
               one_sync=False, bar_hoist=False, early_test=False, spin_wait=False, sleep_acquire=False,
               cross=False, early_item=False, desc64=False, split_tail=False,
               schedule="h200-s1-serial", sim={}, blind="attention_h200",
               sweep=("h200-s1-serial",), diagnostic=None, causal_build=None),
    "s2": dict(entry="s2_ws_ring", stages=2, block_n=128, consumer_wgs=1, ws=True,
               pp=False, overlap=False, exp2=False, emu=0, cond=False, persist=False, q_slots=1, causal=False,
               noload=False, worklist=False, chains=1, desc_inc=False, late_v=False, early_pack=False,
               one_sync=False, bar_hoist=False, early_test=False, spin_wait=False, sleep_acquire=False,
               cross=False, early_item=False, desc64=False, split_tail=False,
               schedule="h200-s2-ws-ring", sim={}, blind="attention_h200",
               sweep=("h200-s2-ws-ring",), diagnostic=None, causal_build=None),
    "s3": dict(entry="s3_two_consumers", stages=2, block_n=128, consumer_wgs=2, ws=True,
               pp=False, overlap=False, exp2=False, emu=0, cond=False, persist=False, q_slots=1, causal=False,
               noload=False, worklist=False, chains=1, desc_inc=False, late_v=False, early_pack=False,
               one_sync=False, bar_hoist=False, early_test=False, spin_wait=False, sleep_acquire=False,
               cross=False, early_item=False, desc64=False, split_tail=False,
               schedule="h200-s3-two-consumers", sim=dict(_S3_REGS), blind="attention_h200_s3s4",
               sweep=("h200-s3-two-consumers",), diagnostic=None, causal_build=None),
    "s4": dict(entry="s4_pingpong", stages=2, block_n=128, consumer_wgs=2, ws=True,
               pp=True, overlap=False, exp2=False, emu=0, cond=False, persist=False, q_slots=1, causal=False,
               noload=False, worklist=False, chains=1, desc_inc=False, late_v=False, early_pack=False,
               one_sync=False, bar_hoist=False, early_test=False, spin_wait=False, sleep_acquire=False,
               cross=False, early_item=False, desc64=False, split_tail=False,
               schedule="h200-s4-pingpong", sim=dict(_S3_REGS), blind="attention_h200_s4",
               sweep=("h200-s4-pingpong",), diagnostic=None, causal_build=None),
    "s5": dict(entry="s5_intra_overlap", stages=2, block_n=128, consumer_wgs=2, ws=True,
               pp=True, overlap=True, exp2=False, emu=0, cond=False, persist=False, q_slots=1, causal=False,
               noload=False, worklist=False, chains=1, desc_inc=False, late_v=False, early_pack=False,
               one_sync=False, bar_hoist=False, early_test=False, spin_wait=False, sleep_acquire=False,
               cross=False, early_item=False, desc64=False, split_tail=False,
               schedule="h200-s5-intra-overlap", sim=dict(_S3_REGS), blind="attention_h200_s5",
               sweep=("h200-s5-intra-overlap",), diagnostic=None, causal_build=None),
    # s5 with the loads dropped past the ring's first fill (the producer still takes and frees every slot): its
    # output is not attention and its correctness is not counted; its time is s5's compute structure alone
    # (captures under lapis/data/captures/diagnostic)
    "s5_noload": dict(entry="s5_noload", stages=2, block_n=128, consumer_wgs=2, ws=True,
                      pp=True, overlap=True, exp2=False, emu=0, cond=False, persist=False, q_slots=1, causal=False,
                      noload=True, worklist=False, chains=1, desc_inc=False, late_v=False, early_pack=False,
                      one_sync=False, bar_hoist=False, early_test=False, spin_wait=False, sleep_acquire=False,
                      cross=False, early_item=False, desc64=False, split_tail=False,
                      schedule="h200-s5-intra-overlap", sim=dict(_S3_REGS), blind=None, sweep=(),
                      diagnostic="no K/V loads past the first fill", causal_build=None),
    "s6": dict(entry="s6_exp2", stages=2, block_n=128, consumer_wgs=2, ws=True,
               pp=True, overlap=True, exp2=True, emu=0, cond=False, persist=False, q_slots=1, causal=False,
               noload=False, worklist=False, chains=1, desc_inc=False, late_v=False, early_pack=False,
               one_sync=False, bar_hoist=False, early_test=False, spin_wait=False, sleep_acquire=False,
               cross=False, early_item=False, desc64=False, split_tail=False,
               schedule="h200-s6-exp2", sim=dict(_S3_REGS, emulate_frac=0.0),
               blind="attention_h200_s6s7", sweep=("h200-s6-exp2",), diagnostic=None, causal_build=None),
    "s6_emu8": dict(entry="s6_exp2_emu8", stages=2, block_n=128, consumer_wgs=2, ws=True,
                    pp=True, overlap=True, exp2=True, emu=4, cond=False, persist=False, q_slots=1, causal=False,
                    noload=False, worklist=False, chains=1, desc_inc=False, late_v=False, early_pack=False,
                    one_sync=False, bar_hoist=False, early_test=False, spin_wait=False, sleep_acquire=False,
                    cross=False, early_item=False, desc64=False, split_tail=False,
                    schedule="h200-s6-exp2", sim=dict(_S3_REGS, emulate_frac=0.125),
                    blind="attention_h200_s6s7", sweep=("h200-s6-exp2",), diagnostic=None, causal_build=None),
    "s6_emu4": dict(entry="s6_exp2_emu4", stages=2, block_n=128, consumer_wgs=2, ws=True,
                    pp=True, overlap=True, exp2=True, emu=2, cond=False, persist=False, q_slots=1, causal=False,
                    noload=False, worklist=False, chains=1, desc_inc=False, late_v=False, early_pack=False,
                    one_sync=False, bar_hoist=False, early_test=False, spin_wait=False, sleep_acquire=False,
                    cross=False, early_item=False, desc64=False, split_tail=False,
                    schedule="h200-s6-exp2", sim=dict(_S3_REGS, emulate_frac=0.25),
                    blind="attention_h200_s6s7", sweep=("h200-s6-exp2",), diagnostic=None, causal_build=None),
    "s7": dict(entry="s7_cond_rescale", stages=2, block_n=128, consumer_wgs=2, ws=True,
               pp=True, overlap=True, exp2=True, emu=0, cond=True, persist=False, q_slots=1, causal=False,
               noload=False, worklist=False, chains=1, desc_inc=False, late_v=False, early_pack=False,
               one_sync=False, bar_hoist=False, early_test=False, spin_wait=False, sleep_acquire=False,
               cross=False, early_item=False, desc64=False, split_tail=False,
               schedule="h200-s7-cond-rescale", sim=dict(_S3_REGS, emulate_frac=0.0, threshold=8.0),
               blind="attention_h200_s6s7", sweep=("h200-s7-cond-rescale",), diagnostic=None, causal_build=None),
    # s8: s7 on a persistent grid (one CTA per SM, grid-stride work items, two Q slots)
    "s8": dict(entry="s8_persistent", stages=2, block_n=128, consumer_wgs=2, ws=True,
               pp=True, overlap=True, exp2=True, emu=0, cond=True, persist=True, q_slots=2, causal=False,
               noload=False, worklist=False, chains=1, desc_inc=False, late_v=False, early_pack=False,
               one_sync=False, bar_hoist=False, early_test=False, spin_wait=False, sleep_acquire=False,
               cross=False, early_item=False, desc64=False, split_tail=False,
               schedule="h200-s8-persistent",
               sim=dict(_S8_REGS, emulate_frac=0.0, threshold=8.0),
               blind="attention_h200_s8", sweep=("h200-s8-persistent", "h200-s9-tuned"), diagnostic=None,
               causal_build=None),
    # s9: s8 at the simulator's tuned defaults (3 stages leave room for one Q slot: the next item's Q loads once both
    # warpgroups' last QK of this one completed); its causal build visits K/V tiles 0..t for Q tile t, heaviest first
    "s9": dict(entry="s9_tuned", stages=3, block_n=128, consumer_wgs=2, ws=True,
               pp=True, overlap=True, exp2=True, emu=0, cond=True, persist=True, q_slots=1, causal=False,
               noload=False, worklist=False, chains=1, desc_inc=False, late_v=False, early_pack=False,
               one_sync=False, bar_hoist=False, early_test=False, spin_wait=False, sleep_acquire=False,
               cross=False, early_item=False, desc64=False, split_tail=False,
               schedule="h200-s9-tuned",
               sim=dict(_S8_REGS, emulate_frac=0.0, threshold=8.0),
               blind="attention_h200_s9", sweep=("h200-s9-tuned", "h200-s8-persistent"), diagnostic=None,
               causal_build=dict(entry="s9_tuned_causal", blind="attention_h200_s9_causal")),
    # s10: s9 walking a work list the host made (lapis.pipeline_sim.work_order, order lpt_l2): the heads in L2
    # sections of section_heads(L, D), each section's Q tiles longest first, each to the SM with the least K/V
    # tiles so far (FA4's sm90 causal scheduler orders its grid alike: flash_attn/cute/tile_scheduler.py
    # SingleTileLPTScheduler); its causal build as s9's
    "s10": dict(entry="s10_worklist", stages=3, block_n=128, consumer_wgs=2, ws=True,
                pp=True, overlap=True, exp2=True, emu=0, cond=True, persist=True, q_slots=1, causal=False,
                noload=False, worklist=True, chains=1, desc_inc=False, late_v=False, early_pack=False,
                one_sync=False, bar_hoist=False, early_test=False, spin_wait=False, sleep_acquire=False,
                cross=False, early_item=False, desc64=False, split_tail=False,
                schedule="h200-s9-tuned",
                sim=dict(_S8_REGS, emulate_frac=0.0, threshold=8.0, persistent_order="lpt_l2"),
                blind="attention_h200_s10", sweep=(), diagnostic=None,
                causal_build=dict(entry="s10_worklist_causal", blind="attention_h200_s10")),
    # s11: s10 with four independent partial maxima and sums per softmax row (FA4's sm90 forward keeps four
    # partial maxima: flash_attn/cute/utils.py fmax_reduce); the simulator costs it by
    # lapis.model.softmax_body.chain_factor
    "s11": dict(entry="s11_chains", stages=3, block_n=128, consumer_wgs=2, ws=True,
                pp=True, overlap=True, exp2=True, emu=0, cond=True, persist=True, q_slots=1, causal=False,
                noload=False, worklist=True, chains=4, desc_inc=False, late_v=False, early_pack=False,
                one_sync=False, bar_hoist=False, early_test=False, spin_wait=False, sleep_acquire=False,
                cross=False, early_item=False, desc64=False, split_tail=False,
                schedule="h200-s9-tuned",
                sim=dict(_S8_REGS, emulate_frac=0.0, threshold=8.0, persistent_order="lpt_l2", softmax_chains=4),
                blind="attention_h200_s11", sweep=(), diagnostic=None,
                causal_build=dict(entry="s11_chains_causal", blind="attention_h200_s11")),
    # s12: s11 at 2 stages with 2 Q slots (s8's split of shared memory): the next item's Q loads while this one
    # runs, for one K/V stage less
    "s12": dict(entry="s12_two_q", stages=2, block_n=128, consumer_wgs=2, ws=True,
                pp=True, overlap=True, exp2=True, emu=0, cond=True, persist=True, q_slots=2, causal=False,
                noload=False, worklist=True, chains=4, desc_inc=False, late_v=False, early_pack=False,
                one_sync=False, bar_hoist=False, early_test=False, spin_wait=False, sleep_acquire=False,
                cross=False, early_item=False, desc64=False, split_tail=False,
                schedule="h200-s9-tuned",
                sim=dict(_S8_REGS, emulate_frac=0.0, threshold=8.0, persistent_order="lpt_l2", softmax_chains=4,
                         q_slots=2),
                blind="attention_h200_s12", sweep=(), diagnostic=None,
                causal_build=dict(entry="s12_two_q_causal", blind="attention_h200_s12")),
}
# s13: s12 with one chain per softmax row again (s11's four chains ran 1-3% slower than s10 on the H200)
VARIANTS["s13"] = dict(VARIANTS["s12"], entry="s13_two_q_one_chain", chains=1, blind="attention_h200_s13",
                       sim=dict(_S8_REGS, emulate_frac=0.0, threshold=8.0, persistent_order="lpt_l2", q_slots=2),
                       causal_build=dict(entry="s13_two_q_one_chain_causal", blind="attention_h200_s13"))
# s14: s13 with each wgmma descriptor a base descriptor (per Q slot, K/V stage) plus a constant per K-step, not rebuilt
# from the shared-memory address (attention_h200.cu desc_lo, desc_at): 541 instructions in the K/V-tile loop, not 602
VARIANTS["s14"] = dict(VARIANTS["s13"], entry="s14_desc_inc", desc_inc=True, blind="attention_h200_s14",
                       causal_build=dict(entry="s14_desc_inc_causal", blind="attention_h200_s14"))
# s15: s14 with the GEMM turn's V_{j-1} wait after QK_j's issue (FA4's sm90 forward's order): V_{j-1}, loaded after K_j,
# is waited for while QK_j runs instead of before it is issued
VARIANTS["s15"] = dict(VARIANTS["s14"], entry="s15_late_v", late_v=True, blind="attention_h200_s15",
                       sim=dict(VARIANTS["s14"]["sim"], late_v=1),
                       causal_build=dict(entry="s15_late_v_causal", blind="attention_h200_s15"))
# s16: s15 with P_j packed to bf16 right after PV_{j-1}'s wait, before the conditional O rescale's branch, so the
# packs interleave with the exponentials (FA4's sm90 forward's order); s15 packs them as a block after the branch.
# Its softmax side is costed as s15's is, with two softmax warps per SMSP (side_warps 2): Nsight Compute's stall
# samples put s19's softmax span within 1% of FA4's (diagnostic/h200-2026-12-02-s19-source, lapis.model.stall_samples),
# which the two-warp ratio (0.95 of the microbenchmark's loop) follows and the one-warp ratio (0.85) does not
VARIANTS["s16"] = dict(VARIANTS["s15"], entry="s16_early_pack", early_pack=True, blind="attention_h200_s16",
                       causal_build=dict(entry="s16_early_pack_causal", blind="attention_h200_s16"))
# s17: s16 with the GEMM turn's wait as one bar.sync on barrier PP_BAR0 + wg, its id in a register (FA4's sm90
# forward's turn), where s16 issues two predicated bar.syncs with immediate ids, one per warpgroup
VARIANTS["s17"] = dict(VARIANTS["s16"], entry="s17_one_sync", one_sync=True, blind="attention_h200_s17",
                       causal_build=dict(entry="s17_one_sync_causal", blind="attention_h200_s17"))
# s18: s17 with the consumer's mbarrier addresses (K/V ring full and empty, q_empty) computed once before the item loop
# and held in uniform registers, where s17 rebuilds each from SR_CgaCtaId at every wait and arrive of the loop
VARIANTS["s18"] = dict(VARIANTS["s17"], entry="s18_bar_hoist", bar_hoist=True, blind="attention_h200_s18",
                       causal_build=dict(entry="s18_bar_hoist_causal", blind="attention_h200_s18"))
# s19: s18 with the next turn's K_{j+1} and V_j waits tested (mbarrier.test_wait, non-blocking) right after this turn's
# exponentials: a turn whose tiles the test saw landed skips the try_wait whose result s18 waits for at the turn's
# start (K) and between its wgmma groups (V), on the chain that hands the tensor pipe to the other warpgroup
VARIANTS["s19"] = dict(VARIANTS["s18"], entry="s19_early_test", early_test=True, blind="attention_h200_s19",
                       causal_build=dict(entry="s19_early_test_causal", blind="attention_h200_s19"))
# s20: s18 with the turn's K_j and V_{j-1} waits as CUTLASS's spin (no watchdog deadline in the retry loop), which ptxas
# compiles falling through when the tile has landed, its retry out of line: s18's waits branch over their inline retry
# code every time, and Nsight Compute's source page of s19 puts about 14 cycles of instruction-fetch wait at each such
# branch target (diagnostic/h200-2026-12-02-s19-source)
VARIANTS["s20"] = dict(VARIANTS["s18"], entry="s20_spin_wait", spin_wait=True, blind="attention_h200_s20",
                       causal_build=dict(entry="s20_spin_wait_causal", blind="attention_h200_s20"))
# s21: s20 with the producer's waits for a free K/V or Q slot suspended until the slot frees (try_wait's
# suspendTimeHint), where s20's producer retries about three times a tile load, a %globaltimer read, a compare, a
# try_wait and a branch each, on the SMSP that two consumer warps share (s20's Nsight Compute source page, in git at
# 9236b8b)
VARIANTS["s21"] = dict(VARIANTS["s20"], entry="s21_sleep_acquire", sleep_acquire=True, blind="attention_h200_s21",
                       causal_build=dict(entry="s21_sleep_acquire_causal", blind="attention_h200_s21"))
# s22: s21 with each row's max and sum over a tile in two independent partial chains (FA4's sm90 forward keeps
# several: its row-max tree has four running FMNMX values), where s21 runs one (s11's four ran 1-3% slower than s10)
VARIANTS["s22"] = dict(VARIANTS["s21"], entry="s22_two_chains", chains=2, blind="attention_h200_s22",
                       causal_build=dict(entry="s22_two_chains_causal", blind="attention_h200_s22"))
# s23: s22 with the GEMM turns running on across a persistent CTA's work items: the next item's QK_0 is issued in the
# turn of this item's last PV and its softmax runs beside it, this item's O stored after that PV's wait; s22 drains the
# turns at each item's end and fills them again (the per-item cost that short sequences pay most). Predicted blind
# 3.5-7.2% slower than s22; measured (race/h200-2026-12-03-s23, per round) -1.4..+2.4%, gaining at the short and causal
# shapes and losing 0.9-1.4% at the long non-causal ones, where its middle turn's SASS costs about 1.5% more a tile
VARIANTS["s23"] = dict(VARIANTS["s22"], entry="s23_cross", cross=True, blind="attention_h200_s23",
                       sim=dict(VARIANTS["s22"]["sim"], cross_item=1),
                       causal_build=dict(entry="s23_cross_causal", blind="attention_h200_s23"))
# s24: s23 with the item boundary's scalar work off its critical path (Nsight Compute's stall samples of s21 per item
# and consumer warp, from its source page, in git at 9236b8b: the work-list entry's load and
# decode, and the quad sums and reciprocals of l, ran between an item's last GEMM turn and the next's first): the
# next entry decoded a turn after its load, 1 / l taken after the item's last softmax. The simulator costs none of
# that scalar work. Predicted blind 1.5-3.3% faster than s23 (from its loop's SASS alone); measured
# (race/h200-2026-12-03-s24, per round) -2.3..+3.6%, no change at the short shapes where the moved work was to show
VARIANTS["s24"] = dict(VARIANTS["s23"], entry="s24_early_item", early_item=True, blind="attention_h200_s24",
                       causal_build=dict(entry="s24_early_item_causal", blind="attention_h200_s24"))
# s25: s24 with the GEMM turns' wgmma descriptors as 64-bit values, Q's built once per item, K's and V's advanced by
# one 64-bit add per K-step (UIADD3.64, as FA4's sm90 forward's SASS has them), where s24 adds the low word and moves
# the high word for each (UIADD3 + UMOV): its consumer loop issues 491 instructions a K/V tile against s24's 511.
# Predicted blind +0.0..+0.15% against s24 (the model gives the uniform pipe's issue no tensor-pipe cycles);
# measured (race/h200-2026-12-03-s25, per round against s24) -4.8..+4.0% by shape, within noise, and in cycles at
# the bracket clock -1.5..+1.4%; Nsight Compute (ncu/h200-2026-12-03-s25) counts 483.9 M instructions against
# s24's 504.4 M (FA4's sm90 forward 490.3 M), uniform 41.5 M against 50.1 M, and 2.655 M cycles against 2.652 M:
# the instructions were not what sets the loop's period
VARIANTS["s25"] = dict(VARIANTS["s24"], entry="s25_desc64", desc64=True, blind="attention_h200_s25",
                       causal_build=dict(entry="s25_desc64_causal", blind="attention_h200_s25"))
# s26: s25 with the last round of work items split along K/V (non-causal runs): where the items do not divide evenly
# over the CTAs (every one of the five shapes has 4096 items, 31.03 a CTA), the r items left after the equal shares are
# cut into pieces of at least 4 K/V tiles that r x pieces CTAs run at once, each piece's partial O, m and l merged by
# the last to finish (attention_h200.cu store_piece); s25 runs them whole on r CTAs while the others wait.
# Predicted blind +2.7..+3.2% against s25 non-causal and +2.6..+5.7% causal (where nothing is split): the split alone
# gives -0.8..-2.5% (the representative SM's 32nd item becomes a piece of 4 K/V tiles and a merge), but s26's own
# consumer loop, two instructions longer in its softmax side, costs 1448 cycles for the softmax pair against s25's 1271.
# Measured (race/h200-2026-12-03-s26, per round against s25, in cycles at the bracket clock): -1.7..-3.5% non-causal,
# -1.2..+0.4% causal; Nsight Compute at 8x16x4096x128 (ncu/h200-2026-12-03-s26): 2.598 M cycles against 2.671 M, the
# SMs active 97.9% of them against 95.7% (FA4's sm90 forward 98.0%). The split's gain held (larger than predicted at
# 2048 and 4096); the loop's predicted cost did not (the causal build, split nowhere, runs as s25 does)
VARIANTS["s26"] = dict(VARIANTS["s25"], entry="s26_split_tail", split_tail=True, blind="attention_h200_s26",
                       sim=dict(VARIANTS["s25"]["sim"], persistent_order="split_tail"),
                       causal_build=dict(entry="s26_split_tail_causal", blind="attention_h200_s26"))
# they share h200-s9-tuned: each is costed from its own SASS
for _k in ("s10", "s11", "s12", "s13", "s14", "s15", "s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23", "s24",
           "s25", "s26"):
    VARIANTS[_k]["sim"] = dict(VARIANTS[_k]["sim"], kernel_loop=_k)
DEFAULT_SHAPES = ("8x16x4096x128", "4x16x8192x128", "2x16x16384x128", "16x16x2048x128", "32x16x1024x128")
SMALL_SHAPE = "1x2x512x128"


# The template's rules, each the static_assert of attention_h200.cu (Features, KV, Config, attention) with its message,
# so a catalog entry nvcc would refuse is refused by name before the instantiation list is written; each lambda takes
# the template parameters it reads, by name
RULES = (
    (lambda noload, pp, persist: not noload or (pp and not persist),
     "the load-free diagnostic is of the GEMM-turn kernels, one item a CTA"),
    (lambda causal, persist, overlap: not causal or (persist and overlap),
     "the causal build is of the persistent overlap kernel (s9)"),
    (lambda worklist, persist: not worklist or persist, "a work list is walked by a persistent CTA"),
    (lambda chains, exp2: chains == 1 or (chains in (2, 4) and exp2), "1, or 2 or 4 chains on the ex2 path"),
    (lambda desc_inc, pp: not desc_inc or pp, "the incremented descriptors are the GEMM-turn path's (s4+)"),
    (lambda late_v, overlap: not late_v or overlap,
     "the late V wait is of the overlap turn (s5+), which issues QK_j first"),
    (lambda early_pack, overlap, cond: not early_pack or (overlap and cond),
     "the early pack moves P_j ahead of s7's conditional O rescale"),
    (lambda one_sync, pp: not one_sync or pp, "the one-sync turn wait is of the GEMM turns (s4+)"),
    (lambda bar_hoist, overlap, persist: not bar_hoist or (overlap and persist),
     "the hoisted addresses are of the persistent overlap turn (s8+)"),
    (lambda early_test, bar_hoist, late_v: not early_test or (bar_hoist and late_v),
     "the early tests use s18's held addresses and s15's late V wait"),
    (lambda spin_wait, bar_hoist, late_v, early_test: not spin_wait or (bar_hoist and late_v and not early_test),
     "the spin waits replace s18's turn waits"),
    (lambda sleep_acquire, pp, persist: not sleep_acquire or (pp and persist),
     "the sleeping waits are of the persistent GEMM-turn producer (s8+)"),
    (lambda cross, overlap, persist, exp2: not cross or (overlap and persist and exp2),
     "the cross-item turn is of the persistent overlap turn (s8+)"),
    (lambda early_item, cross, worklist: not early_item or (cross and worklist),
     "the early item work is of s23's cross-item loop over a work list"),
    (lambda desc64, desc_inc: not desc64 or desc_inc, "the 64-bit descriptor adds replace s14's low-word increments"),
    (lambda split_tail, early_item: not split_tail or early_item,
     "the split tail's pieces end s24's cross-item loop over a work list"),
    (lambda q_slots, persist: q_slots == 1 or (q_slots == 2 and persist),
     "two Q slots serve a persistent CTA's next item"),
    (lambda persist, pp: not persist or pp, "the persistent loop is written for the GEMM-turn path (s4+)"),
    (lambda emu: emu in (0, 2, 4), "EMU 4 (1/8 of the exponentials), 2 (1/4) or 0"),
    (lambda emu, cond, exp2: (not emu and not cond) or exp2,
     "the software exp2 and the conditional rescale build on s6's exp2 path"),
    (lambda block_n: block_n in (64, 128), "attention_plan.h plans K/V tiles for BN = 64 and 128"),
    (lambda consumer_wgs, ws: consumer_wgs == 1 or (consumer_wgs == 2 and ws),
     "1 consumer WG (s1, s2) or 2 with a producer (s3+)"),
    (lambda ws, stages: ws or stages == 1, "the serial kernel has one slot"),
    (lambda pp, consumer_wgs: not pp or consumer_wgs == 2, "ping-pong alternates two consumer warpgroups"),
    (lambda overlap, pp: not overlap or pp, "s5 overlaps within s4's GEMM turns"),
)


INT_PARAMS = ("stages", "block_n", "consumer_wgs", "emu", "q_slots", "chains")  # the template's int parameters


def _typed(key: str, value) -> bool:
    """value is a Python int for INT_PARAMS, True or False for every other template parameter."""
    return (isinstance(value, int) and not isinstance(value, bool)) if key in INT_PARAMS else isinstance(value, bool)


def _reads(holds) -> tuple:
    """The template parameters a rule reads: its lambda's parameter names."""
    return holds.__code__.co_varnames[:holds.__code__.co_argcount]


def check_template(v: dict, causal: bool = False) -> None:
    """ScheduleError naming the first of RULES (a static_assert of attention_h200.cu) that entry `v` breaks (its
    causal build when `causal`), with the template values the rule reads; nothing when it keeps them all."""
    flags = dict(v, causal=causal)
    missing = [k for k in TEMPLATE + FEATURES if k not in flags]
    if missing:
        raise ScheduleError("a catalog entry names every template parameter (TEMPLATE + FEATURES)",
                            f"{v.get('entry')}: missing {missing}", "add them to the entry, as s1's lists them")
    wrong = {k: flags[k] for k in TEMPLATE + FEATURES if not _typed(k, flags[k])}
    if wrong:
        raise ScheduleError(f"a catalog entry's {', '.join(INT_PARAMS)} are integers and its other template "
                            "parameters True or False (attention_variants.inc writes them as C++ literals)",
                            f"{v.get('entry')}: {wrong}", "write each flag as True or False, each count as an int")
    check_split_tail(v)
    for holds, rule in RULES:
        values = {k: flags[k] for k in _reads(holds)}
        if not holds(**values):
            raise ScheduleError(f"attention_h200.cu static_assert: {rule}", f"{v.get('entry')}"
                                f"{' (causal build)' if causal else ''}: {values}",
                                "change the entry's flags so the rule holds, or drop the flag that needs the "
                                "others (the module docstring names the step each flag belongs to)")


def check_split_tail(v: dict) -> None:
    """ScheduleError unless entry `v`'s split_tail flag and its simulator's persistent_order=split_tail go together:
    the kernel built with SPLIT_TAIL reads the pieces the work list deals in that order, and a kernel without it
    would read a piece's negative entry as an item."""
    order = (v.get("sim") or {}).get("persistent_order")
    if bool(v.get("split_tail")) != (order == "split_tail"):
        raise ScheduleError("a catalog entry's split_tail flag and its sim persistent_order=split_tail go together "
                            "(the kernel walks the pieces that order deals)",
                            f"{v.get('entry')}: split_tail={v.get('split_tail')!r}, persistent_order={order!r}",
                            "set both, or neither (as s26 and s25 do)")


def block_m(v: dict) -> int:
    """Q rows per CTA tile: one wgmma m64 per consumer warpgroup (attention_h200.cu Config::BLOCK_M)."""
    return 64 * v["consumer_wgs"]


def kernel_name(v: dict, causal: bool = False) -> str:
    """The entry point of the variant (causal: of its causal build)."""
    entry = v["causal_build"]["entry"] if causal else v["entry"]
    return f"attn_{entry}_s{v['stages']}_n{v['block_n']}_c{v['consumer_wgs']}"


def sim_params(v: dict, causal: bool = False) -> dict:
    """The simulator parameters the kernel fixes: its tile geometry and `sim` (setmaxnreg budgets only where the
    kernel sets them: s3+); the causal build adds causal = 1 and its work order (heaviest Q tiles first, dealt
    grid-stride) unless the variant walks a work list (its own persistent_order, causal or not)."""
    out = dict(block_m=block_m(v), block_n=v["block_n"], stages=v["stages"], consumer_wgs=v["consumer_wgs"], **v["sim"])
    if not causal:
        return out
    return dict(out, causal=1) if v["worklist"] else dict(out, causal=1, persistent_order="heavy_first")

