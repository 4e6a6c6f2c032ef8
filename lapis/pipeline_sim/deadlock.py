"""Deadlock detection: simpy stops when no event is left, even if processes still wait.

Every role (a process of `processes`) still alive when the run ends is deadlocked, and the report says what
it waits on:
- an mbarrier: it waits for the barrier's declared arrivers that have not arrived in the current phase;
- a named barrier (named_barrier.py, `bar.sync`): for the declared arrivers not arrived in the barrier's
  current use; the report names the barrier id, the threads arrived of the count, and those roles;
- a simpy.Resource (a unit, e.g. the tensor pipe): for the processes that hold it;
- a simpy.Store (a queue of messages): for a put (or a get) that never comes;
- an mbarrier it polls with `try_wait` and `env.timeout` back-off: `drive` stops such a run once only the
  pollers' timeouts are pending and no barrier changed state for `stall_ns` simulated ns (otherwise the run
  would never end), and the poller is reported as waiting on the barrier it polls.
The report names the cycle of waits, role -> what it waits on -> the role that would release it (networkx
finds the cycle; a chain that ends in a finished role is reported as such), then the cause where the barriers'
state shows it: a missing arrival (the role that never arrived and the counts), a count mismatch (an
mbarrier initialised with more arrivals than its declared roles make per phase), transaction bytes that never
landed, a waiter whose phase parity is ahead of what its finished arrivers made (a wrong parity formula), a
producer and a consumer of one TMA ring waiting at different slots (a phase or index reset by one side), or an
mbarrier initialised with fewer arrivals than its declared roles make (a count below the arrivers). The report
ends with the pending arrivals and outstanding transaction bytes of each mbarrier left mid-phase.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
import simpy

from simpy.core import EmptySchedule
from simpy.resources.base import Put
from simpy.resources.store import StoreGet, StorePut

from lapis.errors import ScheduleError
from lapis.pipeline_sim.mbarrier import failed_pollers
from lapis.pipeline_sim.watchdog import Stalled, Watchdog, stall_seconds

STALL_NS = 1_000_000  # simulated ns with only polling timeouts pending and no barrier change: a stall
CHECK_EVERY = 4096  # events processed between two stall checks
IDLE_STEPS = 2_000_000  # simpy events in a row with no op recorded: roles that loop without doing work
MAX_STATES = 8  # mbarrier state lines in one deadlock report


@dataclass
class Deadlock(Exception):
    """Raised by run_checked; `cycle` lists (role, what it waits on, arriver) hops; `causes` what the barriers'
    state shows went wrong (a missing arrival, a count mismatch, a parity ahead of the arrivers, ...);
    `barriers` the pending arrivals and outstanding transaction bytes of each mbarrier a role waits on whose
    phase has partly arrived or has bytes outstanding (at most MAX_STATES, then a count)."""

    cycle: list
    finished: list
    causes: list = field(default_factory=list)
    barriers: list = field(default_factory=list)  # state lines of the mbarriers left mid-phase (MBarrier.state)

    def __str__(self) -> str:
        hops = " -> ".join(f"{r} waits on {w} for {a}" for r, w, a in self.cycle)
        tail = f"; finished roles that never arrive: {', '.join(self.finished)}" if self.finished else ""
        state = f"; mbarrier state: {'; '.join(self.barriers)}" if self.barriers else ""
        return f"deadlock: {hops}{tail}" + "".join(f"; cause: {c}" for c in self.causes) + state


def drive(env, barriers, processes, stall_ns: float = STALL_NS, on_check=None, recorded=None,
          idle_steps: int = IDLE_STEPS, stall_s: float | None = None) -> bool:
    """env.run(), stopped early when the roles only poll: True when stopped so (a stall), False when no event
    was left. barriers() and processes() give the live lists (a schedule adds them as its CTAs start);
    on_check(): called every CHECK_EVERY events (a progress display); recorded(): the ops recorded so far --
    idle_steps simpy events in a row without a new one (roles that yield in a loop and record nothing, which the
    event bound cannot see) end the run with a ScheduleError. stall_s: the wall-clock watchdog's limit
    (lapis.pipeline_sim.watchdog.stall_seconds): a role that runs that long without yielding ends the run with a
    ScheduleError naming it."""
    dog = Watchdog(stall_seconds(stall_s), lambda: _scheduled(env), lambda: _role_name(env, processes))
    try:
        with dog:
            return _drive(env, barriers, stall_ns, on_check, recorded, idle_steps)
    except (KeyboardInterrupt, Stalled):
        if dog.fired is None:
            raise  # the user's Ctrl-C
        raise dog.error(env.now) from None


def _scheduled(env) -> str:
    """How many events simpy has scheduled so far, as the repr of its id counter (Environment._eid,
    itertools.count: "count(N)"), read without advancing it. Every event a role yields or triggers moves it; a
    role spinning in Python moves nothing. Read from the watchdog's thread."""
    return repr(env._eid)


