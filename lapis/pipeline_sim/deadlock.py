"""Deadlock detection: simpy stops when no event is left, even if processes still wait.

After a run, every role still waiting on an mbarrier is a node; it waits for the
barrier's declared arrivers. A role that waits and whose arrivers are themselves
waiting (or finished) can never be released. The report names the cycle of waits:
role -> barrier -> phase awaited -> declared arriver that never arrives (networkx
finds the cycle; a chain that ends in a finished role is reported as such).
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx


@dataclass
class Deadlock(Exception):
    """Raised by run_checked; `cycle` lists (role, barrier, phase awaited, arriver) hops."""

    cycle: list
    finished: list

    def __str__(self) -> str:
        hops = " -> ".join(f"{r} waits on {b} (phase {p}) for {a}" for r, b, p, a in self.cycle)
        tail = f"; finished roles that never arrive: {', '.join(self.finished)}" if self.finished else ""
        return f"deadlock: {hops}{tail}"


def wait_for_graph(barriers, alive: set) -> nx.DiGraph:
    """Edges role -> arriver, labelled with the barrier and phase the role waits for."""
    g = nx.DiGraph()
    for b in barriers:
        for w in b.waiters:
            for a in b.arrivers or ("(no declared arriver)",):
                g.add_edge(w.role, a, barrier=b.name, phase=b.phase)
    g.add_nodes_from(alive)
    return g


def find_deadlock(barriers, alive: set, finished: set) -> Deadlock | None:
    """None if nobody waits; otherwise the cycle of waits, or the chain that ends in a finished role."""
    g = wait_for_graph(barriers, alive)
    waiting = {w.role for b in barriers for w in b.waiters}
    if not waiting:
        return None
    try:
        cycle = nx.find_cycle(g, source=sorted(waiting))
        hops = [(u, g.edges[u, v]["barrier"], g.edges[u, v]["phase"], v) for u, v in cycle]
    except nx.NetworkXNoCycle:
        start = sorted(waiting)[0]
        hops = [(u, g.edges[u, v]["barrier"], g.edges[u, v]["phase"], v) for u, v in nx.dfs_edges(g, start)][:8]
    return Deadlock(hops, sorted(a for _, _, _, a in hops if a in finished))


def run_checked(env, barriers, processes: dict) -> None:
    """env.run(); raise Deadlock if a role is left waiting when no event remains."""
    env.run()
    alive = {name for name, p in processes.items() if p.is_alive}
    finished = {name for name, p in processes.items() if not p.is_alive}
    if alive:
        dl = find_deadlock(barriers, alive, finished)
        if dl is not None:
            raise dl
