"""A persistent warp-specialized GEMM, written with lapis's public schedule API only.

C (M x N) = A (M x K) . B (N x K)^T in bf16 with fp32 accumulators. One CTA per SM walks the output tiles
grid-stride (a persistent kernel, CUTLASS's KernelTmaWarpSpecializedPersistent shape):
- the producer warp, per K block: producer_acquire the ring slot, producer_commit the A box (block_m x block_k)
  and the B box (block_n x block_k); the ring runs on across tiles;
- `consumers` consumer warpgroups, each owning block_m / consumers rows, per K block: consumer_wait, issue the
  block's wgmma and commit it, wait_group 1, then consumer_release the previous block's slot (one K block of
  wgmma in flight); at the tile's end wait_group 0, release the last slot and store the tile's C rows.

Simulate it:
    lapis simulate --schedule examples/ws_gemm.py:WS_GEMM --shape 8192x8192x8192 --races
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lapis.errors import ScheduleError
from lapis.pipeline_sim import PipelineState, Schedule, TmaEngine, WgmmaGroups

DEFAULTS = dict(block_m=128, block_n=128, block_k=64, stages=4, consumers=2)


@dataclass(frozen=True)
class Costs:
    """ns per op from the profile: a consumer's K block of wgmma on the tensor pipe, its completion latency past
    the pipe, one C tile row block stored. slot_bytes: an A+B ring slot; reuse: loads served per HBM byte."""

    wgmma_ns: float
    latency_ns: float
    slot_bytes: int
    store_bytes: int
    reuse: float
    k_blocks: int


def costs(p, dims, prm, flags) -> Costs:
    m, n, k = dims
    rows = prm["block_m"] // prm["consumers"]
    rate = p.per_ns("tensor_flop_per_clk_sm")  # FLOP/ns per SM
    k_blocks = math.ceil(k / prm["block_k"])
    tiles = math.ceil(m / prm["block_m"]) * math.ceil(n / prm["block_n"])
    slot = (prm["block_m"] + prm["block_n"]) * prm["block_k"] * 2
    return Costs(wgmma_ns=2 * rows * prm["block_n"] * prm["block_k"] / rate,
                 latency_ns=max(0.0, p["wgmma_latency_ns"] - 2 * 64 * 256 * 16 / rate), slot_bytes=slot,
                 store_bytes=rows * prm["block_n"] * 2, reuse=tiles * k_blocks * slot / ((m + n) * k * 2),
                 k_blocks=k_blocks)


def resolve(p, dims, params):
    prm = {**DEFAULTS, **params}
    smem = prm["stages"] * (prm["block_m"] + prm["block_n"]) * prm["block_k"] * 2
    if smem > p["smem_bytes_per_block"]:
        raise ScheduleError("the ring does not fit shared memory", f"{smem} B > {p['smem_bytes_per_block']} B",
                            "lower stages or the block sizes")
    if prm["block_m"] % (64 * prm["consumers"]):
        raise ScheduleError("each consumer warpgroup owns a multiple of 64 rows", prm["block_m"],
                            f"make block_m a multiple of {64 * prm['consumers']}")
    return prm, dict(smem_bytes=smem)


def tiles_per_sm(p, dims, prm):
    """Output tiles dealt grid-stride to one CTA per SM; each tile is its index."""
    m, n, _ = dims
    tiles = math.ceil(m / prm["block_m"]) * math.ceil(n / prm["block_n"])
    return [list(range(s, tiles, p["sm_count"])) for s in range(min(tiles, p["sm_count"]))]


def producer(ctx, ring):
    st = PipelineState.producer_start(ctx.prm["stages"])
    for tile in ctx.group.work:
        for kb in range(ctx.cost.k_blocks):
            yield from ctx.waited("producer", "wait empty", ring.producer_acquire(st), work_item=tile, k_index=kb,
                                  flow=lambda s=st.index: ring.empty[s].last_completer)
            ring.producer_commit(st, token=(tile, kb), op="TMA A+B", work_item=tile, k_index=kb)
            ctx.record("producer", "issue TMA", ctx.now, work_item=tile, k_index=kb)
            st.advance()
    yield ring.producer_tail(st)


def wgmma(ctx, role, tile, kb):
    yield from ctx.occupy("tensor", ctx.cost.wgmma_ns, role, "wgmma", work_item=tile, k_index=kb)
    yield ctx.env.timeout(ctx.cost.latency_ns)


def consumer(ctx, ring, role):
    st, groups = PipelineState(ctx.prm["stages"]), WgmmaGroups(ctx.env, role)
    for tile in ctx.group.work:
        prev = None
        for kb in range(ctx.cost.k_blocks):
            slot = st.index
            yield from ctx.waited(role, "wait full", ring.consumer_wait(st, role), work_item=tile, k_index=kb,
                                  flow=lambda: ring.full[slot].last_completer)
            ring.read(st, role, (tile, kb))
            groups.issue(ctx.child(wgmma(ctx, role, tile, kb)))
            groups.commit()
            if prev is not None:
                yield from ctx.waited(role, "wait wgmma", groups.wait(1), work_item=tile, k_index=kb)
                ring.consumer_release(prev, role)
            prev = st.copy()
            st.advance()
        yield from ctx.waited(role, "wait wgmma", groups.wait(0), work_item=tile, k_index=ctx.cost.k_blocks - 1)
        ring.consumer_release(prev, role)
        t0 = ctx.now
        yield ctx.env.timeout(ctx.cost.store_bytes / ctx.grid.share(1))
        ctx.record(role, "store C", t0, work_item=tile)


def launch(ctx):
    consumers = tuple(f"consumer{i}" for i in range(ctx.prm["consumers"]))
    ring = ctx.pipeline("ring", ctx.prm["stages"], "producer", consumers, ctx.cost.slot_bytes,
                        tma=TmaEngine(ctx, reuse=ctx.cost.reuse))
    ctx.spawn("producer", producer(ctx, ring))
    for role in consumers:
        ctx.spawn(role, consumer(ctx, ring, role))


WS_GEMM = Schedule(
    name="example-ws-gemm", description="persistent warp-specialized GEMM (examples/ws_gemm.py)", shape="gemm",
    defaults=DEFAULTS, resolve=resolve, work=tiles_per_sm, costs=costs, launch=launch,
    flops=lambda dims, prm: 2.0 * math.prod(dims),
    summary=lambda per_sm, rep, dims, prm, cost: dict(tiles_on_this_sm=len(rep.work), k_blocks=cost.k_blocks))
