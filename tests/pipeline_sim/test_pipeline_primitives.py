"""mbarrier phases and parity, tx bytes, the TMA pipeline vocabulary, and deadlock reports."""

import pytest
import simpy

from lapis.errors import ScheduleError
from lapis.pipeline_sim.deadlock import Deadlock, run_checked
from lapis.pipeline_sim.mbarrier import TX_LIMIT, MBarrier
from lapis.pipeline_sim.pipeline import PipelineState, TmaPipeline


def test_fresh_barrier_parity_1_passes_at_once_parity_0_waits():
    env = simpy.Environment()
    b = MBarrier(env, "b", 1)
    assert b.wait(1).triggered and not b.wait(0).triggered
    b.arrive()
    assert b.phase == 1 and b.parity == 1 and not b.waiters  # the parity-0 waiter was released


def test_waiter_two_phases_behind_aliases_and_blocks():
    env = simpy.Environment()
    b = MBarrier(env, "b", 1)
    b.arrive()
    b.arrive()  # two phases complete: parity is 0 again
    assert not b.wait(0).triggered  # waiting for "phase 0" now waits for phase 2


def test_tx_bytes_and_early_completion_is_a_race():
    env = simpy.Environment()
    b = MBarrier(env, "full", 1)
    b.arrive_expect_tx(1024, "producer")
    assert b.phase == 0
    b.complete_tx(1024)
    assert b.phase == 1 and not b.races
    b.arrive_expect_tx(1024, "producer")
    b.complete_tx(2048)  # more bytes than expected
    assert b.phase == 2 and b.tx == -1024 and "1024 B more" in b.races[0]
    with pytest.raises(ScheduleError, match="tx-count out of range"):
        b.expect_tx(TX_LIMIT + 2048)


def ring(env, stages, tokens, consumers=("mma",), tma_ns=100, mma_ns=60, arrivals=None, log=None):
    pipe = TmaPipeline(env, "kv", stages, "load", consumers, tx_bytes=16384)
    if arrivals is not None:  # a wrong arrival count on the empty barriers
        for b in pipe.empty:
            b.count = b.pending = arrivals

    def producer():
        st = PipelineState.producer_start(stages)
        for t in range(tokens):
            yield pipe.producer_acquire(st)
            pipe.producer_expect(st)
            slot = PipelineState(stages, st.index, st.phase)
            env.process(tma(slot, t))
            st.advance()
        yield pipe.producer_tail(st)

    def tma(slot, t):
        yield env.timeout(tma_ns)
        pipe.tma_complete(slot)

    def consumer(role):
        st = PipelineState(stages)
        for t in range(tokens):
            yield pipe.consumer_wait(st, role)
            yield env.timeout(mma_ns)
            if log is not None:
                log.append((env.now, role, t, st.index))
            pipe.consumer_release(st, role)
            st.advance()

    procs = {"load": env.process(producer())}
    procs.update({r: env.process(consumer(r)) for r in consumers})
    return pipe, procs


def test_two_stage_ring_runs_every_token_in_order():
    env, log = simpy.Environment(), []
    pipe, procs = ring(env, 2, 6, log=log)
    run_checked(env, pipe.barriers, procs)
    assert [t for _, _, t, _ in log] == list(range(6)) and [i for *_, i in log] == [0, 1] * 3
    # TMA 100 ns per token, loads in flight two deep, MMA 60 ns: the loads bound the ring.
    assert env.now == pytest.approx(6 * 100 / 2 + 100 + 60, abs=100)


def test_deeper_ring_is_never_slower_for_one_producer_one_consumer():
    times = []
    for stages in (1, 2, 3, 4):
        env = simpy.Environment()
        pipe, procs = ring(env, stages, 12)
        run_checked(env, pipe.barriers, procs)
        times.append(env.now)
    assert times == sorted(times, reverse=True)


def test_wrong_arrival_count_is_a_named_deadlock():
    env = simpy.Environment()
    pipe, procs = ring(env, 2, 6, arrivals=2)  # one consumer, but the empty barriers expect two arrivals
    with pytest.raises(Deadlock) as exc:
        run_checked(env, pipe.barriers, procs)
    text = str(exc.value)
    assert "load waits on kv.empty[" in text and "for mma" in text


def hb_ring(stages=2, tokens=4, consumer_phase=0, release_early=False):
    """A producer/consumer ring whose buffer accesses and barrier edges go to a HappensBefore log."""
    return mutated_run(stages, (tokens,), consumer_phase=consumer_phase, release_early=release_early)[1]


