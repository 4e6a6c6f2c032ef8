"""Causal masking in the b200 and sm120 schedules: tiles up to each Q tile's diagonal, the mask's cost, the
busiest SM, and the grid order (counts worked out by hand in the comments)."""

from collections import Counter

import pytest

from lapis.cli import main
from lapis.model.profile import load_profile
from lapis.pipeline_sim.causal import busiest, dispatch, grid_stride, tile_span
from lapis.pipeline_sim.simulate import SCHEDULES, simulate


def test_tile_spans_stop_at_the_diagonal_and_mask_from_the_first_row():
    assert tile_span(0, 8, 128, 128, True) == (1, 0)
    assert tile_span(3, 8, 128, 128, True) == (4, 3)
    # rows 128..255 against 64-key tiles: tiles 0..3 visited, tiles 2 and 3 hold keys past row 128
    assert tile_span(1, 16, 128, 64, True) == (4, 2)
    # rows 192..255 against 128-key tiles: tile 1 (keys 128..255) is visited and masked
    assert tile_span(3, 4, 64, 128, True) == (2, 1)
    assert tile_span(3, 8, 128, 128, False) == (8, 8)


def test_causal_halves_the_tile_pairs_of_a_long_head():
    # 128 Q tiles x 128 K/V tiles: the causal triangle holds 128 * 129 / 2 = 8256 of the 16384 pairs
    assert sum(tile_span(q, 128, 128, 128, True)[0] for q in range(128)) == 8256


def test_grid_stride_and_dispatch_by_hand():
    assert grid_stride(5, 2) == [[0, 2, 4], [1, 3]]
    # weights 4, 1, 1, 1, 3 on 2 SMs: item 0 -> SM0 (4); items 1..3 -> SM1 (1, 2, 3); item 4 -> SM1 (3 < 4)
    per_sm = dispatch([4, 1, 1, 1, 3], 2)
    assert per_sm == [[0], [1, 2, 3, 4]]
    assert busiest(per_sm, [4, 1, 1, 1, 3]) == [1, 2, 3, 4]
    assert dispatch([1] * 5, 2) == grid_stride(5, 2)  # equal items: the same deal as the stride


@pytest.mark.parametrize("name", ["b200-k05-two-q-tiles", "b200-k07-compute-pipeline", "b200-k13-early-pv",
                                  "b200-k14-persistent"])
@pytest.mark.parametrize("bn", [128, 64])
def test_two_q_tiles_each_stop_at_their_own_diagonal(name, bn):
    # L = 1024: 4 work items (Q tile pairs) on 4 SMs; the busiest holds Q tiles 6 and 7 (rows 768..1023).
    # bn 128: Q6 visits 7 K/V tiles, Q7 8, one masked each. bn 64: Q6 visits 14 (896 / 64), masked from 12
    # (768 / 64); Q7 visits 16, masked from 14. The loader brings every token up to Q7's diagonal.
    r = simulate(name, "b200", "1x1x1024x128", {"causal": 1, "block_n": bn}, check_races=True)
    ops = Counter(e.op for e in r["_events"] if e.kind != "wait")
    assert ops["Q0K"] == 896 // bn and ops["Q1K"] == 1024 // bn
    assert ops["TMA K"] == ops["TMA V"] == 1024 // bn
    assert ops["S0 pass 1: mask + row max (fma)"] == ops["S1 pass 1: mask + row max (fma)"] == 128 // bn
    assert r["work"]["qk_tiles_on_this_sm"] == 896 // bn + 1024 // bn
    assert r["races"] == []


def test_static_grid_stride_piles_the_longest_items_on_some_sms():
    # 10x16x1024x128: 4 pairs per head, 640 items. k14 strides by 148 CTAs, and 148 % 4 == 0, so CTA 3 takes
    # 5 items (3, 151, ..., 595), all pair 3 (Q tiles 6, 7: 7 + 8 tiles): 75 QK tiles, 40 tokens, 10 masked;
    # non-causal it has the same 5 items at 16 tiles each. The block scheduler (k13) deals by queued work:
    # at most the mean (160 heads x (3 + 7 + 11 + 15) / 148) plus one item (15).
    k14 = simulate("b200-k14-persistent", "b200", "10x16x1024x128", {"causal": 1})
    w = k14["work"]
    assert (w["qk_tiles_on_this_sm"], w["kv_tiles_on_this_sm"], w["masked_tiles_on_this_sm"]) == (75, 40, 10)
    assert simulate("b200-k14-persistent", "b200", "10x16x1024x128")["work"]["qk_tiles_on_this_sm"] == 80
    k13 = simulate("b200-k13-early-pv", "b200", "10x16x1024x128", {"causal": 1})
    assert k13["work"]["qk_tiles_on_this_sm"] <= 160 * 36 / 148 + 15
    assert k13["predicted_us"] < k14["predicted_us"]


