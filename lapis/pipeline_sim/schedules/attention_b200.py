"""Blackwell (sm100) attention forward (bf16, fp32 accumulation): the B200 progression k01..k14 and its four
minor optimizations (the write-up b200-attention-kernel-progression, not in this repository), as simpy
processes.

One event per tile-level operation: a TMA box, one tcgen05.mma over a tile, a TMEM pass, a softmax chunk, an
O rescale. Per work item (one or two 128-row Q tiles of one (batch, head)) and K/V tile j:
  S_j = Q K_j^T (tensor pipe, into TMEM), P_j = softmax (TMEM reads of S, MUFU ex2, FMA pipe, P into TMEM),
  O += P_j V_j (tensor pipe, O in TMEM), and an O rescale (TMEM load + FMA + TMEM store) when the row max moved.
sm100 semantics: tcgen05.mma is issued by one thread of the MMA warp and does not block it; completion is
signalled by tcgen05.commit, modelled as an arrive (at the MMA's end plus the profile's issue-to-commit latency)
on an MBarrier the consumer waits on (S ready, PV done, K/V slot empty, Q free). The tensor pipe executes MMAs
in issue order. S and O live in TMEM (128 lanes x `tmem_columns` 32-bit columns); P overwrites S in place from
k02 on, so a Q tile needs block_n (S/P) + d (O) columns; more than the profile's columns is a ScheduleError.
Units shared per SM: the tensor pipe, MUFU, the FMA pipe, the TMEM load/store path, and the TMA load path (an
equal share of L2 across the SMs running). The representative SM is the one with the most work (below); `full`
simulates every SM (lapis.pipeline_sim.grid). One CTA is resident per SM (the write-up, ch. 14: each CTA's
resources leave room for one).

Work items and their order. A work item is one Q tile (k01-k04) or two consecutive Q tiles (k05 on) of one
(batch, head), numbered with the Q tile fastest, then head, then batch (the write-up, ch. 14: CTA 0 handles tiles
0-1, then 296-297). k14 deals them by its static grid stride, work_id += gridDim.x (ch. 14): CTA c takes items c,
c + 148, c + 296, ... in that order. Before k14 each item is a CTA, and the block scheduler hands CTAs, in blockIdx
order, to whichever SM frees first (lapis.pipeline_sim.causal.dispatch). With equal items both give SM s the items
s, s + 148, ...
Causal masking (`causal=1`, every chapter; lapis.pipeline_sim.causal). Each Q tile visits the K/V tiles up to and
including its own diagonal, in ascending order; with two Q tiles per CTA the loader brings every token up to the
second tile's diagonal, and the first tile's QK, softmax and PV skip the tokens past its own (for block_n 128: Q
tile 2w visits 2w + 1 tiles, Q tile 2w + 1 visits 2w + 2; the last token serves only the second tile). On a
diagonal tile the MMAs and exponentials run in full, and the row warps mask every score as it comes from TMEM:
MASK_OPS_PER_SCORE FMA-pipe ops per score in pass 1, and again for the columns pass 2 re-reads from TMEM (all of
them before k10, those not cached in registers from k10 on). Items then differ in length (weight: Q-tile x K/V-tile
MMA pairs), so SMs differ; the busiest SM is simulated. The write-up's stride lands the same few pair indices on a
CTA (148 % 16 = 4 at L = 4096), so causal k14 carries more work on its busiest SM than the block scheduler's deal of
k13; the write-up benchmarks only non-causal shapes and names no causal work order, so no longest-first (LPT)
order is modelled. FLOPs are counted as half the non-causal ones (the FA benchmarks' convention).

chapter                         modelled?  what the model changes
k01 baseline                    yes        one role ("cta") waits after every stage: TMA Q, TMA K+V, QK, softmax,
                                           O rescale, PV; P goes to SMEM (K's dead slot): the P store is not costed
k02 P in TMEM                   no         P's store moves SMEM -> TMEM; SMEM stores are not a modelled unit, so
                                           costing the TMEM store here alone would invent a slowdown: the P store is
                                           not costed in any chapter. TMEM fit: P aliases S (no extra columns)
k03 swizzle                     no         SMEM bank conflicts are not modelled (mix=1: its serial loop's
                                           fewer TMA issue instructions are)
k04 warp specialization         yes        roles load / mma / softmax0 with mbarrier hand-offs; one K and one V slot
                                           freed after PV, so the stages stay serialized (the write-up expects no
                                           gain; the model agrees to within the hand-off latencies)
k05 two Q tiles                 yes        a CTA owns two Q tiles (softmax0/1); each K/V load serves both; TMEM
                                           2 x (S + O) columns
k06 load pipeline               yes        one ring of `kv_stages` slots holding K or V tokens; QK waits only for K;
                                           K is freed after the last QK, V after the last PV
k07 compute pipeline            yes        MMA order P0V(j), Q0K(j+1), P1V(j), Q1K(j+1) (prologue QK, drained PV)
k08 hardware approximation      partly     the log2 conversion is folded into the scale: one FMA-pipe op less per
                                           score (attention_h200.FMA_OPS_PER_SCORE); the __expf range compare and
                                           predicated fix-ups (ALU pipe) are not modelled
k09 software exp2               yes        sw_exp_per16 of every 16 exponentials leave MUFU for the FMA pipe as the
                                           cubic (attention_h200.CUBIC_FMA_OPS FMA-pipe ops each)
k10 register caching            yes        the second pass re-reads only the S columns not cached in registers
                                           (S_CACHED_COLUMNS of block_n) from TMEM; register pressure not modelled
k11 skip O rescale              yes        O is rescaled with the frequency lapis.model.numerics measures at
                                           `threshold` (attention_h200.rescale_frequency) instead of every tile
k12 split correction            yes        correction role rescales O (waits stats + PV done) in parallel with P
                                           production; PV waits both (count-2 barrier); correction does the epilogue
k13 early PV                    yes        PV starts on the first EARLY_PV_COLUMNS of P (and O safe); the rest of PV
                                           follows once all of P is ready
k14 persistent                  yes        one CTA per SM walks its work items (static grid stride, above) with no
                                           CTA-wide drain between them: Q is reloaded once the last QK freed it
                                           (q_free), the K/V ring and the MMA run into the next item while the
                                           epilogue finishes. Per-CTA launch, TMEM alloc and barrier-init costs are
                                           not modelled (no profile value)
m1 deferred score acquisition   no         no mechanism of its own; mix=1 costs its compiled loop, whose one-warp
                                           period holds the TMEM-load waits and the rowmax chain
m2 split rowsum                 no         no mechanism of its own; mix=1 costs its compiled loop, whose one-warp
                                           period holds the rowsum chain
m3 phase bitmasks               no         local-memory spills are not modelled
m4 TMA L2 promotion             no         L2 sector fetch granularity / hit rates are not modelled
Before k11 O is rescaled every K/V tile but the first of an item (the write-up: kernel 10 ran the O pass every
iteration). The skip frequency is per row; the warp-collective O pass (any of 32 rows) makes the real one higher.
FMA-pipe ops per score (4, 3 from k08: scale, max, subtract, row sum), the cubic's 6 ops, TMEM_BYTES_PER_CLK_SM and
CTAS_PER_SM are modelled assumptions stated here; rates come from the profile.

Row-warp costs from the compiled kernels (parameter mix, default 1). With mix=1 the MUFU and FMA-pipe time of the
row warps' passes (pass 1, pass 2, the O rescale) comes from the chapter's own compiled loop: the per-pipe
instruction counts of the seed kernel compiled for sm_100a (lapis/data/captures/seeds/b200-481f9aa; which kernel,
role and loop each chapter reads is lapis.catalog.attention_b200.MIX), costed by the SMSP bound model
(lapis.model.smsp.loop_prediction: issue, pipe and latency bounds, one warp of the role per SMSP) on the cited
sm_100 constants (lapis/data/smsp_sm100.json). One loop iteration is one K/V tile of one Q tile's row warps; its
time is split among the passes it contains in proportion to their mechanism costs (below). The larger of its issue
and pipe bounds is held on MUFU when the loop is MUFU-bound, else on the FMA pipe (standing for the row warps' issue
slots, which the Q tiles' row warps and the correction warps of one SMSP share). Its latency bound, one warp's
period alone (the capture's warp_cycles: the compiled stall counts and the scoreboard waits of TMEM loads, MUFU and
shuffles at their sm_100 latencies; at least its RAW chain at each link's pipe latency), is a floor on the pass's
time that holds no unit (RowPass.own): the other roles' warps issue while these wait on their own dependencies. From k12 the correction loop, which rescales both Q tiles'
O, gives the rescale (half an iteration per Q tile), times the rescale frequency. So the swizzle (k03: fewer TMA
issue instructions in the serial loop), the hardware and software exponentials (k08, k09), register caching (k10),
and m1/m2's shorter loops move the prediction through their compiled code; where a loop's bound is not the row
warps' critical resource they change nothing. Kept from the mechanism: TMEM traffic (bytes at
TMEM_BYTES_PER_CLK_SM: the TMEM data path is not an SMSP pipe), the causal mask ops, the epilogue, the MMA and TMA
costs, and every cost at other tiles than the compiled ones (COMPILED: block_n 128, d 128, sw_exp_per16 4). mix=0
gives the mechanism costs alone: per-op costs fixed by the mechanism, never per chapter.

The model as code. Each chapter is a `Chapter` (CHAPTERS) and a lapis.pipeline_sim.schedule.Schedule (SCHEDULES,
in chapter order): its `Roles` say which variant of each role runs, its `CostOptions` what its mechanisms cost;
both change step by step as the write-up adds them (ROLE_STEPS, COST_STEPS; an unmodelled step changes neither).
The roles are top-level generator functions over the SM's lapis.pipeline_sim.context.Context and the CTA's shared
state (`Cta`): serial_cta (k01-k03); loader, mma_warp (its mainloop mma_in_order, or mma_pipelined from k07),
row_warps (one per Q tile) and, from k12, correction. They ask the cost model (`AttentionCosts`) what each op takes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from itertools import accumulate

from lapis.catalog import attention_b200 as mix_catalog
from lapis.data import CAPTURES
from lapis.errors import ScheduleError
from lapis.model import smsp
from lapis.pipeline_sim.causal import (
    MASK_OPS_PER_SCORE,
    dispatch,
    grid_stride,
    tile_span,
)
from lapis.pipeline_sim.pipeline import PipelineState
from lapis.pipeline_sim.schedule import Schedule
from lapis.pipeline_sim.schedules.attention_h200 import (
    CUBIC_FMA_OPS,
    FMA_OPS_PER_SCORE,
    rescale_frequency,
)
from lapis.pipeline_sim.tma import TmaEngine

__all__ = ["BLOCK_M", "CHAPTERS", "DEFAULTS", "SCHEDULES", "UNMODELLED", "VARIANTS", "AttentionCosts", "Roles",
           "work_items"]

BLOCK_M = 128  # rows of a Q tile: one TMEM lane per row (tcgen05 M = 128)
DEFAULTS = dict(block_n=128, kv_stages=3, sw_exp_per16=4, threshold=8, causal=0, mix=1)
# The write-up's chapters in order: (schedule name, the step it adds, what `lapis simulate --list` says of it).
_TABLE = (
    ("b200-k01-baseline", "serial",
     "sm100 baseline: one role waits on each TMA, tcgen05 QK (S in TMEM), softmax, O rescale, PV"),
    ("b200-k02-p-in-tmem", "p_tmem",
     "P written over S in TMEM instead of K's SMEM slot (not costed: predicts k01's time)"),
    ("b200-k03-swizzle", "swizzle",
     "SW128 swizzled Q/K/V in SMEM (bank conflicts not modelled; mix=1 costs its compiled loop)"),
    ("b200-k04-warp-specialization", "ws", "load / MMA / row-warp roles with mbarrier hand-offs, one K and one V slot"),
    ("b200-k05-two-q-tiles", "two_q", "two 128-row Q tiles per CTA share each K/V load; 2 softmax roles; TMEM 2x(S+O)"),
    ("b200-k06-load-pipeline", "ring",
     "one K/V token ring (kv_stages slots); QK waits only for K; K freed after the last QK"),
    ("b200-k07-compute-pipeline", "compute_pipe",
     "MMA order P0V(j), Q0K(j+1), P1V(j), Q1K(j+1): softmax overlaps the other PV"),
    ("b200-k08-hw-approx", "exp2", "ex2.approx.ftz with the log2 scale folded in: one FMA-pipe op less per score"),
    ("b200-k09-sw-exp2", "sw_exp2", "sw_exp_per16 of 16 exponentials as a cubic on the FMA pipe instead of MUFU"),
    ("b200-k10-register-caching", "reg_cache",
     "96 of 128 S columns kept in registers: the P pass re-reads only 32 from TMEM"),
    ("b200-k11-skip-rescale", "skip_rescale", "O rescaled only when the row max moves more than threshold (log2 units)"),
    ("b200-k12-split-correction", "split_correction",
     "correction warps rescale O in parallel with P production; PV waits both"),
    ("b200-k13-early-pv", "early_pv", "PV starts on the first 96 columns of P; the rest once all of P is ready"),
    ("b200-k14-persistent", "persistent",
     "one CTA per SM walks its work items; Q/K/V and MMA run into the next item (q_free)"),
    ("b200-m1-deferred-score-load", "deferred_ld",
     "wider TMEM loads of S, one deferred wait (mix=1: its compiled loop's one-warp period)"),
    ("b200-m2-split-rowsum", "split_rowsum",
     "rowsum in partial sums (mix=1: its compiled loop's one-warp period)"),
    ("b200-m3-phase-bitmasks", "phase_bitmask",
     "barrier phases in register bitmasks, no local-memory spills (not modelled; mix=1: its compiled loop)"),
    ("b200-m4-tma-l2-promotion", "l2_promotion", "TMA fetches 256 B into L2 (L2 sectors not modelled: as m3)"),
)
_NAMES = [name for name, _, _ in _TABLE]
_STEPS = [step for _, step, _ in _TABLE]
# Cumulative: each name adds its step to its predecessor's flags; k04 on replaces the serial baseline.
VARIANTS = {name: {s: True for s in _STEPS[:i + 1] if not (s == "serial" and i >= 3)}
            for i, name in enumerate(_NAMES)}
UNMODELLED = {"p_tmem", "swizzle", "deferred_ld", "split_rowsum", "phase_bitmask", "l2_promotion"}

TMEM_BYTES_PER_CLK_SM = 512  # assumed: tcgen05.ld/st move one 32-bit column on all 128 lanes per clock
CTAS_PER_SM = 1  # the write-up, ch. 14: one resident CTA per SM
S_CACHED_COLUMNS = 96  # k10: the last 96 S columns of the first pass stay in registers (write-up ch. 10)
EARLY_PV_COLUMNS = 96  # k13: PV starts on the high 96 columns of P (write-up ch. 13)
UNITS = ("tensor", "mufu", "fma", "tmem", "tma")  # the SM's shared units, in the order utilization lists them
ROW_UNITS = ("tmem", "mufu", "fma")  # a row-warp pass's units, in program order


# ---- the cost model ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CostOptions:
    """The chapters' cost-side mechanisms. hw_exp2 (k08): the log2 scale folded in, one FMA-pipe op less per score;
    sw_exp2 (k09): sw_exp_per16 of every 16 exponentials as the cubic on the FMA pipe; reg_cache (k10): pass 2
    re-reads from TMEM only the S columns not kept in registers; skip_rescale (k11): O rescaled with the measured
    frequency at `threshold`, not every tile."""

    hw_exp2: bool = False
    sw_exp2: bool = False
    reg_cache: bool = False
    skip_rescale: bool = False


@dataclass(frozen=True)
class RowPass:
    """What a row-warp pass over a tile holds each unit for (ns), in program order: TMEM, MUFU, FMA pipe; and
    `own`, the least time (ns) the pass takes from its start because of its warps' own dependency stalls (their
    one-warp period, lapis.model.smsp.loop_prediction's latency bound): past its units' time it waits holding
    no unit, so another role's warps issue meanwhile."""

    tmem: float = 0.0
    mufu: float = 0.0
    fma: float = 0.0
    own: float = 0.0


