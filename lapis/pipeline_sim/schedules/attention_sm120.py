"""Consumer Blackwell (sm_120, RTX 5090) attention forward (fp16, fp32 accumulation): the Emmy compiler's
move stack (the write-up emmy-flashattention2-consumer-blackwell, not in this repository), as roles over a
lapis.pipeline_sim.context.Context (one per simulated SM); each move is a lapis.pipeline_sim.schedule.Schedule.

Per CTA (`warps` warps, each owning 16*fm query rows of one (batch, head)) and K/V tile j of block_n keys, per
warp: S_j = Q K_j^T (mma.sync), softmax (MUFU ex2 + FMA pipe), O rescale (FMA pipe), O += P_j V_j (mma.sync).
sm120 semantics: mma.sync is synchronous per warp (no async completion: a warp's ops run in program order);
cp.async fills complete per warp as a commit group (wait_group), then __syncthreads (an MBarrier of count
`warps` here) publishes the slab; ldmatrix drains smem into registers; TMA completes through an mbarrier
(TmaPipeline, issued by warp 0). Units: per SM sub-partition (4 per SM, warp w on SMSP w % 4) a quarter of the
SM's tensor, MUFU and FMA rates; per SM one LSU/shared-memory path (smem_bytes_per_clk_sm, one wavefront a
clock) and the load path (load_ns: the chip's L2 (or DRAM) bandwidth split among the SMs loading at that
moment, each SM's load path taken as busy as the simulated one's has been, never ahead of the SM's equal share
of it over the run; then l2_latency_ns or tma_latency_ns).
CTAs resident per SM: the least of the register, shared-memory and warp limits; the representative SM (the one
with the most work; `full`: every SM, lapis.pipeline_sim.grid) runs its CTAs `resident` at a time. CTAs are
numbered with the query tile fastest, then head, then batch (the Emmy kernels decode it from the low bits of their
global id), and the block scheduler hands them to whichever SM frees first (lapis.pipeline_sim.causal.dispatch;
with equal CTAs, SM s takes CTAs s, s + 170, ...).
Each warp first reads its Q rows from HBM once (compulsory traffic at the HBM share of the load path): into the Q
slab (m02, m03) or into registers (m04 on); m01 reads Q with K/V every tile, its first read from HBM.
Causal masking (`causal=1`, every move; lapis.pipeline_sim.causal): a CTA visits the K/V tiles up to and including
its block_m rows' diagonal, in ascending order; on a diagonal tile every warp runs its MMAs and exponentials in
full and masks its scores once in registers (MASK_OPS_PER_SCORE FMA-pipe ops per score). CTAs then differ in length
and the busiest SM decides; FLOPs are counted as half the non-causal ones (the FA benchmarks' convention).

move                         write-up   modelled?  what the model changes
m01 tensor cores             612 us     yes        mma.sync QK and PV; each warp loads its K/V (and, before
                                                   m04, Q) operands from gmem itself, 16-bit per lane
                                                   (DIRECT_BYTES_PER_WAVEFRONT), every tile, waited
                                                   (Q's first read from HBM, the rest from L2)
m02 smem staging (1.20x)     ~510 us    yes        K/V tile filled once per CTA by cp.async (16 B per lane), one
                                                   commit group waited (d1), __syncthreads, ldmatrix drains per
                                                   warp; a second __syncthreads frees the slab; Q read once into
                                                   a Q slab, ldmatrix-ed every tile
m03 C->A register repack     271 us     yes        P no longer stored to smem and ldmatrix-ed back (LSU bytes)
m04 Q hoist                  233 us     yes        Q fragments stay in registers: no Q re-read per K/V tile
                                                   (Q still read from HBM once per warp, as from m02 on)
m05 pipelining d2/cp/ring    ~222 us    yes        two slabs: tile j+1's cp.async is issued under tile j's math
                                                   (wait_group 1); one __syncthreads per tile
m06 TMA                      ~213 us    yes        warp 0 issues one TMA box per K/V tile into a 2-slot
                                                   TmaPipeline; no cp.async LSU wavefronts; mbarrier wait
m07 register tiling f2x8     205 us     yes        fm = 2: a warp owns two 16-row query tiles; each K/V fragment
                                                   is ldmatrix-ed once for both (block_m 128, grid 256); the
                                                   two chains overlap (chain_math)
refused moves (REFUSED), each one kept move's flags changed:
r1 warp-scoped barrier       ~0 us      yes        on m02: the P hand-off between the store to smem and the
                                                   ldmatrix back is __syncwarp (warp-local) not __syncthreads
r2 fast exp                  ~0 us      yes        on m07: __expf, one FMUL + MUFU.EX2, for libm expf (the
                                                   kept moves' ~15-instruction sequence: EXPF_EXTRA_OPS)
r3 deeper rings d3, d4       no time    yes        on m07: a 3- or 4-slot K/V TMA ring (smem per CTA, so the
                                                   CTAs an SM holds: d4 holds one)
r4 warp specialization       213 vs 206 yes        on m07: a fifth warp issues the TMA boxes, the four math
                                                   warps only consume; it holds registers like the others
                                                   (no setmaxnreg on sm_120), so the SM holds one CTA
Write-up times marked ~ are derived from its speed-up factors (612/1.20; 233/1.05; /1.04); 271, 233, 612 and
204.7 us are stated. The write-up's geometry per move is not stated except the final one (w4x1/f2x8/k4: 4 warps,
128 rows, 254 registers, 32 KB smem); every move here uses 4 warps and block_n 64, fm 1 before m07.
Modelled assumptions stated here (not per move): FMA-pipe ops per score (attention_h200.FMA_OPS_PER_SCORE,
4: no exp2 folding, which the write-up refused) plus libm expf's EXPF_EXTRA_OPS, DIRECT_BYTES_PER_WAVEFRONT,
regs_per_thread (the write-up's 254 for every move and every warp). The P hand-off through smem (m01, m02)
passes a __syncthreads (the write-up's refused move 1 names it). Not modelled: L1 hits of the direct loads,
mma.sync/ldmatrix latency (a warp overlaps only its independent chains, fm > 1), bank conflicts, the store
of O's latency.

Parameter mix (default 0). mix=0 costs a warp's softmax and O rescale by the mechanism above (FMA_OPS_PER_SCORE +
EXPF_EXTRA_OPS a score and rows x D on the FMA pipe, one ex2 a score on MUFU, no ALU pipe). mix=1 costs them from
the move's compiled K/V loop (flag `kernel`): emmy-ml 0.3.22's kernels for the moves compiled for sm_120a
(MIX_CAPTURE, lapis.captures.seed_mix: per kernel the loop's warp-instructions per pipe for one warp and one K/V
tile; m02..m04 share one kernel, a refused move reads its baseline's), at the rtx5090 profile's cited SMSP rates
(smsp_rates). The FMA unit holds the largest of the loop's issue bound (all its instructions at
issue_per_clk_smsp), its fma-pipe and its alu-pipe bounds (mix_cycles: it stands for the warp's issue slots, as
attention_b200's mix does; the ALU pipe has no unit of its own); MUFU holds the xu count at the xu rate. Fast exp
(r2) takes LIBM_EXPF_EXTRA off per exponential of the libm loop (the capture has no __expf kernel). Kept from the
mechanism at mix=1: the causal mask's ops, the mma.sync, LSU and load costs, and every cost at other geometries
than the compiled one (MIX_COMPILED: 4 warps, block_n 64, D 64).

Roles (top-level generator functions over the Context; any of them runs alone in a test):
  cta_slot(ctx, slot)           a CTA slot of the SM: its CTAs one after another (the block scheduler's refill)
  cta(ctx, slot, item)          one CTA: its __syncthreads mbarrier, (m06 on) its K/V TMA ring, then its warps
  warp_direct(ctx, cta, w)      m01's warp: K/V and Q operands straight from gmem every tile, waited
  warp_slab(ctx, cta, w)        m02..m04's warp: cp.async its share of the one K/V slab, wait_group,
                                __syncthreads (slab full), the tile's math, __syncthreads (slab free)
  warp_ring(ctx, cta, w)        m05's warp: two slabs; tile j+1's cp.async issued under tile j's math
  warp_tma(ctx, cta, w)         m06, m07's warp: a consumer of the 2-slot TMA ring; warp 0 is also its producer
  cp_async_land(ctx, ...)       a cp.async commit group's bytes on the SM's load path (role "l2")
TMA boxes are the SM's lapis.pipeline_sim.tma.TmaEngine's (role "tma", drawn as transfers). A move's `feed` flag
picks its warp role (warp_role); what each op takes is Sm120Costs's, whose options are the other flags (q_slab,
p_via_smem, fm). The sm120 schedules log no slot accesses: a race check (--races) reports only what the barriers
themselves see.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial

from lapis.data import CAPTURES
from lapis.errors import ScheduleError
from lapis.model import smsp
from lapis.pipeline_sim.causal import MASK_OPS_PER_SCORE, dispatch, tile_span
from lapis.pipeline_sim.commit_groups import CpAsyncGroups
from lapis.pipeline_sim.pipeline import PipelineState
from lapis.pipeline_sim.schedule import Schedule
from lapis.pipeline_sim.schedules.attention_h200 import FMA_OPS_PER_SCORE, parse_shape
from lapis.pipeline_sim.tma import TmaEngine
from lapis.pipeline_sim.units import SMSP_PER_SM, SmspBusy, occupy

__all__ = ["DEFAULTS", "SCHEDULES", "VARIANTS", "Sm120Costs", "parse_shape"]

KV_SLOTS = 2  # the K/V slabs of the cp.async ring (m05) and the slots of the TMA ring (m06 on); `slots` flag
DEFAULTS = dict(warps=4, block_n=64, regs_per_thread=254, causal=0, mix=0)
# The moves in order: (name, step, description as `lapis simulate --list` prints it, what the move changes in the
# flags). feed: where a warp's K/V come from ("direct" gmem, one cp.async "slab", a cp.async "ring" of two slabs,
# a "tma" ring); q_slab: Q staged in smem and ldmatrix-ed every tile; p_via_smem: P stored to smem and ldmatrix-ed
# back as an A operand; fm: 16-row query tiles per warp; kernel: the move's kernel in the mix capture (MIX_CAPTURE,
# read with mix=1): emmy-ml 0.3.22 emits one kernel for m02..m04 (the write-up's P via smem and Q slab are modelled
# as LSU bytes only).
MOVES = (
    ("sm120-m01-tensor-cores", "tensor_cores",
     "sm120 mma.sync QK/PV; each warp loads K/V operands from gmem every tile (waited)",
     dict(feed="direct", q_slab=False, p_via_smem=True, fm=1, handoff="syncthreads", expf="libm",
          slots=KV_SLOTS, producer_warp=False, kernel="w4x1-m01")),
    ("sm120-m02-smem-staging", "staging",
     "K/V tile staged once per CTA by cp.async (d1, waited), __syncthreads, ldmatrix",
     dict(feed="slab", q_slab=True, kernel="w4x1-m02-m04")),
    ("sm120-m03-c-to-a-repack", "c2a", "P converted C->A in registers instead of a smem round trip",
     dict(p_via_smem=False)),
    ("sm120-m04-q-hoist", "q_hoist", "Q fragments hoisted into registers: no Q ldmatrix per K/V tile",
     dict(q_slab=False)),
    ("sm120-m05-cp-async-ring", "ring",
     "two K/V slabs: tile j+1's cp.async issued under tile j's math (wait_group 1)",
     dict(feed="ring", kernel="w4x1-m05")),
    ("sm120-m06-tma", "tma",
     "warp 0 issues a TMA box per K/V tile into a 2-slot mbarrier ring (no cp.async LSU work)",
     dict(feed="tma", kernel="w4x1-m06")),
    ("sm120-m07-register-tiling", "reg_tile",
     "fm=2: each warp owns two 16-row Q tiles sharing every K/V fragment (block_m 128)",
     dict(fm=2, kernel="w4x1-m07")),
)
_STEPS = [step for _, step, _, _ in MOVES]
# The write-up's refused moves, each a change of one kept move's flags (its baseline): (name, the seed table's
# move, the baseline move, description, the change). handoff: the P hand-off's barrier between the store to smem
# and the ldmatrix back ("syncthreads" or "syncwarp": warp-local, no cross-warp wait); expf: libm expf (the
# write-up's ~15-instruction sequence) or __expf (one FMUL and MUFU.EX2); slots: the K/V ring's depth;
# producer_warp: one extra warp issues the TMA boxes and does no math.
REFUSED = (
    ("sm120-r1-warp-scoped-barrier", "warp-scoped barrier", "sm120-m02-smem-staging",
     "refused: the P hand-off's __syncthreads narrowed to __syncwarp (on m02, which bounces P through smem)",
     dict(handoff="syncwarp")),
    ("sm120-r2-fast-exp", "fast exp", "sm120-m07-register-tiling",
     "refused: __expf (FMUL + MUFU.EX2) for libm expf's ~15-instruction sequence (on m07)", dict(expf="fast")),
    ("sm120-r3-ring-d3", "deeper rings (d3, d4)", "sm120-m07-register-tiling",
     "refused: a 3-slot K/V TMA ring (d3, on m07): one more slab of smem per CTA", dict(slots=3)),
    ("sm120-r3-ring-d4", "deeper rings (d3, d4)", "sm120-m07-register-tiling",
     "refused: a 4-slot K/V TMA ring (d4, on m07): two more slabs of smem per CTA", dict(slots=4)),
    ("sm120-r4-warp-specialization", "warp specialization", "sm120-m07-register-tiling",
     "refused: a fifth warp as the TMA producer, the four math warps only consume (on m07)",
     dict(producer_warp=True)),
)


def _cumulative(moves) -> dict:
    """Move name -> its flags: every change of the moves up to and including it."""
    flags, out = {}, {}
    for name, _, _, change in moves:
        flags = {**flags, **change}
        out[name] = flags
    return out


VARIANTS = _cumulative(MOVES)
REFUSED_VARIANTS = {name: {**VARIANTS[base], **change} for name, _, base, _, change in REFUSED}
REFUSED_BASELINE = {name: base for name, _, base, _, _ in REFUSED}  # refused schedule -> the kept move it changes
UNMODELLED: set = set()
MEASURED_US = {"sm120-m01-tensor-cores": 612.0, "sm120-m02-smem-staging": 612.0 / 1.20,
               "sm120-m03-c-to-a-repack": 271.0, "sm120-m04-q-hoist": 233.0,
               "sm120-m05-cp-async-ring": 233.0 / 1.05, "sm120-m06-tma": 233.0 / 1.05 / 1.04,
               "sm120-m07-register-tiling": 204.7}
# libm expf's instructions beside the FMUL and MUFU.EX2 that __expf also issues (FMA_OPS_PER_SCORE counts the
# FMUL): the write-up's "Libm expf is a ~15-instruction sequence; __expf is one FMUL plus MUFU.EX2", so 15 - 2,
# counted on the FMA pipe (assumed: the sequence is FFMA/FADD/FMUL work, its one shift included)
EXPF_EXTRA_OPS = dict(libm=13, fast=0)
# mix=1: the moves' K/V loops compiled by emmy-ml 0.3.22 for sm_120a (lapis.captures.seed_mix; per kernel the loop's
# warp-instructions per pipe for one warp and one K/V tile, flag `kernel`), costed at the rtx5090 profile's rates
MIX_CAPTURE = CAPTURES / "seeds" / "emmy-0.3.22" / "manifest.json"
MIX_LOOP = ("serial", 0)  # (role, depth) of each kernel's K/V loop in the capture
MIX_COMPILED = dict(warps=4, block_n=64, d=64)  # the geometry the capture's w4x1 kernels were compiled for
# libm expf's instructions per exponential beyond __expf's FMUL + MUFU.EX2, as nvcc emits the sequence (FFMA.SAT,
# FFMA.RM, FADD, FFMA, FFMA on the FMA pipe; SHF.L.U32 for the exponent on the ALU pipe; then MUFU.EX2 and the FMUL
# that scales by the exponent): what the fast-exp refused move (expf="fast") takes off the captured libm loop, per
# MUFU.EX2 of it. The capture has no __expf kernel; its loops hold one FFMA.SAT and one FFMA.RM per MUFU.EX2.
LIBM_EXPF_EXTRA = dict(fma=5, alu=1)
DIRECT_BYTES_PER_WAVEFRONT = 64  # m01 operand loads: one 16-bit element per lane per load instruction
WAVEFRONT_BYTES = 128  # cp.async 16 B x 32 lanes = 4 wavefronts; ldmatrix.x4 512 B = 4 wavefronts
SMSP_UNITS = ("tensor", "mufu", "fma")  # one per SM sub-partition, each at a quarter of the SM's rate
WARP_LANES = 32
UNITS = tuple(f"{u}.{i}" for u in SMSP_UNITS for i in range(SMSP_PER_SM)) + ("lsu", "l2")
BUSY = SMSP_UNITS + ("lsu", "l2")  # utilization's units, in its order: the per-SMSP ones as fractions of the SM


def footprint(p, dims: tuple, prm: dict, flags: dict) -> tuple[int, int, int]:
    """One CTA's shared memory (K/V slabs, the Q slab, the P hand-off slab) and registers (bytes, count), and the
    CTAs an SM holds at once: the least of the register, warp and shared-memory limits."""
    d, warps, bn, bm = dims[3], prm["warps"], prm["block_n"], prm["block_m"]
    tile_bytes = bn * d * 2
    smem = (_slabs(flags) * 2 * tile_bytes if flags["feed"] != "direct" else 0) \
        + (bm * d * 2 if flags["q_slab"] else 0) + (bm * bn * 2 if flags["p_via_smem"] else 0)
    # no setmaxnreg: every warp, the producer too, holds the kernel's regs_per_thread (setmaxnreg needs the
    # sm_120a target and a whole warpgroup, PTX ISA setmaxnreg; the write-up compiles for sm_120)
    regs = (warps + flags["producer_warp"]) * 32 * prm["regs_per_thread"]
    resident = min(p["registers_per_sm"] // regs, p["max_warps_per_sm"] // warps,
                   p["smem_bytes_per_sm"] // smem if smem else 10 ** 9)
    return smem, regs, resident


def _slabs(flags: dict) -> int:
    return flags["slots"] if flags["feed"] in ("ring", "tma") else 1


def resolve(flags: dict, p, dims: tuple, params: dict) -> tuple[dict, object]:
    """The run's parameters (DEFAULTS, the caller's, then fm and block_m = warps x 16 x fm) and the fit (its
    ctas_per_sm is the most the SM holds; sm_fit lowers it to the representative SM's CTAs); ScheduleError names
    what does not fit."""
    _, _, seq, d = dims
    prm = {**DEFAULTS, **params}
    warps, bn, fm = prm["warps"], prm["block_n"], flags["fm"]
    rows = 16 * fm  # per warp (m16 atoms)
    prm.update(fm=fm, block_m=warps * rows)
    bm = prm["block_m"]
    if d % 16:
        raise ScheduleError("D is mma.sync's K for QK^T (k16 steps)", f"D = {d}", "use a multiple of 16, e.g. 128")
    if bn < 16 or bn % 16 or seq % bn or seq % bm:
        raise ScheduleError("L must be a multiple of the tiles", f"L = {seq}, block_m {bm} ({warps} warps x {rows} "
                            f"rows), block_n {bn}", "pad L or pick warps/block_n (multiples of 16) dividing it")
    if "tensor_flop_per_clk_sm" not in p.values or "smem_bytes_per_clk_sm" not in p.values:
        raise ScheduleError("sm120 schedules need an sm120 profile", f"profile {p.name} ({p.arch})",
                            "use --gpu rtx5090")
    if prm["mix"] not in (0, 1):
        raise ScheduleError("mix chooses the warps' FMA-pipe, ALU and MUFU costs: 1 from the compiled instruction "
                            "mix, 0 from the mechanism", prm["mix"], "use mix=0 or mix=1")
    smem, regs, resident = footprint(p, dims, prm, flags)
    if smem > p["smem_bytes_per_block"]:
        raise ScheduleError("the schedule does not fit shared memory",
                            f"{_slabs(flags)} slot(s) x K+V {2 * bn * d * 2} B + Q/P slabs = {smem} B > "
                            f"{p['smem_bytes_per_block']} B per block", "lower block_n or warps")
    if prm["regs_per_thread"] > 255 or regs > p["registers_per_sm"]:
        raise ScheduleError("the CTA does not fit the register file", f"{warps + flags['producer_warp']} warps x 32 x "
                            f"{prm['regs_per_thread']} "
                            f"registers = {regs} > {p['registers_per_sm']} (at most 255 per thread)",
                            "lower warps or regs_per_thread")
    return prm, dict(smem_bytes=smem, registers=regs, ctas_per_sm=resident)


def sm_fit(fit: dict, work) -> dict:
    """The fit on the representative SM: it holds at most as many CTAs at once as it was dealt."""
    return dict(fit, ctas_per_sm=min(fit["ctas_per_sm"], len(work)))


def spans_per_sm(p, dims: tuple, prm: dict) -> list:
    """Each SM's CTAs as (K/V tiles visited, first masked tile) spans, dealt by the block scheduler (causal.dispatch)
    in grid order, the Q tile fastest."""
    b, h, seq, _ = dims
    items, kv = b * h * (seq // prm["block_m"]), seq // prm["block_n"]
    bm, bn = prm["block_m"], prm["block_n"]
    spans = [tile_span(q, kv, bm, bn, bool(prm["causal"])) for q in range(seq // bm)]  # Q tile fastest in the grid
    weights = [spans[i % len(spans)][0] for i in range(items)]
    return [[spans[i % len(spans)] for i in sm] for sm in dispatch(weights, p["sm_count"])]


def visits(work) -> int:
    """An SM's K/V tiles over all its CTAs (the representative SM has the most)."""
    return sum(v for v, _ in work)


def kv_reuse(seq: int, prm: dict) -> float:
    """The loads each K/V byte fetched from HBM serves through L2: the K/V tile visits of a head's Q tiles over
    its K/V tiles; L / block_m without masking, about half that causal (Q tile q visits only the tiles up to its
    diagonal)."""
    bm, bn, kv = prm["block_m"], prm["block_n"], seq // prm["block_n"]
    return sum(tile_span(q, kv, bm, bn, bool(prm["causal"]))[0] for q in range(seq // bm)) / kv


def flops(dims: tuple, prm: dict) -> float:
    """4 B H L^2 D, halved when causal (the FA benchmarks' convention)."""
    b, h, seq, d = dims
    return 4.0 * b * h * seq * seq * d / (2 if prm["causal"] else 1)


@dataclass(frozen=True)
class Sm120Costs:
    """What one warp's ops take (ns, on its SM sub-partition's quarter of the SM's rates) and move (bytes).

    gemm_ns: one mma.sync GEMM of the tile (QK^T or PV: rows x block_n x D); mufu_ns: the tile's exponentials;
    fma_ns: softmax's FMA-pipe ops (FMA_OPS_PER_SCORE a score) and O's rescale; mask_ns: a diagonal tile's
    scores masked once in registers (mufu_ns and fma_ns from the move's compiled loop with mix=1: mix_cycles).
    lsu_rate: shared-memory wavefronts per ns (one a clock per SM).
    chains: the warp's independent 16-row chains (fm); q_bytes: one warp's Q (and O) rows; tile_bytes: one K or
    V tile; fill_bytes: one warp's share of a K+V
    tile's cp.async; reuse: the loads each K/V byte serves through L2 (kv_reuse).
    Options of the moves (zero bytes: the op is not issued): ldmatrix_k_bytes (the K tile, plus the Q slab where
    q_slab; 0 where operands come straight from gmem), ldmatrix_v_bytes, p_smem_bytes (P stored and ldmatrix-ed
    back where p_via_smem; 0 once repacked C->A in registers). resident: the CTAs an SM holds at once."""

    rows: int
    chains: int
    q_bytes: int
    tile_bytes: int
    fill_bytes: int
    reuse: float
    gemm_ns: float
    mufu_ns: float
    fma_ns: float
    mask_ns: float
    lsu_rate: float
    ldmatrix_k_bytes: int
    ldmatrix_v_bytes: int
    p_smem_bytes: int
    l2_latency_ns: float
    resident: int

    @classmethod
    def of(cls, p, dims: tuple, prm: dict, flags: dict) -> Sm120Costs:
        _, _, seq, d = dims
        rows, bn, staged = 16 * flags["fm"], prm["block_n"], flags["feed"] != "direct"
        t_rate, m_rate, f_rate = (p.per_ns(k) / SMSP_PER_SM for k in ("tensor_flop_per_clk_sm",
                                                                       "mufu_ex2_per_clk_sm", "fma_per_clk_sm"))
        tile_bytes, q_bytes = bn * d * 2, rows * d * 2
        mufu_ns = rows * bn / m_rate
        fma_ns = (rows * bn * (FMA_OPS_PER_SCORE[False] + EXPF_EXTRA_OPS[flags["expf"]]) + rows * d) / f_rate
        if prm.get("mix", DEFAULTS["mix"]) and dict(warps=prm["warps"], block_n=bn, d=d) == MIX_COMPILED:
            fma_ns, mufu_ns = (c / p["clock_ghz"] for c in mix_cycles(mix_pipes(flags["kernel"], flags["expf"]),
                                                                       smsp_rates(p)))
        return cls(rows=rows, chains=flags["fm"], q_bytes=q_bytes, tile_bytes=tile_bytes, fill_bytes=2 * tile_bytes // prm["warps"],
                   reuse=kv_reuse(seq, prm), gemm_ns=2 * rows * bn * d / t_rate, mufu_ns=mufu_ns, fma_ns=fma_ns,
                   mask_ns=rows * bn * MASK_OPS_PER_SCORE / f_rate,
                   lsu_rate=p["smem_bytes_per_clk_sm"] / WAVEFRONT_BYTES * p["clock_ghz"],
                   ldmatrix_k_bytes=tile_bytes + q_bytes * flags["q_slab"] if staged else 0,
                   ldmatrix_v_bytes=tile_bytes if staged else 0,
                   p_smem_bytes=2 * rows * bn * 2 if flags["p_via_smem"] else 0,
                   l2_latency_ns=p["l2_latency_ns"], resident=footprint(p, dims, prm, flags)[2])

    def lsu_ns(self, nbytes: int, per_wavefront: int = WAVEFRONT_BYTES) -> float:
        """The LSU's time for `nbytes` moved `per_wavefront` bytes a wavefront."""
        return nbytes / per_wavefront / self.lsu_rate


def smsp_rates(p) -> dict:
    """Warp-instructions per clock of one SM sub-partition: issue (the profile's issue_per_clk_smsp) and the fma,
    alu and xu (MUFU) pipes (the profile's results/clk/SM over 4 SMSPs and 32 lanes; each value cites its source in
    lapis/data/profiles/rtx5090.json)."""
    per_smsp = SMSP_PER_SM * WARP_LANES
    return dict(issue=p["issue_per_clk_smsp"], fma=p["fma_per_clk_sm"] / per_smsp,
                alu=p["alu_per_clk_sm"] / per_smsp, xu=p["mufu_ex2_per_clk_sm"] / per_smsp)


@lru_cache(maxsize=None)
def mix_pipes(kernel: str, expf: str) -> dict:
    """Warp-instructions per pipe of one warp's pass over one K/V tile: `kernel`'s K/V loop in MIX_CAPTURE (read by
    lapis.model.smsp.capture_loop, which raises CaptureError when the kernel or its loop is absent); expf "fast"
    takes LIBM_EXPF_EXTRA off per MUFU.EX2 of the loop (the capture's loops are all libm expf)."""
    loop = smsp.capture_loop(MIX_CAPTURE, kernel, *MIX_LOOP)
    pipes = dict(loop["pipes"])
    if expf == "fast":
        ex2 = loop["ops"].get("MUFU.EX2", 0)
        pipes.update({pipe: pipes[pipe] - n * ex2 for pipe, n in LIBM_EXPF_EXTRA.items()})
    return pipes


def mix_cycles(pipes: dict, rates: dict) -> tuple[float, float]:
    """(FMA unit, MUFU) SMSP cycles of one pass with per-pipe counts `pipes` at `rates` (smsp_rates). The FMA unit
    holds the largest of the issue bound (every instruction of the pass, one dispatch slot each) and the fma and alu
    pipe bounds (count / rate): it stands for the warp's issue slots, as the B200 row warps' loops are held
    (attention_b200.mix_passes); the ALU pipe has no unit of its own. MUFU holds the xu count at the xu rate."""
    bounds = [sum(pipes.values()) / rates["issue"], pipes.get("fma", 0) / rates["fma"],
              pipes.get("alu", 0) / rates["alu"]]
    return max(bounds), pipes.get("xu", 0) / rates["xu"]


def summary(per_sm: list, rep, dims: tuple, prm: dict, cost: Sm120Costs) -> dict:
    """The work of the run: CTAs, SMs with work, and the representative SM's CTAs, K/V tiles and masked tiles."""
    b, h, seq, _ = dims
    my = rep.work
    return dict(work_items=b * h * (seq // prm["block_m"]), active_sms=len(per_sm), items_per_sm=len(my),
                kv_tiles=seq // prm["block_n"], kv_tiles_on_this_sm=visits(my),
                masked_tiles_on_this_sm=sum(v - m for v, m in my), resident_ctas=min(cost.resident, len(my)))


# Units and loads: what every role's ops go through.

def on_smsp(ctx, unit: str, smsp: int, ns: float, role: str, op: str, **kw):
    """Hold sub-partition `smsp`'s `unit` (tensor, mufu or fma) for `ns`; an op of no time is not issued."""
    if ns > 0:
        yield from occupy(ctx.env, ctx.rec, ctx.units[f"{unit}.{smsp}"], ns, SmspBusy(ctx.busy), unit, role, op, **kw)


def lsu(ctx, nbytes: int, role: str, op: str, per_wavefront: int = WAVEFRONT_BYTES, **kw):
    """Shared-memory traffic (ldmatrix, cp.async's writes, the P round trip) on the SM's one LSU path; an op of no
    bytes is not issued."""
    ns = ctx.cost.lsu_ns(nbytes, per_wavefront)
    if ns > 0:
        yield from ctx.occupy("lsu", ns, role, op, **kw)


def load_rate(ctx, reuse) -> float:
    """B/ns of the SM's load path when a load takes it: the chip's bandwidth split among the loads in flight,
    every SM's load path busy as often as this one's has been so far (its "l2" busy time over the time elapsed;
    1 at the start, when every SM issues its first loads at once) (lapis.pipeline_sim.grid.Grid.burst). A kernel
    that loads all the time (m01) gets the equal share; one whose loads come in bursts between math (the d1 slab
    of m02..m04) gets its bursts moved faster, up to the SM's shared-memory fill rate."""
    now = ctx.env.now
    duty = min(1.0, ctx.busy["l2"] / now) if now > 0 else 1.0
    return ctx.grid.burst(reuse, duty)


@dataclass
class LoadPath:
    """The SM's loads so far in equal-share time: `share_ns`, the sum of each load's bytes over the grid's equal
    share when it took the path (where the SM's loads would end had they all moved at the equal share, back to
    back from the start)."""

    share_ns: float = 0.0


def load_ns(ctx, nbytes: int, reuse) -> float:
    """A load's time on the SM's load path, from now: its bytes at load_rate, but ending no earlier than the SM's
    loads so far and this one would at the equal share (LoadPath, kept on the Context as load_path): a burst
    moves faster only on bandwidth the SM left unused earlier, so by any time no SM has moved more than its equal
    share of the chip's bandwidth over the run (no run beats the bandwidth roofline)."""
    path = vars(ctx).setdefault("load_path", LoadPath())
    at_share = nbytes / ctx.grid.share(reuse)
    ns = max(nbytes / load_rate(ctx, reuse), path.share_ns + at_share - ctx.env.now)
    path.share_ns += at_share
    return ns


def over_l2(ctx, nbytes: int, reuse, role: str, op: str, **kw):
    """The load path for load_ns when it takes the bytes: K/V serve every Q tile of a head that visits them
    (kv_reuse); Q read and O written once are compulsory HBM traffic (reuse 1)."""
    yield from ctx.occupy("l2", lambda: load_ns(ctx, nbytes, reuse), role, op, **kw)


def from_gmem(ctx, nbytes: int, role: str, op: str, reuse=None, **kw):
    """A load the role waits for: the load path, then l2_latency_ns."""
    yield from over_l2(ctx, nbytes, ctx.cost.reuse if reuse is None else reuse, role, op, **kw)
    yield ctx.env.timeout(ctx.cost.l2_latency_ns)


def syncthreads(ctx, cta, w: int, what: str, j: int):
    """__syncthreads as warp w's next phase of the CTA's count-`warps` mbarrier (every warp passes the same
    barriers in the same order): arrive, wait for the phase."""
    role, bar, n = cta.roles[w], cta.bar, cta.phases[w]
    cta.phases[w] += 1
    bar.arrive(role, event=ctx.rec.last_id(role))
    yield from ctx.waited(role, f"wait {what}", bar.wait(n % 2, role), flow=lambda: bar.last_completer,
                          work_item=cta.item, k_index=j)


# The CTA and its slot.

@dataclass
class Cta:
    """One CTA on the SM: CTA slot `slot`, the SM's work item `item` ((visits, first masked tile) span), its math
    warps' roles, its __syncthreads mbarrier `bar` (and each warp's next phase of it), (m06 on) its K/V TMA ring
    and, with producer_warp, the producer warp's role (else None: math warp 0 produces)."""

    slot: int
    item: int
    visits: int
    first_masked: int
    roles: tuple
    bar: object
    ring: object = None
    producer: str | None = None
    phases: list = None

    def __post_init__(self):
        self.phases = [0] * len(self.roles)

    @classmethod
    def open(cls, ctx, slot: int, item: int, tma: TmaEngine | None = None) -> Cta:
        """The CTA's barriers, declared to the deadlock check: the __syncthreads mbarrier and, given the SM's TMA
        engine, the K/V ring of `slots` slots (warp 0, or the producer warp, produces; every math warp consumes)."""
        roles = tuple(f"cta{slot}.w{w}" for w in range(ctx.prm["warps"]))
        producer = f"cta{slot}.producer" if ctx.flags["producer_warp"] else None
        bar = ctx.barrier(f"cta{slot}.item{item}.syncthreads", len(roles), roles, hb=None)
        ring = None if tma is None else ctx.pipeline(f"cta{slot}.item{item}.KV", ctx.flags["slots"],
                                                     producer or roles[0], roles, 2 * ctx.cost.tile_bytes, tma=tma,
                                                     hb=None)
        visits_, first_masked = ctx.group.work[item]
        return cls(slot, item, visits_, first_masked, roles, bar, ring, producer)

    def smsp(self, w: int) -> int:
        """Warp w's SM sub-partition (the CTA's warps follow the previous slots' on the SM's four)."""
        return (self.slot * len(self.roles) + w) % SMSP_PER_SM


def cta_slot(ctx, slot: int, resident: int, tma: TmaEngine | None = None):
    """A CTA slot of the SM: CTAs slot, slot + resident, ... of the SM's work one after another, each starting when
    the previous one's warps have all exited (the block scheduler refilling the slot)."""
    for item in range(slot, len(ctx.group.work), resident):
        yield from cta(ctx, slot, item, tma)


def cta(ctx, slot: int, item: int, tma: TmaEngine | None = None):
    """One CTA: its barriers, then its warps (the move's warp role, spawned for the deadlock check); returns when
    every warp has exited."""
    c = Cta.open(ctx, slot, item, tma)
    role = warp_role(ctx.flags)
    warps = [ctx.spawn(f"{r}.item{item}", role(ctx, c, w)) for w, r in enumerate(c.roles)]
    if c.producer:
        warps.append(ctx.spawn(f"{c.producer}.item{item}", warp_producer(ctx, c)))
    yield ctx.env.all_of(warps)


# A warp's steps, shared by the warp roles.

def load_q(ctx, cta, w: int):
    """The warp's Q rows from HBM, once (compulsory traffic): into the Q slab (m02, m03) or registers (m04 on)."""
    role, q = cta.roles[w], ctx.cost.q_bytes
    yield from lsu(ctx, q, role, "load Q", work_item=cta.item)
    yield from from_gmem(ctx, q, role, "Q from HBM (waited)", reuse=1, work_item=cta.item)


def tile_math(ctx, cta, w: int, j: int):
    """K/V tile j's math in warp w once its operands are in: ldmatrix K (and the Q slab), S = QK^T (mma.sync),
    softmax's exponentials (MUFU), the causal mask on a diagonal tile, softmax's FMA-pipe ops and O's rescale,
    P through smem (m01, m02: stored, the hand-off barrier, ldmatrix-ed back), ldmatrix V, O += PV (mma.sync).
    One 16-row chain's ops run in program order (each needs the previous one's registers); a warp with fm > 1
    chains runs them as chain_math, overlapping independent chains."""
    c, role, smsp, kw = ctx.cost, cta.roles[w], cta.smsp(w), dict(work_item=cta.item, k_index=j)
    yield from lsu(ctx, c.ldmatrix_k_bytes, role, "ldmatrix K (+Q)", **kw)
    if c.chains > 1 and not c.p_smem_bytes:
        v_in = ctx.env.event()
        yield ctx.env.all_of([ctx.child(chain_math(ctx, cta, w, j, q, v_in)) for q in range(c.chains)])
        return
    yield from on_smsp(ctx, "tensor", smsp, c.gemm_ns, role, "mma.sync QK", **kw)
    yield from on_smsp(ctx, "mufu", smsp, c.mufu_ns, role, "softmax ex2", **kw)
    if j >= cta.first_masked:
        yield from on_smsp(ctx, "fma", smsp, c.mask_ns, role, "causal mask", **kw)
    yield from on_smsp(ctx, "fma", smsp, c.fma_ns, role, "softmax FMA + O rescale", **kw)
    if c.p_smem_bytes:
        yield from p_handoff(ctx, cta, w, j)
    yield from lsu(ctx, c.ldmatrix_v_bytes, role, "ldmatrix V", **kw)
    yield from on_smsp(ctx, "tensor", smsp, c.gemm_ns, role, "mma.sync PV", **kw)


def chain_math(ctx, cta, w: int, j: int, q: int, v_in):
    """Chain q of a register-tiled warp (fm chains of 16 rows sharing each K/V fragment) on K/V tile j: its QK
    mma.sync, exponentials, causal mask, FMA-pipe ops and PV mma.sync, each a 1/fm share of the warp's. A chain's
    ops wait only for its own previous op: a warp stalls at the first instruction that reads an mma.sync's
    result, not at the mma's issue, so chain 1's QK holds the tensor pipe while chain 0's softmax runs. The
    tensor pipe takes the mmas in issue order (QK0, QK1, PV0, PV1: the write-up's f2x8 listing). Chain 0
    ldmatrix-es the V fragments both chains' PV read (v_in)."""
    c, role, smsp, kw = ctx.cost, cta.roles[w], cta.smsp(w), dict(work_item=cta.item, k_index=j)
    share = 1.0 / c.chains
    yield from on_smsp(ctx, "tensor", smsp, c.gemm_ns * share, role, "mma.sync QK", **kw)
    yield from on_smsp(ctx, "mufu", smsp, c.mufu_ns * share, role, "softmax ex2", **kw)
    if j >= cta.first_masked:
        yield from on_smsp(ctx, "fma", smsp, c.mask_ns * share, role, "causal mask", **kw)
    yield from on_smsp(ctx, "fma", smsp, c.fma_ns * share, role, "softmax FMA + O rescale", **kw)
    if q == 0:
        yield from lsu(ctx, c.ldmatrix_v_bytes, role, "ldmatrix V", **kw)
        v_in.succeed()
    else:
        yield v_in
    yield from on_smsp(ctx, "tensor", smsp, c.gemm_ns * share, role, "mma.sync PV", **kw)


def p_handoff(ctx, cta, w: int, j: int):
    """P through smem: the warp stores its P tile, passes the hand-off barrier and ldmatrix-es P back as PV's A
    operand. handoff "syncthreads" waits for every warp of the CTA; "syncwarp" is warp-local (a warp's ops are
    already in program order here), so it waits for nothing."""
    role, half, kw = cta.roles[w], ctx.cost.p_smem_bytes // 2, dict(work_item=cta.item, k_index=j)
    yield from lsu(ctx, half, role, "P to smem", **kw)
    if ctx.flags["handoff"] == "syncthreads":
        yield from syncthreads(ctx, cta, w, "__syncthreads (P hand-off)", j)
    yield from lsu(ctx, half, role, "ldmatrix P", **kw)


def store_o(ctx, cta, w: int):
    """The warp's O rows through the LSU and out at the HBM share (written once), not waited for."""
    role, o = cta.roles[w], ctx.cost.q_bytes
    yield from lsu(ctx, o, role, "store O", work_item=cta.item)
    yield from over_l2(ctx, o, 1, role, "store O", work_item=cta.item)


def cp_async(ctx, cta, w: int, groups: CpAsyncGroups, j: int):
    """cp.async of warp w's share of K/V tile j (16 B a lane: LSU wavefronts), then cp.async.commit_group: the
    group completes when cp_async_land has moved its bytes."""
    nbytes = ctx.cost.fill_bytes
    yield from lsu(ctx, nbytes, cta.roles[w], "cp.async K+V", work_item=cta.item, k_index=j)
    groups.issue(ctx.child(cp_async_land(ctx, nbytes, cta.item, j)))
    groups.commit()


def cp_async_land(ctx, nbytes: int, item: int, j: int):
    """The load path's side of a cp.async group: its bytes for load_ns, landing l2_latency_ns later."""
    yield from from_gmem(ctx, nbytes, "l2", "cp.async land", work_item=item, k_index=j)


def cp_async_wait(ctx, cta, w: int, groups: CpAsyncGroups, j: int):
    """cp.async.wait_group 0: tile j's group, the only one the warp has in flight here."""
    yield from ctx.waited(cta.roles[w], "wait cp.async group", groups.wait(0), work_item=cta.item, k_index=j)


def produce_tma(ctx, cta, st: PipelineState, j: int):
    """The ring's producer (warp 0, or the producer warp) for K/V tile j: producer_acquire (the slot's empty
    barrier), producer_commit (arrive.expect_tx and the K+V box handed to the SM's TMA engine), then advance."""
    role, ring = cta.producer or cta.roles[0], cta.ring
    yield from ctx.waited(role, "wait K/V slot", ring.producer_acquire(st),
                          flow=lambda s=st.index: ring.empty[s].last_completer, work_item=cta.item, k_index=j)
    ring.producer_commit(st, op="TMA K+V", work_item=cta.item, k_index=j)
    st.advance()


# The warp roles, one per K/V feed.

def warp_direct(ctx, cta, w: int):
    """m01's warp: per K/V tile it loads its K/V and Q operands from gmem itself, 16-bit a lane
    (DIRECT_BYTES_PER_WAVEFRONT), and waits for them (Q's first read from HBM, the rest from L2), then the math."""
    role, q, kv = cta.roles[w], ctx.cost.q_bytes, 2 * ctx.cost.tile_bytes
    for j in range(cta.visits):
        kw = dict(work_item=cta.item, k_index=j)
        yield from lsu(ctx, kv + q, role, "ld.global K/V", per_wavefront=DIRECT_BYTES_PER_WAVEFRONT, **kw)
        if j == 0:
            yield from over_l2(ctx, q, 1, role, "Q from HBM", **kw)
        yield from from_gmem(ctx, kv + (q if j else 0), role, "K/V from L2 (waited)", **kw)
        yield from tile_math(ctx, cta, w, j)
    yield from store_o(ctx, cta, w)


def warp_slab(ctx, cta, w: int):
    """m02..m04's warp over one K/V slab per CTA: per tile, cp.async its share and wait for the group, then
    __syncthreads (slab full), ldmatrix and the math, and a second __syncthreads (slab free) before the next fill."""
    groups = CpAsyncGroups(ctx.env, cta.roles[w], single=True)
    yield from load_q(ctx, cta, w)
    for j in range(cta.visits):
        yield from cp_async(ctx, cta, w, groups, j)
        yield from cp_async_wait(ctx, cta, w, groups, j)
        yield from syncthreads(ctx, cta, w, "__syncthreads (slab full)", j)
        yield from tile_math(ctx, cta, w, j)
        yield from syncthreads(ctx, cta, w, "__syncthreads (slab free)", j)
    yield from store_o(ctx, cta, w)


def warp_ring(ctx, cta, w: int):
    """m05's warp over two K/V slabs: tile 0's cp.async before the Q load; per tile, wait for its group,
    __syncthreads (slab full: every warp is also done with tile j-1, whose slab tile j+1 reuses), issue tile j+1's
    cp.async, then tile j's math under it. One __syncthreads a tile."""
    groups = CpAsyncGroups(ctx.env, cta.roles[w], single=True)
    yield from cp_async(ctx, cta, w, groups, 0)
    yield from load_q(ctx, cta, w)
    for j in range(cta.visits):
        yield from cp_async_wait(ctx, cta, w, groups, j)
        yield from syncthreads(ctx, cta, w, "__syncthreads (slab full)", j)
        if j + 1 < cta.visits:
            yield from cp_async(ctx, cta, w, groups, j + 1)
        yield from tile_math(ctx, cta, w, j)
    yield from store_o(ctx, cta, w)


def warp_tma(ctx, cta, w: int):
    """m06, m07's warp, a consumer of the CTA's TMA ring (`slots` slots): per tile consumer_wait (the full
    barrier), ldmatrix and the math, consumer_release. Without a producer warp, warp 0 is also the producer
    (produce_tma): tile 0's box before its Q load, tile j+1's at the top of tile j."""
    role, ring, slots = cta.roles[w], cta.ring, ctx.flags["slots"]
    produces = w == 0 and cta.producer is None
    st, pst = PipelineState(slots), PipelineState.producer_start(slots) if produces else None
    if produces:
        yield from produce_tma(ctx, cta, pst, 0)
    yield from load_q(ctx, cta, w)
    for j in range(cta.visits):
        if produces and j + 1 < cta.visits:
            yield from produce_tma(ctx, cta, pst, j + 1)
        yield from ctx.waited(role, "wait K/V (mbarrier)", ring.consumer_wait(st, role),
                              flow=lambda s=st.index: ring.full[s].last_completer, work_item=cta.item, k_index=j)
        yield from tile_math(ctx, cta, w, j)
        ring.consumer_release(st, role)
        st.advance()
    yield from store_o(ctx, cta, w)


def warp_producer(ctx, cta):
    """The producer warp (producer_warp): every K/V tile's box in turn, each as soon as its slot is empty; it
    issues no math."""
    pst = PipelineState.producer_start(ctx.flags["slots"])
    for j in range(cta.visits):
        yield from produce_tma(ctx, cta, pst, j)


WARP_ROLES = dict(direct=warp_direct, slab=warp_slab, ring=warp_ring, tma=warp_tma)  # feed -> the warp role


def warp_role(flags: dict):
    """The warp role of a move (its `feed` flag)."""
    return WARP_ROLES[flags["feed"]]


def launch(ctx) -> None:
    """One SM: its CTA slots (as many as it holds at once, at most its CTAs), sharing the SM's TMA engine where
    the move loads K/V by TMA."""
    resident = min(ctx.cost.resident, len(ctx.group.work))
    tma = TmaEngine(ctx, unit="l2", style="transfer", reuse=ctx.cost.reuse,
                    load_ns=lambda nbytes: load_ns(ctx, nbytes, ctx.cost.reuse)) if ctx.flags["feed"] == "tma" else None
    for s in range(resident):
        ctx.spawn(f"slot{s}", cta_slot(ctx, s, resident, tma))


def _schedule(name: str, description: str) -> Schedule:
    flags = {**VARIANTS, **REFUSED_VARIANTS}[name]
    return Schedule(name=name, description=description, shape="attention", defaults=DEFAULTS, flags=flags,
                    resolve=partial(resolve, flags), work=spans_per_sm, costs=Sm120Costs.of, launch=launch,
                    flops=flops, summary=summary, gpu="rtx5090", arch="sm120", units=UNITS, busy=BUSY,
                    work_cost=visits, races="slot", sm_fit=sm_fit)


SCHEDULES = tuple(_schedule(name, description) for name, _, description, _ in MOVES) \
    + tuple(_schedule(name, description) for name, _, _, description, _ in REFUSED)
