"""Hopper attention forward (bf16, fp32 accumulation), the canonical progression s1..s8, as simpy processes.

One event per tile-level operation: a TMA box, one wgmma over a tile, a softmax chunk, an O rescale.
Per work item (one Q tile of block_m rows of one (batch, head)) and K/V tile j:
  S_j = Q K_j^T (tensor pipe), P_j = softmax chunk (MUFU ex2 + FMA pipe), O += P_j V_j (tensor pipe),
  and an O rescale (FMA pipe) whenever the row maximum moved.
Units are shared per SM: the tensor pipe, MUFU, the FMA pipe and the TMA load path (an equal share of L2
across the active SMs). The representative SM runs the work items of the fullest wave.

What each step changes (the one change of the canonical table):
  s1 serial: one warpgroup loads (and waits for) Q, K_j, V_j itself, then QK, softmax, PV, each waited for.
  s2 ws-ring: a producer warp fills a K/V ring of `stages` slots; the consumer overlaps with the loads.
  s3 two-consumers: two consumer warpgroups, 64 rows each of a 128-row Q tile, share the ring and the units.
  s4 pingpong: the two warpgroups take turns on the tensor pipe (named barriers), so one's softmax overlaps the
     other's GEMMs. s5 intra-overlap: QK_{j+1} is issued before the softmax of tile j.
  s6 exp2: the scale is folded into log2 units (one FMA-pipe op less per element); `emulate_frac` of the
     exponentials go to the FMA pipe as the cubic (6 FMA-pipe ops each) instead of MUFU.
  s7 cond-rescale: O is rescaled only when the row maximum moves by more than `threshold` (log2 units), with
     the frequency lapis.model.numerics measures on normal inputs at the shape's tile sizes.
  s8 persistent: one CTA per SM with a static grid stride. Launch overheads are not modelled, so s8 predicts
     the same time as s7; the simulator says so rather than inventing a gain.
FMA-pipe operation counts per score (4 before s6: scale, max, subtract, row sum; 3 after) are modelled
assumptions, stated here; the rates come from the profile.
"""

from __future__ import annotations

import math
from functools import lru_cache

import simpy

from lapis.errors import LayoutError
from lapis.pipeline_sim.deadlock import run_checked
from lapis.pipeline_sim.pipeline import PipelineState, TmaPipeline
from lapis.pipeline_sim.races import HappensBefore
from lapis.pipeline_sim.recorder import Recorder
from lapis.pipeline_sim.units import load_share, occupy

DEFAULTS = dict(block_m=128, block_n=128, stages=2, consumer_wgs=2, emulate_frac=0, threshold=8, causal=0)
VARIANTS = {
    "h200-s1-serial": dict(block_m=64, consumer_wgs=1, stages=1, ws=False),
    "h200-s2-ws-ring": dict(block_m=64, consumer_wgs=1, ws=True),
    "h200-s3-two-consumers": dict(ws=True),
    "h200-s4-pingpong": dict(ws=True, pingpong=True),
    "h200-s5-intra-overlap": dict(ws=True, pingpong=True, overlap=True),
    "h200-s6-exp2": dict(ws=True, pingpong=True, overlap=True, exp2=True),
    "h200-s7-cond-rescale": dict(ws=True, pingpong=True, overlap=True, exp2=True, cond_rescale=True),
    "h200-s8-persistent": dict(ws=True, pingpong=True, overlap=True, exp2=True, cond_rescale=True),
}
FMA_OPS_PER_SCORE = {False: 4, True: 3}  # before / after folding the scale into log2 units
CUBIC_FMA_OPS = 6  # floor, subtract, three FMAs, exponent add: the write-up's software exp2 (ch. 9)


def parse_shape(shape: str) -> tuple[int, int, int, int]:
    try:
        b, h, seq, d = (int(x) for x in shape.lower().split("x"))
    except ValueError:
        raise LayoutError("an attention shape is BxHxLxD", repr(shape), "e.g. --shape 8x16x4096x128") from None
    return b, h, seq, d


@lru_cache(maxsize=32)
def rescale_frequency(block_n: int, threshold: float | None) -> float:
    """How often a row's O is rescaled per K/V tile, on normal inputs (lapis.model.numerics)."""
    import numpy as np

    from lapis.model.numerics import flash_forward
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(n, 128)) for n in (64, 8 * block_n, 8 * block_n))
    return flash_forward(q, k, v, block_n=block_n, threshold=threshold)[1]["rescale_frequency"]


def kv_tiles_per_item(q_tile: int, kv_tiles: int, bm: int, bn: int, causal: bool) -> int:
    """K/V tiles a Q tile visits: all of them, or (causal) those up to and including its diagonal."""
    return min(kv_tiles, math.ceil((q_tile + 1) * bm / bn)) if causal else kv_tiles


