"""Asynchronous operations completed through commit groups, not mbarriers, in simulated time (simpy).

Two PTX families share the semantics, per issuing thread (here per role: a warpgroup for wgmma, a warp for
cp.async):
- sm90 `wgmma.mma_async` ... `wgmma.commit_group` ... `wgmma.wait_group N` (PTX ISA
  "wgmma.commit_group", "wgmma.wait_group");
- `cp.async` ... `cp.async.commit_group` ... `cp.async.wait_group N` (PTX ISA "cp.async.commit_group",
  "cp.async.wait_group"), used by the mma.sync schedules.
`commit_group` closes the operations issued since the previous commit into one group (no operation: an empty
group, complete at once). `wait_group N` returns once at most N of the most recent groups are pending, i.e. once
every group but the newest N has completed (groups complete in commit order as far as the waiter can tell).
N = 0 waits for everything. Operations are simpy events (e.g. the process that holds the tensor pipe).
`single=True`: a group of one operation is that operation's own event, and a wait that leaves exactly one group to
wait for is a wait on that event itself, not on a simpy Condition over it: the waiter resumes in the simpy step
where the operation completes, and without a step when it already has (the mma.sync schedules of
lapis.pipeline_sim.schedules.attention_sm120 wait for their cp.async this way). Same simulated times either way;
only the order of same-time steps differs.
"""

from __future__ import annotations

from lapis.errors import ScheduleError


class CommitGroups:
    """The in-flight groups of one issuing role. `family` names the PTX instructions in messages."""

    family = "async"

    def __init__(self, env, role: str, single: bool = False):
        self.env, self.role, self.single = env, role, single
        self.open: list = []  # issued since the last commit
        self.groups: list = []  # committed, oldest first (completed ones are dropped on wait)

    def issue(self, op) -> None:
        """Track `op` (a simpy event or process) as issued by this role."""
        self.open.append(op)

    def commit(self) -> None:
        """`<family>.commit_group`."""
        self.groups.append(self.open[0] if self.single and len(self.open) == 1 else self.env.all_of(self.open))
        self.open = []

    def pending(self) -> int:
        """Committed groups not yet complete."""
        self.groups = [g for g in self.groups if not g.processed]
        return len(self.groups)

    def wait(self, n: int):
        """`<family>.wait_group n`: an event that triggers when at most n groups are pending.
        Raises ScheduleError for a negative n (PTX: an integer constant >= 0)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ScheduleError(f"{self.family}.wait_group takes a count of groups >= 0", n,
                                "wait_group 0 waits for every group; N leaves the newest N in flight",
                                f"PTX ISA {self.family}.wait_group")
        if not self.single:
            self.pending()
        older = self.groups[:max(0, len(self.groups) - n)]
        if self.single:
            self.groups = self.groups[len(older):]  # waited for: complete once the wait returns
            if len(older) == 1:
                return older[0]
        return self.env.all_of(older)


class WgmmaGroups(CommitGroups):
    """A warpgroup's `wgmma.mma_async` groups (sm90), in PTX's words: fence, mma_async (issue), commit_group,
    wait_group."""

    family = "wgmma"

    def fence(self) -> None:
        """`wgmma.fence`: orders the warpgroup's accesses to the accumulator registers and to shared memory before
        the next wgmma (PTX ISA wgmma.fence). It takes no time in the model; a role calls it where its mainloop
        does, so the two read alike."""

    commit_group = CommitGroups.commit
    wait_group = CommitGroups.wait


class CpAsyncGroups(CommitGroups):
    """A warp's (or thread's) `cp.async` groups (sm80+)."""

    family = "cp.async"
