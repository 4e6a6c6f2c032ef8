"""Hopper attention forward (bf16, fp32 accumulation), the schedules h200-s1-serial .. h200-s9-tuned, as simpy
processes; each mirrors entry points of lapis/gpu/kernels/attention_h200.cu (lapis/catalog/attention.py maps them).

One event per tile-level operation (a TMA box, one wgmma over a tile, a softmax tile, an O rescale); times in ns.
Per work item (one Q tile of block_m rows of one (batch, head)) and K/V tile j: S_j = Q K_j^T (tensor pipe),
P_j = the softmax tile (the warpgroup's own instructions), O += P_j V_j (tensor pipe), and an O rescale.

Roles: s1 is one warpgroup (`consumer0`) that loads Q, K_j and V_j itself and waits for every step. With `ws` a
`producer` fills separate K and V rings of `stages` slots (TmaPipeline, full/empty mbarriers; K frees before V, as
FlashAttention-3 keeps them) and `consumer_wgs` warpgroups (`consumer<i>`, 64 rows each) compute; the TMA boxes
run on the `tma` unit. With several resident CTAs per SM each slot's roles are prefixed `cta<s>/`. wgmma
completes through commit groups (commit_groups.WgmmaGroups), GEMM turns through named_barrier.NamedBarrier.

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
     lpt, heavy_first), with no CTA turnover between them; its producer runs ahead into the next unit (the
     kernel's second Q slot). With one CTA per SM (a grid within one wave) s8 = s7.
  masked_tail (s9): L need not be a multiple of the tiles; a ragged last Q or K/V tile costs a full tile (a full
     TMA box and wgmma). s1..s8 raise ScheduleError for tiles that do not divide L.
s9's defaults (S9_BLOCK_N, S9_STAGES, S9_WGS: block_n 128, 3 stages, 2 WGs) are the built and measured kernel
attn_s9_tuned_s3_n128_c2, rank 1 of the sweep in lapis/data/captures/sweep/h200-2026-11-30-s8; `lapis sweep`
ranks the configurations on the current profile and model.

Costs (softmax_costs; profile values in cycles become ns through clock_ghz):
- softmax tile: softmax_cycles_<flavour> (a 64 x 128 tile alone, without its O rescale), scaled to rows x block_n;
  it progresses slower while the other warpgroup runs softmax (softmax_cycles_<flavour>_pair) or any wgmma group
  is in flight on the SM (softmax_cycles_<flavour>_under_gemm): lapis.pipeline_sim.contention.
- wgmma: 2 x rows x block_n x D FLOP at tensor_flop_per_clk_sm on the SM's one tensor pipe (FIFO), slower while a
  softmax runs (gemm_pair_cycles_under_softmax_<flavour>); its result lands the pipe's latency later
  (gemm_pair_cycles less the pair's pipe time at peak, PAIR_FLOP / tensor_flop_per_clk_sm).
- O rescale: rows x D multiplies at fma_per_clk_sm; causal: the diagonal tile adds MASK_OPS_PER_SCORE per score.
- loads: bytes at the SM's share of the L2 bandwidth (lapis.pipeline_sim.grid), then tma_latency_ns (K/V tiles)
  or tma_latency_hbm_ns (Q in, O out: compulsory HBM traffic).
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
(work_order.py), persistent_order (s8, s9). Registers set the residency and are reported (`fit`); spills, and
the per-tile overheads a larger block_n amortizes on hardware, are not modelled. FMA_OPS_PER_SCORE (4; 3 with
the scale folded into log2 units) is the FMA-pipe count per score the FA2, sm120 and B200 schedules cost their
softmax by; these schedules cost it from the contend measurements.
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
import simpy

from lapis.errors import ScheduleError
from lapis.model.numerics import flash_forward
from lapis.model.occupancy import resident_ctas
from lapis.pipeline_sim.causal import MASK_OPS_PER_SCORE
from lapis.pipeline_sim.commit_groups import WgmmaGroups
from lapis.pipeline_sim.contention import Contention
from lapis.pipeline_sim.grid import grid_summary, run_sms
from lapis.pipeline_sim.named_barrier import NamedBarrier
from lapis.pipeline_sim.pipeline import PipelineState, TmaPipeline
from lapis.pipeline_sim.races import HappensBefore
from lapis.pipeline_sim.setmaxnreg import WARPGROUP_THREADS, register_split
from lapis.pipeline_sim.units import occupy
from lapis.pipeline_sim.work_order import (  # noqa: F401 (re-exported)
    kv_per_sm,
    kv_tiles_per_item,
    kv_units_per_sm,
    representative_sm,
)

S9_BLOCK_N, S9_STAGES, S9_WGS = 128, 3, 2  # the measured s9 kernel's (module docstring)
S1_PTXAS_REGS = 154  # ptxas's count for attn_s1_serial (capture attention/h200-2026-11-29, builds.plain.ptxas)
# Shared memory the kernel holds beyond the schedule's tiles: 1 KiB of alignment slack in the dynamic allocation
# (attention_h200.cu Config::SMEM_BYTES) and 1 KiB of static shared memory (ptxas smem_bytes, same capture).
KERNEL_SMEM_EXTRA = 1024 + 1024
DEFAULTS = dict(block_m=128, block_n=128, stages=2, consumer_wgs=2, emulate_frac=0, threshold=8, causal=0,
                regs_producer=None, regs_consumer=None, regs_per_thread=None, ctas_per_sm=None, q_tiles_per_cta=1,
                persistent_order="grid_stride")
_S8 = dict(ws=True, pingpong=True, overlap=True, exp2=True, cond_rescale=True, persistent=True)
VARIANTS = {
    "h200-s1-serial": dict(block_m=64, consumer_wgs=1, stages=1, ws=False, regs_per_thread=S1_PTXAS_REGS),
    "h200-s2-ws-ring": dict(block_m=64, consumer_wgs=1, ws=True),
    "h200-s3-two-consumers": dict(ws=True),
    "h200-s4-pingpong": dict(ws=True, pingpong=True),
    "h200-s5-intra-overlap": dict(ws=True, pingpong=True, overlap=True),
    "h200-s6-exp2": dict(ws=True, pingpong=True, overlap=True, exp2=True),
    "h200-s7-cond-rescale": dict(ws=True, pingpong=True, overlap=True, exp2=True, cond_rescale=True),
    "h200-s8-persistent": _S8,
    # s9: s8 at the S9_* defaults (see the module docstring); K/V and Q tails are masked
    "h200-s9-tuned": dict(_S8, masked_tail=True, block_n=S9_BLOCK_N, stages=S9_STAGES, consumer_wgs=S9_WGS,
                          block_m=64 * S9_WGS),
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


EMULATED = ((0.0, "ex2"), (0.125, "emu8"), (0.25, "emu4"))  # emulate_frac of the measured software-exp2 flavours
PAIR_FLOP = 2 * (2 * 64 * 128 * 128)  # the contend microbenchmark's GEMM pair: QK and PV, m64 n128 k128 each
STATES = ("", "_pair", "_under_gemm")  # softmax tile alone, beside another softmax, beside wgmma in flight


def _measured(p, key: str) -> float:
    """A contend or launch profile value; ScheduleError naming it when the profile lacks it or it is not finite."""
    v = p.values.get(key, {}).get("value")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ScheduleError("the Hopper attention schedules need the contend and launch microbenchmarks in the profile",
                            f"{p.name}.{key} = {v!r}", "refit: python -m lapis.model.fit with micro/h200-2026-11-30-"
                            "contend-launch in lapis/data/fit_manifest.json")
    return v


def _flavour_cycles(p, key: str, base: str, emulate: float, softmax: bool = True) -> float:
    """Cycles of profile entry `key` (with {} for the flavour) for flavour `base` with `emulate` of the exponentials
    in software: the measured ex2 -> emu8 -> emu4 change, interpolated linearly in emulate_frac, added to `base`;
    past 1/4 (not measured) a softmax tile (softmax=True) adds the cubic's FMA-pipe ops (CUBIC_FMA_OPS per score at
    fma_per_clk_sm) on top of emu4, and a GEMM pair stays at emu4's."""
    v = _measured(p, key.format(base))
    if not emulate:
        return v
    pts = [(e, _measured(p, key.format(f))) for e, f in EMULATED]
    (e0, c0), (e1, c1) = next(((a, b) for a, b in zip(pts, pts[1:]) if emulate <= b[0]), (pts[-2], pts[-1]))
    extra = max(0.0, emulate - e1) * 64 * 128 * CUBIC_FMA_OPS / p["fma_per_clk_sm"] if softmax else 0.0
    return v + c0 + (c1 - c0) * (min(emulate, e1) - e0) / (e1 - e0) + extra - pts[0][1]


