"""An FA3-style attention forward mainloop, written with lapis's public schedule API only.

One persistent CTA per SM walks the work items (a 128-row Q tile of one batch x head) grid-stride. Its roles, as
FlashAttention-3's hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp has them:
- the producer warp: per item, the Q tile (a one-slot pipeline both consumers read), then K and V tiles into two
  rings, K_{j+1} before V_j (the order the consumers free them);
- two consumer warpgroups, 64 rows each, taking turns at the tensor pipe (ping-pong: warpgroup i's turn is named
  barrier 1 + i, which it bar.syncs and the other warpgroup bar.arrives once its own GEMMs are issued), and inside
  each turn the intra-warpgroup overlap: QK_j and PV_{j-1} issued back to back, wait_group 1 returns S_j, the
  softmax of tile j runs while PV_{j-1} is still on the pipe, then wait_group 0 and the O rescale.

Costs (the `Costs` model): a wgmma over a 64-row tile at the profile's tensor rate; a softmax tile as exp2 on the
MUFU pipe plus `fma_ops` FMA-pipe operations per score, on the SM's softmax unit (one warpgroup's softmax at a
time: a first-order model); the O rescale as one FMA per output element.

Simulate it:
    lapis simulate --schedule examples/fa3_attention.py:FA3 --shape 8x16x4096x128 --races
"""

from __future__ import annotations

from dataclasses import dataclass

from lapis.errors import ScheduleError
from lapis.pipeline_sim import PipelineState, Schedule, TmaEngine, WgmmaGroups

DEFAULTS = dict(block_m=128, block_n=128, stages=2, fma_ops=4)
WG_THREADS = 128


@dataclass(frozen=True)
class Costs:
    """ns per op: `gemm_ns` one 64-row wgmma (QK or PV); `softmax_ns` one 64 x block_n softmax tile; `rescale_ns` one
    O rescale (64 x D); `latency_ns` a wgmma's completion past the pipe. Bytes: a Q tile, a K or V tile."""

    gemm_ns: float
    softmax_ns: float
    rescale_ns: float
    latency_ns: float
    q_bytes: int
    tile_bytes: int
    kv_tiles: int
    q_tiles: int


