"""Timelines as Chrome Trace Event JSON for Perfetto, and a checker for such files.

One process per SM, one thread (track) per role, with overlapping events of a role moved to extra tracks;
times in µs as the format wants; a barrier hand-off (a wait that ended because an event landed) becomes a
flow arrow from that event to the wait ("s"/"f" pairs sharing an id). Format: the Trace Event Format's
complete ("X"), flow ("s"/"f") and metadata ("M") events.
"""

from __future__ import annotations

import json

REQUIRED = {"X": ("name", "ph", "ts", "dur", "pid", "tid"), "s": ("name", "ph", "ts", "pid", "tid", "id"),
            "f": ("name", "ph", "ts", "pid", "tid", "id"), "M": ("name", "ph", "pid", "args")}


def to_chrome(events) -> dict:
    tracks: dict[str, list] = {}  # role -> [end time of each of its tracks]
    out, tid_of, where = [], {}, {}
    for e in sorted(events, key=lambda e: (e.start_ns, e.id)):
        ends = tracks.setdefault(e.role, [])
        lane = next((i for i, end in enumerate(ends) if end <= e.start_ns), None)
        if lane is None:
            ends.append(e.end_ns)
            lane = len(ends) - 1
        else:
            ends[lane] = e.end_ns
        key = f"{e.role}" + (f" #{lane}" if lane else "")
        tid = tid_of.setdefault(key, len(tid_of) + 1)
        where[e.id] = (tid, e)
        out.append(dict(name=e.op, ph="X", ts=e.start_ns / 1e3, dur=(e.end_ns - e.start_ns) / 1e3, pid=e.sm, tid=tid,
                        args=dict(role=e.role, work_item=e.work_item, k_index=e.k_index, kind=e.kind, cta=e.cta)))
    for e in events:
        if e.flow_from is not None and e.flow_from in where:
            src_tid, src = where[e.flow_from]
            out.append(dict(name="mbarrier", ph="s", ts=src.end_ns / 1e3, pid=src.sm, tid=src_tid, id=e.id, cat="flow"))
            out.append(dict(name="mbarrier", ph="f", ts=e.end_ns / 1e3, pid=e.sm, tid=where[e.id][0], id=e.id,
                            cat="flow", bp="e"))
    out += [dict(name="thread_name", ph="M", pid=0, tid=t, args=dict(name=k)) for k, t in tid_of.items()]
    return dict(traceEvents=out, displayTimeUnit="ns")


def check_chrome(trace: dict) -> list[str]:
    """Problems with a trace: missing fields, negative times, partial overlaps on a track, unpaired flows."""
    problems = []
    evs = trace.get("traceEvents")
    if not isinstance(evs, list):
        return ["no traceEvents list"]
    spans: dict = {}
    flows: dict = {}
    for i, e in enumerate(evs):
        need = REQUIRED.get(e.get("ph"))
        if need is None:
            problems.append(f"event {i}: unknown phase {e.get('ph')!r}")
            continue
        missing = [k for k in need if k not in e]
        if missing:
            problems.append(f"event {i}: missing {missing}")
            continue
        if e["ph"] == "X":
            if e["ts"] < 0 or e["dur"] < 0:
                problems.append(f"event {i}: negative time (ts and dur are µs)")
            spans.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], i))
        elif e["ph"] in "sf":
            flows.setdefault(e["id"], []).append(e["ph"])
    for track, xs in spans.items():
        xs.sort()
        stack = []
        for s, t, i in xs:
            while stack and stack[-1] <= s + 1e-9:
                stack.pop()
            if stack and t > stack[-1] + 1e-9:
                problems.append(f"event {i} on track {track} overlaps a span it does not nest in")
            stack.append(t)
    problems += [f"flow {fid}: phases {sorted(p)} are not one s and one f" for fid, p in flows.items()
                 if sorted(p) != ["f", "s"]]
    return problems


def write_chrome(events, path: str) -> dict:
    trace = to_chrome(events)
    with open(path, "w") as f:
        json.dump(trace, f)
    return trace
