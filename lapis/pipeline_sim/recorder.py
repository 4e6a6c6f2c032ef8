"""Timeline events, one per tile-level operation (a TMA box, an MMA over one tile, an epilogue), in ns.

The schema is shared with the timelines real kernels record (decoded by lapis.captures.timeline): role, op, cta,
sm, work item, k index, start and end in ns, and whether the event is an issue or an observed completion (on
hardware a completion is only seen when a wait returns).
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field

from lapis.errors import ScheduleError


@dataclass
class Event:
    role: str
    op: str
    start_ns: float
    end_ns: float
    sm: int = 0
    cta: int = 0
    work_item: int = 0
    k_index: int = -1
    kind: str = "issue"  # issue | completion | wait
    flow_from: int | None = None  # id of the event this one waited for (a barrier hand-off)
    id: int = field(default=-1)

    def as_dict(self) -> dict:
        return asdict(self)


MAX_EVENTS = 1_000_000  # about 10 s of simulation on a 2-core machine (13x the FA4 shapes); nothing seems to hang
# A --full run's bound on the events of every SM simulated together (each distinct work list once), checked on an
# estimate before the run (lapis.pipeline_sim.simulate.check_full_size) and while it runs: full runs take
# 100-300 µs per event on a loaded 2-core machine (h200-s9-tuned 2x16x4096x128 causal: 119,838 events in 36 s),
# and about 0.3 KB per event (b200-m4 2x16x4096x128 causal: 79,124 events, 20 MB), so 1-2.5 minutes and 150 MB
# at the bound. `lapis simulate --max-events N` (simulate(max_events=N)) sets either
# bound for one run.
MAX_FULL_EVENTS = 500_000


class EventBudget:
    """The events of one run, shared by its SMs' recorders: `count` so far, `limit` the bound, `where` what the
    bound applies to (for the error)."""

    def __init__(self, limit: int, where: str):
        self.count, self.limit, self.where = 0, limit, where

    def take(self) -> None:
        self.count += 1
        if self.count > self.limit:
            raise ScheduleError("the run exceeds the simulator's event bound", f"more than {self.limit:,} "
                                f"tile-level events {self.where}", "simulate a smaller shape: per-SM throughput "
                                "settles within a few thousand tiles, or raise the bound with --max-events")


class Recorder:
    """The run's timeline. More than `max_events` events (or, given a budget, more than the run's bound over
    every SM) ends the run with a ScheduleError naming the bound."""

    def __init__(self, env, max_events: int | None = None, sm: int = 0, ids=None, budget: EventBudget | None = None):
        """sm: stamped on every event; ids: an itertools.count shared by the recorders of one run, so event
        ids (flow arrows) stay unique across SMs; budget: the run's bound over every SM (None: only this
        recorder's own bound, max_events, default MAX_EVENTS)."""
        self.budget = budget
        self.env, self.max_events, self.sm = env, MAX_EVENTS if max_events is None else max_events, sm
        self.ids = ids if ids is not None else itertools.count()
        self.events: list[Event] = []
        self.last: dict[str, int] = {}  # role -> id of its latest event

    def add(self, role: str, op: str, start: float, **kw) -> Event:
        if self.budget is not None:
            self.budget.take()
        elif len(self.events) >= self.max_events:
            raise ScheduleError("the run exceeds the simulator's event bound", f"more than {self.max_events:,} "
                                "tile-level events on the representative SM",
                                "simulate a smaller shape: per-SM throughput settles within a few thousand tiles")
        e = Event(role, op, start, self.env.now, **{"sm": self.sm, **kw})
        e.id = next(self.ids)
        self.events.append(e)
        self.last[role] = e.id
        return e

    def last_id(self, role: str) -> int | None:
        """The id of `role`'s latest event (None before its first): where a barrier hand-off's flow starts."""
        return self.last.get(role)


def union_spans(spans: list) -> list:
    """Merge (start, end) spans into disjoint ones."""
    out = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return out