def _role_name(env, processes) -> str | None:
    """The role simpy is running now (its key in processes(), else the process's own name), None between roles."""
    proc = env.active_process
    if proc is None:
        return None
    return next((name for name, p in processes().items() if p is proc), getattr(proc, "name", repr(proc)))


def _drive(env, barriers, stall_ns, on_check, recorded, idle_steps) -> bool:
    step, since, state = env.step, None, None
    last, idle = None, 0
    try:
        while True:
            for _ in range(CHECK_EVERY):
                step()
            if on_check is not None:
                on_check()
            if recorded is not None:
                n = recorded()
                idle = idle + CHECK_EVERY if n == last else 0
                last = n
                if idle >= idle_steps:
                    raise ScheduleError("a run makes progress: its roles record ops as they go",
                                        f"{idle:,} simulator events in a row at t = {env.now:,.0f} ns with no op "
                                        "recorded (a role that loops on timeouts or yields without working)",
                                        "end the role's loop, or record its work with ctx.record / ctx.occupy")
            if not _only_polls_pending(env):
                since = None
                continue
            now_state = _barrier_state(barriers())
            if since is None or now_state != state:
                since, state = env.now, now_state
            elif env.now - since >= stall_ns:
                return True
    except EmptySchedule:
        return False


def _only_polls_pending(env) -> bool:
    """Is every pending event a timeout that resumes a process whose latest try_wait failed? (simpy keeps its
    queue in Environment._queue: (time, priority, id, event) entries.)"""
    pollers = failed_pollers(env)
    if not pollers:
        return False
    for *_, ev in env._queue:
        if not isinstance(ev, simpy.Timeout) or not ev.callbacks:
            return False
        if any(getattr(cb, "__self__", None) not in pollers for cb in ev.callbacks):
            return False
    return True


def _barrier_state(barriers) -> tuple:
    return tuple((getattr(b, "phase", None), getattr(b, "pending", None), getattr(b, "tx", None),
                  getattr(b, "generation", None), getattr(b, "arrived", None)) for b in barriers)


def run_checked(env, barriers, processes: dict, stall_ns: float = STALL_NS) -> None:
    """Run `env` (drive); raise Deadlock if a role is left alive when no event remains or the roles only poll."""
    drive(env, lambda: barriers, lambda: processes, stall_ns)
    check(barriers, processes)


def check(barriers, processes: dict) -> None:
    """After the run: raise Deadlock if one of `processes` (role -> simpy process) is still alive."""
    alive = {name for name, p in processes.items() if p.is_alive}
    finished = {name for name, p in processes.items() if not p.is_alive}
    if alive:
        raise find_deadlock(barriers, alive, finished, processes)


def find_deadlock(barriers, alive: set, finished: set, processes: dict | None = None) -> Deadlock | None:
    """None if no role is alive; otherwise the cycle of waits (or the chain that ends in a finished role) and
    the causes the barriers' state shows."""
    g = wait_for_graph(barriers, alive, processes or {})
    if not alive:
        return None
    waiting = sorted(n for n in g if g.out_degree(n)) or sorted(alive)
    try:
        edges = nx.find_cycle(g, source=waiting)
    except nx.NetworkXNoCycle:
        edges = list(nx.dfs_edges(g, waiting[0]))[:8]
    hops = [(u, g.edges[u, v]["what"], v) for u, v, *_ in edges] or [(r, "nothing (alive, no wait known)", "?")
                                                                    for r in sorted(alive)]
    blocked = [g.edges[u, v]["barrier"] for u, v, *_ in edges if g.edges[u, v].get("barrier") is not None]
    return Deadlock(hops, sorted({a for _, _, a in hops if a in finished}),
                    causes(blocked, finished, processes or {}, barriers), barrier_states(barriers))


