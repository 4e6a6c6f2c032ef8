"""The grid: which work items each SM runs, and the load bandwidth the SMs share while they run.

Two modes (`lapis simulate` default and `--full`):
- representative: one SM, the one dealt the most work, is simulated; its load bandwidth is an equal share of
  the chip's among the SMs that start with work, for the whole run.
- full: every SM is simulated in one simpy environment; an SM's loads get an equal share among the SMs
  still running when the load is issued, so the last, partial wave (and a causal tail) runs on more
  bandwidth per SM. SMs dealt identical work lists see identical shares at every instant (the share is
  the only coupling between SMs in the model), so they evolve identically: each distinct work list is
  simulated once and stands for all its SMs (`multiplicity`). That is exact under the model, not a sample;
  tests check it against simulating every SM one by one.
"""

from __future__ import annotations

import gc
import itertools
from dataclasses import dataclass, field

from lapis.pipeline_sim import deadlock
from lapis.pipeline_sim.recorder import Recorder
from lapis.pipeline_sim.units import burst_share, load_share
from lapis.pipeline_sim.work_order import fullest


@dataclass
class SmGroup:
    """`multiplicity` SMs that run the same work list; `sms` are their indices (the first stands for all)."""

    work: tuple
    sms: list = field(default_factory=list)

    @property
    def multiplicity(self) -> int:
        return len(self.sms)

    @property
    def sm(self) -> int:
        return self.sms[0]


def group_sms(per_sm: list) -> list[SmGroup]:
    """Per-SM work lists -> groups of SMs with identical lists, ordered by first SM index (deterministic)."""
    groups: dict[tuple, SmGroup] = {}
    for sm, work in enumerate(per_sm):
        if work:
            groups.setdefault(tuple(work), SmGroup(tuple(work))).sms.append(sm)
    return sorted(groups.values(), key=lambda g: g.sm)


class Grid:
    """Load bandwidth per SM over time. `share(reuse)` in B/ns (lapis.pipeline_sim.units.load_share) for the
    SMs running now, `burst(reuse, duty)` when their load paths are busy only part of the time
    (lapis.pipeline_sim.units.burst_share); `finish(group)` when a group's SMs have no work left.

    static=True (representative mode): the share is fixed at the count of SMs that start with work."""

    def __init__(self, p, active: int, static: bool):
        self.p, self.static, self.running = p, static, active  # active: SMs that start with work
        self.finish_ns: dict[int, float] = {}

    def share(self, reuse: float) -> float:
        return load_share(self.p, max(self.running, 1), reuse)

    def burst(self, reuse: float, duty: float) -> float:
        """B/ns of one SM's load while the SMs running now each keep their load path busy `duty` of the time
        (lapis.pipeline_sim.units.burst_share); duty 1 is share(reuse)."""
        return burst_share(self.p, max(self.running, 1), reuse, duty)

    def finish(self, group: SmGroup, now: float) -> None:
        self.finish_ns[group.sm] = now
        if not self.static:
            self.running -= group.multiplicity


@dataclass
class GridRun:
    """The outcome of run_sms: the groups simulated, each group's recorder and unit busy times (ns), the SM
    finish times (ns, per group's first SM) and the slowest group (the kernel's time is its finish)."""

    groups: list
    recorders: dict
    busy: dict
    finish_ns: dict
    slowest: SmGroup


def run_sms(env, p, per_sm: list, full: bool, build, cost=len, on_check=None, budget=None,
            stall_s: float | None = None) -> GridRun:
    """Simulate the representative SM (full=False) or every SM (full=True) in `env`.

    per_sm: each SM's work list (any hashable items, in the order the SM runs them);
    build(rec, grid, group) -> (processes: dict role -> simpy process, barriers: list, busy: dict unit -> ns)
    spawns one SM's roles; cost ranks work lists for the representative choice; on_check() is called every few
    thousand events (a progress display); budget: the recorder.EventBudget the SMs' recorders share; stall_s: the
    wall-clock watchdog's limit (lapis.pipeline_sim.watchdog; None: $LAPIS_STALL_S or 60 s). The processes dict and the
    barrier list are read again after the run, so a schedule may add roles and barriers as its CTAs start.
    Raises deadlock.Deadlock when a role is left alive (roles are prefixed `smN/` in full mode), including a role
    that only polls a barrier that no longer changes (deadlock.drive)."""

    active = sum(1 for w in per_sm if w)
    if full:
        groups = group_sms(per_sm)
    else:
        rep = fullest(per_sm, cost)
        groups = [SmGroup(tuple(rep), [next(i for i, w in enumerate(per_sm) if w == rep)])] if rep else []
    grid = Grid(p, active, static=not full)
    built, recs, busy, ids = [], {}, {}, itertools.count()
    for g in groups:
        rec = recs[g.sm] = Recorder(env, sm=g.sm, ids=ids, budget=budget)
        pr, bars, busy[g.sm] = build(rec, grid, g)
        built.append((g, pr, bars))
        env.all_of(list(pr.values())).callbacks.append(lambda _, g=g: grid.finish(g, env.now))
    gc_was_on = gc.isenabled()
    gc.disable()  # a long run keeps millions of live events: collections would rescan them (a third of full mode)
    barriers = lambda: [b for _, _, bars in built for b in bars]  # noqa: E731 (read again as CTAs start)
    processes = lambda: {(f"sm{g.sm}/{r}" if full else r): x for g, pr, _ in built for r, x in pr.items()}  # noqa: E731
    try:
        deadlock.drive(env, barriers, processes, on_check=on_check,
                       recorded=(lambda: budget.count) if budget is not None else None, stall_s=stall_s)
    finally:
        if gc_was_on:
            gc.enable()
    deadlock.check(barriers(), processes())
    slowest = max(groups, key=lambda g: (grid.finish_ns.get(g.sm, env.now), -g.sm)) if groups else None
    return GridRun(groups, recs, busy, grid.finish_ns, slowest)


def grid_summary(run: GridRun, total_ns: float) -> dict:
    """SMs simulated, distinct work lists, and SM finish times in µs (min / median / max over every SM)."""
    times = sorted(t for g in run.groups for t in [run.finish_ns.get(g.sm, total_ns)] * g.multiplicity)
    mid = times[len(times) // 2] if times else 0.0
    return dict(sms_simulated=len(times), work_lists=len(run.groups), finish_us_min=times[0] / 1e3 if times else 0.0,
                finish_us_median=mid / 1e3, finish_us_max=times[-1] / 1e3 if times else 0.0)
