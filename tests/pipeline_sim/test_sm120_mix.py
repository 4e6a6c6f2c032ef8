"""The sm120 warps' FMA-pipe, ALU and MUFU costs from the moves' compiled loops (mix=1: the emmy-0.3.22 capture at
the rtx5090 profile's cited rates), the mechanism's costs at mix=0 (the default), and never the seed table."""

import pytest

from lapis.data import CAPTURES, PROFILES, SEEDS
from lapis.errors import ScheduleError
from lapis.model import smsp
from lapis.model.profile import load_profile
from lapis.pipeline_sim.schedule import lookup
from lapis.pipeline_sim.schedules import attention_sm120 as m
from lapis.pipeline_sim.simulate import simulate

P = load_profile("rtx5090")
CLOCK = 2.407  # GHz, lapis/data/profiles/rtx5090.json
DIMS = (1, 8, 4096, 64)  # the write-up's shape


def _cost(name: str, **params) -> m.Sm120Costs:
    s = lookup(name)
    prm, _ = s.resolve(P, DIMS, params)
    return s.costs(P, DIMS, prm, s.flags)


def test_mix_0_is_the_default_and_keeps_the_mechanism_costs():
    # m06, 16 rows x 64 keys = 1024 scores a tile: (1024 x (4 + 13) + 16 x 64 rescale) / 32 lane-ops a clock on a
    # quarter SM = 576 cycles of FMA pipe; 1024 ex2 / 4 a clock = 256 cycles of MUFU
    assert m.DEFAULTS["mix"] == 0
    c = _cost("sm120-m06-tma")
    assert c.fma_ns == pytest.approx(576 / CLOCK)
    assert c.mufu_ns == pytest.approx(256 / CLOCK)


def test_the_sm120_rates_per_smsp_come_from_the_profile():
    # 128 FP32 FMA, 64 compare/min/max/shift, 16 MUFU results a clock per SM, over 4 SMSPs x 32 lanes
    assert m.smsp_rates(P) == dict(issue=1, fma=1.0, alu=0.5, xu=0.125)


def test_m06_costs_the_issue_bound_of_its_compiled_loop():
    # manifest w4x1-m06, K/V loop (serial, depth 0): fma 339, alu 132, xu 34, lsu 47, tensor 64, uniform 33, cbu 2,
    # adu 39 = 690 warp-instructions per warp per K/V tile. Bounds at the profile's rates: issue 690 / 1 = 690;
    # fma 339 / 1 = 339; alu 132 / 0.5 = 264 -> FMA unit 690 cycles = 690 / 2.407 = 286.7 ns;
    # MUFU 34 / 0.125 = 272 cycles = 113.0 ns
    c = _cost("sm120-m06-tma", mix=1)
    assert c.fma_ns == pytest.approx(690 / CLOCK)
    assert c.mufu_ns == pytest.approx(272 / CLOCK)


def test_m07_costs_both_chains_of_its_compiled_loop():
    # manifest w4x1-m07 (fm 2: the loop is both 16-row chains): fma 677, alu 220, xu 68, 1255 instructions;
    # issue 1255 > fma 677 > alu 440 -> 1255 cycles; MUFU 68 / 0.125 = 544 cycles. chain_math takes half of each.
    c = _cost("sm120-m07-register-tiling", mix=1)
    assert c.fma_ns == pytest.approx(1255 / CLOCK)
    assert c.mufu_ns == pytest.approx(544 / CLOCK)


def test_fast_exp_takes_libm_expf_extra_instructions_off_every_captured_exponential():
    # w4x1-m07 holds 68 MUFU.EX2, one FFMA.SAT and one FFMA.RM each (libm expf's range reduction) and a
    # SHF.L.U32 each at least (its exponent): fast exp removes 5 FMA-pipe and 1 ALU instruction per exponential:
    # fma 677 - 340 = 337, alu 220 - 68 = 152, 1255 - 408 = 847 instructions -> issue-bound, 847 cycles
    ops = smsp.capture_loop(m.MIX_CAPTURE, "w4x1-m07", *m.MIX_LOOP)["ops"]
    assert ops["MUFU.EX2"] == ops["FFMA.SAT"] == ops["FFMA.RM"] == 68
    assert ops["SHF.L.U32"] >= 68
    assert m.mix_pipes("w4x1-m07", "fast")["fma"] == 337
    assert m.mix_pipes("w4x1-m07", "fast")["alu"] == 152
    c = _cost("sm120-r2-fast-exp", mix=1)
    assert c.fma_ns == pytest.approx(847 / CLOCK)
    assert c.mufu_ns == pytest.approx(544 / CLOCK)


def test_every_move_reads_its_kernel_and_a_refused_move_its_baselines():
    kernels = {name: flags["kernel"] for name, flags in m.VARIANTS.items()}
    assert list(kernels.values()) == ["w4x1-m01", "w4x1-m02-m04", "w4x1-m02-m04", "w4x1-m02-m04", "w4x1-m05",
                                      "w4x1-m06", "w4x1-m07"]
    for name, base in m.REFUSED_BASELINE.items():
        assert m.REFUSED_VARIANTS[name]["kernel"] == kernels[base]
    for kernel in set(kernels.values()):  # each kernel's K/V loop exists exactly once (capture_loop raises else)
        smsp.capture_loop(m.MIX_CAPTURE, kernel, *m.MIX_LOOP)


def test_other_geometries_keep_the_mechanism_costs():
    # the capture's kernels are 4 warps, block_n 64, D 64: at block_n 32, mix=1 costs as mix=0
    mech, mixed = (_cost("sm120-m06-tma", block_n=32, mix=x) for x in (0, 1))
    assert mixed.fma_ns == mech.fma_ns == pytest.approx((16 * 32 * 17 + 16 * 64) / 32 / CLOCK)


def test_a_bad_mix_value_is_a_schedule_error():
    with pytest.raises(ScheduleError, match="mix chooses"):
        simulate("sm120-m06-tma", "rtx5090", "1x1x256x64", {"mix": 2})


def test_costing_reads_the_capture_and_profile_never_the_seed_table(files_read):
    m.mix_pipes.cache_clear()
    for name in (*m.VARIANTS, *m.REFUSED_VARIANTS):
        _cost(name, mix=1)
    simulate("sm120-m07-register-tiling", "rtx5090", "1x1x512x64", {"mix": 1})
    assert [p for p in files_read if p.is_relative_to(SEEDS.resolve())] == []
    assert (CAPTURES / "seeds" / "emmy-0.3.22" / "manifest.json").resolve() in files_read
    assert (PROFILES / "rtx5090.json").resolve() in files_read