def barrier_states(barriers) -> list[str]:
    """MBarrier.state of each mbarrier that is waited on (or polled) while its phase has partly arrived or has
    transaction bytes outstanding (an untouched phase says nothing): what a hang leaves pending."""
    out = [b.state() for b in barriers if hasattr(b, "state") and (b.waiters or _failed_polls(b))
           and (b.pending != b.count or b.tx != 0)]
    return out[:MAX_STATES] + ([f"and {len(out) - MAX_STATES} more"] if len(out) > MAX_STATES else [])


def _failed_polls(b) -> bool:
    return any(not passed for _, _, _, passed in b.polls.values())


def wait_for_graph(barriers, alive: set, processes: dict | None = None) -> nx.DiGraph:
    """Edges role -> the role that would release it, labelled `what` (barrier and phase, named-barrier state,
    resource or store) and `barrier` (the barrier, where it is one)."""
    g = nx.DiGraph()
    covered = set()
    for b in barriers:
        for role, a, what, proc in _edges(b):
            g.add_edge(role, a, what=what, barrier=b)
            covered.add(proc)
    names = {p: n for n, p in (processes or {}).items()}
    for name in sorted(alive):
        proc = (processes or {}).get(name)
        if proc is not None and proc not in covered:
            for a, what in _other_wait(proc, names):
                g.add_edge(name, a, what=what)
    g.add_nodes_from(alive)
    return g


def _edges(b):
    """(waiting role, arriver, what it waits on, waiting process) for every waiter and stalled poller of `b`."""
    if hasattr(b, "bar_id"):  # a named barrier: only the declared roles not yet arrived can release it
        missing = b.missing()
        what = f"{b.describe()}, never arrived: {', '.join(missing) or 'none of the declared roles'}"
        return [(w.role, a, what, w.proc) for w in b.waiters for a in missing or ("(no declared arriver left)",)]
    waits = [(w.role, w.proc, f"{b.name} (phase {b.phase})") for w in b.waiters]
    waits += [(role, proc, f"{b.name} (phase {b.phase}, polled with try_wait.parity({parity}))")
              for proc, (role, parity, _, passed) in b.polls.items()
              if not passed and proc is not None and proc.is_alive and isinstance(proc.target, simpy.Timeout)]
    missing = [a for a in b.arrivers if a not in b.arrived_roles] or list(b.arrivers)
    return [(role, a, what, proc) for role, proc, what in waits for a in missing or ("(no declared arriver)",)]


def _other_wait(proc, names: dict) -> list:
    """(releasing role, what) for a process that waits on no barrier: a resource, a store or a bare event."""
    ev = proc.target
    if isinstance(ev, StoreGet):
        return [("(no put)", f"a simpy.Store get ({len(ev.resource.items)} items; nothing is put)")]
    if isinstance(ev, StorePut):
        return [("(no get)", f"a simpy.Store put (full at {ev.resource.capacity} items; nothing is taken)")]
    if isinstance(ev, Put) and hasattr(ev.resource, "users"):
        res = ev.resource
        unit = getattr(res, "name", "simpy.Resource")
        holders = [names.get(u.proc, "(an operation of no role)") for u in res.users] or ["(no holder)"]
        return [(h, f"{unit} (a simpy.Resource of capacity {res.capacity}, held by {', '.join(holders)})")
                for h in holders]
    if isinstance(ev, simpy.Timeout):
        return [("(stopped)", "a timeout (the run was stopped as stalled)")]
    return [("(nobody)", f"a {type(ev).__name__} nobody triggers")]


