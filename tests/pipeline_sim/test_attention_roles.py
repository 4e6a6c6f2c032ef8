"""The Hopper attention roles (lapis.pipeline_sim.schedules.attention_h200) run alone on a hand-built Context with
hand-made costs: a consumer against a ring a test process fills, the producer against a consumer stub; and each
variant's Schedule picks the consumer role its flags name."""

import math
from types import SimpleNamespace

import pytest
import simpy

from lapis.errors import ScheduleError
from lapis.model import consumer_loop
from lapis.model.profile import load_profile
from lapis.pipeline_sim.context import Context
from lapis.pipeline_sim.pipeline import PipelineState
from lapis.pipeline_sim.recorder import Recorder
from lapis.pipeline_sim.schedules import attention_h200 as ah
from lapis.pipeline_sim.schedules import attention_h200_fa2 as fa2
from lapis.pipeline_sim.simulate import SCHEDULES
from lapis.pipeline_sim.units import SmspBusy

H200 = load_profile("h200")
TILE = 400  # bytes of a K or V tile (a bulk copy is a multiple of 16 B): the load path moves 4 B/ns here, so a copy
# holds it 100 ns


def costs(**over) -> ah.AttentionCosts:
    """Round numbers (ns, bytes) and no contention, so the timelines can be written down by hand."""
    base = dict(gemm_ns=100.0, wgmma_latency_ns=10.0, softmax_ns=50.0, rescale_ns=5.0, mask_ns=0.0,
                softmax_pair=1.0, softmax_under_gemm=1.0, pipe_under_softmax=1.0, turnover_ns=0.0, q_bytes=160,
                o_bytes=256, tile_bytes=TILE, l2_latency_ns=7.0, hbm_latency_ns=20.0, q_tiles=4, kv_tiles=2, items=1,
                kv_reuse=math.inf,  # every K/V load an L2 hit: L2's latency alone
                rescale_frequency=1.0, causal=False, flavour="exp2f", emulate_frac=0.0, lone_tail_ns=10.0)
    return ah.AttentionCosts(**{**base, **over})


def slot_of(flags: dict, work=((2,),), wgs=1):
    """One SM running `work` (CTAs, each its Q tiles' K/V tile counts) in one CTA slot, roles not started."""
    env = simpy.Environment()
    ctx = Context(env, Recorder(env), SimpleNamespace(share=lambda reuse: 4.0), SimpleNamespace(work=work), H200,
                  dict(stages=2, consumer_wgs=wgs, ctas_per_sm=1, q_slots=1), costs(), flags=flags,
                  units=("tensor", "tma"),
                  busy=("tensor", "softmax", "tma"))
    return ctx, ah.CtaSlot(ctx, ah.SmCtas(ctx), 0, 1)


def events(ctx, role: str) -> list:
    return [(e.op, e.start_ns, e.end_ns) for e in ctx.rec.events if e.role == role]


