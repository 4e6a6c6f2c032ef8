"""`h200-fa2-sync` (simulation only; no kernel implements it): a FlashAttention-2-style forward on Hopper.

No specialization: a CTA is 4 warps, each owning 32 of the block_m = 128 query rows of one (batch, head). Per
K/V tile j of block_n = 64 keys, every warp:
  cp.async.wait_group 0 (its share of tile j landed), __syncthreads (`bar.sync 0, 128`: every warp's share
  landed, and every warp is done with tile j-1, so its slot is free), cp.async of its share of tile j+1 into the
  other slot + cp.async.commit_group (the double buffer, stages = 2), ldmatrix K_j, mma.sync S = Q K_j^T,
  softmax (MUFU ex2 + FMA pipe) and O rescale (FMA pipe), ldmatrix V_j, mma.sync O += P V_j (P stays in
  registers: C->A in place). Q is loaded once per tile by cp.async and held in registers (one ldmatrix).
mma.sync is synchronous per warp: the warp holds its sub-partition's tensor core for the whole tile GEMM.

Units: per SM sub-partition (4 per SM, warp w of CTA slot s on SMSP (4 s + w) % 4) a quarter of the SM's
mma.sync rate (the profile's mma_sync_flop_per_clk_sm, assumed at half the wgmma rate), MUFU and FMA rates;
per SM one LSU/shared-memory path (smem_bytes_per_clk_sm, 128 B wavefronts: cp.async 16 B per lane and
ldmatrix both move 128 B per wavefront) and the load path (an equal share of L2 across the SMs running, then the
profile's tma_latency_ns as the load latency: the only load latency the h200 profile has, assumed).
CTAs resident per SM: the least of the shared-memory (Q + 2 K/V slots) and register (4 warps x 32 x
REGS_PER_THREAD) limits. Not modelled: mma.sync and ldmatrix issue latency and dependency stalls, bank
conflicts, register spills. So the prediction is an upper bound on what such a kernel reaches.

Roles (lapis.pipeline_sim.context.Context): `slot<s>` (cta_slot) runs its CTAs one after another; each CTA's
warps are `cta<s>.w<w>` (warp, the loop above), on sub-partition Smsp (4 s + w) % 4. Costs: Fa2Costs.

It is tensor-bound: mma.sync runs below the wgmma rate (the micro capture's 2714 against 4096 FLOP/clk/SM) and the
ldmatrix traffic (every warp reads all of K_j and V_j from smem) shares the LSU path. The Hopper schedules s1..s9
cost their softmax by the contention measured on the H200 (lapis.pipeline_sim.contention); this one costs it as
MUFU and FMA throughput, so it is an upper bound (above torch's flash backend, an FA2 kernel, measured in the
attention captures), not an estimate to rank against s3.
"""

from __future__ import annotations

from dataclasses import dataclass


from lapis.errors import ScheduleError
from lapis.pipeline_sim.commit_groups import CpAsyncGroups
from lapis.pipeline_sim.schedule import Schedule
from lapis.pipeline_sim.schedules.attention_h200 import FMA_OPS_PER_SCORE
from lapis.pipeline_sim.units import SMSP_PER_SM, Smsp
from lapis.pipeline_sim.work_order import kv_per_sm

__all__ = ["DEFAULTS", "FA2_SYNC", "SCHEDULES", "VARIANTS", "Fa2Costs", "warp"]

DEFAULTS = dict(block_m=128, block_n=64, stages=2, causal=0)
VARIANTS = {"h200-fa2-sync": {}}
WARPS = 4
REGS_PER_THREAD = 255  # assumed: FA2's hdim-128 forward runs at the 255-register cap; it decides residency
WAVEFRONT_BYTES = 128


def _check(p, bm: int, bn: int, stages: int, seq: int, d: int) -> int:
    """Shared-memory bytes per CTA; raises ScheduleError for tiles that do not divide L or do not fit."""
    if bm != 32 * WARPS or stages != 2:
        raise ScheduleError("h200-fa2-sync is 4 warps of 32 rows with a cp.async double buffer",
                            f"block_m {bm}, stages {stages}", "use block_m=128, stages=2")
    if bn % 16 or seq % bm or seq % bn:
        raise ScheduleError("L must be a multiple of the tiles", f"L = {seq}, block_m {bm}, block_n {bn}",
                            "pad L or pick block_n (a multiple of 16) dividing it")
    smem = bm * d * 2 + stages * 2 * bn * d * 2
    if smem > p["smem_bytes_per_block"]:
        raise ScheduleError("the schedule does not fit shared memory", f"Q {bm * d * 2} B + {stages} x K+V "
                            f"{2 * bn * d * 2} B = {smem} B > {p['smem_bytes_per_block']} B", "lower block_n")
    return smem


def resolve(p, dims: tuple, params: dict) -> tuple[dict, dict]:
    """The run's parameters (DEFAULTS, then the caller's) and the fit: shared memory per CTA, and the registers and
    CTAs the SM keeps resident (sm_fit: no more than the representative SM has CTAs for)."""
    prm = {**DEFAULTS, **params}
    smem = _check(p, prm["block_m"], prm["block_n"], prm["stages"], dims[2], dims[3])
    resident = resident_limit(p, smem)
    return prm, dict(smem_bytes=smem, registers=resident * CTA_REGISTERS, ctas_per_sm=resident)


