"""`h200-flash2`: FlashAttention-2's forward kernel (torch SDPA's flash backend) on the H200, from its public source.

Source: Dao-AILab/flash-attention, csrc/flash_attn/src (read at commit 0251105a2fb1):
- flash_fwd_launch_template.h run_flash_fwd: grid (num_m_block, B, H), blockIdx.x = m_block fastest, one CTA per
  (Q tile, batch, head), kNThreads = 32 kNWarps threads, dynamic smem kSmemSize; not persistent (the hardware block
  scheduler hands out CTAs as slots free). run_mha_fwd_hdim64 / hdim128 / hdim256 pick the traits for sm90
  (TRAITS below): hdim64 Flash_fwd_kernel_traits<64, 128, 128, 4>; hdim128 <128, 128, 64, 4> (not sm8x); hdim256 on
  a GPU whose opt-in smem per block >= 2 D (128 + 2 64) but smem per SM < 4 D (64 + 2 64) runs <256, 128, 64, 8>,
  else <256, 64, 64, 4>: the H200 (232448 B per block, 233472 B per SM >= 196608) takes <256, 64, 64, 4>.
- kernel_traits.h Flash_fwd_kernel_traits: TiledMma over Layout<Shape<kNWarps, 1, 1>> of SM80_16x8x16 (mma.sync
  m16n8k16): each warp owns block_m / warps Q rows and all block_n keys (every warp ldmatrix-reads all of K and V);
  Is_Q_in_regs = Share_Q_K_smem = false: kSmemSize = Q (block_m D 2 B) + one K and one V tile (2 block_n D 2 B).
- flash_fwd_kernel.h compute_attn_1rowblock: cp.async Q and K[n_block_max - 1], one commit group; K/V tiles walked
  from n_block_max - 1 down to n_block_min = 0; per tile n: cp_async_wait<0> + __syncthreads, cp.async V[n] +
  commit, S = Q K^T (flash::gemm: ldmatrix Q and K per k-step, Q re-read from smem every tile since it is not
  held in registers), causal mask on the first n_masking_steps = ceil(block_m / block_n) tiles, cp_async_wait<0>
  + __syncthreads, cp.async K[n-1] + commit (if n > 0), softmax_rescale_o, convert P to bf16 in registers,
  O += P V (flash::gemm_rs: P from registers, ldmatrix V^T). Causal: n_block_max = ceil((m_block + 1) block_m /
  block_n) (the early exit of every tile past the diagonal). One K and one V buffer: V[n] loads under QK, K[n-1]
  under softmax + PV (the "double buffer" is K and V alternating, two commit groups in flight at most).
- softmax.h Softmax::softmax_rescale_o and utils.h Allreduce: per thread (R = 2 block_m / (16 warps) rows of
  C = block_n / 4 scores each): row max = R C FMNMX then quad_allreduce (2 SHFL.BFLY + 2 FMNMX per row);
  scores_scale = exp2f((max_prev - max) scale_log2) per row, row_sum and acc_o (block_m D / (32 warps) per thread)
  multiplied by it; scale_apply_exp2: exp2f(x scale - max_scaled) per score; reduce_sum: R C FADD (thread-local);
  convert_type: R C / 2 F2FP (bf16x2 pack). mask.h apply_mask: lapis.pipeline_sim.causal.MASK_OPS_PER_SCORE per score.
Launch facts (Nsight Compute 2025.3 on the H200, capture of 2026-12-01 at 8x16x4096x128: registers 255,
launch__occupancy_limit_registers = launch__occupancy_limit_shared_mem = 2 blocks, 66560 B of shared memory per
block with the driver's 1 KiB, block 128, grid (32, 8, 16)) and the mainloop's SASS (the same capture's per-
instruction counts: 1220 instructions per warp and K/V tile) check the counts: HMMA 256 = 2 x 128 mma.sync, LDSM 80
(Q and K: 48, V: 32), LDGSTS 16, MUFU 68 = R C + R, SHFL 8 = 2 R, FMNMX 72 = R C + 2 R, F2FP 32, FADD 128 = 2 R C (the
score's - max_scaled is not fused into an FFMA), FMUL 336 and FSETP 72: exp2f (not ex2.approx) adds FSETP and two
predicated FMUL of range scaling to every exponential. Issue per exponential 4 (FSETP, 2 FMUL, MUFU), per score 3
(FMUL, FADD, FADD), per row 4, per O accumulator 1 (the rescale).
The SASS's order: QK's 128 mma.sync come first (with the LDSMs and part of the row max), then about 330
instructions without mma.sync (row max, rescale factors, O rescale, the first row's exponentials), then PV's 128
mma.sync interleaved with the other rows' exponentials, row sums and P packing (593 instructions).

Costs (Flash2Costs), loop_smsp = 1 (the default at FA2's own tiles, TRAITS): a warp's K/V tile is FA2's compiled
loop (lapis.model.warp_loop over the SASS capture lapis/data/captures/sass/fa2-h200-2026-12-02: torch 2.11.0's
flash_fwd_kernel for the head dim and mask; lapis/data/warp_loops.json): its two stretches between the K and V
__syncthreads (QK, then the softmax and PV) each hold the warp's sub-partition ("issue") for the warp's share of
the SMSP cycles the cycle simulation gives with two warps per SMSP (the compiler's stall counts and scoreboards; the
tensor pipe, MUFU and the shared-memory path's ldmatrix and cp.async wavefronts at the pipes capture's rates). At
8x16x4096x128 that is 4999 cycles per warp and tile against the 5560 Nsight Compute measured (-10%). The tiles the
compiler peeled before the loop (each CTA's first; a causal kernel's masked tiles, ceil(block_m / block_n) of
them, plus one where L is not a multiple of the tiles) are costed from their own code, the mask included; so are
the code before the first tile and after the loop (the epilogue's O normalization and store).
softmax_smsp and in_order belong to loop_smsp = 0.

Costs, loop_smsp = 0 (the default at any other tile): per warp, on its SM sub-partition (warp w of a CTA on SMSP
w % 4):
- mma.sync at a quarter of the profile's mma_sync_flop_per_clk_sm (4096 FLOP per m16n8k16), plus one mma.sync
  latency (MMA_LATENCY_CLK, assumed) before its result is read; the ldmatrix bytes of the same GEMM on the SM's one
  shared-memory path (smem_bytes_per_clk_sm) at the same time (flash::gemm interleaves them per k-step);
- the softmax as a dependency chain, not throughput: the row max holds the sub-partition's issue for its FMNMX and
  SHFL and then waits what its chain's latency (C dependent FMNMX per row, two SHFL + FMNMX rounds) leaves over;
  then the rescale factors, the O rescale and the first row's exponentials (MUFU at a quarter of
  mufu_ex2_per_clk_sm and FP32 issue at a quarter of fma_per_clk_sm / 32 warp instructions per clock, at once),
  then the MUFU latency; then PV's mma.sync with the other rows' MUFU and issue alongside (pv_stream).
- softmax_smsp = 1 (default 0: the counts above): the softmax from FA2's SASS (lapis.model.instruction_mix.
  fa2_phases, the capture's K/V-tile loop at hdim 128) by the SM sub-partition model lapis.model.smsp with the
  pipes capture's constants (sass_phases, softmax_smsp): the head (row max, rescale factors, O rescale, the first
  row's exponentials: 326 instructions, 20 MUFU) holds issue for its issue-slot bound (326 cycles) and MUFU for
  20 / rate (160) at once, then waits what its in-order chain (smsp.warp_period, 369 cycles) leaves; PV's stream
  (476 instructions, 48 MUFU: 476 and 384 cycles) runs alongside PV's mma.sync. Other tiles (hdim 64, 256) scale
  the SASS's cycles by softmax.h's per-thread counts (_softmax_counts): exact only at hdim 128. Against the
  attention and race captures' FA2 cases it is not better than the counts: `lapis validate timelines` mean |error|
  over the 16 FA2 cases 22.1% against 21.6% (hdim 128 2 points further off, hdim 64 4 points closer).
- in_order (default 1): the warp issues in order and its PV mma.sync are interleaved with the softmax, so a warp
  waiting at an mma.sync for the tensor pipe (held by the other CTA's warp on the sub-partition) issues none of its
  softmax behind it: the warp holds the tensor pipe from its softmax's start to PV's end. in_order = 0 holds it
  for the mma.sync alone (a warp-specialized or out-of-order view: the softmax hides under the other warp's GEMMs).
  Check (not a fit): an in-order issue replay of the measured SASS mainloop, two warps per sub-partition sharing
  tensor pipe (6 cycles per HMMA), MUFU (8 cycles each) and one issue per cycle, latencies FP32 4, MUFU 20, SHFL
  24, LDS 30, HMMA 33 cycles, gives 4515 cycles per warp and tile (tensor pipe 68% busy); this model gives about
  4020 (77%) at 8x16x4096x128, in_order = 0 about 3220 (96%); Nsight Compute measured 5560 (55%).
- Latencies in cycles: FP32_LATENCY_CLK, SHFL_LATENCY_CLK, MUFU_LATENCY_CLK, MMA_LATENCY_CLK are assumed (the h200
  profile has rates, no per-instruction latency).
- cp.async: one copy per tile for the CTA (the first warp to reach the instruction starts it): LSU wavefronts, the
  bytes over the load path (an equal L2 share; K/V reused by every Q tile of the head), then tma_latency_ns (the
  profile's L2 load latency, assumed for cp.async); __syncthreads costs named_barrier_ns; a CTA slot's next CTA
  starts cta_turnover_ns after.
CTAs resident per SM: the least of the smem limit (kSmemSize + 1 KiB the driver reserves per CTA) and the register
limit (warps x 32 threads x regs_per_thread, allocated per warp in 256-register units); regs_per_thread defaults
to 255 (the measured launch at hdim 128; assumed at 64 and 256). Two CTAs per SM at every head dim: 8 warps, 2 per
sub-partition. The work order: slot_dispatch (the block scheduler: the first wave fills every slot round-robin,
then each CTA goes to the slot that frees first).
Roles (top-level generator functions over a lapis.pipeline_sim.context.Context): `slot<s>` (cta_slot) takes the
SM's CTAs one after another; each CTA (cta) is `warps` warps `cta<s>.w<w>` (warp, the loop above) meeting at one
__syncthreads barrier. With races checked each CTA keeps its own happens-before log (CtaLog: the K and V buffers'
copies and ldmatrix reads, ordered through cp.async.wait_group and __syncthreads).
Not modelled: bank conflicts, instruction-cache misses, the 14 LDL + 14 STL register spills per tile the SASS
shows, the epilogue's smem round trip of O.
"""

