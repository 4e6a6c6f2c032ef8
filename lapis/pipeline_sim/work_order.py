"""How work items reach SMs: Q tiles grouped into CTAs (`q_tiles_per_cta`) and dealt to SMs in an order.

A work unit is `q_tiles_per_cta` consecutive Q tiles of one (batch, head), processed one after another by one
CTA; they share nothing but the launch (each tile loads its own Q and walks all its K/V tiles). Units are numbered
(batch*head, q unit) with the q unit fastest. Orders:
- `grid_stride` (default): unit i -> SM i % sm_count. This is also how a non-persistent grid's waves fill the SMs
  when every CTA takes equally long, and the static persistent tile scheduler (s8).
- `lpt` (longest processing time first): units sorted by K/V tiles, longest first (ties: lower index), each
  given to the SM with the least work so far (ties: lower SM). For causal masking this balances the SMs to
  within one unit's length of the mean (Graham's LPT bound); with equal lengths it is the grid stride.
- `heavy_first`: units sorted by K/V tiles, longest first (ties: lower index), dealt grid-stride (the i-th to SM
  i % sm_count): a static order a kernel can compute from its index alone, as attention_h200.cu's causal s9 does
  (Q tile L / block_m - 1 - w / (B H) of head w % (B H)); with equal lengths it is the grid stride.
- `dynamic`: units in index order, each to the SM with the least work so far (ties: lower SM): what a tile
  scheduler that hands the next unit to the first CTA to ask gives when a K/V tile takes the same time everywhere.
  The SMs work on neighbouring Q tiles of a few heads at a time, and none ends more than one unit past the others.
- `lpt_l2`: the heads in sections of `section_heads` (section_heads(L, D): as many heads as keep their K and V in
  L2_SECTION_BYTES, a power of two), sections in order, and within a section `lpt`'s rule carried on from the SMs'
  loads so far: the SMs work on one section's heads at a time, so K/V reuse stays in L2 (FA4's sm90 causal
  scheduler orders its grid alike: flash_attn/cute/tile_scheduler.py SingleTileLPTScheduler). attention_h200.cu's
  s10 walks this order from a work list the host makes with `deal`.
- `split_tail`: `lpt_l2`, then, where every unit has the same K/V tiles and they do not divide evenly over the SMs,
  the r units dealt past the SMs' equal shares are each cut into `pieces` of consecutive K/V tiles (at least
  MIN_PIECE_TILES a piece, at most sm_count // r pieces a unit), one piece to each of the first r x pieces SMs
  (split_tail): r x pieces SMs run a piece at once where r SMs ran a whole unit while the others waited.
  attention_h200.cu's s26 merges a unit's pieces (store_piece); lapis.gpu.bench_attention.worklist writes them.
The order changes the predictions through the balance of K/V tiles per SM and through the K/V reuse it leaves in
L2 (lapis.pipeline_sim.l2_reuse, from head_units_per_sm).
kv_per_sm gives every SM's list (lapis.pipeline_sim.grid simulates one or all of them); the representative SM is
the one with the most K/V tiles (ties: the lowest SM index): it decides the time.
"""

from __future__ import annotations

import heapq
import math
import numbers

from lapis.errors import ScheduleError

ORDERS = ("grid_stride", "lpt", "heavy_first", "lpt_l2", "dynamic", "split_tail")
MIN_PIECE_TILES = 4  # K/V tiles a piece of a split unit keeps at least: a piece loads its own Q and pays a merge


class Piece(int):
    """A piece of a split unit, as dealt (`split_tail`): the int is the unit's index; first and count its K/V tiles
    (first .. first + count - 1), group the split unit's ordinal, rank the piece's among the unit's `pieces`."""

    def __new__(cls, unit: int, first: int, count: int, group: int, rank: int, pieces: int):
        piece = super().__new__(cls, unit)
        piece.first, piece.count, piece.group, piece.rank, piece.pieces = first, count, group, rank, pieces
        return piece

    def __reduce__(self):  # copy and pickle rebuild it from its fields (int's would drop them)
        return Piece, (int(self), self.first, self.count, self.group, self.rank, self.pieces)


