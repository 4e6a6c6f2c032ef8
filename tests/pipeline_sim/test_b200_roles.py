"""The B200 schedule's roles run alone, with a test playing the other roles' barrier arrivals; and the chapters
pick the role variants and cost options the write-up's steps name."""

import simpy

from lapis.model.profile import load_profile
from lapis.pipeline_sim.context import Context
from lapis.pipeline_sim.grid import Grid, SmGroup
from lapis.pipeline_sim.recorder import Recorder
from lapis.pipeline_sim.schedules.attention_b200 import (
    CHAPTERS, COST_STEPS, ROLE_STEPS, SCHEDULES, UNMODELLED, VARIANTS, AttentionCosts, Cta, launch, loader,
    mma_in_order, mma_pipelined, row_warps, serial_cta)

P = load_profile("b200")
BY_NAME = {s.name: s for s in SCHEDULES}


def context(name: str, work: list, shape: str = "1x1x256x128"):
    """One SM's Context and CTA for schedule `name`, running the work items `work` (per item, per Q tile:
    (K/V tiles visited, first masked tile))."""
    s = BY_NAME[name]
    dims = s.parse_shape(shape)
    prm, _ = s.resolve(P, dims, {})
    env = simpy.Environment()
    ctx = Context(env, Recorder(env), Grid(P, 1, static=True), SmGroup(tuple(work), [0]), P, prm,
                  s.costs(P, dims, prm, s.flags), dims, s.flags, units=s.units)
    return ctx, Cta(ctx, CHAPTERS[name].roles)


def ops(ctx, role: str) -> list:
    return [e.op for e in ctx.rec.events if e.role == role]


def test_the_row_warps_alone_wait_for_s_rescale_o_after_pv_and_write_the_epilogue():
    ctx, cta = context("b200-k04-warp-specialization", [((2, 2),)])  # one item: one Q tile over 2 K/V tiles
    env, cost = ctx.env, ctx.cost

    def mma():  # plays the MMA warp's commits and the other roles' CTA-end arrivals
        yield env.timeout(100)
        qk0 = ctx.record("mma", "QK stub", env.now).id
        cta.s_ready[0].arrive("mma", event=qk0)
        yield env.timeout(5000)
        cta.pv_done[0].arrive("mma")
        cta.s_ready[0].arrive("mma")
        yield env.timeout(5000)
        pv1 = ctx.record("mma", "PV stub", env.now).id
        cta.pv_done[0].arrive("mma", event=pv1)
        for role in ("load", "mma"):
            cta.cta_end.arrive(role)

    ctx.spawn("softmax0", row_warps(ctx, cta, 0))
    env.process(mma())
    env.run()
    # k04's compiled loop is issue-bound (no MUFU hold); its one-warp period (2587 cycles) exceeds its issue bound
    # (1371), and each pass gets both in proportion to its mechanism cost: pass 2's share (1179 ns own against
    # 69 ns TMEM + 625 ns FMA) ends in its warps' own dependency stalls; pass 1 (107 against 69 + 57) and the
    # rescale (107 against 138 + 57) outlast their share of the period
    pass1 = ["S0 pass 1: row max (tmem)", "S0 pass 1: row max (fma)"]
    pass2 = ["S0 pass 2: P (tmem)", "S0 pass 2: P (fma)", "S0 pass 2: P (dependency stalls)"]
    assert ops(ctx, "softmax0") == ["wait S0", *pass1, *pass2, "wait S0", *pass1, "O0 rescale (tmem)",
                                    "O0 rescale (fma)", *pass2, "wait P0V done",
                                    "O0 TMEM -> registers", "O0 / rowsum", "store O0"]
    events = [e for e in ctx.rec.events if e.role == "softmax0"]
    first, done = events[0], next(e for e in events if e.op == "wait P0V done")
    assert (first.start_ns, first.end_ns, first.kind) == (0, 100, "wait")
    assert first.flow_from == ctx.rec.events[0].id  # the hand-off from the commit that completed S ready
    assert done.end_ns == 10100 and done.flow_from == ctx.rec.last_id("mma")
    assert events[1].end_ns - events[1].start_ns == cost.row_max.tmem  # the cost model says how long
    assert ctx.processes["softmax0"].triggered  # it reached the CTA's end once the other roles had arrived
    assert cta.p_ready[0].phase == 2  # P ready, once per K/V tile


def test_the_loader_alone_fills_the_ring_then_waits_for_a_free_slot():
    ctx, cta = context("b200-k06-load-pipeline", [((2, 2), (2, 2))])  # 3 slots; K0, V0, K1, V1 to load
    env = ctx.env

    def mma():  # frees slot 0 (K0's) at 5 µs
        yield env.timeout(5000)
        cta.kv.empty[0].arrive("mma", event=ctx.record("mma", "QK stub", env.now).id)

    ctx.spawn("load", loader(ctx, cta))
    env.process(mma())
    env.run(until=4000)
    assert [op for op in ops(ctx, "tma") if not op.startswith("wait")] == ["TMA Q x2", "TMA K", "TMA V", "TMA K"]
    assert ops(ctx, "load") == []  # blocked on the fourth token's slot: a wait is recorded when it returns
    env.run(until=20000)
    slot = next(e for e in ctx.rec.events if e.role == "load")
    assert (slot.op, slot.k_index, slot.end_ns, slot.flow_from) == ("wait V slot", 1, 5000, ctx.rec.last_id("mma"))
    assert ops(ctx, "tma")[-1] == "TMA V" and cta.kv.full[0].phase == 2  # V1 landed in slot 0


