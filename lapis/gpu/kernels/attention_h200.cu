// lapis Hopper attention forward for sm_90a: O = softmax(Q K^T / sqrt(D)) V, bf16 in and out, fp32 accumulate,
// D = 128, B x H x L x D contiguous; non-causal except s9's causal build. Rows s1..s9 of the canonical Hopper table,
// the schedules lapis/pipeline_sim/schedules/attention_h200.py simulates, written role by role:
//
// h200-s1-serial  (WS = false; 1 warpgroup, block_m 64, block_n 128, 1 stage). Per K/V tile j, thread 0 waits
//                 until the slot is free (the warps' arrivals after the last PV), issues TMA K_j and V_j, then
//                 the warpgroup waits K_j, runs S = Q K_j^T (wgmma SS), waits it, does the softmax in registers,
//                 waits V_j, runs O += P V_j (wgmma RS: P in registers, V MN-major), and waits it.
// h200-s2-ws-ring (WS = true; + a producer warpgroup whose thread 0 issues the TMA into a K/V ring of STAGES
//                 slots, full_k/full_v/empty mbarriers; setmaxnreg down for it, up for the consumer). The
//                 consumer is s1's, without the loads.
// h200-s3-two-consumers (WS = true, CONSUMER_WGS = 2; block_m 128). The producer loads a 128-row Q tile; consumer
//                 warpgroup i (threads 128 (i + 1) ..) takes rows 64 i .. 64 i + 63 of it (its A descriptor starts
//                 at Q128_HALF_START[i]) and runs s2's loop on the shared K/V ring; empty[s] counts the arrivals
//                 of both warpgroups' warps (8). setmaxnreg: 24 for the producer, 240 for each consumer
//                 (24 x 128 + 240 x 256 = 64512 of the SM's 65536; the launch count is 65536 / 384 -> 168).
// h200-s4-pingpong (s3 + PP = true): the consumer warpgroups take GEMM turns through named barriers, as
//                 FlashAttention-3's warp-scheduler barriers do. WG i bar.syncs barrier PP_BAR0 + i (256 threads:
//                 its own 128 and the other WG's bar.arrive of 128), issues PV_{j-1} (P held in registers from
//                 the previous tile) then QK_j, bar.arrives the other WG's barrier, waits both GEMMs and runs
//                 softmax_j while the other WG's GEMMs run. WG 1 pre-arrives WG 0's barrier, so turns alternate
//                 0, 1, 0, ...; the last PV takes a turn of its own and WG 1 skips its last arrive (WG 0 has no
//                 turn left), so every bar.sync meets exactly 128 arrivals and none are left over at exit.
//                 K and V slots are freed separately (empty[s] for K, empty_v[s] for V: V_{j-1} is read one turn
//                 later than K_j), and the producer issues K_{j+1} before V_j, the order they are freed in.
// h200-s5-intra-overlap (s4 + OVERLAP): in a turn, V_{j-1} is waited for, QK_j and PV_{j-1} are issued back to
//                 back; wgmma.wait_group 1 returns S_j, whose softmax runs while PV_{j-1} is on the tensor core;
//                 wait_group 0, then O is rescaled and P_j packed.
// h200-s6-exp2    (s5 + EXP2): the scale folded into one FFMA per score and ex2.approx.ftz; builds _emu8 and _emu4
//                 send 1/8 and 1/4 of the exponentials through the cubic on the FMA pipe (exp2_cubic).
// h200-s7-cond-rescale (s6 + COND): m moves, and O is rescaled, only when a row's max grows by > 8 (log2 units).
// h200-s8-persistent (s7 + PERSIST): min(132, items) CTAs walk the work items in grid-stride order; two Q slots
//                 (q_full/q_empty), the K/V ring and the GEMM turns carry on across items; setmaxnreg 40/232.
// h200-s9-tuned   (s8 at 3 stages, one Q slot); _causal (CAUSAL): Q tile t visits K/V tiles 0..t, heaviest first.
// s10 (WORKLIST)  s9 walking a work list the host made (lapis.pipeline_sim.work_order order lpt_l2: heads in L2
//                 sections, each section's Q tiles longest first, each to the CTA with the least K/V tiles so far):
//                 worklist[c] .. worklist[c + 1] - 1 index CTA c's items in worklist[gridDim.x + 1 + k], an item
//                 being q tile + (L / block_m) x (b h). Its causal build as s9's, in the list's order.
// s11 (CHAINS 4)  s10 with each row's max and sum over a tile in four independent partial chains, combined by a
//                 tree (32 dependent FMNMX and FADD a row become 8 and 8, then two levels).
// s14 (DESC_INC)  s13 (s12's two Q slots, one chain) with the GEMM turns' wgmma descriptors built once per base (Q
//                 slot per item, K and V of ring slot 0) and advanced by compile-time K-step constants (desc_lo,
//                 desc_at), not masked, shifted and or-ed from the address at every K-step.
// s15 (LATE_V)    s14 with the GEMM turn's V_{j-1} wait after QK_j's issue, before PV_{j-1}'s: V_{j-1}, loaded after
//                 K_j, lands while QK_j runs (FA4's sm90 forward orders its turn so).
// s16 (EARLY_PACK) s15 with P_j packed to bf16 right after PV_{j-1}'s wait, before the conditional O rescale: no
//                 branch sits between the exponentials and the packs, so ptxas interleaves the 32 F2FP with the
//                 MUFU.EX2 stream instead of issuing them as a block after the rescale's branch (FA4's order).
// s17 (ONE_SYNC)  s16 with the GEMM turn's wait as one bar.sync on barrier PP_BAR0 + wg, its id in a register,
//                 where s16 selects between two immediate-id bar.syncs (two predicated BAR.SYNC + WARPSYNC pairs in
//                 the turn, each warpgroup's warps issuing both); FA4's sm90 forward syncs on a register id so.
// s18 (BAR_HOIST) s17 with the consumer's mbarrier addresses (full_k, full_v, empty, empty_v, q_empty; shared::cta)
//                 computed once before the item loop and broadcast from lane 0, so ptxas holds them in uniform
//                 registers: s17 recomputes each at every wait and arrive of the K/V-tile loop (S2UR SR_CgaCtaId,
//                 then ULEA of the symbol's offset and of the slot).
// s19 (EARLY_TEST) s18 with the turn's K_j and V_{j-1} waits split: a non-blocking mbarrier.test_wait of each before
//                 the turn's bar.sync, whose result (about 46 cycles after issue: micro_bar_v1.cu's try_wait) comes
//                 back while the warp waits for its turn, and a wait only where the test saw the tile not yet
//                 landed: after the bar.sync for K_j, between the wgmma groups for V_{j-1}. s18 waits for each
//                 try_wait's result on the chain that hands the tensor pipe over: before its bar.sync (K) and
//                 between QK_j's and PV_{j-1}'s issue (V) (CUTLASS's consumer_try_wait token, taken early).
// s20 (SPIN_WAIT) s18 with the turn's K_j and V_{j-1} waits as CUTLASS's spin (pipeline.cuh consumer_spin_wait: the
//                 try_wait loop in one asm block, no watchdog deadline). ptxas keeps a completed wait falling
//                 through and places its retry out of line; s18's watchdog wait branches over its inline retry
//                 code on every completed wait, a taken branch whose target Nsight Compute shows waiting for its
//                 instructions (no_inst stall samples, about 14 cycles a tile at each: diagnostic/h200-2026-12-02-s19-source).
// s21 (SLEEP_ACQUIRE) s20 with the producer's waits for a free slot (K/V ring and Q slots) suspending until the slot
//                 frees (harness.cuh mbar_sleep_wait: try_wait's suspendTimeHint, SLEEP_NS), watchdog kept. s20's
//                 producer retries its try_wait about three times a tile load (the hardware's own suspend limit is
//                 shorter than the wait for a slot), each retry a %globaltimer read, a compare, a try_wait and a
//                 branch: about 211 producer instructions a K/V tile against FA4's sm90 forward's 67
//                 (s20's Nsight Compute source page, in git at 9236b8b), issued on the SMSP of warp 0, which two
//                 consumer warps share.
// s23 (CROSS)     s22 with a persistent CTA's GEMM turns running on across work items: the next item's QK_0 is
//                 issued in the turn of this item's PV_{n-1} (its Q waited for first, in the other Q slot), its
//                 softmax runs while PV_{n-1} is on the tensor core, and after PV_{n-1}'s wait this item's O is stored
//                 (store_o) and zeroed where a middle turn rescales it. s22 drains the turns at each item's end
//                 (PV_{n-1} alone in its turn, waited, O stored) and fills them again (QK_0 alone, waited, with no PV
//                 beside its softmax); only the CTA's last item keeps the last PV's own turn.
// s24 (EARLY_ITEM) s23 with the item boundary's scalar work moved off its critical path, where Nsight Compute's stall
//                 samples of s21 put it (its source page, in git at 9236b8b; per item and consumer warp): the
//                 next work-list entry's load and its decode (q tile and head: integer divisions) ran between one
//                 item's last GEMM turn and the next's first, and the quad sums and reciprocals of l after the
//                 last PV's wait (their SHFL latencies exposed). s24 decodes the next entry after the turn that
//                 follows its load and takes 1 / l after the item's last softmax, before the turn of its last PV.
// s25 (DESC64)   s24 with the GEMM turns' wgmma descriptors as 64-bit values: the item's eight Q descriptors built
//                 once per item (q_desc), K's and V's advanced from a 64-bit base by one 64-bit add per K-step
//                 (desc64_at; ptxas issues UIADD3.64), where s24 adds each descriptor's low word and moves its high word
//                 (UIADD3 + UMOV per operand per K-step). FA4's sm90 forward's SASS builds its descriptors so.
// s26 (SPLIT_TAIL) s25 with the last round's work items split along K/V: where the items do not divide evenly over
//                 the CTAs, each of the r items left over after every CTA has its equal share is cut into pieces
//                 (consecutive K/V tiles) that r x pieces CTAs run at once, in place of r CTAs running one whole
//                 item each while the others wait. A piece's consumer warps write their unnormalized O, m and l to
//                 a workspace slot; the last of an item's pieces to arrive (per warp, an atomic ticket) merges the
//                 others' into its own and stores O (store_piece). The host makes the pieces (the work list's
//                 negative entries; lapis.pipeline_sim.work_order.split_tail) for non-causal runs only.
//
// Softmax (online, per row, in registers): m = running max of the raw scores, l = running sum;
//   p = exp2f((s - m_new) * scale_log2) with scale_log2 = log2(e) / sqrt(D) (a subtract and a multiply per
//   score; exp2f, not ex2.approx.ftz: s6 makes that change), O and l rescaled by exp2f((m_old - m_new) *
//   scale_log2) every tile (s7 makes it conditional). P is rounded to bf16 for PV; l sums the fp32 p.
// Smem: Q (16 KiB) then STAGES slots of [K_j | V_j], every tile 1024 B aligned, in lapis's canonical layouts
// (attention_plan.h, generated by lapis/gpu/attention_plan.py). Barrier ids (the watchdog's Status.barrier):
// q = 0, full_k[s] = 1 + s, full_v[s] = 1 + STAGES + s, empty[s] = 1 + 2 * STAGES + s. The ring operations are
// pipeline.cuh's (producer_acquire, producer_commit, consumer_wait, consumer_release); every mbarrier wait goes
// through the harness watchdog. empty[s] takes one arrival per consumer warp, after its PV completed (s4:
// after its QK; empty_v[s], id 1 + 3 * STAGES + s, after its PV). Named barriers (s4): PP_BAR0 + wg.
// Timeline (-DLAPIS_TIMELINE=1): attention_plan.h's roles and ops; k_index is the K/V tile (-1: Q, start, end).
// Planted race (-DLAPIS_PLANT_RACE=1, lapis/gpu/sanitize_attention.py only; never timed): the consumer warps
// arrive on empty[s] right after issuing PV, before its wgmma.wait_group, so the next TMA into the slot may
// overwrite V_j while the tensor core still reads it (an async-proxy write-after-read race).
#include <cuda_bf16.h>
#include <math_constants.h>
#include <stdint.h>