@dataclass(frozen=True)
class AttentionCosts:
    """What each op of a CTA takes (ns, or bytes). mma_ns: one tcgen05.mma over a tile, QK^T or PV (2 x 128 x block_n
    x d FLOP at the tensor rate); commit_ns: from the MMA's end on the pipe to its tcgen05.commit's arrival (the
    profile's issue-to-commit latency). The passes over S (RowPass): row_max, pass 1 (read S from TMEM, row max);
    softmax, pass 2 (re-read S, exponentials on MUFU and the FMA pipe, P into TMEM); their `_masked` forms add
    MASK_OPS_PER_SCORE FMA-pipe ops per score read from TMEM (a diagonal tile, causal). rescale: the O rescale (TMEM
    load and store of O, one FMA per element), times rescale_frequency. The epilogue: o_read_ns (O out of TMEM),
    o_scale_ns (O / rowsum), o_bytes (the TMA store). early: the share of P, and of PV, in k13's early part. Loads:
    q_bytes (the CTA's Q tiles), tile_bytes (a K or V tile), kv_reuse (Q tiles each K/V byte serves: the L2 reuse
    of lapis.pipeline_sim.units.load_share), tma_ns (a copy's landing past its transfer)."""

    mma_ns: float
    commit_ns: float
    row_max: RowPass
    row_max_masked: RowPass
    softmax: RowPass
    softmax_masked: RowPass
    rescale: RowPass
    rescale_frequency: float
    o_read_ns: float
    o_scale_ns: float
    o_bytes: int
    early: float
    q_bytes: int
    tile_bytes: int
    kv_reuse: int
    tma_ns: float

    def s_passes(self, masked: bool) -> tuple[RowPass, RowPass]:
        """(pass 1, pass 2) over a tile of S; masked: a diagonal tile."""
        return (self.row_max_masked, self.softmax_masked) if masked else (self.row_max, self.softmax)

    @classmethod
    def of(cls, chapter: Chapter, p, dims: tuple, prm: dict, flags=None) -> AttentionCosts:
        """The costs of `chapter` on profile `p` at dims (B, H, L, D) with the run's parameters."""
        _, _, seq, d = dims
        opt, nq, bn = chapter.options, chapter.roles.q_tiles, prm["block_n"]
        t_rate, m_rate, f_rate = (p.per_ns(k) for k in ("tensor_flop_per_clk_sm", "mufu_ex2_per_clk_sm",
                                                        "fma_per_clk_sm"))
        tm_rate = TMEM_BYTES_PER_CLK_SM * p["clock_ghz"]  # B/ns
        emulate = prm["sw_exp_per16"] / 16 if opt.sw_exp2 else 0.0
        scores = BLOCK_M * bn
        s_read_ns = scores * 4 / tm_rate
        reread = max(bn - S_CACHED_COLUMNS, 0) / bn if opt.reg_cache else 1.0
        row_max = RowPass(tmem=s_read_ns, fma=scores * 1 / f_rate)
        softmax = RowPass(tmem=s_read_ns * reread, mufu=scores * (1 - emulate) / m_rate,
                          fma=scores * (FMA_OPS_PER_SCORE[opt.hw_exp2] - 1 + CUBIC_FMA_OPS * emulate) / f_rate)
        rescale = RowPass(tmem=2 * BLOCK_M * d * 4 / tm_rate, fma=BLOCK_M * d / f_rate)
        if prm.get("mix", DEFAULTS["mix"]) and (bn, d, prm["sw_exp_per16"]) == tuple(mix_catalog.COMPILED.values()):
            row_max, rescale, softmax = mix_passes(chapter, p["clock_ghz"], row_max, rescale, softmax)
        mask_ns = scores * MASK_OPS_PER_SCORE / f_rate  # every score read from TMEM again is masked again
        freq = rescale_frequency(bn, prm["threshold"]) if opt.skip_rescale else 1.0
        return cls(mma_ns=2 * BLOCK_M * bn * d / t_rate, commit_ns=p["wgmma_latency_ns"], row_max=row_max,
                   row_max_masked=replace(row_max, fma=row_max.fma + mask_ns), softmax=softmax,
                   softmax_masked=replace(softmax, fma=softmax.fma + mask_ns * reread),
                   rescale=RowPass(**{u: getattr(rescale, u) * freq for u in (*ROW_UNITS, "own")}),
                   rescale_frequency=freq, o_read_ns=BLOCK_M * d * 4 / tm_rate, o_scale_ns=BLOCK_M * d / f_rate,
                   o_bytes=BLOCK_M * d * 2, early=min(EARLY_PV_COLUMNS, bn) / bn, q_bytes=nq * BLOCK_M * d * 2,
                   tile_bytes=bn * d * 2, kv_reuse=seq // (BLOCK_M * nq), tma_ns=p["tma_latency_ns"])


# ---- the row warps' SMSP cost, from the seed's compiled instruction mix -------------------------------------------

@lru_cache(maxsize=None)
def _sm100() -> smsp.Constants:
    return smsp.Constants.load(smsp.SM100)


@lru_cache(maxsize=None)
def loop_ns(kernel: str, role: str, depth: int, warps: int, clock_ghz: float) -> tuple[float, float, str]:
    """(held ns, own ns, bound) of one iteration of the capture loop (lapis.catalog.attention_b200.CAPTURE) of
    `kernel` run by `role` at `depth`: lapis.model.smsp.loop_prediction on the sm_100 constants
    (lapis/data/smsp_sm100.json), in SMSP cycles over the clock (GHz). held: the largest of its issue and pipe
    bounds, the time it takes of resources the SMSP's other warps share; own: its latency bound (one warp's
    period under the compiled control bits, or its RAW chain), a floor that other warps' issue overlaps;
    bound: the name of the held bound. Every SMSP runs one warp of the warpgroup, so these are the whole
    pass's times."""
    loop = smsp.capture_loop(CAPTURES.joinpath(*mix_catalog.CAPTURE), kernel, role, depth)
    pred = smsp.loop_prediction(loop, warps, _sm100())
    held = {k: v for k, v in pred.bounds.items() if k != "latency"}
    bound = max(held, key=held.get)
    return held[bound] / clock_ghz, pred.bounds["latency"] / clock_ghz, bound


def _compute(rp: RowPass) -> float:
    return rp.mufu + rp.fma


def _placed(rp: RowPass, ns: float, own: float, bound: str) -> RowPass:
    """rp's TMEM traffic and `ns` of SMSP time on MUFU when the loop is MUFU-bound, else on the FMA pipe (which
    stands for the row warps' issue slots); `own` ns the pass takes at least (RowPass.own)."""
    if bound == "pipe.xu":
        return RowPass(tmem=rp.tmem, mufu=ns, fma=0.0, own=own)
    return RowPass(tmem=rp.tmem, fma=ns, own=own)


def mix_passes(chapter: Chapter, clock_ghz: float, row_max: RowPass, rescale: RowPass,
               softmax: RowPass) -> tuple[RowPass, RowPass, RowPass]:
    """(pass 1, O rescale at every tile, pass 2) with their MUFU/FMA time from the chapter's compiled loops
    (lapis.catalog.attention_b200.MIX): the row warps' loop is one K/V tile's pass 1 + pass 2 (+ the O rescale
    before k12; + the TMA and MMA issue in k01-k03), split among those passes in proportion to their mechanism
    costs (the arguments); from k12 the correction loop is the rescale of correction_q_tiles Q tiles. TMEM time
    is kept (the TMEM data path is not an SMSP pipe). The loop's own time (loop_ns) is split the same way."""
    e = mix_catalog.MIX[chapter.name]
    rows_ns, rows_own, rows_bound = loop_ns(e["kernel"], *e["rows"], e["warps"], clock_ghz)
    parts = [row_max, softmax] if e["correction"] else [row_max, rescale, softmax]
    total = sum(_compute(rp) for rp in parts)
    placed = [_placed(rp, rows_ns * _compute(rp) / total, rows_own * _compute(rp) / total, rows_bound)
              for rp in parts]
    if e["correction"]:
        corr_ns, corr_own, corr_bound = loop_ns(e["kernel"], *e["correction"], e["warps"], clock_ghz)
        n = e["correction_q_tiles"]
        return placed[0], _placed(rescale, corr_ns / n, corr_own / n, corr_bound), placed[1]
    return placed[0], placed[1], placed[2]


# ---- parameters, fit and work order ------------------------------------------------------------------------------

def kv_slots(roles: Roles, prm: dict) -> int:
    """SMEM slots for K/V tiles: the ring's kv_stages from k06, before it one K and one V slot."""
    return prm["kv_stages"] if roles.kv_ring else 2


def resolve(roles: Roles, p, dims: tuple, params: dict) -> tuple[dict, dict]:
    """The run's parameters (DEFAULTS, then the caller's) and what a CTA takes (SMEM bytes, TMEM columns);
    ScheduleError, with the numbers, for tiles that do not divide L, a GPU without TMEM, or what does not fit."""
    _, _, seq, d = dims
    prm = {**DEFAULTS, **params}
    bn, nq = prm["block_n"], roles.q_tiles
    if bn < 16 or bn % 16 or seq % bn or seq % (BLOCK_M * nq):
        raise ScheduleError("L must be a multiple of the tiles", f"L = {seq}, {nq} x {BLOCK_M}-row Q tiles per "
                            f"CTA, block_n {bn}", "pad L or pick block_n (a multiple of 16) that divides it")
    if "tmem_columns" not in p.values:
        raise ScheduleError("B200 schedules need tensor memory (tcgen05, sm100)", f"profile {p.name} ({p.arch})",
                            "use --gpu b200")
    tmem = p["tmem_columns"]
    cols = nq * (bn + d)
    if cols > tmem:
        raise ScheduleError("the schedule does not fit tensor memory (TMEM)",
                            f"{nq} Q tile(s) x (S/P {bn} + O {d} fp32 columns) = {cols} columns > {tmem} columns",
                            "lower block_n, or keep one Q tile per CTA")
    slots = kv_slots(roles, prm)
    if slots < 2:
        raise ScheduleError("the K/V ring needs a slot for K and one for V", f"kv_stages {slots}", "use kv_stages >= 2")
    tile_bytes, q_bytes = bn * d * 2, BLOCK_M * d * 2
    smem = nq * q_bytes + slots * tile_bytes
    if smem > p["smem_bytes_per_block"]:
        raise ScheduleError("the schedule does not fit shared memory", f"{nq} Q x {q_bytes} B + {slots} K/V slots x "
                            f"{tile_bytes} B = {smem} B > {p['smem_bytes_per_block']} B", "lower kv_stages or block_n")
    if prm["mix"] not in (0, 1):
        raise ScheduleError("mix chooses the row warps' costs: 1 from the compiled instruction mix, 0 from the "
                            "mechanism", prm["mix"], "use mix=0 or mix=1")
    if not 0 <= prm["sw_exp_per16"] <= 16:
        raise ScheduleError("sw_exp_per16 counts exponentials of 16", prm["sw_exp_per16"], "use 0..16")
    return prm, dict(smem_bytes=smem, tmem_columns=cols)


def work_items(heads: int, seq: int, bn: int, nq: int, causal: bool, ctas: int, persistent: bool):
    """(spans, per_sm): spans[w] = per Q tile of a head's w-th work item (Q tiles nq*w .. nq*w+nq-1), the
    (K/V tiles it visits, first masked tile) of causal.tile_span; per_sm = the same for each work item of every
    SM, in the order it runs them. Persistent (k14): the write-up's static grid stride; else the block
    scheduler's dispatch (lapis.pipeline_sim.causal). An item's weight is its Q-tile x K/V-tile MMA pairs."""
    kv = seq // bn
    spans = [tuple(tile_span(w * nq + t, kv, BLOCK_M, bn, causal) for t in range(nq))
             for w in range(seq // (BLOCK_M * nq))]
    weights = [sum(v for v, _ in spans[i % len(spans)]) for i in range(heads * len(spans))]
    per_sm = grid_stride(len(weights), ctas) if persistent else dispatch(weights, ctas)
    return spans, [[spans[i % len(spans)] for i in sm] for sm in per_sm]


def deal(roles: Roles, p, dims: tuple, prm: dict) -> list:
    """Each SM's work items in the order it runs them (work_items: k14's grid stride, else the block scheduler)."""
    b, h, seq, _ = dims
    return work_items(b * h, seq, prm["block_n"], roles.q_tiles, bool(prm["causal"]), p["sm_count"] * CTAS_PER_SM,
                      roles.persistent)[1]


def item_pairs(work) -> int:
    """A work list's weight: its Q-tile x K/V-tile MMA pairs (the representative SM has the most)."""
    return sum(v for s in work for v, _ in s)


# ---- steps every role shares -------------------------------------------------------------------------------------

def use(ctx, unit: str, ns: float, role: str, op: str, **kw):
    """Hold `unit` for `ns` ns (a cost of 0 holds nothing and records nothing)."""
    if ns <= 0:
        return
    yield from ctx.occupy(unit, ns, role, op, **kw)


def row_pass(ctx, role: str, cost: RowPass, op: str, frac: float = 1, **kw):
    """A row-warp pass, `frac` of it: TMEM traffic, then MUFU, then FMA-pipe work (in program order), then, if
    less than `frac` of cost.own has passed since it began, the rest as its warps' dependency stalls (no unit)."""
    start = ctx.env.now
    for unit in ROW_UNITS:
        yield from use(ctx, unit, getattr(cost, unit) * frac, role, f"{op} ({unit})", **kw)
    rest = cost.own * frac - (ctx.env.now - start)
    if rest > 0:
        t0 = ctx.env.now
        yield ctx.env.timeout(rest)
        ctx.record(role, f"{op} (dependency stalls)", t0, **kw)


def row_max(ctx, role: str, s: str, masked: bool, **kw):
    """Pass 1 over tile `s` of S: read it from TMEM and take the row max (masking it first on a diagonal tile)."""
    yield from row_pass(ctx, role, ctx.cost.s_passes(masked)[0], f"{s} pass 1: {'mask + ' * masked}row max", **kw)


def tma_waited(ctx, role: str, nbytes: int, op: str, reuse: float, **kw):
    """A TMA copy the role issues and waits for itself: the SM's load path at its bandwidth share, then landing."""
    yield from ctx.occupy("tma", lambda: nbytes / ctx.grid.share(reuse), role, op, **kw)
    yield ctx.env.timeout(ctx.cost.tma_ns)


def epilogue(ctx, role: str, item: int, q: int):
    """O_q out of TMEM, divided by the row sum, stored by TMA (written once: no L2 reuse); the role waits for it."""
    cost = ctx.cost
    yield from use(ctx, "tmem", cost.o_read_ns, role, f"O{q} TMEM -> registers", work_item=item)
    yield from use(ctx, "fma", cost.o_scale_ns, role, f"O{q} / rowsum", work_item=item)
    yield from tma_waited(ctx, role, cost.o_bytes, f"store O{q}", 1, work_item=item)


def wait_phase(ctx, role: str, barrier, n: int, what: str, **kw):
    """try_wait.parity on the n-th completion (0-based) of `barrier`, recorded as "wait <what>" when it blocks."""
    yield from ctx.waited(role, f"wait {what}", barrier.wait(n % 2, role), flow=lambda: barrier.last_completer, **kw)


def arrive(ctx, barrier, role: str) -> None:
    """mbarrier.arrive by `role`, by hand (its latest event is where the hand-off's flow starts)."""
    barrier.arrive(role, event=ctx.rec.last_id(role))


def consumer_wait(ctx, pipe, st: PipelineState, role: str, what: str, **kw):
    """consumer_wait on `st`'s slot of `pipe`, recorded as "wait <what>" when it blocks."""
    full = pipe.full[st.index]
    yield from ctx.waited(role, f"wait {what}", pipe.consumer_wait(st, role), flow=lambda: full.last_completer, **kw)


def producer_acquire(ctx, pipe, st: PipelineState, what: str, **kw):
    """producer_acquire of `st`'s slot of `pipe`, recorded as "wait <what>" when it blocks."""
    empty = pipe.empty[st.index]
    yield from ctx.waited(pipe.producer, f"wait {what}", pipe.producer_acquire(st),
                          flow=lambda: empty.last_completer, **kw)


def issue_mma(ctx, cta: Cta, role: str, op: str, ns: float, commits=(), reads=(), **kw):
    """tcgen05.mma issued by one thread of `role`, which goes on at once, and its tcgen05.commit: one arrival on
    each barrier of `commits` once the tensor pipe (in issue order) has run it and commit_ns has passed. On sm100
    a consumer_release is such a commit (CUTLASS PipelineTmaUmmaAsync): K/V slots are freed here.
    reads: (pipeline, state, token) of each SMEM operand, for the race check."""
    for pipe, st, token in reads:
        pipe.read(st, role, token)
    node = cta.hb.op(role, f"commit {op}") if cta.hb and commits else None
    ctx.child(_tensor_pipe(ctx, role, op, ns, commits, node, kw))


def _tensor_pipe(ctx, role: str, op: str, ns: float, commits, node, kw):
    yield from use(ctx, "tensor", ns, "tensor", op, **kw)
    event = ctx.rec.last_id("tensor") if ns > 0 else None
    yield ctx.env.timeout(ctx.cost.commit_ns)
    for barrier in commits:
        barrier.arrive(role, node=node, event=event)


def end_of_cta(ctx, cta: Cta, role: str, item: int):
    """Before k14 a CTA ends when every role is done (one barrier), and the SM's next CTA starts after it; k14's
    roles run on into their next item."""
    if not cta.roles.persistent:
        arrive(ctx, cta.cta_end, role)
        yield from wait_phase(ctx, role, cta.cta_end, item, "CTA end", work_item=item)


# ---- the CTA ---------------------------------------------------------------------------------------------------

class Cta:
    """What the roles of one SM's CTA share: its work items, the pipelines and barriers (declared in the order the
    kernel initializes them) and the race log (None when races are not checked).

    items[i][q] = (K/V tiles Q tile q of item i visits, its first masked tile); n_kv[i]: the K/V tiles item i
    loads (up to its last Q tile's diagonal); base[q][i]: the S tiles Q tile q saw before item i, so that
    base[q][i] + j counts the phases of Q tile q's barriers up to tile j of item i."""

    def __init__(self, ctx, roles: Roles):
        self.roles, self.nq, self.hb = roles, roles.q_tiles, ctx.race_log()
        self.items = ctx.group.work
        self.n_kv = [s[-1][0] for s in self.items]
        self.base = [list(accumulate((s[q][0] for s in self.items[:-1]), initial=0)) for q in range(self.nq)]
        if roles.serial:
            self.mma_done, self.mma_waits = self._barrier(ctx, "mma_done", ("cta",)), 0
        else:
            self._specialized(ctx)

    def _barrier(self, ctx, name: str, arrivers: tuple):
        return ctx.barrier(name, len(arrivers), arrivers, hb=self.hb)

    def _specialized(self, ctx) -> None:
        """k04 on. The K/V ring (`kv`, one TMA copy per K or V tile) and Q's one-slot pipeline (`q`: its full
        barrier is Q loaded, its empty barrier Q free after the item's last QK); cta_end before k14; per Q tile
        q: s_ready (S_q in TMEM), pv_done (PV into O_q committed), p_ready (P_q in TMEM, and O_q safe where no
        correction role signals that on p_high), p_high (k13: P_q's early columns, and O_q safe) and stats
        (k12: the row statistics, for the correction role)."""
        roles, cost, nq = self.roles, ctx.cost, self.nq
        self.slots = kv_slots(roles, ctx.prm)
        self.kv = ctx.pipeline("KV", self.slots, "load", ("mma",), cost.tile_bytes, hb=self.hb,
                               tma=TmaEngine(ctx, style="transfer", reuse=cost.kv_reuse))
        self.q = ctx.pipeline("Q", 1, "load", ("mma",), cost.q_bytes, hb=self.hb, tma=TmaEngine(ctx, style="transfer"))
        rows = tuple(f"softmax{q}" for q in range(nq))
        o_safe_by = ("correction",) if roles.correction else ()
        self.cta_end = self._barrier(ctx, "cta_end", ("load", "mma") + rows + o_safe_by)
        self.s_ready = [self._barrier(ctx, f"s_ready[{q}]", ("mma",)) for q in range(nq)]
        self.pv_done = [self._barrier(ctx, f"pv_done[{q}]", ("mma",)) for q in range(nq)]
        self.p_ready = [self._barrier(ctx, f"p_ready[{q}]", (rows[q],) + (() if roles.early_pv else o_safe_by))
                        for q in range(nq)]
        self.p_high = [self._barrier(ctx, f"p_high[{q}]", (rows[q],) + o_safe_by)
                       for q in range(nq)] if roles.early_pv else []
        self.stats = [self._barrier(ctx, f"stats[{q}]", (rows[q],)) for q in range(nq)] if roles.correction else []
        self.o_safe = self.p_high or self.p_ready  # where the correction role says O is rescaled


# ---- the roles -------------------------------------------------------------------------------------------------

def serial_cta(ctx, cta: Cta):
    """k01-k03, the write-up's baseline kernel: one role ("cta") waits after every stage. Per item: TMA Q; per K/V
    tile: TMA K+V, the QK MMA, pass 1 (row max), the O rescale (not on the item's first tile), pass 2 (P: to K's
    dead SMEM slot in k01, over S in TMEM from k02; the store is not costed), the PV MMA; then the epilogue."""
    role, cost = "cta", ctx.cost
    for item, spans in enumerate(cta.items):
        yield from tma_waited(ctx, role, cost.q_bytes, "TMA Q (waited)", 1, work_item=item)
        for j in range(cta.n_kv[item]):
            kw = dict(work_item=item, k_index=j)
            masked = j >= spans[0][1]
            yield from tma_waited(ctx, role, 2 * cost.tile_bytes, "TMA K+V (waited)", cost.kv_reuse, **kw)
            yield from mma_and_wait(ctx, cta, "QK", **kw)
            yield from row_max(ctx, role, "S", masked, **kw)
            if j:
                yield from row_pass(ctx, role, cost.rescale, "O rescale", **kw)
            yield from row_pass(ctx, role, cost.s_passes(masked)[1], "S pass 2: P", **kw)
            yield from mma_and_wait(ctx, cta, "PV", **kw)
        yield from epilogue(ctx, role, item, 0)


def mma_and_wait(ctx, cta: Cta, op: str, **kw):
    """k01: issue one MMA committing to mma_done, and wait for that commit."""
    issue_mma(ctx, cta, "cta", op, ctx.cost.mma_ns, (cta.mma_done,), **kw)
    yield from wait_phase(ctx, "cta", cta.mma_done, cta.mma_waits, f"{op} commit", **kw)
    cta.mma_waits += 1


def loader(ctx, cta: Cta):
    """The load warp (k04 on; the write-up's producer): per work item, the CTA's Q tiles in one TMA copy into
    their buffer (k14 first waits until the previous item's last QK freed it), then K_j and V_j of every K/V tile
    the item visits, each into the next slot of the K/V ring: producer_acquire, then producer_commit (expect_tx on
    the slot's full barrier; the TMA engine delivers the bytes). At the end, producer_tail."""
    kv, q = PipelineState.producer_start(cta.slots), PipelineState.producer_start(1)
    for item in range(len(cta.items)):
        if item and cta.roles.persistent:  # before k14 each item is a CTA of its own, with Q's buffer free
            yield from producer_acquire(ctx, cta.q, q, "Q free", work_item=item)
        cta.q.producer_commit(q, token=item, op=f"TMA Q x{cta.nq}", writer=f"tma Q {item}", work_item=item)
        q.advance()
        for j in range(cta.n_kv[item]):
            for x in "KV":
                yield from producer_acquire(ctx, cta.kv, kv, f"{x} slot", work_item=item, k_index=j)
                cta.kv.producer_commit(kv, token=(item, j, x), op=f"TMA {x}", writer=f"tma {x} {item}.{j}",
                                       work_item=item, k_index=j)
                kv.advance()
        yield from end_of_cta(ctx, cta, "load", item)
    yield cta.kv.producer_tail(kv)


def mma_warp(ctx, cta: Cta):
    """The MMA warp (k04 on; one thread issues every tcgen05.mma): per work item, wait for Q, take the ring's K and
    V slot states of every K/V tile the item loads, and issue the item's QK and PV MMAs in the chapter's order
    (Roles.mainloop: mma_in_order, or mma_pipelined from k07). It never waits for an MMA: commits signal them."""
    kv, q = PipelineState(cta.slots), PipelineState(1)
    for item, spans in enumerate(cta.items):
        yield from consumer_wait(ctx, cta.q, q, "mma", "Q", work_item=item)
        tiles = [(_take(kv), _take(kv)) for _ in range(cta.n_kv[item])]  # (K, V) slot states in token order
        on = [[t for t in range(cta.nq) if j < spans[t][0]] for j in range(cta.n_kv[item])]  # Q tiles per K/V tile
        yield from cta.roles.mainloop(ctx, cta, item, tiles, on)
        q.advance()
        yield from end_of_cta(ctx, cta, "mma", item)


def _take(st: PipelineState) -> PipelineState:
    """The state's slot now; the state moves on to the next."""
    now = st.copy()
    st.advance()
    return now


def mma_in_order(ctx, cta: Cta, item: int, tiles: list, on: list):
    """k04-k06: per K/V tile, the QK of every Q tile on it, then their PVs. Before k06 a tile's K and V slots are
    freed together after PV, and QK waits for both; from k06 QK waits only for K."""
    for j, (ks, vs) in enumerate(tiles):
        yield from consumer_wait(ctx, cta.kv, ks, "mma", "K", work_item=item, k_index=j)
        if not cta.roles.kv_ring:
            yield from consumer_wait(ctx, cta.kv, vs, "mma", "V", work_item=item, k_index=j)
        for q in on[j]:
            qk(ctx, cta, item, j, q, ks)
        if cta.roles.kv_ring:
            yield from consumer_wait(ctx, cta.kv, vs, "mma", "V", work_item=item, k_index=j)
        for q in on[j]:
            yield from pv(ctx, cta, item, j, q, ks, vs)


def mma_pipelined(ctx, cta: Cta, item: int, tiles: list, on: list):
    """k07 on, the write-up's compute pipeline: a prologue QK(0) of every Q tile; then per K/V tile j and Q tile q,
    P_qV(j) then Q_qK(j+1), so one Q tile's softmax runs while the tensor pipe serves the other's; the last PVs
    drain."""
    yield from consumer_wait(ctx, cta.kv, tiles[0][0], "mma", "K", work_item=item, k_index=0)
    for q in on[0]:
        qk(ctx, cta, item, 0, q, tiles[0][0])
    for j, (ks, vs) in enumerate(tiles):
        yield from consumer_wait(ctx, cta.kv, vs, "mma", "V", work_item=item, k_index=j)
        for q in on[j]:
            yield from pv(ctx, cta, item, j, q, ks, vs)
            if j + 1 < len(tiles) and q in on[j + 1]:
                if q == on[j + 1][0]:
                    yield from consumer_wait(ctx, cta.kv, tiles[j + 1][0], "mma", "K", work_item=item, k_index=j + 1)
                qk(ctx, cta, item, j + 1, q, tiles[j + 1][0])


def qk(ctx, cta: Cta, item: int, j: int, q: int, ks: PipelineState) -> None:
    """S_q = Q_q K_j^T into TMEM; its commit signals S_q ready. The last Q tile's QK (it visits every K/V tile of
    the item) also frees K's slot from k06 on, and on the item's last tile frees Q's buffer."""
    last = q == cta.nq - 1
    commits = [cta.s_ready[q]] + ([cta.kv.empty[ks.index]] if last and cta.roles.kv_ring else []) + \
        ([cta.q.empty[0]] if last and j == cta.n_kv[item] - 1 else [])
    issue_mma(ctx, cta, "mma", f"Q{q}K", ctx.cost.mma_ns, commits,
              reads=((cta.q, PipelineState(1), item), (cta.kv, ks, (item, j, "K"))), work_item=item, k_index=j)


def pv(ctx, cta: Cta, item: int, j: int, q: int, ks: PipelineState, vs: PipelineState):
    """O_q += P_q V_j once P_q is in TMEM and O_q is safe (rescaled); its commit signals PV done and, for the last
    Q tile, frees V's slot (and K's, before k06). k13: the early part runs on P's early columns as soon as they
    (and O_q) are ready, the rest once all of P_q is."""
    g, kw, cost = cta.base[q][item] + j, dict(work_item=item, k_index=j), ctx.cost
    reads = ((cta.kv, vs, (item, j, "V")),)
    frees = [cta.kv.empty[vs.index]] + ([] if cta.roles.kv_ring else [cta.kv.empty[ks.index]])
    commits = [cta.pv_done[q]] + (frees if q == cta.nq - 1 else [])
    if cta.roles.early_pv:
        yield from wait_phase(ctx, "mma", cta.p_high[q], g, f"P{q} high + O safe", **kw)
        issue_mma(ctx, cta, "mma", f"P{q}V (early part)", cost.mma_ns * cost.early, (), reads=reads, **kw)
        yield from wait_phase(ctx, "mma", cta.p_ready[q], g, f"P{q} ready", **kw)
        issue_mma(ctx, cta, "mma", f"P{q}V (rest)", cost.mma_ns * (1 - cost.early), commits, reads=reads, **kw)
    else:
        yield from wait_phase(ctx, "mma", cta.p_ready[q], g, f"P{q} ready + O safe", **kw)
        issue_mma(ctx, cta, "mma", f"P{q}V", cost.mma_ns, commits, reads=reads, **kw)


def row_warps(ctx, cta: Cta, q: int):
    """The row warps of Q tile q ("softmax<q>", the write-up's softmax warpgroup), per K/V tile the tile visits:
    wait for S_q, pass 1 (row max), the O rescale (from k12 the row statistics go to the correction role
    instead), pass 2 (P into TMEM). Before k12 they also write the item's epilogue once its last PV is done."""
    role = f"softmax{q}"
    for item, spans in enumerate(cta.items):
        visits, first_masked = spans[q]
        for j in range(visits):
            kw = dict(work_item=item, k_index=j)
            masked = j >= first_masked
            yield from wait_phase(ctx, role, cta.s_ready[q], cta.base[q][item] + j, f"S{q}", **kw)
            yield from row_max(ctx, role, f"S{q}", masked, **kw)
            if cta.roles.correction:
                arrive(ctx, cta.stats[q], role)
            else:
                yield from rescale_o(ctx, cta, role, q, item, j)
            yield from store_p(ctx, cta, role, q, masked, **kw)
        if not cta.roles.correction:
            yield from finish_o(ctx, cta, role, q, item)
        yield from end_of_cta(ctx, cta, role, item)


def store_p(ctx, cta: Cta, role: str, q: int, masked: bool, **kw):
    """Pass 2 over S_q (exponentials, P into TMEM), then P ready; k13: the early columns first, then P high (PV
    may start), then the rest."""
    softmax, early = ctx.cost.s_passes(masked)[1], ctx.cost.early
    if cta.roles.early_pv:
        yield from row_pass(ctx, role, softmax, f"S{q} pass 2: P high", early, **kw)
        arrive(ctx, cta.p_high[q], role)
        yield from row_pass(ctx, role, softmax, f"S{q} pass 2: P rest", 1 - early, **kw)
    else:
        yield from row_pass(ctx, role, softmax, f"S{q} pass 2: P", **kw)
    arrive(ctx, cta.p_ready[q], role)


def rescale_o(ctx, cta: Cta, role: str, q: int, item: int, j: int):
    """O_q *= exp(m_old - m_new), once the previous PV into O_q is done (nothing on an item's first tile)."""
    if j:
        kw = dict(work_item=item, k_index=j)
        yield from wait_phase(ctx, role, cta.pv_done[q], cta.base[q][item] + j - 1, f"P{q}V done", **kw)
        yield from row_pass(ctx, role, ctx.cost.rescale, f"O{q} rescale", **kw)


def finish_o(ctx, cta: Cta, role: str, q: int, item: int):
    """Once the item's last PV into O_q is done, the epilogue of O_q."""
    last = cta.base[q][item] + cta.items[item][q][0] - 1
    yield from wait_phase(ctx, role, cta.pv_done[q], last, f"P{q}V done", work_item=item)
    yield from epilogue(ctx, role, item, q)


def correction(ctx, cta: Cta):
    """The correction warps (k12 on): per K/V tile and each Q tile that visits it, wait for the row statistics,
    rescale O (after the previous PV), and say O is safe (on p_high from k13, else on p_ready); per item, the
    epilogue of each Q tile."""
    role = "correction"
    for item, spans in enumerate(cta.items):
        for j in range(cta.n_kv[item]):
            for q in (q for q in range(cta.nq) if j < spans[q][0]):
                yield from wait_phase(ctx, role, cta.stats[q], cta.base[q][item] + j, f"stats{q}", work_item=item,
                                      k_index=j)
                yield from rescale_o(ctx, cta, role, q, item, j)
                arrive(ctx, cta.o_safe[q], role)
        for q in range(cta.nq):
            yield from finish_o(ctx, cta, role, q, item)
        yield from end_of_cta(ctx, cta, role, item)


def launch(roles: Roles, ctx) -> None:
    """One SM: its CTA's barriers, then its roles, in the order the kernel's warps start."""
    cta = Cta(ctx, roles)
    if roles.serial:
        ctx.spawn("cta", serial_cta(ctx, cta))
        return
    ctx.spawn("load", loader(ctx, cta))
    ctx.spawn("mma", mma_warp(ctx, cta))
    for q in range(cta.nq):
        ctx.spawn(f"softmax{q}", row_warps(ctx, cta, q))
    if roles.correction:
        ctx.spawn("correction", correction(ctx, cta))


# ---- the chapters ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Roles:
    """Which variant of each role a chapter runs: the write-up's structural steps."""

    serial: bool = True  # k01-k03: serial_cta alone; k04 on: loader, mma_warp, row_warps
    q_tiles: int = 1  # k05: two Q tiles per CTA sharing each K/V load, a row_warps role each
    kv_ring: bool = False  # k06: a ring of kv_stages K/V token slots, K freed after its last QK
    mainloop: Callable = mma_in_order  # k07: mma_pipelined
    correction: bool = False  # k12: the correction role rescales O and writes the epilogue
    early_pv: bool = False  # k13: P in two parts, PV starts on the first
    persistent: bool = False  # k14: one CTA per SM walks its items by grid stride, no drain between them


@dataclass(frozen=True)
class Chapter:
    """One chapter of the write-up: its schedule name, description, the steps up to it (VARIANTS), its roles and
    its cost options."""

    name: str
    description: str
    steps: frozenset
    roles: Roles
    options: CostOptions


# What each modelled step changes: a role variant or a cost option. An UNMODELLED step changes neither, so its
# chapter predicts exactly its predecessor's time.
ROLE_STEPS = dict(ws=dict(serial=False), two_q=dict(q_tiles=2), ring=dict(kv_ring=True),
                  compute_pipe=dict(mainloop=mma_pipelined), split_correction=dict(correction=True),
                  early_pv=dict(early_pv=True), persistent=dict(persistent=True))
COST_STEPS = dict(exp2=dict(hw_exp2=True), sw_exp2=dict(sw_exp2=True), reg_cache=dict(reg_cache=True),
                  skip_rescale=dict(skip_rescale=True))


def _chapters() -> dict[str, Chapter]:
    roles, options, out = Roles(), CostOptions(), {}
    for name, step, description in _TABLE:
        roles, options = replace(roles, **ROLE_STEPS.get(step, {})), replace(options, **COST_STEPS.get(step, {}))
        out[name] = Chapter(name, description, frozenset(VARIANTS[name]), roles, options)
    return out


CHAPTERS = _chapters()  # name -> Chapter, in chapter order


def flops(dims: tuple, prm: dict) -> float:
    """4 B H L^2 D, halved when causal (the FA benchmarks' convention)."""
    b, h, seq, d = dims
    return 4.0 * b * h * seq * seq * d / (2 if prm["causal"] else 1)


def summary(chapter: Chapter, per_sm: list, rep, dims: tuple, prm: dict, cost: AttentionCosts) -> dict:
    """The run's work: items, SMs with work, the representative SM's items and tiles, the rescale frequency and
    the chapter's modelled steps."""
    _, _, seq, _ = dims
    my, nq = rep.work, chapter.roles.q_tiles
    return dict(work_items=dims[0] * dims[1] * (seq // (BLOCK_M * nq)), active_sms=len(per_sm), items_per_sm=len(my),
                kv_tiles=seq // prm["block_n"], q_tiles=nq, kv_tiles_on_this_sm=sum(s[-1][0] for s in my),
                qk_tiles_on_this_sm=sum(v for s in my for v, _ in s),
                masked_tiles_on_this_sm=sum(v - m for s in my for v, m in s),
                rescale_frequency=cost.rescale_frequency, modelled=sorted(chapter.steps - UNMODELLED))


def schedule(chapter: Chapter) -> Schedule:
    """The chapter as a Schedule the engine runs."""
    return Schedule(name=chapter.name, description=chapter.description, shape="attention", defaults=DEFAULTS,
                    flags=VARIANTS[chapter.name], resolve=partial(resolve, chapter.roles),
                    work=partial(deal, chapter.roles), costs=partial(AttentionCosts.of, chapter),
                    launch=partial(launch, chapter.roles), flops=flops, summary=partial(summary, chapter), gpu="b200",
                    arch="sm100", units=UNITS, work_cost=item_pairs, q_rows=2 * BLOCK_M, races="slot")


SCHEDULES = tuple(schedule(c) for c in CHAPTERS.values())