def hand_fed(ctx, slot, deliveries) -> dict:
    """K and V rings of 2 slots whose tiles a test process delivers (it plays the producer and the TMA): (at ns,
    ring, tile j) each, tile j into slot j % 2. Returns {(ring, j): id of the delivery's recorded event}."""
    rings = slot.rings = {x: ctx.pipeline(x, 2, "feeder", slot.consumers, TILE, buffer=x) for x in ("K", "V")}
    landed = {}

    def feeder():
        for at, x, j in deliveries:
            yield ctx.env.timeout(at - ctx.now)
            st = PipelineState(2, index=j % 2, phase=j // 2 % 2)
            rings[x].producer_expect(st)
            landed[x, j] = ctx.record("feeder", f"deliver {x}", ctx.now, work_item=0, k_index=j).id
            rings[x].landed(st, TILE, (0, j), None, "feeder", event=landed[x, j])

    ctx.child(feeder())
    return landed


def test_a_ring_consumer_alone_against_a_hand_fed_ring():
    ctx, slot = slot_of(dict(ws=True))
    landed = hand_fed(ctx, slot, ((100, "K", 0), (150, "V", 0), (300, "K", 1), (320, "V", 1)))
    rings = slot.rings
    ctx.spawn("consumer0", ah.consumer_ring(ctx, slot, 0))
    ctx.env.run()
    # QK_0 on the pipe 100 ns, seen 10 ns later; softmax + O rescale 55 ns; V_0 has landed, so PV_0 follows at
    # once; tile 1 the same from 375 (K_1 landed at 300); O out over the load path (64 ns), then HBM's latency.
    assert events(ctx, "consumer0") == [
        ("wait K", 0, 100), ("wgmma QK", 100, 200), ("wait wgmma (wait_group 0)", 100, 210), ("softmax", 210, 265),
        ("wgmma PV", 265, 365), ("wait wgmma (wait_group 0)", 265, 375),
        ("wgmma QK", 375, 475), ("wait wgmma (wait_group 0)", 375, 485), ("softmax", 485, 540),
        ("wgmma PV", 540, 640), ("wait wgmma (wait_group 0)", 540, 650), ("store O", 650, 714)]
    assert ctx.now == 734
    wait_k = next(e for e in ctx.rec.events if e.op == "wait K")
    assert wait_k.flow_from == landed["K", 0]  # the hand-off is drawn from the delivery that released it
    assert [b.phase for b in rings["K"].empty + rings["V"].empty] == [1, 1, 1, 1]  # every slot released once


def test_s1_to_s3_groups_land_the_lone_tail_after_the_pipe_and_a_turns_pair_the_pair_latency():
    """s1..s3 wait each group alone (wgmma_wait_group<0> after each commit): its result lands lone_tail_ns after
    the pipe; a GEMM turn's groups (s4+) issue back to back and keep the pair's wgmma_latency_ns."""
    ctx, slot = slot_of(dict(ws=True))
    ctx.cost = costs(lone_tail_ns=4.0)
    hand_fed(ctx, slot, ((100, "K", 0), (100, "V", 0), (100, "K", 1), (100, "V", 1)))
    ctx.spawn("consumer0", ah.consumer_ring(ctx, slot, 0))
    ctx.env.run()
    waits = [(e.start_ns, e.end_ns) for e in ctx.rec.events if e.op == "wait wgmma (wait_group 0)"]
    # QK_0 on the pipe 100..200, seen at 204; softmax + O rescale to 259; PV_0 259..359, seen at 363; tile 1 alike
    assert waits == [(100, 204), (259, 363), (363, 467), (522, 626)]

    ctx, slot = slot_of(dict())  # s1: the one warpgroup loads Q, K_j and V_j itself
    ctx.cost = costs(lone_tail_ns=4.0)
    ctx.spawn("consumer0", ah.consumer_serial(ctx, slot, 0))
    ctx.env.run()
    qk = [e for e in ctx.rec.events if e.op in ("wgmma QK", "wgmma PV")]
    waits = [e for e in ctx.rec.events if e.op == "wait wgmma (wait_group 0)"]
    assert len(qk) == len(waits) == 4 and all(w.end_ns == g.end_ns + 4.0 for g, w in zip(qk, waits))

    ctx, slot = slot_of(dict(ws=True, pingpong=True), wgs=2)
    ctx.cost = costs(lone_tail_ns=4.0)
    slot.build_rings()
    hand_fed(ctx, slot, ((0, "K", 0), (0, "K", 1), (0, "V", 0), (0, "V", 1)))
    for i in (0, 1):
        ctx.spawn(f"consumer{i}", ah.consumer_pingpong(ctx, slot, i))
    ctx.env.run()
    first = next(e for e in ctx.rec.events if e.role == "consumer0" and e.op.startswith("wait wgmma"))
    assert (first.start_ns, first.end_ns) == (0, 110)  # QK_0 on the pipe 0..100, seen the pair's 10 ns later


def test_the_lone_tail_is_the_latency_captures_beyond_one_wgmmas_pipe_time():
    """h200: wgmma_latency_ns 111.7 (one m64n256k16, wgmma.fence to wait_group 0) less its 128 cycles on the pipe
    (2 x 64 x 256 x 16 FLOP at 4096 FLOP/clk) at 1.634 GHz: 33.36 ns, about 54.5 cycles; the GEMM pair's (the
    wgmma_latency_ns of AttentionCosts) is its last group's: wgmma.latency.n128.rs, 108.5 cycles, less one
    m64n128k16's 64.6 on the pipe (micro/h200-2026-11-29 and the clock capture's rate), 43.9 cycles."""
    assert ah.lone_tail_ns(H200) == pytest.approx(111.7 - 128 / 1.634, abs=0.01)
    assert ah.lone_tail_ns(H200) * 1.634 == pytest.approx(54.5, abs=0.1)
    dims = (1, 2, 1024, 128)
    for name in ("h200-s2-ws-ring", "h200-s9-tuned"):
        s = SCHEDULES[name]
        c = ah.AttentionCosts.of(H200, dims, s.resolve(H200, dims, {})[0], s.flags)
        assert c.lone_tail_ns == ah.lone_tail_ns(H200)
        assert c.wgmma_latency_ns * 1.634 == pytest.approx(43.9, abs=0.1)


@pytest.mark.parametrize("flags, order", [
    (dict(ws=True), [("TMA K", 0), ("TMA V", 0), ("TMA K", 1), ("TMA V", 1), ("TMA K", 2), ("TMA V", 2)]),
    (dict(ws=True, pingpong=True, overlap=True),
     [("TMA K", 0), ("TMA K", 1), ("TMA V", 0), ("TMA K", 2), ("TMA V", 1), ("TMA V", 2)])])
def test_the_producer_alone_against_a_consumer_stub(flags, order):
    ctx, slot = slot_of(flags, work=((3,),))
    slot.build_rings()
    def stub():  # consumer0 reduced to its barrier protocol: wait for each tile, release it at once
        st = {x: PipelineState(2) for x in ("K", "V")}
        for j in range(3):
            for x in ("K", "V"):
                ring, full = slot.rings[x], slot.rings[x].full[st[x].index]
                yield from ctx.waited("consumer0", f"wait {x}", ring.consumer_wait(st[x], "consumer0"),
                                      flow=lambda f=full: f.last_completer, k_index=j)
                ring.consumer_release(st[x], "consumer0")
                st[x].advance()

    ctx.spawn("producer", ah.producer(ctx, slot))
    ctx.spawn("consumer0", stub())
    ctx.env.run()
    # Q first (40 B over the load path, then HBM's latency), then the copies on the TMA engine in load order, each
    # 100 ns on the load path, landing L2's latency (7 ns) later
    assert events(ctx, "producer")[0] == ("TMA Q", 0, 40)
    copies = [e for e in ctx.rec.events if e.role == "tma" and e.kind != "wait"]
    assert [(e.op, e.k_index) for e in copies] == order
    assert [(e.start_ns, e.end_ns) for e in copies] == [(60 + 100 * n, 160 + 100 * n) for n in range(6)]
    by_tile = {(e.op[-1], e.k_index): e.id for e in copies}
    waits = [e for e in ctx.rec.events if e.role == "consumer0"]
    assert len(waits) >= 4 and all(e.flow_from == by_tile[e.op[-1], e.k_index] for e in waits)  # its own copy
    assert all(p.processed for p in ctx.processes.values())  # producer_tail saw every slot released


@pytest.mark.parametrize("name, role", [
    ("h200-s1-serial", ah.consumer_serial), ("h200-s2-ws-ring", ah.consumer_ring),
    ("h200-s3-two-consumers", ah.consumer_ring), ("h200-s4-pingpong", ah.consumer_pingpong),
    ("h200-s5-intra-overlap", ah.consumer_overlap), ("h200-s6-exp2", ah.consumer_overlap),
    ("h200-s7-cond-rescale", ah.consumer_overlap), ("h200-s8-persistent", ah.consumer_overlap),
    ("h200-s9-tuned", ah.consumer_overlap)])
def test_each_variant_picks_its_consumer_role(name, role):
    s = SCHEDULES[name]
    assert s in ah.SCHEDULES and s.races == "slot"
    prm, _ = s.resolve(H200, (1, 2, 1024, 128), {})
    assert ah.consumer_role(s.flags, prm["consumer_wgs"]) is role


def test_ping_pong_needs_two_warpgroups_and_the_flavour_is_a_cost_option():
    s4, s7 = (SCHEDULES[n] for n in ("h200-s4-pingpong", "h200-s7-cond-rescale"))
    assert ah.consumer_role(s4.flags, 1) is ah.consumer_ring  # one WG has no one to take turns with
    assert ah.consumer_role(s7.flags, 1) is ah.consumer_overlap  # it overlaps within itself, without turns
    dims = (1, 2, 1024, 128)
    c5, c7 = (ah.AttentionCosts.of(H200, dims, s.resolve(H200, dims, {})[0], s.flags)
              for s in (SCHEDULES["h200-s5-intra-overlap"], s7))
    assert (c5.flavour, c7.flavour) == ("exp2f", "ex2_cond") and c5.rescale_frequency == 1.0
    assert c7.rescale_ns == pytest.approx(c5.rescale_ns * c7.rescale_frequency) and c7.rescale_frequency < 1


def test_two_pingpong_warpgroups_alone_take_turns_in_order():
    ctx, slot = slot_of(dict(ws=True, pingpong=True), wgs=2)
    slot.build_rings()
    hand_fed(ctx, slot, ((0, "K", 0), (0, "K", 1), (1000, "V", 0), (1100, "V", 1)))
    for i in (0, 1):
        ctx.spawn(f"consumer{i}", ah.consumer_pingpong(ctx, slot, i))
    ctx.env.run()
    # WG 0 issues QK_0 first (WG 1 pre-arrived its barrier), WG 1 next; in its second turn WG 0 waits for V_0
    # (1000) to issue PV_0 before QK_1, and only then hands the turn on: WG 1 waits for it from the end of its
    # softmax_0 (QK_0 queued behind WG 0's on the pipe: 100..200, seen at 210, softmax to 265)
    qk = [(e.role, e.k_index, e.start_ns) for e in ctx.rec.events if e.op == "wgmma QK"]
    assert qk[:3] == [("consumer0", 0, 0), ("consumer1", 0, 100), ("consumer0", 1, 1100)]
    turn = next(e for e in ctx.rec.events if e.op == "wait GEMM turn (bar.sync 2)")
    assert (turn.role, turn.k_index, turn.start_ns, turn.end_ns) == ("consumer1", 1, 265, 1000)
    handed = next(e for e in ctx.rec.events if e.id == turn.flow_from)
    assert (handed.role, handed.op, handed.end_ns) == ("consumer0", "wait V", 1000)  # WG 0's turn, up to its arrive


def test_fa2_sub_partition_busy_is_the_sum_divided_exactly():
    busy = {"tensor": 0.0}
    quarter = SmspBusy(busy)
    parts = [0.1, 1 / 3, 2.7, 1e-3, 12.34]
    for ns in parts:
        quarter["tensor"] += ns
    total = 0.0
    for ns in parts:
        total += ns
    assert busy["tensor"] == total / fa2.SMSP_PER_SM


def test_a_gemm_turn_takes_its_issue_time_before_the_next_turn():
    ctx, slot = slot_of(dict(ws=True, pingpong=True, overlap=True), wgs=2)
    ctx.cost = costs(turn_ns=(30.0, 20.0, 10.0))  # before the first wgmma group, the first group, the second
    slot.build_rings()
    hand_fed(ctx, slot, ((0, "K", 0), (0, "K", 1), (0, "V", 0), (0, "V", 1)))
    for i in (0, 1):
        ctx.spawn(f"consumer{i}", ah.consumer_overlap(ctx, slot, i))
    ctx.env.run()
    # WG 0's first turn: 30 ns to its first HGMMA (QK_0 reaches the pipe at 30), 20 ns of QK's k-steps, then the
    # bar.arrive at 50; WG 1 syncs at 50, issues for 30 ns and queues QK_0 behind WG 0's (pipe busy 30..130)
    assert events(ctx, "consumer0")[:2] == [("GEMM issue", 0, 30), ("GEMM issue", 30, 50)]
    qk = [(e.role, e.k_index, e.start_ns) for e in ctx.rec.events if e.op == "wgmma QK"]
    assert qk[:2] == [("consumer0", 0, 30), ("consumer1", 0, 130)]
    turn = next(e for e in ctx.rec.events if e.op == "wait GEMM turn (bar.sync 2)" and e.k_index == 0)
    assert (turn.role, turn.end_ns) == ("consumer1", 50)
    # the turn of tile 1 issues QK_1 and PV_0: all three segments; the item's last turn issues PV_1 alone: the
    # segment before the first group, then PV's
    second = [(e.start_ns, e.end_ns) for e in ctx.rec.events if e.role == "consumer0" and e.op == "GEMM issue"
              and e.k_index == 1]
    assert [b - a for a, b in second] == [30, 20, 10, 30, 10]


def test_turn_costs_come_from_the_kernels_sass_and_only_for_kernels_lapis_has_sass_of():
    dims = (1, 2, 1024, 128)
    s9, fa4 = SCHEDULES["h200-s9-tuned"], SCHEDULES["h200-fa4-sm90"]
    c9 = ah.AttentionCosts.of(H200, dims, s9.resolve(H200, dims, {})[0], s9.flags)
    turn = consumer_loop.load()["loops"]["s9"]["turn"]["cycles"]
    assert c9.turn_ns == pytest.approx(tuple(turn[k] / H200["clock_ghz"] for k in ("pre", "first", "second")))
    cf = fa4.costs(H200, dims, fa4.resolve(H200, dims, {})[0], fa4.flags)
    # FA4's own turn at head dim 128 (its committed SASS, lapis.model.consumer_loop.THIRD_PARTY): 17, 123 and 66
    # cycles (read from lapis/data/consumer_loops.json), not lapis's
    assert cf.turn_ns == pytest.approx(tuple(c / H200["clock_ghz"] for c in (17, 123, 66)))
    c256 = fa4.costs(H200, (1, 2, 1024, 256), fa4.resolve(H200, (1, 2, 1024, 256), {})[0], fa4.flags)
    assert c256.turn_ns == (0.0, 0.0, 0.0)  # head dim 256 has no ping-pong turn: no turn cost
    # block_n 64: PV has 4 k-steps, half of the second segment
    c64 = ah.AttentionCosts.of(H200, dims, s9.resolve(H200, dims, {"block_n": 64})[0], s9.flags)
    assert c64.turn_ns[2] == pytest.approx(c9.turn_ns[2] / 2) and c64.turn_ns[:2] == pytest.approx(c9.turn_ns[:2])
    # s14's own loop: descriptors advanced by constants, a shorter turn than s9's
    c14 = ah.AttentionCosts.of(H200, dims, s9.resolve(H200, dims, {"kernel_loop": "s14"})[0], s9.flags)
    assert sum(c14.turn_ns) < 0.8 * sum(c9.turn_ns)
    s4 = SCHEDULES["h200-s4-pingpong"]  # its turn issues PV first: an overlap kernel's loop does not fit it
    with pytest.raises(ScheduleError, match="kernel_loop"):
        ah.AttentionCosts.of(H200, dims, s4.resolve(H200, dims, {"kernel_loop": "s14"})[0], s4.flags)
    with pytest.raises(ScheduleError, match="kernel_loop"):
        fa4.costs(H200, dims, fa4.resolve(H200, dims, {"kernel_loop": "s9"})[0], fa4.flags)
    # one consumer warpgroup is no ping-pong: FA4's committed loop (two warpgroups' turns) does not cost it
    # (it took FA4's 17/123/66-cycle turn and softmax scale)
    c1 = fa4.costs(H200, dims, fa4.resolve(H200, dims, {"consumer_wgs": 1, "block_m": 64})[0], fa4.flags)
    assert c1.turn_ns == (0.0, 0.0, 0.0)


def test_side_warps_picks_the_loops_softmax_scale_with_one_or_two_softmax_warps():
    """side_warps 2 (the default) scales the softmax tile by the kernel loop's softmax_scale, 1 by
    softmax_scale_alone: for s16's loop 783/770.5 and 932/1010 (lapis/data/consumer_loops.json)."""
    dims = (1, 2, 1024, 128)
    s9 = SCHEDULES["h200-s9-tuned"]

    def softmax_ns(**prm):
        return ah.AttentionCosts.of(H200, dims, s9.resolve(H200, dims, dict(prm, late_v=1))[0], s9.flags).softmax_ns
    side = consumer_loop.load()["loops"]["s16"]["softmax_side"]
    two, one = softmax_ns(kernel_loop="s16"), softmax_ns(kernel_loop="s16", side_warps=1)
    assert softmax_ns(kernel_loop="s16", side_warps=2) == two
    assert one / two == pytest.approx(side["softmax_scale_alone"] / side["softmax_scale"]) == pytest.approx(
        932 / 1010 / (783 / 770.5))
    # s15's packs after the rescale's branch: one warp alone issues its side 5% longer than s16's
    assert softmax_ns(kernel_loop="s15", side_warps=1) / one == pytest.approx(979 / 932)


@pytest.mark.parametrize("schedule, side_warps", [("h200-s9-tuned", 3), ("h200-s9-tuned", 0),
                                                   ("h200-s3-two-consumers", 1), ("h200-s2-ws-ring", 1)])
def test_side_warps_is_two_or_one_on_a_ping_pong_schedule(schedule, side_warps):
    s, dims = SCHEDULES[schedule], (1, 2, 1024, 128)
    with pytest.raises(ScheduleError, match="side_warps is 2, or 1 on a ping-pong schedule"):
        s.resolve(H200, dims, {"side_warps": side_warps})


def test_the_turn_hand_over_costs_the_kernels_bar_sync_form_from_the_bar_microbenchmark():
    dims, ghz = (1, 2, 1024, 128), H200["clock_ghz"]
    s9, fa4 = SCHEDULES["h200-s9-tuned"], SCHEDULES["h200-fa4-sm90"]
    # micro_bar_v1.cu on the H200 (micro/h200-2026-12-02-bar): 57.42 cycles per hand-over with s16's predicated
    # pair, 35.3 with s17's register id; 19.92 cycles for a bar.sync whose arrivals are there
    assert (H200["bar_hop_cycles_pred"], H200["bar_hop_cycles_reg"], H200["bar_sync_present_cycles"]) == \
        (57.42, 35.3, 19.92)
    c16 = ah.AttentionCosts.of(H200, dims, s9.resolve(H200, dims, {"kernel_loop": "s16", "late_v": 1})[0], s9.flags)
    c17 = ah.AttentionCosts.of(H200, dims, s9.resolve(H200, dims, {"kernel_loop": "s17", "late_v": 1})[0], s9.flags)
    assert c16.handover_ns == pytest.approx((56.42 / ghz, 19.92 / ghz))
    assert c17.handover_ns == pytest.approx((34.3 / ghz, 19.92 / ghz))
    cf = fa4.costs(H200, dims, fa4.resolve(H200, dims, {})[0], fa4.flags)
    assert cf.handover_ns == pytest.approx((34.3 / ghz, 19.92 / ghz))  # FA4 names its barrier in a register
    s2 = SCHEDULES["h200-s2-ws-ring"]
    assert ah.AttentionCosts.of(H200, dims, s2.resolve(H200, dims, {})[0], s2.flags).handover_ns == (0.0, 0.0)


def test_a_released_turn_pays_the_hand_over_and_a_ready_one_the_present_cost():
    from lapis.pipeline_sim.simulate import simulate
    ev = simulate("h200-s9-tuned", "h200", "1x1x512x128", {"kernel_loop": "s17", "late_v": 1})["_events"]
    waits = {(e.role, e.end_ns): e for e in ev if e.op.startswith("wait GEMM turn")}
    hand = [e for e in ev if e.op == "turn hand-over"]
    ghz = H200["clock_ghz"]
    assert hand
    for e in hand:  # right after a wait that took time: the release; right after no wait: arrivals present
        want = 34.3 if (e.role, e.start_ns) in waits else 19.92
        assert e.end_ns - e.start_ns == pytest.approx(want / ghz, rel=1e-9)
    assert {round(e.end_ns - e.start_ns, 6) for e in hand} == {round(34.3 / ghz, 6), round(19.92 / ghz, 6)}


def test_cross_item_turns_issue_the_next_items_first_qk_before_this_items_o_is_stored():
    """s23 (cross_item 1): a persistent CTA's second item starts its QK_0 in the turn of the first item's last PV,
    and the first item's O is stored after that PV's wait; without it, O is stored before the next QK_0."""
    from lapis.pipeline_sim.simulate import simulate
    prm = {"late_v": 1, "q_slots": 2, "stages": 2}
    shape = "2x16x1024x128"  # 256 Q tiles of 128 rows: two items on the busiest of 132 SMs, 8 K/V tiles each

    def events(cross):
        loop = "s23" if cross else "s22"  # s23's loop crosses items, s22's does not
        ev = simulate("h200-s9-tuned", "h200", shape, dict(prm, cross_item=cross, kernel_loop=loop))["_events"]
        return [e for e in ev if e.role == "consumer0"]
    for cross in (0, 1):
        ev = events(cross)
        items = list(dict.fromkeys(e.work_item for e in ev if e.k_index >= 0))
        assert len(items) == 2
        store = [e for e in ev if e.op == "store O"]
        assert [e.work_item for e in store] == items  # each item's O once, in order
        qk0 = next(e for e in ev if e.op == "wgmma QK" and e.work_item == items[1] and e.k_index == 0)
        pvs = [e for e in ev if e.op == "wgmma PV" and e.work_item == items[0]]
        assert len(pvs) == 8 and len([e for e in ev if e.op == "wgmma QK"]) == 16
        if cross:
            assert qk0.start_ns < store[0].start_ns  # stored inside the boundary turn
            assert store[0].start_ns >= pvs[-1].end_ns
        else:
            assert store[0].end_ns <= qk0.start_ns


@pytest.mark.parametrize("schedule", ["h200-s5-intra-overlap", "h200-s4-pingpong"])
def test_cross_item_is_refused_where_a_cta_runs_one_item(schedule):
    with pytest.raises(ScheduleError, match="cross_item is 0, or 1 on a persistent overlap turn"):
        SCHEDULES[schedule].resolve(H200, (1, 2, 1024, 128), {"cross_item": 1})


@pytest.mark.parametrize("loop, cross", [("s22", 1), ("s23", 0), ("s9", 1)])
def test_a_kernel_loop_whose_items_cross_otherwise_is_refused(loop, cross):
    s9, dims = SCHEDULES["h200-s9-tuned"], (2, 16, 1024, 128)
    prm = {"late_v": 1, "q_slots": 2, "stages": 2, "kernel_loop": loop, "cross_item": cross}
    if loop == "s9":
        prm = {"kernel_loop": loop, "cross_item": cross}
    with pytest.raises(ScheduleError, match="whose GEMM turns cross work items .* exactly when cross_item is 1") as e:
        ah.AttentionCosts.of(H200, dims, s9.resolve(H200, dims, prm)[0], s9.flags)
    assert f"use cross_item={1 - cross}" in str(e.value) and f"(cross_item {1 - cross} in its kernel)" in str(e.value)


def test_cudnns_schedule_refuses_cross_item():
    with pytest.raises(ScheduleError, match="its GEMM turns do not cross work items"):
        SCHEDULES["h200-cudnn-fprop"].resolve(H200, (2, 16, 1024, 128), {"cross_item": 1})


def test_a_non_number_cross_item_gets_its_two_values_as_the_fix():
    from lapis.pipeline_sim.simulate import parse_params
    for key in ("cross_item", "late_v"):
        with pytest.raises(ScheduleError, match=f"--param {key}=0 or --param {key}=1"):
            parse_params([f"{key}=abc"])
