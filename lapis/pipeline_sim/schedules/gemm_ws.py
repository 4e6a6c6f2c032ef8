"""A warp-specialized Hopper GEMM: one TMA producer warp, `consumer_wgs` wgmma consumer warpgroups, and a
K ring of `stages` slots guarded by full/empty mbarriers (CUTLASS's sm90 warp-specialized mainloop).

Per CTA tile (block_m x block_n, bf16, fp32 accumulators), for each K block of block_k:
  producer: producer_acquire -> arrive.expect_tx -> TMA A box (block_m x block_k) + B box (block_n x block_k)
  TMA engine: holds the SM's load path for bytes / bandwidth share, then lands after the latency
  consumers: consumer_wait -> wgmma over their block_m / consumer_wgs rows (the tensor pipe is shared)
             -> consumer_release once the MMA completes
  epilogue: each consumer writes its C rows (block_m / consumer_wgs x block_n) back.
One representative SM runs the tiles it gets in the worst wave (tiles / SMs rounded up); its load
bandwidth is an equal share of L2 across the active SMs.
"""

from __future__ import annotations

import math

import simpy

from lapis.errors import LayoutError
from lapis.pipeline_sim.grid import grid_summary, run_sms
from lapis.pipeline_sim.pipeline import PipelineState, TmaPipeline
from lapis.pipeline_sim.races import HappensBefore
from lapis.pipeline_sim.units import occupy

DEFAULTS = dict(block_m=128, block_n=128, block_k=64, stages=4, consumer_wgs=2)


def parse_shape(shape: str) -> tuple[int, int, int]:
    try:
        m, n, k = (int(x) for x in shape.lower().split("x"))
    except ValueError:
        raise LayoutError("a GEMM shape is MxNxK", repr(shape), "e.g. --shape 8192x8192x8192") from None
    if min(m, n, k) < 1:
        raise LayoutError("GEMM extents must be positive", shape, "use M, N, K >= 1")
    return m, n, k


def check_fit(p, prm) -> dict:
    """Shared memory per CTA: the ring of A+B slots; rejects with the numbers."""
    slot = (prm["block_m"] + prm["block_n"]) * prm["block_k"] * 2
    smem = prm["stages"] * slot
    if smem > p["smem_bytes_per_block"]:
        raise LayoutError("the schedule does not fit shared memory",
                          f"{prm['stages']} stages x {slot} B = {smem} B > {p['smem_bytes_per_block']} B",
                          "lower stages or the block sizes")
    if prm["block_m"] % (64 * prm["consumer_wgs"]):
        raise LayoutError("each consumer warpgroup takes a multiple of 64 rows", prm["block_m"],
                          f"make block_m a multiple of {64 * prm['consumer_wgs']}")
    return dict(smem_bytes=smem)


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
    pipes = []

    def build(rec, grid, group):
        tensor, tma_path = simpy.Resource(env, 1), simpy.Resource(env, 1)
        pipe = TmaPipeline(env, "ring", prm["stages"], "producer", consumers, slot_bytes)
        pipe.attach(hb)
        pipes.append(pipe)
        landed, busy = {}, {"tensor": 0.0, "tma": 0.0}
        my_tiles = len(group.work)

        def tma(st, tile, kb, issue):
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
            st = PipelineState.producer_start(prm["stages"])
            for tile in range(my_tiles):
                for kb in range(k_blocks):
                    t0 = env.now
                    yield pipe.producer_acquire(st)
                    if env.now > t0:
                        rec.add("producer", "wait empty", t0, work_item=tile, k_index=kb, kind="wait")
                    pipe.producer_expect(st)
                    issue = hb and hb.op("producer", f"issue TMA {tile}.{kb}")
                    env.process(tma(PipelineState(st.stages, st.index, st.phase), tile, kb, issue))
                    rec.add("producer", "issue TMA", env.now, work_item=tile, k_index=kb)
                    st.advance()
            yield pipe.producer_tail(st)

        def consumer(role):
            st = PipelineState(prm["stages"])
            for tile in range(my_tiles):
                for kb in range(k_blocks):
                    t0 = env.now
                    yield pipe.consumer_wait(st, role)
                    if env.now > t0:
                        rec.add(role, "wait full", t0, work_item=tile, k_index=kb, kind="wait",
                                flow_from=landed.get((tile, kb)))
                    # queueing behind the other warpgroup's wgmma is a wait, not MMA time
                    yield from occupy(env, rec, tensor, mma_ns, busy, "tensor", role, "wgmma", work_item=tile,
                                      k_index=kb)
                    if hb:
                        hb.access(role, "ring", st.index, (tile, kb), "read")
                    pipe.consumer_release(st, role)
                    st.advance()
                t2 = env.now
                yield env.timeout(rows * prm["block_n"] * 2 / grid.share(reuse) + p["tma_latency_ns"])
                rec.add(role, "epilogue", t2, work_item=tile)

        procs = {"producer": env.process(producer())}
        procs.update({r: env.process(consumer(r)) for r in consumers})
        return procs, pipe.barriers, busy

    run = run_sms(env, p, per_sm, full, build)
    rep = run.slowest
    flops = 2.0 * m * n * k
    return dict(env_ns=env.now, flops=flops, events=run.recorders[rep.sm].events, fit=fit, params=prm,
                races=None if hb is None else hb.races() + [r for x in pipes for b in x.barriers for r in b.races],
                work=dict(tiles=tiles, active_sms=len(per_sm), tiles_per_sm=len(rep.work), k_blocks=k_blocks),
                units=run.busy[rep.sm], grid=grid_summary(run, env.now))
