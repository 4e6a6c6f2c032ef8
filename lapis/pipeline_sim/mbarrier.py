"""mbarriers as kernels use them, in simulated time (simpy).

PTX ISA 9.7.13.15 (mbarrier): a barrier object counts pending arrivals and a
transaction count (tx-count, bytes). The current phase completes when the pending
arrival count reaches 0 and the tx-count is 0; the arrival count is then reset
for the next phase and the phase parity flips. Operations kept here:

- `arrive()`: one arrival (tcgen05.commit also performs one).
- `expect_tx(n)` / `arrive_expect_tx(n)`: raise the tx-count by n bytes (range
  -(2^20 - 1) .. 2^20 - 1, PTX), optionally with an arrival.
- `complete_tx(n)`: what a TMA load does as its bytes land.
- transaction bytes (expect_tx, complete_tx) are multiples of 16 B, the cp.async.bulk size rule; any other
  size is a ScheduleError (`check_bulk_bytes`).
- `try_wait(parity)`: one `mbarrier.try_wait.parity` that returns at once, True when the phase with that
  parity has completed (a role that polls it with `env.timeout` back-off is followed by the deadlock check's
  stall detection, lapis.pipeline_sim.deadlock.drive).
- `wait(parity)`: `mbarrier.try_wait.parity` looped until it succeeds. It succeeds
  once the phase with that parity has completed, i.e. when the current phase's
  parity differs from `parity`. So a fresh barrier waited with parity 1 passes at
  once (CUTLASS's producer start state), and a waiter two phases behind sees the
  parity it waits for and blocks (aliasing).

Delivering more bytes than expected completes a phase early and carries the excess
into the next phase: that is recorded as a race (`races`), not a deadlock.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

from lapis.errors import ScheduleError

TX_LIMIT = (1 << 20) - 1  # PTX: tx-count range -(2^20 - 1) .. 2^20 - 1
BULK_GRANULE = 16  # PTX ISA cp.async.bulk: the size is a multiple of 16 B (so is every box a tensor copy moves)
# env -> {process: passed} of each process's latest try_wait on any barrier: the stall check reads it in O(1)
# instead of visiting every barrier of a full run.
_LATEST_POLL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def check_bulk_bytes(nbytes, what: str) -> None:
    """Raise ScheduleError unless `nbytes` is a whole multiple of 16 B: the transaction bytes of the simulator
    come from bulk copies (cp.async.bulk, cp.async.bulk.tensor), whose size PTX requires to be a multiple of 16,
    so an expect_tx or complete_tx of any other size can never be matched by the copies that land."""
    if nbytes != int(nbytes) or int(nbytes) % BULK_GRANULE:
        lo = int(nbytes) // BULK_GRANULE * BULK_GRANULE
        raise ScheduleError(f"{what}: a bulk copy's size (and so its transaction bytes) is a multiple of 16 B",
                            f"{nbytes} B", f"pad the copy to {lo + BULK_GRANULE} B (or {lo} B), e.g. round the box's "
                            "inner extent up to 16 B", "PTX ISA cp.async.bulk (size is a multiple of 16)")


def failed_pollers(env) -> set:
    """The processes of `env` whose latest try_wait (on any barrier) failed."""
    return {proc for proc, passed in _LATEST_POLL.get(env, {}).items() if not passed}


@dataclass
class Waiter:
    role: str
    parity: int
    event: object
    proc: object = None  # the simpy process that waits (None when the wait is made outside a process)


@dataclass
class MBarrier:
    """One mbarrier. `count`: arrivals per phase; `arrivers`: the roles declared to arrive (for diagnostics)."""

    env: object
    name: str
    count: int
    arrivers: tuple = ()
    phase: int = 0  # phases completed so far; the current phase's parity is phase % 2
    pending: int = field(init=False)
    tx: int = 0
    races: list = field(default_factory=list)
    waiters: list = field(default_factory=list)
    hb: object = None  # a races.HappensBefore to record the ordering edges into (optional)
    _arrivals: list = field(default_factory=list)  # hb nodes of this phase's arrivals and completed bytes
    _completed: dict = field(default_factory=dict)  # phase -> hb node of its completion
    last_completer: int | None = None  # id of the recorded event whose arrival or bytes completed the last phase
    _last_event: int | None = None
    ring: tuple | None = None  # (pipeline name, "full" or "empty", slot) for a TmaPipeline's barrier
    arrived_roles: list = field(default_factory=list)  # roles that arrived in the current phase
    arrivals_by_role: dict = field(default_factory=dict)  # role -> arrivals over the whole run
    polls: dict = field(default_factory=dict)  # process -> (role, parity, ns, passed) of its latest try_wait
    passed_at: dict = field(default_factory=dict)  # role -> the completed-phase counts at which its waits passed

    def __post_init__(self):
        if self.count < 1:
            raise ScheduleError("mbarrier arrival count must be at least 1", self.count, "init with count >= 1",
                                "PTX ISA mbarrier.init")
        self.pending = self.count

    @property
    def parity(self) -> int:
        return self.phase % 2

    def arrive(self, role: str = "", node=None, event=None) -> None:
        """One arrival by `role`; `node`: its hb node; `event`: the id of its latest recorded event (a flow)."""
        self._last_event = event if event is not None else self._last_event
        if self.hb is not None:
            self._arrivals.append(node if node is not None else self.hb.op(role, f"arrive {self.name}"))
        self.pending -= 1
        self.arrived_roles.append(role)
        self.arrivals_by_role[role] = self.arrivals_by_role.get(role, 0) + 1
        if self.pending < 0:
            self.races.append(f"{role or '?'} arrived on {self.name} more often than its count {self.count} "
                              f"in phase {self.phase} ({self.count - self.pending} arrivals while {self.tx} B are "
                              "outstanding): a count mismatch, the barrier's init count is below the arrivals "
                              "its roles make per phase")
        self._maybe_complete()

    def expect_tx(self, nbytes: int) -> None:
        """Raise the tx-count by `nbytes` (a multiple of 16 B: ScheduleError otherwise, check_bulk_bytes)."""
        self._tx(self.tx + nbytes, nbytes, "expect_tx")

    def arrive_expect_tx(self, nbytes: int, role: str = "") -> None:
        """expect_tx(nbytes), then one arrival by `role`."""
        self._tx(self.tx + nbytes, nbytes, "arrive.expect_tx")
        self.arrive(role)

    def complete_tx(self, nbytes: int, who: str = "TMA", node=None, event=None) -> None:
        """Bytes landing; `node` is the hb node of the write that delivered them (ordered before the phase);
        `event` the id of the copy's recorded event (a flow). ScheduleError unless nbytes is a multiple of 16 B."""
        self._last_event = event if event is not None else self._last_event
        if self.hb is not None and node is not None:
            self._arrivals.append(node)
        self._tx(self.tx - nbytes, nbytes, "complete_tx")
        if self.tx < 0 and self.pending <= 0:
            self.races.append(f"{who} delivered {-self.tx} B more than {self.name} expected in phase {self.phase}: "
                              "the phase completes early")
        self._maybe_complete()

    def _tx(self, value: int, nbytes: int, op: str) -> None:
        """Set the tx-count to `value` after `op` of `nbytes`: the range rule first, then the 16 B rule."""
        if not -TX_LIMIT <= value <= TX_LIMIT:
            raise ScheduleError("mbarrier tx-count out of range", value, f"keep it within +-{TX_LIMIT} B per phase",
                                "PTX ISA mbarrier (tx-count)")
        check_bulk_bytes(nbytes, f"{op} on {self.name}")
        self.tx = value

    def _maybe_complete(self) -> None:
        if self.pending <= 0 and self.tx <= 0:
            # The phase completes; bytes beyond what it expected (tx < 0) count against the next phase.
            if self.hb is not None:
                done = self.hb.op(f"[{self.name}]", f"{self.name} phase {self.phase} complete")
                for n in self._arrivals:
                    self.hb.edge(n, done)
                self._arrivals, self._completed[self.phase] = [], done
            self.last_completer, self._last_event = self._last_event, None
            self.phase += 1
            self.pending += self.count
            self._note_count()
            self.arrived_roles = []
            for w in [w for w in self.waiters if w.parity != self.parity]:
                self.waiters.remove(w)
                self._note_pass(w.role, w.parity)
                if self.hb is not None:
                    self.hb.op(w.role, f"wait {self.name} returns", after=self._completed[self.phase - 1])
                w.event.succeed()

    def wait(self, parity: int, role: str = ""):
        """A simpy event for try_wait.parity(parity): already triggered if that phase has completed."""
        ev = self.env.event()
        if parity not in (0, 1):
            raise ScheduleError("try_wait.parity takes a phase parity", parity, "pass 0 or 1")
        if self.parity != parity:
            self._note_pass(role, parity)
            if self.hb is not None:  # passes at once: ordered after the last completed phase, if any
                self.hb.op(role, f"wait {self.name} passes", after=self._completed.get(self.phase - 1))
            ev.succeed()
        else:
            self.waiters.append(Waiter(role, parity, ev, self.env.active_process))
        return ev

    def _note_pass(self, role: str, parity: int) -> None:
        """Remember a passing wait; tell the race log (lapis.pipeline_sim.races) when it passed before any phase
        completed (a wrong parity, unless it is a producer's start state) or on a phase the role had already
        passed (a phase reset). The log uses these only to explain a race it finds."""
        seen = self.passed_at.setdefault(role, set())
        note = getattr(self.hb, "note", None)
        if note is not None and self.phase == 0:
            note("parity", role, f"wrong parity: {role} passed its wait on {self.name} (parity {parity}) before any "
                 "phase of it completed, so it waited for nothing: the parity is the opposite of the phase it "
                 "wants (e.g. a consumer state starting at phase 1; consumers start at phase 0, producers at 1)",
                 self._slot())
        elif note is not None and self.phase in seen:
            note("reset", role, f"phase reset: {role} passed its wait on {self.name} (parity {parity}) a second "
                 f"time on completed phase {self.phase - 1}: its PipelineState went back (a state re-made per work "
                 "item, or a phase flipped without a token)", self._slot())
        seen.add(self.phase)

    def _note_count(self) -> None:
        """Tell the race log when a phase completes before every declared arriver arrived: a count mismatch."""
        note = getattr(self.hb, "note", None)
        missing = [a for a in self.arrivers if a not in self.arrived_roles]
        if note is not None and missing:
            note("count", "", f"count mismatch: {self.name} (init count {self.count}) completed phase {self.phase - 1} "
                 f"on the arrivals of {', '.join(self.arrived_roles) or 'no role'} without {', '.join(missing)}: "
                 f"its count is below its {len(self.arrivers)} declared arrivers, so the phase completes before "
                 "every one of them is done (init it with the number of arrivals per phase)", self._slot())

    def _slot(self):
        return self.ring[2] if self.ring else None

    def state(self) -> str:
        """The current phase's state: pending arrivals of the count, who arrived, outstanding tx bytes."""
        who = f" (arrived: {', '.join(self.arrived_roles)})" if self.arrived_roles else ""
        return (f"{self.name} phase {self.phase} (parity {self.parity}): {self.pending} of {self.count} arrivals "
                f"pending{who}, {self.tx} B of transaction bytes outstanding")

    def try_wait(self, parity: int, role: str = "") -> bool:
        """One non-blocking try_wait.parity(parity): True once the phase with that parity has completed. The
        poll is remembered per process, so a role that polls forever is reported as stalled on this barrier."""
        if parity not in (0, 1):
            raise ScheduleError("try_wait.parity takes a phase parity", parity, "pass 0 or 1")
        passed = self.parity != parity
        self.polls[self.env.active_process] = (role, parity, self.env.now, passed)
        _LATEST_POLL.setdefault(self.env, {})[self.env.active_process] = passed
        if passed:
            self._note_pass(role, parity)
        if passed and self.hb is not None:
            self.hb.op(role, f"try_wait {self.name} passes", after=self._completed.get(self.phase - 1))
        return passed