#include "attention_plan.h"
#include "attention_sm90.cuh"
#include "attention_softmax.cuh"
#include "harness.cuh"
#include "pipeline.cuh"
#include "sm90.cuh"
#include "wgmma_bf16_rs.cuh"
#include "wgmma_bf16_ss.cuh"

#ifndef LAPIS_PLANT_RACE
#define LAPIS_PLANT_RACE 0
#endif

namespace {

using namespace lapis;
namespace P = attention_plan;

constexpr int D = P::HEAD_DIM;
constexpr int PP_BAR0 = 1;  // s4's GEMM-turn barriers PP_BAR0 + wg; 0 is __syncthreads'
template <bool B>
struct Bool {
  static constexpr bool value = B;
};

// What a variant adds past s3 (each row of the table changes one thing): PP s4's GEMM turns, OVERLAP s5's
// intra-warpgroup overlap, EXP2 s6's ex2.approx.ftz with the scale folded into one FFMA, EMU s6's software exp2 on
// registers i with i % 2 == 0 and (i / 4) % EMU == 0 (EMU 4: 1/8 of the scores, 2: 1/4; 0: none), COND s7's
// conditional O rescale, PERSIST s8's persistent grid (gridDim.x CTAs walk the work items w = blockIdx.x + k
// gridDim.x, w = q tile + (L / block_m) x (b h)) with Q_SLOTS Q slots (2 by default; s9 has 1), CAUSAL the causal
// mask (Q tile t visits K/V tiles 0..t and masks key > query in tile t; items go heaviest first: t = L / block_m - 1
// - w / (b h), b h = w % (b h), dealt grid-stride), WORKLIST s10's host-made work list in place of the grid stride,
// CHAINS s11's independent partial maxima and sums per row (1: one running max and sum), DESC_INC s14's wgmma
// descriptors advanced by constant increments from one base per Q slot and K/V stage (desc_lo, desc_at), LATE_V
// s15's GEMM turn that issues QK_j before it waits for V_{j-1} (the V wait runs under QK_j on the tensor pipe),
// EARLY_PACK s16's P_j packed before the conditional O rescale (the packs join the exponentials' basic block),
// ONE_SYNC s17's turn wait as one bar.sync whose barrier id (PP_BAR0 + wg) is a register operand, BAR_HOIST s18's
// consumer mbarrier addresses held in registers across the K/V-tile loop (RingAddr), EARLY_TEST s19's next-turn
// waits tested before the turn's bar.sync (mbar_test_wait) and waited for only when not yet landed, SPIN_WAIT s20's
// K and V waits of the turn without the watchdog (consumer_spin_wait), SLEEP_ACQUIRE s21's producer waits suspended
// until their slot frees (producer_sleep_acquire), CROSS s23's turn across items (the next item's QK_0 beside this
// item's last PV), EARLY_ITEM s24's next item decoded a turn ahead and 1 / l taken before the last PV's turn,
// DESC64 s25's descriptors as 64-bit bases advanced by 64-bit adds (Q's built once per item: q_desc), SPLIT_TAIL
// s26's work list whose negative entries are pieces of an item (a K/V tile range), merged by store_piece.
template <bool PP_, bool OVERLAP_ = false, bool EXP2_ = false, int EMU_ = 0, bool COND_ = false, bool PERSIST_ = false,
          int Q_SLOTS_ = PERSIST_ ? 2 : 1, bool CAUSAL_ = false, bool NOLOAD_ = false, bool WORKLIST_ = false,
          int CHAINS_ = 1, bool DESC_INC_ = false, bool LATE_V_ = false, bool EARLY_PACK_ = false,
          bool ONE_SYNC_ = false, bool BAR_HOIST_ = false, bool EARLY_TEST_ = false, bool SPIN_WAIT_ = false,
          bool SLEEP_ACQUIRE_ = false, bool CROSS_ = false, bool EARLY_ITEM_ = false, bool DESC64_ = false,
          bool SPLIT_TAIL_ = false>
struct Features {
  static constexpr bool PP = PP_, OVERLAP = OVERLAP_, EXP2 = EXP2_, COND = COND_, PERSIST = PERSIST_, CAUSAL = CAUSAL_;
  // NOLOAD (diagnostic builds only, never a table row): past the ring's first fill the producer arrives on the full
  // barriers without loading, so the kernel computes on stale K/V: its time is the compute structure alone
  static constexpr bool NOLOAD = NOLOAD_;
  static_assert(!NOLOAD || (PP && !PERSIST), "the load-free diagnostic is of the GEMM-turn kernels, one item a CTA");
  static_assert(!CAUSAL || (PERSIST && OVERLAP), "the causal build is of the persistent overlap kernel (s9)");
  static constexpr bool WORKLIST = WORKLIST_;
  static_assert(!WORKLIST || PERSIST, "a work list is walked by a persistent CTA");
  // s11: partial maxima and sums per row in the ex2 softmax (attention_softmax.cuh softmax_scores)
  static constexpr int CHAINS = CHAINS_;
  static_assert(CHAINS == 1 || ((CHAINS == 2 || CHAINS == 4) && EXP2), "1, or 2 or 4 chains on the ex2 path");
  // s14: the GEMM turns' wgmma descriptors as base descriptors plus constant increments (desc_lo, desc_at)
  static constexpr bool DESC_INC = DESC_INC_;
  static_assert(!DESC_INC || PP, "the incremented descriptors are the GEMM-turn path's (s4+)");
  // s15: the turn's V_{j-1} wait after QK_j's issue, before PV_{j-1}'s (the overlap path's turn order)
  static constexpr bool LATE_V = LATE_V_;
  static_assert(!LATE_V || OVERLAP, "the late V wait is of the overlap turn (s5+), which issues QK_j first");
  // s16: P_j packed after PV_{j-1}'s wait and before the conditional O rescale (the overlap path's softmax side)
  static constexpr bool EARLY_PACK = EARLY_PACK_;
  static_assert(!EARLY_PACK || (OVERLAP && COND), "the early pack moves P_j ahead of s7's conditional O rescale");
  // s17: the turn's wait as one bar.sync on a register barrier id (sm90.cuh named_bar_sync(id))
  static constexpr bool ONE_SYNC = ONE_SYNC_;
  static_assert(!ONE_SYNC || PP, "the one-sync turn wait is of the GEMM turns (s4+)");
  // s18: the GEMM turns' mbarrier addresses computed once, held in registers (RingAddr)
  static constexpr bool BAR_HOIST = BAR_HOIST_;
  static_assert(!BAR_HOIST || (OVERLAP && PERSIST), "the hoisted addresses are of the persistent overlap turn (s8+)");
  // s19: the next turn's K and V waits tested during this turn's softmax side (mbar_test_wait on hoisted addresses)
  static constexpr bool EARLY_TEST = EARLY_TEST_;
  static_assert(!EARLY_TEST || (BAR_HOIST && LATE_V), "the early tests use s18's held addresses and s15's late V wait");
  // s20: the turn's K and V waits as spins with no watchdog (consumer_spin_wait on hoisted addresses)
  static constexpr bool SPIN_WAIT = SPIN_WAIT_;
  static_assert(!SPIN_WAIT || (BAR_HOIST && LATE_V && !EARLY_TEST), "the spin waits replace s18's turn waits");
  // s21: the producer's slot waits suspended until the slot frees (producer_sleep_acquire)
  static constexpr bool SLEEP_ACQUIRE = SLEEP_ACQUIRE_;
  static_assert(!SLEEP_ACQUIRE || (PP && PERSIST), "the sleeping waits are of the persistent GEMM-turn producer (s8+)");
  // s23: the next item's QK_0 issued in the turn of this item's last PV, this item's O stored after that PV's wait
  static constexpr bool CROSS = CROSS_;
  static_assert(!CROSS || (OVERLAP && PERSIST && EXP2), "the cross-item turn is of the persistent overlap turn (s8+)");
  // s24: the item boundary's scalar work off its critical path (the next item decoded a turn early, 1 / l taken
  // before the last PV's turn)
  static constexpr bool EARLY_ITEM = EARLY_ITEM_;
  static_assert(!EARLY_ITEM || (CROSS && WORKLIST), "the early item work is of s23's cross-item loop over a work list");
  // s25: the turn's descriptors as 64-bit bases advanced by 64-bit adds (desc64_at)
  static constexpr bool DESC64 = DESC64_;
  static_assert(!DESC64 || DESC_INC, "the 64-bit descriptor adds replace s14's low-word increments");
  // s26: work-list entries that are pieces of an item, merged by the last piece's warps (store_piece)
  static constexpr bool SPLIT_TAIL = SPLIT_TAIL_;
  static_assert(!SPLIT_TAIL || EARLY_ITEM, "the split tail's pieces end s24's cross-item loop over a work list");
  // s8: Q of the next work item loads while this one runs; s9 (3 stages) has room for one Q slot only
  static constexpr int Q_SLOTS = Q_SLOTS_;
  static_assert(Q_SLOTS == 1 || (Q_SLOTS == 2 && PERSIST), "two Q slots serve a persistent CTA's next item");
  static_assert(!PERSIST || PP, "the persistent loop is written for the GEMM-turn path (s4+)");
  static constexpr int EMU = EMU_;
  static_assert(EMU == 0 || EMU == 2 || EMU == 4, "EMU 4 (1/8 of the exponentials), 2 (1/4) or 0");
  static_assert((!EMU && !COND) || EXP2, "the software exp2 and the conditional rescale build on s6's exp2 path");
};
constexpr int PP_THREADS = 256;  // a turn barrier: the owner's 128 bar.sync + the other WG's 128 bar.arrive
constexpr uint32_t SLEEP_NS = 1000000;  // s21's suspendTimeHint (ns): past any slot wait; the watchdog's is 1 s
static_assert(D == 128 && P::BLOCK_M == 64, "the plan is for D = 128 and 64-row Q tiles (one wgmma m64)");

// The K and V tiles of a BN-key block (the plan has BN = 64 and 128).
template <int BN>
struct KV {
  static_assert(BN == 64 || BN == 128, "attention_plan.h plans K/V tiles for BN = 64 and 128");
  static constexpr bool N128 = BN == 128;
  static constexpr uint32_t K_SLOT = N128 ? P::K128_SLOT_BYTES : P::K64_SLOT_BYTES;
  static constexpr uint32_t V_SLOT = N128 ? P::V128_SLOT_BYTES : P::V64_SLOT_BYTES;
  static constexpr uint32_t K_BOX_STRIDE = N128 ? P::K128_BOX_STRIDE : P::K64_BOX_STRIDE;
  static constexpr uint32_t V_BOX_STRIDE = N128 ? P::V128_BOX_STRIDE : P::V64_BOX_STRIDE;
  static constexpr uint32_t K_TX = N128 ? P::K128_BOXES * P::K128_BOX_BYTES : P::K64_BOXES * P::K64_BOX_BYTES;
  static constexpr uint32_t V_TX = N128 ? P::V128_BOXES * P::V128_BOX_BYTES : P::V64_BOXES * P::V64_BOX_BYTES;
  static constexpr uint64_t K_DESC = N128 ? P::K128_DESC : P::K64_DESC;
  static constexpr uint64_t V_DESC = N128 ? P::V128_DESC : P::V64_DESC;
  static constexpr int V_KSTEPS = BN / P::MMA_K;  // PV's K is the key index
  __device__ static uint32_t k_step(int s) { return N128 ? P::K128_KSTEP_START[s] : P::K64_KSTEP_START[s]; }
  __device__ static uint32_t v_step(int s) { return N128 ? P::V128_KSTEP_START[s] : P::V64_KSTEP_START[s]; }
  static_assert((N128 ? P::K128_BOX_ROWS : P::K64_BOX_ROWS) == BN && (N128 ? P::V128_KSTEPS : P::V64_KSTEPS) ==
                    V_KSTEPS, "K boxes are BN rows; V has BN / 16 K-steps");
  static_assert(K_TX == K_SLOT && V_TX == V_SLOT, "the boxes fill their slots exactly");
};
static_assert(P::Q_KSTEPS == D / P::MMA_K && P::K128_KSTEPS == P::Q_KSTEPS, "QK^T has D / 16 K-steps");
static_assert(P::Q_BOX_ROWS == P::BLOCK_M, "Q boxes are block_m rows");

static_assert(P::Q128_BOX_ROWS == 2 * P::BLOCK_M && P::Q128_KSTEPS == P::Q_KSTEPS, "Q128: two m64 halves");

template <int STAGES, int BN, int CONSUMER_WGS, bool WS>
struct Config {
  static_assert(CONSUMER_WGS == 1 || (CONSUMER_WGS == 2 && WS), "1 consumer WG (s1, s2) or 2 with a producer (s3+)");
  static_assert(WS || STAGES == 1, "the serial kernel has one slot");
  static constexpr bool WIDE = CONSUMER_WGS == 2;  // a 128-row Q tile, one m64 half per consumer warpgroup
  static constexpr int THREADS = 128 * (CONSUMER_WGS + (WS ? 1 : 0));
  static constexpr int BLOCK_M = 64 * CONSUMER_WGS;
  // setmaxnreg budgets: s2 40/232 (256 threads), s3+ 24/240 (384 threads; s8, s9 40/232); each split fits
  // the 64K-register file: 40 x 128 + 232 x 128 = 34816, 24 x 128 + 240 x 256 = 64512.
  static constexpr int PRODUCER_REGS = WIDE ? 24 : 40;
  static constexpr int CONSUMER_REGS = WIDE ? 240 : 232;
  static_assert(PRODUCER_REGS * 128 + CONSUMER_REGS * 128 * CONSUMER_WGS <= 65536, "the split fits 64K registers");
  static constexpr uint32_t Q_SLOT = WIDE ? P::Q128_SLOT_BYTES : P::Q_SLOT_BYTES;
  static constexpr uint32_t Q_TX = WIDE ? P::Q128_BOXES * P::Q128_BOX_BYTES : P::Q_BOXES * P::Q_BOX_BYTES;
  static constexpr uint32_t Q_BOX_STRIDE = WIDE ? P::Q128_BOX_STRIDE : P::Q_BOX_STRIDE;
  static constexpr uint64_t Q_DESC = WIDE ? P::Q128_DESC : P::Q_DESC;
  __device__ static uint32_t q_step(int s) { return WIDE ? P::Q128_KSTEP_START[s] : P::Q_KSTEP_START[s]; }
  __device__ static uint32_t q_half(int wg) { return WIDE ? P::Q128_HALF_START[wg] : 0u; }
  static_assert(Q_TX == Q_SLOT && (WIDE ? P::Q128_BOX_ROWS : P::Q_BOX_ROWS) == BLOCK_M, "Q boxes fill the tile");
  static constexpr uint32_t STAGE_BYTES = KV<BN>::K_SLOT + KV<BN>::V_SLOT;
  static constexpr uint32_t SMEM_BYTES = Q_SLOT + STAGES * STAGE_BYTES + 1024;  // + 1 KiB to align
  static_assert(Q_SLOT % 1024 == 0 && STAGE_BYTES % 1024 == 0, "tiles start on a swizzle repeat");
  static_assert(SMEM_BYTES + 1024 <= 227 * 1024, "Q + ring + static smem fit an sm_90 CTA's 227 KiB");
};

__device__ __forceinline__ uint64_t desc(uint64_t fixed, uint32_t smem) { return fixed | ((smem & 0x3FFFFu) >> 4); }

// s14 (DESC_INC): the start-address field is bits 0..13 of a descriptor's low word ((addr & 0x3FFFF) >> 4, PTX ISA
// 9.7.15.5.1 "Matrix Descriptor"), the fixed part's low word has those bits clear, and every tile base is 1024-byte
// aligned and every K-step offset a multiple of 16 below the 227 KiB of shared memory (static_asserts in Config and
// KV): so desc(fixed, base + step) == desc(fixed, base) + step / 16 with no carry out of the field, and a K-step's
// descriptor is the base's low word plus a constant (CUTLASS's GmmaDescriptor iterator adds alike). desc_lo gives
// that low word; desc_at the descriptor step bytes past it, with the high word (stride, swizzle) a constant.
__device__ __forceinline__ uint32_t desc_lo(uint64_t fixed, uint32_t smem) {
  return static_cast<uint32_t>(fixed) | (smem >> 4);
}
__device__ __forceinline__ uint64_t desc_at(uint64_t fixed, uint32_t lo, uint32_t step) {
  return (fixed & 0xFFFFFFFF00000000ull) | (lo + (step >> 4));
}
// s25 (DESC64): the same descriptor as one 64-bit add to a 64-bit base (no carry leaves the start-address field, as
// above), which ptxas issues as one UIADD3.64 where desc_at's low-word add and high-word move take two instructions.
__device__ __forceinline__ uint64_t desc64_at(uint64_t base, uint32_t step) { return base + (step >> 4); }
__device__ __forceinline__ uint64_t desc64(uint64_t fixed, uint32_t lo) {
  return (fixed & 0xFFFFFFFF00000000ull) | lo;
}
constexpr bool steps_of_16(const uint32_t* steps, int n) {
  return n == 0 || (steps[0] % 16 == 0 && steps_of_16(steps + 1, n - 1));
}
static_assert(static_cast<uint32_t>(P::Q_DESC) >> 14 << 14 == static_cast<uint32_t>(P::Q_DESC) &&
                  static_cast<uint32_t>(P::Q128_DESC) >> 14 << 14 == static_cast<uint32_t>(P::Q128_DESC) &&
                  static_cast<uint32_t>(P::K64_DESC) >> 14 << 14 == static_cast<uint32_t>(P::K64_DESC) &&
                  static_cast<uint32_t>(P::K128_DESC) >> 14 << 14 == static_cast<uint32_t>(P::K128_DESC) &&
                  static_cast<uint32_t>(P::V64_DESC) >> 14 << 14 == static_cast<uint32_t>(P::V64_DESC) &&
                  static_cast<uint32_t>(P::V128_DESC) >> 14 << 14 == static_cast<uint32_t>(P::V128_DESC),
              "the fixed descriptors leave the start-address field (bits 0..13) clear: OR and + agree");
static_assert(steps_of_16(P::Q_KSTEP_START, 8) && steps_of_16(P::Q128_KSTEP_START, 8) &&
                  steps_of_16(P::Q128_HALF_START, 2) && steps_of_16(P::K64_KSTEP_START, 8) &&
                  steps_of_16(P::K128_KSTEP_START, 8) && steps_of_16(P::V64_KSTEP_START, 4) &&
                  steps_of_16(P::V128_KSTEP_START, 8),
              "every K-step offset is a multiple of 16 bytes: desc(fixed, base + step) == desc(fixed, base) + step / 16");

struct Barriers {
  uint64_t* q;
  uint64_t* full_k;
  uint64_t* full_v;
  uint64_t* empty;    // s1..s3: K_j and V_j both read; s4: K_j read
  uint64_t* empty_v;  // s4 only: V_j read
};

template <int BOXES>
__device__ __forceinline__ void tma_tile(uint32_t dst, uint32_t box_stride, const TensorMap* map, int row,
                                         uint64_t* bar) {
#pragma unroll
  for (int b = 0; b < BOXES; ++b) tma_load_2d(dst + b * box_stride, map, b * P::BOX_INNER, row, smem_addr(bar));
}

// producer_acquire + K_j, V_j into slot st.index (st: the ring position; one thread). Used by s2's producer and s1's
// thread 0.
template <int STAGES, int BN>
__device__ __forceinline__ void load_kv(const Barriers& bar, uint32_t slot, const PipelineState<STAGES>& st, int j,
                                        int kv_row0, const TensorMap* tmap_k, const TensorMap* tmap_v,
                                        const HarnessArgs& h, KernelTimeline& tl, uint32_t* cursor, uint8_t role,
                                        uint32_t work) {
  using T = KV<BN>;
  producer_acquire(bar.empty, PipelineState<STAGES>(st.index, st.phase ^ 1u), h, 1 + 2 * STAGES + st.index);
  tl.record(h, cursor, role, P::OP_WAIT_EMPTY, COMPLETE, work, j);
  producer_commit(bar.full_k, st, T::K_TX);
  tma_tile<P::K128_BOXES>(slot, T::K_BOX_STRIDE, tmap_k, kv_row0 + j * BN, &bar.full_k[st.index]);
  producer_commit(bar.full_v, st, T::V_TX);
  tma_tile<P::V128_BOXES>(slot + T::K_SLOT, T::V_BOX_STRIDE, tmap_v, kv_row0 + j * BN, &bar.full_v[st.index]);
  tl.record(h, cursor, role, P::OP_ISSUE_TMA, ISSUE, work, j);
}

// s4's producer: producer_acquire + one tile (K or V) into its part of slot st.index (st: the ring position) of the
// ring whose barriers are empty and full (one thread). SLEEP: s21's producer_sleep_acquire.
template <int BOXES, int STAGES, bool SLEEP = false>
__device__ __forceinline__ void load_one(uint64_t* empty, uint64_t* full, int empty_id, uint32_t dst, uint32_t stride,
                                         uint32_t tx, const TensorMap* map, int row, const PipelineState<STAGES>& st,
                                         const HarnessArgs& h, KernelTimeline& tl, uint32_t* cursor, uint32_t work,
                                         int j, bool load = true) {
  if constexpr (SLEEP)
    producer_sleep_acquire(empty, PipelineState<STAGES>(st.index, st.phase ^ 1u), h, empty_id, SLEEP_NS);
  else
    producer_acquire(empty, PipelineState<STAGES>(st.index, st.phase ^ 1u), h, empty_id);
  tl.record(h, cursor, P::ROLE_PRODUCER, P::OP_WAIT_EMPTY, COMPLETE, work, j);
  if (!load) {  // NOLOAD diagnostic: the slot's full phase completes with no bytes
    producer_commit(full, st);
    return;
  }
  producer_commit(full, st, tx);
  tma_tile<BOXES>(dst, stride, map, row, &full[st.index]);
  tl.record(h, cursor, P::ROLE_PRODUCER, P::OP_ISSUE_TMA, ISSUE, work, j);
}

template <class Cfg>
__device__ __forceinline__ void load_q(const Barriers& bar, uint32_t q, const TensorMap* tmap_q, int q_row0) {
  producer_commit(bar.q, PipelineState<1>(), Cfg::Q_TX);  // one Q tile a CTA: slot 0, no slot to acquire
  tma_tile<P::Q_BOXES>(q, Cfg::Q_BOX_STRIDE, tmap_q, q_row0, bar.q);  // Q and Q128: 2 boxes of 64 columns
}

// O x inv -> global bf16 rows [row0, row0 + 64) of the B*H*L x D output (accumulator fragment order); inv: each
// of the thread's two rows' 1 / l, its quad's sum (row_inv).
__device__ __forceinline__ void store_o_inv(const float (&o)[D / 2], const float (&inv)[2], __nv_bfloat16* out,
                                            int64_t row0) {
  const int t = threadIdx.x % 128, row = 16 * (t / 32) + (t % 32) / 4, col = 2 * (t % 4);
#pragma unroll
  for (int i = 0; i < D / 2; i += 4) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      __nv_bfloat16* p = out + (row0 + row + 8 * h) * D + col + 8 * (i / 4);
      *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(o[i + 2 * h] * inv[h], o[i + 2 * h + 1] * inv[h]);
    }
  }
}

