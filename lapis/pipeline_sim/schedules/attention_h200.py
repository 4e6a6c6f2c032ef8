"""Hopper attention forward (bf16, fp32 accumulation), the schedules h200-s1-serial .. h200-s9-tuned, as simpy
processes; each mirrors entry points of lapis/gpu/kernels/attention_h200.cu (lapis/catalog/attention.py maps them).

One event per tile-level operation (a TMA box, one wgmma over a tile, a softmax tile, an O rescale); times in ns.
Per work item (one Q tile of block_m rows of one (batch, head)) and K/V tile j: S_j = Q K_j^T (tensor pipe),
P_j = the softmax tile (the warpgroup's own instructions), O += P_j V_j (tensor pipe), and an O rescale.

Roles (top-level generator functions over a lapis.pipeline_sim.context.Context and a CtaSlot, each naming the
kernel lines it mirrors): s1 is one warpgroup (`consumer0`, consumer_serial) that loads Q, K_j and V_j itself and
waits for every step. With `ws` a `producer` (producer) fills separate K and V rings of `stages` slots (TmaPipeline,
full/empty mbarriers; K frees before V, as FlashAttention-3 keeps them; the copies are the slot's TmaEngine's, on
the `tma` unit) and `consumer_wgs` warpgroups (`consumer<i>`, 64 rows each) compute: consumer_ring (s2, s3),
consumer_pingpong (s4), consumer_overlap (s5+); consumer_role picks one from the variant's flags. With several
resident CTAs per SM each slot's roles are prefixed `cta<s>/`. wgmma completes through commit groups
(commit_groups.WgmmaGroups), GEMM turns through named_barrier.NamedBarrier. What each op takes is the cost model's
(AttentionCosts): the softmax flavour (exp2, emulate_frac, cond_rescale) and the causal mask are cost options there.

Variant flags (VARIANTS; each step of the table adds one):
  ws (s2+): the producer and the rings above; s3 adds the second consumer warpgroup (block_m 128).
  pingpong (s4+): the warpgroups take GEMM turns (FA3's warp-scheduler barriers): WG i `bar.sync`s barrier
     PINGPONG_BAR0 + i (256 threads: its own 128 and the previous WG's `bar.arrive`), issues PV_{j-1} then QK_j
     and arrives on the next WG's barrier; the last WG pre-arrives WG 0's, so turns go round in WG order and one
     WG's softmax overlaps the other's GEMMs. The producer issues K_{j+1} before V_j, the order the slots free in.
  overlap (s5+): in a turn V_{j-1} is waited for, then QK_j and PV_{j-1} issue back to back (with the mbarrier wait
     between the two issues ptxas injects a warpgroup.arrive, its C7519 report); `wgmma.wait_group 1` returns
     with S_j, so softmax_j runs while PV_{j-1} is on the tensor pipe; `wait_group 0` precedes the O rescale.
  exp2 (s6+): the softmax flavour ex2 (scale folded into log2 units) instead of exp2f; `emulate_frac` of the
     exponentials go to the FMA pipe as the cubic (the emu8 / emu4 flavours, EMULATED).
  cond_rescale (s7+): flavour ex2_cond; O is rescaled only when a row max grows by more than `threshold` (log2
     units), with the frequency lapis.model.numerics measures on normal inputs (rescale_frequency).
  persistent (s8, s9): one CTA per SM walks the work units `persistent_order` deals (work_order.py: grid_stride,
     lpt, heavy_first, lpt_l2, split_tail), with no CTA turnover between them; its producer runs ahead into the
     next unit (the kernel's second Q slot). With one CTA per SM (a grid within one wave) s8 = s7.
  masked_tail (s9): L need not be a multiple of the tiles; a ragged last Q or K/V tile costs a full tile (a full
     TMA box and wgmma). s1..s8 raise ScheduleError for tiles that do not divide L.
s9's defaults (S9_BLOCK_N, S9_STAGES, S9_WGS: block_n 128, 3 stages, 2 WGs) are the built and measured kernel
attn_s9_tuned_s3_n128_c2, rank 1 of the sweep in lapis/data/captures/sweep/h200-2026-11-30-s8; `lapis sweep`
ranks the configurations on the current profile and model.

Costs (softmax_costs; cycles become ns through the profile's clock_ghz):
- softmax tile: the flavour's softmax loop in the contend microbenchmark (kernels/micro_mix_softmax_v3.cu), its
  64 x 128 tile alone from its SASS (lapis.model.contend, single-instruction constants; without its O rescale),
  scaled to rows x block_n (and by the kernel's own loop, below); it progresses slower while the other warpgroup
  runs softmax (the kernel's own softmax side's SASS, else the microbenchmark's, two warps per SMSP) or any wgmma
  group is in flight on the SM (that SASS beside the GEMM pair's tensor job, lapis.model.tensor_share):
  lapis.pipeline_sim.contention.
- wgmma: 2 x rows x block_n x D FLOP at tensor_flop_per_clk_sm on the SM's one tensor pipe (FIFO), slower while a
  softmax runs (the GEMM pair beside that SASS, the same tensor_share run); its result lands the pipe's latency
  later: for the GEMM turns' groups issued back to back (s4+) the pair's completion gap (lapis.model.contend
  .completion_gap, 44 cycles; kernels/micro_wgmma_v2.cu's chains confirm it), for s1..s3's lone groups, each
  waited right after its commit, one wgmma's tail (lone_tail_ns: wgmma_latency_ns less one m64n256k16's pipe time,
  about 54 cycles).
- GEMM turn (s4+, `gemm_turn`): one warp's issue of the turn's instructions from the kernel's SASS
  (lapis.model.consumer_loop: the V wait and descriptors before the first wgmma, then each wgmma group's k-steps and
  descriptors; the kernel is the schedule's own, or the one `kernel_loop` names), so a wgmma reaches the tensor pipe when
  its group's first HGMMA issues and the next warpgroup's turn starts at the bar.arrive (issue).
- O rescale: rows x D multiplies at fma_per_clk_sm; causal: the diagonal tile adds MASK_OPS_PER_SCORE per score.
- loads: bytes at the SM's share of the chip's load bandwidth (lapis.pipeline_sim.grid: L2's, or HBM's times the
  reuse where that is the tighter), then the latency. K/V tiles: the reuse the work order leaves in L2
  (lapis.pipeline_sim.l2_reuse, an LRU of the device's l2_bytes), and the mean of tma_latency_ns (hits) and
  tma_latency_hbm_ns (1 / reuse of them, fetches); Q in and O out: reuse 1 and tma_latency_hbm_ns.
- CTA turnover (s1..s7): a slot starts its next CTA once every role of the previous one is done (the kernel's last
  __syncthreads) plus cta_turnover_ns.
The contend and launch values come from lapis/gpu/kernels/micro_mix_softmax_v3.cu and micro_launch_v1.cu
(capture lapis/data/captures/micro/h200-2026-11-30-contend-launch, fitted by lapis.model.fit); a profile without
them is a ScheduleError.

Resident CTAs: a non-persistent grid runs as many CTA slots per SM as lapis.model.occupancy keeps resident
(threads 128 x (consumer WGs + 1 with ws); registers per thread S1_PTXAS_REGS for s1, else the mean of the
setmaxnreg split; shared memory the tiles + KERNEL_SMEM_EXTRA bytes); each slot has its own rings, barriers and
roles and shares the SM's units, taking the SM's next CTA in grid order: s1 (80 KiB of tiles) keeps 2 resident,
shared-memory-limited, s2..s7 at their defaults keep 1. `ctas_per_sm` forces fewer (1..resident). The
representative SM (the most K/V tiles) is simulated; `full` simulates every SM.

Parameters (DEFAULTS; `--param k=v`): block_m, block_n, stages, consumer_wgs, emulate_frac, threshold, causal,
regs_producer / regs_consumer (setmaxnreg.py: derived 56/256, 24/240, 32/160 for 1, 2, 3 consumer WGs; refused
outside 24..256 step 8 or over registers_per_sm), regs_per_thread (s1 only), ctas_per_sm, q_tiles_per_cta
(work_order.py), persistent_order (s8, s9), softmax_chains (softmax_costs; more than 1 only on the ex2 variants
s6..s9 with emulate_frac 0: _check_chains), kernel_loop (kernel_loop), late_v (turn_overlap: 1 waits for V_{j-1}
after QK_j's issue, as s15 does; its kernel_loop must be a kernel that does so), side_warps (softmax_costs: 2 scales
the softmax tile by the kernel loop's softmax_scale, its SMSP cycles with both consumer warpgroups' softmax warps on
each SMSP; 1 by softmax_scale_alone, one warp alone, where its in-order issue and latencies show, as s16's packs
interleaved with its exponentials do; 1 needs a kernel_loop), cross_item (gemm_turns: 1 runs the GEMM turns on
across a persistent CTA's items, as s23 does). Registers set the residency and are
reported (`fit`); spills, and
the per-tile overheads a larger block_n amortizes on hardware, are not modelled. FMA_OPS_PER_SCORE (4; 3 with
the scale folded into log2 units) is the FMA-pipe count per score the FA2, sm120 and B200 schedules cost their
softmax by; these schedules cost it from SASS (softmax_costs).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache, partial

import numpy as np

from lapis.errors import ScheduleError
from lapis.model import consumer_loop
from lapis.model.contend import FIELDS as CONTEND_FIELDS
from lapis.model.contend import Contend
from lapis.model.numerics import flash_forward
from lapis.model.occupancy import resident_ctas
from lapis.model.softmax_body import CHAINS, chain_factor
from lapis.pipeline_sim.causal import MASK_OPS_PER_SCORE
from lapis.pipeline_sim.commit_groups import WgmmaGroups
from lapis.pipeline_sim.contention import Contention
from lapis.pipeline_sim.l2_reuse import kv_reuse
from lapis.pipeline_sim.pipeline import PipelineState
from lapis.pipeline_sim.schedule import Schedule
from lapis.pipeline_sim.setmaxnreg import WARPGROUP_THREADS, register_split
from lapis.pipeline_sim.tma import TmaEngine
from lapis.pipeline_sim.work_order import (  # noqa: F401 (re-exported)
    PieceTiles,
    kv_per_sm,
    kv_tiles_per_item,
    kv_units_per_sm,
    representative_sm,
    section_heads,
)

S9_BLOCK_N, S9_STAGES, S9_WGS = 128, 3, 2  # the measured s9 kernel's (module docstring)
S1_PTXAS_REGS = 154  # ptxas's count for attn_s1_serial (capture attention/h200-2026-11-29, builds.plain.ptxas)
# Shared memory the kernel holds beyond the schedule's tiles: 1 KiB of alignment slack in the dynamic allocation
# (attention_h200.cu Config::SMEM_BYTES) and 1 KiB of static shared memory (ptxas smem_bytes, same capture).
KERNEL_SMEM_EXTRA = 1024 + 1024
DEFAULTS = dict(block_m=128, block_n=128, stages=2, consumer_wgs=2, emulate_frac=0, threshold=8, causal=0,
                regs_producer=None, regs_consumer=None, regs_per_thread=None, ctas_per_sm=None, q_tiles_per_cta=1,
                persistent_order="grid_stride", softmax_chains=1, q_slots=1, kernel_loop="own", late_v=0,
                side_warps=2, cross_item=0)
_S8 = dict(ws=True, pingpong=True, overlap=True, exp2=True, cond_rescale=True, persistent=True)
VARIANTS = {
    "h200-s1-serial": dict(block_m=64, consumer_wgs=1, stages=1, ws=False, regs_per_thread=S1_PTXAS_REGS),
    "h200-s2-ws-ring": dict(block_m=64, consumer_wgs=1, ws=True),
    "h200-s3-two-consumers": dict(ws=True),
    "h200-s4-pingpong": dict(ws=True, pingpong=True),
    "h200-s5-intra-overlap": dict(ws=True, pingpong=True, overlap=True),
    "h200-s6-exp2": dict(ws=True, pingpong=True, overlap=True, exp2=True),
    "h200-s7-cond-rescale": dict(ws=True, pingpong=True, overlap=True, exp2=True, cond_rescale=True),
    "h200-s8-persistent": dict(_S8, q_slots=2),
    # s9: s8 at the S9_* defaults (see the module docstring); K/V and Q tails are masked
    "h200-s9-tuned": dict(_S8, masked_tail=True, block_n=S9_BLOCK_N, stages=S9_STAGES, consumer_wgs=S9_WGS,
                          block_m=64 * S9_WGS, q_slots=1),
}
FMA_OPS_PER_SCORE = {False: 4, True: 3}  # without / with the scale folded into log2 units
CUBIC_FMA_OPS = 6  # floor, subtract, three FMAs, exponent add: the write-up's software exp2 (ch. 9)
PINGPONG_BAR0 = 1  # named-barrier id of consumer WG 0's GEMM turn (WG i uses id 1 + i; id 0 is __syncthreads)


def parse_shape(shape: str) -> tuple[int, int, int, int]:
    try:
        b, h, seq, d = (int(x) for x in shape.lower().split("x"))
    except ValueError:
        raise ScheduleError("an attention shape is BxHxLxD", repr(shape), "e.g. --shape 8x16x4096x128") from None
    return b, h, seq, d


@lru_cache(maxsize=32)
def rescale_frequency(block_n: int, threshold: float | None) -> float:
    """How often a row's O is rescaled per K/V tile, on normal inputs (lapis.model.numerics)."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(n, 128)) for n in (64, 8 * block_n, 8 * block_n))
    return flash_forward(q, k, v, block_n=block_n, threshold=threshold)[1]["rescale_frequency"]