class PieceTiles(int):
    """A piece's K/V tile count in a work list (head_units_per_sm), with the `pieces` its unit was cut into (the
    simulator prices the piece's partial O out and the merge of the others': attention_h200.py store_piece) and
    its `first` K/V tile (its tiles are first .. first + count - 1: lapis.pipeline_sim.l2_reuse keys its loads so)."""

    def __new__(cls, count: int, pieces: int, first: int = 0):
        tiles = super().__new__(cls, count)
        tiles.pieces, tiles.first = pieces, first
        return tiles

    def __reduce__(self):
        return PieceTiles, (int(self), self.pieces, self.first)
L2_SECTION_BYTES = 50 * 2**20  # K and V bytes a section's heads may keep in the H200's 50 MiB L2 (FA4's budget)


def section_heads(seq: int, d: int, elem_bytes: int = 2, l2_bytes: int = L2_SECTION_BYTES) -> int:
    """Heads per L2 section: the largest power of two of heads whose K and V (seq x d each, elem_bytes an element)
    fit in l2_bytes, at least 1."""
    per_head = seq * 2 * d * elem_bytes
    fit = l2_bytes // per_head
    return 1 if fit < 1 else 1 << (fit.bit_length() - 1)


def fullest(per_sm: list, cost=len):
    """The work list with the largest cost (ties: the lowest SM index): the representative SM's."""
    return max((w for w in per_sm if w), key=cost, default=[])


def kv_tiles_per_item(q_tile: int, kv_tiles: int, bm: int, bn: int, causal: bool) -> int:
    """K/V tiles a Q tile visits: all of them, or (causal) those up to and including its diagonal."""
    return min(kv_tiles, math.ceil((q_tile + 1) * bm / bn)) if causal else kv_tiles


def work_units(heads: int, q_tiles: int, per_cta: int) -> list[list[tuple[int, int]]]:
    """[(head, q_tile), ...] per unit: q_tiles_per_cta consecutive tiles of one head (the last may be shorter)."""
    return [[(hd, q) for q in range(q0, min(q0 + per_cta, q_tiles))] for hd in range(heads)
            for q0 in range(0, q_tiles, per_cta)]


def deal(lengths: list[int], sm_count: int, order: str, sections: list[int] | None = None) -> list[list[int]]:
    """Unit indices per SM, in the order each SM processes them. sections: each unit's L2 section (lpt_l2 only;
    None: one section)."""
    if order not in ORDERS:
        raise ScheduleError("unknown persistent_order", repr(order), f"use one of {', '.join(ORDERS)}")
    if isinstance(sm_count, bool) or not isinstance(sm_count, numbers.Integral) or sm_count < 1:
        raise ScheduleError("work is dealt to a positive whole number of SMs", f"sm_count={sm_count!r}",
                            "pass the GPU's SM count (132 on the H200)")
    if order == "split_tail":
        return split_tail(deal(lengths, sm_count, "lpt_l2", sections), lengths)
    per_sm = [[] for _ in range(min(sm_count, len(lengths)))]
    sec = sections if order == "lpt_l2" and sections is not None else [0] * len(lengths)
    if order in ("grid_stride", "heavy_first"):
        ranked = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)) if order == "heavy_first" else \
            range(len(lengths))
        for k, i in enumerate(ranked):
            per_sm[k % sm_count].append(i)
        return per_sm
    heap = [(0, s) for s in range(len(per_sm))]
    ranked = range(len(lengths)) if order == "dynamic" else sorted(range(len(lengths)),
                                                                   key=lambda i: (sec[i], -lengths[i], i))
    for i in ranked:
        load, s = heapq.heappop(heap)
        per_sm[s].append(i)
        heapq.heappush(heap, (load + lengths[i], s))
    return per_sm


