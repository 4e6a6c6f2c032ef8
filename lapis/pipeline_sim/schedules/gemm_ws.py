"""A warp-specialized Hopper GEMM: one TMA producer warp, `consumer_wgs` wgmma consumer warpgroups, and a
K ring of `stages` slots guarded by full/empty mbarriers (CUTLASS's sm90 warp-specialized mainloop).

Per CTA tile (block_m x block_n, bf16, fp32 accumulators), for each K block of block_k:
  producer: producer_acquire -> arrive.expect_tx -> TMA A box (block_m x block_k) + B box (block_n x block_k)
  TMA engine: holds the SM's load path for bytes / bandwidth share, then lands after the latency
  consumers: consumer_wait -> issue the K block's wgmma (the tensor pipe is shared) -> commit_group ->
             wait_group 1 (the previous K block's wgmma complete) -> consumer_release of the previous slot,
             so one K block of wgmma stays in flight, as lapis/gpu/kernels/gemm_ws.cu does
  wgmma completion: the tensor pipe for FLOP / rate, then a fixed tail (wgmma_latency_ns less one
             m64n256k16's pipe time: about 55 cycles at every N in the H200 micro capture)
  epilogue: each consumer stores its C rows (block_m / consumer_wgs x block_n) from registers at the HBM
             share (written once), without waiting for them to land.
One CTA per tile (a non-persistent grid, one resident CTA per SM): every tile initializes a fresh ring and
ends with a CTA-wide barrier, so the ring drains and refills between tiles. CTA launch cost is not modelled
(the h200 profile's cta_turnover_ns is not charged here). Tiles are dealt to SMs by grid stride (lapis.pipeline_sim.grid); the representative SM is
the one with the most tiles, and its load bandwidth is an equal share across the active SMs.
"""

from __future__ import annotations

import math

import simpy

from lapis.errors import ScheduleError
from lapis.pipeline_sim.commit_groups import WgmmaGroups
from lapis.pipeline_sim.grid import grid_summary, run_sms
from lapis.pipeline_sim.pipeline import PipelineState, TmaPipeline
from lapis.pipeline_sim.races import HappensBefore
from lapis.pipeline_sim.units import occupy

DEFAULTS = dict(block_m=128, block_n=128, block_k=64, stages=4, consumer_wgs=2, mma_in_flight=1)


def parse_shape(shape: str) -> tuple[int, int, int]:
    try:
        m, n, k = (int(x) for x in shape.lower().split("x"))
    except ValueError:
        raise ScheduleError("a GEMM shape is MxNxK", repr(shape), "e.g. --shape 8192x8192x8192") from None
    if min(m, n, k) < 1:
        raise ScheduleError("GEMM extents must be positive", shape, "use M, N, K >= 1")
    return m, n, k


def check_fit(p, prm) -> dict:
    """Shared memory per CTA: the ring of A+B slots; rejects with the numbers."""
    slot = (prm["block_m"] + prm["block_n"]) * prm["block_k"] * 2
    smem = prm["stages"] * slot
    if smem > p["smem_bytes_per_block"]:
        raise ScheduleError("the schedule does not fit shared memory",
                            f"{prm['stages']} stages x {slot} B = {smem} B > {p['smem_bytes_per_block']} B",
                            "lower stages or the block sizes")
    if prm["block_n"] % 8 or prm["block_n"] > 256:
        raise ScheduleError("block_n is wgmma's N: a multiple of 8 up to 256 (PTX ISA wgmma .m64nNk16)",
                            prm["block_n"], "use a multiple of 8 in 8..256, e.g. 128")
    if prm["block_k"] % 16:
        raise ScheduleError("block_k is stepped by wgmma's K, 16 for bf16 (PTX ISA wgmma .m64nNk16)", prm["block_k"],
                            "use a multiple of 16, e.g. 64")
    if 128 * (1 + prm["consumer_wgs"]) > 1024:
        raise ScheduleError("a CTA has at most 1024 threads: a producer warpgroup and the consumer warpgroups",
                            f"128 x (1 + {prm['consumer_wgs']}) threads", "use consumer_wgs <= 7")
    acc = prm["block_m"] // prm["consumer_wgs"] * prm["block_n"] // 128
    if acc > 255:
        raise ScheduleError("each consumer thread holds its fp32 accumulators in registers (at most 255 per thread)",
                            f"{prm['block_m']} / {prm['consumer_wgs']} rows x {prm['block_n']} / 128 threads = {acc}",
                            "lower block_m or block_n, or add consumer warpgroups")
    n = prm["mma_in_flight"]
    if isinstance(n, bool) or n != int(n) or n < 0:
        raise ScheduleError("mma_in_flight is a count of K blocks of wgmma left in flight", n,
                            "use a whole number >= 0, e.g. --param mma_in_flight=1")
    if n >= prm["stages"]:
        raise ScheduleError("a consumer releases a slot only after `mma_in_flight` newer K blocks are issued, so the "
                            "ring needs more slots than that (else the next consumer_wait deadlocks)",
                            f"mma_in_flight {n} with stages {prm['stages']}",
                            f"use stages >= {n + 1} or mma_in_flight <= {prm['stages'] - 1}")
    if prm["block_m"] % (64 * prm["consumer_wgs"]):
        raise ScheduleError("each consumer warpgroup takes a multiple of 64 rows", prm["block_m"],
                            f"make block_m a multiple of {64 * prm['consumer_wgs']}")
    return dict(smem_bytes=smem)