// The two rows' 1 / l: each row's sum over its quad (the 4 lanes holding its columns), inverted.
__device__ __forceinline__ void row_inv(const float (&l)[2], float (&inv)[2]) {
  inv[0] = 1.f / quad_sum(l[0]);
  inv[1] = 1.f / quad_sum(l[1]);
}

// O / l -> global bf16 rows [row0, row0 + 64) of the B*H*L x D output (accumulator fragment order).
__device__ __forceinline__ void store_o(const float (&o)[D / 2], const float (&l)[2], __nv_bfloat16* out,
                                        int64_t row0) {
  float inv[2];
  row_inv(l, inv);
  store_o_inv(o, inv, out, row0);
}

// s26: the split tail's workspace, after the work list's entries (lapis.gpu.bench_attention.worklist): at
// T = gridDim.x + 1 + entries, the piece count P and the split items' count G, then P rows of PIECE_FIELDS ints
// (item, first K/V tile, K/V tiles, split item g, rank among its pieces, pieces), then 8 G ticket counters (one per
// split item, consumer warpgroup and warp: 0 between launches), then from the next multiple of 4 ints the fp32 slots:
// per piece and consumer warpgroup, SLOT_FIELDS fields (O's D / 2 values, then m and l of the thread's two rows) of
// 128 threads each, field-major so that a warp's stores and loads are coalesced.
constexpr int PIECE_FIELDS = 6, SLOT_FIELDS = D / 2 + 4;
struct SplitTail {
  const int* pieces;  // P rows of PIECE_FIELDS
  int* tickets;       // 8 G counters
  float* slots;       // P x 2 x SLOT_FIELDS x 128
  __device__ static SplitTail at(const int* worklist, int grid) {
    const int t = grid + 1 + worklist[grid], p = worklist[t], g = worklist[t + 1];
    const int c = t + 2 + PIECE_FIELDS * p, w = (c + 8 * g + 3) & ~3;
    int* base = const_cast<int*>(worklist);  // the host's buffer is writable: only its entries are read-only
    return SplitTail{worklist + t + 2, base + c, reinterpret_cast<float*>(base + w)};
  }
};