from __future__ import annotations

import functools
import heapq
import math
from collections import deque
from dataclasses import dataclass

from lapis.errors import ScheduleError
from lapis.model import instruction_mix, sass, warp_loop
from lapis.model import smsp as smsp_model
from lapis.pipeline_sim.causal import MASK_OPS_PER_SCORE
from lapis.pipeline_sim.commit_groups import CpAsyncGroups
from lapis.pipeline_sim.schedule import Schedule
from lapis.pipeline_sim.units import SMSP_PER_SM, Smsp
from lapis.pipeline_sim.work_order import kv_tiles_per_item

__all__ = ["DEFAULTS", "FLASH2", "SCHEDULES", "TRAITS", "Flash2Costs", "cta", "launch", "traits", "warp"]

# head dim -> (kBlockM, kBlockN, kNWarps): flash_fwd_launch_template.h run_mha_fwd_hdim*, sm90, no dropout
TRAITS = {64: (128, 128, 4), 128: (128, 64, 4), 256: (64, 64, 4)}
DEFAULTS = dict(block_m=128, block_n=64, warps=4, regs_per_thread=255, in_order=1, causal=0, softmax_smsp=0,
                loop_smsp=1)
MMA_FLOP = 2 * 16 * 8 * 16  # one mma.sync.m16n8k16
WAVEFRONT_BYTES = 128
SMEM_RESERVED_PER_CTA = 1024  # B the driver reserves per CTA on sm80+ (CUDA C++ Programming Guide, shared memory)
REG_ALLOC_UNIT = 256  # registers are allocated per warp in units of 256 (CUDA occupancy calculator)
# Assumed dependent-issue latencies (cycles): not in the h200 profile; round values of the order published
# microbenchmarks of sm80/sm90 report for FP32 ALU ops, SHFL, MUFU.EX2 and mma.sync.m16n8k16.
FP32_LATENCY_CLK = 4
SHFL_LATENCY_CLK = 24
MUFU_LATENCY_CLK = 20
MMA_LATENCY_CLK = 32
SASS_TRAITS = dict(block_m=128, block_n=64, warps=4, d=128)  # the FA2 SASS softmax_smsp = 1 reads


