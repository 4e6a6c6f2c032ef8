"""Triton Proton intra-kernel traces (instrumentation mode) -> lapis's timeline events, as user_timeline.read
gives them, so `lapis compare --measured` reads either.

How the trace is made (Triton 3.6, triton.profiler): `proton.start(name, data="trace",
backend="instrumentation", mode=proton.mode.Default(...))`, scopes in the kernel (`with pl.scope("wgmma"):`
or `pl.enter_scope` / `pl.exit_scope`, triton.profiler.language as pl; Gluon kernels, or Triton kernels after
`pl.enable_semantic("triton")`), then `proton.finalize()` writes `<name>.chrome_trace`
(StreamChromeTraceWriter, third_party/proton/csrc/lib/Data/TraceDataIO/TraceWriter.cpp): one JSON object
{"displayTimeUnit": "ns", "traceEvents": [...]}, one "X" event per recorded scope instance:

    name  the scope's name ("scope_<id>" when unnamed)     cat   the kernel's name
    pid   "<kernel> Core<sm> CTA<cta>" (%smid, block id)   tid   "warp <w> (line <l>)"
    ts    µs: (the CTA's init time - the earliest CTA's init time, %globaltimer ns) + (cycle - the CTA's
          first recorded cycle) / 1000, i.e. Proton counts 1000 cycles a µs (it assumes a 1 GHz SM clock)
    dur   (end cycle - start cycle) / 1000
    args  Init Time (ns), Post Final Time (ns), Finalization Time (ns), Frequency (MHz), call_stack

w is the warp (granularity "warp"); line l only keeps overlapping scopes of one warp apart on screen and is
ignored here. Skipped: "M" and flow ("s", "f") events, the "Kernel Call Path" track (cat "call_path") and X
events that carry a bind_id (flow endpoints), which later Proton versions add.

What lapis makes of it (the choices below come from a capture folder's capture.json, else their defaults):
- Time: per CTA, base = its earliest ts (ns after the first CTA started); a record's ns = base + (cycles since
  base) x 1000 / clock_mhz. clock_mhz: capture.json's clock_mhz (the SM clock the run had; null is refused, as
  the clock was then not measured), else 1000 (Proton's own assumption: times are then cycles). Times are ns from the earliest record.
- Roles: capture.json's roles, {role: warp} or {role: [warps]}: a role's events are its first warp's (every
  warp of a warpgroup records the same scopes); without it each warp is a role "warp<w>". A role whose warp
  recorded no scope is left out and listed in `not_recorded` with the reason capture.json's mode gives: outside
  the selective sampling, or a sampled warp that ran nothing (a warp_specialize worker is not at warp num_warps:
  Triton pads partitions to whole warpgroups; the H200 WS GEMM of 2026-12-01 sampled warp 8, an idle padding
  warp, while its producer ran on warp 10).
- Ops: the leaf scopes; a scope that encloses another scope of its warp is a container and not an op.
- Work items: each instance of the scope capture.json names as work_item_scope (e.g. "tile") is one work
  item, numbered 0, 1, ... per warp in time order; ops outside every instance are dropped (counted in
  `dropped`). Without it a CTA's whole run is work item 0.
- K index: an op's ordinal among the ops of its name in its work item and role, or -1 for an op that occurs once
  there (outside the K loop).
- Kind: "wait" for the ops capture.json lists as wait_ops, by default every op whose name starts or ends with
  "wait" (case aside); "issue" otherwise.
Proton records every CTA: the sampling is every CTA, every iteration (a circular buffer that overflowed drops
its earliest records and Proton prints a warning: then early work items are missing). One launch per trace.

`read(path)`: path is a capture folder (capture.json with "trace": the file's name in the folder, read as
<trace>.gz where only the gzip-compressed copy is there, as in lapis/data/captures/proton; a capture whose
status is not "ok" is refused with the error it recorded) or a trace file (.chrome_trace or .json, either
possibly .gz). Returns {header, events, ctas, clock_mhz (per CTA), t0_ns, roles, ops, meta, file, kernel,
time_base, dropped, not_recorded}. Every check (sizes within lapis.captures.safe.LIMITS["json_bytes"], the
inflated size of a .gz too, JSON, fields, names, roles, clock) raises CaptureError naming the file, the rule and
the value; so does a folder of several kernels' captures (proton/<date>/: give one subfolder).
"""