def causes(blocked, finished: set, processes: dict, barriers=()) -> list[str]:
    """What the state of the barriers the cycle waits on shows went wrong, one sentence per barrier (and one
    for a TMA ring whose consumer skipped ahead or whose producer and consumer wait at different slots).
    barriers: every barrier of the run (a ring's full barrier is compared with its empty one)."""
    out = []
    for b in {id(b): b for b in blocked}.values():  # barriers are dataclasses (unhashable): dedupe by id
        if hasattr(b, "bar_id"):
            continue  # the named barrier's own description names the counts and the roles
        out.append(_mbarrier_cause(b, finished, processes))
    out += [_skip_cause(b, barriers) for b in {id(b): b for b in blocked}.values()
            if getattr(b, "ring", None) and b.ring[1] == "full"]
    rings = {}
    for b in blocked:
        if getattr(b, "ring", None):
            name, kind, slot = b.ring
            rings.setdefault(name, {}).setdefault(kind, set()).add(slot)
    under = [b for b in barriers if not hasattr(b, "bar_id") and len(set(getattr(b, "arrivers", ()))) > b.count]
    out += [f"count mismatch: {b.name} (init count {b.count}) has {len(set(b.arrivers))} declared arrivers "
            f"({', '.join(b.arrivers)}): each phase completes on the first {b.count} arrival(s) and the rest "
            "complete later phases early, so the roles fall out of step" for b in under[:2]]
    for name, kinds in sorted(rings.items()):
        if "full" in kinds and "empty" in kinds and kinds["full"] != kinds["empty"]:
            out.append(f"ring {name}: the producer waits at slot(s) {sorted(kinds['empty'])} and the consumer at "
                       f"slot(s) {sorted(kinds['full'])}; in a consistent ring both wait at the same slot, so one "
                       "side reset or skipped its PipelineState (a phase reset, or a parity formula that does not "
                       "follow the ring)")
    return [c for c in out if c]


def _mbarrier_cause(b, finished: set, processes: dict) -> str:
    arrived = b.count - b.pending
    head = f"{b.name} (init count {b.count}) has {arrived} of {b.count} arrivals in phase {b.phase}"
    if b.pending <= 0 and b.tx > 0:
        return (f"{head} but {b.tx} B of its expected transaction bytes never landed (expect_tx above the bytes "
                "delivered)")
    missing = [a for a in b.arrivers if a not in b.arrived_roles]
    if not missing:
        return (f"{head}: count mismatch, its declared arrivers ({', '.join(b.arrivers) or 'none'}) make "
                f"{len(b.arrived_roles)} arrival(s) per phase, fewer than the count {b.count}")
    done = [a for a in missing if a in finished or any(n.endswith(f"/{a}") for n in finished)]
    never = [a for a in done if not b.arrivals_by_role.get(a)]
    ahead = [a for a in done if b.arrivals_by_role.get(a)]
    parts = [f"{head}; never arrived: {', '.join(missing)}"]
    if never:
        parts.append(f"{', '.join(never)} finished without ever arriving on {b.name} (its arrive is missing)")
    if ahead:
        parts.append(f"{', '.join(ahead)} finished after {sum(b.arrivals_by_role[a] for a in ahead)} arrival(s) "
                     f"({b.phase} phase(s) completed): the waiter waits for a phase that never comes, its phase "
                     "parity is ahead of the arrivers (a wrong parity formula, e.g. a state starting at phase 1, "
                     "or a phase flipped without a token)")
    return "; ".join(parts)


def _skip_cause(full, barriers) -> str:
    """A consumer of a TMA ring that waits on slot j's full barrier for a later token than it released there.
    A consumer releases every earlier token of a slot before it waits for the slot's next one (it keeps fewer
    tokens in flight than the ring has slots), so waiting past a token it never released means its
    PipelineState skipped ahead."""
    name, _, slot = full.ring
    empty = next((b for b in barriers if getattr(b, "ring", None) == (name, "empty", slot)), None)
    if empty is None:
        return ""
    out = []
    for w in full.waiters:
        released = empty.arrivals_by_role.get(w.role, 0)
        if released < full.phase:
            out.append(f"ring {name}: {w.role} waits on {full.name} for the slot's token {full.phase + 1} (phase "
                       f"{full.phase}) but released only {released} of the {full.phase} token(s) that landed there: "
                       "its PipelineState skipped ahead (a phase reset, e.g. a state re-made per work item, or a "
                       "parity formula that does not follow the ring)")
    return "; ".join(out)
