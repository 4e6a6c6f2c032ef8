"""A TMA pipeline in the vocabulary of CUTLASS's PipelineTmaAsync and FlashAttention-3 mainloops.

`PipelineState` is (index, phase, count): the ring slot, the phase parity of that slot's barriers, and how many
tokens have passed; the caller advances it. Full barriers (one per stage) complete when the producer's
arrive.expect_tx and the TMA bytes land; empty barriers complete when every consumer has released the slot. The
producer starts with phase 1 on the empty barriers (`PipelineState.producer_start`), so its first pass over the
ring does not wait. A mainloop transcribes line by line:

    producer:  producer_acquire(state) -> producer_commit(state, tx_bytes) -> state.advance()
    consumer:  consumer_wait(state) -> MMA -> consumer_release(state) -> state.advance()
    producer:  producer_tail(state) (waits until the consumers released every slot; no early exit)

TMA delivery is the engine's (lapis.pipeline_sim.tma.TmaEngine): producer_commit arms the full barrier and hands
the copy to the engine, which completes its bytes on that barrier when they land (PTX ISA cp.async.bulk.tensor
with .mbarrier::complete_tx::bytes). Source: CUTLASS include/cutlass/pipeline/sm90_pipeline.hpp.
"""

from __future__ import annotations

from dataclasses import dataclass

from lapis.errors import ScheduleError
from lapis.pipeline_sim.mbarrier import MBarrier


@dataclass
class PipelineState:
    stages: int
    index: int = 0
    phase: int = 0
    count: int = 0

    def advance(self) -> None:
        self.index += 1
        self.count += 1
        if self.index == self.stages:  # wrapping the ring flips the parity
            self.index, self.phase = 0, self.phase ^ 1

    def copy(self) -> PipelineState:
        """The state as it is now (an in-flight copy keeps its slot while the caller advances)."""
        return PipelineState(self.stages, self.index, self.phase, self.count)

    @classmethod
    def producer_start(cls, stages: int) -> PipelineState:
        """CUTLASS make_producer_start_state: phase 1, so the first acquire of each slot passes at once."""
        return cls(stages, phase=1)


class TmaPipeline:
    """CUTLASS's PipelineTmaAsync: `stages` slots of `tx_bytes` each, written by `producer` through the TMA and
    released by every role of `consumers`.

    buffer: the name the race check gives the slots (default `name`); tma: the SM's TMA engine, which
    producer_commit hands copies to; hb: the happens-before log of a race check (None: off); last_event: a
    function role -> id of that role's latest recorded event, so a barrier hand-off can be drawn as a flow."""

    def __init__(self, env, name: str, stages: int, producer: str, consumers: tuple, tx_bytes: int,
                 buffer: str | None = None, tma=None, hb=None, last_event=None):
        self.env, self.name, self.stages, self.tx_bytes = env, name, stages, tx_bytes
        self.producer, self.consumers, self.buffer = producer, consumers, buffer or name
        self.tma, self.last_event = tma, last_event or (lambda role: None)
        self.full = [MBarrier(env, f"{name}.full[{i}]", 1, (producer,)) for i in range(stages)]
        self.empty = [MBarrier(env, f"{name}.empty[{i}]", len(consumers), tuple(consumers)) for i in range(stages)]
        for kind, bars in (("full", self.full), ("empty", self.empty)):
            for i, bar in enumerate(bars):
                bar.ring = (name, kind, i)  # lets a deadlock report compare the roles' ring positions
        self.attach(hb)

    @property
    def barriers(self) -> list:
        return self.full + self.empty

    def attach(self, hb) -> None:
        """Record every barrier's ordering edges into `hb` (a races.HappensBefore); None leaves them off."""
        self.hb = hb
        for b in self.barriers:
            b.hb = hb

    def _slot(self, st: PipelineState) -> int:
        if st.stages != self.stages or not 0 <= st.index < self.stages:
            raise ScheduleError("pipeline state does not match the pipeline's stage count",
                                f"state of {st.stages} stages (index {st.index}) on a {self.stages}-stage pipeline",
                                f"make the state with PipelineState({self.stages}) so the phase flips every "
                                f"{self.stages} tokens")
        return st.index

    def producer_acquire(self, st: PipelineState):
        """The wait for the slot to be empty (its empty barrier at st.phase): a simpy event."""
        return self.empty[self._slot(st)].wait(st.phase, self.producer)

    def producer_commit(self, st: PipelineState, tx_bytes: int | None = None, token=None, **kw) -> None:
        """arrive.expect_tx(tx_bytes) on the slot's full barrier by the producer, then the TMA copy of the slot,
        which the engine delivers (`token`: what the slot holds now, for the race check; `kw`: the copy's event
        fields, e.g. work_item and k_index)."""
        n = self.tx_bytes if tx_bytes is None else tx_bytes
        self.full[self._slot(st)].arrive_expect_tx(n, self.producer)
        issue = self.hb and self.hb.op(self.producer, f"issue TMA {self.buffer} {token}")
        self.tma.copy(self, st.copy(), n, token, issue, **kw)

    def landed(self, st: PipelineState, nbytes: int, token, issue, writer: str, event=None) -> None:
        """The TMA engine's bytes landing on the slot's full barrier. writer: the copy's name in the race check;
        issue: the producer's hb node that issued it; event: the id of the copy's recorded event, if any."""
        w = self.hb and self.hb.access(writer, self.buffer, st.index, token, "write", after=issue)
        self.full[self._slot(st)].complete_tx(nbytes, node=w, event=event)

    def read(self, st: PipelineState, role: str, token) -> None:
        """A consumer's read of the slot, logged for the race check (a no-op when it is off)."""
        if self.hb:
            self.hb.access(role, self.buffer, st.index, token, "read")

    def consumer_wait(self, st: PipelineState, role: str):
        """The wait for the slot's bytes (its full barrier at st.phase): a simpy event."""
        return self.full[self._slot(st)].wait(st.phase, role)

    def consumer_release(self, st: PipelineState, role: str) -> None:
        """`role`'s arrival on the slot's empty barrier."""
        self.empty[self._slot(st)].arrive(role, event=self.last_event(role))

    def producer_tail(self, st: PipelineState):
        """An event for the producer's last wait on every slot (the consumers released the last tokens); the
        caller's state is left as it is."""
        st = st.copy()
        evs = []
        for _ in range(self.stages):
            evs.append(self.empty[st.index].wait(st.phase, self.producer))
            st.advance()
        return self.env.all_of(evs)

    # The barrier operations without the engine, for a caller that plays the TMA itself (a test of the barriers).
    def producer_expect(self, st: PipelineState) -> None:
        """arrive.expect_tx(tx_bytes) alone, for a test that delivers the bytes itself."""
        self.full[self._slot(st)].arrive_expect_tx(self.tx_bytes, self.producer)

    def tma_complete(self, st: PipelineState, nbytes: int | None = None, node=None) -> None:
        """Bytes landing on the slot's full barrier, for a test that plays the TMA engine itself."""
        self.full[self._slot(st)].complete_tx(self.tx_bytes if nbytes is None else nbytes, node=node)


PipelineTmaAsync = TmaPipeline  # CUTLASS's name