def test_the_serial_baseline_runs_alone_and_waits_after_every_mma():
    ctx, cta = context("b200-k01-baseline", [((2, 2),)])
    ctx.spawn("cta", serial_cta(ctx, cta))
    ctx.env.run()
    assert [op for op in ops(ctx, "tensor") if not op.startswith("wait")] == ["QK", "PV", "QK", "PV"]
    assert [op for op in ops(ctx, "cta") if "commit" in op] == ["wait QK commit", "wait PV commit"] * 2
    assert "O rescale (tmem)" in ops(ctx, "cta") and cta.mma_waits == 4
    mma = next(e for e in ctx.rec.events if e.role == "tensor")
    assert mma.end_ns - mma.start_ns == ctx.cost.mma_ns


def test_each_chapter_launches_its_roles():
    def roles(name):
        ctx, _ = context(name, [((2, 1), (2, 2))] if CHAPTERS[name].roles.q_tiles == 2 else [((2, 1),)])
        launch(CHAPTERS[name].roles, ctx)
        return list(ctx.processes)

    assert roles("b200-k01-baseline") == ["cta"]
    assert roles("b200-k04-warp-specialization") == ["load", "mma", "softmax0"]
    assert roles("b200-k05-two-q-tiles") == ["load", "mma", "softmax0", "softmax1"]
    assert roles("b200-k12-split-correction") == ["load", "mma", "softmax0", "softmax1", "correction"]


def test_chapters_pick_the_role_variants_and_cost_options_of_their_steps():
    c = {name[5:8]: ch for name, ch in CHAPTERS.items()}  # "k01", ..., "m4-"
    assert list(CHAPTERS) == list(VARIANTS)
    assert [k for k, ch in c.items() if ch.roles.serial] == ["k01", "k02", "k03"]
    assert c["k04"].roles.q_tiles == 1 and c["k05"].roles.q_tiles == 2
    assert not c["k05"].roles.kv_ring and c["k06"].roles.kv_ring
    assert c["k06"].roles.mainloop is mma_in_order and c["k07"].roles.mainloop is mma_pipelined
    assert c["k07"].options == c["k06"].options and c["k08"].options.hw_exp2 and not c["k08"].options.sw_exp2
    assert c["k09"].options.sw_exp2 and c["k10"].options.reg_cache and not c["k10"].options.skip_rescale
    assert c["k11"].options.skip_rescale and c["k11"].roles == c["k10"].roles
    assert not c["k11"].roles.correction and c["k12"].roles.correction
    assert not c["k12"].roles.early_pv and c["k13"].roles.early_pv
    assert not c["k13"].roles.persistent and c["k14"].roles.persistent
    names = list(CHAPTERS)
    for prev, name in zip(names, names[1:]):  # an unmodelled step changes neither the roles nor the costs
        unmodelled = set(VARIANTS[name]) - set(VARIANTS[prev]) - {"serial"} <= UNMODELLED
        same = (CHAPTERS[name].roles, CHAPTERS[name].options) == (CHAPTERS[prev].roles, CHAPTERS[prev].options)
        assert unmodelled == same, name
    assert set(ROLE_STEPS) | set(COST_STEPS) == set().union(*map(set, VARIANTS.values())) - UNMODELLED - {"serial"}


def test_the_cost_options_change_only_the_costs_they_name():
    dims, prm = (1, 1, 1024, 128), dict(block_n=128, sw_exp_per16=4, threshold=8, mix=0)  # the mechanism costs
    cost = {k: AttentionCosts.of(CHAPTERS[n], P, dims, prm) for k, n in (
        ("k07", "b200-k07-compute-pipeline"), ("k08", "b200-k08-hw-approx"), ("k09", "b200-k09-sw-exp2"),
        ("k10", "b200-k10-register-caching"), ("k11", "b200-k11-skip-rescale"))}
    assert cost["k08"].softmax.fma < cost["k07"].softmax.fma and cost["k08"].softmax.mufu == cost["k07"].softmax.mufu
    assert cost["k09"].softmax.mufu == cost["k08"].softmax.mufu * 12 / 16
    assert cost["k10"].softmax.tmem == cost["k09"].softmax.tmem * 32 / 128
    assert cost["k10"].row_max == cost["k09"].row_max and cost["k10"].rescale_frequency == 1.0
    assert cost["k11"].rescale_frequency < 0.5 and cost["k11"].rescale.fma < cost["k10"].rescale.fma
    assert cost["k11"].softmax_masked.fma > cost["k11"].softmax.fma  # a diagonal tile masks its scores
