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

It is tensor-bound: mma.sync runs below the wgmma rate (the micro capture's 2714 against 4096 FLOP/clk/SM) and the
ldmatrix traffic (every warp reads all of K_j and V_j from smem) shares the LSU path. The Hopper schedules s1..s9
cost their softmax by the contention measured on the H200 (lapis.pipeline_sim.contention); this one costs it as
MUFU and FMA throughput, so it is an upper bound (above torch's flash backend, an FA2 kernel, measured in the
attention captures), not an estimate to rank against s3.
"""

from __future__ import annotations

import simpy

from lapis.errors import ScheduleError
from lapis.pipeline_sim.commit_groups import CpAsyncGroups
from lapis.pipeline_sim.grid import grid_summary, run_sms
from lapis.pipeline_sim.named_barrier import NamedBarrier
from lapis.pipeline_sim.schedules.attention_h200 import FMA_OPS_PER_SCORE, parse_shape
from lapis.pipeline_sim.units import occupy
from lapis.pipeline_sim.work_order import kv_per_sm

__all__ = ["DEFAULTS", "VARIANTS", "parse_shape", "simulate"]

DEFAULTS = dict(block_m=128, block_n=64, stages=2, causal=0)
VARIANTS = {"h200-fa2-sync": {}}
WARPS = 4
SMSP_PER_SM = 4  # four sub-partitions per SM, one tensor core each (Hopper SM)
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


def simulate(p, shape: str, params: dict, variant: str, check_races: bool = False, full: bool = False) -> dict:
    """check_races: accepted for the common interface; no slot accesses are logged (races None or []).
    full: simulate every SM (lapis.pipeline_sim.grid), not only the one with the most K/V tiles."""
    b, h, seq, d = parse_shape(shape)
    prm = {**DEFAULTS, **params}
    bm, bn = prm["block_m"], prm["block_n"]
    smem = _check(p, bm, bn, prm["stages"], seq, d)
    regs = WARPS * 32 * REGS_PER_THREAD
    resident_limit = min(p["smem_bytes_per_sm"] // smem, p["registers_per_sm"] // regs)
    q_tiles, kv_tiles = seq // bm, seq // bn
    items = b * h * q_tiles
    per_sm = kv_per_sm(b * h, q_tiles, kv_tiles, bm, bn, prm["causal"], p["sm_count"])
    rows = bm // WARPS
    env = simpy.Environment()
    t_rate, m_rate, f_rate = (p.per_ns(k) / SMSP_PER_SM for k in ("mma_sync_flop_per_clk_sm",
                                                                   "mufu_ex2_per_clk_sm", "fma_per_clk_sm"))
    lsu_rate = p["smem_bytes_per_clk_sm"] / WAVEFRONT_BYTES * p["clock_ghz"]  # wavefronts per ns
    gemm_ns = 2 * rows * bn * d / t_rate
    mufu_ns = rows * bn / m_rate
    fma_ns = (rows * bn * FMA_OPS_PER_SCORE[False] + rows * d) / f_rate  # softmax, then the O rescale
    tile_bytes = bn * d * 2

    def build(rec, grid, group):
        """One SM's units and CTA slots, running the Q tiles of `group.work` (their K/V tile counts)."""
        my_kv = group.work
        resident = min(resident_limit, len(my_kv))
        tensors, mufus, fmas = ([simpy.Resource(env, 1) for _ in range(SMSP_PER_SM)] for _ in range(3))
        lsu, load_path = simpy.Resource(env, 1), simpy.Resource(env, 1)
        busy = dict(tensor=0.0, mufu=0.0, fma=0.0, lsu=0.0, l2=0.0)
        barriers, procs = [], {}  # both grow as CTAs start (run_sms reads them after the run)

        def use(unit, name, ns, role, op, **kw):
            yield from occupy(env, rec, unit, ns, busy, name, role, op, **kw)

        def lsu_bytes(nbytes, role, op, **kw):
            yield from use(lsu, "lsu", nbytes / WAVEFRONT_BYTES / lsu_rate, role, op, **kw)

        def over_l2(nbytes, reuse, role, op, **kw):
            """The load path at the SM's bandwidth share when it takes the bytes: K/V serve every Q tile of a
            head (reuse q_tiles); Q read and O written once are compulsory HBM traffic (reuse 1)."""
            yield from use(load_path, "l2", lambda: nbytes / grid.share(reuse), role, op, **kw)

        def cp_async(nbytes, reuse, role, op, **kw):
            """A warp's cp.async: LSU wavefronts to issue, then the bytes over the load path and the latency."""
            yield from lsu_bytes(nbytes, role, op, **kw)

            def land():
                yield from over_l2(nbytes, reuse, "l2", f"{op} lands", **kw)
                yield env.timeout(p["tma_latency_ns"])
            return env.process(land())

        def warp(role, smsp, item, n_kv, bar):
            tensor, mufu, fma = tensors[smsp], mufus[smsp], fmas[smsp]
            g = CpAsyncGroups(env, role)
            share_bytes = 2 * tile_bytes // WARPS  # this warp's quarter of a K+V tile
            g.issue((yield from cp_async(rows * d * 2, 1, role, "cp.async Q", work_item=item)))
            g.issue((yield from cp_async(share_bytes, q_tiles, role, "cp.async K+V", work_item=item, k_index=0)))
            g.commit()
            for j in range(n_kv):
                kw = dict(work_item=item, k_index=j)
                t0 = env.now
                yield g.wait(0)
                yield bar.sync(role, 32 * WARPS)  # __syncthreads
                if env.now > t0:
                    rec.add(role, "wait cp.async group + __syncthreads", t0, kind="wait", **kw)
                if j + 1 < n_kv:
                    g.issue((yield from cp_async(share_bytes, q_tiles, role, "cp.async K+V", work_item=item,
                                                 k_index=j + 1)))
                    g.commit()
                yield from lsu_bytes(tile_bytes + (rows * d * 2 if j == 0 else 0), role, "ldmatrix K (+Q)", **kw)
                yield from use(tensor, "tensor", gemm_ns, role, "mma.sync QK", **kw)
                yield from use(mufu, "mufu", mufu_ns, role, "softmax ex2", **kw)
                yield from use(fma, "fma", fma_ns, role, "softmax FMA + O rescale", **kw)
                yield from lsu_bytes(tile_bytes, role, "ldmatrix V", **kw)
                yield from use(tensor, "tensor", gemm_ns, role, "mma.sync PV", **kw)
            yield from over_l2(rows * d * 2, 1, role, "store O", work_item=item)

        def cta(slot, item, n_kv):
            roles = [f"cta{slot}.w{w}" for w in range(WARPS)]
            bar = NamedBarrier(env, f"__syncthreads of cta{slot} item {item}", 0, 32 * WARPS,
                               {r: 32 for r in roles})
            barriers.append(bar)
            ps = [env.process(warp(r, (slot * WARPS + w) % SMSP_PER_SM, item, n_kv, bar))
                  for w, r in enumerate(roles)]
            procs.update({f"{r}.item{item}": pr for r, pr in zip(roles, ps)})
            yield env.all_of(ps)

        def slot_proc(slot):
            for item in range(slot, len(my_kv), resident):
                yield from cta(slot, item, my_kv[item])

        for s in range(resident):
            procs[f"slot{s}"] = env.process(slot_proc(s))
        return procs, barriers, busy

    run = run_sms(env, p, per_sm, full, build, cost=sum)
    rep = run.slowest
    resident = min(resident_limit, len(rep.work))
    busy = dict(run.busy[rep.sm])
    for u in ("tensor", "mufu", "fma"):  # per-SMSP units: busy as a fraction of the SM's rate
        busy[u] /= SMSP_PER_SM
    flops = 4.0 * b * h * seq * seq * d / (2 if prm["causal"] else 1)
    return dict(env_ns=env.now, flops=flops, events=run.recorders[rep.sm].events, params=prm,
                races=[] if check_races else None,
                fit=dict(smem_bytes=smem, registers=resident * regs, ctas_per_sm=resident), units=busy,
                work=dict(work_items=items, active_sms=len(per_sm), items_per_sm=len(rep.work), kv_tiles=kv_tiles,
                          kv_tiles_on_this_sm=sum(rep.work), resident_ctas=resident),
                grid=grid_summary(run, env.now))
