"""Timelines as Chrome Trace Event JSON for Perfetto, and a checker for such files.

One process per (run, SM): a run is a label ("predicted", "measured") so one file can hold a simulation beside a
measured timeline; a lone run keeps one process per SM, its pid the SM index. One thread (track) per role, with
overlapping events of a role moved to extra tracks named "<role> #<n>" that sort right after the role's own.
Every process has a process_name, every track a thread_name and a thread_sort_index (metadata events, "M", on
the pid that holds the data). A barrier hand-off (a wait that ended because another role's arrival or a TMA
copy completed the barrier: `flow_from` of the wait) becomes a flow arrow from that event's end to the wait's
end ("s"/"f" pairs sharing an id). Times in µs, as the format wants. Format: the Trace Event Format's complete
("X"), flow ("s"/"f") and metadata ("M") events.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

REQUIRED = {"X": ("name", "ph", "ts", "dur", "pid", "tid"), "s": ("name", "ph", "ts", "pid", "tid", "id"),
            "f": ("name", "ph", "ts", "pid", "tid", "id"), "M": ("name", "ph", "pid", "args")}


def _tracks(events, pid_of) -> tuple[list, dict, dict]:
    """X events with their tracks; where each event went (id -> (pid, tid, event)); tracks -> (name, sort)."""
    ends: dict = {}  # (pid, role) -> [end time of each of its tracks]
    roles: dict = {}  # pid -> {role: rank}
    out, where, names = [], {}, {}
    for e in sorted(events, key=lambda e: (e.start_ns, e.id)):
        pid = pid_of(e)
        lanes = ends.setdefault((pid, e.role), [])
        lane = next((i for i, end in enumerate(lanes) if end <= e.start_ns), None)
        if lane is None:
            lanes.append(e.end_ns)
            lane = len(lanes) - 1
        else:
            lanes[lane] = e.end_ns
        rank = roles.setdefault(pid, {}).setdefault(e.role, len(roles[pid]))
        tid = rank * 100 + lane + 1
        names[(pid, tid)] = (e.role + (f" #{lane}" if lane else ""), tid)
        where[(pid, e.id)] = (pid, tid, e)
        out.append(dict(name=e.op, ph="X", ts=e.start_ns / 1e3, dur=(e.end_ns - e.start_ns) / 1e3, pid=pid, tid=tid,
                        args=dict(role=e.role, work_item=e.work_item, k_index=e.k_index, kind=e.kind, cta=e.cta)))
    return out, where, names


def _flows(events, pid_of, where) -> list:
    out = []
    for e in events:
        pid = pid_of(e)
        if e.flow_from is None or (pid, e.flow_from) not in where:
            continue
        src_pid, src_tid, src = where[(pid, e.flow_from)]
        fid = f"{pid}:{e.id}"
        out.append(dict(name="hand-off", ph="s", ts=src.end_ns / 1e3, pid=src_pid, tid=src_tid, id=fid, cat="flow"))
        out.append(dict(name="hand-off", ph="f", ts=e.end_ns / 1e3, pid=pid, tid=where[(pid, e.id)][1], id=fid,
                        cat="flow", bp="e"))
    return out


def to_chrome_runs(runs: list) -> dict:
    """runs: [(label, events), ...] -> one trace; each run's SMs are processes "<label> SM <n>" (pids from 1)."""
    out, meta, pids = [], [], {}
    for label, events in runs:
        def pid_of(e, label=label):
            return pids.setdefault((label, e.sm), len(pids) + 1)
        xs, where, names = _tracks(events, pid_of)
        out += xs + _flows(events, pid_of, where)
        meta += _metadata(names, {p: f"{lbl} SM {sm}" for (lbl, sm), p in pids.items() if lbl == label})
    return dict(traceEvents=meta + out, displayTimeUnit="ns")