class CtaExit:
    """The kernel's final __syncthreads: the next CTA on the SM (the next tile) starts when every role is done."""

    def __init__(self, env, roles: int):
        self.env, self.left, self.done = env, roles, env.event()

    def sync(self, rec, role: str, tile: int):
        self.left -= 1
        if not self.left:
            self.done.succeed()
        t0 = self.env.now
        yield self.done
        if self.env.now > t0:
            rec.add(role, "wait CTA exit", t0, work_item=tile, kind="wait")


def simulate(p, shape: str, params: dict, check_races: bool = False, full: bool = False) -> dict:
    """check_races: log slot accesses and barrier edges (races.HappensBefore) and return the races found.
    full: simulate every SM (lapis.pipeline_sim.grid), not only the one with the most tiles."""
    m, n, k = parse_shape(shape)
    prm = {**DEFAULTS, **params}
    fit = check_fit(p, prm)
    tiles = math.ceil(m / prm["block_m"]) * math.ceil(n / prm["block_n"])
    k_blocks = math.ceil(k / prm["block_k"])
    per_sm = [[k_blocks] * len(range(s, tiles, p["sm_count"])) for s in range(min(tiles, p["sm_count"]))]
    env = simpy.Environment()
    hb = HappensBefore(env) if check_races else None
    consumers = tuple(f"consumer{c}" for c in range(prm["consumer_wgs"]))
    slot_bytes = (prm["block_m"] + prm["block_n"]) * prm["block_k"] * 2
    # A tiles are read by every column of tiles, B tiles by every row: loaded bytes / compulsory bytes
    reuse = tiles * k_blocks * slot_bytes / ((m + n) * k * 2)
    tensor_rate = p.per_ns("tensor_flop_per_clk_sm")
    rows = prm["block_m"] // prm["consumer_wgs"]
    mma_ns = 2 * rows * prm["block_n"] * prm["block_k"] / tensor_rate
    # wgmma_latency_ns is one m64n256k16's issue-to-completion time; beyond its own pipe time (64*256*16*2 FLOP)
    # it is a fixed tail (about 55 cycles at N = 64, 128 and 256 in the H200 micro capture)
    tail_ns = max(0.0, p["wgmma_latency_ns"] - 2 * 64 * 256 * 16 / tensor_rate)
    pipes = []

    def build(rec, grid, group):
        tensor, tma_path = simpy.Resource(env, 1), simpy.Resource(env, 1)
        my_tiles = len(group.work)
        # one CTA per tile (non-persistent grid): each CTA initializes its own ring barriers
        ring = [TmaPipeline(env, "ring", prm["stages"], "producer", consumers, slot_bytes) for _ in range(my_tiles)]
        for pipe in ring:
            pipe.attach(hb)
        pipes.extend(ring)
        exits = [CtaExit(env, 1 + len(consumers)) for _ in range(my_tiles)]
        landed, busy = {}, {"tensor": 0.0, "tma": 0.0}

        def tma(pipe, st, tile, kb, issue):
            start = env.now
            with tma_path.request() as req:
                yield req
                ns = slot_bytes / grid.share(reuse)
                busy["tma"] += ns
                yield env.timeout(ns)
            yield env.timeout(p["tma_latency_ns"])
            landed[(tile, kb)] = rec.add("tma", "load A+B", start, work_item=tile, k_index=kb, kind="completion").id
            w = hb and hb.access(f"tma{tile}.{kb}", "ring", st.index, (tile, kb), "write", after=issue)
            pipe.tma_complete(st, node=w)

        def producer():
            for tile, pipe in enumerate(ring):
                st = PipelineState.producer_start(prm["stages"])
                for kb in range(k_blocks):
                    t0 = env.now
                    yield pipe.producer_acquire(st)
                    if env.now > t0:
                        rec.add("producer", "wait empty", t0, work_item=tile, k_index=kb, kind="wait")
                    pipe.producer_expect(st)
                    issue = hb and hb.op("producer", f"issue TMA {tile}.{kb}")
                    env.process(tma(pipe, PipelineState(st.stages, st.index, st.phase), tile, kb, issue))
                    rec.add("producer", "issue TMA", env.now, work_item=tile, k_index=kb)
                    st.advance()
                yield from exits[tile].sync(rec, "producer", tile)

        def wgmma(role, tile, kb):
            """One K block of wgmma: the tensor pipe for mma_ns, completion seen tail_ns later."""
            yield from occupy(env, rec, tensor, mma_ns, busy, "tensor", role, "wgmma", work_item=tile, k_index=kb)
            yield env.timeout(tail_ns)

        def release(role, pipe, st, tile, kb):
            if hb:
                hb.access(role, "ring", st.index, (tile, kb), "read")
            pipe.consumer_release(st, role)

        def consumer(role):
            # gemm_ws.cu (mma_in_flight 1): issue K block kb, commit, wait_group 1 (block kb-1 done), release
            # kb-1's slot. mma_in_flight 0: wait_group 0 and release kb's own slot.
            groups, lag = WgmmaGroups(env, role), prm["mma_in_flight"]
            for tile, pipe in enumerate(ring):
                st, held = PipelineState(prm["stages"]), []
                for kb in range(k_blocks):
                    t0 = env.now
                    yield pipe.consumer_wait(st, role)
                    if env.now > t0:
                        rec.add(role, "wait full", t0, work_item=tile, k_index=kb, kind="wait",
                                flow_from=landed.get((tile, kb)))
                    groups.issue(env.process(wgmma(role, tile, kb)))
                    groups.commit()
                    held.append((PipelineState(st.stages, st.index, st.phase), tile, kb))
                    if len(held) > lag:
                        yield from wait_group(groups, lag, role, tile, held[0][2])
                        release(role, pipe, *held.pop(0))
                    st.advance()
                yield from wait_group(groups, 0, role, tile, k_blocks - 1)
                for h in held:
                    release(role, pipe, *h)
                t2 = env.now  # registers -> global stores; the CTA exits without waiting for them to land
                yield env.timeout(rows * prm["block_n"] * 2 / grid.share(1))
                rec.add(role, "epilogue", t2, work_item=tile)
                yield from exits[tile].sync(rec, role, tile)

        def wait_group(groups, n, role, tile, kb):
            t0 = env.now
            yield groups.wait(n)
            if env.now > t0:
                rec.add(role, "wait wgmma", t0, work_item=tile, k_index=kb, kind="wait")

        procs = {"producer": env.process(producer())}
        procs.update({r: env.process(consumer(r)) for r in consumers})
        return procs, [b for x in ring for b in x.barriers], busy

    run = run_sms(env, p, per_sm, full, build)
    rep = run.slowest
    flops = 2.0 * m * n * k
    return dict(env_ns=env.now, flops=flops, events=run.recorders[rep.sm].events, fit=fit, params=prm,
                races=None if hb is None else hb.races() + [r for x in pipes for b in x.barriers for r in b.races],
                work=dict(tiles=tiles, active_sms=len(per_sm), tiles_per_sm=len(rep.work), k_blocks=k_blocks),
                units=run.busy[rep.sm], grid=grid_summary(run, env.now))
