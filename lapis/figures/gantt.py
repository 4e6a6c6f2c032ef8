"""A Gantt chart of a simulated (or recorded) timeline, one lane per role, in the style of the FlashAttention-3
paper's pipelining figures.

Input: `lapis.pipeline_sim.recorder.Event`s, times in ns (as `simulate(...)["_events"]` returns them).
Output: a PNG whose x axis is in µs. Each role is one horizontal lane (producer/load roles on top, then the
consumers, then the "tma" unit); each op is a bar coloured by its op kind (lapis.figures.palette: the same
colour in every figure, predicted or measured); waits (events of kind "wait") are the light grey hatched
background of the lane. Ops that overlap inside one role (queued TMA loads, for example) are stacked as thinner
sub-rows of the lane, and the lane says so; an instant (zero-length) issue gets a marker above its lane.

The timeline is expected to be one SM's (the simulator records a representative SM). matplotlib is imported
inside the functions and the figure is a bare `matplotlib.figure.Figure` rendered by Agg: no pyplot, no
global backend change, and `import lapis` stays light.
"""

from __future__ import annotations

import re
from collections import defaultdict

from lapis.figures.palette import KIND_COLOURS, WAIT_COLOUR, op_colour, op_kind
from lapis.pipeline_sim.recorder import union_spans as _union

__all__ = ["gantt", "steady_state_window", "lane_order"]

WAIT_HATCH = "////"
LANE_HEIGHT = 0.8  # of the 1.0 a lane gets on the y axis
MAX_SUBROWS = 6  # more overlapping ops than this in one lane are drawn over the last sub-row
LEGEND_CHARS = 40  # op names listed in a legend entry, at most
MIN_BAR_FRACTION = 0.003  # zero-length ops (an instant issue) are drawn this fraction of the window wide (>= 2 px)