def test_correct_ring_has_no_race():
    assert mutated_run(2, (4,)) == (None, [])


def test_wrong_consumer_parity_reads_before_the_load_lands():
    deadlock, races = mutated_run(2, (4,), consumer_phase=1)
    assert "mma reads token 0 and tma0 writes token 0" in " ".join(str(r) for r in races)
    # the consumer runs one phase ahead, so it also ends waiting on a phase the finished producer never fills
    assert deadlock is not None and "mma waits on kv.full[1]" in str(deadlock)


def test_releasing_before_reading_lets_the_next_load_overwrite():
    races = " ".join(str(r) for r in hb_ring(release_early=True))
    assert "writes token 2" in races and "reads token 0" in races


# --- mutated protocols: each is caught and named ---------------------------------------------------------

def mutated_run(stages=2, items=(3, 3), expect=1024, deliver=1024, consumer_stages=None, reset_per_item=False,
                flip_on_empty=False, consumer_phase=0, release_early=False):
    """A persistent producer/consumer over work items of items[i] K/V tokens; returns (deadlock, races)."""
    from lapis.pipeline_sim.races import HappensBefore
    env, hb = simpy.Environment(), HappensBefore()
    pipe = TmaPipeline(env, "kv", stages, "load", ("mma",), tx_bytes=expect)
    for b in pipe.barriers:
        b.hb = hb

    def producer():
        st, tok = PipelineState.producer_start(stages), 0
        for n in items:
            for _ in range(n):
                yield pipe.producer_acquire(st)
                pipe.producer_expect(st)
                issue = hb.op("load", f"issue TMA token {tok}")
                env.process(tma(PipelineState(stages, st.index, st.phase), tok, issue))
                st.advance()
                tok += 1

    def tma(slot, tok, issue):
        yield env.timeout(100)
        w = hb.access(f"tma{tok}", "kv", slot.index, tok, "write", after=issue)
        pipe.full[slot.index].complete_tx(deliver, node=w)

    def consumer():
        st, tok = PipelineState(consumer_stages or stages, phase=consumer_phase), 0
        for n in items:
            if reset_per_item:
                st = PipelineState(consumer_stages or stages)
            if n == 0 and flip_on_empty:
                st.phase ^= 1  # the bug: a phase flip for a work item with no K/V tiles
            for _ in range(n):
                yield pipe.consumer_wait(st, "mma")
                if release_early:
                    pipe.consumer_release(st, "mma")
                yield env.timeout(60)
                hb.access("mma", "kv", st.index, tok, "read")
                if not release_early:
                    pipe.consumer_release(st, "mma")
                st.advance()
                tok += 1

    procs = {"load": env.process(producer()), "mma": env.process(consumer())}
    try:
        run_checked(env, pipe.barriers, procs)
    except Deadlock as dl:
        return dl, hb.races()
    return None, hb.races() + [r for b in pipe.barriers for r in b.races]


def test_the_unmutated_persistent_protocol_is_clean():
    assert mutated_run() == (None, [])
    assert mutated_run(items=(1,)) == (None, [])  # a pipeline with a single iteration is no false alarm


def test_expect_tx_below_the_bytes_delivered_is_a_race():
    deadlock, races = mutated_run(expect=512, deliver=1024)
    assert deadlock is None and any("more than" in str(r) for r in races)


def test_expect_tx_above_the_bytes_delivered_deadlocks_on_the_full_barrier():
    deadlock, _ = mutated_run(expect=2048, deliver=1024)
    assert deadlock is not None and "kv.full[" in str(deadlock)


def test_a_state_with_the_wrong_stage_count_is_refused():
    with pytest.raises(ScheduleError, match="stage count"):
        mutated_run(consumer_stages=3)


def test_phase_reset_per_work_item_is_caught():
    deadlock, races = mutated_run(items=(3, 3), reset_per_item=True)
    # after 3 tokens the ring sits at slot 1; the reset consumer waits on slot 0's next phase, the producer on slot 1
    assert deadlock is not None and "load waits on kv.empty[1]" in str(deadlock)
    assert "mma waits on kv.full[" in str(deadlock)


def test_phase_flip_on_an_empty_work_item_is_caught():
    deadlock, races = mutated_run(items=(2, 0, 2), flip_on_empty=True)
    # the flipped parity matches the phase slot 0 already completed: the wait falls through onto token 0's data
    assert deadlock is None and any("mma reads token 2" in str(r) for r in races)