// s26: a piece's end (attention_h200.cu SPLIT_TAIL). The thread's O (unnormalized), m and l go to the piece's slot;
// each warp (16 rows) takes a ticket; the warp whose ticket is the item's last merges every other piece's slot into
// its registers, O and l scaled to the larger m (exp2((m_p - m) * scale_log2): O and l are relative to their m),
// resets its counter for the next launch and stores O / l. index: the piece's row in split.pieces.
__device__ __forceinline__ void store_piece(float (&o)[D / 2], float (&m)[2], float (&l)[2], const SplitTail& split,
                                            int index, float scale_log2, __nv_bfloat16* out, int64_t row0, int wg) {
  const int* piece = split.pieces + PIECE_FIELDS * index;
  const int g = piece[3], rank = piece[4], pieces = piece[5], t = threadIdx.x % 128;
  auto slot = [&](int r) { return split.slots + (static_cast<size_t>(g * pieces + r) * 2 + wg) * SLOT_FIELDS * 128 + t; };
  float* mine = slot(rank);
#pragma unroll
  for (int i = 0; i < D / 2; ++i) __stcg(mine + i * 128, o[i]);
#pragma unroll
  for (int h = 0; h < 2; ++h) __stcg(mine + (D / 2 + h) * 128, m[h]), __stcg(mine + (D / 2 + 2 + h) * 128, l[h]);
  __threadfence();  // this thread's slot before the warp's ticket (the merging warp fences after reading it)
  __syncwarp();
  int* ticket = split.tickets + (g * 2 + wg) * 4 + t / 32;
  int mine_ticket = 0;
  if (t % 32 == 0) mine_ticket = atomicAdd(ticket, 1);
  if (__shfl_sync(0xffffffffu, mine_ticket, 0) != pieces - 1) return;  // another piece's warp merges these rows
  __threadfence();
#pragma unroll 1
  for (int r = 0; r < pieces; ++r) {
    if (r == rank) continue;
    const float* p = slot(r);
    float a[2], b[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float mr = __ldcg(p + (D / 2 + h) * 128), mx = fmaxf(m[h], mr);
      a[h] = exp2f((m[h] - mx) * scale_log2);
      b[h] = exp2f((mr - mx) * scale_log2);
      m[h] = mx;
      l[h] = l[h] * a[h] + __ldcg(p + (D / 2 + 2 + h) * 128) * b[h];
    }
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = o[i] * a[(i / 2) % 2] + __ldcg(p + i * 128) * b[(i / 2) % 2];
  }
  if (t % 32 == 0) atomicExch(ticket, 0);  // every piece of this warp's rows has taken its ticket
  store_o(o, l, out, row0);
}

