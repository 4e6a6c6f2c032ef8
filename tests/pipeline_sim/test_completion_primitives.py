"""Named barriers (bar.sync / bar.arrive), wgmma and cp.async commit groups, and the deadlock report on a
named barrier."""

import pytest
import simpy

from lapis.errors import ScheduleError
from lapis.pipeline_sim.commit_groups import CpAsyncGroups, WgmmaGroups
from lapis.pipeline_sim.deadlock import Deadlock, run_checked
from lapis.pipeline_sim.named_barrier import NamedBarrier


def turn_barrier(env, count=256):
    return NamedBarrier(env, "turn", 1, count, {"consumer0": 128, "consumer1": 128})


def test_count_256_completes_only_when_both_warpgroups_arrive():
    env = simpy.Environment()
    bar = turn_barrier(env)
    ev = bar.sync("consumer0", 128)
    assert not ev.triggered and bar.arrived == 128 and bar.missing() == ["consumer1"]
    bar.arrive("consumer1", 128)  # bar.arrive does not wait, and it releases the bar.sync waiter
    assert ev.triggered and bar.arrived == 0 and bar.generation == 1


def test_bar_sync_waits_in_simulated_time_and_bar_arrive_does_not():
    env, times = simpy.Environment(), {}
    bar = turn_barrier(env)

    def waiter():
        yield bar.sync("consumer0", 128)
        times["consumer0"] = env.now

    def arriver():
        yield env.timeout(50)
        bar.arrive("consumer1", 128)
        times["consumer1"] = env.now  # arrive returns at once

    env.process(waiter())
    env.process(arriver())
    env.run()
    assert times == {"consumer0": 50, "consumer1": 50}


def test_thread_counts_are_whole_warps_and_ids_lie_in_0_to_15():
    env = simpy.Environment()
    with pytest.raises(ScheduleError, match="multiple of the warp size"):
        NamedBarrier(env, "b", 1, 100)
    with pytest.raises(ScheduleError, match="multiple of the warp size"):
        turn_barrier(env).arrive("consumer0", 48)
    with pytest.raises(ScheduleError, match="id lies in 0..15"):
        NamedBarrier(env, "b", 16, 128)


def test_an_arrival_past_the_count_starts_the_next_use_with_the_remaining_warps():
    env = simpy.Environment()
    bar = NamedBarrier(env, "b", 2, 64)
    bar.arrive("wg", 128)  # 4 warps on a 2-warp barrier: two complete uses
    assert bar.generation == 2 and bar.arrived == 0
    bar.arrive("wg", 96)  # 3 warps: one use, and one warp into the next
    assert bar.generation == 3 and bar.arrived == 32


def test_wgmma_wait_group_1_leaves_the_newest_group_in_flight():
    env, seen = simpy.Environment(), {}
    g = WgmmaGroups(env, "consumer0")

    def wg():
        g.issue(env.timeout(100))  # QK_j
        g.commit()
        g.issue(env.timeout(300))  # PV_{j-1}
        g.commit()
        assert g.pending() == 2
        yield g.wait(1)
        seen["wait_group 1"] = env.now
        yield g.wait(0)
        seen["wait_group 0"] = env.now

    env.process(wg())
    env.run()
    assert seen == {"wait_group 1": 100, "wait_group 0": 300}


def test_a_group_holds_every_op_issued_since_the_last_commit_and_an_empty_group_is_complete():
    env, seen = simpy.Environment(), {}
    g = CpAsyncGroups(env, "w0")

    def warp():
        g.issue(env.timeout(40))
        g.issue(env.timeout(70))  # two cp.async in one group
        g.commit()
        g.commit()  # empty group
        yield g.wait(1)  # the older group: both copies
        seen["t"] = env.now

    env.process(warp())
    env.run()
    assert seen["t"] == 70
    with pytest.raises(ScheduleError, match=r"cp.async.wait_group takes a count of groups >= 0"):
        g.wait(-1)


def test_single_groups_wait_on_the_operation_itself():
    """single=True: a one-op group is the op's own event, so a wait resumes in the op's simpy step, and at once
    (no step) when the op has already completed; times are the same as with a Condition over it."""
    env, seen = simpy.Environment(), []
    g = CpAsyncGroups(env, "w0", single=True)
    land = env.timeout(40)

    def warp():
        g.issue(land)
        g.commit()
        first = g.wait(0)
        assert first is land
        yield first
        seen.append(env.now)
        g.issue(land)  # already complete: the wait returns without a simpy step
        g.commit()
        done = g.wait(0)
        assert done.processed
        yield done
        seen.append(env.now)

    env.process(warp())
    env.run()
    assert seen == [40, 40]


def test_deadlock_names_the_named_barrier_and_the_role_that_never_arrived():
    env = simpy.Environment()
    bar = turn_barrier(env)

    def consumer0():
        yield bar.sync("consumer0", 128)

    def consumer1():  # the mutation: finishes without bar.arrive
        yield env.timeout(10)

    procs = {"consumer0": env.process(consumer0()), "consumer1": env.process(consumer1())}
    with pytest.raises(Deadlock) as exc:
        run_checked(env, [bar], procs)
    assert str(exc.value) == ("deadlock: consumer0 waits on bar 1 (turn: 128 of 256 threads arrived), never "
                              "arrived: consumer1 for consumer1; finished roles that never arrive: consumer1")


def test_pingpong_without_bar_arrive_deadlocks_by_name(monkeypatch):
    from lapis.pipeline_sim.simulate import simulate
    monkeypatch.setattr(NamedBarrier, "arrive", lambda self, role, threads, event=None: None)
    with pytest.raises(Deadlock, match=r"consumer0 waits on bar 1 \(gemm turn of consumer0: 128 of 256 threads "
                                       r"arrived\), never arrived: consumer1 for consumer1"):
        simulate("h200-s4-pingpong", "h200", "1x2x1024x128")
