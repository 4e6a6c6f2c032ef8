"""The sm120 schedules' roles run alone over a hand-made Context, and each move picks the warp role and the cost
options it stands for (lapis.pipeline_sim.schedules.attention_sm120)."""

import pytest
import simpy

from lapis.model.profile import load_profile
from lapis.pipeline_sim.context import Context
from lapis.pipeline_sim.grid import Grid, SmGroup
from lapis.pipeline_sim.recorder import Recorder
from lapis.pipeline_sim.schedule import lookup
from lapis.pipeline_sim.schedules import attention_sm120 as m
from lapis.pipeline_sim.simulate import simulate
from lapis.pipeline_sim.tma import TmaEngine

P = load_profile("rtx5090")


def context(name: str, shape: str = "1x1x256x64", params: dict | None = None, work: tuple = ((2, 2),)) -> Context:
    """One SM of `name` on its own: the move's parameters, costs and units, `work` its CTAs' spans."""
    s = lookup(name)
    dims = s.parse_shape(shape)
    prm, _ = s.resolve(P, dims, dict(params or {}))
    env = simpy.Environment()
    return Context(env, Recorder(env), Grid(P, 1, static=True), SmGroup(tuple(work), [0]), P, prm,
                   s.costs(P, dims, prm, s.flags), dims, s.flags, units=s.units, busy=s.busy)


def run(ctx: Context, gen) -> list:
    ctx.env.process(gen)
    ctx.env.run()
    return ctx.rec.events


def test_the_direct_warp_alone_loads_its_operands_then_runs_the_tile_math():
    ctx = context("sm120-m01-tensor-cores", params={"warps": 1}, work=((1, 1),))
    cta = m.Cta.open(ctx, 0, 0)
    events = run(ctx, m.warp_direct(ctx, cta, 0))
    assert [e.op for e in events] == ["ld.global K/V", "Q from HBM", "K/V from L2 (waited)", "mma.sync QK",
                                      "softmax ex2", "softmax FMA + O rescale", "P to smem", "ldmatrix P",
                                      "mma.sync PV", "store O", "store O"]  # operands straight from gmem
    assert {e.role for e in events} == {"cta0.w0"}
    qk = next(e for e in events if e.op == "mma.sync QK")
    assert qk.end_ns - qk.start_ns == pytest.approx(ctx.cost.gemm_ns)
    waited = next(e for e in events if e.op == "K/V from L2 (waited)")
    assert qk.start_ns == pytest.approx(waited.end_ns + P["l2_latency_ns"])  # the load's latency is waited
    assert ctx.busy["tensor"] == pytest.approx(2 * ctx.cost.gemm_ns / m.SMSP_PER_SM)  # a quarter of the SM's rate