template <int STAGES, int BN, int CONSUMER_WGS, bool WS, class F>
__device__ __forceinline__ void attention(const TensorMap& tmap_q, const TensorMap& tmap_k, const TensorMap& tmap_v,
                                          __nv_bfloat16* out, int seq_len, int bh_count, float scale_log2,
                                          uint32_t* stats, const int* __restrict__ worklist, const HarnessArgs& h) {
  constexpr bool PP = F::PP, OVERLAP = F::OVERLAP;
  using Cfg = Config<STAGES, BN, CONSUMER_WGS, WS>;
  using T = KV<BN>;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  static_assert(!PP || CONSUMER_WGS == 2, "ping-pong alternates two consumer warpgroups");
  static_assert(!OVERLAP || PP, "s5 overlaps within s4's GEMM turns");
  static_assert(F::Q_SLOTS * Cfg::Q_SLOT + STAGES * Cfg::STAGE_BYTES + 2048 <= 227 * 1024,
                "Q slots + ring + alignment + static smem fit an sm_90 CTA's 227 KiB");
  __shared__ __align__(8) uint64_t q_full[F::Q_SLOTS], q_empty[F::Q_SLOTS], full_k[STAGES], full_v[STAGES],
      empty[STAGES], empty_v[STAGES];
  __shared__ uint32_t cursor;
  __shared__ uint64_t probe[2];  // plain build: %clock64 and %globaltimer at the CTA's start (the clock probe)
  KernelTimeline tl;
  const Barriers bar{&q_full[0], full_k, full_v, empty, empty_v};
  const uint32_t q_smem = (smem_addr(smem_raw) + 1023u) & ~1023u, ring = q_smem + F::Q_SLOTS * Cfg::Q_SLOT;
  const int kv_row0 = blockIdx.y * seq_len, q_row0 = kv_row0 + blockIdx.x * Cfg::BLOCK_M;
  int kv_tiles = seq_len / BN;  // K/V tiles of the current work item (causal: its Q tile + 1)
  uint32_t work = cta_linear();
  // Work items of this CTA (the GEMM-turn path): w0, w0 + stride, ... < w_end; one (this CTA's) unless PERSIST.
  const int q_tiles = seq_len / Cfg::BLOCK_M, w0 = F::PERSIST ? blockIdx.x : cta_linear();
  const int stride = F::PERSIST ? gridDim.x : 1, w_end = F::PERSIST ? q_tiles * bh_count : w0 + 1;
  // The loop index k runs k0, k0 + k_step, ... < k_end; its item is k itself, or (s10) the list's k-th entry.
  const int k0 = F::WORKLIST ? worklist[blockIdx.x] : w0, k_end = F::WORKLIST ? worklist[blockIdx.x + 1] : w_end;
  const int k_step = F::WORKLIST ? 1 : stride;
  auto item_at = [&](int k) { return F::WORKLIST ? worklist[gridDim.x + 1 + k] : k; };
  static_assert(!F::CAUSAL || Cfg::BLOCK_M == BN, "the causal diagonal is one K/V tile: block_m = block_n");
  // Work item w -> (first K/V row, first Q row); sets kv_tiles.
  // s26: the split tail's block, found when a piece comes (not held in registers across the item loop)
  auto split = [&] { return SplitTail::at(worklist, gridDim.x); };
  auto item = [&](int w, int& kv0, int& q0) {
    const bool heavy_first = F::CAUSAL && !F::WORKLIST;  // s9's causal order; a work list names q tile and head
    if constexpr (F::SPLIT_TAIL) {
      if (w < 0) {  // s26: piece -1 - w, K/V tiles [first, first + count) of its item
        const int* piece = split().pieces + PIECE_FIELDS * (-1 - w);
        const int wi = piece[0], qt = wi % q_tiles, bh = wi / q_tiles;
        kv0 = bh * seq_len + piece[1] * BN;
        q0 = bh * seq_len + qt * Cfg::BLOCK_M;
        kv_tiles = piece[2];
        return;
      }
    }
    const int qt = heavy_first ? q_tiles - 1 - w / bh_count : w % q_tiles, bh = heavy_first ? w % bh_count : w / q_tiles;
    kv0 = bh * seq_len;
    q0 = kv0 + qt * Cfg::BLOCK_M;
    kv_tiles = F::CAUSAL ? qt + 1 : seq_len / BN;
  };

  if (threadIdx.x == 0) {
    if (!LAPIS_TIMELINE) probe[0] = clock64_cycles(), probe[1] = globaltimer_ns();
    for (int i = 0; i < F::Q_SLOTS; ++i) {
      mbar_init(&q_full[i], 1);
      mbar_init(&q_empty[i], 4 * CONSUMER_WGS);  // s8: every consumer warp, after the item's last PV
    }
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full_k[s], 1);
      mbar_init(&full_v[s], 1);
      mbar_init(&empty[s], 4 * CONSUMER_WGS);  // every consumer warp of every consumer warpgroup
      mbar_init(&empty_v[s], 4 * CONSUMER_WGS);  // used by s4 only
    }
    mbar_init_fence();
    tl.init(&cursor);
    prefetch_tensormap(&tmap_q);
    prefetch_tensormap(&tmap_k);
    prefetch_tensormap(&tmap_v);
  }
  __syncthreads();

  if (WS && threadIdx.x < 128) {  // ----------------------------------------------- producer (s2, s3, s4) --
    setmaxnreg_dec<F::PERSIST ? 40 : Cfg::PRODUCER_REGS>();  // s8: 24 spill the item loop; 40/232 (as s2)
    if (threadIdx.x == 0) {
      tl.record(h, &cursor, P::ROLE_PRODUCER, P::OP_START, ISSUE, work, -1);
      if (!PP) load_q<Cfg>(bar, q_smem, &tmap_q, q_row0);
      int s = 0;
      uint32_t phase = 0;
      if (PP) {  // per item: Q, then K_0, K_1, V_0, K_2, V_1, ..., K_{n-1}, V_{n-2}, V_{n-1}: one tile (one wait) a step
        static_assert(P::K128_BOXES == P::V128_BOXES, "one TMA box count for K and V");
        auto load_item = [&](int kv0, int g0) {  // g0: the item's first tile in ring order (tiles continue round it)
#pragma unroll 1
          for (int t = 0; t < 2 * kv_tiles; ++t) {  // few live values: the producer has 24 registers (s8: 32)
            const bool v = (t > 0 && t % 2 == 0) || t == 2 * kv_tiles - 1;
            const int i = !v ? (t + 1) / 2 : (t == 2 * kv_tiles - 1 ? kv_tiles - 1 : t / 2 - 1);
            const int g = g0 + i;
            const PipelineState<STAGES> gs(g % STAGES, (g / STAGES) & 1u);  // the ring's g-th token
            load_one<P::K128_BOXES, STAGES, F::SLEEP_ACQUIRE>(v ? empty_v : empty, v ? full_v : full_k, 1 + (v ? 3 : 2) * STAGES + gs.index,
                                    ring + gs.index * Cfg::STAGE_BYTES + (v ? T::K_SLOT : 0u),
                                    v ? T::V_BOX_STRIDE : T::K_BOX_STRIDE, v ? T::V_TX : T::K_TX,
                                    v ? &tmap_v : &tmap_k, kv0 + i * BN, gs, h, tl, &cursor, work, i,
                                    !F::NOLOAD || g < STAGES);
          }
        };
        if (!F::PERSIST) {
          load_q<Cfg>(bar, q_smem, &tmap_q, q_row0);
          load_item(kv_row0, 0);
        }
        int it = 0, g0 = 0;  // g0: tiles loaded for earlier items
        int w_next = k0 < k_end ? item_at(k0) : 0;  // s10: the next entry's load is in flight during an item
#pragma unroll 1
        for (int k = k0; F::PERSIST && k < k_end; k += k_step, ++it) {  // s8
          const int w = w_next, qs = it % F::Q_SLOTS;
          if (k + k_step < k_end) w_next = item_at(k + k_step);
          const PipelineState<F::Q_SLOTS> qst(qs, ((it / F::Q_SLOTS) - 1) & 1u);  // the producer's state of Q item it
          int kv0, q0;
          item(w, kv0, q0);
          work = F::SPLIT_TAIL && w < 0 ? split().pieces[PIECE_FIELDS * (-1 - w)] : w;  // s26: a piece's item
          if (it >= F::Q_SLOTS) {  // the slot's previous item is done with its Q
            if constexpr (F::SLEEP_ACQUIRE)
              producer_sleep_acquire(q_empty, qst, h, 1 + 4 * STAGES + qs, SLEEP_NS);
            else
              producer_acquire(q_empty, qst, h, 1 + 4 * STAGES + qs);
          }
          producer_commit(q_full, qst, Cfg::Q_TX);
          tma_tile<P::Q_BOXES>(q_smem + qs * Cfg::Q_SLOT, Cfg::Q_BOX_STRIDE, &tmap_q, q0, &q_full[qs]);
          load_item(kv0, g0);
          g0 += kv_tiles;
        }
      } else {  // the ring position in two registers, not a PipelineState: ptxas's output depends on it
        for (int j = 0; j < kv_tiles; ++j) {
          load_kv<STAGES, BN>(bar, ring + s * Cfg::STAGE_BYTES, PipelineState<STAGES>(s, phase), j, kv_row0, &tmap_k,
                              &tmap_v, h, tl, &cursor, P::ROLE_PRODUCER, work);
          if (++s == STAGES) s = 0, phase ^= 1u;
        }
      }
    }
    __syncwarp();
  } else {  // ------------------------------------------------------------------------------------- consumer --
    if (WS) setmaxnreg_inc<F::PERSIST ? 232 : Cfg::CONSUMER_REGS>();  // 40 x 128 + 232 x 256 = 168 x 384
    const bool leader = threadIdx.x % 128 == 0, warp_leader = threadIdx.x % 32 == 0;
    const int wg = WS ? threadIdx.x / 128 - 1 : 0;  // consumer warpgroup: rows 64 wg .. of the Q tile
    const uint8_t role = P::ROLE_CONSUMER0 + wg;
    uint32_t q_a = q_smem + Cfg::q_half(wg);
    // s14: the descriptors' low words at Q (this item's slot, set per item) and at K and V of ring slot 0; slot s
    // adds s x STAGE_BYTES / 16, K-step ks its k_step / q_step / v_step / 16 (desc_at)
    uint32_t q_lo = 0;
    // s25: the item's Q descriptors, one per K-step, built once per item from q_lo (desc64_at)
    uint64_t q_desc[P::Q_KSTEPS];
    auto set_q_desc = [&] {
      if constexpr (F::DESC64) {
#pragma unroll
        for (int ks = 0; ks < P::Q_KSTEPS; ++ks) q_desc[ks] = desc64_at(desc64(Cfg::Q_DESC, q_lo), Cfg::q_step(ks));
      }
    };
    const uint32_t k_lo0 = desc_lo(T::K_DESC, ring), v_lo0 = desc_lo(T::V_DESC, ring + T::K_SLOT);
    float o[D / 2], sacc[BN / 2], m[2] = {-CUDART_INF_F, -CUDART_INF_F}, l[2] = {0.f, 0.f};
    uint32_t rescales = 0;  // s7: row moves of the max past tile 0 (this thread's two rows)
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) sacc[i] = 0.f;
    if (leader) {
      tl.record(h, &cursor, role, P::OP_START, ISSUE, work, -1);
      if (!WS) load_q<Cfg>(bar, q_smem, &tmap_q, q_row0);
    }
    if (!PP) {
      consumer_wait(q_full, PipelineState<F::Q_SLOTS>(), h, 0);
      if (leader) tl.record(h, &cursor, role, P::OP_WAIT_Q, COMPLETE, work, -1);
    }
    PipelineState<STAGES> st;  // the K/V ring
    // O += P V: BN / 16 K-steps over the keys, V read MN-major (D contiguous) from slot vs; P in registers.
    // Issued and committed, not waited. fenced: the caller already fenced O and P and issued wgmma.fence (s5 issues
    // QK and PV back to back under one fence: a second fence with QK in flight is a runtime branch ptxas serializes).
    auto issue_pv = [&](int vs, uint32_t (&pa)[T::V_KSTEPS][4], bool fenced = false) {
      const uint32_t v_smem = ring + vs * Cfg::STAGE_BYTES + T::K_SLOT;
      if (!fenced) {
        fence_registers(o);
#pragma unroll
        for (int kk = 0; kk < T::V_KSTEPS; ++kk) fence_registers_u32(pa[kk]);
        wgmma_fence();
      }
      if constexpr (F::DESC_INC) {
        const uint32_t v_lo = v_lo0 + vs * (Cfg::STAGE_BYTES >> 4);
        if constexpr (F::DESC64) {
          const uint64_t vb = desc64(T::V_DESC, v_lo);
#pragma unroll
          for (int kk = 0; kk < T::V_KSTEPS; ++kk)
            wgmma_m64n128k16_bf16_rs_tb(o, pa[kk], desc64_at(vb, T::v_step(kk)), 1);
        } else {
#pragma unroll
          for (int kk = 0; kk < T::V_KSTEPS; ++kk)
            wgmma_m64n128k16_bf16_rs_tb(o, pa[kk], desc_at(T::V_DESC, v_lo, T::v_step(kk)), 1);
        }
      } else {
#pragma unroll
        for (int kk = 0; kk < T::V_KSTEPS; ++kk)
          wgmma_m64n128k16_bf16_rs_tb(o, pa[kk], desc(T::V_DESC, v_smem + T::v_step(kk)), 1);
      }
      wgmma_commit_group();
    };
    if (PP) {  // ------------------------------------------------------------------------ s4: GEMM turns --
      uint32_t pa[T::V_KSTEPS][4];  // P_{j-1}, held for the next turn's PV
      PipelineState<STAGES> held;   // its V slot and phase
      bool final_item = true;  // the CTA's last work item: WG 1's last turn hands no turn on
      int q_slot = 0;          // the item's Q slot
      if (wg == 1) named_bar_arrive<PP_BAR0, PP_THREADS>();  // the first turn is WG 0's
      // s18: the barriers' shared::cta addresses, read once and broadcast from lane 0 (ptxas then knows them
      // warp-uniform and holds them in uniform registers rather than rebuilding each from SR_CgaCtaId at every use);
      // at(array, address): the operand each wait and arrive of the turn takes (the pointer in s17 and earlier)
      uint32_t full_k_a = 0, full_v_a = 0, empty_a = 0, empty_v_a = 0, q_empty_a = 0;
      if constexpr (F::BAR_HOIST) {
        full_k_a = __shfl_sync(0xffffffffu, smem_addr(full_k), 0);
        full_v_a = __shfl_sync(0xffffffffu, smem_addr(full_v), 0);
        empty_a = __shfl_sync(0xffffffffu, smem_addr(empty), 0);
        empty_v_a = __shfl_sync(0xffffffffu, smem_addr(empty_v), 0);
        q_empty_a = __shfl_sync(0xffffffffu, smem_addr(q_empty), 0);
      }
      auto at = [](uint64_t* array, uint32_t address) {
        if constexpr (F::BAR_HOIST) return address;
        else return array;
      };
      // One GEMM turn. FIRST (tile 0: no PV yet) and last (the last PV's own turn) are compile-time arguments:
      // ptxas serializes wgmmas (its C7513..C7520 reports) when a wgmma.wait_group or a wgmma.fence sits behind a
      // runtime branch while a wgmma is in flight, or when S is a loop-carried register array that s5's softmax
      // redefines while PV_{j-1} runs; hence S fresh per turn.
      // DIAG (causal only): the item's diagonal K/V tile, masked; compile-time too, so other tiles pay nothing.
      // s23 (CROSS): BOUNDARY is the turn that issues the next item's QK_0 beside this item's PV_{n-1}; after
      // PV_{n-1}'s wait it stores this item's O (l_prev, row_prev) and zeroes O, in place of the O rescale.
      float l_prev[2] = {0.f, 0.f}, inv_prev[2] = {0.f, 0.f};  // s24: inv_prev, 1 / l_prev taken early
      int64_t row_prev = 0;
      uint32_t work_prev = 0;
      auto turn = [&](int j, auto first, auto final, auto diagonal, auto boundary) {
        constexpr bool FIRST = decltype(first)::value, last = decltype(final)::value;  // last: the last PV's own turn
        constexpr bool DIAG = decltype(diagonal)::value, BOUNDARY = decltype(boundary)::value;
        static_assert(!BOUNDARY || (F::CROSS && !FIRST && !last), "the boundary turn is a middle turn of s23's loop");
        float sacc[BN / 2];  // S_j: fresh each turn (zero-initialized by QK's first K-step, scale-d 0)
        __syncwarp();
        // s19: K_j and V_{j-1} tested (mbarrier.test_wait, no wait) before the turn's bar.sync, so the tests' results
        // come back while the warp waits for its turn; each is waited for only if its test saw it not yet landed
        bool k_ready = false, v_ready = false;
        if constexpr (F::EARLY_TEST) {
          if (!last) k_ready = consumer_test_wait(full_k_a, st);
          if (!FIRST) v_ready = consumer_test_wait(full_v_a, held);
        }
        if (!last && !F::EARLY_TEST) {
          if constexpr (F::SPIN_WAIT) consumer_spin_wait(full_k_a, st);
          else consumer_wait(at(full_k, full_k_a), st, h, 1 + st.index);
          if (leader) tl.record(h, &cursor, role, P::OP_WAIT_K, COMPLETE, work, j);
        }
        if constexpr (F::ONE_SYNC) {
          named_bar_sync<PP_THREADS>(PP_BAR0 + wg);  // my turn: one BAR.SYNC on a register id
        } else {
          if (wg == 0) named_bar_sync<PP_BAR0, PP_THREADS>();  // my turn
          else named_bar_sync<PP_BAR0 + 1, PP_THREADS>();
        }
        if (leader) tl.record(h, &cursor, role, P::OP_WAIT_TURN, COMPLETE, work, j);
        if (!last && F::EARLY_TEST) {
          if (!k_ready) consumer_wait(at(full_k, full_k_a), st, h, 1 + st.index);
          if (leader) tl.record(h, &cursor, role, P::OP_WAIT_K, COMPLETE, work, j);
        }
        auto qk = [&] {  // S = Q K_j^T into sacc, issued and committed, not waited
          if (OVERLAP) {
            fence_registers(o);
#pragma unroll
            for (int kk = 0; kk < T::V_KSTEPS; ++kk) fence_registers_u32(pa[kk]);
          }
          fence_registers(sacc);
          wgmma_fence();
          if constexpr (F::DESC_INC) {
            const uint32_t k_lo = k_lo0 + st.index * (Cfg::STAGE_BYTES >> 4);
            if constexpr (F::DESC64) {
              const uint64_t kb = desc64(T::K_DESC, k_lo);
#pragma unroll
              for (int ks = 0; ks < P::Q_KSTEPS; ++ks)
                wgmma_bf16_ss<BN>(sacc, q_desc[ks], desc64_at(kb, T::k_step(ks)), ks > 0);
            } else {
#pragma unroll
              for (int ks = 0; ks < P::Q_KSTEPS; ++ks)
                wgmma_bf16_ss<BN>(sacc, desc_at(Cfg::Q_DESC, q_lo, Cfg::q_step(ks)),
                                  desc_at(T::K_DESC, k_lo, T::k_step(ks)), ks > 0);
            }
          } else {
            const uint32_t k_smem = ring + st.index * Cfg::STAGE_BYTES;
#pragma unroll
            for (int ks = 0; ks < P::Q_KSTEPS; ++ks)
              wgmma_bf16_ss<BN>(sacc, desc(Cfg::Q_DESC, q_a + Cfg::q_step(ks)),
                                desc(T::K_DESC, k_smem + T::k_step(ks)), ks > 0);
          }
          wgmma_commit_group();
          if (!OVERLAP && leader) tl.record(h, &cursor, role, P::OP_ISSUE_QK, ISSUE, work, j);
        };
        auto pv = [&] {  // O += P_{j-1} V_{j-1}, issued and committed, not waited
          consumer_wait(at(full_v, full_v_a), held, h, 1 + STAGES + held.index);
          if (leader) tl.record(h, &cursor, role, P::OP_WAIT_V, COMPLETE, work, j - 1);
          issue_pv(held.index, pa);
          if (leader) tl.record(h, &cursor, role, P::OP_ISSUE_PV, ISSUE, work, j - 1);
        };
        if (OVERLAP) {  // s5: QK_j first, so that wait_group 1 returns with S_j while PV_{j-1} still runs
          if (!FIRST && !F::LATE_V) {
            consumer_wait(at(full_v, full_v_a), held, h, 1 + STAGES + held.index);
            if (leader) tl.record(h, &cursor, role, P::OP_WAIT_V, COMPLETE, work, j - 1);
          }
          if (!last) qk();
          // s15: V_{j-1} waited for while QK_j runs; the wait's branch sits between the groups, so PV fences its own
          // registers (wgmma.fence; without it ptxas injects the same warpgroup.arrive, its C7519 note); no wgmma
          // wait sits between the two groups. Not recorded there: a record would be another branch between them
          if (!FIRST && F::LATE_V && !(F::EARLY_TEST && v_ready)) {
            if constexpr (F::SPIN_WAIT) consumer_spin_wait(full_v_a, held);
            else consumer_wait(at(full_v, full_v_a), held, h, 1 + STAGES + held.index);
          }
          if (!FIRST) issue_pv(held.index, pa, !last && !F::LATE_V);
          // recorded after both issues: a record between them is a branch that makes ptxas add a wgmma.fence
          if (!last && leader) tl.record(h, &cursor, role, P::OP_ISSUE_QK, ISSUE, work, j);
          if (!FIRST && leader) tl.record(h, &cursor, role, P::OP_ISSUE_PV, ISSUE, work, j - 1);
        } else {  // s4: PV_{j-1}, then QK_j
          if (!FIRST) pv();
          if (!last) qk();
        }
        if (wg == 0) named_bar_arrive<PP_BAR0 + 1, PP_THREADS>();  // the other WG's turn
        else if (!last) named_bar_arrive<PP_BAR0, PP_THREADS>();  // after WG 1's last turn WG 0 has none left
        else if (F::PERSIST) named_bar_arrive_if<PP_BAR0, PP_THREADS>(!final_item);  // ... unless an item follows
        if (OVERLAP && !last) {
          if (!FIRST) wgmma_wait_group<1>();  // QK_j (committed first) is done; PV_{j-1} may still run
          else wgmma_wait_group<0>();
          fence_registers(sacc);
          if (leader) tl.record(h, &cursor, role, P::OP_WAIT_QK, COMPLETE, work, j);
          if (warp_leader) consumer_release(at(empty, empty_a), st);  // K_j read
          // s8+: the item's last QK is done, so its Q slot is free: consumer_release, predicated (PV_{j-1} is in
          // flight); written as the mbarrier operation itself, since a PipelineState argument here changes ptxas's output
          if constexpr (F::BAR_HOIST) mbar_arrive_if(q_empty_a + 8u * q_slot, warp_leader && j == kv_tiles - 1);
          else if (F::PERSIST) mbar_arrive_if(&q_empty[q_slot], warp_leader && j == kv_tiles - 1);
          float corr[2];
          if (DIAG) mask_diagonal<BN>(sacc, wg);
          const bool moved = softmax_scores<BN, F>(sacc, m, l, corr, scale_log2, rescales);  // overlaps PV_{j-1}
          if (leader) tl.record(h, &cursor, role, P::OP_SOFTMAX, ISSUE, work, j);
          if (!FIRST) {
            wgmma_wait_group<0>();  // PV_{j-1}: O written, P_{j-1}'s registers free
            fence_registers(o);
            if (leader) tl.record(h, &cursor, role, P::OP_WAIT_PV, COMPLETE, work, j);
            if (warp_leader) consumer_release(at(empty_v, empty_v_a), held);  // V_{j-1} read
          }
          // s16: P_j into pa first (PV_{j-1}, which read pa, is done): the packs share the exponentials' basic block,
          // so ptxas interleaves them with the MUFU.EX2 stream; the rescale's branch follows them
          if constexpr (BOUNDARY) {  // O holds the previous item's result: store it, then start the next item's
            pack_p<BN>(pa, sacc);
            if constexpr (F::EARLY_ITEM) store_o_inv(o, inv_prev, out, row_prev);
            else store_o(o, l_prev, out, row_prev);
            if (leader) tl.record(h, &cursor, role, P::OP_EPILOGUE, ISSUE, work_prev, -1);
#pragma unroll
            for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
          } else {
            if (F::EARLY_PACK) pack_p<BN>(pa, sacc);
            if (moved) rescale_o(o, corr);
            if (!F::EARLY_PACK) pack_p<BN>(pa, sacc);
            if (leader) tl.record(h, &cursor, role, P::OP_O_RESCALE, ISSUE, work, j);
          }
        } else {
          wgmma_wait_group<0>();  // s4: PV_{j-1} and QK_j; s5's last turn: PV_{n-1}
          if (!last) fence_registers(sacc);
          fence_registers(o);
          if (leader)
            tl.record(h, &cursor, role, last ? P::OP_WAIT_PV : P::OP_WAIT_QK, COMPLETE, work, OVERLAP ? j - 1 : j);
          if (warp_leader) {
            if (!last) consumer_release(at(empty, empty_a), st);  // K_j read
            if (!FIRST) consumer_release(at(empty_v, empty_v_a), held);  // V_{j-1} read
          }
          if (last) return;
          softmax_tile<BN, F>(sacc, o, m, l, scale_log2, rescales);  // overlaps the other WG's turn
          pack_p<BN>(pa, sacc);
          if (leader) tl.record(h, &cursor, role, P::OP_SOFTMAX, ISSUE, work, j);
        }
        if (last) return;
        held = st;
        st.advance();
      };
      int it = 0;
      int w_next = k0 < k_end ? item_at(k0) : 0;  // s10: the next entry's load is in flight during an item
      // s23: the item of loop index k (its Q slot it % Q_SLOTS): its rows, Q descriptor, Q wait and a fresh m and l
      int kv0 = 0, q0 = 0;
      int kv0_next = 0, q0_next = 0, kv_tiles_next = 0;  // s24: the next item, decoded a turn early
      bool decoded = false;
      auto enter = [&](int k, int i) {
        const int w = w_next, qs = i % F::Q_SLOTS;
        if (k + k_step < k_end) w_next = item_at(k + k_step);
        if (F::EARLY_ITEM && decoded) {
          kv0 = kv0_next, q0 = q0_next, kv_tiles = kv_tiles_next;
          decoded = false;
        } else {
          item(w, kv0, q0);
        }
        q_slot = qs;
        final_item = k + k_step >= k_end;
        work = F::SPLIT_TAIL && w < 0 ? split().pieces[PIECE_FIELDS * (-1 - w)] : w;  // s26: a piece's item
        q_a = q_smem + qs * Cfg::Q_SLOT + Cfg::q_half(wg);
        if constexpr (F::DESC_INC) q_lo = __shfl_sync(0xffffffffu, desc_lo(Cfg::Q_DESC, q_a), 0);
        set_q_desc();
        consumer_wait(q_full, PipelineState<F::Q_SLOTS>(qs, (i / F::Q_SLOTS) & 1u), h, 0);
        if (leader) tl.record(h, &cursor, role, P::OP_WAIT_Q, COMPLETE, work, -1);
        m[0] = m[1] = -CUDART_INF_F;
        l[0] = l[1] = 0.f;
      };
      bool started = false;  // s23: this item's turn 0 ran as the previous item's boundary turn
#pragma unroll 1
      for (int k = k0; F::CROSS && k < k_end; k += k_step, ++it) {
        if (!started) {
          enter(k, it);
#pragma unroll
          for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
          if (F::CAUSAL && kv_tiles == 1) turn(0, Bool<true>{}, Bool<false>{}, Bool<F::CAUSAL>{}, Bool<false>{});
          else turn(0, Bool<true>{}, Bool<false>{}, Bool<false>{}, Bool<false>{});
        }
        if (F::EARLY_ITEM && k + k_step < k_end) {  // w_next, loaded before the turn just run: decode it now
          const int kt = kv_tiles;
          item(w_next, kv0_next, q0_next);
          kv_tiles_next = kv_tiles;
          kv_tiles = kt;
          decoded = true;
        }
        for (int j = 1; j < kv_tiles - (F::CAUSAL ? 1 : 0); ++j) turn(j, Bool<false>{}, Bool<false>{}, Bool<false>{}, Bool<false>{});
        if (F::CAUSAL && kv_tiles > 1) turn(kv_tiles - 1, Bool<false>{}, Bool<false>{}, Bool<F::CAUSAL>{}, Bool<false>{});
        if (!final_item) {  // the next item's QK_0 joins PV_{n-1}'s turn; this item's O is stored inside it
          if constexpr (F::EARLY_ITEM) row_inv(l, inv_prev);
          l_prev[0] = l[0], l_prev[1] = l[1];
          row_prev = q0 + 64 * wg;
          work_prev = work;
          enter(k + k_step, it + 1);
          if (F::CAUSAL && kv_tiles == 1) turn(0, Bool<false>{}, Bool<false>{}, Bool<F::CAUSAL>{}, Bool<F::CROSS>{});
          else turn(0, Bool<false>{}, Bool<false>{}, Bool<false>{}, Bool<F::CROSS>{});
          started = true;
        } else {
          if constexpr (F::EARLY_ITEM) row_inv(l, inv_prev);
          turn(kv_tiles, Bool<false>{}, Bool<true>{}, Bool<false>{}, Bool<false>{});
          const int entry = F::SPLIT_TAIL ? item_at(k) : 0;  // s26: a piece is a CTA's last entry
          if (F::SPLIT_TAIL && entry < 0)
            store_piece(o, m, l, split(), -1 - entry, scale_log2, out, q0 + 64 * wg, wg);
          else if constexpr (F::EARLY_ITEM) store_o_inv(o, inv_prev, out, q0 + 64 * wg);
          else store_o(o, l, out, q0 + 64 * wg);
          if (leader) tl.record(h, &cursor, role, P::OP_EPILOGUE, ISSUE, work, -1);
        }
      }
#pragma unroll 1
      for (int k = k0; !F::CROSS && k < k_end; k += k_step, ++it) {  // one work item (s4..s7), or this CTA's share (s8)
        const int w = w_next, qs = it % F::Q_SLOTS;
        if (k + k_step < k_end) w_next = item_at(k + k_step);
        if (F::PERSIST) item(w, kv0, q0);
        q_slot = qs;
        final_item = k + k_step >= k_end;
        work = w;
        q_a = q_smem + qs * Cfg::Q_SLOT + Cfg::q_half(wg);
        // broadcast from lane 0 (as CUTLASS's canonical_warp_group_idx): ptxas then knows q_lo is warp-uniform and
        // keeps it in a uniform register, not eight 64-bit descriptors in registers moved by R2UR every tile
        if constexpr (F::DESC_INC) q_lo = __shfl_sync(0xffffffffu, desc_lo(Cfg::Q_DESC, q_a), 0);
        set_q_desc();
        consumer_wait(q_full, PipelineState<F::Q_SLOTS>(qs, (it / F::Q_SLOTS) & 1u), h, 0);
        if (leader) tl.record(h, &cursor, role, P::OP_WAIT_Q, COMPLETE, work, -1);
        if (F::PERSIST) {  // a fresh row state per item
#pragma unroll
          for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
          m[0] = m[1] = -CUDART_INF_F;
          l[0] = l[1] = 0.f;
        }
        if (F::CAUSAL && kv_tiles == 1) {  // tile 0 is the diagonal
          turn(0, Bool<true>{}, Bool<false>{}, Bool<F::CAUSAL>{}, Bool<false>{});
        } else {
          turn(0, Bool<true>{}, Bool<false>{}, Bool<false>{}, Bool<false>{});
          for (int j = 1; j < kv_tiles - (F::CAUSAL ? 1 : 0); ++j) turn(j, Bool<false>{}, Bool<false>{}, Bool<false>{}, Bool<false>{});
          if (F::CAUSAL) turn(kv_tiles - 1, Bool<false>{}, Bool<false>{}, Bool<F::CAUSAL>{}, Bool<false>{});
        }
        turn(kv_tiles, Bool<false>{}, Bool<true>{}, Bool<false>{}, Bool<false>{});
        store_o(o, l, out, (F::PERSIST ? q0 : q_row0) + 64 * wg);
        if (leader) tl.record(h, &cursor, role, P::OP_EPILOGUE, ISSUE, work, -1);
      }
    }
    for (int j = 0; j < (PP ? 0 : kv_tiles); ++j) {  // ------------------------------------- s1, s2, s3 --
      const uint32_t k_smem = ring + st.index * Cfg::STAGE_BYTES;
      if (!WS && leader)
        load_kv<STAGES, BN>(bar, k_smem, st, j, kv_row0, &tmap_k, &tmap_v, h, tl, &cursor, role, work);
      __syncwarp();  // warp 0 reconverges before the .aligned wgmma instructions
      consumer_wait(full_k, st, h, 1 + st.index);
      if (leader) tl.record(h, &cursor, role, P::OP_WAIT_K, COMPLETE, work, j);
      // S = Q K_j^T: 8 K-steps over D, A and B K-major from shared memory.
      fence_registers(sacc);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < P::Q_KSTEPS; ++ks)
        wgmma_bf16_ss<BN>(sacc, desc(Cfg::Q_DESC, q_a + Cfg::q_step(ks)), desc(T::K_DESC, k_smem + T::k_step(ks)),
                          ks > 0);
      wgmma_commit_group();
      if (leader) tl.record(h, &cursor, role, P::OP_ISSUE_QK, ISSUE, work, j);
      wgmma_wait_group<0>();
      fence_registers(sacc);
      if (leader) tl.record(h, &cursor, role, P::OP_WAIT_QK, COMPLETE, work, j);
      softmax_tile<BN, F>(sacc, o, m, l, scale_log2, rescales);
      uint32_t pa[T::V_KSTEPS][4];
      pack_p<BN>(pa, sacc);
      if (leader) tl.record(h, &cursor, role, P::OP_SOFTMAX, ISSUE, work, j);
      consumer_wait(full_v, st, h, 1 + STAGES + st.index);
      if (leader) tl.record(h, &cursor, role, P::OP_WAIT_V, COMPLETE, work, j);
      issue_pv(st.index, pa);  // O += P V_j
      if (leader) tl.record(h, &cursor, role, P::OP_ISSUE_PV, ISSUE, work, j);
      if (LAPIS_PLANT_RACE == 1 && warp_leader) consumer_release(empty, st);  // planted: released before PV is done
      wgmma_wait_group<0>();
      fence_registers(o);
      if (leader) tl.record(h, &cursor, role, P::OP_WAIT_PV, COMPLETE, work, j);
      if (LAPIS_PLANT_RACE != 1 && warp_leader) consumer_release(empty, st);  // K_j and V_j are read
      st.advance();
    }
    if (!PP) {
      store_o(o, l, out, q_row0 + 64 * wg);
      if (leader) tl.record(h, &cursor, role, P::OP_EPILOGUE, ISSUE, work, -1);
    }
    if (LAPIS_TIMELINE && F::COND && stats != nullptr) {  // stats[0] += row-tile rescales (a quad shares its rows)
      const uint32_t warp_sum = __reduce_add_sync(0xffffffffu, threadIdx.x % 4 == 0 ? rescales : 0u);
      if (warp_leader) atomicAdd(stats, warp_sum);
    }
  }
  __syncthreads();  // every role's last record is in before the count is published
  if (threadIdx.x == 0) tl.finish(h, &cursor);
  if (!LAPIS_TIMELINE && threadIdx.x == 0 && stats != nullptr) {  // the clock probe: the CTA's cycles and ns
    uint64_t* o = reinterpret_cast<uint64_t*>(stats) + 4 * cta_linear();
    o[0] = probe[0], o[1] = clock64_cycles(), o[2] = probe[1], o[3] = globaltimer_ns();
  }
}

}  // namespace