def to_chrome(events) -> dict:
    """One run's events; one process per SM, its pid the SM index."""
    def pid_of(e):
        return e.sm
    xs, where, names = _tracks(events, pid_of)
    procs = {pid: f"SM {pid}" for pid, _ in names}
    return dict(traceEvents=_metadata(names, procs) + xs + _flows(events, pid_of, where), displayTimeUnit="ns")


def _metadata(names: dict, procs: dict) -> list:
    out = [dict(name="process_name", ph="M", pid=pid, args=dict(name=name)) for pid, name in procs.items()]
    out += [dict(name="process_sort_index", ph="M", pid=pid, args=dict(sort_index=pid)) for pid in procs]
    for (pid, tid), (name, sort) in names.items():
        out.append(dict(name="thread_name", ph="M", pid=pid, tid=tid, args=dict(name=name)))
        out.append(dict(name="thread_sort_index", ph="M", pid=pid, tid=tid, args=dict(sort_index=sort)))
    return out


def check_chrome(trace: dict) -> list[str]:
    """Problems with a trace: missing fields, negative times, partial overlaps on a track, unpaired flows, and
    processes or tracks with no name (process_name, thread_name) or no thread_sort_index."""
    evs = trace.get("traceEvents")
    if not isinstance(evs, list):
        return ["no traceEvents list"]
    problems, spans, flows, meta = [], {}, {}, {}
    for i, e in enumerate(evs):
        need = REQUIRED.get(e.get("ph"))
        if need is None:
            problems.append(f"event {i}: unknown phase {e.get('ph')!r}")
            continue
        missing = [k for k in need if k not in e]
        if missing:
            problems.append(f"event {i}: missing {missing}")
        elif e["ph"] == "X":
            if e["ts"] < 0 or e["dur"] < 0:
                problems.append(f"event {i}: negative time (ts and dur are µs)")
            spans.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], i))
        elif e["ph"] in "sf":
            flows.setdefault(e["id"], []).append(e["ph"])
        else:
            meta.setdefault(e["name"], set()).add((e["pid"], e.get("tid")))
    problems += _overlaps(spans)
    problems += [f"flow {fid}: phases {sorted(p)} are not one s and one f" for fid, p in flows.items()
                 if sorted(p) != ["f", "s"]]
    problems += [f"process {pid} has no process_name" for pid in sorted({p for p, _ in spans})
                 if (pid, None) not in meta.get("process_name", ())]
    for what in ("thread_name", "thread_sort_index"):
        problems += [f"track {t} has no {what}" for t in sorted(spans) if t not in meta.get(what, ())]
    return problems


def _overlaps(spans: dict) -> list[str]:
    problems = []
    for track, xs in spans.items():
        xs.sort()
        stack = []
        for s, t, i in xs:
            while stack and stack[-1] <= s + 1e-9:
                stack.pop()
            if stack and t > stack[-1] + 1e-9:
                problems.append(f"event {i} on track {track} overlaps a span it does not nest in")
            stack.append(t)
    return problems


def flow_pairs(trace: dict) -> int:
    """Complete s/f pairs in a trace: the barrier hand-offs it draws."""
    ids: dict = {}
    for e in trace.get("traceEvents", []):
        if e.get("ph") in ("s", "f"):
            ids.setdefault(e["id"], set()).add(e["ph"])
    return sum(1 for p in ids.values() if p == {"s", "f"})


def _write_whole(trace: dict, path: str) -> None:
    """Write `trace` as JSON to `path` whole or not at all: into a new file beside it, renamed over it
    (os.replace), so a run killed while writing leaves the previous file, never half a trace. A path that is not a
    regular file (/dev/stdout, a FIFO) is written in place."""
    target = Path(path)
    if target.exists() and not target.is_file():
        with open(target, "w") as f:
            json.dump(trace, f)
        return
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as f:
            json.dump(trace, f)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write_chrome(events, path: str) -> dict:
    trace = to_chrome(events)
    _write_whole(trace, path)
    return trace


def write_chrome_runs(runs: list, path: str) -> dict:
    trace = to_chrome_runs(runs)
    _write_whole(trace, path)
    return trace
