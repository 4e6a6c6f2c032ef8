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
