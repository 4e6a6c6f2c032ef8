"""A user's measured timeline (lapis_timeline.cuh, decoded by lapis.captures.user_timeline, or a Triton Proton
intra-kernel trace, read by lapis.captures.proton) against the user's own schedule
(lapis.pipeline_sim.schedule.Schedule, named as path/to/file.py:NAME): the errors `lapis compare --measured`
states.

The two sides meet by logical ids only: role and op names (the kernel's records name its roles and ops as the
schedule's events do: the names travel in the file's meta), the work item's ordinal on its SM and the K index
(lapis.validate.timeline_align milestones). The simulator runs the representative SM; the measured side is the
sampled CTA that ran the most work items (ties: the lowest CTA), whose SM and CTA are reported. On the
predicted side the schedule's hardware units (Schedule.units: "tma", "tensor") are not warps and are dropped,
and a wait for a busy unit that ends where its role's next op starts joins that op (the warp issued when the
wait began; timeline_align.canonical does the same for lapis's kernels).

Errors are (predicted - measured) / measured in percent: negative means the model is too fast. Total time:
the file's plain (uninstrumented) build time when its meta holds `plain_us`, else the measured timeline's span
over every sampled CTA (an instrumented build: slower than the plain one by the recording cost). A plain time
more than PLAIN_OVER_SPAN times that span cannot be the kernel's (the plain build runs the same work without
the records): it is a host-bound launch time (the launches came slower than the GPU ran them), so the span is
compared instead and the report says so. Times in ns.

Per role, both sides count the same things, each as a fraction of its own timeline's span (the simulated SM's
run; the compared CTA's instrumented run) (`role_times`):
- busy: inside the role's recorded ops (events whose kind is not "wait"; on the predicted side the unit work a
  role owns, such as its wgmma on the tensor pipe, is recorded in its row);
- waiting: inside the role's waits only (mbarrier waits, wgmma waits), no op of the role in flight;
- queued (predicted only): waiting for a hardware unit another role holds ("wait tensor"); a warp's own records
  cannot see that queue (its issue returns at once), so the measured side has no such column and the time
  shows up there as busy or waiting, wherever the kernel put its records;
- busy ns: the busy time itself on each side and its error (predicted - measured) / measured. The measured run
  is the instrumented build, slower than the plain one, so compare the fractions first.

A role the file names but whose warp recorded nothing (a Proton trace without the producer warp's records:
lapis.captures.proton `not_recorded`) is reported as not recorded, with the reason, and left out of the
comparison on both sides (its predicted row keeps the prediction only; the divergences use the recorded roles'
milestones); the other roles are compared as usual.
"""

from __future__ import annotations

from collections import defaultdict
from statistics import median

from lapis.captures import proton, user_timeline
from lapis.errors import CaptureError
from lapis.pipeline_sim.recorder import Event, union_spans
from lapis.pipeline_sim.schedule import lookup
from lapis.pipeline_sim.simulate import default_gpu, simulate
from lapis.validate.timeline_align import first_divergence, steady_divergence
from lapis.validate.timeline_compare import PRODUCER_ROLES, err_pct


PLAIN_OVER_SPAN = 2.0  # plain_us above this many instrumented spans: the launch loop, not the kernel, was timed


def predicted_view(events, units) -> list:
    """The simulator's events without the hardware units' own roles, each unit wait that runs up to its role's
    next op joined to that op (module docstring)."""
    events = [e for e in events if e.role not in units]
    waits = {f"wait {u}" for u in units}
    starts = {(e.role, e.start_ns): e for e in events if e.kind != "wait"}
    out = []
    for e in events:
        nxt = starts.get((e.role, e.end_ns)) if e.kind == "wait" and e.op in waits else None
        if nxt is not None:
            out.append(Event(e.role, nxt.op, e.start_ns, e.end_ns, e.sm, e.cta, nxt.work_item, nxt.k_index,
                             nxt.kind, e.flow_from, e.id))
        else:
            out.append(e)
    return out


def chosen_cta(events) -> tuple[int, int]:
    """(CTA, SM) of the measured CTA that ran the most work items (ties: the lowest CTA)."""
    items, sm = defaultdict(set), {}
    for e in events:
        items[e.cta].add(e.work_item)
        sm[e.cta] = e.sm
    cta = min(items, key=lambda c: (-len(items[c]), c))
    return cta, sm[cta]


def busy_ns(events) -> dict:
    """Role -> ns in which the role has a non-wait event in flight (the union of its spans)."""
    spans = defaultdict(list)
    for e in events:
        if e.kind != "wait":
            spans[e.role].append((e.start_ns, e.end_ns))
    return {r: sum(hi - lo for lo, hi in union_spans(s)) for r, s in sorted(spans.items())}


def _length(spans) -> float:
    return sum(hi - lo for lo, hi in union_spans(spans))


