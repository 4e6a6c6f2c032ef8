"""The deadlock check: every role alive at the end is reported with what it waits on and, where the barriers'
state shows it, the cause (a missing arrival, a count mismatch, bytes that never landed, a parity ahead of the
arrivers, a consumer whose ring state skipped ahead)."""

import sys
from pathlib import Path

import pytest
import simpy

from lapis.pipeline_sim.deadlock import CHECK_EVERY, Deadlock, run_checked
from lapis.pipeline_sim.mbarrier import MBarrier

sys.path.insert(0, str(Path(__file__).parent))
from test_pipeline_primitives import mutated_run, ring  # noqa: E402


def deadlock_of(env, barriers, procs, **kw) -> str:
    with pytest.raises(Deadlock) as exc:
        run_checked(env, barriers, procs, **kw)
    return str(exc.value)


def test_a_role_stuck_on_a_resource_is_a_deadlock_naming_the_holder():
    env = simpy.Environment()
    tensor = simpy.Resource(env, 1)
    tensor.name = "tensor"

    def holder():  # the mutation: takes the tensor pipe and finishes without releasing it
        yield tensor.request()

    def mma():
        with tensor.request() as req:
            yield req

    procs = {"holder": env.process(holder()), "mma": env.process(mma())}
    text = deadlock_of(env, [], procs)
    assert text == ("deadlock: mma waits on tensor (a simpy.Resource of capacity 1, held by holder) for holder; "
                    "finished roles that never arrive: holder")


def test_a_role_stuck_on_a_store_is_a_deadlock():
    env = simpy.Environment()
    queue = simpy.Store(env)

    def scheduler():
        yield queue.get()

    text = deadlock_of(env, [], {"scheduler": env.process(scheduler())})
    assert text == "deadlock: scheduler waits on a simpy.Store get (0 items; nothing is put) for (no put)"


def test_a_role_polling_try_wait_ends_and_is_reported_by_name():
    """A custom role polls try_wait with exponential back-off on a barrier whose producer finishes without
    arriving: the run stops once only the poller's timeouts are pending and the barrier no longer changes."""
    env = simpy.Environment()
    flag = MBarrier(env, "flag", 1, ("producer",))

    def producer():
        yield env.timeout(10)

    def poller():
        backoff = 8
        while not flag.try_wait(0, "poller"):
            yield env.timeout(backoff)
            backoff = min(2 * backoff, 1024)

    procs = {"producer": env.process(producer()), "poller": env.process(poller())}
    text = deadlock_of(env, [flag], procs, stall_ns=100_000)
    assert text.startswith("deadlock: poller waits on flag (phase 0, polled with try_wait.parity(0)) for producer; "
                           "finished roles that never arrive: producer; cause: flag (init count 1) has 0 of 1 "
                           "arrivals in phase 0; never arrived: producer; producer finished without ever arriving")
    # stopped at least one stall window after the last change, and at most two checks (CHECK_EVERY events, here
    # polls of 1024 ns) after the window
    assert 100_000 <= env.now <= 100_000 + 2 * CHECK_EVERY * 1024


def test_a_poller_whose_barrier_completes_runs_to_the_end():
    env = simpy.Environment()
    flag = MBarrier(env, "flag", 1, ("producer",))
    seen = []

    def producer():
        yield env.timeout(5000)
        flag.arrive("producer")

    def poller():
        while not flag.try_wait(0, "poller"):
            yield env.timeout(100)
        seen.append(env.now)

    run_checked(env, [flag], {"producer": env.process(producer()), "poller": env.process(poller())}, stall_ns=1000)
    assert seen == [5000]


def test_the_missing_arrival_names_the_role_the_barrier_and_the_counts():
    env = simpy.Environment()
    done = MBarrier(env, "done", 3, ("wg0", "wg1", "wg2"))

    def wg(name, arrives):
        yield env.timeout(10)
        if arrives:
            done.arrive(name)

    def epilogue():
        yield done.wait(0, "epilogue")

    procs = {f"wg{i}": env.process(wg(f"wg{i}", i < 2)) for i in range(3)}
    procs["epilogue"] = env.process(epilogue())
    assert deadlock_of(env, [done], procs) == (
        "deadlock: epilogue waits on done (phase 0) for wg2; finished roles that never arrive: wg2; cause: done (init "
        "count 3) has 2 of 3 arrivals in phase 0; never arrived: wg2; wg2 finished without ever arriving on done (its "
        "arrive is missing); mbarrier state: done phase 0 (parity 0): 1 of 3 arrivals pending (arrived: wg0, wg1), "
        "0 B of transaction bytes outstanding")


def test_a_count_above_the_declared_arrivers_is_named_a_count_mismatch():
    env = simpy.Environment()
    pipe, procs = ring(env, 2, 6, arrivals=2)  # one consumer, empty barriers initialised with count 2
    text = deadlock_of(env, pipe.barriers, procs)
    assert ("cause: kv.empty[0] (init count 2) has 1 of 2 arrivals in phase 0: count mismatch, its declared "
            "arrivers (mma) make 1 arrival(s) per phase, fewer than the count 2") in text


def test_bytes_that_never_land_are_named():
    deadlock, _ = mutated_run(expect=2048, deliver=1024)
    assert ("kv.full[0] (init count 1) has 1 of 1 arrivals in phase 0 but 1024 B of its expected transaction bytes "
            "never landed") in str(deadlock)


def test_a_consumer_parity_ahead_of_the_producer_is_named():
    deadlock, _ = mutated_run(2, (4,), consumer_phase=1)  # the consumer state starts at phase 1
    assert ("load finished after 2 arrival(s) (2 phase(s) completed): the waiter waits for a phase that never "
            "comes, its phase parity is ahead of the arrivers (a wrong parity formula") in str(deadlock)


def test_a_phase_reset_per_work_item_is_named():
    deadlock, _ = mutated_run(items=(3, 3), reset_per_item=True)
    assert ("ring kv: mma waits on kv.full[1] for the slot's token 3 (phase 2) but released only 1 of the 2 "
            "token(s) that landed there: its PipelineState skipped ahead (a phase reset") in str(deadlock)


def test_a_race_names_its_cause():
    _, races = mutated_run(2, (4,), consumer_phase=1)
    text = " ".join(str(r) for r in races)
    assert "mma reads token 0 and tma0 writes token 0 are not ordered by any barrier; cause: the read's wait passed " \
           "before this token's bytes landed" in text
