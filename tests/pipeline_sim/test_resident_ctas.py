"""Hopper attention schedules with the CTAs the SM keeps resident (lapis.model.occupancy) sharing its units."""

import pytest

from lapis.errors import ScheduleError
from lapis.pipeline_sim import grid
from lapis.pipeline_sim.pipeline import TmaPipeline
from lapis.pipeline_sim.simulate import simulate


def roles(r):
    return {e.role for e in r["_events"]}


def test_s1_keeps_two_ctas_resident_limited_by_shared_memory_and_runs_faster_for_it():
    two = simulate("h200-s1-serial", "h200", "8x16x4096x128")
    one = simulate("h200-s1-serial", "h200", "8x16x4096x128", dict(ctas_per_sm=1))
    assert (two["fit"]["ctas_per_sm"], two["fit"]["resident_ctas"], two["fit"]["limiter"]) == (2, 2, "smem")
    assert two["fit"]["regs_per_thread"] == 154 and one["fit"]["ctas_per_sm"] == 1
    # each slot waits on its own loads; the other's GEMMs and loads fill those waits
    assert two["predicted_us"] < 0.75 * one["predicted_us"]
    # each slot's warpgroup, and its V copies on the slot's TMA unit (K_j waited, V_j in flight under QK_j)
    assert roles(two) == {"cta0/consumer0", "cta1/consumer0", "cta0/tma", "cta1/tma"}
    assert roles(one) == {"consumer0", "tma"}
    # 8 x 16 x 64 = 8192 Q tiles of 64 rows over 132 SMs: the representative SM runs 63, shared by both slots
    items = {role: {e.work_item for e in two["_events"] if e.role == role} for role in roles(two) if "consumer" in role}
    assert two["work"]["items_per_sm"] == 63 == sum(map(len, items.values()))
    assert not items["cta0/consumer0"] & items["cta1/consumer0"] and min(map(len, items.values())) >= 31


def test_a_slot_takes_the_next_cta_when_it_frees_not_by_turns():
    """The two slots start CTAs 0 and 1; from then on each CTA starts when a slot's previous one ends."""
    r = simulate("h200-s1-serial", "h200", "8x16x4096x128")
    first = {}  # work item -> (start of its Q load, role)
    for e in r["_events"]:
        if e.op == "TMA Q (waited)":
            first[e.work_item] = (e.start_ns, e.role)
    ends = {}  # role -> end of its stores, in order
    for e in sorted(r["_events"], key=lambda e: e.end_ns):
        if e.op == "store O":
            ends.setdefault(e.role, []).append(e.end_ns)
    assert first[0][1] != first[1][1]
    for role, stops in ends.items():
        starts = sorted(t for t, rl in first.values() if rl == role)
        # every CTA after a slot's first is issued at the end of that slot's previous CTA (its load may queue)
        assert len(starts) == len(stops)
        for start, stop in zip(starts[1:], stops[:-1]):
            assert start >= stop - 1e-6


def test_ctas_per_sm_above_residency_or_on_a_persistent_schedule_is_refused():
    with pytest.raises(ScheduleError, match="ctas_per_sm is at most the CTAs the SM keeps resident"):
        simulate("h200-s1-serial", "h200", "1x2x1024x128", dict(ctas_per_sm=3))
    with pytest.raises(ScheduleError, match=r"use 1\.\.1"):
        simulate("h200-s8-persistent", "h200", "1x2x1024x128", dict(ctas_per_sm=2))
    with pytest.raises(ScheduleError, match="setmaxnreg split's mean"):
        simulate("h200-s2-ws-ring", "h200", "1x2x1024x128", dict(regs_per_thread=128))


def test_s2_keeps_one_cta():
    r = simulate("h200-s2-ws-ring", "h200", "2x8x2048x128")
    c = simulate("h200-s2-ws-ring", "h200", "2x8x2048x128", dict(causal=1))
    assert r["fit"]["ctas_per_sm"] == c["fit"]["ctas_per_sm"] == 1 and roles(r) == {"producer", "consumer0", "tma"}
    assert c["predicted_us"] < r["predicted_us"]


def test_grouped_full_mode_equals_simulating_each_sm_with_two_slots(monkeypatch):
    # 2x8x2048x128: 512 Q tiles of 64 rows, 116 SMs run 4 and 16 run 3
    grouped = simulate("h200-s1-serial", "h200", "2x8x2048x128", full=True)
    monkeypatch.setattr(grid, "group_sms", lambda per_sm: [grid.SmGroup(tuple(w), [i])
                                                           for i, w in enumerate(per_sm) if w])
    every = simulate("h200-s1-serial", "h200", "2x8x2048x128", full=True)
    assert grouped["fit"]["ctas_per_sm"] == 2 and grouped["grid"]["work_lists"] == 2
    assert every["grid"]["work_lists"] == every["grid"]["sms_simulated"] == 132
    assert every["predicted_us"] == pytest.approx(grouped["predicted_us"], rel=1e-12)
    for key in ("finish_us_min", "finish_us_median", "finish_us_max"):
        assert every["grid"][key] == pytest.approx(grouped["grid"][key], rel=1e-12)


# s2 with one stage and a 24/232 split: 81920 + 3072 B of smem, 256 threads at 128 registers (4096 per warp,
# 16 warps per SM): 2 resident, so two slots with a producer, a consumer and K/V rings each
TWO_SLOT_S2 = ("h200-s2-ws-ring", "h200", "2x16x2048x128", dict(stages=1, regs_producer=24, regs_consumer=232))


def test_two_slots_each_with_their_own_rings_are_race_and_deadlock_free():
    r = simulate(*TWO_SLOT_S2, check_races=True)
    assert r["fit"]["ctas_per_sm"] == 2 and r["races"] == []
    assert {"cta0/producer", "cta0/consumer0", "cta1/producer", "cta1/consumer0"} <= roles(r)
    s1 = simulate("h200-s1-serial", "h200", "2x16x2048x128", check_races=True)
    assert s1["fit"]["ctas_per_sm"] == 2 and s1["races"] == []


def test_a_race_in_one_slot_is_reported_under_its_slot(monkeypatch):
    wait, release = TmaPipeline.consumer_wait, TmaPipeline.consumer_release

    def wait_then_release(self, st, role):  # release at the wait, as if the MMA had completed
        ev = wait(self, st, role)
        ev.callbacks.append(lambda _: release(self, st, role))
        return ev

    monkeypatch.setattr(TmaPipeline, "consumer_wait", wait_then_release)
    monkeypatch.setattr(TmaPipeline, "consumer_release", lambda self, st, role: None)
    races = simulate(*TWO_SLOT_S2, check_races=True)["races"]
    assert any("cta0/consumer0 reads" in x for x in races) and any("cta1/consumer0 reads" in x for x in races)