def split_tail(per_sm: list[list[int]], lengths: list[int], min_tiles: int = MIN_PIECE_TILES) -> list[list[int]]:
    """per_sm with the units dealt past the SMs' equal shares cut into Pieces, one piece to each of the first SMs
    (`split_tail` in the module's orders); unchanged where the units differ in K/V tiles (a causal grid: LPT's last
    units are its lightest), divide evenly, or would give pieces under min_tiles K/V tiles. ScheduleError for
    min_tiles below 1."""
    if isinstance(min_tiles, bool) or not isinstance(min_tiles, int) or min_tiles < 1:
        raise ScheduleError("a piece keeps at least one K/V tile", f"min_tiles={min_tiles!r}",
                            f"pass a whole number >= 1 (default MIN_PIECE_TILES = {MIN_PIECE_TILES})")
    base = len(lengths) // len(per_sm) if per_sm else 0
    extra = [s for s in per_sm if len(s) > base]
    if not extra or len(set(lengths)) > 1:
        return per_sm
    n = lengths[0]
    pieces = min(len(per_sm) // len(extra), n // min_tiles)
    if pieces < 2:
        return per_sm
    out = [list(s) for s in per_sm]
    tails = [s.pop() for s in out if len(s) > base]
    sm = 0
    for group, unit in enumerate(tails):
        for rank in range(pieces):
            first = rank * n // pieces
            out[sm].append(Piece(unit, first, (rank + 1) * n // pieces - first, group, rank, pieces))
            sm += 1
    return out


def head_units_per_sm(heads: int, q_tiles: int, kv_tiles: int, bm: int, bn: int, causal: bool, sm_count: int,
                      per_cta: int = 1, order: str = "grid_stride",
                      per_section: int = 1) -> list[list[tuple[tuple[int, int], ...]]]:
    """Per SM (those dealt work), its units in its order, each the tuple of its Q tiles' (head, K/V tile count).
    per_section: heads per L2 section (lpt_l2; section_heads)."""
    units = work_units(heads, q_tiles, per_cta)
    kv = [tuple((hd, kv_tiles_per_item(q, kv_tiles, bm, bn, causal)) for hd, q in u) for u in units]
    sections = [u[0][0] // per_section for u in units]
    if order == "split_tail" and per_cta != 1:
        raise ScheduleError("a split tail cuts single-Q-tile units", f"q_tiles_per_cta={per_cta}",
                            "use q_tiles_per_cta=1 with persistent_order=split_tail")
    return [[((kv[i][0][0], PieceTiles(i.count, i.pieces, i.first)),) if isinstance(i, Piece) else kv[i] for i in s]
            for s in deal([sum(n for _, n in k) for k in kv], sm_count, order, sections)]


def kv_units_per_sm(heads: int, q_tiles: int, kv_tiles: int, bm: int, bn: int, causal: bool, sm_count: int,
                    per_cta: int = 1, order: str = "grid_stride", per_section: int = 1) -> list[list[tuple[int, ...]]]:
    """Per SM (those dealt work), its units in its order, each the tuple of its Q tiles' K/V tile counts.
    per_section: heads per L2 section (lpt_l2; section_heads)."""
    return [[tuple(n for _, n in u) for u in s]
            for s in head_units_per_sm(heads, q_tiles, kv_tiles, bm, bn, causal, sm_count, per_cta, order,
                                       per_section)]


def kv_per_sm(heads: int, q_tiles: int, kv_tiles: int, bm: int, bn: int, causal: bool, sm_count: int,
              per_cta: int = 1, order: str = "grid_stride") -> list[list[int]]:
    """Per SM (those dealt work), the K/V tile counts of the Q tiles it processes, in its order."""
    return [[n for u in s for n in u]
            for s in kv_units_per_sm(heads, q_tiles, kv_tiles, bm, bn, causal, sm_count, per_cta, order)]


def representative_sm(heads: int, q_tiles: int, kv_tiles: int, bm: int, bn: int, causal: bool, sm_count: int,
                      per_cta: int = 1, order: str = "grid_stride") -> list[int]:
    """K/V tile counts of the Q tiles the representative SM (the most K/V tiles) processes, in its order."""
    return fullest(kv_per_sm(heads, q_tiles, kv_tiles, bm, bn, causal, sm_count, per_cta, order), cost=sum)
