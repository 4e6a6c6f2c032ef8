"""Consumer Blackwell (sm_120, RTX 5090) attention forward (fp16, fp32 accumulation): the Emmy compiler's
move stack (the write-up emmy-flashattention2-consumer-blackwell, not in this repository), as simpy processes.

Per CTA (`warps` warps, each owning 16*fm query rows of one (batch, head)) and K/V tile j of block_n keys, per
warp: S_j = Q K_j^T (mma.sync), softmax (MUFU ex2 + FMA pipe), O rescale (FMA pipe), O += P_j V_j (mma.sync).
sm120 semantics: mma.sync is synchronous per warp (no async completion: a warp's ops run in program order);
cp.async fills complete per warp as a commit group (wait_group), then __syncthreads (an MBarrier of count
`warps` here) publishes the slab; ldmatrix drains smem into registers; TMA completes through an mbarrier
(TmaPipeline, issued by warp 0). Units: per SM sub-partition (4 per SM, warp w on SMSP w % 4) a quarter of the
SM's tensor, MUFU and FMA rates; per SM one LSU/shared-memory path (smem_bytes_per_clk_sm, one wavefront a
clock) and the load path (an equal share of L2 across the SMs running, then l2_latency_ns or tma_latency_ns).
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
                                                   is ldmatrix-ed once for both (block_m 128, grid 256)
refused (warp-scoped barrier, fast exp, deeper rings, warp specialization 213 us): not schedules here.
Write-up times marked ~ are derived from its speed-up factors (612/1.20; 233/1.05; /1.04); 271, 233, 612 and
204.7 us are stated. The write-up's geometry per move is not stated except the final one (w4x1/f2x8/k4: 4 warps,
128 rows, 254 registers, 32 KB smem); every move here uses 4 warps and block_n 64, fm 1 before m07.
Modelled assumptions stated here (not per move): FMA-pipe ops per score (attention_h200.FMA_OPS_PER_SCORE,
4: no exp2 folding, which the write-up refused), DIRECT_BYTES_PER_WAVEFRONT, regs_per_thread (the write-up's
254 for every move). Not modelled: L1 hits of the direct loads, mma.sync/ldmatrix latency, bank conflicts,
libm expf's extra instructions, the store of O's latency.
"""

from __future__ import annotations

import simpy

from lapis.errors import ScheduleError
from lapis.pipeline_sim.causal import MASK_OPS_PER_SCORE, dispatch, tile_span
from lapis.pipeline_sim.grid import grid_summary, run_sms
from lapis.pipeline_sim.mbarrier import MBarrier
from lapis.pipeline_sim.pipeline import PipelineState, TmaPipeline
from lapis.pipeline_sim.schedules.attention_h200 import FMA_OPS_PER_SCORE, parse_shape
from lapis.pipeline_sim.units import occupy

__all__ = ["DEFAULTS", "VARIANTS", "parse_shape", "simulate"]

DEFAULTS = dict(warps=4, block_n=64, regs_per_thread=254, causal=0)
_STEPS = ["tensor_cores", "staging", "c2a", "q_hoist", "ring", "tma", "reg_tile"]
_NAMES = ["sm120-m01-tensor-cores", "sm120-m02-smem-staging", "sm120-m03-c-to-a-repack", "sm120-m04-q-hoist",
          "sm120-m05-cp-async-ring", "sm120-m06-tma", "sm120-m07-register-tiling"]
VARIANTS = {name: {s: True for s in _STEPS[:i + 1]} for i, name in enumerate(_NAMES)}
UNMODELLED: set = set()
MEASURED_US = {"sm120-m01-tensor-cores": 612.0, "sm120-m02-smem-staging": 612.0 / 1.20,
               "sm120-m03-c-to-a-repack": 271.0, "sm120-m04-q-hoist": 233.0,
               "sm120-m05-cp-async-ring": 233.0 / 1.05, "sm120-m06-tma": 233.0 / 1.05 / 1.04,
               "sm120-m07-register-tiling": 204.7}
SMSP_PER_SM = 4  # 680 tensor cores / 170 SMs (profile source); one warp scheduler, tensor core, SFU each
DIRECT_BYTES_PER_WAVEFRONT = 64  # m01 operand loads: one 16-bit element per lane per load instruction
WAVEFRONT_BYTES = 128  # cp.async 16 B x 32 lanes = 4 wavefronts; ldmatrix.x4 512 B = 4 wavefronts


