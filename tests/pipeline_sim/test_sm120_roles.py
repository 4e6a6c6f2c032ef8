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
                                      "softmax ex2", "softmax FMA + O rescale", "P via smem", "mma.sync PV",
                                      "store O", "store O"]  # no ldmatrix: operands come straight from gmem
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
    assert "P via smem" in ops["sm120-m02-smem-staging"] and "P via smem" not in ops["sm120-m04-q-hoist"]


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
    assert land.end_ns == pytest.approx(4096 / ctx.grid.share(ctx.cost.reuse))
    assert ctx.env.now == pytest.approx(land.end_ns + P["l2_latency_ns"])


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
    tma = TmaEngine(ctx, unit="l2", style="transfer", reuse=ctx.cost.reuse)
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
    assert [s.name for s in m.SCHEDULES] == list(m.VARIANTS)
    assert all(s.arch == "sm120" and s.gpu == "rtx5090" for s in m.SCHEDULES)
    assert lookup("sm120-m06-tma").description.startswith("warp 0 issues a TMA box per K/V tile")


def test_the_fit_counts_the_ctas_the_busiest_sm_held():
    one = simulate("sm120-m04-q-hoist", "rtx5090", "1x1x256x64")  # 4 CTAs on 4 SMs: one each
    many = simulate("sm120-m04-q-hoist", "rtx5090", "1x8x4096x64")
    assert one["fit"]["ctas_per_sm"] == 1 and many["fit"]["ctas_per_sm"] == 2
    assert many["fit"]["registers"] == 4 * 32 * 254
