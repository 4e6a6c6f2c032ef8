"""`h200-fa4-sm90`: FA4's CuTe-DSL Hopper forward (flash-attn-4, FlashAttentionForwardSm90) on the H200, from its
public source; simulation only here (lapis never times it).

Source: Dao-AILab/flash-attention flash_attn/cute (read at commit 0251105a2fb1, the flash-attn-4 4.0 line):
- interface.py _tile_size_fwd_sm90 (sm90, no sparsity, not local): head dim <= 64: 192 x 128, 128: 128 x 128,
  256: 128 x 80 (tile_m x tile_n), mma_pv_is_rs (P from registers) and intra_wg_overlap true for all three;
  the FlashAttentionForwardSm90(...) call: num_stages = 2, Q_in_regs false, num_threads 384 by default.
- flash_fwd_sm90.py FlashAttentionForwardSm90.__call__: num_wg_mma = tile_m / 64 consumer warpgroups (2 for
  tile_m 128, 3 for 192) plus one producer warpgroup; setmaxnreg (num_mma_regs, num_producer_regs) = {2: (240, 24),
  3: (160, 32)}; use_scheduler_barrier (the warp-scheduler ping-pong of the GEMMs between consumer warpgroups) =
  intra_wg_overlap and num_wg_mma >= 2 and head dim <= 128, so head dim 256 runs without it; K and V in rings of
  num_stages, TMA loads; the grid is not persistent (is_persistent=False): SingleTileScheduler non-causal,
  SingleTileLPTScheduler causal.
- flash_fwd_sm90.py mma_one_n_block_intrawg_overlap: QK_j is issued, then PV_{j-1}; softmax_j runs while PV_{j-1} is
  on the tensor pipe; softmax.online_softmax rescales O every tile (no threshold): the ex2 flavour, unconditional.
- tile_scheduler.py SingleTileLPTScheduler.get_current_work: CTAs in sections of `swizzle` heads (the power of 2 at
  or below 50 MiB / (L (D + D) 2 B)), within a section m_block from the last (longest causal row block) down,
  heads fastest; lpt_order below.

Structure reused: with these facts the kernel is lapis's h200-s6-exp2 schedule (attention_h200.py: a producer
warpgroup with K and V TMA rings, consumer warpgroups of 64 rows, GEMM ping-pong, intra-warpgroup overlap, ex2
softmax, non-persistent grid with CTA turnover), so the roles (producer, consumer_overlap), the cost model
(AttentionCosts: the ex2 flavour's microbenchmark loop from its SASS, lapis.model.contend, scaled by FA4's own
loop, whose contend states it takes, and at head dims 64 and 128 its ping-pong GEMM turn segments:
lapis.model.consumer_loop.THIRD_PARTY, from its SASS compiled here, capture sass/fa4-sm90-2026-12-03) and the
residency are attention_h200's, run with
FA4's tile sizes, stages, consumer warpgroups and setmaxnreg split (CONFIGS) and the flags of fa4_flags. What
differs is the work order (deal: the LPT scheduler's CTA order, handed to the SM that frees first), and at head dim
256 the missing ping-pong. A ragged last K/V tile (L not a multiple of 80) costs a full tile (masked_tail).
The K/V reuse in L2 is that of FA4's own CTA order (head_deal through lapis.pipeline_sim.l2_reuse). Not modelled:
FA4's epilogue through shared memory and TMA store (attention_h200's store of O is used).
"""

from __future__ import annotations

from functools import lru_cache

from lapis.errors import ScheduleError
from lapis.pipeline_sim.l2_reuse import reuse
from lapis.pipeline_sim.schedule import Schedule
from lapis.pipeline_sim.schedules import attention_h200 as ah
from lapis.pipeline_sim.schedules.fa2_flash import slot_dispatch
from lapis.pipeline_sim.work_order import kv_tiles_per_item

__all__ = ["CONFIGS", "FA4_SM90", "SCHEDULES", "config", "fa4_flags", "lpt_order"]

STAGES = 2
L2_SECTION_BYTES = 50 * 1024 * 1024  # SingleTileLPTScheduler's size_l2
# head dim -> FA4's sm90 tile and warpgroup split (interface._tile_size_fwd_sm90; FlashAttentionForwardSm90)
CONFIGS = {64: dict(block_m=192, block_n=128, consumer_wgs=3, regs_producer=32, regs_consumer=160),
           128: dict(block_m=128, block_n=128, consumer_wgs=2, regs_producer=24, regs_consumer=240),
           256: dict(block_m=128, block_n=80, consumer_wgs=2, regs_producer=24, regs_consumer=240)}
