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
from dataclasses import dataclass

from lapis.errors import ScheduleError
from lapis.pipeline_sim.commit_groups import WgmmaGroups
from lapis.pipeline_sim.pipeline import PipelineState
from lapis.pipeline_sim.schedule import Schedule
from lapis.pipeline_sim.tma import TmaEngine

DEFAULTS = dict(block_m=128, block_n=128, block_k=64, stages=4, consumer_wgs=2, mma_in_flight=1)


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


def resolve(p, dims: tuple, params: dict) -> tuple[dict, dict]:
    """The run's parameters (DEFAULTS, then the caller's) and the fit (shared memory bytes)."""
    prm = {**DEFAULTS, **params}
    return prm, check_fit(p, prm)


def tiles_per_sm(p, dims: tuple, prm: dict) -> list:
    """Output tiles dealt to SMs by grid stride; each tile is its count of K blocks."""
    m, n, k = dims
    tiles = math.ceil(m / prm["block_m"]) * math.ceil(n / prm["block_n"])
    k_blocks = math.ceil(k / prm["block_k"])
    return [[k_blocks] * len(range(s, tiles, p["sm_count"])) for s in range(min(tiles, p["sm_count"]))]


@dataclass(frozen=True)
class GemmCosts:
    """What the GEMM's ops take. mma_ns: one consumer's K block of wgmma on the tensor pipe (its rows x block_n x
    block_k); tail_ns: the wgmma's fixed completion tail beyond its pipe time (wgmma_latency_ns less one
    m64n256k16's pipe time: about 55 cycles at every N in the H200 micro capture); slot_bytes: one A+B slot;
    reuse: loaded bytes over compulsory bytes (A tiles are read by every column of tiles, B by every row);
    epilogue_bytes: one consumer's C rows (bf16)."""

    mma_ns: float
    tail_ns: float
    slot_bytes: int
    reuse: float
    epilogue_bytes: int
    k_blocks: int
    tiles: int

    @classmethod
    def of(cls, p, dims: tuple, prm: dict, flags: dict) -> GemmCosts:
        m, n, k = dims
        tiles = math.ceil(m / prm["block_m"]) * math.ceil(n / prm["block_n"])
        k_blocks = math.ceil(k / prm["block_k"])
        slot_bytes = (prm["block_m"] + prm["block_n"]) * prm["block_k"] * 2
        tensor_rate = p.per_ns("tensor_flop_per_clk_sm")
        rows = prm["block_m"] // prm["consumer_wgs"]
        return cls(mma_ns=2 * rows * prm["block_n"] * prm["block_k"] / tensor_rate,
                   tail_ns=max(0.0, p["wgmma_latency_ns"] - 2 * 64 * 256 * 16 / tensor_rate),
                   slot_bytes=slot_bytes, reuse=tiles * k_blocks * slot_bytes / ((m + n) * k * 2),
                   epilogue_bytes=rows * prm["block_n"] * 2, k_blocks=k_blocks, tiles=tiles)


class CtaExit:
    """The kernel's final __syncthreads: the next CTA on the SM (the next tile) starts when every role is done.

    The next CTA reuses the same shared memory (its ring has the same buffer name in the race check), so the
    exit is logged as a happens-before edge: every role's arrival comes before the exit, and the exit before
    whatever each role does for the next tile (the next CTA's TMA writes come after this CTA's reads)."""

    def __init__(self, env, roles: int):
        self.env, self.left, self.done = env, roles, env.event()
        self.arrivals, self.node = [], None  # hb nodes of the roles' arrivals; the exit's node

    def sync(self, ctx, role: str, tile: int):
        if ctx.hb is not None:
            self.arrivals.append(ctx.hb.op(role, f"arrive CTA {tile} exit"))
        self.left -= 1
        if not self.left:
            if ctx.hb is not None:
                self.node = ctx.hb.op(f"[cta{tile} exit]", f"CTA {tile} exits")
                for n in self.arrivals:
                    ctx.hb.edge(n, self.node)
            self.done.succeed()
        yield from ctx.waited(role, "wait CTA exit", self.done, work_item=tile)
        if ctx.hb is not None:
            ctx.hb.op(role, f"CTA {tile} exited", after=self.node)