@functools.lru_cache(maxsize=1)
def sass_phases() -> dict[str, dict[str, float]]:
    """Cycles of FA2's softmax phases (instruction_mix.fa2_phases: "head" before PV's first mma.sync, "pv" among
    PV's) on one SM sub-partition, by lapis.model.smsp with the pipes capture's constants: issue, the largest of the
    issue-slot bound (every instruction, MUFU included) and each non-MUFU pipe's n / rate; mufu, the MUFU pipe's
    n / rate; chain, one warp alone issuing the phase in order, each instruction after its sources' latency
    (smsp.warp_period)."""
    consts = smsp_model.Constants.from_pipes_capture(smsp_model.PIPES_CAPTURE)
    out = {}
    for name in ("head", "pv"):
        body = list(instruction_mix.fa2_phases()[name])
        mix = sass.pipe_mix(body)
        xu = mix.pop("xu", 0)
        issue = max([(sum(mix.values()) + xu) / consts.issue_per_clk] + [n / consts.rate[q] for q, n in mix.items()])
        out[name] = dict(issue=issue, mufu=xu / consts.rate["xu"], chain=smsp_model.warp_period(body, consts))
    return out


def _per_thread(block_m: int, block_n: int, warps: int, d: int) -> tuple[int, int, int]:
    """(rows, scores per row, O accumulators) one thread holds (m16n8 accumulator layout)."""
    rows = block_m // warps
    return 2 * rows // 16, block_n // 4, rows * d // 32


def _softmax_counts(r: int, c: int, o: int) -> tuple[int, int, int, int, int]:
    """Per-thread instruction counts of the softmax phases from softmax.h (module docstring): (head issue, pv issue,
    head issue on a CTA's first tile, head MUFU, pv MUFU). Per exponential FSETP + 2 FMUL + MUFU, per score FMUL +
    2 FADD and F2FP per 2, per row FFMA, FSEL, 2 FMUL; the row max r c + 4 r; the rescale r exponentials and o
    FMUL (not on the first tile)."""
    per_exp, per_score, per_row = 4, 3, 4
    row_max, gap, rescale = r * c + 4 * r, per_row * r + c * (per_exp + per_score), r * per_exp + o
    pv = (r - 1) * c * (per_exp + per_score) + r * c // 2
    return row_max + gap + rescale, pv, row_max + gap, c + r, (r - 1) * c


def softmax_smsp(r: int, c: int, o: int, clk: float) -> dict:
    """softmax_smsp = 1: the Flash2Costs softmax fields from sass_phases, scaled for other tiles than SASS_TRAITS by
    _softmax_counts (exact at SASS_TRAITS). The head holds issue and MUFU at once, then what its chain leaves
    (exp_tail_ns); no separate row max (the head holds it)."""
    head, pv, first, head_mufu, pv_mufu = _softmax_counts(r, c, o)
    ref = _softmax_counts(*_per_thread(**SASS_TRAITS))
    ph = sass_phases()
    h_issue, h_mufu = ph["head"]["issue"] * head / ref[0], ph["head"]["mufu"] * head_mufu / ref[3]
    tail = max(0.0, ph["head"]["chain"] - max(ph["head"]["issue"], ph["head"]["mufu"])) * head / ref[0]
    return dict(max_issue_ns=0.0, max_chain_ns=0.0, gap_mufu_ns=h_mufu * clk, gap_issue_ns=h_issue * clk,
                first_gap_mufu_ns=h_mufu * c / (c + r) * clk, first_gap_issue_ns=h_issue * first / head * clk,
                pv_mufu_ns=(ph["pv"]["mufu"] * pv_mufu / ref[4] if ref[4] else 0.0) * clk,
                pv_issue_ns=ph["pv"]["issue"] * pv / ref[1] * clk, exp_tail_ns=tail * clk)