def test_k14_at_the_first_fa4_shape_the_busiest_cta_by_hand():
    # 2048 items (16 pairs per head) on 148 CTAs: CTA c takes items c + 148k, k = 0..13 for c < 124, pair
    # (c + 4k) % 16. CTA 11: pairs 11 and 15 four times, 3 and 7 three times; a pair p visits
    # (2p + 1) + (2p + 2) QK tiles and loads 2p + 2 tokens: 4*47 + 4*63 + 3*15 + 3*31 = 578 QK tiles, 296 tokens.
    # (CTAs with c % 16 = 3, 7, 15 get 514, 546, 546.)
    r = simulate("b200-k14-persistent", "b200", "8x16x4096x128", {"causal": 1})
    assert (r["work"]["qk_tiles_on_this_sm"], r["work"]["kv_tiles_on_this_sm"]) == (578, 296)


@pytest.mark.parametrize("name, gpu, shape", [("b200-k14-persistent", "b200", "8x16x4096x128"),
                                              ("sm120-m07-register-tiling", "rtx5090", "2x16x4096x128")])
def test_causal_is_faster_but_does_not_double_the_rate(name, gpu, shape):
    full, causal = simulate(name, gpu, shape), simulate(name, gpu, shape, {"causal": 1})
    assert causal["predicted_us"] < full["predicted_us"]
    # half the FLOPs counted: the rate falls unless the time halves (it cannot: the busiest SM has more than half)
    assert 0.5 * full["tflops"] < causal["tflops"] < full["tflops"]
    assert causal["roofline_tflops"] == full["roofline_tflops"]


def test_a_long_head_roughly_halves_the_busiest_sms_tiles():
    full = simulate("b200-k13-early-pv", "b200", "2x16x16384x128")
    causal = simulate("b200-k13-early-pv", "b200", "2x16x16384x128", {"causal": 1})
    # 2048 items on 148 SMs: 14 items of 2 Q tiles x 128 K/V tiles non-causal. Causal, a head's 64 items hold
    # 128 * 129 / 2 = 8256 QK tiles: 32 heads x 8256 / 148 = 1785 on average, and the block scheduler's deal
    # stays within one item (at most 255 tiles) of that.
    assert full["work"]["qk_tiles_on_this_sm"] == 14 * 256
    assert 32 * 8256 / 148 <= causal["work"]["qk_tiles_on_this_sm"] <= 32 * 8256 / 148 + 255
    assert causal["predicted_us"] < full["predicted_us"]
    assert 0.5 * full["tflops"] < causal["tflops"] < full["tflops"]


def test_the_mask_costs_two_fma_pipe_ops_per_score_each_time_s_enters_registers():
    # 1x1x256x128 on b200-k04 (one Q tile per CTA, no register caching): both runs' busiest SM visits 2 tiles
    # (non-causal: Q0; causal: Q1, tile 1 masked). S is read twice from TMEM, so the masked tile pays
    # 2 passes x 128 x 128 scores x 2 ops at the FMA pipe's 128 ops/clk.
    p = load_profile("b200")
    fma_ns = [r["utilization"]["fma"] * r["predicted_us"] * 1e3 for r in
              (simulate("b200-k04-warp-specialization", "b200", "1x1x256x128", {"causal": c}) for c in (0, 1))]
    assert fma_ns[1] - fma_ns[0] == pytest.approx(2 * 128 * 128 * 2 / (p["fma_per_clk_sm"] * p["clock_ghz"]))
    # sm120 m04 at 1x1x128x128: 64-row CTAs, 64-key tiles; Q1's tile 1 is masked once in registers
    q = load_profile("rtx5090")
    fma_ns = [r["utilization"]["fma"] * r["predicted_us"] * 1e3 for r in
              (simulate("sm120-m04-q-hoist", "rtx5090", "1x1x128x128", {"causal": c}) for c in (0, 1))]
    assert fma_ns[1] - fma_ns[0] == pytest.approx(64 * 64 * 2 / (q["fma_per_clk_sm"] * q["clock_ghz"]))


def test_sm120_busiest_cta_holds_the_last_q_tile():
    # m07: 128-row CTAs, 64-key tiles; L = 1024 gives 8 CTAs on 170 SMs; Q tile 7 visits 16 tiles, masked from 14;
    # a register-tiled warp (fm = 2) runs its two 16-row chains apart, each with its own QK and mask per tile
    r = simulate("sm120-m07-register-tiling", "rtx5090", "1x1x1024x128", {"causal": 1})
    assert (r["work"]["kv_tiles_on_this_sm"], r["work"]["masked_tiles_on_this_sm"]) == (16, 2)
    ops = Counter((e.role, e.op) for e in r["_events"])
    assert ops[("cta0.w0", "causal mask")] == 2 * 2 and ops[("cta0.w0", "mma.sync QK")] == 2 * 16


def test_every_b200_and_sm120_schedule_takes_causal(capsys):
    names = [n for n in SCHEDULES if n.startswith(("b200-", "sm120-"))]
    for name in names:
        gpu = "b200" if name.startswith("b200") else "rtx5090"
        # the four-slot ring fits shared memory at head dim 64 only (tests/pipeline_sim/test_schedule_races.py)
        r = simulate(name, gpu, "1x2x512x64" if name == "sm120-r3-ring-d4" else "1x2x512x128", {"causal": 1})
        assert r["params"]["causal"] == 1 and 0 < r["tflops"] <= r["roofline_tflops"]
    assert main(["simulate", "--schedule", "b200-k14-persistent", "--shape", "1x2x512x128", "--causal",
                 "--json"]) == 0
    assert '"causal": 1' in capsys.readouterr().out