def producer(ctx, ctas):
    """The TMA warp (gemm_ws.cu producer branch): per K block, acquire the slot, commit the A and B boxes."""
    for tile, (pipe, cta_exit) in enumerate(ctas):
        st = PipelineState.producer_start(ctx.prm["stages"])
        for kb in range(ctx.cost.k_blocks):
            yield from ctx.waited("producer", "wait empty", pipe.producer_acquire(st), work_item=tile, k_index=kb)
            pipe.producer_commit(st, token=(tile, kb), op="load A+B", writer=f"tma{tile}.{kb}", work_item=tile,
                                 k_index=kb)
            ctx.record("producer", "issue TMA", ctx.now, work_item=tile, k_index=kb)
            st.advance()
        yield from cta_exit.sync(ctx, "producer", tile)


def wgmma(ctx, role: str, tile: int, kb: int):
    """One K block of wgmma: the tensor pipe for mma_ns, its completion seen tail_ns later."""
    yield from ctx.occupy("tensor", ctx.cost.mma_ns, role, "wgmma", work_item=tile, k_index=kb)
    yield ctx.env.timeout(ctx.cost.tail_ns)


def consumer(ctx, role: str, ctas):
    """A consumer warpgroup (gemm_ws.cu consumer branch): per K block, wait for the slot, issue and commit its
    wgmma, wait_group mma_in_flight (the K block that many back is done) and release that block's slot; then
    the epilogue stores its C rows from registers at the SM's write share, not waiting for them to land."""
    groups, lag = WgmmaGroups(ctx.env, role), ctx.prm["mma_in_flight"]
    for tile, (pipe, cta_exit) in enumerate(ctas):
        st, held = PipelineState(ctx.prm["stages"]), []
        for kb in range(ctx.cost.k_blocks):
            slot = st.index
            yield from ctx.waited(role, "wait full", pipe.consumer_wait(st, role), work_item=tile, k_index=kb,
                                  flow=lambda: pipe.full[slot].last_completer)
            groups.issue(ctx.child(wgmma(ctx, role, tile, kb)))
            groups.commit()
            held.append((st.copy(), tile, kb))
            if len(held) > lag:
                yield from ctx.waited(role, "wait wgmma", groups.wait(lag), work_item=tile, k_index=held[0][2])
                release(pipe, role, *held.pop(0))
            st.advance()
        yield from ctx.waited(role, "wait wgmma", groups.wait(0), work_item=tile, k_index=ctx.cost.k_blocks - 1)
        for h in held:
            release(pipe, role, *h)
        t0 = ctx.now
        yield ctx.env.timeout(ctx.cost.epilogue_bytes / ctx.grid.share(1))
        ctx.record(role, "epilogue", t0, work_item=tile)
        yield from cta_exit.sync(ctx, role, tile)


def release(pipe, role: str, st, tile: int, kb: int) -> None:
    pipe.read(st, role, (tile, kb))
    pipe.consumer_release(st, role)


def launch(ctx) -> None:
    """One SM: a CTA per tile (a fresh ring and exit barrier each), one producer and the consumer warpgroups."""
    consumers = tuple(f"consumer{c}" for c in range(ctx.prm["consumer_wgs"]))
    tma = TmaEngine(ctx, reuse=ctx.cost.reuse)
    ctas = [(ctx.pipeline("ring", ctx.prm["stages"], "producer", consumers, ctx.cost.slot_bytes, tma=tma),
             CtaExit(ctx.env, 1 + len(consumers))) for _ in ctx.group.work]
    ctx.spawn("producer", producer(ctx, ctas))
    for role in consumers:
        ctx.spawn(role, consumer(ctx, role, ctas))


def summary(per_sm: list, rep, dims: tuple, prm: dict, cost: GemmCosts) -> dict:
    """The work of the run: output tiles, SMs with work, tiles on the representative SM, K blocks per tile."""
    return dict(tiles=cost.tiles, active_sms=len(per_sm), tiles_per_sm=len(rep.work), k_blocks=cost.k_blocks)


GEMM_WS = Schedule(
    name="h200-gemm-ws", description="warp-specialized GEMM: TMA producer warp, wgmma consumer warpgroups, K ring of "
    "full/empty mbarriers (shape MxNxK)", shape="gemm", defaults=DEFAULTS, resolve=resolve, work=tiles_per_sm,
    costs=GemmCosts.of, launch=launch, flops=lambda dims, prm: 2.0 * math.prod(dims), summary=summary)
SCHEDULES = (GEMM_WS,)