def _natural(text: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _group(role: str) -> int:
    r = role.lower()
    if r == "tma":
        return 2
    if r.startswith(("producer", "load", "prod")):
        return 0
    return 1


def lane_order(roles) -> list[str]:
    """Roles top to bottom: producer/load roles, then consumers (and any other role), then "tma"."""
    return sorted(set(roles), key=lambda r: (_group(r), _natural(r)))


def steady_state_window(events, iterations: int = 3) -> tuple[float, float]:
    """A window (t0_ns, t1_ns) in the middle of the run covering about `iterations` K iterations.

    The iterations are those of the work item in the middle of the run (by first start time) that has the
    most K indices; an iteration starts when a consumer (a role other than the producer/load roles and
    "tma") first works on that K index, since the producer runs ahead of the consumers by the ring depth.
    The window starts at the start of the middle `iterations` K indices and ends where the next one starts
    (or where the last chosen one ends). Without K-indexed events: the middle third of the run. Times in ns.
    """
    events = list(events)
    if not events:
        raise ValueError("no events")
    t_lo = min(e.start_ns for e in events)
    t_hi = max(e.end_ns for e in events)
    iterations = max(1, int(iterations))

    items: dict = defaultdict(list)
    for e in events:
        if e.k_index >= 0 and e.kind != "wait":
            items[(e.sm, e.cta, e.work_item)].append(e)
    if items:
        most = max(len({e.k_index for e in evs}) for evs in items.values())
        full = sorted((min(e.start_ns for e in evs), key) for key, evs in items.items()
                      if len({e.k_index for e in evs}) == most)
        evs = items[full[len(full) // 2][1]]
        workers = [e for e in evs if _group(e.role) == 1] or evs
        start: dict = {}
        end: dict = defaultdict(float)
        for e in workers:
            start[e.k_index] = min(start.get(e.k_index, e.start_ns), e.start_ns)
            end[e.k_index] = max(end[e.k_index], e.end_ns)
        ks = sorted(start)
        if len(ks) >= 2:
            i0 = max(0, (len(ks) - iterations) // 2)
            chosen = ks[i0:i0 + iterations]
            t0 = start[chosen[0]]
            t1 = start[ks[i0 + iterations]] if i0 + iterations < len(ks) else max(end[k] for k in chosen)
            if t1 > t0:
                return (t0, t1)
    third = (t_hi - t_lo) / 3
    return (t_lo + third, t_hi - third)


def _clip(events, window_ns):
    if window_ns is None:
        return [(e, e.start_ns, e.end_ns) for e in events]
    t0, t1 = window_ns
    if not t1 > t0:
        raise ValueError(f"window_ns must be (t0, t1) with t1 > t0, got {window_ns!r}")
    out = []
    for e in events:
        inside = (e.start_ns < t1 and e.end_ns > t0) if e.end_ns > e.start_ns else t0 <= e.start_ns <= t1
        if inside:
            out.append((e, max(e.start_ns, t0), min(e.end_ns, t1)))
    return out


def _pack(bars):
    """Greedy sub-rows for overlapping bars of one lane: [(sub_row, start, end, op)], and the row count."""
    ends: list[float] = []
    out = []
    for s, t, op in sorted(bars, key=lambda b: (b[0], b[1])):
        row = next((i for i, end in enumerate(ends) if end <= s), None)
        if row is None:
            if len(ends) < MAX_SUBROWS:
                ends.append(t)
                row = len(ends) - 1
            else:
                row = len(ends) - 1
                ends[row] = max(ends[row], t)
        else:
            ends[row] = t
        out.append((row, s, t, op))
    return out, max(1, len(ends))


def _legend_label(kind: str, names: list[str]) -> str:
    """"kind: name, name" (the bare kind when it is its only name); past LEGEND_CHARS, "kind: N ops (first, …)"."""
    if kind not in KIND_COLOURS:
        return f"{kind} (unmapped op name)"
    if names == [kind]:
        return kind
    text = ", ".join(names)
    if len(text) <= LEGEND_CHARS:
        return f"{kind}: {text}"
    first = names[0] if len(names[0]) <= 24 else names[0][:23] + "…"
    return f"{kind}: {len(names)} ops ({first}, …)"


def gantt(events, path=None, title: str = "", window_ns=None, lanes=None):
    """Draw `events` (times in ns) as a Gantt chart with one lane per role and save it as a PNG at `path`.

    window_ns: optional (t0_ns, t1_ns); events outside it are dropped and those crossing it are clipped
    (see `steady_state_window`). lanes: the roles top to bottom (default `lane_order`); every event's role
    must be one of them, else ValueError. The x axis is in µs (absolute time of the run). An op's colour is its
    kind's (`lapis.figures.palette.op_colour`: "wgmma" and "issue wgmma" alike), the same in every figure;
    the legend has one entry per kind, naming the ops it covers. Waits are light grey and hatched, behind the
    lane's ops (a role's overlapping waits merged into one span). Ops overlapping inside one lane are stacked
    in up to MAX_SUBROWS sub-rows, and the lane says so under its name ("(3 overlapping ops: sub-rows)", a Text
    whose gid is "subrows:ROLE"). A zero-length op (an instant issue) is a bar MIN_BAR_FRACTION of the window
    wide with a "v" marker above it (a collection whose gid is "instant:ROLE:OP"). Returns the Figure: its
    first Axes has one y tick per role and one `Rectangle` patch per bar, whose gid is "op:ROLE:OP" or
    "wait:ROLE".
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch, Rectangle

    events = list(events)
    if not events:
        raise ValueError("no events to draw")
    roles = lane_order(e.role for e in events) if lanes is None else list(lanes)
    if not {e.role for e in events} <= set(roles):
        raise ValueError(f"roles without a lane: {sorted({e.role for e in events} - set(roles))}")

    shown = _clip(events, window_ns)
    if window_ns is not None:
        x0, x1 = window_ns
    else:
        x0, x1 = min(e.start_ns for e in events), max(e.end_ns for e in events)
    min_w = (x1 - x0) * MIN_BAR_FRACTION

    fig = Figure(figsize=(12, 1.0 + 0.75 * len(roles)))
    FigureCanvasAgg(fig)  # render with Agg whatever pyplot's backend is
    ax = fig.add_subplot(1, 1, 1)
    used_ops, any_wait = [], False
    for lane, role in enumerate(roles):
        y = len(roles) - 1 - lane  # first role on top
        mine = [(e, s, t) for e, s, t in shown if e.role == role]
        waits = _union([(s, t) for e, s, t in mine if e.kind == "wait" and t > s])
        for s, t in waits:
            ax.add_patch(Rectangle((s / 1e3, y - LANE_HEIGHT / 2), (t - s) / 1e3, LANE_HEIGHT, facecolor=WAIT_COLOUR,
                                   edgecolor="#a0a0a0", hatch=WAIT_HATCH, linewidth=0.3, zorder=1, gid=f"wait:{role}"))
            any_wait = True
        bars, rows = _pack([(s, t, e.op) for e, s, t in mine if e.kind != "wait"])
        h = LANE_HEIGHT / rows
        instants: dict = defaultdict(list)
        for row, s, t, op in bars:
            ax.add_patch(Rectangle((s / 1e3, y + LANE_HEIGHT / 2 - (row + 1) * h), max(t - s, min_w) / 1e3, h,
                                   facecolor=op_colour(op), edgecolor="black", linewidth=0.3, zorder=2,
                                   gid=f"op:{role}:{op}"))
            used_ops.append(op)
            if t <= s:
                instants[op].append(s)
        for op, xs in instants.items():  # an instant issue: a marker above the lane, so it is seen at any zoom
            ax.scatter([(x + min_w / 2) / 1e3 for x in xs], [y + LANE_HEIGHT / 2 + 0.06] * len(xs), marker="v",
                       s=22, color=op_colour(op), edgecolors="black", linewidths=0.4, zorder=4, clip_on=False,
                       gid=f"instant:{role}:{op}")
        if rows > 1:
            ax.annotate(f"({rows}{'+' if rows == MAX_SUBROWS else ''} overlapping ops: sub-rows)", xy=(0, y),
                        xycoords=("axes fraction", "data"), xytext=(-6, -10), textcoords="offset points",
                        ha="right", va="center", fontsize=7, fontstyle="italic", color="0.25", gid=f"subrows:{role}")
    ax.set_yticks(range(len(roles)))
    ax.set_yticklabels(list(reversed(roles)))
    ax.set_ylim(-0.6, len(roles) - 0.4)
    ax.set_xlim(x0 / 1e3, (x1 + min_w) / 1e3)
    ax.set_xlabel("time (µs)")
    ax.grid(axis="x", linestyle=":", linewidth=0.5, zorder=0)
    ax.set_axisbelow(True)
    kinds: dict = {}
    for op in dict.fromkeys(used_ops):
        kinds.setdefault(op_kind(op), []).append(op)
    order = {k: i for i, k in enumerate(KIND_COLOURS)}
    handles = [Patch(facecolor=op_colour(names[0]), edgecolor="black", linewidth=0.3, label=_legend_label(k, names))
               for k, names in sorted(kinds.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))]
    if any_wait:
        handles.append(Patch(facecolor=WAIT_COLOUR, edgecolor="#a0a0a0", hatch=WAIT_HATCH, label="wait"))
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    span = "" if window_ns is None else f" (window {x0 / 1e3:.3f}–{x1 / 1e3:.3f} µs)"
    if title or span:
        ax.set_title(f"{title}{span}", fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