def simulate(p, shape: str, params: dict, variant: str, check_races: bool = False, full: bool = False) -> dict:
    """check_races: accepted for the common interface; the sm120 schedules log no slot accesses (races None).
    full: simulate every SM (lapis.pipeline_sim.grid), not only the busiest."""
    b, h, seq, d = parse_shape(shape)
    f = VARIANTS[variant]
    prm = {**DEFAULTS, **params}
    warps, bn = prm["warps"], prm["block_n"]
    fm = 2 if f.get("reg_tile") else 1
    rows = 16 * fm  # per warp (m16 atoms)
    bm = warps * rows
    if d % 16:
        raise ScheduleError("D is mma.sync's K for QK^T (k16 steps)", f"D = {d}", "use a multiple of 16, e.g. 128")
    if bn < 16 or bn % 16 or seq % bn or seq % bm:
        raise ScheduleError("L must be a multiple of the tiles", f"L = {seq}, block_m {bm} ({warps} warps x {rows} "
                            f"rows), block_n {bn}", "pad L or pick warps/block_n (multiples of 16) dividing it")
    if "tensor_flop_per_clk_sm" not in p.values or "smem_bytes_per_clk_sm" not in p.values:
        raise ScheduleError("sm120 schedules need an sm120 profile", f"profile {p.name} ({p.arch})",
                            "use --gpu rtx5090")
    staged = f.get("staging", False)
    slots = 2 if f.get("ring") else 1
    tile_bytes = bn * d * 2
    smem = (slots * 2 * tile_bytes if staged else 0) + (0 if f.get("q_hoist") or not staged else bm * d * 2) \
        + (0 if f.get("c2a") else bm * bn * 2)  # K/V slabs, Q slab (re-read), P hand-off slab
    if smem > p["smem_bytes_per_block"]:
        raise ScheduleError("the schedule does not fit shared memory",
                            f"{slots} slot(s) x K+V {2 * tile_bytes} B + Q/P slabs = {smem} B > "
                            f"{p['smem_bytes_per_block']} B per block", "lower block_n or warps")
    regs = warps * 32 * prm["regs_per_thread"]
    if prm["regs_per_thread"] > 255 or regs > p["registers_per_sm"]:
        raise ScheduleError("the CTA does not fit the register file", f"{warps} warps x 32 x {prm['regs_per_thread']} "
                            f"registers = {regs} > {p['registers_per_sm']} (at most 255 per thread)",
                            "lower warps or regs_per_thread")
    resident_limit = min(p["registers_per_sm"] // regs, p["max_warps_per_sm"] // warps,
                         p["smem_bytes_per_sm"] // smem if smem else 10 ** 9)
    items = b * h * (seq // bm)
    kv = seq // bn
    spans = [tile_span(q, kv, bm, bn, bool(prm["causal"])) for q in range(seq // bm)]  # Q tile fastest in the grid
    weights = [spans[i % len(spans)][0] for i in range(items)]
    per_sm = [[spans[i % len(spans)] for i in sm] for sm in dispatch(weights, p["sm_count"])]
    env = simpy.Environment()
    clk = p["clock_ghz"]
    t_rate, m_rate, f_rate = (p.per_ns(k) / SMSP_PER_SM for k in ("tensor_flop_per_clk_sm",
                                                                   "mufu_ex2_per_clk_sm", "fma_per_clk_sm"))
    lsu_rate = p["smem_bytes_per_clk_sm"] / WAVEFRONT_BYTES * clk  # wavefronts per ns
    gemm_ns = 2 * rows * bn * d / t_rate
    mufu_ns = rows * bn / m_rate
    fma_ns = (rows * bn * FMA_OPS_PER_SCORE[False] + rows * d) / f_rate
    mask_ns = rows * bn * MASK_OPS_PER_SCORE / f_rate  # a diagonal tile's scores, masked once in registers

    def build(rec, grid, group):
        """One SM's units and CTA slots, running the CTAs of `group.work` (their spans), `resident` at a time."""
        my = group.work
        my_items = len(my)
        resident = min(resident_limit, my_items)
        tensors, mufus, fmas = ([simpy.Resource(env, 1) for _ in range(SMSP_PER_SM)] for _ in range(3))
        lsu, load_path = simpy.Resource(env, 1), simpy.Resource(env, 1)
        busy = dict(tensor=0.0, mufu=0.0, fma=0.0, lsu=0.0, l2=0.0)
        barriers, procs, ctx_ring = [], {}, {}  # grow as CTAs start (run_sms reads them after the run)

        def use(unit, name, ns, role, op, **kw):
            if ns > 0:
                yield from occupy(env, rec, unit, ns, busy, name, role, op, **kw)

        def lsu_bytes(nbytes, per_wavefront, role, op, **kw):
            yield from use(lsu, "lsu", nbytes / per_wavefront / lsu_rate, role, op, **kw)

        def over_l2(nbytes, reuse, role, op, **kw):
            """The load path at the SM's bandwidth share when it takes the bytes: K/V serve every Q tile of a
            head (reuse L / block_m); Q read and O written once are compulsory HBM traffic (reuse 1)."""
            yield from occupy(env, rec, load_path, lambda: nbytes / grid.share(reuse), busy, "l2", role, op, **kw)

        def gmem(nbytes, latency, role, op, reuse=seq // bm, **kw):
            yield from over_l2(nbytes, reuse, role, op, **kw)
            yield env.timeout(latency)

        def sync(bar, n, role, what, **kw):
            """__syncthreads as the n-th (0-based) phase of a count-`warps` barrier."""
            t0 = env.now
            bar.arrive(role)
            yield bar.wait(n % 2, role)
            if env.now > t0:
                rec.add(role, f"wait {what}", t0, kind="wait", **kw)

        def fill(nbytes, role, item, j):
            """cp.async: this warp's share of a K+V tile; returns the commit group's completion process."""
            yield from lsu_bytes(nbytes, WAVEFRONT_BYTES, role, "cp.async K+V", work_item=item, k_index=j)
            return env.process(gmem(nbytes, p["l2_latency_ns"], "l2", "cp.async land", work_item=item, k_index=j))

        def warp(role, smsp, item, span, ctx):
            visits, first_masked = span
            bar, ring = ctx["bar"], ctx["ring"]
            tensor, mufu, fma = tensors[smsp], mufus[smsp], fmas[smsp]
            w = ctx["roles"].index(role)
            share_bytes = 2 * tile_bytes // warps
            n_sync, groups = 0, {}
            st = PipelineState(2) if ring is not None else None
            pst = PipelineState.producer_start(2) if ring is not None else None

            def tma_issue(j):
                t0 = env.now
                yield ring.producer_acquire(pst)
                if env.now > t0:
                    rec.add(role, "wait K/V slot", t0, kind="wait", work_item=item, k_index=j)
                ring.producer_expect(pst)
                env.process(tma_land(PipelineState(2, pst.index, pst.phase), item, j))
                pst.advance()

            if not f.get("tma") and staged and f.get("ring"):
                groups[0] = yield from fill(share_bytes, role, item, 0)
            if ring is not None and w == 0:
                yield from tma_issue(0)
            if staged:  # the warp's Q rows from HBM, once (compulsory): into the Q slab, or (m04 on) registers
                yield from lsu_bytes(rows * d * 2, WAVEFRONT_BYTES, role, "load Q", work_item=item)
                yield from gmem(rows * d * 2, p["l2_latency_ns"], role, "Q from HBM (waited)", reuse=1,
                              work_item=item)
            for j in range(visits):
                kw = dict(work_item=item, k_index=j)
                if not staged:  # m01: K/V and Q operands straight from gmem, every tile, waited; Q's first read is HBM
                    qb = rows * d * 2
                    yield from lsu_bytes(2 * tile_bytes + qb, DIRECT_BYTES_PER_WAVEFRONT, role, "ld.global K/V", **kw)
                    if j == 0:
                        yield from over_l2(qb, 1, role, "Q from HBM", **kw)
                    yield from gmem(2 * tile_bytes + qb * (j > 0), p["l2_latency_ns"], role, "K/V from L2 (waited)",
                                    **kw)
                elif ring is not None:  # m06: TMA into a 2-slot mbarrier ring
                    if w == 0 and j + 1 < visits:
                        yield from tma_issue(j + 1)
                    t0 = env.now
                    yield ring.consumer_wait(st, role)
                    if env.now > t0:
                        rec.add(role, "wait K/V (mbarrier)", t0, kind="wait", **kw)
                else:
                    if f.get("ring"):  # wait_group 1: tile j's group; tile j+1's is issued after the barrier
                        t0 = env.now
                        yield groups.pop(j)
                    else:
                        g = yield from fill(share_bytes, role, item, j)
                        t0 = env.now
                        yield g
                    if env.now > t0:
                        rec.add(role, "wait cp.async group", t0, kind="wait", **kw)
                    yield from sync(bar, n_sync, role, "__syncthreads (slab full)", **kw)
                    n_sync += 1
                    if f.get("ring") and j + 1 < visits:
                        groups[j + 1] = yield from fill(share_bytes, role, item, j + 1)
                if staged:
                    qb = 0 if f.get("q_hoist") else rows * d * 2
                    yield from lsu_bytes(tile_bytes + qb, WAVEFRONT_BYTES, role, "ldmatrix K (+Q)", **kw)
                yield from use(tensor, "tensor", gemm_ns, role, "mma.sync QK", **kw)
                yield from use(mufu, "mufu", mufu_ns, role, "softmax ex2", **kw)
                if j >= first_masked:
                    yield from use(fma, "fma", mask_ns, role, "causal mask", **kw)
                yield from use(fma, "fma", fma_ns, role, "softmax FMA + O rescale", **kw)
                if not f.get("c2a"):
                    yield from lsu_bytes(2 * rows * bn * 2, WAVEFRONT_BYTES, role, "P via smem", **kw)
                if staged:
                    yield from lsu_bytes(tile_bytes, WAVEFRONT_BYTES, role, "ldmatrix V", **kw)
                yield from use(tensor, "tensor", gemm_ns, role, "mma.sync PV", **kw)
                if ring is not None:
                    ring.consumer_release(st, role)
                    st.advance()
                elif staged and not f.get("ring"):
                    yield from sync(bar, n_sync, role, "__syncthreads (slab free)", **kw)
                    n_sync += 1
            yield from lsu_bytes(rows * d * 2, WAVEFRONT_BYTES, role, "store O", work_item=item)
            yield from over_l2(rows * d * 2, 1, role, "store O", work_item=item)

        def tma_land(pst, item, j):
            yield from gmem(2 * tile_bytes, p["tma_latency_ns"], "tma", "TMA K+V", work_item=item, k_index=j)
            ctx_ring[item].tma_complete(pst)


        def cta(slot, item, span):
            roles = tuple(f"cta{slot}.w{w}" for w in range(warps))
            bar = MBarrier(env, f"cta{slot}.item{item}.syncthreads", warps, roles)
            barriers.append(bar)
            ring = None
            if f.get("tma"):
                ring = TmaPipeline(env, f"cta{slot}.item{item}.KV", 2, roles[0], roles, 2 * tile_bytes)
                barriers.extend(ring.barriers)
                ctx_ring[item] = ring
            ctx = dict(bar=bar, ring=ring, roles=roles)
            ps = [env.process(warp(r, (slot * warps + w) % SMSP_PER_SM, item, span, ctx))
                  for w, r in enumerate(roles)]
            for r, pr in zip(roles, ps):
                procs[f"{r}.item{item}"] = pr
            yield env.all_of(ps)

        def slot_proc(slot):
            for item in range(slot, my_items, resident):
                yield from cta(slot, item, my[item])

        for s in range(resident):
            procs[f"slot{s}"] = env.process(slot_proc(s))
        return procs, barriers, busy

    run = run_sms(env, p, per_sm, full, build, cost=lambda w: sum(v for v, _ in w))
    rep = run.slowest
    my, resident = rep.work, min(resident_limit, len(rep.work))
    busy = dict(run.busy[rep.sm])
    for u in ("tensor", "mufu", "fma"):  # per-SMSP units: busy as a fraction of the SM's rate
        busy[u] /= SMSP_PER_SM
    flops = 4.0 * b * h * seq * seq * d / (2 if prm["causal"] else 1)  # the FA benchmarks' convention
    return dict(env_ns=env.now, flops=flops, events=run.recorders[rep.sm].events,
                params={**prm, "fm": fm, "block_m": bm},
                races=[] if check_races else None,
                fit=dict(smem_bytes=smem, registers=regs, ctas_per_sm=resident), units=busy,
                work=dict(work_items=items, active_sms=len(per_sm), items_per_sm=len(my), kv_tiles=kv,
                          kv_tiles_on_this_sm=sum(v for v, _ in my), masked_tiles_on_this_sm=sum(v - m for v, m in my),
                          resident_ctas=resident),
                grid=grid_summary(run, env.now))