// One entry point per instantiation, attn_<entry>_s<STAGES>_n<BN>_c<CONSUMER_WGS>, listed in attention_variants.inc
// (written by `python -m lapis.catalog.generate` from the variant table lapis/catalog/attention.py).
// Grid (L / block_m, B * H) (s8: (CTAs, 1), each CTA walking work items), block_m = 64 x CONSUMER_WGS; block Config::THREADS; dynamic smem Config::SMEM_BYTES
// (host: bench_attention.smem_bytes). scale_log2 = log2(e) / sqrt(D). O is B*H*L x D bf16. stats: null, or (s7's
// instrumented build) one uint32 the kernel adds its row-tile rescale count to, or (plain build) 4 uint64 per CTA
// (linear CTA index): %clock64 at start and end, %globaltimer at start and end, so the host knows the SM clock
// the timed run had (two special-register reads and four stores per CTA: no cost the timing can see). worklist: null,
// or (s10) the work list: gridDim.x + 1 offsets, then the items (int32; lapis.gpu.bench_attention.worklist).
#define LAPIS_ATTENTION(KERNEL, S, BN, C, WS, ...)                                                            \
  extern "C" __global__ void __launch_bounds__(Config<S, BN, C, WS>::THREADS, 1)                              \
      KERNEL(const __grid_constant__ TensorMap tmap_q, const __grid_constant__ TensorMap tmap_k,              \
             const __grid_constant__ TensorMap tmap_v, __nv_bfloat16* out, int seq_len, int bh_count,         \
             float scale_log2, uint32_t* stats, const int* worklist, const __grid_constant__ HarnessArgs h) {  \
    attention<S, BN, C, WS, Features<__VA_ARGS__>>(tmap_q, tmap_k, tmap_v, out, seq_len, bh_count, scale_log2, \
                                                   stats, worklist, h);                                       \
  }

#include "attention_variants.inc"
