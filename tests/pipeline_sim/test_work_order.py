"""The lpt_l2 work order (L2 sections of heads, longest Q tiles first within a section, least-loaded SM) and the
dynamic one (units in index order, least-loaded SM)."""

from lapis.pipeline_sim.work_order import deal, kv_per_sm, kv_units_per_sm, section_heads


def test_section_heads_is_the_power_of_two_of_heads_whose_k_and_v_fit_50_mib():
    # K and V of one head: L x D x 2 tensors x 2 bytes
    assert section_heads(4096, 128) == 16  # 2 MiB a head: 25 fit, 16 is the power of two
    assert section_heads(16384, 128) == 4  # 8 MiB: 6 fit
    assert section_heads(1024, 128) == 64  # 0.5 MiB: 100 fit
    assert section_heads(2**20, 128) == 1  # 512 MiB: none fits, one head a section


def test_lpt_l2_finishes_a_section_before_the_next_and_balances_within_one_item():
    # 4 heads of 4 causal Q tiles (lengths 1..4), sections of 2 heads, 3 SMs
    lengths = [1, 2, 3, 4] * 4
    sections = [0] * 8 + [1] * 8
    per_sm = deal(lengths, 3, "lpt_l2", sections)
    assert sorted(i for s in per_sm for i in s) == list(range(16))
    order = sorted((pos, i) for s in per_sm for pos, i in enumerate(s))
    first_section_1 = min(pos for pos, i in order if sections[i] == 1)
    last_section_0 = max(pos for pos, i in order if sections[i] == 0)
    assert first_section_1 >= last_section_0 - 1  # sections overlap by at most one item per SM
    loads = [sum(lengths[i] for i in s) for s in per_sm]
    assert max(loads) - min(loads) <= max(lengths)
    assert per_sm[0][0] == 3  # the first section's longest tile (head 0, Q tile 3) goes first, to SM 0


def test_lpt_l2_with_one_section_is_lpt_and_ignores_sections_for_other_orders():
    lengths = [3, 1, 4, 1, 5, 9, 2, 6]
    assert deal(lengths, 3, "lpt_l2") == deal(lengths, 3, "lpt")
    assert deal(lengths, 3, "grid_stride", [0, 1] * 4) == deal(lengths, 3, "grid_stride")


def test_causal_lpt_l2_at_8x16x4096_keeps_every_sm_within_a_few_tiles_of_the_mean():
    per_sm = kv_units_per_sm(128, 32, 32, 128, 128, True, 132, 1, "lpt_l2", section_heads(4096, 128))
    loads = [sum(map(sum, s)) for s in per_sm]
    assert sum(loads) == 128 * 32 * 33 // 2  # every causal K/V tile once
    assert (min(loads), max(loads)) == (510, 514)
    heavy = kv_units_per_sm(128, 32, 32, 128, 128, True, 132, 1, "heavy_first")
    assert max(sum(map(sum, s)) for s in heavy) == 528  # s9's static order: the first SMs 16 tiles above the mean


def test_dynamic_gives_each_unit_in_order_to_the_least_loaded_sm():
    # lengths 4, 1, 1, 3 on 2 SMs: 0 -> SM 0 (load 4), 1 -> SM 1 (1), 2 -> SM 1 (2), 3 -> SM 1 (5)
    assert deal([4, 1, 1, 3], 2, "dynamic") == [[0], [1, 2, 3]]
    # equal lengths: the grid stride
    assert deal([2] * 6, 3, "dynamic") == deal([2] * 6, 3, "grid_stride") == [[0, 3], [1, 4], [2, 5]]


def test_dynamic_balances_causal_work_within_one_item_of_the_mean():
    # causal 8x16x4096x128: 67584 K/V tiles, 512 per SM on average, items of at most 32 tiles
    per_sm = kv_per_sm(128, 32, 32, 128, 128, True, 132, 1, "dynamic")
    assert max(map(sum, per_sm)) <= 512 + 32 and min(map(sum, per_sm)) >= 512 - 32


def test_split_tail_cuts_the_units_past_the_equal_shares_into_pieces_one_an_sm():
    # 10 units of 8 K/V tiles on 4 SMs: 2 each, and units 8 and 9 left over; 4 // 2 = 2 pieces a unit of 4 tiles
    per_sm = deal([8] * 10, 4, "split_tail")
    assert [[int(u) for u in s] for s in per_sm] == [[0, 4, 8], [1, 5, 8], [2, 6, 9], [3, 7, 9]]
    pieces = [s[-1] for s in per_sm]
    assert [(p.first, p.count, p.group, p.rank, p.pieces) for p in pieces] == [
        (0, 4, 0, 0, 2), (4, 4, 0, 1, 2), (0, 4, 1, 0, 2), (4, 4, 1, 1, 2)]
    assert [len(s) for s in deal([8] * 10, 4, "lpt_l2")] == [3, 3, 2, 2]  # what the pieces replace


def test_split_tail_leaves_lists_whole_where_nothing_is_gained_or_lengths_differ():
    assert deal([8] * 8, 4, "split_tail") == deal([8] * 8, 4, "lpt_l2")  # 2 each: no tail
    assert deal([7] * 9, 4, "split_tail") == deal([7] * 9, 4, "lpt_l2")  # 7 // 4 = 1 piece: not split
    assert deal([1, 2, 3, 4, 5], 2, "split_tail") == deal([1, 2, 3, 4, 5], 2, "lpt_l2")  # causal-like


def test_split_tail_at_the_five_shapes_gives_each_sm_31_items_and_at_most_one_piece():
    # 4096 items of 128 x 128 on 132 SMs: 4 left over, pieces of >= 4 K/V tiles, at most 33 a unit
    for seq, pieces in ((1024, 2), (2048, 4), (4096, 8), (8192, 16), (16384, 32)):
        kv = seq // 128
        per_sm = kv_units_per_sm(4096 // (seq // 128), seq // 128, kv, 128, 128, False, 132, 1, "split_tail",
                                 section_heads(seq, 128))
        loads = sorted(sum(map(sum, s)) for s in per_sm)
        assert sum(loads) == 4096 * kv
        assert loads[-1] == 31 * kv + kv // pieces and loads[0] == 31 * kv
        assert sum(1 for s in per_sm if len(s) == 32) == 4 * pieces
        assert {s[-1][0].pieces for s in per_sm if len(s) == 32} == {pieces}


def test_deal_refuses_a_count_of_sms_that_is_not_positive_and_pieces_survive_a_copy():
    import copy
    import pickle

    import pytest

    from lapis.errors import ScheduleError
    from lapis.pipeline_sim.work_order import PieceTiles, split_tail
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ScheduleError, match="positive whole number of SMs"):
            deal([8] * 10, bad, "split_tail")
    with pytest.raises(ScheduleError, match="at least one K/V tile"):
        split_tail([[0]], [8], min_tiles=0)
    piece = deal([8] * 10, 4, "split_tail")[3][-1]
    again = pickle.loads(pickle.dumps(piece))
    assert (int(again), again.first, again.count, again.group, again.rank, again.pieces) == (9, 4, 4, 1, 1, 2)
    assert copy.deepcopy(PieceTiles(4, 8)).pieces == 8
