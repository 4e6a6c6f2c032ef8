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


class Recorder:
    """The run's timeline. More than `max_events` events ends the run with a ScheduleError naming the bound."""

    def __init__(self, env, max_events: int | None = None, sm: int = 0, ids=None):
        """sm: stamped on every event; ids: an itertools.count shared by the recorders of one run, so event
        ids (flow arrows) stay unique across SMs."""
        self.env, self.max_events, self.sm = env, MAX_EVENTS if max_events is None else max_events, sm
        self.ids = ids if ids is not None else itertools.count()
        self.events: list[Event] = []
        self.last: dict[str, int] = {}  # role -> id of its latest event

    def add(self, role: str, op: str, start: float, **kw) -> Event:
        if len(self.events) >= self.max_events:
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
