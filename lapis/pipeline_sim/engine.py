"""Run a Schedule: one simpy environment, the SMs' work lists, one Context per SM simulated, the checks.

lapis.pipeline_sim.simulate.simulate calls `run` after checking the name, parameters and shape; run returns the
raw outcome (simulated time in ns, FLOPs, the representative SM's events, unit busy times, races, the grid).
"""

from __future__ import annotations

import simpy

from lapis.pipeline_sim.context import Context
from lapis.pipeline_sim.grid import grid_summary, run_sms
from lapis.pipeline_sim.races import HappensBefore


def run(s, p, dims: tuple, params: dict, check_races: bool = False, full: bool = False, cut=None) -> dict:
    """Simulate Schedule `s` on profile `p` at `dims`: the representative SM, or every SM when `full`.
    cut(per_sm, cost) -> per_sm: shortens the work lists before the run (lapis.sweep.fast's short runs).
    Raises what the schedule's checks raise (lapis.errors.ScheduleError) and deadlock.Deadlock on a hang."""
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

    sm_run = run_sms(env, p, per_sm, full, build, cost=s.work_cost)
    rep = sm_run.slowest
    if s.sm_fit is not None:
        fit = s.sm_fit(fit, rep.work)
    return dict(env_ns=env.now, flops=s.flops(dims, prm), events=sm_run.recorders[rep.sm].events, params=prm,
                fit=fit, races=_races(contexts) if check_races else None, units=sm_run.busy[rep.sm],
                work=s.summary(dealt, rep, dims, prm, cost), grid=grid_summary(sm_run, env.now))


def _races(contexts) -> list:
    """Unordered accesses of every race log (each once), then every barrier's own race reports."""
    logs = {id(h): h for c in contexts for h in c.race_logs}
    return [r for h in logs.values() for r in h.races()] + [r for c in contexts for b in c.barriers
                                                           for r in getattr(b, "races", ())]