def loop_costs(d: int, causal: bool, clk: float, mma_ns: float, issue_ns: float, mufu_ns: float) -> dict:
    """loop_smsp = 1: a warp's K/V tile from FA2's compiled code (lapis.model.warp_loop, lapis/data/warp_loops.json:
    the kernel for head dim d and the mask). loop_ns: its last tile loop's segments, the SMSP cycles per warp (two
    warps per SMSP) in ns, before the K barrier, between the barriers (QK), after the V barrier (softmax and PV);
    peeled_ns: (QK, softmax and PV) of each tile the compiler peeled before the loop (the first tile; a causal
    kernel's masked tiles); *_tensor_ns: each segment's mma.sync on the tensor pipe (its HMMA x mma_ns);
    prologue_ns, epilogue_ns: the code before the first tile and after the loop (warp_loop.ends), likewise;
    *_busy_ns: per segment the FP32-pipe and MUFU time of its instructions (issue_ns, mufu_ns a warp-instruction),
    for the run's utilization only; loop_parts, peeled_parts: what loop_segment charges a warp per part of a tile
    (loop_parts, peeled_parts), summed here once per run rather than per warp and tile.
    ScheduleError when the file has no such kernel or its loop has not two barriers."""
    k = warp_loop.kernel(d, causal)
    if k is None:
        raise ScheduleError("loop_smsp=1 needs FA2's compiled loop for the head dim and mask",
                            f"D {d}, causal {causal}", "use loop_smsp=0, or regenerate lapis/data/warp_loops.json")
    lp = k["loops"][-1]
    if len(lp["segment_cycles"]) != 3:
        raise ScheduleError("FA2's K/V-tile loop has two __syncthreads", f"{len(lp['segment_cycles']) - 1}",
                            "regenerate lapis/data/warp_loops.json from FA2's SASS")
    peeled = k.get("peeled", [])

    def busy(x: dict) -> tuple:  # per segment (FP32 pipe ns, MUFU ns) of one warp
        return tuple((b.get("fma", 0) * issue_ns, b.get("xu", 0) * mufu_ns) for b in x.get("segment_busy", ()))
    out = dict(loop_busy_ns=busy(lp), peeled_busy_ns=tuple(busy(t) for t in peeled),
               loop_ns=tuple(c * clk for c in lp["segment_cycles"]),
               loop_tensor_ns=tuple(n * mma_ns for n in lp["segment_hmma"]),
               peeled_ns=tuple(tuple(c * clk for c in t["segment_cycles"]) for t in peeled),
               peeled_tensor_ns=tuple(tuple(n * mma_ns for n in t["segment_hmma"]) for t in peeled),
               prologue_ns=k["prologue"]["cycles"] * clk, epilogue_ns=k["epilogue"]["cycles"] * clk)
    return dict(out, loop_parts=loop_parts(out["loop_ns"], out["loop_tensor_ns"], out["loop_busy_ns"]),
                peeled_parts=tuple(peeled_parts(*t) for t in zip(out["peeled_ns"], out["peeled_tensor_ns"],
                                                                 out["peeled_busy_ns"])))


def _pipes(busy: list) -> tuple[float, float]:
    """(FP32-pipe ns, MUFU ns) summed over segments' (FP32, MUFU) pairs."""
    return sum(f for f, _ in busy), sum(m for _, m in busy)


def loop_parts(ns: tuple, tensor: tuple, busy: tuple) -> tuple:
    """Per part of a loop tile, 0 (QK: the segment between the barriers) and 1 (softmax and PV: the segment after
    the V barrier, then the one before the K barrier, the loop's code order): (SMSP issue ns, tensor-pipe ns,
    FP32-pipe ns, MUFU ns) of one warp, from loop_costs' per-segment tuples (busy: (FP32, MUFU) per segment,
    fewer than the segments where the file has none)."""
    return tuple((ns[1 + part] + (ns[0] if part else 0.0), tensor[1 + part] + (tensor[0] if part else 0.0),
                  *_pipes([busy[i] for i in ((1 + part, 0) if part else (1,)) if i < len(busy)])) for part in (0, 1))


def peeled_parts(ns: tuple, tensor: tuple, busy: tuple) -> tuple:
    """Per part of a peeled tile, 0 (QK) and 1 (softmax and PV), its own segments: as loop_parts."""
    return tuple((ns[part], tensor[part], *_pipes([busy[part]] if busy else [])) for part in (0, 1))


def traits(d: int) -> dict:
    """FA2's (block_m, block_n, warps) for head dim d on sm90 (TRAITS); ScheduleError for one torch builds none of
    here (the three this module is checked at)."""
    if d not in TRAITS:
        raise ScheduleError("h200-flash2 knows FA2's sm90 traits for head dims 64, 128, 256", f"D = {d}",
                            "use D = 64, 128 or 256, or pass block_m, block_n, warps")
    bm, bn, w = TRAITS[d]
    return dict(block_m=bm, block_n=bn, warps=w)


def smem_bytes(bm: int, bn: int, d: int) -> int:
    """kSmemSize: Q + one K + one V tile, bf16 (Share_Q_K_smem false)."""
    return (bm + 2 * bn) * d * 2