from __future__ import annotations

import json
import math
import os
import re
from bisect import bisect_right
from collections import defaultdict
from pathlib import Path

from lapis.captures import safe
from lapis.errors import CaptureError

PID = re.compile(r"^(?P<kernel>.*) Core(?P<sm>\d+) CTA(?P<cta>\d+)$")
TID = re.compile(r"^warp (?P<warp>\d+)(?: \(line (?P<line>\d+)\))?$")
SUFFIXES = (".chrome_trace", ".json")
GZ = ".gz"  # a trace stored gzip-compressed (the shipped captures): read within safe.LIMITS, inflated bytes too
PROTON_MHZ = 1000.0  # Proton's Chrome trace counts 1000 cycles a µs (TraceWriter.cpp: "we assume freq is 1GHz")
CLOCK_RANGE_MHZ = (100.0, 5000.0)
FIX = ("give the .chrome_trace proton.finalize() wrote (backend=\"instrumentation\", data=\"trace\"), or the "
       "capture folder benchmarks/h200_proton.sh wrote")


def _fail(path, rule: str, value, fix: str = FIX) -> CaptureError:
    return CaptureError(rule, f"{path}: {value}", fix)


def is_proton(path) -> bool:
    """Whether `path` is for this reader: a folder, or a file ending in .chrome_trace or .json, either one possibly
    followed by .gz (lapis_timeline.cuh dumps are .npz or .bin)."""
    path = Path(path)
    return path.is_dir() or path.name.removesuffix(GZ).endswith(SUFFIXES)


def read(path) -> dict:
    """A Proton capture folder or trace file -> the timeline (module docstring). Raises CaptureError."""
    path = Path(path)
    if path.is_dir():
        meta = _manifest(path)
        trace = _trace_file(path, meta["trace"])
    else:
        meta, trace = {}, path
    doc = _load(trace)
    scopes, kernel = _scopes(doc, trace, meta.get("kernel"))
    clock = _clock(meta, path)
    roles, missing = _roles(meta, scopes, trace)
    out = _events(scopes, roles, clock, meta, trace)
    ctas = sorted({s["cta"] for s in scopes})
    header = dict(cta_first=0, cta_every=1, cta_mask=(1 << 64) - 1, iter_every=1, grid_ctas=_grid_ctas(meta, ctas))
    out.update(header=header, ctas=ctas, clock_mhz={c: clock for c in ctas}, meta=meta, file=str(path),
               not_recorded=missing,
               kernel=kernel, roles=sorted({e["role"] for e in out["events"]}),
               ops=sorted({e["op"] for e in out["events"]}),
               time_base=(f"SM cycles at {clock:g} MHz (capture.json clock_mhz)" if "clock_mhz" in meta else
                          f"SM cycles at Proton's assumed {PROTON_MHZ:g} MHz (no clock_mhz given): times are "
                          "cycles"))
    return out


def _manifest(folder: Path) -> dict:
    f = folder / "capture.json"
    if not os.path.lexists(f):  # a FIFO, folder or dangling link is there, not missing: safe.regular names it
        raise _fail(folder, "a Proton capture folder holds capture.json", "no capture.json", FIX)
    meta = safe.read_json(safe.regular(f, folder), kind="proton_timeline")
    kernels = meta.get("kernels") if "trace" not in meta else None  # lapis.captures.manifest NESTED's record
    subs = [k.get("capture") for k in kernels if isinstance(k, dict)] if isinstance(kernels, list) else []
    if subs and all(isinstance(x, str) for x in subs):
        raise _fail(f, "a Proton capture compared is one kernel's folder", f"a capture of {len(subs)} kernels",
                    "give one of its subfolders: " + ", ".join(str(folder / x) for x in subs))
    if meta.get("status", "ok") != "ok":
        raise _fail(f, "a Proton capture compared is one whose run succeeded (status \"ok\")",
                    f"status {meta.get('status')!r}: {str(meta.get('error'))[:600]}",
                    "compare a capture whose Proton run wrote a trace (the error above says why this one did not)")
    name = meta.get("trace")
    if not isinstance(name, str) or not name or Path(name).name != name:
        raise _fail(f, "capture.json's trace is the name of the trace file in the folder", repr(name),
                    "write the file's name, e.g. \"gluon_ws_matmul.chrome_trace\"")
    if "clock_mhz" in meta and meta["clock_mhz"] is None:  # benchmarks/h200_proton.py's: the clock went unsampled
        raise _fail(f, "capture.json's clock_mhz is the SM clock in MHz the run had; null says it was not measured, "
                    "and Proton's assumed 1000 MHz would scale every time wrongly", "clock_mhz null",
                    "write the clock the run had (nvidia-smi --query-gpu=clocks.sm), or delete the key to read the "
                    "times as cycles at Proton's 1000 MHz")
    return {k: v for k, v in meta.items() if v is not None}  # any other null field counts as left out