def test_tile_math_follows_the_moves_cost_options():
    ops = {}
    for name in ("sm120-m02-smem-staging", "sm120-m04-q-hoist"):
        ctx = context(name, params={"warps": 1})
        events = run(ctx, m.tile_math(ctx, m.Cta.open(ctx, 0, 0), 0, 0))
        ops[name] = {e.op: e.end_ns - e.start_ns for e in events}
    c = context("sm120-m02-smem-staging", params={"warps": 1}).cost
    assert ops["sm120-m02-smem-staging"]["ldmatrix K (+Q)"] == pytest.approx(c.lsu_ns(c.tile_bytes + c.q_bytes))
    assert ops["sm120-m04-q-hoist"]["ldmatrix K (+Q)"] == pytest.approx(c.lsu_ns(c.tile_bytes))
    assert ops["sm120-m02-smem-staging"]["P to smem"] == pytest.approx(c.lsu_ns(c.p_smem_bytes // 2))
    assert "P to smem" not in ops["sm120-m04-q-hoist"] and "ldmatrix P" not in ops["sm120-m04-q-hoist"]


def test_a_diagonal_tile_is_masked_once():
    ctx = context("sm120-m04-q-hoist", params={"warps": 1, "causal": 1}, work=((2, 1),))
    cta = m.Cta.open(ctx, 0, 0)
    run(ctx, m.tile_math(ctx, cta, 0, 0))
    events = run(ctx, m.tile_math(ctx, cta, 0, 1))  # the whole timeline: tile 0's ops, then tile 1's
    assert [e.k_index for e in events if e.op == "causal mask"] == [1]


def test_a_cp_async_group_lands_on_the_load_path_after_the_latency():
    ctx = context("sm120-m05-cp-async-ring")
    events = run(ctx, m.cp_async_land(ctx, 4096, 3, 1))
    (land,) = events
    assert (land.role, land.op, land.work_item, land.k_index) == ("l2", "cp.async land", 3, 1)
    # one SM on the chip: the chip's 6.5 TB/s L2 is more than the SM's own fill rate, 128 B/clk x 2.407 GHz
    assert land.end_ns == pytest.approx(4096 / (128 * 2.407))
    assert ctx.env.now == pytest.approx(land.end_ns + P["l2_latency_ns"])


def test_a_load_burst_shares_l2_with_the_other_sms_as_busy_as_this_one():
    ctx = context("sm120-m04-q-hoist")
    ctx.grid = Grid(P, 170, static=True)
    assert m.load_rate(ctx, 64) == pytest.approx(6500 / 170)  # at the start every SM loads: the equal share
    ctx.env.run(until=1000.0)
    ctx.busy["l2"] = 250.0  # the SM's load path busy a quarter of the time so far
    events = run(ctx, m.cp_async_land(ctx, 4096, 0, 0))
    # 6500 B/ns among this SM and 169 x 0.25 others: 6500 / 43.25 = 150.3 B/ns
    assert events[-1].end_ns == pytest.approx(1000.0 + 4096 * 43.25 / 6500)


def test_a_load_burst_never_runs_ahead_of_the_sms_equal_share():
    ctx = context("sm120-m04-q-hoist")
    ctx.grid = Grid(P, 170, static=True)
    ctx.env.run(until=1000.0)
    ctx.busy["l2"] = 250.0  # a burst would move at 150.3 B/ns (27.3 ns for 4 KB) ...
    ctx.load_path = m.LoadPath(share_ns=1000.0)  # ... but the SM's loads so far took 1000 ns at the equal share
    assert m.load_ns(ctx, 4096, 64) == pytest.approx(4096 * 170 / 6500)  # so 4 KB at 6500 / 170 B/ns: 107.1 ns
    assert ctx.load_path.share_ns == pytest.approx(1000.0 + 4096 * 170 / 6500)


def test_slab_warps_hand_off_through_syncthreads_with_a_flow_from_the_last_arrival():
    ctx = context("sm120-m02-smem-staging", params={"warps": 2}, work=((1, 1),))
    cta = m.Cta.open(ctx, 0, 0)
    for w in range(2):
        ctx.env.process(m.warp_slab(ctx, cta, w))
    ctx.env.run()
    events = {e.id: e for e in ctx.rec.events}
    waits = [e for e in events.values() if e.op.startswith("wait __syncthreads")]
    assert waits and all(e.flow_from is not None for e in waits)
    for e in waits:  # the hand-off comes from the other warp's last op before it arrived
        src = events[e.flow_from]
        assert src.role != e.role and src.end_ns <= e.end_ns
    assert [e.op for e in events.values() if e.role == "l2"] == ["cp.async land"] * 2


def test_a_lone_tma_warp_produces_and_consumes_its_ring():
    ctx = context("sm120-m06-tma", params={"warps": 1}, work=((3, 3),))
    # a TMA latency (600 ns) long enough that the warp waits for every tile of the ring, so each wait is drawn
    tma = TmaEngine(ctx, unit="l2", style="transfer", reuse=ctx.cost.reuse, latency_ns=600.0)
    cta = m.Cta.open(ctx, 0, 0, tma)
    events = run(ctx, m.warp_tma(ctx, cta, 0))
    copies = [e for e in events if e.role == "tma"]
    assert [(e.op, e.k_index) for e in copies] == [("TMA K+V", j) for j in range(3)]
    waits = [e for e in events if e.op == "wait K/V (mbarrier)"]
    by_id = {e.id: e for e in events}
    assert waits and all(by_id[e.flow_from].op == "TMA K+V" and by_id[e.flow_from].k_index == e.k_index
                         for e in waits)
    assert [e.k_index for e in events if e.op == "mma.sync PV"] == [0, 1, 2]
    assert not any(e.op.startswith("cp.async") for e in events)


@pytest.mark.parametrize("name, role, q_slab, p_via_smem, rows", [
    ("sm120-m01-tensor-cores", m.warp_direct, False, True, 16),
    ("sm120-m02-smem-staging", m.warp_slab, True, True, 16),
    ("sm120-m03-c-to-a-repack", m.warp_slab, True, False, 16),
    ("sm120-m04-q-hoist", m.warp_slab, False, False, 16),
    ("sm120-m05-cp-async-ring", m.warp_ring, False, False, 16),
    ("sm120-m06-tma", m.warp_tma, False, False, 16),
    ("sm120-m07-register-tiling", m.warp_tma, False, False, 32),
])
def test_each_move_picks_its_warp_role_and_cost_options(name, role, q_slab, p_via_smem, rows):
    s = lookup(name)
    assert m.warp_role(s.flags) is role
    c = context(name, shape="1x1x256x64").cost
    assert c.rows == rows and s.resolve(P, (1, 1, 256, 64), {})[0]["block_m"] == 4 * rows
    assert (c.p_smem_bytes > 0) == p_via_smem
    staged = role is not m.warp_direct
    assert c.ldmatrix_k_bytes == (c.tile_bytes + c.q_bytes * q_slab if staged else 0)
    assert c.ldmatrix_v_bytes == (c.tile_bytes if staged else 0)


def test_the_moves_are_schedules_in_order_with_their_descriptions():
    assert [s.name for s in m.SCHEDULES] == list(m.VARIANTS) + list(m.REFUSED_VARIANTS)
    assert all(s.arch == "sm120" and s.gpu == "rtx5090" for s in m.SCHEDULES)
    assert lookup("sm120-m06-tma").description.startswith("warp 0 issues a TMA box per K/V tile")


def test_the_fit_counts_the_ctas_the_busiest_sm_held():
    one = simulate("sm120-m04-q-hoist", "rtx5090", "1x1x256x64")  # 4 CTAs on 4 SMs: one each
    many = simulate("sm120-m04-q-hoist", "rtx5090", "1x8x4096x64")
    assert one["fit"]["ctas_per_sm"] == 1 and many["fit"]["ctas_per_sm"] == 2
    assert many["fit"]["registers"] == 4 * 32 * 254


def test_the_p_hand_off_waits_for_every_warp_only_under_syncthreads():
    waits = {}
    for name in ("sm120-m02-smem-staging", "sm120-r1-warp-scoped-barrier"):
        ctx = context(name, params={"warps": 2}, work=((1, 1),))
        cta = m.Cta.open(ctx, 0, 0)
        for w in range(2):
            ctx.env.process(m.warp_slab(ctx, cta, w))
        ctx.env.run()
        waits[name] = [e for e in ctx.rec.events if e.op == "wait __syncthreads (P hand-off)"]
        assert cta.phases == [3 if name.startswith("sm120-m02") else 2] * 2  # slab full, (hand-off,) slab free
    # warp 1's P store queues behind warp 0's on the one LSU, so warp 0 waits at the hand-off
    assert [e.role for e in waits["sm120-m02-smem-staging"]] == ["cta0.w0"]
    assert waits["sm120-r1-warp-scoped-barrier"] == []


def test_libm_expf_adds_thirteen_fma_ops_a_score_at_mix_0():
    fast, libm = (context(n).cost for n in ("sm120-r2-fast-exp", "sm120-m07-register-tiling"))
    per_op = fast.rows * 64 / (P["fma_per_clk_sm"] * P["clock_ghz"] / 4)  # rows x block_n scores on a quarter SM
    assert libm.fma_ns - fast.fma_ns == pytest.approx(13 * per_op)
    assert libm.mufu_ns == fast.mufu_ns  # one MUFU.EX2 a score either way


@pytest.mark.parametrize("name, slots, smem, resident", [
    ("sm120-m07-register-tiling", 2, 32768, 2),  # the write-up's final kernel: 32.0K smem, 17% occupancy
    ("sm120-r3-ring-d3", 3, 49152, 2),  # still two CTAs: the register file allows two either way
    ("sm120-r3-ring-d4", 4, 65536, 1),  # 2 x 64 KB > 100 KB of smem an SM: one CTA
])
def test_deeper_rings_cost_shared_memory(name, slots, smem, resident):
    s = lookup(name)
    assert s.flags["slots"] == slots
    prm, fit = s.resolve(P, (1, 8, 4096, 64), {})
    assert (fit["smem_bytes"], fit["ctas_per_sm"]) == (smem, resident)


def test_the_producer_warp_costs_registers_and_feeds_the_ring():
    prm, fit = lookup("sm120-r4-warp-specialization").resolve(P, (1, 8, 4096, 64), {})
    assert fit["registers"] == 5 * 32 * 254 and fit["ctas_per_sm"] == 1  # 40640 x 2 > 65536
    ctx = context("sm120-r4-warp-specialization", params={"warps": 1}, work=((3, 3),))
    # a TMA latency (600 ns) long enough that the warp waits for every tile of the ring, so each wait is drawn
    tma = TmaEngine(ctx, unit="l2", style="transfer", reuse=ctx.cost.reuse, latency_ns=600.0)
    cta = m.Cta.open(ctx, 0, 0, tma)
    assert cta.producer == "cta0.producer"
    ctx.env.process(m.warp_tma(ctx, cta, 0))
    ctx.env.process(m.warp_producer(ctx, cta))
    ctx.env.run()
    copies = [e for e in ctx.rec.events if e.op == "TMA K+V"]
    assert [e.k_index for e in copies] == [0, 1, 2]
    assert copies[1].start_ns < ctx.cost.gemm_ns  # both slots filled at once: the producer waits for no math
    slot = next(e for e in ctx.rec.events if e.op == "wait K/V slot")  # tile 2 waits for tile 0's release
    pv0 = max(e.end_ns for e in ctx.rec.events if e.op == "mma.sync PV" and e.k_index == 0)  # both chains' PV
    assert (slot.role, slot.k_index, slot.end_ns) == ("cta0.producer", 2, pytest.approx(pv0))
    assert sorted(e.k_index for e in ctx.rec.events if e.op == "mma.sync PV") == [0, 0, 1, 1, 2, 2]
    assert not any(e.role == "cta0.producer" and e.op.startswith("mma") for e in ctx.rec.events)


def test_each_refused_move_changes_one_kept_move():
    for name, _, base, _, change in m.REFUSED:
        assert m.REFUSED_VARIANTS[name] == {**m.VARIANTS[base], **change} != m.VARIANTS[base]


def test_a_register_tiled_warp_overlaps_its_two_chains():
    ctx = context("sm120-m07-register-tiling", params={"warps": 1})
    events = run(ctx, m.tile_math(ctx, m.Cta.open(ctx, 0, 0), 0, 0))
    tensor = sorted((e for e in events if e.op.startswith("mma.sync")), key=lambda e: e.start_ns)
    assert [e.op for e in tensor] == ["mma.sync QK", "mma.sync QK", "mma.sync PV", "mma.sync PV"]  # issue order
    c = ctx.cost
    assert all(e.end_ns - e.start_ns == pytest.approx(c.gemm_ns / 2) for e in tensor)  # one 16-row chain each
    ex2 = sorted(e.start_ns for e in events if e.op == "softmax ex2")
    assert ex2[0] == pytest.approx(tensor[0].end_ns) and ex2[0] < tensor[1].end_ns  # chain 0's softmax under QK1
    # the tile takes the four mmas back to back plus the ldmatrix: every softmax hides under the other chain's mma
    assert ctx.env.now == pytest.approx(c.lsu_ns(c.ldmatrix_k_bytes) + 2 * c.gemm_ns)


def test_kv_reuse_counts_the_q_tiles_that_visit_each_kv_tile():
    prm = dict(block_m=64, block_n=64, causal=0)
    assert m.kv_reuse(128, prm) == 2.0  # 2 Q tiles, each visits both K/V tiles
    assert m.kv_reuse(128, {**prm, "causal": 1}) == 1.5  # Q tile 0 visits tile 0, Q tile 1 both: 3 visits / 2
    assert m.kv_reuse(4096, {**prm, "causal": 1}) == 32.5  # 1 + 2 + ... + 64 = 2080 visits over 64 tiles
