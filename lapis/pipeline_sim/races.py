"""Races by happens-before over the barrier edges, independent of the simulated durations.

Every role records its operations in program order. A barrier arrival (or a TMA's completed bytes) is ordered
before the completion of that phase, and the completion before every wait that returns because of it. A buffer
slot written for one token and read for another (or written twice) must be ordered one way or the other along
these edges, and a token's write must come before its reads; a pair that is not is a race (e.g. a slot written
while a reader of the previous token is not ordered before the write, or a read that passed a barrier too early).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx


@dataclass(frozen=True)
class Race:
    buffer: str
    slot: int
    first: tuple  # (role, kind, token)
    second: tuple
    notes: tuple = field(default=(), compare=False)  # what the barriers saw: a wrong parity, a reset, a count

    def __str__(self) -> str:
        return (f"race on {self.buffer}[{self.slot}]: {self.first[0]} {self.first[1]}s token {self.first[2]} and "
                f"{self.second[0]} {self.second[1]}s token {self.second[2]} are not ordered by any barrier"
                f"{self.cause()}")

    def cause(self) -> str:
        """What the pair's kinds and tokens show, then the barriers' notes that name it (a wrong parity, a phase
        reset, a count mismatch): a read of a token unordered with that token's own write passed
        its wait before the bytes landed; a write unordered with an access of the slot's previous token refilled
        the slot before it was released."""
        seen = "".join(f"; {n}" for n in self.notes)
        kinds = {self.first[1], self.second[1]}
        if self.first[2] == self.second[2] and kinds == {"read", "write"}:
            return ("; cause: the read's wait passed before this token's bytes landed (a wait on a parity that "
                    "has already completed, e.g. a consumer state starting at phase 1, or a full barrier that "
                    "completed early)" + seen)
        if self.first[2] != self.second[2]:
            return ("; cause: the slot was refilled before every access of the previous token was released to the "
                    "writer (a release before the last read, or a write that does not wait on the empty barrier)"
                    + seen)
        return "; cause: " + "; ".join(self.notes) if self.notes else ""


class HappensBefore:
    """The ordering log. `clock` (a simpy env) stamps nodes with sim time, which bounds the reachability
    searches: every edge points forward in time, so a path from a to b never passes a node later than b."""

    def __init__(self, clock=None):
        self.g = nx.DiGraph()
        self.clock = clock
        self.last: dict = {}  # role -> its latest node
        self.accesses: list = []  # (node, role, buffer, slot, token, kind)
        self._n = 0
        # (kind, role, slot) -> first text: what the barriers saw (MBarrier._note_pass, _note_count)
        self.notes: dict = {}

    def note(self, kind: str, role: str, text: str, slot=None) -> None:
        """A barrier observation ('parity', 'reset' or 'count') on a ring slot's barrier (slot None: not a
        ring's), kept to explain races; the first per kind, role and slot is kept."""
        self.notes.setdefault((kind, role, slot), text)

    def explain(self, race: Race) -> Race:
        """`race` with the notes that explain it: for a read unordered with its own token's write, the reader's
        wrong-parity or reset notes; for accesses of different tokens, count mismatches and any role's reset.
        Notes on the race's own slot come first; at most two are kept."""
        same = race.first[2] == race.second[2]
        readers = {r[0] for r in (race.first, race.second) if r[1] == "read"}
        hits = [(slot != race.slot, t) for (kind, role, slot), t in self.notes.items()
                if (same and role in readers and kind in ("parity", "reset"))
                or (not same and kind in ("count", "reset"))]
        keep = [t for _, t in sorted(hits, key=lambda h: h[0])][:2]
        return Race(race.buffer, race.slot, race.first, race.second, tuple(keep))

    def op(self, role: str, label: str, after=None) -> int:
        """A node in `role`'s program order (and after `after`, e.g. the phase completion a wait observed)."""
        n = self._n
        self._n += 1
        self.g.add_node(n, role=role, label=label, t=self.clock.now if self.clock is not None else 0)
        if role in self.last:
            self.g.add_edge(self.last[role], n)
        if after is not None:
            self.g.add_edge(after, n)
        self.last[role] = n
        return n

    def edge(self, a: int, b: int) -> None:
        self.g.add_edge(a, b)

    def access(self, role: str, buffer: str, slot: int, token: int, kind: str, after=None) -> int:
        n = self.op(role, f"{kind} {buffer}[{slot}] token {token}", after)
        self.accesses.append((n, role, buffer, slot, token, kind))
        return n

    def races(self) -> list[Race]:
        """Unordered conflicting pairs. Per slot, a token's write must precede its reads, and each access of a
        token must be ordered with the conflicting accesses of the slot's next token (orders further apart
        follow by transitivity once every adjacent pair is ordered)."""
        out, by_slot = [], {}
        for acc in self.accesses:
            by_slot.setdefault((acc[2], acc[3]), {}).setdefault(acc[4], []).append(acc)
        for (buf, slot), tokens in sorted(by_slot.items()):
            groups = list(tokens.values())
            for i, accs in enumerate(groups):
                for w in (a for a in accs if a[5] == "write"):
                    for r in (a for a in accs if a[5] == "read" and not self._before(w[0], a[0])):
                        out.append(self.explain(Race(buf, slot, (r[1], r[5], r[4]), (w[1], w[5], w[4]))))
                for a in accs:
                    for b in (groups[i + 1] if i + 1 < len(groups) else ()):
                        if "write" in (a[5], b[5]) and not (self._before(a[0], b[0]) or self._before(b[0], a[0])):
                            out.append(self.explain(Race(buf, slot, (a[1], a[5], a[4]), (b[1], b[5], b[4]))))
        return out

    def _before(self, a: int, b: int) -> bool:
        """Is there a path a -> b? A search that never expands nodes later in time than b."""
        tb, seen, todo = self.g.nodes[b]["t"], {a}, [a]
        while todo:
            for n in self.g.successors(todo.pop()):
                if n == b:
                    return True
                if n not in seen and self.g.nodes[n]["t"] <= tb:
                    seen.add(n)
                    todo.append(n)
        return False