def softmax_costs(p, flags: dict, prm: dict, rows: int, bn: int, d: int) -> dict:
    """What a consumer warpgroup's softmax and GEMMs cost, from the contend microbenchmark (profile keys
    softmax_cycles_<flavour>[_pair|_under_gemm], gemm_pair_cycles[_under_softmax_<flavour>]; lapis.pipeline_sim
    .contention). Flavour: exp2f (s1..s5), ex2 (s6), ex2_cond (s7..s9), emulate_frac on top (EMULATED).
    softmax_ns: a rows x bn tile's softmax alone without its O rescale, scaled from the measured 64 x 128 tile (the
    always-rescale flavours' measured tile holds one O rescale, which is taken out; ex2_cond's, on scores whose max
    never moves, holds none); rescale_ns: one O rescale (rows x d FMA-pipe multiplies alone); wgmma_latency_ns: the
    pair's time beyond the pipe at peak (PAIR_FLOP / tensor_flop_per_clk_sm); factors: Contention's rates."""
    base = "exp2f" if not flags.get("exp2") else "ex2_cond" if flags.get("cond_rescale") else "ex2"
    emulate = prm["emulate_frac"] if flags.get("exp2") else 0.0
    tile = {st: _flavour_cycles(p, "softmax_cycles_{}" + st, base, emulate) for st in STATES}
    pipe_alone = _measured(p, "gemm_pair_cycles")
    latency = pipe_alone - PAIR_FLOP / p["tensor_flop_per_clk_sm"]
    pipe_softmax = _flavour_cycles(p, "gemm_pair_cycles_under_softmax_{}", base, emulate, softmax=False)
    ghz = p["clock_ghz"]
    in_tile = 0.0 if flags.get("cond_rescale") else 64 * 128 / p["fma_per_clk_sm"]  # cycles: the tile's O rescale
    return dict(softmax_ns=(tile[""] - in_tile) * (rows / 64) * (bn / 128) / ghz,
                rescale_ns=rows * d / p.per_ns("fma_per_clk_sm"),
                wgmma_latency_ns=max(latency, 0.0) / ghz,
                factors=dict(softmax_pair=tile[""] / tile["_pair"], softmax_under_gemm=tile[""] / tile["_under_gemm"],
                             pipe_under_softmax=(pipe_alone - latency) / (pipe_softmax - latency)))


