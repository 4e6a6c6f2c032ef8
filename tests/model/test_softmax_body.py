"""The softmax tile's instruction stream and the SMSP model's cost of splitting its row reductions."""

import pytest

from lapis.errors import LapisError
from lapis.model import smsp
from lapis.model.softmax_body import chain_factor, tile_body


def test_one_chain_is_s9s_stream_of_a_64_by_128_tile():
    body = tile_body(1)
    ops = [i.opcode.split(".")[0] for i in body]
    # 64 FMNMX + 2 x 2 quad FMNMX; 64 FFMA; 64 MUFU; 64 FADD; 2 FMUL; 4 SHFL; 32 F2FP
    assert (ops.count("FMNMX"), ops.count("FFMA"), ops.count("MUFU"), ops.count("FADD")) == (68, 64, 64, 64)
    assert (ops.count("SHFL"), ops.count("FMUL"), ops.count("F2FP")) == (4, 2, 32)


def test_four_chains_add_only_the_trees_and_cut_the_dependent_chains():
    one, four = tile_body(1), tile_body(4)
    assert len(four) - len(one) == 2 * 3 + 2 * 3  # a 3-node tree per row for the max and for the sum
    consts = smsp.Constants.from_pipes_capture(smsp.PIPES_CAPTURE)
    t1, t4 = smsp.warp_period(one, consts), smsp.warp_period(four, consts)
    assert t4 < t1 - 64  # 32 dependent FMNMX a row at ~4.3 cycles become 8 and a tree
    p4 = smsp.predict_loop(four, 1, consts)
    assert p4.bound == "pipe.xu" and p4.cycles == pytest.approx(64 / consts.rate["xu"])  # MUFU-bound at 4 chains


def test_chain_factor_saves_only_for_one_softmax_warp_per_smsp():
    assert chain_factor(1) == chain_factor(1, 1) == 1.0
    assert 0.8 < chain_factor(4, 1) <= chain_factor(2, 1) < 1.0  # one warp alone: latency-bound with one chain
    # two warps (both consumer warpgroups' softmaxes, as s11 ran on the H200: 1-3% slower than s10 at the same
    # clock, capture race/h200-2026-12-01-steps, dropped from the tree, in git history): MUFU-bound with one chain
    # or four
    assert chain_factor(4, 2) == pytest.approx(1.0)
    with pytest.raises(LapisError, match="softmax_chains is 1, 2 or 4"):
        chain_factor(3)
    with pytest.raises(LapisError, match="at least 1"):
        chain_factor(4, 0)
