"""Run a Schedule: one simpy environment, the SMs' work lists, one Context per SM simulated, the checks.

lapis.pipeline_sim.simulate.simulate calls `run` after checking the name, parameters and shape; run returns the
raw outcome (simulated time in ns, FLOPs, the representative SM's events, unit busy times, races, the grid).
"""

from __future__ import annotations

import math

import simpy

from lapis.pipeline_sim import recorder
from lapis.pipeline_sim.context import Context
from lapis.pipeline_sim.grid import grid_summary, group_sms, run_sms
from lapis.pipeline_sim.work_order import fullest
from lapis.pipeline_sim.races import HappensBefore
from lapis.pipeline_sim.recorder import EventBudget


def run(s, p, dims: tuple, params: dict, check_races: bool = False, full: bool = False, cut=None,
        max_events: int | None = None, progress=None, stall_s: float | None = None) -> dict:
    """Simulate Schedule `s` on profile `p` at `dims`: the representative SM, or every SM when `full`
    (`events_total`: the events recorded over every SM simulated).
    cut(per_sm, cost) -> per_sm: shortens the work lists before the run (lapis.sweep.fast's short runs).
    max_events: the bound on the events of the run, over every SM simulated (default recorder.MAX_EVENTS, or
    recorder.MAX_FULL_EVENTS when full); progress(events so far): called every few thousand simpy events;
    stall_s: the wall-clock watchdog's limit in seconds (lapis.pipeline_sim.watchdog; None: $LAPIS_STALL_S or 60).
    Raises what the schedule's checks raise (lapis.errors.ScheduleError, also past the event bound) and
    deadlock.Deadlock on a hang."""
    prm, fit = s.resolve(p, dims, dict(params))
    dealt = s.work(p, dims, prm)
    per_sm = dealt if cut is None else cut(dealt, s.work_cost)
    cost = s.costs(p, dims, prm, s.flags)
    env = simpy.Environment()
    hb = HappensBefore(env) if check_races and s.races == "run" else None
    contexts = []

    def build(rec, grid, group):
        ctx = Context(env, rec, grid, group, p, prm, cost, dims, s.flags, hb, s.units, s.busy, check_races)
        contexts.append(ctx)
        s.launch(ctx)
        return ctx.processes, ctx.barriers, ctx.busy

    budget = event_budget(full, max_events)
    sm_run = run_sms(env, p, per_sm, full, build, cost=s.work_cost, budget=budget,
                     on_check=None if progress is None else lambda: progress(budget.count), stall_s=stall_s)
    rep = sm_run.slowest
    if s.sm_fit is not None:
        fit = s.sm_fit(fit, rep.work)
    return dict(env_ns=env.now, flops=s.flops(dims, prm), events=sm_run.recorders[rep.sm].events, params=prm,
                fit=fit, races=_races(contexts) if check_races else None, units=sm_run.busy[rep.sm],
                work=s.summary(dealt, rep, dims, prm, cost), grid=grid_summary(sm_run, env.now),
                events_total=budget.count)


def _races(contexts) -> list:
    """Unordered accesses of every race log (each once), then every barrier's own race reports."""
    logs = {id(h): h for c in contexts for h in c.race_logs}
    return [r for h in logs.values() for r in h.races()] + [r for c in contexts for b in c.barriers
                                                           for r in getattr(b, "races", ())]


def event_budget(full: bool, max_events: int | None) -> EventBudget:
    """The run's event bound: max_events, else recorder.MAX_FULL_EVENTS over every SM (full) or
    recorder.MAX_EVENTS on the representative SM (read at call time, so a caller may lower them)."""
    if full:
        return EventBudget(max_events or recorder.MAX_FULL_EVENTS, "in the whole run (every SM simulated)")
    return EventBudget(max_events or recorder.MAX_EVENTS, "on the representative SM")


def estimate_events(s, p, dims: tuple, params: dict) -> int:
    """The events a full run records (every distinct work list once, lapis.pipeline_sim.grid), from a pilot:
    the costliest work item of the representative SM's list run alone, its events scaled by the work cost
    (s.work_cost: tiles, K/V tiles) of every distinct list over the item's. Raises what run raises."""
    prm, _ = s.resolve(p, dims, dict(params))
    dealt = s.work(p, dims, prm)
    rep = fullest(dealt, s.work_cost)
    if not rep:
        return 0
    item = max(rep, key=lambda it: s.work_cost([it]))
    pilot = run(s, p, dims, params, cut=lambda per_sm, cost: [[item]])
    total_cost = sum(s.work_cost(g.work) for g in group_sms(dealt))
    return math.ceil(len(pilot["events"]) * total_cost / max(s.work_cost([item]), 1))