def role_times(events, units=()) -> dict:
    """Role -> {busy, waiting, queued: fractions of the events' span; busy_ns} (module docstring). `units`: the
    schedule's hardware units; a wait named "wait <unit>" is queueing, any other wait is waiting. Waiting and
    queued time exclude the time the role is busy (a role's async op can run under its wait)."""
    events = list(events)
    if not events:
        return {}
    span = max(e.end_ns for e in events) - min(e.start_ns for e in events)
    queue_ops = {f"wait {u}" for u in units}
    busy, queued, every = defaultdict(list), defaultdict(list), defaultdict(list)
    for e in events:
        every[e.role].append((e.start_ns, e.end_ns))
        if e.kind != "wait":
            busy[e.role].append((e.start_ns, e.end_ns))
        elif e.op in queue_ops:
            queued[e.role].append((e.start_ns, e.end_ns))
    out = {}
    for role in sorted(every):
        b = _length(busy[role])
        q = _length(busy[role] + queued[role]) - b
        w = _length(every[role]) - b - q
        out[role] = dict(busy=b / span if span else None, waiting=w / span if span else None,
                         queued=q / span if span else None, busy_ns=b)
    return out


def read_timeline(path) -> dict:
    """A measured file as user_timeline.read gives it: a Proton capture folder or trace (.chrome_trace, .json)
    through lapis.captures.proton, anything else (.npz, .bin) through lapis.captures.user_timeline."""
    return proton.read(path) if proton.is_proton(path) else user_timeline.read(path)