def _trace_file(folder: Path, name: str) -> Path:
    """The trace capture.json names, or, where only its compressed copy is there, <name>.gz."""
    path = folder / name
    if not path.exists() and (folder / (name + GZ)).exists():
        path = folder / (name + GZ)
    return safe.regular(path, folder)


def _load(path: Path) -> dict:
    limit = safe.LIMITS["json_bytes"]
    data = safe.read_gzip(path, limit=limit) if path.name.endswith(GZ) else safe.read_bytes(path, limit=limit)
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise _fail(path, "a Proton trace is JSON", f"{exc.__class__.__name__}: {str(exc)[:200]}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        what = type(doc).__name__ if not isinstance(doc, dict) else f"keys {sorted(doc)[:8]}"
        raise _fail(path, "a Proton trace is a JSON object with a traceEvents list", what)
    return doc


def _skipped(e: dict) -> bool:
    return (e.get("ph") != "X" or e.get("cat") == "call_path" or e.get("pid") == "Kernel Call Path"
            or "bind_id" in e)


def _number(path, i: int, e: dict, key: str) -> float:
    v = e.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise _fail(path, f"every scope event's {key} is a finite number >= 0 (µs)", f"traceEvents[{i}] {key} = "
                    f"{v!r}")
    return float(v)


def _scopes(doc: dict, path, kernel: str | None) -> tuple[list, str]:
    """The X events of CTA tracks as dicts {name, kernel, sm, cta, warp, start, end} (start/end in Proton's
    ns: ts x 1000), of one kernel."""
    out = []
    for i, e in enumerate(doc["traceEvents"]):
        if not isinstance(e, dict):
            raise _fail(path, "every trace event is a JSON object", f"traceEvents[{i}] is {type(e).__name__}")
        if _skipped(e):
            continue
        pid, tid, name = e.get("pid"), e.get("tid"), e.get("name")
        p = PID.match(pid) if isinstance(pid, str) else None
        t = TID.match(tid) if isinstance(tid, str) else None
        if p is None or t is None:
            raise _fail(path, "every scope event's pid is \"<kernel> Core<sm> CTA<cta>\" and its tid "
                        "\"warp <w> (line <l>)\" (Proton instrumentation mode, warp granularity)",
                        f"traceEvents[{i}] pid {pid!r}, tid {tid!r}")
        if not isinstance(name, str) or not name:
            raise _fail(path, "every scope event names its scope", f"traceEvents[{i}] name {name!r}")
        ts, dur = _number(path, i, e, "ts"), _number(path, i, e, "dur")
        start = round(ts * 1000.0, 3)
        out.append(dict(name=name, kernel=p["kernel"], sm=int(p["sm"]), cta=int(p["cta"]), warp=int(t["warp"]),
                        start=start, end=start + round(dur * 1000.0, 3)))
    if not out:
        raise _fail(path, "a Proton trace holds scope events (X events of \"<kernel> Core<sm> CTA<cta>\" tracks)",
                    "none", "put pl.scope(...) in the kernel and start proton with backend=\"instrumentation\" "
                    "and data=\"trace\"")
    kernels = sorted({s["kernel"] for s in out})
    if kernel is not None:
        if kernel not in kernels:
            raise _fail(path, "the kernel capture.json names has scopes in the trace", f"{kernel!r}; the trace's "
                        f"kernels: {kernels}", "name one of the trace's kernels in capture.json's kernel")
        out = [s for s in out if s["kernel"] == kernel]
    elif len(kernels) > 1:
        raise _fail(path, "a trace without a capture.json holds one kernel", f"kernels {kernels}",
                    "record one kernel per session, or name it in a capture folder's capture.json (kernel)")
    return out, kernels[0] if kernel is None else kernel


def _clock(meta: dict, path) -> float:
    v = meta.get("clock_mhz", PROTON_MHZ)
    lo, hi = CLOCK_RANGE_MHZ
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not lo <= v <= hi:
        raise _fail(path, f"capture.json's clock_mhz is the SM clock in MHz, {lo:g}..{hi:g}", repr(v),
                    "write the clock the run had (nvidia-smi clocks.sm), or leave it out for Proton's 1000 MHz")
    return float(v)


def _roles(meta: dict, scopes: list, path) -> tuple[dict, dict]:
    """(warp -> role name, role -> why it has no records) for the roles capture.json names. A role whose warp
    recorded nothing is left out with the reason (`not_recorded`); no role recorded at all is a CaptureError."""
    warps = sorted({s["warp"] for s in scopes})
    given = meta.get("roles")
    if given is None:
        return {w: f"warp{w}" for w in warps}, {}
    if not isinstance(given, dict) or not given:
        raise _fail(path, "capture.json's roles map each role to its warp, {role: warp} or {role: [warps]}",
                    repr(given)[:200], "e.g. {\"producer\": 8, \"consumer0\": 0, \"consumer1\": 4}")
    out, missing = {}, {}
    for role, w in given.items():
        lead = w[0] if isinstance(w, list) and w else w
        if isinstance(lead, bool) or not isinstance(lead, int) or lead < 0:
            raise _fail(path, "a role's warp is a warp id >= 0 (or a list whose first id is the lead warp)",
                        f"{role!r}: {w!r}", "e.g. {\"producer\": 8}")
        if lead in out:
            raise _fail(path, "each role has its own lead warp", f"{out[lead]!r} and {role!r} both warp {lead}",
                        "give each role the first warp of its warpgroup")
        if lead in missing.values():
            raise _fail(path, "each role has its own lead warp", f"{role!r}: warp {lead} again",
                        "give each role the first warp of its warpgroup")
        if lead not in warps:
            missing[str(role)] = lead
            continue
        out[lead] = str(role)
    if not out:
        raise _fail(path, "each role's warp recorded scopes", f"{sorted(missing.items())}; warps in the trace: "
                    f"{warps}", "map the roles to warps the trace holds (a selective sampling records only "
                    "the warps in sampling_options)")
    return out, {role: _why(meta, w, warps) for role, w in missing.items()}


def _why(meta: dict, warp: int, warps: list) -> str:
    """Why a role's warp has no records, from what capture.json says of the run (mode, sampling)."""
    mode = str(meta.get("mode", ""))
    sampled = re.search(r"sampling_options=([\d,\s]*)", mode)
    ids = {int(x) for x in sampled.group(1).split(",") if x.strip()} if sampled else set()
    if "SELECTIVE" in mode and ids and warp not in ids:
        return f"warp {warp} is not in the selective sampling ({sorted(ids)}): Proton did not record it"
    why = f"warp {warp} recorded no scope (the trace holds warps {warps})"
    if "SELECTIVE" in mode:  # TritonGPUAllocateWarpGroups: padding partitions, workers not at num_warps
        why += (f"; if warp {warp} was meant to be a warp_specialize worker partition: Triton places workers "
                "where its warp-group allocation puts them (warpGroupStartIds), padding to whole warpgroups with "
                "idle warps; Triton 3.6 runs 8 default warps and one 1-warp worker as 12 warps, the worker on "
                "warp 10 and idle warps on 8, 9 and 11. Sample the worker's own warp, or record every warp once "
                "to find it")
    return why


def _wait(meta: dict, path):
    given = meta.get("wait_ops")
    if given is not None:
        names = set(given) if isinstance(given, list) and all(isinstance(x, str) for x in given) else None
        if names is None:
            raise _fail(path, "capture.json's wait_ops is a list of scope names", repr(given)[:200],
                        "list the scopes that are waits, e.g. [\"wait full\", \"wait wgmma\"]")
        return lambda op: op in names
    return lambda op: op.lower().startswith("wait") or op.lower().endswith("wait")


def _leaves(mine: list) -> tuple[list, list]:
    """A warp's scopes (sorted by start, longest first) -> (leaves, containers). Scopes nest as the kernel's
    enter/exit pairs do, so a scope with children has its first child right after it in this order."""
    leaves, containers = [], []
    for a, b in zip(mine, mine[1:] + [None]):
        inside = b is not None and b["start"] < a["end"] and b["end"] <= a["end"]  # same span: a is the outer
        (containers if inside else leaves).append(a)
    return leaves, containers


def _events(scopes: list, roles: dict, clock: float, meta: dict, path) -> dict:
    by_warp = defaultdict(list)
    for s in scopes:
        if s["warp"] in roles:
            by_warp[(s["cta"], s["warp"])].append(s)
    base = {}
    for s in scopes:
        base[s["cta"]] = min(base.get(s["cta"], s["start"]), s["start"])
    item_scope, is_wait = meta.get("work_item_scope"), _wait(meta, path)
    if item_scope is not None and not isinstance(item_scope, str):
        raise _fail(path, "capture.json's work_item_scope is a scope name", repr(item_scope)[:100],
                    "e.g. \"tile\"")
    scale = PROTON_MHZ / clock
    rows, dropped = [], dict(containers=0, outside_work_items=0)
    for (cta, warp), mine in sorted(by_warp.items()):
        mine.sort(key=lambda s: (s["start"], -s["end"]))
        items = [s for s in mine if s["name"] == item_scope] if item_scope else []
        leaves, containers = _leaves([s for s in mine if s["name"] != item_scope])
        dropped["containers"] += len(containers)
        starts = [s["start"] for s in items]
        for s in leaves:
            w = 0
            if item_scope:
                j = bisect_right(starts, s["start"]) - 1
                if j < 0 or s["end"] > items[j]["end"]:
                    dropped["outside_work_items"] += 1
                    continue
                w = j
            b = base[cta]
            rows.append(dict(role=roles[warp], op=s["name"], start=b + (s["start"] - b) * scale,
                             end=b + (s["end"] - b) * scale, sm=s["sm"], cta=cta, work_item=w))
    if not rows:
        raise _fail(path, "the roles' warps hold op scopes (leaf scopes inside the work-item scope)",
                    f"none; {dropped['containers']} containers, {dropped['outside_work_items']} outside "
                    f"{item_scope!r}", "check capture.json's roles and work_item_scope against the trace's scopes")
    count = defaultdict(int)
    for r in rows:
        count[(r["cta"], r["role"], r["work_item"], r["op"])] += 1
    rows.sort(key=lambda r: (r["cta"], r["role"], r["start"], r["end"]))
    seen, events = defaultdict(int), []
    t0 = min(r["start"] for r in rows)
    for r in rows:
        key = (r["cta"], r["role"], r["work_item"], r["op"])
        k = seen[key] if count[key] > 1 else -1
        seen[key] += 1
        events.append(dict(role=r["role"], op=r["op"], start_ns=r["start"] - t0, end_ns=r["end"] - t0, sm=r["sm"],
                           cta=r["cta"], work_item=r["work_item"], k_index=k,
                           kind="wait" if is_wait(r["op"]) else "issue", flow_from=None, id=len(events)))
    return dict(events=events, t0_ns=t0, dropped=dropped)


def _grid_ctas(meta: dict, ctas: list) -> int:
    grid = meta.get("grid")
    if isinstance(grid, list) and grid and all(isinstance(g, int) and not isinstance(g, bool) and g > 0
                                               for g in grid):
        return math.prod(grid)
    return max(ctas) + 1