EMULATED = ((0.0, "ex2"), (0.125, "emu8"), (0.25, "emu4"))  # emulate_frac of the contend microbenchmark's flavours
CONTEND_LAUNCH = "micro/h200-2026-11-30-contend-launch"  # the capture of cta_turnover_ns (its launch half)
BAR = "micro/h200-2026-12-02-bar"  # kernels/micro_bar_v1.cu: bar_hop_cycles_<form>, bar_sync_present_cycles
MEASURED_BY = {CONTEND_LAUNCH: "the launch microbenchmark", BAR: "the bar.sync hand-over microbenchmarks",
               BAR + " device_attributes": "the device's L2 size (l2_bytes, cudaGetDeviceProperties)"}


def l2_bytes(p) -> int:
    """The device's L2 capacity in bytes (profile l2_bytes, cudaGetDeviceProperties l2CacheSize in the BAR
    capture); ScheduleError (_measured) when the profile lacks it, and when it is not a whole number of bytes > 0."""
    v = _measured(p, "l2_bytes", BAR + " device_attributes")
    if v != int(v) or v < 1:
        raise ScheduleError("the profile's l2_bytes is the device's L2 size, a whole number of bytes > 0",
                            f"{p.name}.l2_bytes = {v!r}", "refit: python -m lapis.model.fit (device_attributes."
                            "l2CacheSize of the micro captures)")
    return int(v)


def _measured(p, key: str, capture: str = CONTEND_LAUNCH) -> float:
    """A microbenchmark profile value, from `capture`; ScheduleError naming it and that capture when the profile
    lacks it or it is not a finite number >= 0."""
    v = p.values.get(key, {}).get("value")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ScheduleError(f"the Hopper attention schedules need {MEASURED_BY[capture]} in the profile ({capture})",
                            f"{p.name}.{key} = {v!r}", f"refit: python -m lapis.model.fit with {capture} in "
                            "lapis/data/fit_manifest.json")
    return v


def reference(flavour: str) -> Contend:
    """The contend microbenchmark's softmax tile of `flavour` (kernels/micro_mix_softmax_v3.cu, its SASS) in the
    contend states, as lapis.model.contend predicts them (lapis.model.consumer_loop's micro_reference)."""
    return Contend(**consumer_loop.load()["micro_reference"][flavour]["contend"])


def _flavour_cycles(field: str, base: Contend, emulate: float, softmax: bool = True,
                    fma_per_clk_sm: float = 0.0) -> float:
    """Cycles of Contend `field` for softmax `base` with `emulate` of the exponentials in software: the
    microbenchmark's ex2 -> emu8 -> emu4 change (reference), interpolated linearly in emulate_frac, added to `base`;
    past 1/4 a softmax tile (softmax=True) adds the cubic's FMA-pipe ops (CUBIC_FMA_OPS per score at
    fma_per_clk_sm) on top of emu4, and a GEMM pair stays at emu4's."""
    v = getattr(base, field)
    if not emulate:
        return v
    pts = [(e, getattr(reference(f), field)) for e, f in EMULATED]
    (e0, c0), (e1, c1) = next(((a, b) for a, b in zip(pts, pts[1:]) if emulate <= b[0]), (pts[-2], pts[-1]))
    extra = max(0.0, emulate - e1) * 64 * 128 * CUBIC_FMA_OPS / fma_per_clk_sm if softmax else 0.0
    return v + c0 + (c1 - c0) * (min(emulate, e1) - e0) / (e1 - e0) + extra - pts[0][1]


def flavour(flags: dict) -> str:
    """The softmax flavour a variant's flags give: exp2f (s1..s5), ex2 (s6), ex2_cond (s7..s9)."""
    return "exp2f" if not flags.get("exp2") else "ex2_cond" if flags.get("cond_rescale") else "ex2"


def emulated(flags: dict, prm: dict) -> float:
    """The fraction of the exponentials computed in software (emulate_frac, with the ex2 flavours only)."""
    return prm["emulate_frac"] if flags.get("exp2") else 0.0


