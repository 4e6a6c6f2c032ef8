"""Races by happens-before over the barrier edges, independent of the simulated durations.

Every role records its operations in program order. A barrier arrival (or a TMA's completed bytes) is ordered
before the completion of that phase, and the completion before every wait that returns because of it. A buffer
slot written for one token and read for another (or written twice) must be ordered one way or the other along
these edges, and a token's write must come before its reads; a pair that is not is a race (e.g. a slot written
while a reader of the previous token is not ordered before the write, or a read that passed a barrier too early).
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx


@dataclass(frozen=True)
class Race:
    buffer: str
    slot: int
    first: tuple  # (role, kind, token)
    second: tuple

    def __str__(self) -> str:
        return (f"race on {self.buffer}[{self.slot}]: {self.first[0]} {self.first[1]}s token {self.first[2]} and "
                f"{self.second[0]} {self.second[1]}s token {self.second[2]} are not ordered by any barrier")


class HappensBefore:
    def __init__(self):
        self.g = nx.DiGraph()
        self.last: dict = {}  # role -> its latest node
        self.accesses: list = []  # (node, role, buffer, slot, token, kind)
        self._n = 0

    def op(self, role: str, label: str, after=None) -> int:
        """A node in `role`'s program order (and after `after`, e.g. the phase completion a wait observed)."""
        n = self._n
        self._n += 1
        self.g.add_node(n, role=role, label=label)
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
        out, by_slot = [], {}
        for acc in self.accesses:
            by_slot.setdefault((acc[2], acc[3]), []).append(acc)
        reach = {}
        for (buf, slot), accs in sorted(by_slot.items()):
            for i, a in enumerate(accs):
                for b in accs[i + 1:]:
                    if "write" not in (a[5], b[5]):
                        continue
                    if a[4] == b[4]:  # the same token: its write must come before its reads
                        w, r = (a, b) if a[5] == "write" else (b, a)
                        if r[5] == "read" and not self._before(w[0], r[0], reach):
                            out.append(Race(buf, slot, (r[1], r[5], r[4]), (w[1], w[5], w[4])))
                    elif not (self._before(a[0], b[0], reach) or self._before(b[0], a[0], reach)):
                        out.append(Race(buf, slot, (a[1], a[5], a[4]), (b[1], b[5], b[4])))
        return out

    def _before(self, a: int, b: int, cache: dict) -> bool:
        if a not in cache:
            cache[a] = nx.descendants(self.g, a)
        return b in cache[a]
