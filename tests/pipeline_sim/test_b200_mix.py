"""The B200 row warps' costs from the seed's compiled instruction mix (lapis/data/captures/seeds/b200-481f9aa)
through the SMSP bound model on the cited sm_100 constants, and never from the seed's measured table."""

import pytest

from lapis.catalog.attention_b200 import MIX
from lapis.data import CAPTURES, DATA, SEEDS
from lapis.errors import ScheduleError
from lapis.model.profile import load_profile
from lapis.pipeline_sim.schedules import attention_b200 as b200
from lapis.pipeline_sim.simulate import simulate

DIMS = (1, 16, 4096, 128)
CLOCK = 1.856  # GHz, lapis/data/profiles/b200.json


def _cost(name: str, **params):
    return b200.AttentionCosts.of(b200.CHAPTERS[name], load_profile("b200"), DIMS, {**b200.DEFAULTS, **params})


def _compute(*passes, unit):
    return sum(getattr(rp, unit) for rp in passes)


def test_every_chapter_names_one_loop_of_the_capture():
    assert list(MIX) == list(b200.CHAPTERS)
    for e in MIX.values():  # each named loop exists exactly once (capture_loop raises otherwise)
        b200.loop_ns(e["kernel"], *e["rows"], e["warps"], CLOCK)
        if e["correction"]:
            b200.loop_ns(e["kernel"], *e["correction"], e["warps"], CLOCK)


def test_k04_row_warps_cost_the_issue_bound_of_their_compiled_loop():
    # manifest k04, softmax loop at 0x58e0: fma 776, alu 273, xu 129, lsu 5, tmem 72, cbu 8, adu 108 = 1371
    # warp-instructions. Bounds (smsp_sm100.json): issue 1371 / 1; fma 776 / 1; alu 273 / 0.5 = 546;
    # xu 129 / 0.125 = 1032; lsu 5 / 0.25 = 20; adu 108 / 0.5 = 216; latency 140 (chain) x 4 = 560 -> issue, 1371.
    c = _cost("b200-k04-warp-specialization")
    assert c.rescale_frequency == 1.0
    assert _compute(c.row_max, c.rescale, c.softmax, unit="fma") == pytest.approx(1371 / CLOCK)
    assert _compute(c.row_max, c.rescale, c.softmax, unit="mufu") == 0


def test_k08_row_warps_are_mufu_bound():
    # manifest k08 softmax loop: 871 instructions, 129 MUFU.EX2 -> xu 129 / 0.125 = 1032 cycles > issue 871
    c = _cost("b200-k08-hw-approx")
    assert _compute(c.row_max, c.rescale, c.softmax, unit="mufu") == pytest.approx(1032 / CLOCK)
    assert _compute(c.row_max, c.rescale, c.softmax, unit="fma") == 0


def test_k12_rescale_is_half_the_correction_loop():
    # manifest k12 correction loop: 505 instructions (fma 260, alu 24 -> 48, lsu 9 -> 36, tmem 64, uniform 6,
    # cbu 19 -> 38, adu 123 -> 246, latency 5 x 4 = 20): issue-bound at 505 cycles for both Q tiles' O
    c = _cost("b200-k12-split-correction")
    assert c.rescale.fma == pytest.approx(505 / 2 / CLOCK * c.rescale_frequency)
    # its softmax loop: 715 instructions, 97 MUFU.EX2 -> 776 cycles of xu, the bound
    assert _compute(c.row_max, c.softmax, unit="mufu") == pytest.approx(776 / CLOCK)


def test_mix_0_keeps_the_mechanism_costs():
    c = _cost("b200-k04-warp-specialization", mix=0)
    assert c.softmax.mufu == pytest.approx(128 * 128 / (16 * CLOCK))  # 16384 ex2 at 16 / clk / SM
    assert c.row_max.fma == pytest.approx(128 * 128 / (128 * CLOCK))  # one FMA-pipe op per score at 128 / clk / SM


def test_other_tiles_than_the_compiled_ones_keep_the_mechanism_costs():
    assert _cost("b200-k04-warp-specialization", block_n=64) == b200.AttentionCosts.of(
        b200.CHAPTERS["b200-k04-warp-specialization"], load_profile("b200"), DIMS,
        {**b200.DEFAULTS, "block_n": 64, "mix": 0})