def softmax_costs(p, flags: dict, prm: dict, rows: int, bn: int, d: int) -> dict:
    """What a consumer warpgroup's softmax and GEMMs cost, from SASS, in the contend states lapis.model.contend
    predicts from single-instruction constants (lapis.pipeline_sim.contention takes the rates). Flavour: exp2f
    (s1..s5), ex2 (s6, FA4's, cuDNN's), ex2_cond (s7..s9), emulate_frac on top (EMULATED).
    softmax_ns: a rows x bn tile's softmax alone without its O rescale, scaled from the 64 x 128 tile of the
    flavour's contend microbenchmark (kernels/micro_mix_softmax_v3.cu, its softmax loop's SASS: reference; the
    always-rescale flavours' tile holds one O rescale, which is taken out; ex2_cond's, on scores whose max never
    moves, holds none); rescale_ns: one O rescale (rows x d FMA-pipe multiplies alone); wgmma_latency_ns: the
    GEMM pair's completion gap (lapis.model.contend.completion_gap, 44 cycles: the chain microbenchmark's pair of
    8 + 8 wgmmas took its pipe cycles and that); factors: Contention's rates, from the kernel's own softmax side in
    the contend states where it has a loop (kernel_loop, as built: its SASS already holds its exponentials'
    emulation), else from the flavour's microbenchmark tile.
    softmax_chains (1, 2 or 4): partial maxima and sums per row; softmax_ns scales by
    lapis.model.softmax_body.chain_factor (the SMSP model's cycles of the tile's stream against one chain, with one
    softmax warp per consumer warpgroup on each SMSP), and for lapis's ping-pong kernels by their loop's
    softmax_scale (kernel_loop: the SMSP cycle simulation of the kernel's softmax side against the
    microbenchmark's softmax loop, two softmax warps per SMSP), or softmax_scale_alone with side_warps 1 (one); a
    third-party kernel with a committed loop (flags sass_loop: FA4's sm90 forward) likewise."""
    base, emulate = reference(flavour(flags)), emulated(flags, prm)
    c = Contend(**{f: _flavour_cycles(f, base, emulate, f in ("tile", "pair", "under_gemm"), p["fma_per_clk_sm"])
                   for f in CONTEND_FIELDS})
    loop = kernel_loop(flags, prm)
    own = Contend(**loop["softmax_side"]["contend"]) if loop else c  # the kernel's own side in the contend states
    ghz = p["clock_ghz"]
    in_tile = 0.0 if flags.get("cond_rescale") else 64 * 128 / p["fma_per_clk_sm"]  # cycles: the tile's O rescale
    # the microbenchmark's tiles are s9's (one chain per row); both consumer warpgroups' softmaxes overlap on each SMSP
    chains = chain_factor(prm.get("softmax_chains", 1), prm["consumer_wgs"])
    # the kernel's loop against the microbenchmark's, with two softmax warps per SMSP or (side_warps 1) one
    side = loop["softmax_side"]["softmax_scale" if prm.get("side_warps", 2) == 2 else "softmax_scale_alone"] \
        if loop else 1.0
    return dict(softmax_ns=(c.tile - in_tile) * (rows / 64) * (bn / 128) * chains * side / ghz,
                rescale_ns=rows * d / p.per_ns("fma_per_clk_sm"),
                wgmma_latency_ns=c.gap / ghz, factors=own.factors())


LATENCY_WGMMA_FLOP = 2 * 64 * 256 * 16  # the wgmma of the profile's wgmma_latency_ns: one m64n256k16 (fit.py)


def lone_tail_ns(p) -> float:
    """ns from the tensor pipe finishing a lone commit group (nothing else of the warpgroup in flight, waited at
    once: s1..s3's QK_j and PV_j, attention_h200.cu's wgmma_commit_group then wgmma_wait_group<0> after each) to
    wait_group returning: the profile's wgmma_latency_ns (one m64n256k16 from wgmma.fence to wait_group 0, micro
    capture wgmma.latency.n256.ss) less that wgmma's pipe time at tensor_flop_per_clk_sm. The capture gives the
    same tail, about 54 cycles, at n64, n128 and n256 (its rs latencies are 10 cycles less: not modelled), as
    gemm_ws's tail_ns. It is not the GEMM pair's wgmma_latency_ns (softmax_costs): that pair is two groups issued
    back to back and waited once, the GEMM turns' pattern (s4+), whose time beyond the pipe is about 3.4 times it."""
    return max(0.0, p["wgmma_latency_ns"] - LATENCY_WGMMA_FLOP / p.per_ns("tensor_flop_per_clk_sm"))


def kernel_loop(flags: dict, prm: dict) -> dict | None:
    """The committed consumer loop (lapis.model.consumer_loop.LOOPS) of the built kernel that prm["kernel_loop"]
    names (a catalog key: "s9", "s14"; "own": the one this schedule mirrors); None for schedules without GEMM
    turns (no ping-pong, one consumer warpgroup) and for those whose kernels lapis has no SASS of (flags without
    gemm_turn or sass_loop: cuDNN's); a third-party kernel's committed loop (flags sass_loop:
    consumer_loop.load()["third_party"], FA4's) where the run has two consumer warpgroups or more and ping-pongs
    as that loop does (a loop with a turn) or not (turn None: FA4's at head dim 256). ScheduleError for a
    kernel_loop that is not a built ping-pong kernel with this schedule's turn order, or one given where there are
    no turns."""
    key = prm.get("kernel_loop", DEFAULTS["kernel_loop"])
    if not (flags.get("gemm_turn") and pingpong(flags, prm["consumer_wgs"])):
        if key != "own":
            raise ScheduleError("kernel_loop applies to lapis's ping-pong schedules with two or more consumer "
                                "warpgroups (their kernels' SASS)", f"kernel_loop {key!r}", "drop it")
        # a third-party kernel's loop from its committed SASS (consumer_loop.THIRD_PARTY: FA4's sm90 forward): a
        # run with one consumer warpgroup, or another ping-pong than the loop's, is not that kernel
        if not flags.get("sass_loop") or prm["consumer_wgs"] < 2:
            return None
        loop = consumer_loop.load()["third_party"][flags["sass_loop"]]
        return loop if (loop["turn"] is not None) == pingpong(flags, prm["consumer_wgs"]) else None
    d = consumer_loop.load()
    key = d["schedules"].get(flags["gemm_turn"]) if key == "own" else key
    loop = d["loops"].get(key)
    if loop is not None and loop.get("late_v", False) != bool(prm.get("late_v", 0)):
        raise ScheduleError("kernel_loop names a built kernel whose GEMM turn waits for V_{j-1} after QK_j's issue "
                            "exactly when late_v is 1", f"kernel_loop {key!r} (late_v "
                            f"{int(loop.get('late_v', False))} in its kernel) with late_v {prm.get('late_v', 0)}",
                            f"use late_v={int(loop.get('late_v', False))} with it, or another kernel_loop")
    if loop is not None and loop.get("cross", False) != bool(prm.get("cross_item", 0)):
        raise ScheduleError("kernel_loop names a built kernel whose GEMM turns cross work items (the next item's "
                            "QK_0 beside this item's last PV) exactly when cross_item is 1",
                            f"kernel_loop {key!r} (cross_item {int(loop.get('cross', False))} in its kernel) with "
                            f"cross_item {prm.get('cross_item', 0)}",
                            f"use cross_item={int(loop.get('cross', False))} with it, or another kernel_loop")
    if loop is None or loop["overlap"] != bool(flags.get("overlap")):
        fits = sorted(k for k, lp in d["loops"].items() if lp["overlap"] == bool(flags.get("overlap")))
        raise ScheduleError("kernel_loop names a built kernel whose GEMM turn has this schedule's order (s4: PV "
                            "first; s5+: QK first)", f"{flags['gemm_turn']}: kernel_loop {key!r}",
                            f"use one of {fits}")
    return loop


def turn_costs(p, flags: dict, prm: dict, d: int) -> tuple[float, float, float]:
    """ns of a GEMM turn's issue, alone: (before the first wgmma group, the first group, the second), from the
    kernel's loop (kernel_loop; zero without one), scaled to this run's k-steps (QK: D / 16, PV: block_n / 16; s4
    issues PV first)."""
    loop = kernel_loop(flags, prm)
    if loop is None or loop["turn"] is None:  # no turn: a kernel without ping-pong
        return (0.0, 0.0, 0.0)
    qk, pv = d // 16, prm["block_n"] // 16
    first, second = (qk, pv) if flags.get("overlap") else (pv, qk)
    c = consumer_loop.segment_cycles(loop["turn"], first, second)
    return tuple(c[k] / p["clock_ghz"] for k in consumer_loop.SEGMENTS)


def turn_handover(p, flags: dict, prm: dict) -> tuple[float, float]:
    """ns a GEMM turn's bar.sync takes past its own issue: (released by the other warpgroup's bar.arrive: the
    hand-over of the kernel's bar.sync form, bar_hop_cycles_<form>, less the one issue cycle of that bar.arrive,
    which the other warpgroup's last turn segment holds; its arrivals already there: bar_sync_present_cycles),
    both measured by kernels/micro_bar_v1.cu (profile values). The form is the kernel's (consumer_loop sync_form,
    from its SASS), or "reg" for a ping-pong schedule without the kernel's SASS: FA4's sm90 forward names the
    barrier from its warpgroup index (flash_fwd_sm90.py warp_scheduler_barrier_sync), cuDNN's is assumed alike.
    (0, 0) without GEMM turns."""
    if not pingpong(flags, prm["consumer_wgs"]):
        return (0.0, 0.0)
    loop = kernel_loop(flags, prm)
    form = loop["turn"]["sync_form"] if loop else "reg"
    ghz = p["clock_ghz"]
    return (max(_measured(p, f"bar_hop_cycles_{form}", BAR) - 1.0, 0.0) / ghz,
            _measured(p, "bar_sync_present_cycles", BAR) / ghz)


def _tiles(seq: int, bm: int, bn: int, masked: bool) -> tuple[int, int]:
    """(Q tiles, K/V tiles) per head. Without masked tails the tiles must divide L; with them (s9) the last tile
    of each is masked and costs a full tile (a full TMA box, a full wgmma)."""
    if masked:
        return math.ceil(seq / bm), math.ceil(seq / bn)
    if seq % bm or seq % bn:
        raise ScheduleError("L must be a multiple of the tiles", f"L = {seq}, block_m {bm}, block_n {bn}",
                            "pad L or pick tiles that divide it")
    return seq // bm, seq // bn


