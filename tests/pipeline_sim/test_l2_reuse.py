"""The K/V reuse a work order leaves in L2 (lapis.pipeline_sim.l2_reuse)."""

import copy

import numpy as np
import pytest

from lapis.model.profile import load_profile
from lapis.pipeline_sim.l2_reuse import fetches, kv_reuse, load_stream
from lapis.pipeline_sim.schedules.attention_h200 import VARIANTS, AttentionCosts, resolve
from lapis.pipeline_sim.work_order import PieceTiles, head_units_per_sm, kv_units_per_sm, section_heads

L2 = 60 * 2**20  # the H200's l2CacheSize (micro captures' device_attributes)
PAIR = 2 * 128 * 128 * 2  # a 128 x 128 bf16 K tile and its V tile


def _reuse(b, h, seq, causal, order, l2=L2):
    return kv_reuse(b * h, seq // 128, seq // 128, 128, 128, causal, 132, 1, order, section_heads(seq, 128), PAIR, l2)


def test_fetches_counts_the_misses_of_a_least_recently_used_cache():
    # capacity 2: 1 miss, 2 miss, 1 hit, 3 miss (evicts 2), 1 hit, 2 miss (evicts 3)
    assert fetches(np.array([1, 2, 1, 3, 1, 2]), 2) == 4
    assert fetches(np.array([1, 2, 1, 3, 1, 2]), 3) == 3
    assert fetches(np.array([5, 5, 5]), 1) == 1


def test_load_stream_orders_loads_by_step_then_sm():
    # SM 0: head 0's Q tile over 2 K/V tiles; SM 1: head 1 over 1 tile, then head 0 over 1 tile
    per_sm = [[((0, 2),)], [((1, 1),), ((0, 1),)]]
    assert load_stream(per_sm).tolist() == [0, 2**32, 1, 0]


def test_a_split_units_pieces_load_their_own_kv_tiles():
    # 10 units of 8 K/V tiles over 4 SMs: units 8 and 9 are cut in two pieces each, tiles 0..3 and 4..7
    per_sm = head_units_per_sm(10, 1, 8, 128, 128, False, 4, 1, "split_tail", 1)
    pieces = [u[0][1] for s in per_sm for u in s if isinstance(u[0][1], PieceTiles)]
    assert [(p.first, int(p), p.pieces) for p in pieces] == [(0, 4, 2), (4, 4, 2), (0, 4, 2), (4, 4, 2)]
    assert copy.deepcopy(pieces[1]).first == 4
    # SM 1's piece loads head 8's tiles 4..7 (keys 8 * 2**32 + 4 ..), after its two whole units' 16 tiles
    sm1 = load_stream([per_sm[1]]).tolist()
    assert sm1[16:] == [8 * 2**32 + k for k in range(4, 8)]
    # the two pieces of a unit together fetch its 8 tiles once, as the unit would
    assert sorted(load_stream([per_sm[0][-1:], per_sm[1][-1:]]).tolist()) == sorted(
        8 * 2**32 + k for k in range(8))


def test_head_units_carry_the_heads_beside_the_tile_counts_kv_units_per_sm_gives():
    args = (4, 8, 8, 128, 128, True, 3, 2, "heavy_first", 1)
    with_heads = head_units_per_sm(*args)
    assert [[tuple(n for _, n in u) for u in s] for s in with_heads] == kv_units_per_sm(*args)
    assert with_heads[0][0] == ((0, 7), (0, 8))  # the longest unit: head 0's Q tiles 6 and 7


def test_orders_that_keep_a_heads_q_tiles_together_fetch_each_pair_once():
    # non-causal: every Q tile of a head reads all its tiles, each fetched once: reuse = Q tiles per head
    assert _reuse(32, 16, 1024, False, "grid_stride") == 8.0
    assert _reuse(2, 16, 16384, False, "lpt_l2") == 128.0
    # causal lpt_l2 at 1024 with 64 MiB partitions: a section's 64 heads (32 MiB of K/V) fit, 36 loads per head over
    # its 8 pairs, (1 + 2 + ... + 8) / 8
    assert _reuse(32, 16, 1024, True, "lpt_l2", l2=128 * 2**20) == 4.5


def test_a_section_larger_than_one_l2_partition_is_fetched_again():
    # the H200's 30 MiB partitions hold 480 pairs, under a section's 64 heads x 8 pairs: the later Q tiles of a
    # section re-fetch some (measured: 2.97 loads per fetch, ncu DRAM bytes of s24, diagnostic/h200-2026-12-03-l2-1024)
    assert 2.0 < _reuse(32, 16, 1024, True, "lpt_l2") < 4.5


def test_heavy_first_at_many_heads_fetches_almost_every_load():
    # Q tile 7 of all 512 heads runs before any Q tile 6: about 512 x 8 pairs (256 MiB) pass between a head's two
    # reads of a pair, against the 480 pairs an L2 partition holds
    assert 1.0 <= _reuse(32, 16, 1024, True, "heavy_first") < 1.1
    assert 1.0 <= _reuse(8, 16, 4096, True, "heavy_first") < 1.15


def test_an_l2_partition_smaller_than_a_pair_reuses_nothing():
    assert kv_reuse(16, 8, 8, 128, 128, False, 132, 1, "grid_stride", 1, PAIR, 2 * PAIR - 1) == 1.0


def test_the_attention_costs_take_the_reuse_of_the_runs_order():
    p = load_profile("h200")
    dims = (32, 16, 1024, 128)
    heavy = resolve(p, {"causal": 1, "persistent_order": "heavy_first"}, "h200-s9-tuned", 128)
    lpt = resolve(p, {"causal": 1, "persistent_order": "lpt_l2"}, "h200-s9-tuned", 128)
    flags = VARIANTS["h200-s9-tuned"]
    assert AttentionCosts.of(p, dims, heavy, flags).kv_reuse < 1.1
    assert AttentionCosts.of(p, dims, lpt, flags).kv_reuse == _reuse(32, 16, 1024, True, "lpt_l2") > 2.0


def test_a_grid_past_the_load_bound_is_a_named_error(monkeypatch):
    from lapis.errors import ScheduleError
    from lapis.pipeline_sim import l2_reuse
    monkeypatch.setattr(l2_reuse, "MAX_LOADS", 100)
    with pytest.raises(ScheduleError, match="the L2 model walks every K/V tile load of the grid, at most 100: got 128"):
        l2_reuse.reuse([[((0, 64),)], [((1, 64),)]], PAIR, L2)