def test_a_bad_mix_value_is_a_schedule_error():
    with pytest.raises(ScheduleError, match="mix chooses"):
        simulate("b200-k04-warp-specialization", "b200", "1x2x1024x128", {"mix": 2})


def test_costing_reads_the_capture_and_constants_never_the_seed_table(files_read):
    b200.loop_ns.cache_clear()
    b200._sm100.cache_clear()
    for name in b200.CHAPTERS:
        _cost(name)
    simulate("b200-k14-persistent", "b200", "1x2x1024x128")
    seeds = SEEDS.resolve()
    assert [p for p in files_read if p.is_relative_to(seeds)] == []
    assert (CAPTURES / "seeds" / "b200-481f9aa" / "manifest.json").resolve() in files_read
    assert (DATA / "smsp_sm100.json").resolve() in files_read


def test_the_swizzle_chapter_moves_through_its_compiled_loop():
    # k03's serial loop issues 34 TMA copies where k02's issues 272 (non-swizzled boxes): 1662 vs 2542
    # instructions, both issue-bound, so k03's row passes are shorter and its prediction faster
    k02, k03 = (_cost(n) for n in ("b200-k02-p-in-tmem", "b200-k03-swizzle"))
    assert _compute(k02.row_max, k02.rescale, k02.softmax, unit="fma") == pytest.approx(2542 / CLOCK)
    assert _compute(k03.row_max, k03.rescale, k03.softmax, unit="fma") == pytest.approx(1662 / CLOCK)
    t = {n: simulate(n, "b200", "1x16x2048x128")["predicted_us"] for n in ("b200-k02-p-in-tmem", "b200-k03-swizzle")}
    assert t["b200-k03-swizzle"] < t["b200-k02-p-in-tmem"]


def test_row_passes_last_at_least_their_warps_own_period():
    # manifest k04 softmax loop: one warp alone under the compiled control bits takes warp_cycles 2587 a tile (its
    # RAW chain at sm_100 latencies: 586), more than its issue bound 1371: the passes hold the FMA pipe 1371
    # cycles and last 2587 in all
    c = _cost("b200-k04-warp-specialization")
    assert _compute(c.row_max, c.rescale, c.softmax, unit="fma") == pytest.approx(1371 / CLOCK)
    assert _compute(c.row_max, c.rescale, c.softmax, unit="own") == pytest.approx(2587 / CLOCK)
    # k12: the correction loop's 1372 cycles (warp_cycles) for both Q tiles' O, half a rescale each
    k12 = _cost("b200-k12-split-correction")
    assert k12.rescale.own == pytest.approx(1372 / 2 / CLOCK * k12.rescale_frequency)
    assert _compute(k12.row_max, k12.softmax, unit="own") == pytest.approx(1332 / CLOCK)


def test_a_pass_waits_its_own_period_without_holding_the_unit():
    import simpy
    from types import SimpleNamespace

    from lapis.pipeline_sim.recorder import Recorder
    env = simpy.Environment()
    ctx = SimpleNamespace(env=env, rec=Recorder(env), busy={u: 0.0 for u in b200.ROW_UNITS},
                          units={u: simpy.Resource(env, 1) for u in b200.ROW_UNITS})
    ctx.occupy = lambda unit, ns, role, op, **kw: _occupy(ctx, unit, ns, role, op, **kw)
    ctx.record = ctx.rec.add
    done = {}

    def warp(role):
        yield from b200.row_pass(ctx, role, b200.RowPass(fma=10.0, own=30.0), "pass")
        done[role] = env.now

    env.process(warp("a"))
    env.process(warp("b"))
    env.run()
    # b queues 10 ns behind a's FMA time, which counts toward its own 30: both end at 30, not at 10 + 30
    assert done == {"a": 30.0, "b": 30.0} and ctx.busy["fma"] == 20.0
    assert [(e.role, e.op, e.start_ns, e.end_ns) for e in ctx.rec.events if "stalls" in e.op] == [
        ("a", "pass (dependency stalls)", 10.0, 30.0), ("b", "pass (dependency stalls)", 20.0, 30.0)]


def _occupy(ctx, unit, ns, role, op, **kw):
    from lapis.pipeline_sim.units import occupy
    yield from occupy(ctx.env, ctx.rec, ctx.units[unit], ns, ctx.busy, unit, role, op, **kw)