_BASE = "h200-s6-exp2"  # the lapis schedule whose roles and costs these facts make it (module docstring)
DEFAULTS = dict(ah.DEFAULTS, stages=STAGES)


def config(d: int) -> dict:
    """FA4's sm90 configuration for head dim d (CONFIGS); ScheduleError for another head dim."""
    if d not in CONFIGS:
        raise ScheduleError("h200-fa4-sm90 carries FA4's sm90 tiles for head dims 64, 128, 256", f"D = {d}",
                            "use D = 64, 128 or 256")
    return dict(CONFIGS[d], stages=STAGES)


def fa4_flags(d: int) -> dict:
    """s6's flags with FA4's: ping-pong only at head dim <= 128 (use_scheduler_barrier), ragged K/V tails masked,
    and its loop from its SASS (sass_loop: lapis.model.consumer_loop.THIRD_PARTY)."""
    return dict(ah.VARIANTS[_BASE], pingpong=d <= 128, masked_tail=True, sass_loop=f"fa4_sm90_d{d}")


def resolve(p, dims: tuple, params: dict) -> tuple[dict, dict]:
    """FA4's configuration for D, then the caller's parameters, through attention_h200's checks and residency."""
    return ah.resolve_run(_BASE, p, dims, {**config(dims[3]), **params})


def lpt_order(heads: int, q_tiles: int, seq: int, d: int) -> list[tuple[int, int]]:
    """(head, Q tile) in SingleTileLPTScheduler's blockIdx order: sections of `swizzle` heads, Q tile from the last
    down, heads fastest within a section."""
    one_head = seq * 2 * d * 2
    swizzle = 1 if L2_SECTION_BYTES < one_head else 1 << (L2_SECTION_BYTES // one_head).bit_length() - 1
    order = []
    for h0 in range(0, heads, swizzle):
        section = range(h0, min(h0 + swizzle, heads))
        order += [(h, q) for q in range(q_tiles - 1, -1, -1) for h in section]
    return order


@lru_cache(maxsize=64)
def head_deal(dims: tuple, bm: int, bn: int, causal: bool, sm_count: int) -> list:
    """Per SM, its CTAs (one Q tile each, a 1-tuple of (head, K/V tile count)) in the order it runs them: the
    grid's CTAs in blockIdx order (m_block fastest non-causal; lpt_order causal) handed out by the block scheduler
    (fa2_flash.slot_dispatch) with one CTA resident per SM (FA4's 160+ KiB of shared memory at these tiles)."""
    b, h, seq, d = dims
    q_tiles, kv_tiles = -(-seq // bm), -(-seq // bn)
    order = lpt_order(b * h, q_tiles, seq, d) if causal else [(x, q) for x in range(b * h) for q in range(q_tiles)]
    kv = [kv_tiles_per_item(q, kv_tiles, bm, bn, causal) for _, q in order]
    return [[((order[i][0], kv[i]),) for i in items] for items in slot_dispatch(kv, sm_count, 1)]


def deal(p, dims: tuple, prm: dict) -> list:
    """Per SM, its CTAs (head_deal) as 1-tuples of their K/V tile counts."""
    return [[(n,) for (_, n), in s] for s in head_deal(dims, prm["block_m"], prm["block_n"], bool(prm["causal"]),
                                                        p["sm_count"])]


def costs(p, dims: tuple, prm: dict, flags: dict) -> ah.AttentionCosts:
    """attention_h200's cost model under FA4's flags for this head dim, with the K/V reuse of FA4's own grid order
    (head_deal through lapis.pipeline_sim.l2_reuse)."""
    bn, d = prm["block_n"], dims[3]
    per_sm = head_deal(dims, prm["block_m"], bn, bool(prm["causal"]), p["sm_count"])
    return ah.AttentionCosts.of(p, dims, prm, fa4_flags(d), reuse=reuse(per_sm, 2 * bn * d * 2, ah.l2_bytes(p)))


def launch(ctx) -> None:
    """attention_h200's roles (producer, consumer_overlap) under FA4's flags for this head dim."""
    ctx.flags = fa4_flags(ctx.dims[3])
    ah.launch(ctx)


FA4_SM90 = Schedule(
    name="h200-fa4-sm90", description="FA4 CuTe-DSL sm90 forward: producer + 2 (3 at D 64) consumer WGs, 2 stages, "
    "ping-pong (D <= 128), intra-WG overlap, P in registers, LPT order causal", shape="attention", defaults=DEFAULTS,
    flags=fa4_flags(128), resolve=resolve, work=deal, costs=costs, launch=launch, flops=ah.flops, summary=ah.summary,
    busy=("tensor", "softmax", "tma"), work_cost=ah._kv_total, races="slot", tuple_units=True)
SCHEDULES = (FA4_SM90,)