def representative_sm(heads: int, q_tiles: int, kv_tiles: int, bm: int, bn: int, causal: bool,
                      sm_count: int) -> list[int]:
    """K/V tile counts of the work items on the SM with the most K/V tiles (the one that decides the time).

    Work items are numbered (batch*head, q_tile) with q_tile fastest and dealt to SMs by a static grid stride
    (item i -> SM i % sm_count), which is also how a non-persistent grid's waves fill the SMs if every CTA takes
    equally long. Causal items differ in length, so the SMs do too: that is the load imbalance."""
    per_sm = [[] for _ in range(min(sm_count, heads * q_tiles))]
    for i in range(heads * q_tiles):
        per_sm[i % sm_count].append(kv_tiles_per_item(i % q_tiles, kv_tiles, bm, bn, causal))
    return max(per_sm, key=sum)  # ties: the lowest SM index


def simulate(p, shape: str, params: dict, variant: str, check_races: bool = False) -> dict:
    """check_races: log K/V slot accesses and barrier edges (races.HappensBefore) and return the races found.
    The overlapped QK (s5+) runs as a child process under its warpgroup's role, so its program order merges
    with the parent's: that can hide a race inside one warpgroup, never invent one."""
    b, h, seq, d = parse_shape(shape)
    flags = VARIANTS[variant]
    prm = {**DEFAULTS, **{k: v for k, v in flags.items() if k in DEFAULTS}, **params}
    bm, bn, wgs = prm["block_m"], prm["block_n"], prm["consumer_wgs"]
    if seq % bm or seq % bn:
        raise LayoutError("L must be a multiple of the tiles", f"L = {seq}, block_m {bm}, block_n {bn}",
                          "pad L or pick tiles that divide it")
    if bm % (64 * wgs):
        raise LayoutError("each consumer warpgroup takes 64 rows", f"block_m {bm} for {wgs} warpgroups",
                          f"use block_m = {64 * wgs}")
    smem = bm * d * 2 + prm["stages"] * 2 * bn * d * 2  # Q, and `stages` K and V tiles
    if smem > p["smem_bytes_per_block"]:
        raise LayoutError("the schedule does not fit shared memory", f"Q {bm * d * 2} B + {prm['stages']} stages x "
                          f"K+V {2 * bn * d * 2} B = {smem} B > {p['smem_bytes_per_block']} B",
                          "lower stages, block_n or block_m")
    items = b * h * (seq // bm)
    active = min(items, p["sm_count"])
    kv_tiles = seq // bn
    my_kv = representative_sm(b * h, seq // bm, kv_tiles, bm, bn, prm["causal"], p["sm_count"])
    my_items = len(my_kv)
    rows = bm // wgs
    env = simpy.Environment()
    rec = Recorder(env)
    hb = HappensBefore(env) if check_races else None
    tensor, mufu, fma, load_path = (simpy.Resource(env, 1) for _ in range(4))
    share = load_share(p, active, reuse=seq // bm)  # B/ns per SM; K/V serve every Q tile of a head
    once = load_share(p, active, reuse=1)  # Q read and O written once: compulsory HBM traffic
    t_rate, m_rate, f_rate = (p.per_ns(k) for k in ("tensor_flop_per_clk_sm", "mufu_ex2_per_clk_sm",
                                                    "fma_per_clk_sm"))
    exp2 = flags.get("exp2", False)
    emulate = prm["emulate_frac"] if exp2 else 0
    gemm_ns = 2 * rows * bn * d / t_rate
    scores = rows * bn
    mufu_ns = scores * (1 - emulate) / m_rate
    fma_ns = scores * (FMA_OPS_PER_SCORE[exp2] + CUBIC_FMA_OPS * emulate) / f_rate
    freq = rescale_frequency(bn, prm["threshold"]) if flags.get("cond_rescale") else 1.0
    rescale_ns = rows * d * freq / f_rate
    busy = dict(tensor=0.0, mufu=0.0, fma=0.0, tma=0.0)

    def use(unit, name, ns, role, op, **kw):
        yield from occupy(env, rec, unit, ns, busy, name, role, op, **kw)

    def load(nbytes, role, op, bw=None, **kw):
        yield from use(load_path, "tma", nbytes / (bw or share), role, op, **kw)
        yield env.timeout(p["tma_latency_ns"])

    tile_bytes = bn * d * 2  # one K or V tile
    consumers = tuple(f"consumer{i}" for i in range(wgs))
    # Separate K and V rings, as FlashAttention-3 keeps them: QK needs only K, and K frees before V.
    rings = {x: TmaPipeline(env, x, prm["stages"], "producer", consumers, tile_bytes) for x in ("K", "V")}
    for ring in rings.values():
        ring.attach(hb)
    turn = [simpy.Resource(env, 1)]  # s4: the GEMM turn the warpgroups pass with named barriers

    def producer():
        st = {x: PipelineState.producer_start(prm["stages"]) for x in rings}
        for item, n_kv in enumerate(my_kv):
            yield from load(bm * d * 2, "producer", "TMA Q", once, work_item=item)
            for j in range(n_kv):
                for x, ring in rings.items():
                    t0 = env.now
                    yield ring.producer_acquire(st[x])
                    if env.now > t0:
                        rec.add("producer", f"wait {x} slot", t0, kind="wait", work_item=item, k_index=j)
                    ring.producer_expect(st[x])
                    issue = hb and hb.op("producer", f"issue TMA {x} {item}.{j}")
                    env.process(tile_load(ring, PipelineState(st[x].stages, st[x].index, st[x].phase), x, item, j,
                                          issue))
                    st[x].advance()
        for x, ring in rings.items():
            yield ring.producer_tail(st[x])

    def tile_load(ring, st, x, item, j, issue):
        yield from load(tile_bytes, "tma", f"TMA {x}", work_item=item, k_index=j)
        w = hb and hb.access(f"tma {x} {item}.{j}", x, st.index, (item, j), "write", after=issue)
        ring.tma_complete(st, node=w)

    def gemm(role, op, item, j, pingpong, reads=None):
        """One wgmma over a tile; `reads` = (ring name, slot) of the K or V tile it reads."""
        kw = dict(work_item=item, k_index=j)
        if hb and reads:
            hb.access(role, reads[0], reads[1], (item, j), "read")
        if pingpong:  # one warpgroup's GEMMs at a time (named barriers); the other's softmax runs meanwhile
            with turn[0].request() as req:
                t0 = env.now
                yield req
                if env.now > t0:
                    rec.add(role, "wait GEMM turn (named barrier)", t0, kind="wait", **kw)
                yield from use(tensor, "tensor", gemm_ns, role, op, **kw)
        else:
            yield from use(tensor, "tensor", gemm_ns, role, op, **kw)

    def wait_tile(x, st, role, item, j):
        t0 = env.now
        yield rings[x].consumer_wait(st, role)
        if env.now > t0:
            rec.add(role, f"wait {x}", t0, kind="wait", work_item=item, k_index=j)

    def qk(role, item, j, kst, pp):
        yield from wait_tile("K", kst, role, item, j)
        yield from gemm(role, "wgmma QK", item, j, pp, ("K", kst.index))
        rings["K"].consumer_release(kst, role)

    def softmax_pv(role, item, j, vst, pp):
        kw = dict(work_item=item, k_index=j)
        yield from use(mufu, "mufu", mufu_ns, role, "softmax ex2", **kw)
        yield from use(fma, "fma", fma_ns + rescale_ns, role, "softmax FMA + O rescale", **kw)
        yield from wait_tile("V", vst, role, item, j)
        yield from gemm(role, "wgmma PV", item, j, pp, ("V", vst.index))
        rings["V"].consumer_release(vst, role)

    def consumer(role):
        st = {x: PipelineState(prm["stages"]) for x in rings}
        pp = flags.get("pingpong")

        def take(x):
            s = PipelineState(st[x].stages, st[x].index, st[x].phase)
            st[x].advance()
            return s

        for item, n_kv in enumerate(my_kv):
            held = None  # (j, V slot) whose softmax and PV are still to do (s5: QK_j ran ahead)
            for j in range(n_kv):
                kst, vst = take("K"), take("V")
                if flags.get("overlap"):  # issue QK_j, then softmax/PV of tile j-1 while it runs
                    proc = env.process(qk(role, item, j, kst, pp))
                    if held is not None:
                        yield from softmax_pv(role, item, *held, pp)
                    yield proc
                    held = (j, vst)
                else:
                    yield from qk(role, item, j, kst, pp)
                    yield from softmax_pv(role, item, j, vst, pp)
            if held is not None:
                yield from softmax_pv(role, item, *held, pp)
            yield from load(rows * d * 2, role, "store O", once, work_item=item)

    def serial():
        role = "consumer0"
        for item, n_kv in enumerate(my_kv):
            yield from load(bm * d * 2, role, "TMA Q (waited)", once, work_item=item)
            for j in range(n_kv):
                yield from load(2 * tile_bytes, role, "TMA K+V (waited)", work_item=item, k_index=j)
                yield from gemm(role, "wgmma QK", item, j, False)
                kw = dict(work_item=item, k_index=j)
                yield from use(mufu, "mufu", mufu_ns, role, "softmax ex2", **kw)
                yield from use(fma, "fma", fma_ns + rescale_ns, role, "softmax FMA + O rescale", **kw)
                yield from gemm(role, "wgmma PV", item, j, False)
            yield from load(bm * d * 2, role, "store O", once, work_item=item)

    if flags.get("ws"):
        procs = {"producer": env.process(producer())}
        procs.update({f"consumer{i}": env.process(consumer(f"consumer{i}")) for i in range(wgs)})
        run_checked(env, rings["K"].barriers + rings["V"].barriers, procs)
    else:
        env.process(serial())
        env.run()
    flops = 4.0 * b * h * seq * seq * d / (2 if prm["causal"] else 1)  # the FA benchmarks' convention
    barriers = rings["K"].barriers + rings["V"].barriers
    return dict(env_ns=env.now, flops=flops, events=rec.events, params=prm,
                races=None if hb is None else hb.races() + [r for b in barriers for r in b.races],
                fit=dict(smem_bytes=smem), units=busy,
                work=dict(work_items=items, active_sms=active, items_per_sm=my_items, kv_tiles=kv_tiles,
                          kv_tiles_on_this_sm=sum(my_kv),
                          rescale_frequency=freq))
