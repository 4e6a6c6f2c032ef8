"""Timeline events, one per tile-level operation (a TMA box, an MMA over one tile, an epilogue), in ns.

The schema is shared with the timelines real kernels record (issue 6): role, op, cta, sm, work item,
k index, start and end in ns, and whether the event is an issue or an observed completion (on hardware a
completion is only seen when a wait returns).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


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


class Recorder:
    def __init__(self, env):
        self.env = env
        self.events: list[Event] = []

    def add(self, role: str, op: str, start: float, **kw) -> Event:
        e = Event(role, op, start, self.env.now, **kw)
        e.id = len(self.events)
        self.events.append(e)
        return e


def union_spans(spans: list) -> list:
    """Merge (start, end) spans into disjoint ones."""
    out = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return out
