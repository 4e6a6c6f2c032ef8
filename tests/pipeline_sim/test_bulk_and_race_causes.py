"""Bulk-copy sizes (16 B rule), bytes that never land, surplus arrivals, and the named cause of a race (wrong
parity, phase reset, count mismatch), each in a small custom schedule written with the public API, buggy and
fixed."""

import types

import pytest
import simpy

from lapis.errors import ScheduleError
from lapis.pipeline_sim.deadlock import Deadlock, run_checked
from lapis.pipeline_sim.mbarrier import MBarrier
from lapis.pipeline_sim.pipeline import PipelineState, TmaPipeline
from lapis.pipeline_sim.races import HappensBefore
from lapis.pipeline_sim.tma import TmaEngine


def ring_run(tokens=4, consumers=("mma0",), consumer_phase=0, reset_at=None, empty_count=None, expect=1024,
             deliver=1024, slow=0):
    """A 2-stage K/V ring: `load` expects `expect` bytes per slot and its copy delivers `deliver`; each consumer
    waits, reads, releases. Returns (the Deadlock or None, every race and barrier race as text)."""
    env = simpy.Environment()
    hb = HappensBefore(env)
    pipe = TmaPipeline(env, "kv", 2, "load", consumers, tx_bytes=expect, hb=hb)
    if empty_count is not None:  # the bug under test: an empty barrier initialised with the wrong count
        pipe.empty = [MBarrier(env, f"kv.empty[{i}]", empty_count, consumers, hb=hb, ring=("kv", "empty", i))
                      for i in range(2)]

    def producer():
        st = PipelineState.producer_start(2)
        for tok in range(tokens):
            yield pipe.producer_acquire(st)
            pipe.producer_expect(st)
            issue = hb.op("load", f"issue {tok}")
            env.process(copy(st.copy(), tok, issue))
            st.advance()

    def copy(st, tok, issue):
        yield env.timeout(100)
        pipe.landed(st, deliver, tok, issue, f"tma{tok}")

    def consumer(role, extra):
        st = PipelineState(2, phase=consumer_phase)
        for tok in range(tokens):
            if tok == reset_at:
                st = PipelineState(2)  # the bug under test: the state re-made mid-stream
            yield pipe.consumer_wait(st, role)
            yield env.timeout(60 + extra)
            pipe.read(st, role, tok)
            pipe.consumer_release(st, role)
            st.advance()

    procs = {"load": env.process(producer())}
    procs.update({c: env.process(consumer(c, slow * i)) for i, c in enumerate(consumers)})
    dl = None
    try:
        run_checked(env, pipe.barriers, procs)
    except Deadlock as exc:
        dl = exc
    return dl, [str(r) for r in hb.races()] + [r for b in pipe.barriers for r in b.races]


# --- 3. bulk copies ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["expect_tx", "arrive_expect_tx", "complete_tx"])
def test_transaction_bytes_off_16_are_a_named_error(op):
    b = MBarrier(simpy.Environment(), "full", 1)
    with pytest.raises(ScheduleError) as exc:
        getattr(b, op)(1000)
    text = str(exc.value)
    assert "a bulk copy's size (and so its transaction bytes) is a multiple of 16 B: got 1000 B" in text
    assert "PTX ISA cp.async.bulk (size is a multiple of 16)" in text and "pad the copy to 1008 B (or 992 B)" in text
    assert b.tx == 0  # refused before anything changed


def test_a_tma_copy_off_16_is_refused_and_a_multiple_is_not():
    env = simpy.Environment()
    pipe = TmaPipeline(env, "kv", 2, "load", ("mma",), tx_bytes=1024)
    engine = TmaEngine(types.SimpleNamespace(p={}), latency_ns=0)
    with pytest.raises(ScheduleError, match=r"TMA copy into kv: .* got 100 B"):
        engine.copy(pipe, PipelineState(2), 100, 0, None)
    assert ring_run(expect=1040, deliver=1040) == (None, [])  # 65 x 16 B: fine


def test_expect_tx_above_the_bytes_landed_leaves_the_phase_pending_and_says_how_many_bytes():
    dl, _ = ring_run(expect=2048, deliver=1024)  # buggy: half the bytes the barrier expects
    assert "mbarrier state: kv.full[0] phase 0 (parity 0): 0 of 1 arrivals pending (arrived: load), 1024 B of " \
           "transaction bytes outstanding" in str(dl)
    assert ring_run(expect=2048, deliver=2048) == (None, [])  # fixed


def test_more_arrivals_than_the_count_are_flagged():
    b = MBarrier(simpy.Environment(), "full", 1, ("load", "helper"))  # buggy: two roles arrive, count 1
    b.arrive_expect_tx(1024, "load")
    b.arrive("helper")
    assert b.races == [("helper arrived on full more often than its count 1 in phase 0 (2 arrivals while 1024 B "
                        "are outstanding): a count mismatch, the barrier's init count is below the arrivals its "
                        "roles make per phase")]
    fixed = MBarrier(simpy.Environment(), "full", 2, ("load", "helper"))
    fixed.arrive_expect_tx(1024, "load")
    fixed.arrive("helper")
    fixed.complete_tx(1024)
    assert fixed.races == [] and fixed.phase == 1


# --- 4. the cause of a race --------------------------------------------------------------------------------

def test_a_wrong_parity_race_says_so():
    _, races = ring_run(consumer_phase=1)  # buggy: the consumer state starts at phase 1
    assert any("mma0 reads token 0 and tma0 writes token 0" in r and "wrong parity: mma0 passed its wait on "
               "kv.full[0] (parity 1) before any phase of it completed" in r for r in races)
    assert ring_run(consumer_phase=0) == (None, [])  # fixed


def test_a_phase_reset_race_says_so():
    _, races = ring_run(reset_at=2)  # buggy: the state re-made after two tokens
    assert any("mma0 reads token 2 and tma2 writes token 2" in r and "phase reset: mma0 passed its wait on "
               "kv.full[0] (parity 0) a second time on completed phase 0" in r for r in races)
    assert any("mma0 reads token 3" in r and "kv.full[1] (parity 0) a second time" in r for r in races)
    assert ring_run(reset_at=None) == (None, [])  # fixed


def test_a_count_mismatch_race_says_so():
    # buggy: two consumers release each slot but its empty barrier counts one arrival, so the slot is refilled
    # while the slower consumer still reads it
    dl, races = ring_run(consumers=("mma0", "mma1"), empty_count=1, slow=300)
    assert any("mma1 reads token 0 and tma2 writes token 2" in r and "count mismatch: kv.empty[0] (init count 1) "
               "completed phase 0 on the arrivals of mma0 without mma1" in r for r in races)
    # the surplus releases then complete later phases early and the ring hangs: the deadlock names the count too
    assert "count mismatch: kv.empty[0] (init count 1) has 2 declared arrivers (mma0, mma1)" in str(dl)
    assert ring_run(consumers=("mma0", "mma1"), empty_count=2, slow=300) == (None, [])  # fixed
