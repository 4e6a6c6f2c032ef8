"""Causal masking on a tiled attention grid: the K/V tiles each Q tile visits, the ones that need the mask, and
the work items of the SM that decides the kernel's time.

Query row r attends to keys k <= r; the scores with k > r are set to -inf before the row max. Q tile q holds rows
q*bm .. q*bm+bm-1 and K/V tile j keys j*bn .. j*bn+bn-1, so (bm and bn multiples of 16):
  - q visits tiles 0 .. ceil((q+1)*bm/bn) - 1 (attention_h200.kv_tiles_per_item), up to and including its diagonal;
  - tile j needs the mask when its last key lies past q's first row, (j+1)*bn - 1 > q*bm, i.e. from tile
    floor(q*bm/bn) on (the diagonal tiles); the tiles before it are full and run unmasked.
A masked tile still runs its whole MMA and its exponentials (a masked score costs ex2(-inf) = 0 like any other;
warps take one path): the extra work is MASK_OPS_PER_SCORE per score, paid each time a score enters registers.

Work items are numbered in the grid's order: Q tile fastest, then head, then batch (the B200 write-up, ch. 14:
"CTA 0 handles tiles 0-1, then 296-297"; the Emmy kernels decode the query tile from the lowest bits of their
global id). Two ways to deal them to SMs:
  - grid_stride: a persistent kernel's static stride, item i on CTA i % ctas (the write-up's
    `work_id += gridDim.x`);
  - dispatch: a non-persistent grid, where the hardware block scheduler hands the next CTA (in blockIdx order)
    to an SM as soon as one frees; modelled as the SM with the least work queued (work = `weights`).
With equal items both deal item i to SM i % sm_count. Causal items differ, so SMs differ: the load imbalance.
busiest() picks the SM with the most work, which decides the time.
"""

from __future__ import annotations

import heapq

from lapis.pipeline_sim.work_order import kv_tiles_per_item

__all__ = ["MASK_OPS_PER_SCORE", "tile_span", "grid_stride", "dispatch", "busiest"]

# Per masked score: compare the key's column index with the row's limit, select -inf (FlashAttention's masks,
# csrc/flash_attn/src/mask.h apply_mask_causal; flash_attn/cute/mask.py). Both are ALU-pipe instructions; the
# profiles carry no ALU rate, so they are charged at the FMA-pipe rate, as the row max is in FMA_OPS_PER_SCORE.
MASK_OPS_PER_SCORE = 2


def tile_span(q: int, kv_tiles: int, bm: int, bn: int, causal: bool) -> tuple[int, int]:
    """(K/V tiles Q tile q visits, index of its first masked tile); non-causal: (kv_tiles, kv_tiles), none masked."""
    visits = kv_tiles_per_item(q, kv_tiles, bm, bn, causal)
    return visits, (q * bm // bn if causal else visits)


def grid_stride(n_items: int, ctas: int) -> list[list[int]]:
    """Item indices per CTA of a persistent grid of `ctas` CTAs: item i on CTA i % ctas, in ascending order."""
    return [list(range(c, n_items, ctas)) for c in range(min(ctas, n_items))]


def dispatch(weights: list[float], sm_count: int) -> list[list[int]]:
    """Item indices per SM of a non-persistent grid: each item in order goes to the SM with the least work queued
    (ties: the lowest SM index), as the block scheduler fills whichever SM frees first."""
    per_sm = [[] for _ in range(min(sm_count, len(weights)))]
    heap = [(0.0, s) for s in range(len(per_sm))]
    for i, w in enumerate(weights):
        load, s = heapq.heappop(heap)
        per_sm[s].append(i)
        heapq.heappush(heap, (load + w, s))
    return per_sm


def busiest(per_sm: list[list[int]], weights: list[float]) -> list[int]:
    """The item list of the SM with the most work (ties: the lowest SM index)."""
    return max(per_sm, key=lambda items: sum(weights[i] for i in items))
