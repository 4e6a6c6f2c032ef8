"""Named barriers (`bar.sync` / `bar.arrive` with a thread count), in simulated time (simpy).

PTX ISA "bar, barrier" (parallel synchronization instructions): a CTA has 16 hardware barriers, ids 0..15
(`__syncthreads` is `bar.sync 0` over the whole CTA). `bar.sync a, b` and `bar.arrive a, b` name the
barrier `a` and the number of threads `b` expected on it; b must be a multiple of the warp size (32).
Arrival is counted per warp: each warp adds 32. When the arrived count reaches b the barrier completes,
every `bar.sync` waiter on it is released, and the barrier resets for its next use. `bar.sync` arrives and
waits; `bar.arrive` arrives and does not wait (the producer side of a hand-off, e.g. FlashAttention-3's
warp-scheduler ping-pong).

Arrivals are given in threads (a warpgroup is 128 = 4 warps). A call whose warps overflow the count completes
the barrier with the first warps and starts the next use with the rest, as warps arrive one by one on hardware.
Each barrier declares the roles expected to arrive, with their thread counts, so a deadlock report can name
the roles that never arrived (deadlock.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lapis.errors import ScheduleError

WARP_SIZE = 32
BARRIER_IDS = 16  # PTX: ids 0..15 per CTA


@dataclass
class NamedWaiter:
    role: str
    generation: int  # the use of the barrier whose completion releases this waiter
    event: object
    proc: object = None  # the simpy process that waits


@dataclass
class NamedBarrier:
    """Barrier `bar_id` of a CTA, completing at `count` threads; `arrivers` maps role -> threads it arrives with.

    Raises ScheduleError for an id outside 0..15, a count (or an arrival) that is not a positive multiple of 32."""

    env: object
    name: str
    bar_id: int
    count: int
    arrivers: dict = field(default_factory=dict)
    arrived: int = 0  # threads arrived in the current use
    generation: int = 0  # uses completed so far
    waiters: list = field(default_factory=list)
    arrived_roles: list = field(default_factory=list)  # roles that arrived in the current use
    last_completer: int | None = None  # id of the recorded event of the arrival that completed the last use
    _last_event: int | None = None

    def __post_init__(self):
        if not 0 <= self.bar_id < BARRIER_IDS:
            raise ScheduleError("a named barrier id lies in 0..15", self.bar_id, "use one of the CTA's 16 barriers",
                                "PTX ISA bar, barrier")
        _check_threads(self.count, f"bar {self.bar_id} thread count")
        for role, n in self.arrivers.items():
            _check_threads(n, f"threads {role} arrives with on bar {self.bar_id}")

    def arrive(self, role: str, threads: int, event=None) -> None:
        """`bar.arrive a, count` by `threads` threads of `role` (no wait); `event`: the id of the role's latest
        recorded event (where a flow arrow to the released waiters starts)."""
        self._arrive(role, threads, event)

    def sync(self, role: str, threads: int, event=None):
        """`bar.sync a, count`: arrive, then a simpy event that triggers when this use of the barrier completes.
        (With an overflowing arrival, it waits for the use its last warps joined.)"""
        ev = self.env.event()
        gen = self._arrive(role, threads, event)
        if gen < self.generation:
            ev.succeed()
        else:
            self.waiters.append(NamedWaiter(role, gen, ev, self.env.active_process))
        return ev

    def missing(self) -> list[str]:
        """Declared arrivers that have not arrived in the current use."""
        return [r for r in self.arrivers if r not in self.arrived_roles]

    def describe(self) -> str:
        """The state a deadlock report names: id, name, threads arrived of the count."""
        return f"bar {self.bar_id} ({self.name}: {self.arrived} of {self.count} threads arrived)"

    def _arrive(self, role: str, threads: int, event=None) -> int:
        """Count `threads` (whole warps) and return the use the last of them joined."""
        _check_threads(threads, f"threads {role} arrives with on bar {self.bar_id}")
        self._last_event = event if event is not None else self._last_event
        left = threads
        while True:
            take = min(left, self.count - self.arrived)
            self.arrived += take
            left -= take
            self.arrived_roles.append(role)
            gen = self.generation
            if self.arrived == self.count:
                self._complete()
            if not left:
                return gen

    def _complete(self) -> None:
        self.last_completer, self._last_event = self._last_event, None
        done = self.generation
        self.generation += 1
        self.arrived, self.arrived_roles = 0, []
        for w in [w for w in self.waiters if w.generation == done]:
            self.waiters.remove(w)
            w.event.succeed()


def _check_threads(n, what: str) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < WARP_SIZE or n % WARP_SIZE:
        raise ScheduleError(f"{what} must be a positive multiple of the warp size (32)", n,
                            "count whole warps, e.g. 128 for a warpgroup or 256 for two",
                            "PTX ISA bar, barrier")