CTA_REGISTERS = WARPS * 32 * REGS_PER_THREAD


def resident_limit(p, smem: int) -> int:
    """CTAs resident per SM: the least of the shared-memory (Q + 2 K/V slots) and register limits."""
    return min(p["smem_bytes_per_sm"] // smem, p["registers_per_sm"] // CTA_REGISTERS)


def sm_fit(fit: dict, work: tuple) -> dict:
    """The fit as the representative SM runs it: no more CTAs at a time than it has."""
    ctas = min(fit["ctas_per_sm"], len(work))
    return dict(fit, registers=ctas * CTA_REGISTERS, ctas_per_sm=ctas)


def deal(p, dims: tuple, prm: dict) -> list:
    """Q tiles dealt to SMs by grid stride, each its count of K/V tiles (work_order.kv_per_sm)."""
    b, h, seq, _ = dims
    bm, bn = prm["block_m"], prm["block_n"]
    return kv_per_sm(b * h, seq // bm, seq // bn, bm, bn, prm["causal"], p["sm_count"])


@dataclass(frozen=True)
class Fa2Costs:
    """What one warp's ops take on its sub-partition (ns), from the profile's SM rates split four ways:
    gemm_ns: a tile's mma.sync (32 rows x block_n x D, QK or PV); mufu_ns: its ex2s; fma_ns: its softmax FMA-pipe
    ops (FMA_OPS_PER_SCORE per score) and the O rescale (32 x D); lsu_rate: the SM's shared-memory wavefronts per
    ns; tile_bytes: a K or V tile; q_bytes: a warp's 32 Q (or O) rows; latency_ns: a load's latency after its
    bytes (the profile's tma_latency_ns, assumed for cp.async); resident: CTAs the SM keeps resident."""

    gemm_ns: float
    mufu_ns: float
    fma_ns: float
    lsu_rate: float
    tile_bytes: int
    q_bytes: int
    latency_ns: float
    q_tiles: int
    kv_tiles: int
    items: int
    resident: int

    @classmethod
    def of(cls, p, dims: tuple, prm: dict, flags: dict) -> Fa2Costs:
        b, h, seq, d = dims
        bm, bn = prm["block_m"], prm["block_n"]
        rows = bm // WARPS
        t_rate, m_rate, f_rate = (p.per_ns(k) / SMSP_PER_SM for k in ("mma_sync_flop_per_clk_sm",
                                                                       "mufu_ex2_per_clk_sm", "fma_per_clk_sm"))
        return cls(gemm_ns=2 * rows * bn * d / t_rate, mufu_ns=rows * bn / m_rate,
                   fma_ns=(rows * bn * FMA_OPS_PER_SCORE[False] + rows * d) / f_rate,  # softmax, then the O rescale
                   lsu_rate=p["smem_bytes_per_clk_sm"] / WAVEFRONT_BYTES * p["clock_ghz"], tile_bytes=bn * d * 2,
                   q_bytes=rows * d * 2, latency_ns=p["tma_latency_ns"], q_tiles=seq // bm, kv_tiles=seq // bn,
                   items=b * h * (seq // bm), resident=resident_limit(p, _check(p, bm, bn, prm["stages"], seq, d)))

    def lsu_ns(self, nbytes: int) -> float:
        """LSU time of nbytes of cp.async or ldmatrix: 128 B wavefronts at the SM's shared-memory rate."""
        return nbytes / WAVEFRONT_BYTES / self.lsu_rate




def lsu(ctx, nbytes: int, role: str, op: str, **kw):
    """The SM's LSU / shared-memory path for nbytes (cp.async issue, ldmatrix)."""
    yield from ctx.occupy("lsu", ctx.cost.lsu_ns(nbytes), role, op, **kw)


def over_l2(ctx, nbytes: int, reuse: float, role: str, op: str, **kw):
    """The load path at the SM's bandwidth share when it takes the bytes: K/V serve every Q tile of a head (reuse
    q_tiles); Q read and O written once are compulsory HBM traffic (reuse 1)."""
    yield from ctx.occupy("l2", lambda: nbytes / ctx.grid.share(reuse), role, op, **kw)


def cp_async(ctx, nbytes: int, reuse: float, role: str, op: str, **kw):
    """A warp's cp.async: LSU wavefronts to issue, then (a process: the warp goes on) the bytes over the load path
    and the latency. Returns the process, for the warp's cp.async group."""
    yield from lsu(ctx, nbytes, role, op, **kw)
    return ctx.child(land(ctx, nbytes, reuse, op, kw))


def land(ctx, nbytes: int, reuse: float, op: str, kw: dict):
    """A cp.async's bytes landing: the load path (role `l2`), then the latency."""
    yield from over_l2(ctx, nbytes, reuse, "l2", f"{op} lands", **kw)
    yield ctx.env.timeout(ctx.cost.latency_ns)


def landed_and_synced(ctx, groups: CpAsyncGroups, bar, role: str):
    """cp.async.wait_group 0 (this warp's share of tile j landed), then __syncthreads (`bar.sync 0`): one wait."""
    yield groups.wait(0)
    yield bar.sync(role, 32 * WARPS, event=ctx.rec.last_id(role))


def warp(ctx, smsp: Smsp, role: str, item: int, n_kv: int, bar):
    """One warp of an FA2 CTA, its 32 of the Q tile's rows (the loop of the module docstring; FlashAttention-2's
    forward mainloop): cp.async Q and its share of K/V tile 0; per tile j, wait its group and __syncthreads, prefetch
    its share of tile j+1 into the other slot, ldmatrix K_j (+ Q at j = 0), mma.sync QK, the softmax (MUFU ex2,
    then the FMA pipe with the O rescale), ldmatrix V_j, mma.sync PV; then store its O rows."""
    c, groups = ctx.cost, CpAsyncGroups(ctx.env, role)
    share = 2 * c.tile_bytes // WARPS  # this warp's quarter of a K+V tile
    groups.issue((yield from cp_async(ctx, c.q_bytes, 1, role, "cp.async Q", work_item=item)))
    groups.issue((yield from cp_async(ctx, share, c.q_tiles, role, "cp.async K+V", work_item=item, k_index=0)))
    groups.commit()
    for j in range(n_kv):
        kw = dict(work_item=item, k_index=j)
        yield from ctx.waited(role, "wait cp.async group + __syncthreads",
                              landed_and_synced(ctx, groups, bar, role),
                              flow=lambda: bar.last_completer, **kw)
        if j + 1 < n_kv:
            groups.issue((yield from cp_async(ctx, share, c.q_tiles, role, "cp.async K+V", work_item=item,
                                              k_index=j + 1)))
            groups.commit()
        yield from lsu(ctx, c.tile_bytes + (c.q_bytes if j == 0 else 0), role, "ldmatrix K (+Q)", **kw)
        yield from smsp.use("tensor", c.gemm_ns, role, "mma.sync QK", **kw)
        yield from smsp.use("mufu", c.mufu_ns, role, "softmax ex2", **kw)
        yield from smsp.use("fma", c.fma_ns, role, "softmax FMA + O rescale", **kw)
        yield from lsu(ctx, c.tile_bytes, role, "ldmatrix V", **kw)
        yield from smsp.use("tensor", c.gemm_ns, role, "mma.sync PV", **kw)
    yield from over_l2(ctx, c.q_bytes, 1, role, "store O", work_item=item)


def cta_slot(ctx, smsps: list, slot: int, resident: int):
    """CTA slot `slot` of the SM: its CTAs (every resident-th Q tile of the SM's list) one after another; a CTA is
    WARPS warps on sub-partitions (4 slot + w) % 4 meeting at one __syncthreads barrier, done when all are."""
    for item in range(slot, len(ctx.group.work), resident):
        roles = [f"cta{slot}.w{w}" for w in range(WARPS)]
        bar = ctx.named_barrier(f"__syncthreads of cta{slot} item {item}", 0, 32 * WARPS, {r: 32 for r in roles})
        yield ctx.env.all_of([ctx.spawn(f"{r}.item{item}", warp(ctx, smsps[(slot * WARPS + w) % SMSP_PER_SM], r, item,
                                                                ctx.group.work[item], bar))
                              for w, r in enumerate(roles)])


def launch(ctx) -> None:
    """One SM: its sub-partitions and min(resident, its CTAs) CTA slots."""
    resident = min(ctx.cost.resident, len(ctx.group.work))
    smsps = [Smsp(ctx) for _ in range(SMSP_PER_SM)]
    for s in range(resident):
        ctx.spawn(f"slot{s}", cta_slot(ctx, smsps, s, resident))


def summary(per_sm: list, rep, dims: tuple, prm: dict, cost: Fa2Costs) -> dict:
    """Q tiles, SMs with work, Q tiles and K/V tiles on the representative SM, K/V tiles per head, its CTA slots."""
    return dict(work_items=cost.items, active_sms=len(per_sm), items_per_sm=len(rep.work), kv_tiles=cost.kv_tiles,
                kv_tiles_on_this_sm=sum(rep.work), resident_ctas=min(cost.resident, len(rep.work)))


def flops(dims: tuple, prm: dict) -> float:
    """The FA benchmarks' convention: 4 B H L^2 D, halved when causal."""
    b, h, seq, d = dims
    return 4.0 * b * h * seq * seq * d / (2 if prm["causal"] else 1)


FA2_SYNC = Schedule(
    name="h200-fa2-sync", description="simulation only: FA2-style, 4 unspecialized warps, mma.sync, cp.async double "
    "buffer, ldmatrix", shape="attention", defaults=DEFAULTS, resolve=resolve, work=deal, costs=Fa2Costs.of,
    launch=launch, flops=flops, summary=summary, flags=VARIANTS["h200-fa2-sync"], units=("lsu", "l2"),
    busy=("tensor", "mufu", "fma", "lsu", "l2"), work_cost=sum, sm_fit=sm_fit)
SCHEDULES = (FA2_SYNC,)