def tile_smem(prm: dict, d: int) -> int:
    """Shared memory (bytes) of the schedule's tiles at head dim `d`: q_slots Q tiles (block_m x D) and `stages`
    K and V tiles (block_n x D each), 2-byte elements; KERNEL_SMEM_EXTRA is not included."""
    return prm["q_slots"] * prm["block_m"] * d * 2 + prm["stages"] * 2 * prm["block_n"] * d * 2


def _check_chains(prm: dict, flags: dict, variant: str) -> None:
    """softmax_chains is 1, 2 or 4 (softmax_body.CHAINS), and more than 1 only where chain_factor's stream is the
    kernel's: the ex2 softmax (s6..s9, FA4, cuDNN; flags exp2) with every exponential on MUFU (emulate_frac 0).
    Elsewhere (exp2f's library call, software exp2) the factor would be extrapolated: ScheduleError."""
    chains = prm["softmax_chains"]
    if chains not in CHAINS:
        raise ScheduleError("softmax_chains is 1, 2 or 4 (a thread's 64 scores give four chains per row at most)",
                            f"{variant}: softmax_chains {chains!r}", "use 1, 2 or 4")
    if chains != 1 and not flags.get("exp2"):
        raise ScheduleError("softmax_chains > 1 is modelled on the ex2 softmax (h200-s6..s9, h200-fa4-sm90, "
                            "h200-cudnn-fprop); this schedule's exp2f softmax has no chain model",
                            f"{variant}: softmax_chains {chains}",
                            "drop softmax_chains, or use h200-s6-exp2..h200-s9-tuned")
    if chains != 1 and prm["emulate_frac"]:
        raise ScheduleError("softmax_chains > 1 is modelled with every exponential on MUFU (ex2), not software exp2",
                            f"{variant}: softmax_chains {chains} with emulate_frac {prm['emulate_frac']}",
                            "use emulate_frac=0 with softmax_chains, or softmax_chains=1")


