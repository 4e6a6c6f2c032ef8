"""Deadlock detection: simpy stops when no event is left, even if processes still wait.

After a run, every role still waiting on an mbarrier is a node; it waits for the
barrier's declared arrivers. A role that waits and whose arrivers are themselves
waiting (or finished) can never be released. The report names the cycle of waits:
role -> barrier -> phase awaited -> declared arriver that never arrives (networkx
finds the cycle; a chain that ends in a finished role is reported as such).

Named barriers (named_barrier.py) are waited on by `bar.sync`; a role stuck there waits for the declared
arrivers that have not arrived in the barrier's current use, and the report names the barrier id, the threads
arrived of the count, and those roles.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx


@dataclass
class Deadlock(Exception):
    """Raised by run_checked; `cycle` lists (role, what it waits on, arriver) hops."""

    cycle: list
    finished: list

    def __str__(self) -> str:
        hops = " -> ".join(f"{r} waits on {w} for {a}" for r, w, a in self.cycle)
        tail = f"; finished roles that never arrive: {', '.join(self.finished)}" if self.finished else ""
        return f"deadlock: {hops}{tail}"


def _edges(b):
    """(waiting role, arriver, what it waits on) for every waiter of barrier `b`."""
    if hasattr(b, "missing"):  # a named barrier: only the declared roles not yet arrived can release it
        missing = b.missing()
        what = f"{b.describe()}, never arrived: {', '.join(missing) or 'none of the declared roles'}"
        return [(w.role, a, what) for w in b.waiters for a in missing or ("(no declared arriver left)",)]
    return [(w.role, a, f"{b.name} (phase {b.phase})") for w in b.waiters
            for a in b.arrivers or ("(no declared arriver)",)]


def wait_for_graph(barriers, alive: set) -> nx.DiGraph:
    """Edges role -> arriver, labelled with what the role waits on (barrier and phase, or named-barrier state)."""
    g = nx.DiGraph()
    for b in barriers:
        for role, a, what in _edges(b):
            g.add_edge(role, a, what=what)
    g.add_nodes_from(alive)
    return g


def find_deadlock(barriers, alive: set, finished: set) -> Deadlock | None:
    """None if nobody waits; otherwise the cycle of waits, or the chain that ends in a finished role."""
    g = wait_for_graph(barriers, alive)
    waiting = {w.role for b in barriers for w in b.waiters}
    if not waiting:
        return None
    try:
        edges = nx.find_cycle(g, source=sorted(waiting))
    except nx.NetworkXNoCycle:
        edges = list(nx.dfs_edges(g, sorted(waiting)[0]))[:8]
    hops = [(u, g.edges[u, v]["what"], v) for u, v, *_ in edges]
    return Deadlock(hops, sorted(a for _, _, a in hops if a in finished))


def run_checked(env, barriers, processes: dict) -> None:
    """env.run(); raise Deadlock if a role is left waiting when no event remains."""
    env.run()
    check(barriers, processes)


def check(barriers, processes: dict) -> None:
    """After env.run(): raise Deadlock if one of `processes` (role -> simpy process) is left waiting."""
    alive = {name for name, p in processes.items() if p.is_alive}
    finished = {name for name, p in processes.items() if not p.is_alive}
    if alive:
        dl = find_deadlock(barriers, alive, finished)
        if dl is not None:
            raise dl