def costs(p, dims, prm, flags) -> Costs:
    b, h, seq, d = dims
    bm, bn = prm["block_m"], prm["block_n"]
    rate = p.per_ns("tensor_flop_per_clk_sm")
    scores = 64 * bn
    return Costs(gemm_ns=2 * 64 * bn * d / rate,
                 softmax_ns=scores / p.per_ns("mufu_ex2_per_clk_sm") + scores * prm["fma_ops"] / p.per_ns(
                     "fma_per_clk_sm"),
                 rescale_ns=64 * d / p.per_ns("fma_per_clk_sm"),
                 latency_ns=max(0.0, p["wgmma_latency_ns"] - 2 * 64 * 256 * 16 / rate),
                 q_bytes=bm * d * 2, tile_bytes=bn * d * 2, kv_tiles=seq // bn, q_tiles=seq // bm)


def resolve(p, dims, params):
    prm = {**DEFAULTS, **params}
    _, _, seq, d = dims
    if prm["block_m"] != 128:
        raise ScheduleError("two consumer warpgroups of 64 rows make a 128-row Q tile", prm["block_m"], "block_m=128")
    if seq % prm["block_m"] or seq % prm["block_n"]:
        raise ScheduleError("L must be a multiple of the tiles", f"L = {seq}", "pad L or pick tiles that divide it")
    smem = prm["block_m"] * d * 2 + 2 * prm["stages"] * prm["block_n"] * d * 2
    if smem > p["smem_bytes_per_block"]:
        raise ScheduleError("Q and the K and V rings do not fit shared memory",
                            f"{smem} B > {p['smem_bytes_per_block']} B", "lower stages or block_n")
    return prm, dict(smem_bytes=smem)


def items_per_sm(p, dims, prm):
    """Work items (batch x head x Q tile) dealt grid-stride to one CTA per SM; each item is its index."""
    b, h, seq, _ = dims
    items = b * h * (seq // prm["block_m"])
    return [list(range(s, items, p["sm_count"])) for s in range(min(items, p["sm_count"]))]


def producer(ctx, q, k, v):
    """FA3's load(): Q once per item, then K_0, and for each tile K_{j+1} before V_j."""
    qs, ks, vs = (PipelineState.producer_start(x.stages) for x in (q, k, v))
    n = ctx.cost.kv_tiles
    for item in ctx.group.work:
        yield from acquire_commit(ctx, q, qs, (item, 0), "Q", item, 0)
        yield from acquire_commit(ctx, k, ks, (item, 0), "K", item, 0)
        for j in range(n):
            if j + 1 < n:
                yield from acquire_commit(ctx, k, ks, (item, j + 1), "K", item, j + 1)
            yield from acquire_commit(ctx, v, vs, (item, j), "V", item, j)
    for pipe, st in ((q, qs), (k, ks), (v, vs)):
        yield pipe.producer_tail(st)


def acquire_commit(ctx, pipe, st, token, what, item, j):
    slot = st.index
    yield from ctx.waited("producer", f"wait {what} slot", pipe.producer_acquire(st), work_item=item, k_index=j,
                          flow=lambda: pipe.empty[slot].last_completer)
    pipe.producer_commit(st, token=token, op=f"TMA {what}", work_item=item, k_index=j)
    st.advance()


def gemm(ctx, groups, role, op, item, j):
    """wgmma.mma_async on the tensor pipe (the warpgroup goes on), then commit_group."""
    def run():
        yield from ctx.occupy("tensor", ctx.cost.gemm_ns, role, op, work_item=item, k_index=j)
        yield ctx.env.timeout(ctx.cost.latency_ns)
    groups.issue(ctx.child(run()))
    groups.commit()


def consumer(ctx, i, q, k, v, turns):
    """FA3's mma(): per K/V tile, in warpgroup i's turn, QK_j and PV_{j-1} back to back; softmax_j under PV_{j-1}."""
    role, other = f"consumer{i}", turns[(i + 1) % 2]
    qs, ks, vs = (PipelineState(x.stages) for x in (q, k, v))
    g = WgmmaGroups(ctx.env, role)
    if i == 1:
        turns[0].arrive(role, WG_THREADS)  # the first turn goes to warpgroup 0
    for item in ctx.group.work:
        yield from wait(ctx, q, qs, role, "Q", item, 0)
        held = None  # the V state of the tile whose PV is still to issue
        for j in range(ctx.cost.kv_tiles):
            yield from wait(ctx, k, ks, role, "K", item, j)
            yield from turn(ctx, turns[i], role, item, j)
            if held:
                yield from wait(ctx, v, held, role, "V", item, j - 1)
            gemm(ctx, g, role, "wgmma QK", item, j)
            if held:
                gemm(ctx, g, role, "wgmma PV", item, j - 1)
            other.arrive(role, WG_THREADS, event=ctx.rec.last_id(role))
            yield from ctx.waited(role, "wait wgmma (wait_group 1)", g.wait(1 if held else 0), work_item=item,
                                  k_index=j)
            k.consumer_release(ks, role)
            yield from ctx.occupy("softmax", ctx.cost.softmax_ns, role, "softmax", work_item=item, k_index=j)
            if held:
                yield from ctx.waited(role, "wait wgmma (wait_group 0)", g.wait(0), work_item=item, k_index=j)
                v.consumer_release(held, role)
            yield from ctx.occupy("softmax", ctx.cost.rescale_ns, role, "O rescale", work_item=item, k_index=j)
            held = vs.copy()
            vs.advance()
            ks.advance()
        yield from last_pv(ctx, g, v, held, turns, i, item)
        q.consumer_release(qs, role)
        qs.advance()
        t0 = ctx.now
        yield ctx.env.timeout(ctx.cost.q_bytes / 2 / ctx.grid.share(1))
        ctx.record(role, "store O", t0, work_item=item)


def last_pv(ctx, g, v, vs, turns, i, item):
    """The item's last PV, in a turn of its own."""
    role, j = f"consumer{i}", ctx.cost.kv_tiles - 1
    yield from turn(ctx, turns[i], role, item, j)
    yield from wait(ctx, v, vs, role, "V", item, j)
    gemm(ctx, g, role, "wgmma PV", item, j)
    turns[(i + 1) % 2].arrive(role, WG_THREADS, event=ctx.rec.last_id(role))
    yield from ctx.waited(role, "wait wgmma (wait_group 0)", g.wait(0), work_item=item, k_index=j)
    v.consumer_release(vs, role)


def wait(ctx, pipe, st, role, what, item, j):
    slot = st.index
    yield from ctx.waited(role, f"wait {what}", pipe.consumer_wait(st, role), work_item=item, k_index=j,
                          flow=lambda: pipe.full[slot].last_completer)
    pipe.read(st, role, (item, j))


def turn(ctx, bar, role, item, j):
    yield from ctx.waited(role, f"wait GEMM turn (bar.sync {bar.bar_id})", bar.sync(role, WG_THREADS), work_item=item,
                          k_index=j, flow=lambda: bar.last_completer)


def launch(ctx):
    consumers = ("consumer0", "consumer1")
    kv = TmaEngine(ctx, style="transfer", reuse=ctx.cost.q_tiles)
    q_tma = TmaEngine(ctx, style="transfer", latency_ns=ctx.p["tma_latency_hbm_ns"])
    q = ctx.pipeline("Q", 1, "producer", consumers, ctx.cost.q_bytes, tma=q_tma)
    k = ctx.pipeline("K", ctx.prm["stages"], "producer", consumers, ctx.cost.tile_bytes, tma=kv)
    v = ctx.pipeline("V", ctx.prm["stages"], "producer", consumers, ctx.cost.tile_bytes, tma=kv)
    turns = [ctx.named_barrier(f"GEMM turn of {c}", 1 + i, 2 * WG_THREADS,
                               {c: WG_THREADS, consumers[1 - i]: WG_THREADS}) for i, c in enumerate(consumers)]
    ctx.spawn("producer", producer(ctx, q, k, v))
    for i in range(2):
        ctx.spawn(consumers[i], consumer(ctx, i, q, k, v, turns))


FA3 = Schedule(
    name="example-fa3", description="FA3-style attention: producer, 2 consumer WGs, ping-pong, intra-WG overlap "
    "(examples/fa3_attention.py)", shape="attention", defaults=DEFAULTS, resolve=resolve, work=items_per_sm,
    costs=costs, launch=launch, units=("tensor", "softmax", "tma"),
    flops=lambda dims, prm: 4.0 * dims[0] * dims[1] * dims[2] ** 2 * dims[3],
    summary=lambda per_sm, rep, dims, prm, cost: dict(items_on_this_sm=len(rep.work), kv_tiles=cost.kv_tiles))