def resident_limit(p, smem: int, warps: int, regs: int) -> int:
    """CTAs per SM: the least of the shared-memory and register limits."""
    per_warp = math.ceil(32 * regs / REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    return min(p["smem_bytes_per_sm"] // (smem + SMEM_RESERVED_PER_CTA), p["registers_per_sm"] // (warps * per_warp))


def resolve(p, dims: tuple, params: dict) -> tuple[dict, dict]:
    """DEFAULTS, then FA2's traits for D where the caller names no tile, then the caller's parameters; the fit.
    ScheduleError: rows per warp not a multiple of 16, L not a multiple of the tiles, smem over the block limit."""
    b, h, seq, d = dims
    tile = {} if {"block_m", "block_n", "warps"} & set(params) else traits(d)
    prm = {**DEFAULTS, **tile, **params}
    bm, bn, w = prm["block_m"], prm["block_n"], prm["warps"]
    if "loop_smsp" not in params and (d not in TRAITS or (bm, bn, w) != TRAITS[d]):
        prm["loop_smsp"] = 0  # another tile than FA2's: no compiled loop costs it
    if prm["loop_smsp"] not in (0, 1):
        raise ScheduleError("loop_smsp is 0 or 1", prm["loop_smsp"],
                            "use loop_smsp=1 (FA2's compiled loop on the SM sub-partitions) or 0 (the counts)")
    if prm["loop_smsp"] and (prm["softmax_smsp"] or not prm["in_order"]):
        raise ScheduleError("softmax_smsp and in_order choose among the count-based costs (loop_smsp=0)",
                            f"loop_smsp 1 with softmax_smsp {prm['softmax_smsp']}, in_order {prm['in_order']}",
                            "add loop_smsp=0, or drop softmax_smsp and in_order")
    if prm["loop_smsp"] and (d not in TRAITS or (bm, bn, w) != TRAITS[d]):
        raise ScheduleError("loop_smsp=1 costs FA2's compiled kernels, whose tile is FA2's for the head dim",
                            f"D {d}, block_m {bm}, block_n {bn}, warps {w}",
                            f"use FA2's tile ({TRAITS}) or loop_smsp=0")
    if prm["in_order"] not in (0, 1):
        raise ScheduleError("in_order is 0 or 1", prm["in_order"], "use in_order=1 (FA2's compiled order) or 0")
    if prm["softmax_smsp"] not in (0, 1):
        raise ScheduleError("softmax_smsp is 0 or 1", prm["softmax_smsp"],
                            "use softmax_smsp=0 (softmax.h's counts) or 1 (FA2's SASS by lapis.model.smsp)")
    if bm % (16 * w) or bn % 16 or seq % bm or seq % bn:
        raise ScheduleError("each warp takes a multiple of 16 rows and L a multiple of both tiles",
                            f"block_m {bm}, block_n {bn}, warps {w}, L {seq}", "use FA2's traits (TRAITS)")
    smem = smem_bytes(bm, bn, d)
    if smem > p["smem_bytes_per_block"]:
        raise ScheduleError("kSmemSize fits a block's shared memory", f"{smem} B > {p['smem_bytes_per_block']} B",
                            "use FA2's traits for this head dim")
    resident = resident_limit(p, smem, w, prm["regs_per_thread"])
    return prm, dict(smem_bytes=smem, registers=resident * w * 32 * prm["regs_per_thread"], ctas_per_sm=resident)


def deal(p, dims: tuple, prm: dict) -> list:
    """Per SM, the K/V tile counts of its CTAs in launch order (slot_dispatch over the grid's blockIdx order,
    m_block fastest, with the CTAs resident per SM)."""
    b, h, seq, d = dims
    bm, bn = prm["block_m"], prm["block_n"]
    kv = [kv_tiles_per_item(q, seq // bn, bm, bn, bool(prm["causal"])) for _ in range(b * h) for q in range(seq // bm)]
    resident = resident_limit(p, smem_bytes(bm, bn, d), prm["warps"], prm["regs_per_thread"])
    return [[kv[i] for i in items] for items in slot_dispatch(kv, p["sm_count"], resident)]


def slot_dispatch(weights: list, sm_count: int, resident: int) -> list[list[int]]:
    """CTA indices per SM as the block scheduler hands them out: the first sm_count x resident CTAs fill every
    slot round-robin over the SMs (CTA i on SM i % sm_count), each later one goes to the slot that frees first
    (a slot's finish estimated by the K/V tiles it has taken; ties: the lowest SM, then slot)."""
    per_sm = [[] for _ in range(min(sm_count, len(weights)))]
    heap = []
    for i, w in enumerate(weights):
        if i < sm_count * resident:
            sm, load = i % sm_count, 0.0
        else:
            load, sm, _ = heapq.heappop(heap)
        per_sm[sm].append(i)
        heapq.heappush(heap, (load + w, sm, i))
    return per_sm


@dataclass(frozen=True)
class Flash2Costs:
    """What a warp's ops take (ns) on its sub-partition, from the profile's rates and the per-thread instruction
    counts (module docstring). qk_ns / pv_ns: the tile's mma.sync on the sub-partition's tensor core; qk_bytes /
    pv_bytes: the ldmatrix bytes of the same GEMM; mma_tail_ns: one mma.sync's latency; max_issue_ns, max_chain_ns:
    the row max's issue time and dependency latency; gap_mufu_ns, gap_issue_ns: the rescale factors, O rescale and
    first row's exponentials (first_gap_*: a CTA's first tile, nothing to rescale); pv_mufu_ns, pv_issue_ns: the
    other rows' exponentials, sums and P packing issued among PV's mma.sync; exp_tail_ns: the MUFU, FADD latency
    after the last exponential; mask_ns: the causal mask's issue on a diagonal tile; lsu_rate: shared-memory
    wavefronts per ns; tile_bytes: a K or V tile; q_bytes: the Q tile; o_bytes: a warp's O rows; latency_ns: a
    cp.async's latency after its bytes; sync_ns: __syncthreads; turnover_ns: CTA exit to the next CTA's start;
    resident: CTAs per SM; q_tiles: Q tiles per head (K/V reuse); masking_steps: masked tiles per CTA."""

    qk_ns: float
    pv_ns: float
    qk_bytes: int
    pv_bytes: int
    mma_tail_ns: float
    max_issue_ns: float
    max_chain_ns: float
    gap_mufu_ns: float
    gap_issue_ns: float
    first_gap_mufu_ns: float
    first_gap_issue_ns: float
    pv_mufu_ns: float
    pv_issue_ns: float
    exp_tail_ns: float
    mask_ns: float
    lsu_rate: float
    tile_bytes: int
    q_bytes: int
    o_bytes: int
    latency_ns: float
    sync_ns: float
    turnover_ns: float
    resident: int
    q_tiles: int
    masking_steps: int
    loop_ns: tuple = ()
    loop_tensor_ns: tuple = ()
    peeled_ns: tuple = ()
    peeled_tensor_ns: tuple = ()
    loop_busy_ns: tuple = ()
    peeled_busy_ns: tuple = ()
    loop_parts: tuple = ()  # loop_parts(): per part (issue, tensor, FP32, MUFU ns), built once per run
    peeled_parts: tuple = ()  # peeled_parts() of each peeled tile
    prologue_ns: float = 0.0
    epilogue_ns: float = 0.0

    @classmethod
    def of(cls, p, dims: tuple, prm: dict, flags: dict) -> Flash2Costs:
        _, _, seq, d = dims
        bm, bn, w = prm["block_m"], prm["block_n"], prm["warps"]
        clk = 1 / p["clock_ghz"]  # ns per cycle
        rows = bm // w
        r, c = 2 * rows // 16, bn // 4  # rows and scores per row a thread holds (m16n8 accumulator layout)
        o = rows * d // 32  # O accumulators per thread
        mma_ns = MMA_FLOP / (p.per_ns("mma_sync_flop_per_clk_sm") / SMSP_PER_SM)
        issue_ns = 32 / (p.per_ns("fma_per_clk_sm") / SMSP_PER_SM)  # one warp's FP32 instruction
        mufu_ns = 32 / (p.per_ns("mufu_ex2_per_clk_sm") / SMSP_PER_SM)  # one warp's MUFU.EX2
        n_qk, n_pv = (rows // 16) * (bn // 8) * (d // 16), (rows // 16) * (d // 8) * (bn // 16)
        # issue per exponential: FSETP + 2 predicated FMUL (exp2f's range scaling) + the MUFU itself; per score:
        # FMUL (scale) + FADD (- max_scaled) + FADD (row sum), and F2FP per 2; per row: FFMA, FSEL, 2 FMUL
        per_exp, per_score, per_row = 4, 3, 4
        gap = per_row * r + c * (per_exp + per_score)  # the first row's exponentials, before PV's first mma
        rescale = r * per_exp + o  # the rescale factors' exp2f and the O accumulators' FMUL (not the first tile)
        soft = dict(max_issue_ns=(r * c + 4 * r) * issue_ns,
                    max_chain_ns=(c * FP32_LATENCY_CLK + 2 * (SHFL_LATENCY_CLK + FP32_LATENCY_CLK)) * clk,
                    gap_mufu_ns=(c + r) * mufu_ns, gap_issue_ns=(gap + rescale) * issue_ns,
                    first_gap_mufu_ns=c * mufu_ns, first_gap_issue_ns=gap * issue_ns,
                    pv_mufu_ns=(r - 1) * c * mufu_ns,
                    pv_issue_ns=((r - 1) * c * (per_exp + per_score) + r * c // 2) * issue_ns,
                    exp_tail_ns=(MUFU_LATENCY_CLK + 2 * FP32_LATENCY_CLK) * clk)
        if prm.get("softmax_smsp"):
            soft = softmax_smsp(r, c, o, clk)
        loop = {}
        if prm["loop_smsp"]:
            loop = loop_costs(d, bool(prm["causal"]), clk, mma_ns, issue_ns, mufu_ns)
        return cls(**loop, qk_ns=n_qk * mma_ns, pv_ns=n_pv * mma_ns, qk_bytes=(rows + bn) * d * 2, pv_bytes=bn * d * 2,
                   mma_tail_ns=MMA_LATENCY_CLK * clk, **soft,
                   mask_ns=MASK_OPS_PER_SCORE * r * c * issue_ns,
                   lsu_rate=p["smem_bytes_per_clk_sm"] / WAVEFRONT_BYTES * p["clock_ghz"],
                   tile_bytes=bn * d * 2, q_bytes=bm * d * 2, o_bytes=rows * d * 2,
                   latency_ns=p["tma_latency_ns"], sync_ns=p["named_barrier_ns"], turnover_ns=p["cta_turnover_ns"],
                   resident=resident_limit(p, smem_bytes(bm, bn, d), w, prm["regs_per_thread"]),
                   q_tiles=seq // bm, masking_steps=math.ceil(bm / bn) if prm["causal"] else 0)

    def lsu_ns(self, nbytes: int) -> float:
        """Shared-memory path time of nbytes (cp.async or ldmatrix): 128 B wavefronts at the SM's rate."""
        return nbytes / WAVEFRONT_BYTES / self.lsu_rate




class CtaLog:
    """A CTA's copies and, when races are checked, its happens-before log (lapis.pipeline_sim.races): every
    __syncthreads use is a node after each warp's arrival and before each warp's pass; a copy's landing writes its
    buffer (K or V, one slot each: kSmemSize holds one of each) after the issuing warp's issue; cp.async.wait_group
    orders the waiting warp after the landings of its groups; ldmatrix reads the buffer."""

    def __init__(self, hb):
        self.hb, self.loads, self.uses, self.landed = hb, {}, {}, {}

    def use_node(self, use: int) -> int:
        if use not in self.uses:
            self.uses[use] = self.hb.op("__syncthreads", f"bar 0 use {use} completes")
        return self.uses[use]

    def arrive(self, role: str, use: int) -> None:
        if self.hb is not None:
            self.hb.edge(self.hb.op(role, f"arrive bar 0 use {use}"), self.use_node(use))

    def passed(self, role: str, use: int) -> None:
        if self.hb is not None:
            self.hb.op(role, f"pass bar 0 use {use}", after=self.use_node(use))

    def waited(self, role: str, keys: list) -> None:
        if self.hb is not None:
            n = self.hb.op(role, "cp.async.wait_group 0")
            for k in keys:
                self.hb.edge(self.landed[k], n)

    def read(self, role: str, key: tuple) -> None:
        if self.hb is not None:
            self.hb.access(role, key[0], 0, key[1], "read")


def cp_async(ctx, log: CtaLog, key: tuple, nbytes: int, reuse: float, role: str, op: str, **kw):
    """The CTA's cp.async of one tile (each warp copies its share; modelled as one copy started by the first warp
    to reach the instruction): its LSU wavefronts, the bytes over the load path, then the latency. Returns the copy
    (a simpy process) for the warp's commit group; every warp's group holds the same copy."""
    if key not in log.loads:
        issued = log.hb.op(role, f"cp.async {key[0]}[{key[1]}]") if log.hb is not None else None
        log.loads[key] = ctx.child(_land(ctx, log, key, issued, nbytes, reuse, op, kw))
    return log.loads[key]


def _land(ctx, log: CtaLog, key: tuple, issued, nbytes: int, reuse: float, op: str, kw: dict):
    yield from ctx.occupy("lsu", ctx.cost.lsu_ns(nbytes), "cp.async", op, **kw)
    yield from ctx.occupy("l2", lambda: nbytes / ctx.grid.share(reuse), "l2", f"{op} lands", **kw)
    yield ctx.env.timeout(ctx.cost.latency_ns)
    if log.hb is not None:
        log.landed[key] = log.hb.access(f"cp.async {key[0]}[{key[1]}]", key[0], 0, key[1], "write", after=issued)


def wait_and_sync(ctx, groups: CpAsyncGroups, keys: list, log: CtaLog, use: int, bar, role: str):
    """cp_async_wait<0> then __syncthreads (bar.sync 0 over the CTA's threads), one wait."""
    yield groups.wait(0)
    log.waited(role, keys)
    log.arrive(role, use)
    yield bar.sync(role, 32, event=ctx.rec.last_id(role))
    log.passed(role, use)
    yield ctx.env.timeout(ctx.cost.sync_ns)


def hold(ctx, resource, busy, unit: str, ns: float):
    """Hold `resource` for ns and add it to busy[unit], unrecorded: the part of an op whose event the caller records
    (one event per phase keeps a long run under the recorder's bound)."""
    with resource.request() as req:
        yield req
        yield ctx.env.timeout(ns)
    busy[unit] += ns


def gemm(ctx, smsp: Smsp, ns: float, nbytes: int, role: str, op: str, **kw):
    """flash::gemm: the warp's mma.sync on its tensor core while its ldmatrix bytes cross the SM's shared-memory
    path (recorded as one op from when the tensor core is granted), then one mma.sync latency."""
    c, t0 = ctx.cost, ctx.now
    with smsp.units["tensor"].request() as req:
        yield req
        if ctx.now > t0:
            ctx.rec.add(role, "wait tensor", t0, kind="wait", **kw)
        t1 = ctx.now
        yield ctx.env.all_of([ctx.env.timeout(ns), ctx.child(hold(ctx, ctx.units["lsu"], ctx.busy, "lsu",
                                                                  c.lsu_ns(nbytes)))])
        smsp.busy["tensor"] += ns
        ctx.rec.add(role, f"mma.sync {op} (+ ldmatrix)", t1, **kw)
    yield ctx.env.timeout(c.mma_tail_ns)


def softmax_head(ctx, smsp: Smsp, first: bool, role: str, **kw):
    """The softmax before PV's first mma.sync (no mma.sync in it), one recorded op: the row max (issue, then the
    latency its chain leaves), then the rescale factors, the O rescale and the first row's exponentials (MUFU and
    FP32 issue at once), then the MUFU latency."""
    c, t0 = ctx.cost, ctx.now
    yield from hold(ctx, smsp.units["fma"], smsp.busy, "fma", c.max_issue_ns)
    yield ctx.env.timeout(max(0.0, c.max_chain_ns - c.max_issue_ns))
    mufu, issue = (c.first_gap_mufu_ns, c.first_gap_issue_ns) if first else (c.gap_mufu_ns, c.gap_issue_ns)
    yield ctx.env.all_of([ctx.child(hold(ctx, smsp.units["mufu"], smsp.busy, "mufu", mufu)),
                          ctx.child(hold(ctx, smsp.units["fma"], smsp.busy, "fma", issue))])
    yield ctx.env.timeout(c.exp_tail_ns)
    ctx.rec.add(role, "softmax: row max, rescale, first row's exp2f", t0, **kw)


def pv_stream(ctx, smsp: Smsp, first: bool, role: str, **kw):
    """The softmax and PV as one in-order instruction stream (the compiled mainloop interleaves PV's mma.sync with
    the exponentials, row sums and P packing, and a warp stalled at an mma.sync issues nothing behind it): the warp
    holds its sub-partition's tensor pipe from its softmax's start to PV's end (with in_order = 0, for PV only).
    Inside: softmax_head, then PV's mma.sync while its ldmatrix of V, the other rows' MUFU and FP32 issue run
    alongside (one recorded op); then one mma.sync latency."""
    c, t0 = ctx.cost, ctx.now
    if not ctx.prm["in_order"]:
        yield from softmax_head(ctx, smsp, first, role, **kw)
        t0 = ctx.now
    with smsp.units["tensor"].request() as req:
        yield req
        if ctx.now > t0:
            ctx.rec.add(role, "wait tensor", t0, kind="wait", **kw)
        if ctx.prm["in_order"]:
            yield from softmax_head(ctx, smsp, first, role, **kw)
        t1 = ctx.now
        yield ctx.env.all_of([ctx.env.timeout(c.pv_ns),
                              ctx.child(hold(ctx, ctx.units["lsu"], ctx.busy, "lsu", c.lsu_ns(c.pv_bytes))),
                              ctx.child(hold(ctx, smsp.units["mufu"], smsp.busy, "mufu", c.pv_mufu_ns)),
                              ctx.child(hold(ctx, smsp.units["fma"], smsp.busy, "fma", c.pv_issue_ns))])
        smsp.busy["tensor"] += c.pv_ns
        ctx.rec.add(role, "mma.sync PV (+ ldmatrix V, exp2f, row sums, P packing)", t1, **kw)
    yield ctx.env.timeout(c.mma_tail_ns)


def loop_segment(ctx, smsp: Smsp, part: int, step: int, role: str, op: str, **kw):
    """loop_smsp = 1: part 0 (QK) or 1 (softmax and PV) of the warp's step-th tile from the compiled code
    (Flash2Costs: a peeled tile's own segments, else the loop's, whose stretch before the K barrier joins the
    softmax's, the loop's code order) holds the warp's sub-partition for its share of the SMSP's cycles: two warps
    alternate, each tile taking both shares, as lapis.model.smsp's simulation of the two interleaved."""
    c = ctx.cost
    ns, tensor, fma, mufu = (c.peeled_parts[step] if step < len(c.peeled_parts) else c.loop_parts)[part]
    yield from smsp.use("issue", ns, role, op, **kw)
    smsp.busy["tensor"] += tensor
    smsp.busy["fma"] += fma
    smsp.busy["mufu"] += mufu


def warp(ctx, smsp: Smsp, role: str, item: int, n_kv: int, bar, log: CtaLog):
    """One warp of compute_attn_1rowblock (module docstring): its block_m / warps Q rows against K/V tiles
    n_kv - 1 .. 0, then its O rows stored. log: the CTA's copies and race log."""
    c, groups, keys = ctx.cost, CpAsyncGroups(ctx.env, role), [("Q", 0), ("K", n_kv - 1)]
    if c.prologue_ns:
        yield from smsp.use("issue", c.prologue_ns, role, "prologue (compiled)", work_item=item)
    groups.issue(cp_async(ctx, log, keys[0], c.q_bytes, 1, role, "cp.async Q", work_item=item))
    groups.issue(cp_async(ctx, log, keys[1], c.tile_bytes, c.q_tiles, role, "cp.async K", work_item=item,
                          k_index=n_kv - 1))
    groups.commit()
    for step, n in enumerate(range(n_kv - 1, -1, -1)):
        kw = dict(work_item=item, k_index=n)
        yield from ctx.waited(role, "wait cp.async K + __syncthreads",
                              wait_and_sync(ctx, groups, list(keys), log, 2 * step, bar, role),
                              flow=lambda: bar.last_completer, **kw)
        keys.append(("V", n))
        groups.issue(cp_async(ctx, log, keys[-1], c.tile_bytes, c.q_tiles, role, "cp.async V", **kw))
        groups.commit()
        log.read(role, ("K", n))
        if c.loop_ns:
            yield from loop_segment(ctx, smsp, 0, step, role, "QK (compiled loop)", **kw)
        else:
            yield from gemm(ctx, smsp, c.qk_ns, c.qk_bytes, role, "QK", **kw)
        if step < c.masking_steps and not c.loop_ns:
            yield from smsp.use("fma", c.mask_ns, role, "causal mask", **kw)
        yield from ctx.waited(role, "wait cp.async V + __syncthreads",
                              wait_and_sync(ctx, groups, list(keys), log, 2 * step + 1, bar, role),
                              flow=lambda: bar.last_completer, **kw)
        if n > 0:
            keys.append(("K", n - 1))
            groups.issue(cp_async(ctx, log, keys[-1], c.tile_bytes, c.q_tiles, role, "cp.async K", work_item=item,
                                  k_index=n - 1))
            groups.commit()
        log.read(role, ("V", n))
        if c.loop_ns:
            yield from loop_segment(ctx, smsp, 1, step, role, "softmax + PV (compiled loop)", **kw)
        else:
            yield from pv_stream(ctx, smsp, step == 0, role, **kw)
    if c.epilogue_ns:
        yield from smsp.use("issue", c.epilogue_ns, role, "epilogue (compiled)", work_item=item)
    yield from ctx.occupy("l2", lambda: c.o_bytes / ctx.grid.share(1), role, "store O", work_item=item)


def cta(ctx, smsps: list, slot: int, item: int, n_kv: int):
    """One CTA: its warps on sub-partitions (slot warps + w) % 4, meeting at one __syncthreads barrier; its own
    race log when races are checked (its K and V buffers are its own)."""
    w = ctx.prm["warps"]
    roles = [f"cta{slot}.w{i}" for i in range(w)]
    bar = ctx.named_barrier(f"__syncthreads cta{slot} item {item}", 0, 32 * w, {r: 32 for r in roles})
    log = CtaLog(ctx.race_log())
    yield ctx.env.all_of([ctx.spawn(f"{r}.item{item}", warp(ctx, smsps[(slot * w + i) % SMSP_PER_SM], r, item, n_kv,
                                                            bar, log)) for i, r in enumerate(roles)])


def cta_slot(ctx, smsps: list, slot: int, queue: deque):
    """A CTA slot of the SM: takes the SM's next CTA when its last one exits (the block scheduler's refill)."""
    first = True
    while queue:
        item, n_kv = queue.popleft()
        if not first:
            yield ctx.env.timeout(ctx.cost.turnover_ns)
        first = False
        yield from cta(ctx, smsps, slot, item, n_kv)


def launch(ctx) -> None:
    """One SM: four sub-partitions and min(resident, its CTAs) slots sharing its CTA queue."""
    queue = deque(enumerate(ctx.group.work))
    smsps = [Smsp(ctx) for _ in range(SMSP_PER_SM)]
    for s in range(min(ctx.cost.resident, len(queue))):
        ctx.spawn(f"slot{s}", cta_slot(ctx, smsps, s, queue))


def sm_fit(fit: dict, work: tuple) -> dict:
    ctas = min(fit["ctas_per_sm"], len(work))
    return dict(fit, registers=fit["registers"] // max(fit["ctas_per_sm"], 1) * ctas, ctas_per_sm=ctas)


def summary(per_sm: list, rep, dims: tuple, prm: dict, cost: Flash2Costs) -> dict:
    """CTAs, SMs with work, CTAs and K/V tiles on the representative SM, CTAs resident on it."""
    return dict(work_items=sum(len(w) for w in per_sm), active_sms=len(per_sm), items_per_sm=len(rep.work),
                kv_tiles_on_this_sm=sum(rep.work), resident_ctas=min(cost.resident, len(rep.work)))


def flops(dims: tuple, prm: dict) -> float:
    """The FA benchmarks' convention: 4 B H L^2 D, halved when causal."""
    b, h, seq, d = dims
    return 4.0 * b * h * seq * seq * d / (2 if prm["causal"] else 1)


FLASH2 = Schedule(
    name="h200-flash2", description="FlashAttention-2 forward (torch SDPA flash): 4 warps, mma.sync, cp.async K/V "
    "alternating, softmax as a latency chain", shape="attention", defaults=DEFAULTS, resolve=resolve, work=deal,
    costs=Flash2Costs.of, launch=launch, flops=flops, summary=summary, units=("lsu", "l2"),
    busy=("tensor", "mufu", "fma", "issue", "lsu", "l2"), work_cost=sum, sm_fit=sm_fit, races="slot")
SCHEDULES = (FLASH2,)
