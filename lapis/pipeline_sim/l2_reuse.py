"""K/V reuse through L2: how many K/V tile loads of a grid each fetch from HBM serves, for a work order.

The attention schedules load K and V tiles at the chip's bandwidth for a given reuse (lapis.pipeline_sim.units:
L2's bandwidth, or HBM's times the reuse where HBM is the tighter). The reuse is not a property of the shape
alone: it depends on which heads the SMs work on at the same time. An order that runs the Q tiles of one head
side by side (grid_stride, lpt_l2) reads each K/V tile from HBM once and from L2 after; one that runs the same
Q tile of every head at once (heavy_first at many heads) has evicted a head's tiles before its next Q tile comes.

The model: every SM walks its work list (lapis.pipeline_sim.work_order.head_units_per_sm) one K/V tile a step,
each step the same time on every SM, so step t of every SM happens at about the same moment. The loads, in that
order (step, then SM), go through a least-recently-used cache counted in K+V tile pairs; a load whose pair is not
cached is a fetch from HBM. Its capacity is one L2 partition's, l2_bytes / L2_PARTITIONS // (2 x tile bytes)
(lapis.catalog.hardware: each partition caches what its own SMs read, and the SMs of both read every head's
tiles, so each pair is held twice). l2_bytes is the device's (cudaGetDeviceProperties l2CacheSize, profile key
l2_bytes). reuse = loads / fetches: 1 when every load is a fetch, up to the Q tiles per head when each head's
tiles stay in L2 while all its Q tiles walk them.
Nsight Compute's DRAM bytes check it (lapis/data/blind/ncu/l2_reuse.json, lapis validate units).
"""

from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache

import numpy as np

from lapis.catalog.hardware import L2_PARTITIONS
from lapis.errors import ScheduleError
from lapis.pipeline_sim.work_order import head_units_per_sm


MAX_LOADS = 10_000_000  # K/V tile loads the model walks (an int64 key each, and an LRU step in Python)


def load_stream(per_sm: list) -> np.ndarray:
    """The K/V tile loads of every SM's work list (units of (head, K/V tiles) per Q tile) in time order (step,
    then SM): an int64 array of (head, K/V index) keys, head * 2**32 + index; a piece of a split unit
    (work_order.PieceTiles) loads its own tiles, first .. first + count - 1. ScheduleError for more than
    MAX_LOADS loads."""
    tiles = [np.array([q for u in units for q in u], dtype=np.int64).reshape(-1, 2) for units in per_sm]
    firsts = [np.array([getattr(n, "first", 0) for u in units for _, n in u], dtype=np.int64) for units in per_sm]
    total = sum(int(t[:, 1].sum()) for t in tiles)
    if total > MAX_LOADS:
        raise ScheduleError(f"the L2 model walks every K/V tile load of the grid, at most {MAX_LOADS:,}",
                            f"{total:,} loads", "simulate fewer heads (B x H) or a shorter L: the reuse depends on "
                            "the heads the order runs side by side, which a smaller B x H keeps")
    steps, sms, keys = [], [], []
    for s, (t, first) in enumerate(zip(tiles, firsts)):
        if not t.size:
            continue
        n = t[:, 1]
        head = np.repeat(t[:, 0], n)
        start = np.repeat(np.cumsum(n) - n, n)
        index = np.arange(n.sum(), dtype=np.int64) - start
        steps.append(start + index)
        sms.append(np.full(index.size, s, dtype=np.int64))
        keys.append(head * 2**32 + np.repeat(first, n) + index)
    if not keys:
        return np.zeros(0, dtype=np.int64)
    step, sm, key = np.concatenate(steps), np.concatenate(sms), np.concatenate(keys)
    return key[np.lexsort((sm, step))]


def fetches(stream: np.ndarray, capacity: int) -> int:
    """Loads of `stream` that miss a least-recently-used cache of `capacity` entries (capacity >= 1)."""
    cache, missed = OrderedDict(), 0
    for k in stream.tolist():
        if k in cache:
            cache.move_to_end(k)
            continue
        missed += 1
        cache[k] = None
        if len(cache) > capacity:
            cache.popitem(last=False)
    return missed


def reuse(per_sm: list, pair_bytes: int, l2_bytes: int) -> float:
    """K/V loads per HBM fetch (>= 1) of every SM's work list (load_stream's form), for K+V tile pairs of
    pair_bytes and an L2 of l2_bytes in L2_PARTITIONS partitions (the module docstring). 1.0 when a partition holds
    no pair or there is no load."""
    capacity = l2_bytes // L2_PARTITIONS // pair_bytes
    stream = load_stream(per_sm)
    if capacity < 1 or stream.size == 0:
        return 1.0
    return stream.size / fetches(stream, capacity)


@lru_cache(maxsize=256)
def kv_reuse(heads: int, q_tiles: int, kv_tiles: int, bm: int, bn: int, causal: bool, sm_count: int,
             per_cta: int, order: str, per_section: int, pair_bytes: int, l2_bytes: int) -> float:
    """reuse() of the grid work_order.head_units_per_sm deals with these arguments."""
    return reuse(head_units_per_sm(heads, q_tiles, kv_tiles, bm, bn, causal, sm_count, per_cta, order, per_section),
                 pair_bytes, l2_bytes)