def _tiles(seq: int, bm: int, bn: int, masked: bool) -> tuple[int, int]:
    """(Q tiles, K/V tiles) per head. Without masked tails the tiles must divide L; with them (s9) the last tile
    of each is masked and costs a full tile (a full TMA box, a full wgmma)."""
    if masked:
        return math.ceil(seq / bm), math.ceil(seq / bn)
    if seq % bm or seq % bn:
        raise ScheduleError("L must be a multiple of the tiles", f"L = {seq}, block_m {bm}, block_n {bn}",
                            "pad L or pick tiles that divide it")
    return seq // bm, seq // bn


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
    smem = bm * d * 2 + prm["stages"] * 2 * bn * d * 2  # Q, and `stages` K and V tiles
    if smem > p["smem_bytes_per_block"]:
        raise ScheduleError("the schedule does not fit shared memory", f"Q {bm * d * 2} B + {prm['stages']} stages x "
                            f"K+V {2 * bn * d * 2} B = {smem} B > {p['smem_bytes_per_block']} B",
                            "lower stages, block_n or block_m")
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


def simulate(p, shape: str, params: dict, variant: str, check_races: bool = False, full: bool = False) -> dict:
    """check_races: log K/V slot accesses and barrier edges (races.HappensBefore) and return the races found.
    wgmma ops run as child processes under their warpgroup's role, so their program order merges with the
    parent's: that can hide a race inside one warpgroup, never invent one.
    full: simulate every SM (lapis.pipeline_sim.grid), not only the one with the most K/V tiles."""
    b, h, seq, d = parse_shape(shape)
    flags = VARIANTS[variant]
    prm = resolve(p, params, variant, d)
    smem, registers, occ = prm.pop("smem_bytes"), prm.pop("registers", None), prm.pop("occupancy")
    slots = prm["ctas_per_sm"]
    bm, bn, wgs = prm["block_m"], prm["block_n"], prm["consumer_wgs"]
    q_tiles, kv_tiles = _tiles(seq, bm, bn, flags.get("masked_tail", False))
    per_cta = prm["q_tiles_per_cta"]
    items = b * h * math.ceil(q_tiles / per_cta)  # CTAs of a non-persistent grid (work units of a persistent one)
    per_sm = kv_units_per_sm(b * h, q_tiles, kv_tiles, bm, bn, prm["causal"], p["sm_count"], per_cta,
                             prm["persistent_order"])
    rows = bm // wgs
    env = simpy.Environment()
    t_rate, f_rate = p.per_ns("tensor_flop_per_clk_sm"), p.per_ns("fma_per_clk_sm")
    gemm_ns = 2 * rows * bn * d / t_rate
    cost = softmax_costs(p, flags, prm, rows, bn, d)
    turnover_ns = _measured(p, "cta_turnover_ns")
    freq = rescale_frequency(bn, prm["threshold"]) if flags.get("cond_rescale") else 1.0
    rescale_ns, softmax_ns = cost["rescale_ns"] * freq, cost["softmax_ns"]
    mask_ns = rows * bn * MASK_OPS_PER_SCORE / f_rate  # s9 causal (attention_h200.cu mask_diagonal), diagonal only
    tile_bytes = bn * d * 2  # one K or V tile
    pp = bool(flags.get("pingpong")) and wgs >= 2
    checked = []  # (HappensBefore or None, barriers) of each SM simulated

    def build(rec, grid, group):
        """One SM's units and its `slots` CTA slots, each with its own rings, barriers and roles, running the
        CTAs of `group.work` (each the tuple of its Q tiles' K/V tile counts)."""
        ctas = group.work
        first = [0, *itertools.accumulate(len(u) for u in ctas)]  # each CTA's first work item
        queue = iter(range(len(ctas)))  # the SM's CTAs in grid order; the slot that asks first gets the next
        n_slots = min(slots, len(ctas))
        tensor, load_path = simpy.Resource(env, 1), simpy.Resource(env, 1)
        busy = dict(tensor=0.0, softmax=0.0, tma=0.0)
        share = Contention(env, **cost["factors"], busy=busy)

        def use(unit, name, ns, role, op, **kw):
            yield from occupy(env, rec, unit, ns, busy, name, role, op, **kw)

        def on_pipe(role, op, **kw):
            """One wgmma over a tile: queued on the tensor pipe (FIFO), served at the contended rate; its result is
            visible the pipe's latency after the service ends (the pipe is free by then)."""
            t0 = env.now
            with tensor.request() as req:
                yield req
                t1 = env.now
                if t1 > t0:
                    rec.add(role, "wait tensor", t0, kind="wait", **kw)
                yield from share.run("pipe", gemm_ns)
            busy["tensor"] += env.now - t1
            rec.add(role, op, t1, **kw)
            yield env.timeout(cost["wgmma_latency_ns"])
            share.gemm_done()

        def sm_work(role, op, ns, **kw):
            """Softmax-side work of a warpgroup (alone-speed ns), at the SM's contended rate."""
            t0 = env.now
            yield from share.run("softmax", ns)
            if env.now > t0:
                rec.add(role, op, t0, **kw)

        def load(nbytes, role, op, reuse=q_tiles, **kw):
            """At the SM's bandwidth share when the load path takes it: K/V serve every Q tile of a head
            (reuse q_tiles); Q read and O written once are compulsory HBM traffic (reuse 1), so they also see
            the HBM latency (tma_latency_hbm_ns) where the K/V tiles, mostly L2 hits, see L2's."""
            yield from use(load_path, "tma", lambda: nbytes / grid.share(reuse), role, op, **kw)
            yield env.timeout(p["tma_latency_hbm_ns"] if reuse == 1 else p["tma_latency_ns"])

        def cta_slot(s):
            """Slot s: its roles (prefixed cta<s>/ when the SM runs several) run CTAs one after another, each taken
            off the SM's queue by the first of the slot's roles to reach it (the producer, or the serial WG)."""
            def R(role):
                return f"cta{s}/{role}" if n_slots > 1 else role

            hb = HappensBefore(env) if check_races else None
            consumers = tuple(R(f"consumer{i}") for i in range(wgs))
            taken = []  # the CTAs of this slot, in order

            def cta_items():
                """(work item, K/V tiles, the CTA's ordinal in the slot) of this slot's Q tiles, taking the next CTA
                off the queue on demand."""
                k = 0
                while True:
                    if k == len(taken):
                        taken.append(next(queue, None))
                    if taken[k] is None:
                        return
                    yield from ((first[taken[k]] + i, n, k) for i, n in enumerate(ctas[taken[k]]))
                    k += 1

            slot_roles = 1 + wgs if flags.get("ws") else 1
            retired = {}  # CTA ordinal -> [roles done with it, event: the slot's next CTA may start]

            def next_cta(k):
                """A slot runs one CTA at a time, as the SM does: a role starts the slot's CTA k once every role of
                CTA k - 1 is done (attention_h200.cu: all roles meet at the kernel's last __syncthreads before the
                CTA exits) and the SM has retired it and started the next (cta_turnover_ns). A persistent CTA's
                work units are not CTAs: its producer runs ahead into the next one (s8's second Q slot)."""
                if k == 0 or flags.get("persistent"):
                    return
                done = retired.setdefault(k - 1, [0, env.event()])
                done[0] += 1
                if done[0] == slot_roles:
                    env.timeout(turnover_ns).callbacks.append(lambda _ev, e=done[1]: e.succeed())
                yield done[1]
            # Separate K and V rings, as FlashAttention-3 keeps them: QK needs only K, and K frees before V.
            rings = {x: TmaPipeline(env, R(x), prm["stages"], R("producer"), consumers, tile_bytes) for x in ("K", "V")}
            for ring in rings.values():
                ring.attach(hb)
            # s4+: WG i's GEMM turn is named barrier 1 + i over 256 threads: WG i's bar.sync (128) and the bar.arrive
            # (128) of the WG before it, which arrives once its own GEMMs are issued (FA3's warp-scheduler barriers).
            turns = [NamedBarrier(env, f"gemm turn of {c}", PINGPONG_BAR0 + i, 2 * WARPGROUP_THREADS,
                                  {c: WARPGROUP_THREADS, consumers[i - 1]: WARPGROUP_THREADS})
                     for i, c in enumerate(consumers)] if pp else []

            def producer():
                st = {x: PipelineState.producer_start(prm["stages"]) for x in rings}
                cur = 0
                for item, n_kv, k in cta_items():
                    if k != cur:
                        yield from next_cta(k)
                        cur = k
                    yield from load(bm * d * 2, R("producer"), "TMA Q", reuse=1, work_item=item)
                    for x, j in load_order(n_kv):
                        ring = rings[x]
                        t0 = env.now
                        yield ring.producer_acquire(st[x])
                        if env.now > t0:
                            rec.add(R("producer"), f"wait {x} slot", t0, kind="wait", work_item=item, k_index=j)
                        ring.producer_expect(st[x])
                        issue = hb and hb.op(R("producer"), f"issue TMA {x} {item}.{j}")
                        env.process(tile_load(ring, PipelineState(st[x].stages, st[x].index, st[x].phase), x, item, j,
                                              issue))
                        st[x].advance()
                for x, ring in rings.items():
                    yield ring.producer_tail(st[x])

            def load_order(n_kv):
                """The producer's TMA order: K_j, V_j; or, where PV_j joins the next GEMM turn (s4+), K_{j+1} before
                V_j, the order the consumers free the slots in (FA3's producer lags V by one tile the same way)."""
                if not pp and not flags.get("overlap"):
                    return [(x, j) for j in range(n_kv) for x in ("K", "V")]
                order = [("K", 0)] if n_kv else []
                for j in range(n_kv):
                    order += ([("K", j + 1)] if j + 1 < n_kv else []) + [("V", j)]
                return order

            def tile_load(ring, st, x, item, j, issue):
                yield from load(tile_bytes, R("tma"), f"TMA {x}", work_item=item, k_index=j)
                w = hb and hb.access(R(f"tma {x} {item}.{j}"), x, st.index, (item, j), "write", after=issue)
                ring.tma_complete(st, node=w)

            def wgmma(groups, role, op, item, j, reads=None):
                """wgmma.mma_async over a tile: the tensor pipe runs it while the warpgroup goes on; then commit_group.
                `reads` = (ring name, slot) of the K or V tile it reads (logged at issue, in program order)."""
                if hb and reads:
                    hb.access(role, reads[0], reads[1], (item, j), "read")
                share.gemm_issued()
                groups.issue(env.process(on_pipe(role, op, work_item=item, k_index=j)))
                groups.commit()

            def wait_group(groups, n, role, item, j):
                t0 = env.now
                yield groups.wait(n)
                if env.now > t0:
                    rec.add(role, f"wait wgmma (wait_group {n})", t0, kind="wait", work_item=item, k_index=j)

            def wait_tile(x, st, role, item, j):
                t0 = env.now
                yield rings[x].consumer_wait(st, role)
                if env.now > t0:
                    rec.add(role, f"wait {x}", t0, kind="wait", work_item=item, k_index=j)

            def turn_sync(i, role, item, j):
                t0 = env.now
                yield turns[i].sync(role, WARPGROUP_THREADS)
                if env.now > t0:
                    rec.add(role, f"wait GEMM turn (bar.sync {PINGPONG_BAR0 + i})", t0, kind="wait", work_item=item,
                            k_index=j)

            def diag(j, n_kv):  # causal: a Q tile's last K/V tile is its diagonal, the one with masked scores
                return bool(prm["causal"]) and j == n_kv - 1

            def softmax(role, item, j, with_rescale, diagonal=False):
                mask = mask_ns if diagonal else 0.0  # causal: the diagonal tile's compare + select per score
                yield from sm_work(role, "softmax", softmax_ns + mask + (rescale_ns if with_rescale else 0.0),
                                   work_item=item, k_index=j)

            def consumer(i):
                role = consumers[i]
                st = {x: PipelineState(prm["stages"]) for x in rings}
                g = WgmmaGroups(env, role)
                if pp and i == wgs - 1:
                    turns[0].arrive(role, WARPGROUP_THREADS)  # the first GEMM turn goes to WG 0

                def take(x):
                    s = PipelineState(st[x].stages, st[x].index, st[x].phase)
                    st[x].advance()
                    return s

                def pv(item, j, vst):
                    yield from wait_tile("V", vst, role, item, j)
                    wgmma(g, role, "wgmma PV", item, j, ("V", vst.index))

                cur = 0
                for item, n_kv, k in cta_items():
                    if k != cur:
                        yield from next_cta(k)
                        cur = k
                    held = None  # (j, V slot) of the tile whose PV is still to issue (s4+: it joins the next GEMM turn)
                    for j in range(n_kv):
                        kst, vst = take("K"), take("V")
                        yield from wait_tile("K", kst, role, item, j)
                        if pp:
                            yield from turn_sync(i, role, item, j)
                        if flags.get("overlap"):  # s5+: QK_j, then PV_{j-1}; softmax_j runs while PV_{j-1} does
                            if held:  # V_{j-1} waited before QK_j: the two issue back to back (attention_h200.cu turn)
                                yield from wait_tile("V", held[1], role, item, held[0])
                            wgmma(g, role, "wgmma QK", item, j, ("K", kst.index))
                            if held:
                                wgmma(g, role, "wgmma PV", item, held[0], ("V", held[1].index))
                            if pp:
                                turns[(i + 1) % wgs].arrive(role, WARPGROUP_THREADS)
                            yield from wait_group(g, 1 if held else 0, role, item, j)  # S_j ready; PV_{j-1} may run on
                            rings["K"].consumer_release(kst, role)
                            yield from softmax(role, item, j, with_rescale=False, diagonal=diag(j, n_kv))
                            if held:
                                yield from wait_group(g, 0, role, item, j)
                                rings["V"].consumer_release(held[1], role)
                            yield from sm_work(role, "O rescale", rescale_ns, work_item=item, k_index=j)
                            held = (j, vst)
                        elif pp:  # s4: the turn holds PV_{j-1} then QK_j; softmax_j overlaps the other WG's turn
                            if held:
                                yield from pv(item, *held)
                            wgmma(g, role, "wgmma QK", item, j, ("K", kst.index))
                            turns[(i + 1) % wgs].arrive(role, WARPGROUP_THREADS)
                            yield from wait_group(g, 0, role, item, j)
                            rings["K"].consumer_release(kst, role)
                            if held:
                                rings["V"].consumer_release(held[1], role)
                            yield from softmax(role, item, j, with_rescale=True, diagonal=diag(j, n_kv))
                            held = (j, vst)
                        else:  # s2, s3: each GEMM waited for before the next step
                            wgmma(g, role, "wgmma QK", item, j, ("K", kst.index))
                            yield from wait_group(g, 0, role, item, j)
                            rings["K"].consumer_release(kst, role)
                            yield from softmax(role, item, j, with_rescale=True, diagonal=diag(j, n_kv))
                            yield from pv(item, j, vst)
                            yield from wait_group(g, 0, role, item, j)
                            rings["V"].consumer_release(vst, role)
                    if held is not None:  # the last PV, in a turn of its own
                        if pp:
                            yield from turn_sync(i, role, item, held[0])
                        yield from pv(item, *held)
                        if pp:
                            turns[(i + 1) % wgs].arrive(role, WARPGROUP_THREADS)
                        yield from wait_group(g, 0, role, item, held[0])
                        rings["V"].consumer_release(held[1], role)
                    yield from load(rows * d * 2, role, "store O", reuse=1, work_item=item)

            def serial():
                role = R("consumer0")
                g = WgmmaGroups(env, role)
                cur = 0
                for item, n_kv, k in cta_items():
                    if k != cur:
                        yield from next_cta(k)
                        cur = k
                    yield from load(bm * d * 2, role, "TMA Q (waited)", reuse=1, work_item=item)
                    for j in range(n_kv):
                        yield from load(2 * tile_bytes, role, "TMA K+V (waited)", work_item=item, k_index=j)
                        wgmma(g, role, "wgmma QK", item, j)
                        yield from wait_group(g, 0, role, item, j)
                        yield from softmax(role, item, j, with_rescale=True, diagonal=diag(j, n_kv))
                        wgmma(g, role, "wgmma PV", item, j)
                        yield from wait_group(g, 0, role, item, j)
                    yield from load(bm * d * 2, role, "store O", reuse=1, work_item=item)

            barriers = rings["K"].barriers + rings["V"].barriers
            if flags.get("ws"):
                procs = {R("producer"): env.process(producer())}
                procs.update({c: env.process(consumer(i)) for i, c in enumerate(consumers)})
            else:
                procs = {R("consumer0"): env.process(serial())}
            checked.append((hb, barriers))  # the mbarriers log races; the named barriers (turns) do not
            return procs, barriers + turns

        procs, barriers = {}, []
        for s in range(n_slots):
            pr, bars = cta_slot(s)
            procs.update(pr)
            barriers += bars
        return procs, barriers, busy

    run = run_sms(env, p, per_sm, full, build, cost=_kv_total)
    rep = run.slowest
    flops = 4.0 * b * h * seq * seq * d / (2 if prm["causal"] else 1)  # the FA benchmarks' convention
    return dict(env_ns=env.now, flops=flops, events=run.recorders[rep.sm].events, params=prm,
                races=None if not check_races else [r for hb, bars in checked
                                                    for r in hb.races() + [y for x in bars for y in x.races]],
                fit=dict(smem_bytes=smem, registers=registers, regs_per_thread=prm["regs_per_thread"],
                         ctas_per_sm=slots, resident_ctas=occ.ctas_per_sm, limiter=occ.limiter,
                         occupancy_limits=occ.limits),
                units=run.busy[rep.sm],
                work=dict(work_items=items, active_sms=len(per_sm), items_per_sm=sum(map(len, rep.work)),
                          kv_tiles=kv_tiles, kv_tiles_on_this_sm=_kv_total(rep.work), rescale_frequency=freq),
                grid=grid_summary(run, env.now))
