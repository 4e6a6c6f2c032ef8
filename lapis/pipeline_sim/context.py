"""What a role sees while it runs on one simulated SM: time, units, the recorder, the profile and the costs.

A role is a plain generator function, `def consumer(ctx, ...)`, that yields simpy events; it reads beside the
kernel's mainloop, one line per instruction that waits or issues. `Context` gives it:
- `env`, `now`: the simpy environment and its time (ns);
- `p`, `prm`, `flags`, `cost`: the hardware profile (lapis.model.profile), the run's resolved parameters, the
  schedule's variant flags, and the schedule's cost model (what each op takes, ns);
- `dims`: the problem shape as the schedule parsed it; `group`: the SM's work list (lapis.pipeline_sim.grid);
- `grid`: the load bandwidth share of the SM (B/ns);
- `units`: the SM's shared hardware units (simpy Resources) and `busy`, their busy time (ns) per unit;
- `rec`: the timeline (lapis.pipeline_sim.recorder); `hb`: the happens-before log when races are checked.
Recording: `waited` records a wait that took time, `occupy` holds a unit for an op, `record` logs an op.
Barriers: `pipeline` makes a TMA pipeline, `barrier` an mbarrier, `named_barrier` a bar.sync barrier; each is
declared to the deadlock check. Roles started with `spawn` are checked for deadlock at the end of the run.
"""

from __future__ import annotations

import types

import simpy

from lapis.pipeline_sim.mbarrier import MBarrier
from lapis.pipeline_sim.named_barrier import NamedBarrier
from lapis.pipeline_sim.pipeline import TmaPipeline
from lapis.pipeline_sim.races import HappensBefore
from lapis.pipeline_sim.units import occupy


class Context:
    """One SM of a run. `units`: the SM's shared resources, each a simpy Resource of capacity 1; `busy`: the
    units whose busy time (ns) the run reports, in the order utilization lists them (a unit that is not a
    Resource, e.g. the softmax side of a contended SM, is only counted)."""

    def __init__(self, env, rec, grid, group, p, prm: dict, cost, dims=(), flags=None, hb=None,
                 units=("tensor", "tma"), busy=None, check_races: bool = False):
        self.env, self.rec, self.grid, self.group = env, rec, grid, group
        self.p, self.prm, self.cost, self.dims, self.flags = p, prm, cost, dims, flags or {}
        self.hb, self.check_races = hb, check_races
        self.units = {u: _unit(env, u) for u in units}
        self.busy = {u: 0.0 for u in (busy or units)}
        self.barriers: list = []
        self.processes: dict = {}
        self.race_logs: list = [hb] if hb is not None else []

    @property
    def now(self) -> float:
        return self.env.now

    def spawn(self, role: str, gen):
        """Start `gen` as role `role`'s process (checked for deadlock at the end of the run)."""
        proc = self.env.process(gen)
        self.processes[role] = proc
        return proc

    def child(self, gen):
        """Start an asynchronous operation (a TMA copy, a wgmma on the pipe) that no deadlock check follows."""
        return self.env.process(gen)

    def waited(self, role: str, op: str, event, flow=None, **kw):
        """Wait for `event`; if that took time, record the wait as `op` (kind "wait") from when it began.
        event: a simpy event, or a generator of them (a wait of several steps recorded as one, e.g.
        cp.async.wait_group then __syncthreads). flow: a function giving the id of the event that released the
        wait, called once it has (a flow arrow)."""
        t0 = self.env.now
        if isinstance(event, types.GeneratorType):
            yield from event
        else:
            yield event
        if self.env.now > t0:
            self.rec.add(role, op, t0, kind="wait", **({"flow_from": flow()} if flow else {}), **kw)

    def occupy(self, unit: str, ns, role: str, op: str, **kw):
        """Hold `unit` for `ns` ns (or ns() evaluated when granted), recording the queueing and the op."""
        yield from occupy(self.env, self.rec, self.units[unit], ns, self.busy, unit, role, op, **kw)

    def record(self, role: str, op: str, start: float, **kw):
        """Log an op of `role` from `start` to now (ns)."""
        return self.rec.add(role, op, start, **kw)

    def race_log(self) -> HappensBefore | None:
        """A fresh happens-before log (one per CTA slot, say) when races are checked, else None."""
        if not self.check_races:
            return None
        hb = HappensBefore(self.env)
        self.race_logs.append(hb)
        return hb

    def pipeline(self, name: str, stages: int, producer: str, consumers: tuple, tx_bytes: int, tma=None,
                 buffer: str | None = None, hb=...) -> TmaPipeline:
        """A TMA pipeline (lapis.pipeline_sim.pipeline) whose copies `tma` delivers; its barriers are declared.
        hb: the race log it records into (default: the context's)."""
        pipe = TmaPipeline(self.env, name, stages, producer, consumers, tx_bytes, buffer=buffer, tma=tma,
                           hb=self.hb if hb is ... else hb, last_event=self.rec.last_id)
        self.barriers.extend(pipe.barriers)
        return pipe

    def barrier(self, name: str, count: int, arrivers: tuple, hb=...) -> MBarrier:
        """An mbarrier of `count` arrivals per phase, declared to the deadlock check."""
        b = MBarrier(self.env, name, count, tuple(arrivers), hb=self.hb if hb is ... else hb)
        self.barriers.append(b)
        return b

    def named_barrier(self, name: str, bar_id: int, threads: int, arrivers: dict) -> NamedBarrier:
        """Named barrier `bar_id` completing at `threads` threads (bar.sync / bar.arrive), declared."""
        b = NamedBarrier(self.env, name, bar_id, threads, arrivers)
        self.barriers.append(b)
        return b


def _unit(env, name: str) -> simpy.Resource:
    """A unit of capacity 1, named so that a deadlock report can say which unit a role is stuck on."""
    res = simpy.Resource(env, 1)
    res.name = name
    return res
