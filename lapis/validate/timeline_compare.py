"""Predicted against measured timelines: the errors `lapis compare` states.

Both timelines are lists of lapis.pipeline_sim.recorder.Event (times in ns): the simulator's representative
SM, and the events a real kernel recorded (lapis.gpu timelines, decoded into the same schema). Every metric is
computed the same way on both sides, from role, op, work item and K index, never from buffer positions:
- total time: the plain build's measured kernel time against the predicted time (the caller passes both);
- steady-state iteration time: per work item, the start of each K iteration is the earliest start of a
  consumer-role event with that K index; the iteration time is the median difference between successive
  iterations in the middle half of the K range, taken over the work items (median again);
- per-role busy fraction: the union of a role's non-wait event spans over the timeline's span (the wait
  fraction: the time covered by its wait spans only).
"""

from __future__ import annotations

from collections import defaultdict
from statistics import median

from lapis.pipeline_sim.recorder import union_spans

PRODUCER_ROLES = ("producer", "load", "tma")


def _is_consumer(role: str) -> bool:
    return not role.lower().startswith(PRODUCER_ROLES)


def iteration_ns(events) -> float | None:
    """Steady-state K-iteration time in ns (module docstring), or None without two K iterations."""
    starts: dict = defaultdict(dict)
    for e in events:
        if e.k_index >= 0 and e.kind != "wait" and _is_consumer(e.role):
            k = starts[(e.sm, e.cta, e.work_item)]
            k[e.k_index] = min(k.get(e.k_index, e.start_ns), e.start_ns)
    per_item = []
    for ks in starts.values():
        order = sorted(ks)
        mid = order[len(order) // 4: max(len(order) * 3 // 4, len(order) // 4 + 2)]
        gaps = [ks[b] - ks[a] for a, b in zip(mid, mid[1:])]
        if gaps:
            per_item.append(median(gaps))
    return median(per_item) if per_item else None


def busy_fractions(events, waits: bool = False) -> dict:
    """Role -> fraction of the timeline's span in which the role has a non-wait event in flight (waits=True:
    in which it only waits: a wait event in flight and no non-wait one, so busy + wait <= 1 even where a
    simulator records a wait over its own op)."""
    events = list(events)
    if not events:
        return {}
    t0, t1 = min(e.start_ns for e in events), max(e.end_ns for e in events)
    busy, every = defaultdict(list), defaultdict(list)
    for e in events:
        every[e.role].append((e.start_ns, e.end_ns))
        if e.kind != "wait":
            busy[e.role].append((e.start_ns, e.end_ns))
    if waits:
        return {r: (_length(s) - _length(busy[r])) / (t1 - t0) for r, s in sorted(every.items())}
    return {r: _length(s) / (t1 - t0) for r, s in sorted(busy.items())}


def _length(spans) -> float:
    return sum(hi - lo for lo, hi in union_spans(spans))


def err_pct(predicted: float, measured: float) -> float:
    """(predicted - measured) / measured in percent (positive: the model is slow)."""
    return (predicted - measured) / measured * 100.0


def compare(predicted_events, measured_events, predicted_ns: float, measured_ns: float) -> dict:
    """The errors of one (schedule, shape): total, steady-state iteration, and per-role busy fractions.

    predicted_ns / measured_ns: kernel times in ns (the measured one from the plain, uninstrumented build).
    Roles present on one side only are listed with None for the other."""
    it_p, it_m = iteration_ns(predicted_events), iteration_ns(measured_events)
    bp, bm = busy_fractions(predicted_events), busy_fractions(measured_events)
    roles = {r: dict(predicted=bp.get(r), measured=bm.get(r)) for r in sorted(set(bp) | set(bm))}
    return dict(predicted_us=predicted_ns / 1e3, measured_us=measured_ns / 1e3,
                total_err_pct=err_pct(predicted_ns, measured_ns),
                iteration_ns=dict(predicted=it_p, measured=it_m,
                                  err_pct=None if not (it_p and it_m) else err_pct(it_p, it_m)),
                busy=roles)
