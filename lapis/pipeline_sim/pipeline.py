"""A TMA pipeline in the vocabulary of CUTLASS's PipelineTmaAsync and FlashAttention-3 mainloops.

`PipelineState` is (index, phase, count): the ring slot, the phase parity of that
slot's barriers, and how many tokens have passed. Full barriers (one per stage)
complete when the producer's arrive.expect_tx and the TMA bytes land; empty
barriers complete when every consumer has released the slot. The producer starts
with phase 1 on the empty barriers, so its first pass over the ring does not wait.
A mainloop transcribes line by line:

    producer_acquire(state) -> TMA loads with complete_tx -> (producer_commit) -> state.advance()
    consumer_wait(state) -> MMA -> consumer_release(state) -> state.advance()
    producer_tail(state): wait until the consumers released every slot (no early exit).
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

    @classmethod
    def producer_start(cls, stages: int) -> PipelineState:
        """CUTLASS make_producer_start_state: phase 1, so the first acquire of each slot passes at once."""
        return cls(stages, phase=1)


class TmaPipeline:
    """stages slots; `producer` role, `consumers` roles (each releases every slot); tx_bytes per slot."""

    def __init__(self, env, name: str, stages: int, producer: str, consumers: tuple, tx_bytes: int):
        self.env, self.stages, self.tx_bytes = env, stages, tx_bytes
        self.producer, self.consumers = producer, consumers
        self.full = [MBarrier(env, f"{name}.full[{i}]", 1, (producer,)) for i in range(stages)]
        self.empty = [MBarrier(env, f"{name}.empty[{i}]", len(consumers), tuple(consumers)) for i in range(stages)]

    @property
    def barriers(self) -> list:
        return self.full + self.empty

    def attach(self, hb) -> None:
        """Record every barrier's ordering edges into `hb` (a races.HappensBefore); None leaves them off."""
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
        """Wait for the slot to be empty (its empty barrier at st.phase); producer_expect then arms the full
        barrier. Returns the wait event."""
        ev = self.empty[self._slot(st)].wait(st.phase, self.producer)
        return ev

    def producer_expect(self, st: PipelineState) -> None:
        self.full[self._slot(st)].arrive_expect_tx(self.tx_bytes, self.producer)

    def tma_complete(self, st: PipelineState, nbytes: int | None = None, node=None) -> None:
        """The TMA engine's bytes landing on the slot's full barrier (`node`: the hb node of that write)."""
        self.full[self._slot(st)].complete_tx(self.tx_bytes if nbytes is None else nbytes, node=node)

    def consumer_wait(self, st: PipelineState, role: str):
        return self.full[self._slot(st)].wait(st.phase, role)

    def consumer_release(self, st: PipelineState, role: str) -> None:
        self.empty[self._slot(st)].arrive(role)

    def producer_tail(self, st: PipelineState):
        """Events for the producer to wait on every slot once more (consumers released the last tokens)."""
        evs = []
        for _ in range(self.stages):
            evs.append(self.empty[st.index].wait(st.phase, self.producer))
            st.advance()
        return self.env.all_of(evs)