def iteration_ns(events) -> float | None:
    """Steady-state K-iteration time in ns, as lapis.validate.timeline_compare.iteration_ns (the median over work
    items of the median gap between the starts of successive K iterations of the consumer roles, middle half of
    the K range), each gap divided by the K indices it spans: a timeline that recorded every Nth iteration
    (iter_every) gives the time of one iteration, not of N. None without two K iterations."""
    starts: dict = defaultdict(dict)
    for e in events:
        if e.k_index >= 0 and e.kind != "wait" and not e.role.lower().startswith(PRODUCER_ROLES):
            k = starts[(e.sm, e.cta, e.work_item)]
            k[e.k_index] = min(k.get(e.k_index, e.start_ns), e.start_ns)
    per_item = []
    for ks in starts.values():
        order = sorted(ks)
        mid = order[len(order) // 4: max(len(order) * 3 // 4, len(order) // 4 + 2)]
        gaps = [(ks[b] - ks[a]) / (b - a) for a, b in zip(mid, mid[1:])]
        if gaps:
            per_item.append(median(gaps))
    return median(per_item) if per_item else None


def compare_measured(path, schedule: str, shape: str, params: dict | None = None, tolerance_pct: float = 10.0,
                     keep_events: bool = False) -> dict:
    """The comparison as a JSON-able dict (module docstring).

    Raises CaptureError for an unreadable or malformed file (user_timeline.read), one without events, or one
    whose meta names another shape; ScheduleError for an unknown schedule, parameter or shape.
    keep_events: add `_predicted_events` and `_measured_events` (recorder.Event lists) for the Gantt and trace."""
    s = lookup(schedule)
    s.parse_shape(shape)
    got = read_timeline(path)
    meta = got["meta"]
    if meta.get("shape") not in (None, shape):
        raise CaptureError("the measured file was recorded at the shape compared", f"{path}: recorded at "
                           f"{meta['shape']}, --shape {shape}", f"use --shape {meta['shape']}")
    events = [Event(**e) for e in got["events"]]
    if not events:
        raise CaptureError("a measured timeline holds spans to compare", f"{path}: no span in "
                           f"{len(got['ctas'])} sampled CTAs", "record each role's ops with begin()/end() "
                           "(lapis_timeline.cuh) and sample at least one CTA")
    cta, sm = chosen_cta(events)
    meas = [e for e in events if e.cta == cta]
    gpu = default_gpu(schedule)
    sim = simulate(schedule, gpu, shape, dict(params or {}))
    missing = got.get("not_recorded") or {}
    pred = [e for e in predicted_view(sim["_events"], s.units) if e.role not in missing]
    span_ns = max(e.end_ns for e in events) - min(e.start_ns for e in events)
    plain = isinstance(meta.get("plain_us"), (int, float)) and not isinstance(meta["plain_us"], bool)
    host_bound = plain and 1e3 * meta["plain_us"] > PLAIN_OVER_SPAN * span_ns
    measured_ns = 1e3 * meta["plain_us"] if plain and not host_bound else span_ns
    it_p, it_m = iteration_ns(pred), iteration_ns(meas)
    own = [e for e in sim["_events"] if e.role not in s.units]  # unit waits kept apart: not predicted_view
    # a role with no records keeps its predicted fractions; not_recorded says why it has no measured side
    tp, tm = role_times(own, s.units), role_times(meas)
    roles = {}
    for r in sorted(set(tp) | set(tm)):
        p, m = tp.get(r, {}), tm.get(r, {})
        bp, bm = p.get("busy_ns"), m.get("busy_ns")
        roles[r] = dict(busy_predicted=p.get("busy"), busy_measured=m.get("busy"),
                        waiting_predicted=p.get("waiting"), waiting_measured=m.get("waiting"),
                        queued_predicted=p.get("queued"), busy_ns_predicted=bp, busy_ns_measured=bm,
                        busy_ns_err_pct=err_pct(bp, bm) if bp is not None and bm else None)
        if r in missing:
            roles[r]["not_recorded"] = missing[r]
    h = got["header"]
    out = dict(schedule=s.name, schedule_arg=schedule, gpu=gpu, shape=shape, params=sim["params"],
               measured_file=str(path), kernel=meta.get("kernel") or got.get("kernel"),
               provenance=meta.get("provenance"), time_base=got.get("time_base"),
               sampling=dict(cta_first=h["cta_first"], cta_every=h["cta_every"], cta_mask=h["cta_mask"],
                             iter_every=h["iter_every"], ctas_sampled=len(got["ctas"]), grid_ctas=h["grid_ctas"]),
               cta=cta, sm=sm, predicted_us=sim["predicted_us"], measured_us=measured_ns / 1e3,
               measured_total="plain build (meta plain_us)" if plain and not host_bound else
               (f"instrumented timeline span: the meta's plain_us, {meta['plain_us']:.1f} µs, is "
                f"{1e3 * meta['plain_us'] / span_ns:.1f}x it, a host-bound launch time, not the kernel's"
                if host_bound else "instrumented timeline span (no plain_us in the file's meta)"),
               total_err_pct=err_pct(sim["predicted_us"] * 1e3, measured_ns),
               iteration_ns=dict(predicted=it_p, measured=it_m, err_pct=err_pct(it_p, it_m) if it_p and it_m
                                 else None),
               roles=roles, not_recorded=dict(missing))
    ref = it_m or it_p or span_ns
    out["first_divergence"] = first_divergence(pred, meas, ref, tolerance_pct)
    out["steady_divergence"] = steady_divergence(pred, meas, ref, tolerance_pct)
    if keep_events:
        out["_predicted_events"], out["_measured_events"] = pred, meas
    return out


def _pct(x) -> str:
    return "-" if x is None else f"{x:+.1f}%"


def _ns(x) -> str:
    return "-" if x is None else f"{x:.0f} ns"


def _frac(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def _divergence(name: str, d: dict | None) -> str:
    if d is None:
        return f"{name}: no milestone (role, op, work item, K index) on both sides"
    what = f"{d['role']} {d['op']} of work item {d['work_item']}, K {d['k_index']}"
    if not d["diverged"]:
        return (f"{name}: none beyond {d['tolerance_ns']:.0f} ns over {d['matched']} matched milestones (largest "
                f"offset {d['offset_ns']:+.0f} ns at {what})")
    return (f"{name}: {what}: measured {d['offset_ns']:+.0f} ns ({d['offset_pct']:+.0f}% of an iteration) "
            f"off the prediction, {d['matched']} milestones matched")


def render(r: dict) -> str:
    """The comparison as the lines `lapis compare --measured` prints."""
    sm = r["sampling"]
    lines = [f"{r['schedule_arg']} at {r['shape']} on {r['gpu']} against {r['measured_file']}"
             + (f" ({r['kernel']})" if r["kernel"] else ""),
             f"sampled {sm['ctas_sampled']} of {sm['grid_ctas']} CTAs (every {sm['cta_every']} from "
             f"{sm['cta_first']}, mask {sm['cta_mask']:#x}), every {sm['iter_every']} K iteration(s); compared: "
             f"CTA {r['cta']} on SM {r['sm']}",
             f"total time: predicted {r['predicted_us']:.1f} µs, measured {r['measured_us']:.1f} µs "
             f"({r['measured_total']}): error {_pct(r['total_err_pct'])}"]
    it = r["iteration_ns"]
    lines.append(f"steady-state K iteration: predicted {_ns(it['predicted'])}, measured {_ns(it['measured'])}: "
                 f"error {_pct(it['err_pct'])}")
    if r.get("time_base"):
        lines.append(f"measured times: {r['time_base']}")
    lines.append("per role, fractions of each run's span: busy (inside its ops), waiting (inside its waits only), "
                 "queued (for a unit another role holds; predicted only): predicted / measured; busy time "
                 "predicted / measured and its error" + (
                     f" (measured: the recorded iterations only, 1 in {sm['iter_every']})" if sm["iter_every"] > 1
                     else ""))
    width = max((len(x) for x in r["roles"]), default=4)
    lines.append(f"  {'role':<{width}}  busy         waiting      queued  busy time")
    lines += [f"  {role:<{width}}  {_frac(v['busy_predicted']):>4} / {_frac(v['busy_measured']):>4}  "
              f"{_frac(v['waiting_predicted']):>4} / {_frac(v['waiting_measured']):>4}  "
              f"{_frac(v['queued_predicted']):>6}  {_ns(v['busy_ns_predicted'])} / {_ns(v['busy_ns_measured'])} "
              f"({_pct(v['busy_ns_err_pct'])})" + (" not recorded" if "not_recorded" in v else "")
              for role, v in r["roles"].items()]
    lines += [f"  not recorded: {role}: {why}" for role, why in r.get("not_recorded", {}).items()]
    lines.append(_divergence("first divergence", r["first_divergence"]))
    lines.append(_divergence("steady-state divergence", r["steady_divergence"]))
    return "\n".join(lines)