def resolve(p, params: dict, variant: str, d: int) -> dict:
    """The run's parameters: DEFAULTS, the variant's own, the caller's; derived registers; checked fit.
    Raises ScheduleError for a tile, shared-memory or register split that does not fit, with the numbers."""
    flags = VARIANTS[variant]
    prm = {**DEFAULTS, **{k: v for k, v in flags.items() if k in DEFAULTS}, **params}
    if "consumer_wgs" in params and "block_m" not in params:
        prm["block_m"] = 64 * prm["consumer_wgs"]  # each consumer warpgroup takes 64 rows
    bm, bn, wgs = prm["block_m"], prm["block_n"], prm["consumer_wgs"]
    if bm % (64 * wgs):
        raise ScheduleError("each consumer warpgroup takes 64 rows", f"block_m {bm} for {wgs} warpgroups",
                            f"use block_m = {64 * wgs}")
    if bn % 16 or bn > 256:
        raise ScheduleError("block_n is wgmma's N for QK^T (<= 256) and its K for PV (a multiple of 16)", bn,
                            "use a multiple of 16 up to 256", "PTX ISA wgmma .m64nNk16")
    if prm["persistent_order"] != "grid_stride" and not flags.get("persistent"):
        raise ScheduleError("persistent_order applies to the persistent schedules", f"{variant}: "
                            f"{prm['persistent_order']}", "use h200-s8-persistent or h200-s9-tuned")
    smem = tile_smem(prm, d)
    if "q_slots" not in params and prm["q_slots"] == 2 and smem > p["smem_bytes_per_block"]:
        prm["q_slots"] = 1  # s8's second Q slot is its default only where it fits (3 stages: s9's one slot)
        smem -= bm * d * 2
    if prm["q_slots"] not in (1, 2) or (prm["q_slots"] == 2 and not flags.get("persistent")):
        raise ScheduleError("q_slots is 1, or 2 on a persistent schedule (the next item's Q loads while this one "
                            "runs)", f"{variant}: q_slots {prm['q_slots']!r}", "use 1, or 2 with h200-s8/s9")
    _check_chains(prm, flags, variant)
    persistent_overlap = flags.get("overlap") and flags.get("persistent")
    if prm["cross_item"] not in (0, 1) or (prm["cross_item"] and not persistent_overlap):
        raise ScheduleError("cross_item is 0, or 1 on a persistent overlap turn (s8+: a CTA's items follow one "
                            "another)", f"{variant}: cross_item {prm['cross_item']!r}",
                            "use cross_item=0, or 1 with h200-s8-persistent or h200-s9-tuned")
    if prm["late_v"] not in (0, 1) or (prm["late_v"] and not flags.get("overlap")):
        raise ScheduleError("late_v is 0, or 1 on the overlap turn (s5+: QK_j issued first, V_{j-1} waited for "
                            "before PV_{j-1})", f"{variant}: late_v {prm['late_v']!r}",
                            "use late_v=0, or 1 with h200-s5-intra-overlap .. h200-s9-tuned")
    if prm["side_warps"] not in (1, 2) or (prm["side_warps"] == 1 and not pingpong(flags, wgs)):
        raise ScheduleError("side_warps is 2, or 1 on a ping-pong schedule (its kernel loop's softmax side costed "
                            "with one softmax warp per SMSP)", f"{variant}: side_warps {prm['side_warps']!r}",
                            "use side_warps=2, or 1 with h200-s4-pingpong .. h200-s9-tuned")
    if smem > p["smem_bytes_per_block"]:
        raise ScheduleError("the schedule does not fit shared memory", f"{prm['q_slots']} x Q {bm * d * 2} B + "
                            f"{prm['stages']} stages x K+V {2 * bn * d * 2} B = {smem} B > "
                            f"{p['smem_bytes_per_block']} B", "lower stages, q_slots, block_n or block_m")
    if flags.get("ws"):
        if "regs_per_thread" in params:
            raise ScheduleError(f"{variant} launches with its setmaxnreg split's mean register count",
                                f"regs_per_thread {params['regs_per_thread']}", "set regs_producer/regs_consumer")
        prm.update(register_split(wgs, prm["regs_producer"], prm["regs_consumer"], p["registers_per_sm"]))
        prm["regs_per_thread"] = -(-prm["registers"] // (WARPGROUP_THREADS * (wgs + 1)))
    elif prm["regs_producer"] is not None or prm["regs_consumer"] is not None:
        raise ScheduleError(f"{variant} has no warp specialization, so no setmaxnreg split",
                            f"regs {prm['regs_producer']}/{prm['regs_consumer']}", "drop regs_producer/regs_consumer")
    prm["smem_bytes"] = smem
    prm["occupancy"] = _slots(p, prm, flags, smem)
    return prm


def _slots(p, prm: dict, flags: dict, smem: int):
    """The CTAs resident per SM (lapis.model.occupancy) and the slots simulated: all of them for a
    non-persistent grid, or `ctas_per_sm` when given (1..resident); 1 for a persistent one, by design."""
    threads = WARPGROUP_THREADS * (prm["consumer_wgs"] + (1 if flags.get("ws") else 0))
    occ = resident_ctas(p, threads, prm["regs_per_thread"], smem + KERNEL_SMEM_EXTRA)
    asked, most = prm["ctas_per_sm"], 1 if flags.get("persistent") else occ.ctas_per_sm
    if asked is not None and not 1 <= asked <= most:
        raise ScheduleError("ctas_per_sm is at most the CTAs the SM keeps resident (1 for a persistent schedule)",
                            f"ctas_per_sm {asked}, resident {occ.ctas_per_sm} ({occ.limiter}-limited)",
                            f"use 1..{most}")
    prm["ctas_per_sm"] = most if asked is None else asked
    return occ


def _kv_total(ctas) -> int:
    """K/V tiles of an SM's CTAs (each a tuple of its Q tiles' K/V tile counts): the representative's cost."""
    return sum(map(sum, ctas))


def resolve_run(variant: str, p, dims: tuple, params: dict) -> tuple[dict, dict]:
    """The Schedule's resolve: the run's parameters (resolve) and what its CTAs take of the SM (`fit`)."""
    prm = resolve(p, params, variant, dims[3])
    smem, registers, occ = prm.pop("smem_bytes"), prm.pop("registers", None), prm.pop("occupancy")
    return prm, dict(smem_bytes=smem, registers=registers, regs_per_thread=prm["regs_per_thread"],
                     ctas_per_sm=prm["ctas_per_sm"], resident_ctas=occ.ctas_per_sm, limiter=occ.limiter,
                     occupancy_limits=occ.limits)


def deal(masked: bool, p, dims: tuple, prm: dict) -> list:
    """The work units (CTAs, or a persistent CTA's units) of every SM, each the tuple of its Q tiles' K/V tile
    counts (work_order.kv_units_per_sm). Raises ScheduleError for tiles that do not divide L unless `masked`."""
    b, h, seq, d = dims
    bm, bn = prm["block_m"], prm["block_n"]
    q_tiles, kv_tiles = _tiles(seq, bm, bn, masked)
    return kv_units_per_sm(b * h, q_tiles, kv_tiles, bm, bn, prm["causal"], p["sm_count"], prm["q_tiles_per_cta"],
                           prm["persistent_order"], section_heads(seq, d))


@dataclass(frozen=True)
class AttentionCosts:
    """What one consumer warpgroup's ops take (ns at their alone speed; lapis.pipeline_sim.contention slows the
    softmax side and the tensor pipe while they overlap on the SM), from softmax_costs and the profile.

    gemm_ns: one wgmma over a tile (rows x block_n x D, QK or PV) on the tensor pipe; wgmma_latency_ns: its result
    lands that much after the pipe is done; softmax_ns: a tile's softmax without its O rescale, in the variant's
    flavour (`flavour`: exp2f, ex2, ex2_cond; `emulate_frac` of it in software); rescale_ns: one O rescale times
    `rescale_frequency` (1 but for cond_rescale); mask_ns: causal, the diagonal tile's compare and select;
    softmax_pair, softmax_under_gemm, pipe_under_softmax: the contention rates; turnover_ns: a slot's CTA
    turnover; q_bytes: a CTA's Q tile (block_m rows); o_bytes: one warpgroup's O rows; tile_bytes: a K or V tile;
    l2_latency_ns, hbm_latency_ns: a load's latency after its bytes (L2 hits, compulsory HBM traffic); kv_reuse:
    K/V tile loads per HBM fetch in the run's work order (lapis.pipeline_sim.l2_reuse); turn_ns: a
    GEMM turn's issue (ns alone) before its first wgmma group, of the first group, of the second (turn_costs);
    handover_ns: what the turn's bar.sync takes past its issue, (released by the other warpgroup's bar.arrive,
    its arrivals already there) (turn_handover); lone_tail_ns: the completion tail beyond the pipe of a group
    waited alone (s1..s3; the function lone_tail_ns)."""

    gemm_ns: float
    wgmma_latency_ns: float
    softmax_ns: float
    rescale_ns: float
    mask_ns: float
    softmax_pair: float
    softmax_under_gemm: float
    pipe_under_softmax: float
    turnover_ns: float
    q_bytes: int
    o_bytes: int
    tile_bytes: int
    l2_latency_ns: float
    hbm_latency_ns: float
    q_tiles: int
    kv_tiles: int
    items: int
    kv_reuse: float
    rescale_frequency: float
    causal: bool
    flavour: str
    emulate_frac: float
    turn_ns: tuple = (0.0, 0.0, 0.0)
    handover_ns: tuple = (0.0, 0.0)
    lone_tail_ns: float = 0.0

    @classmethod
    def of(cls, p, dims: tuple, prm: dict, flags: dict, reuse: float | None = None) -> AttentionCosts:
        """The costs of a run; reuse: its K/V loads per HBM fetch where the schedule deals its own grid (FA4's
        CTA order), else the reuse of the work order prm names (l2_reuse.kv_reuse)."""
        b, h, seq, d = dims
        bm, bn, wgs = prm["block_m"], prm["block_n"], prm["consumer_wgs"]
        q_tiles, kv_tiles = _tiles(seq, bm, bn, flags.get("masked_tail", False))
        rows = bm // wgs
        t_rate, f_rate = p.per_ns("tensor_flop_per_clk_sm"), p.per_ns("fma_per_clk_sm")
        cost = softmax_costs(p, flags, prm, rows, bn, d)
        turnover_ns = _measured(p, "cta_turnover_ns")
        freq = rescale_frequency(bn, prm["threshold"]) if flags.get("cond_rescale") else 1.0
        return cls(gemm_ns=2 * rows * bn * d / t_rate, wgmma_latency_ns=cost["wgmma_latency_ns"],
                   softmax_ns=cost["softmax_ns"], rescale_ns=cost["rescale_ns"] * freq,
                   mask_ns=rows * bn * MASK_OPS_PER_SCORE / f_rate,  # s9 causal (attention_h200.cu mask_diagonal)
                   **cost["factors"], turnover_ns=turnover_ns, q_bytes=bm * d * 2, o_bytes=rows * d * 2,
                   tile_bytes=bn * d * 2, l2_latency_ns=p["tma_latency_ns"], hbm_latency_ns=p["tma_latency_hbm_ns"],
                   q_tiles=q_tiles, kv_tiles=kv_tiles, items=b * h * math.ceil(q_tiles / prm["q_tiles_per_cta"]),
                   kv_reuse=reuse if reuse is not None else kv_reuse(
                       b * h, q_tiles, kv_tiles, bm, bn, bool(prm["causal"]), p["sm_count"], prm["q_tiles_per_cta"],
                       prm["persistent_order"], section_heads(seq, d), 2 * bn * d * 2, l2_bytes(p)),
                   rescale_frequency=freq, causal=bool(prm["causal"]),
                   flavour=flavour(flags), emulate_frac=emulated(flags, prm), turn_ns=turn_costs(p, flags, prm, d),
                   handover_ns=turn_handover(p, flags, prm), lone_tail_ns=lone_tail_ns(p))

    @property
    def factors(self) -> dict:
        """The contention rates, as lapis.pipeline_sim.contention.Contention takes them."""
        return dict(softmax_pair=self.softmax_pair, softmax_under_gemm=self.softmax_under_gemm,
                    pipe_under_softmax=self.pipe_under_softmax)

    def latency_ns(self, reuse: float) -> float:
        """After a load's bytes: the mean over its fetches, 1 / reuse of them from HBM (all of them for compulsory
        traffic, reuse 1: Q in, O out) and the rest L2 hits."""
        return self.l2_latency_ns + (self.hbm_latency_ns - self.l2_latency_ns) / max(reuse, 1.0)

    def diagonal(self, j: int, n_kv: int) -> bool:
        """Causal: a Q tile's last K/V tile is its diagonal, the one with masked scores."""
        return self.causal and j == n_kv - 1

    def softmax_tile_ns(self, with_rescale: bool, diagonal: bool) -> float:
        """Softmax of a tile (plus the diagonal's mask; plus the O rescale where it is part of the step)."""
        return self.softmax_ns + (self.mask_ns if diagonal else 0.0) + (self.rescale_ns if with_rescale else 0.0)


class SmCtas:
    """One SM's CTAs in grid order (each the tuple of its Q tiles' K/V tile counts), taken by its slots as they
    free, and the contention of its warpgroups (every slot shares the SM's tensor pipe and issue slots)."""

    def __init__(self, ctx):
        self.ctas = ctx.group.work
        self.first = [0, *itertools.accumulate(len(u) for u in self.ctas)]  # each CTA's first work item
        self.queue = iter(range(len(self.ctas)))  # the slot that asks first gets the next
        self.share = Contention(ctx.env, **ctx.cost.factors, busy=ctx.busy)


class CtaSlot:
    """CTA slot `index` of `count` on an SM: its roles (prefixed cta<s>/ when the SM runs several), its own K and
    V rings and GEMM-turn barriers, and its race log; it runs CTAs one after another, each taken off the SM's
    queue by the first of its roles to reach it (the producer, or the serial warpgroup)."""

    def __init__(self, ctx, sm: SmCtas, index: int, count: int):
        self.ctx, self.sm, self.index = ctx, sm, index
        self.prefix = f"cta{index}/" if count > 1 else ""
        ws = bool(ctx.flags.get("ws"))
        self.consumers = tuple(self.role(f"consumer{i}") for i in range(ctx.prm["consumer_wgs"] if ws else 1))
        self.hb = ctx.race_log()
        self.roles = len(self.consumers) + ws  # the roles that meet at the CTA's exit
        self.taken, self.retired = [], {}  # the slot's CTAs in order; CTA ordinal -> [roles done, next may start]
        self.rings, self.turns, self.q_empty = {}, [], []

    def role(self, name: str) -> str:
        return self.prefix + name

    def build_rings(self) -> None:
        """Separate K and V rings, as FlashAttention-3 keeps them (QK needs only K, and K frees before V), whose
        copies the slot's TMA engine delivers; s4+ (two WGs or more): WG i's GEMM turn is named barrier
        PINGPONG_BAR0 + i over 256 threads, WG i's bar.sync and the previous WG's bar.arrive."""
        ctx, cost = self.ctx, self.ctx.cost
        tma = TmaEngine(ctx, role=self.role("tma"), style="transfer", reuse=cost.kv_reuse,
                        latency_ns=cost.latency_ns(cost.kv_reuse))
        self.rings = {x: ctx.pipeline(self.role(x), ctx.prm["stages"], self.role("producer"), self.consumers,
                                      cost.tile_bytes, tma=tma, buffer=x, hb=self.hb) for x in ("K", "V")}
        if ctx.flags.get("persistent"):  # q_empty[s]: every consumer warpgroup, after the item's last QK
            self.q_empty = [ctx.barrier(f"{self.role('Q')}.empty[{i}]", len(self.consumers), self.consumers,
                                        hb=self.hb) for i in range(ctx.prm["q_slots"])]
        if pingpong(ctx.flags, len(self.consumers)):
            c = self.consumers
            self.turns = [ctx.named_barrier(f"gemm turn of {r}", PINGPONG_BAR0 + i, 2 * WARPGROUP_THREADS,
                                            {r: WARPGROUP_THREADS, c[i - 1]: WARPGROUP_THREADS})
                          for i, r in enumerate(c)]

    def cta_items(self):
        """(work item, K/V tiles, the CTA's ordinal in the slot, the Q tile's index in the CTA) of this slot's Q
        tiles, taking the next CTA off the SM's queue on demand."""
        k = 0
        while True:
            if k == len(self.taken):
                self.taken.append(next(self.sm.queue, None))
            cta = self.taken[k]
            if cta is None:
                return
            yield from ((self.sm.first[cta] + q, n, k, q) for q, n in enumerate(self.sm.ctas[cta]))
            k += 1

    def acquire_q(self, st: PipelineState, item: int):
        """The producer's wait for Q slot st to be free (a persistent CTA's q_empty; attention_h200.cu s8+):
        with one Q slot the next item's Q, and the K/V loads behind it, wait for this item's last QK."""
        if self.q_empty:
            bar = self.q_empty[st.index]
            yield from self.ctx.waited(self.role("producer"), "wait Q slot", bar.wait(st.phase, self.role("producer")),
                                       flow=lambda: bar.last_completer, work_item=item)
            st.advance()

    def release_q(self, wg: Warpgroup) -> None:
        """Consumer wg's arrival on its Q slot's q_empty once the item's last QK is done."""
        if self.q_empty:
            self.q_empty[wg.q.index].arrive(wg.role, event=self.ctx.rec.last_id(wg.role))
            wg.q.advance()

    def enter(self, k: int, q: int):
        """A role reaching Q tile q of the slot's CTA k: a slot runs one CTA at a time, as the SM does, so the
        role starts CTA k (at its first Q tile) once every role of CTA k - 1 is done (attention_h200.cu:542, the
        kernel's last __syncthreads before the CTA exits) and the SM has retired it and started the next
        (cta_turnover_ns). A persistent CTA's work units are not CTAs: its producer runs ahead into the next one
        (s8's second Q slot)."""
        if q or k == 0 or self.ctx.flags.get("persistent"):
            return
        done = self.retired.setdefault(k - 1, [0, self.ctx.env.event()])
        done[0] += 1
        if done[0] == self.roles:
            self.ctx.env.timeout(self.ctx.cost.turnover_ns).callbacks.append(lambda _ev, e=done[1]: e.succeed())
        yield done[1]


def pingpong(flags: dict, wgs: int) -> bool:
    """GEMM turns (s4+) need two consumer warpgroups or more."""
    return bool(flags.get("pingpong")) and wgs >= 2


def consumer_role(flags: dict, wgs: int):
    """The consumer warpgroup's role for a variant's flags with `wgs` consumer warpgroups."""
    if not flags.get("ws"):
        return consumer_serial
    if flags.get("overlap"):
        return consumer_overlap
    return consumer_pingpong if pingpong(flags, wgs) else consumer_ring


def launch(ctx) -> None:
    """One SM: as many CTA slots as it keeps resident (ctas_per_sm, at most its CTAs), each with its producer and
    consumer warpgroups (or s1's one warpgroup), started slot by slot."""
    sm = SmCtas(ctx)
    count = min(ctx.prm["ctas_per_sm"], len(sm.ctas))
    consumer = consumer_role(ctx.flags, ctx.prm["consumer_wgs"])
    for s in range(count):
        slot = CtaSlot(ctx, sm, s, count)
        if ctx.flags.get("ws"):
            slot.build_rings()
            ctx.spawn(slot.role("producer"), producer(ctx, slot))
        for i, role in enumerate(slot.consumers):
            ctx.spawn(role, consumer(ctx, slot, i))


# Steps the roles share: loads they wait for, a wgmma, the softmax side, and the waits.

@dataclass
class Warpgroup:
    """A consumer warpgroup as its steps see it: index i, role name, its wgmma commit groups, and its K and V
    pipeline states (advanced as it takes tiles)."""

    i: int
    role: str
    groups: WgmmaGroups
    k: PipelineState
    v: PipelineState
    q: PipelineState

    @classmethod
    def of(cls, ctx, slot: CtaSlot, i: int) -> Warpgroup:
        role, stages = slot.consumers[i], ctx.prm["stages"]
        return cls(i, role, WgmmaGroups(ctx.env, role), PipelineState(stages), PipelineState(stages),
                   PipelineState(ctx.prm["q_slots"]))

    def take(self) -> tuple[PipelineState, PipelineState]:
        """The states of the next K and V tiles' slots (copies kept while the tiles are in use)."""
        ks, vs = self.k.copy(), self.v.copy()
        self.k.advance()
        self.v.advance()
        return ks, vs


def load(ctx, nbytes: int, role: str, op: str, reuse: float, **kw):
    """A load (or store) `role` waits for: the SM's load path for nbytes at its bandwidth share, then the latency.
    K/V serve the Q tiles of a head the order keeps beside each other in L2 (reuse kv_reuse, l2_reuse); Q read and
    O written once are compulsory HBM traffic (reuse 1), so they see the HBM latency (tma_latency_hbm_ns) where K/V
    tiles see the mean of L2's and HBM's (latency_ns)."""
    yield from ctx.occupy("tma", lambda: nbytes / ctx.grid.share(reuse), role, op, **kw)
    yield ctx.env.timeout(ctx.cost.latency_ns(reuse))


def store_o(ctx, role: str, nbytes: int, item: int):
    """The epilogue (attention_h200.cu store_o): the warpgroup's O rows out, compulsory HBM traffic."""
    yield from load(ctx, nbytes, role, "store O", 1, work_item=item)


def store_piece(ctx, role: str, pieces: int, item: int):
    """A split unit's piece end (s26, attention_h200.cu store_piece), priced as the piece that merges: the
    warpgroup's slot out (O in fp32 and each thread's m and l: 2 o_bytes + 16 B x 128 threads), then the other
    pieces' slots in, one after another (the merge loop waits for each slot's loads), all L2 hits (each slot was
    written a moment before); store_o follows."""
    nbytes = 2 * ctx.cost.o_bytes + 16 * WARPGROUP_THREADS
    for op in ["store partial"] + ["merge partial"] * (pieces - 1):
        yield from load(ctx, nbytes, role, op, math.inf, work_item=item)


def on_pipe(ctx, share: Contention, role: str, op: str, lone: bool = False, **kw):
    """One wgmma over a tile: queued on the tensor pipe (FIFO), served at the contended rate; its result is visible
    the latency after the service ends (the pipe is free by then): a lone group's tail (lone_tail_ns), or the GEMM
    pair's wgmma_latency_ns for groups issued back to back."""
    with ctx.units["tensor"].request() as req:
        yield from ctx.waited(role, "wait tensor", req, **kw)
        t1 = ctx.now
        yield from share.run("pipe", ctx.cost.gemm_ns)
    ctx.busy["tensor"] += ctx.now - t1
    ctx.record(role, op, t1, **kw)
    yield ctx.env.timeout(ctx.cost.lone_tail_ns if lone else ctx.cost.wgmma_latency_ns)
    share.gemm_done()


def wgmma(ctx, slot: CtaSlot, wg: Warpgroup, op: str, item: int, j: int, ring=None, st=None, lone: bool = False):
    """wgmma.mma_async over a tile, then wgmma.commit_group: the tensor pipe runs it while the warpgroup goes on.
    ring, st: the K or V slot it reads (logged for the race check at issue, in program order). lone: the group is
    waited right after its commit with none other of the warpgroup in flight (s1..s3), so its result lands
    lone_tail_ns after the pipe, not the pair's wgmma_latency_ns."""
    if ring is not None:
        ring.read(st, wg.role, (item, j))
    slot.sm.share.gemm_issued()
    wg.groups.issue(ctx.child(on_pipe(ctx, slot.sm.share, wg.role, op, lone, work_item=item, k_index=j)))
    wg.groups.commit()


def wait_group(ctx, wg: Warpgroup, n: int, item: int, j: int):
    """wgmma.wait_group n: the newest n groups may stay in flight."""
    yield from ctx.waited(wg.role, f"wait wgmma (wait_group {n})", wg.groups.wait(n), work_item=item, k_index=j)


def wait_tile(ctx, ring, st: PipelineState, wg: Warpgroup, item: int, j: int):
    """consumer_wait: the K or V tile of slot st landed (its full mbarrier)."""
    full = ring.full[st.index]
    yield from ctx.waited(wg.role, f"wait {ring.buffer}", ring.consumer_wait(st, wg.role),
                          flow=lambda: full.last_completer, work_item=item, k_index=j)


def softmax_side(ctx, slot: CtaSlot, role: str, op: str, ns: float, **kw):
    """Softmax-side work of a warpgroup (alone-speed ns), at the SM's contended rate."""
    t0 = ctx.now
    yield from slot.sm.share.run("softmax", ns)
    if ctx.now > t0:
        ctx.record(role, op, t0, **kw)


def softmax(ctx, slot: CtaSlot, wg: Warpgroup, item: int, j: int, n_kv: int, with_rescale: bool):
    """The softmax of S_j in registers (attention_h200.cu softmax_tile / softmax_scores), the diagonal tile's
    mask first where causal; with_rescale: the O rescale is part of it (s1..s4), not a step of its own."""
    ns = ctx.cost.softmax_tile_ns(with_rescale, ctx.cost.diagonal(j, n_kv))
    yield from softmax_side(ctx, slot, wg.role, "softmax", ns, work_item=item, k_index=j)


def pv(ctx, slot: CtaSlot, wg: Warpgroup, item: int, j: int, vst: PipelineState, lone: bool = False):
    """consumer_wait V_j, then issue O += P_j V_j (attention_h200.cu: the turn's `pv`, or the s1..s3 loop's, a
    lone group: `wgmma`)."""
    yield from wait_tile(ctx, slot.rings["V"], vst, wg, item, j)
    wgmma(ctx, slot, wg, "wgmma PV", item, j, slot.rings["V"], vst, lone)


# GEMM turns (s4+): named barriers, FlashAttention-3's warp-scheduler barriers. A lone consumer WG has no turns.

def first_turn(ctx, slot: CtaSlot, wg: Warpgroup) -> None:
    """The last WG pre-arrives WG 0's barrier, so the first turn is WG 0's (attention_h200.cu:372)."""
    if slot.turns and wg.i == len(slot.turns) - 1:
        slot.turns[0].arrive(wg.role, WARPGROUP_THREADS, event=ctx.rec.last_id(wg.role))


def turn_sync(ctx, slot: CtaSlot, wg: Warpgroup, item: int, j: int):
    """bar.sync PINGPONG_BAR0 + i: WG i's GEMM turn (attention_h200.cu:387, `my turn`), then the bar.sync's own
    time (AttentionCosts.handover_ns): the hand-over when the other warpgroup's bar.arrive released it, the
    present-arrivals cost when that arrive came first."""
    if not slot.turns:
        return
    turn = slot.turns[wg.i]
    done = turn.sync(wg.role, WARPGROUP_THREADS, event=ctx.rec.last_id(wg.role))
    present = done.triggered  # the other warpgroup's bar.arrive came first
    yield from ctx.waited(wg.role, f"wait GEMM turn (bar.sync {turn.bar_id})", done,
                          flow=lambda: turn.last_completer, work_item=item, k_index=j)
    ns = ctx.cost.handover_ns[1 if present else 0]
    if ns > 0:
        t0 = ctx.now
        yield ctx.env.timeout(ns)
        ctx.record(wg.role, "turn hand-over", t0, work_item=item, k_index=j)


def pass_turn(ctx, slot: CtaSlot, wg: Warpgroup) -> None:
    """bar.arrive on the next WG's barrier once this turn's GEMMs are issued (attention_h200.cu:426)."""
    if slot.turns:
        slot.turns[(wg.i + 1) % len(slot.turns)].arrive(wg.role, WARPGROUP_THREADS, event=ctx.rec.last_id(wg.role))


def issue(ctx, wg: Warpgroup, segment: int, item: int, j: int):
    """Issue segment `segment` of the GEMM turn (0: before the first wgmma group, 1: the first group, 2: the
    second; AttentionCosts.turn_ns) at its alone speed. The turn's warp issues about one instruction in three
    cycles (lapis.model.consumer_loop: its stall counts) and a softmax warp about one in two, so together they stay
    under an SMSP's one issue per cycle: neither is slowed by the other here (an assumption, not a measurement)."""
    ns = ctx.cost.turn_ns[segment]
    if ns > 0:
        t0 = ctx.now
        yield ctx.env.timeout(ns)
        ctx.record(wg.role, "GEMM issue", t0, work_item=item, k_index=j)


# The roles.

def load_order(n_kv: int, v_lags: bool) -> list:
    """The producer's TMA order: K_j, V_j; or, where PV_j joins the next GEMM turn (s4+), K_{j+1} before V_j, the
    order the consumers free the slots in (attention_h200.cu load_item; FA3's producer lags V by one tile too)."""
    if not v_lags:
        return [(x, j) for j in range(n_kv) for x in ("K", "V")]
    order = [("K", 0)] if n_kv else []
    for j in range(n_kv):
        order += ([("K", j + 1)] if j + 1 < n_kv else []) + [("V", j)]
    return order


def producer(ctx, slot: CtaSlot):
    """The producer warp (attention_h200.cu:279-327): per work item, TMA Q (load_q, waited for here as the slot's
    one Q buffer), then per tile producer_acquire and producer_commit of K_j and V_j into their rings (load_kv;
    load_one in load_item's order for s4+); at the end producer_tail, the consumers' last releases."""
    role, stages = slot.role("producer"), ctx.prm["stages"]
    st = {x: PipelineState.producer_start(stages) for x in slot.rings}
    v_lags = pingpong(ctx.flags, len(slot.consumers)) or bool(ctx.flags.get("overlap"))
    q_st = PipelineState.producer_start(ctx.prm["q_slots"])
    for item, n_kv, k, q in slot.cta_items():
        yield from slot.enter(k, q)
        yield from slot.acquire_q(q_st, item)
        yield from load(ctx, ctx.cost.q_bytes, role, "TMA Q", 1, work_item=item)
        for x, j in load_order(n_kv, v_lags):
            ring, empty = slot.rings[x], slot.rings[x].empty[st[x].index]
            yield from ctx.waited(role, f"wait {x} slot", ring.producer_acquire(st[x]),
                                  flow=lambda e=empty: e.last_completer, work_item=item, k_index=j)
            ring.producer_commit(st[x], token=(item, j), op=f"TMA {x}", writer=slot.role(f"tma {x} {item}.{j}"),
                                 work_item=item, k_index=j)
            st[x].advance()
    for x, ring in slot.rings.items():
        yield ring.producer_tail(st[x])


def consumer_serial(ctx, slot: CtaSlot, i: int = 0):
    """s1's one warpgroup (attention_h200.cu:342 and 499-537 with WS false): it loads Q, then per K/V tile issues
    K_j and V_j itself (load_kv by thread 0: two copies on the SM's load path, each with its own mbarrier), waits
    for K_j, issues QK_j and waits, runs the softmax with the O rescale, waits for V_j (loaded meanwhile), issues
    PV_j and waits; then stores O."""
    wg, cost = Warpgroup.of(ctx, slot, 0), ctx.cost
    for item, n_kv, k, q in slot.cta_items():
        yield from slot.enter(k, q)
        yield from load(ctx, cost.q_bytes, wg.role, "TMA Q (waited)", 1, work_item=item)
        for j in range(n_kv):
            kw = dict(work_item=item, k_index=j)
            v_copy = ctx.child(load(ctx, cost.tile_bytes, slot.role("tma"), "TMA V", cost.kv_reuse, **kw))
            yield from load(ctx, cost.tile_bytes, wg.role, "TMA K (waited)", cost.kv_reuse, **kw)
            wgmma(ctx, slot, wg, "wgmma QK", item, j, lone=True)
            yield from wait_group(ctx, wg, 0, item, j)
            yield from softmax(ctx, slot, wg, item, j, n_kv, with_rescale=True)
            yield from ctx.waited(wg.role, "wait V", v_copy, **kw)
            wgmma(ctx, slot, wg, "wgmma PV", item, j, lone=True)
            yield from wait_group(ctx, wg, 0, item, j)
        yield from store_o(ctx, wg.role, cost.q_bytes, item)


def consumer_ring(ctx, slot: CtaSlot, i: int):
    """Consumer WG i of s2, s3 (attention_h200.cu:499-537): per K/V tile, consumer_wait K_j, issue QK_j and wait,
    release K_j, softmax with the O rescale, consumer_wait V_j, issue PV_j and wait, release V_j; then store O."""
    wg, k_ring, v_ring = Warpgroup.of(ctx, slot, i), slot.rings["K"], slot.rings["V"]
    for item, n_kv, k, q in slot.cta_items():
        yield from slot.enter(k, q)
        for j in range(n_kv):
            ks, vs = wg.take()
            yield from wait_tile(ctx, k_ring, ks, wg, item, j)
            wgmma(ctx, slot, wg, "wgmma QK", item, j, k_ring, ks, lone=True)
            yield from wait_group(ctx, wg, 0, item, j)
            k_ring.consumer_release(ks, wg.role)
            yield from softmax(ctx, slot, wg, item, j, n_kv, with_rescale=True)
            yield from pv(ctx, slot, wg, item, j, vs, lone=True)
            yield from wait_group(ctx, wg, 0, item, j)
            v_ring.consumer_release(vs, wg.role)
        yield from store_o(ctx, wg.role, ctx.cost.o_bytes, item)


def consumer_pingpong(ctx, slot: CtaSlot, i: int):
    """Consumer WG i of s4 (attention_h200.cu:366-497 without OVERLAP): GEMM turns (gemm_turns), each turn_pingpong."""
    yield from gemm_turns(ctx, slot, Warpgroup.of(ctx, slot, i), turn_pingpong)


def consumer_overlap(ctx, slot: CtaSlot, i: int):
    """Consumer WG i of s5+ (attention_h200.cu:366-497 with OVERLAP): GEMM turns (gemm_turns), each turn_overlap;
    with one consumer WG there are no turns to take, the rest is the same."""
    yield from gemm_turns(ctx, slot, Warpgroup.of(ctx, slot, i), turn_overlap)


def gemm_turns(ctx, slot: CtaSlot, wg: Warpgroup, turn):
    """The s4+ consumer loop (attention_h200.cu:366-497): per work item, per K/V tile j, consumer_wait K_j and
    bar.sync the WG's turn, then `turn` (the variant's: turn_pingpong, turn_overlap), which issues PV_{j-1} with
    QK_j; the item's last PV takes a turn of its own (attention_h200.cu:494: wait V_{n-1}, issue PV_{n-1}, hand the
    turn on, wait, free the V slot); then store O.
    cross_item 1 (s23, turn_overlap only): where another item of the slot follows, the item's last PV is held into
    the next item's first turn, which stores this item's O after that PV's wait (attention_h200.cu CROSS); only the
    slot's last item keeps the last PV's own turn."""
    first_turn(ctx, slot, wg)
    cross = bool(ctx.prm.get("cross_item"))
    items = slot.cta_items()
    cur = next(items, None)
    held, done = None, None  # held: (j, V slot, item) of the PV still to issue; done: the item whose O that turn stores
    while cur is not None:
        item, n_kv, k, q = cur
        nxt = next(items, None) if cross else None  # peeked: a persistent slot's items are all its own
        yield from slot.enter(k, q)
        for j in range(n_kv):
            ks, vs = wg.take()
            yield from wait_tile(ctx, slot.rings["K"], ks, wg, item, j)
            yield from turn_sync(ctx, slot, wg, item, j)
            stores = {"stores": done} if cross else {}  # turn_overlap's only (cross_item needs the overlap turn)
            yield from turn(ctx, slot, wg, item, j, n_kv, ks, held, **stores)
            held, done = (j, vs, item), None
        if cross and nxt is not None:
            done = item
        else:
            if held is not None:
                yield from last_pv_turn(ctx, slot, wg, item, held)
            held = None
            if isinstance(n_kv, PieceTiles):
                yield from store_piece(ctx, wg.role, n_kv.pieces, item)
            yield from store_o(ctx, wg.role, ctx.cost.o_bytes, item)
        cur = nxt if cross else next(items, None)


def last_pv_turn(ctx, slot: CtaSlot, wg: Warpgroup, item: int, held):
    """The item's last PV in a turn of its own (attention_h200.cu:494): wait V_{n-1}, issue PV_{n-1}, hand the turn
    on, wait, free the V slot."""
    yield from turn_sync(ctx, slot, wg, item, held[0])
    yield from wait_tile(ctx, slot.rings["V"], held[1], wg, item, held[0])
    yield from issue(ctx, wg, 0, item, held[0])
    wgmma(ctx, slot, wg, "wgmma PV", item, held[0], slot.rings["V"], held[1])
    yield from issue(ctx, wg, 2 if ctx.flags.get("overlap") else 1, item, held[0])
    pass_turn(ctx, slot, wg)
    yield from wait_group(ctx, wg, 0, item, held[0])
    slot.rings["V"].consumer_release(held[1], wg.role)


def turn_pingpong(ctx, slot: CtaSlot, wg: Warpgroup, item: int, j: int, n_kv: int, ks: PipelineState, held):
    """s4's turn (attention_h200.cu:422-426 and 450-463): issue PV_{j-1} (after V_{j-1}'s wait) then QK_j,
    bar.arrive the next WG's turn, wait both, release K_j and V_{j-1}, and run the softmax with the O rescale while
    the other WG's GEMMs run."""
    if held:
        yield from wait_tile(ctx, slot.rings["V"], held[1], wg, item, held[0])
    yield from issue(ctx, wg, 0, item, j)
    if held:
        wgmma(ctx, slot, wg, "wgmma PV", item, held[0], slot.rings["V"], held[1])
        yield from issue(ctx, wg, 1, item, j)
    wgmma(ctx, slot, wg, "wgmma QK", item, j, slot.rings["K"], ks)
    yield from issue(ctx, wg, 2, item, j)
    pass_turn(ctx, slot, wg)
    yield from wait_group(ctx, wg, 0, item, j)
    slot.rings["K"].consumer_release(ks, wg.role)
    if j == n_kv - 1:
        slot.release_q(wg)
    if held:
        slot.rings["V"].consumer_release(held[1], wg.role)
    yield from softmax(ctx, slot, wg, item, j, n_kv, with_rescale=True)


def turn_overlap(ctx, slot: CtaSlot, wg: Warpgroup, item: int, j: int, n_kv: int, ks: PipelineState, held,
                 stores: int | None = None):
    """s5's turn (attention_h200.cu:412-426 and 429-448): consumer_wait V_{j-1}, issue QK_j and PV_{j-1} back to
    back (late_v = 1, s15: issue QK_j, then consumer_wait V_{j-1}, then PV_{j-1}), bar.arrive the next turn, wait_group 1 (S_j ready, PV_{j-1} may run on), release K_j, softmax_j beside
    PV_{j-1}, wait_group 0 and release V_{j-1}, then the O rescale as a step of its own (rescale_o; at
    rescale_frequency for s7+). stores (s23, cross_item): the previous item, whose PV_{n-1} is `held`: its O is
    stored after that PV's wait, in place of the O rescale."""
    k_ring, v_ring = slot.rings["K"], slot.rings["V"]
    late = ctx.prm.get("late_v", 0)
    pv_item = held[2] if held else item  # s23's boundary turn: the previous item's PV
    if held and not late:  # V_{j-1} waited before QK_j: the two issue back to back
        yield from wait_tile(ctx, v_ring, held[1], wg, pv_item, held[0])
    yield from issue(ctx, wg, 0, item, j)
    wgmma(ctx, slot, wg, "wgmma QK", item, j, k_ring, ks)
    yield from issue(ctx, wg, 1, item, j)
    if held and late:  # s15: V_{j-1} waited for after QK_j's issue (its wait ends the turn's first segment)
        yield from wait_tile(ctx, v_ring, held[1], wg, pv_item, held[0])
    if held:
        wgmma(ctx, slot, wg, "wgmma PV", pv_item, held[0], v_ring, held[1])
        yield from issue(ctx, wg, 2, item, j)
    pass_turn(ctx, slot, wg)
    yield from wait_group(ctx, wg, 1 if held else 0, item, j)  # S_j ready; PV_{j-1} may run on
    k_ring.consumer_release(ks, wg.role)
    if j == n_kv - 1:  # the item's last QK: its Q slot is free (attention_h200.cu q_empty)
        slot.release_q(wg)
    yield from softmax(ctx, slot, wg, item, j, n_kv, with_rescale=False)
    if held:
        yield from wait_group(ctx, wg, 0, item, j)
        v_ring.consumer_release(held[1], wg.role)
    if stores is not None:
        yield from store_o(ctx, wg.role, ctx.cost.o_bytes, stores)
    else:
        yield from softmax_side(ctx, slot, wg.role, "O rescale", ctx.cost.rescale_ns, work_item=item, k_index=j)


def hbm_bytes(per_sm: list, dims: tuple, cost: AttentionCosts) -> float:
    """The run's HBM traffic in bytes: Q read and O written once (2-byte elements), and the K and V tile loads of
    every SM's work list (per_sm, as deal gives it) over the order's K/V reuse (cost.kv_reuse: loads per fetch)."""
    b, h, seq, d = dims
    loads = sum(_kv_total(w) for w in per_sm) * 2 * cost.tile_bytes
    return 2 * b * h * seq * d * 2 + loads / cost.kv_reuse


def summary(per_sm: list, rep, dims: tuple, prm: dict, cost: AttentionCosts) -> dict:
    """The work of the run: work items (CTAs, or a persistent grid's units), SMs with work, Q tiles and K/V tiles
    on the representative SM, K/V tiles per head, the O rescale frequency (1 but for cond_rescale), the K/V loads
    per HBM fetch (kv_reuse) and the HBM traffic in 10^6 bytes (hbm_mb, hbm_bytes)."""
    return dict(work_items=cost.items, active_sms=len(per_sm), items_per_sm=sum(map(len, rep.work)),
                kv_tiles=cost.kv_tiles, kv_tiles_on_this_sm=_kv_total(rep.work),
                rescale_frequency=cost.rescale_frequency, kv_reuse=cost.kv_reuse,
                hbm_mb=hbm_bytes(per_sm, dims, cost) / 1e6)


def flops(dims: tuple, prm: dict) -> float:
    """The FA benchmarks' convention: 4 B H L^2 D, halved when causal."""
    b, h, seq, d = dims
    return 4.0 * b * h * seq * seq * d / (2 if prm["causal"] else 1)


DESCRIPTIONS = {  # `lapis simulate --list`
    "h200-s1-serial": "one WG; TMA Q/K/V; wgmma QK^T; softmax in registers; wgmma PV; wait after every stage",
    "h200-s2-ws-ring": "a producer warp issues TMA; K/V ring with full/empty mbarriers",
    "h200-s3-two-consumers": "a producer + 2 consumer WGs, 64 rows each of one 128-row Q tile, sharing K/V",
    "h200-s4-pingpong": "named-barrier ping-pong: one WG's softmax overlaps the other's GEMMs",
    "h200-s5-intra-overlap": "inside a WG, QK^T of tile i+1 is issued before the softmax of tile i",
    "h200-s6-exp2": "scale folded into log2, ex2.approx.ftz; emulate_frac of exp2 on the FMA pipe",
    "h200-s7-cond-rescale": "O rescaled only when the row max moves more than threshold (log2 units)",
    "h200-s8-persistent": "persistent grid, one CTA per SM, static grid stride (launch overhead not modelled)",
    "h200-s9-tuned": "s8 with tuned defaults (block_n, stages, consumer WGs from a simulator sweep); masked tails",
}


def schedule(name: str) -> Schedule:
    """Variant `name` of the table as a Schedule: its flags decide the roles (consumer_role) and the costs."""
    flags = dict(VARIANTS[name], gemm_turn=name)  # its loop's SASS: lapis.model.consumer_loop.LOOPS[name]
    return Schedule(name=name, description=DESCRIPTIONS[name], shape="attention", defaults=DEFAULTS, flags=flags,
                    resolve=partial(resolve_run, name), work=partial(deal, flags.get("masked_tail", False)),
                    costs=AttentionCosts.of, launch=launch, flops=flops, summary=summary,
                    busy=("tensor", "softmax", "tma"), work_cost=_kv_total, races="slot", tuple_units=True)


SCHEDULES = tuple(schedule(name) for name in VARIANTS)
