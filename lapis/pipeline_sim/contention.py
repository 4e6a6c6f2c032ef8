"""Warpgroups contending for one SM: a fluid (processor-sharing) model in simulated time (simpy).

A consumer warpgroup's softmax is issued instruction by instruction (FFMA, MUFU.EX2, shuffles, conversions) from
the same SM sub-partitions whose issue slots the other warpgroups' softmax and the tensor pipe's wgmma in flight
also use. lapis.model.contend predicts, from a softmax loop's SASS and single-instruction constants, its tile's
cycles alone, beside another warpgroup's softmax and beside wgmma in flight, and the GEMM pair's beside it (the
states micro_mix_softmax_v3.cu measures; `lapis validate micro` holds the predictions against it). The model here
works at that level: each job holds `work` ns at its alone speed and progresses at a rate (alone ns per ns) set by
what else runs on the SM:

    softmax job:  x `softmax_under_gemm` while any wgmma group on the SM is in flight (issued, not complete),
                  x `softmax_pair` for each other softmax job running;
    pipe job:     x `pipe_under_softmax` while any softmax job runs.

The rates change only when a job starts or ends or a wgmma group is issued or completes; in between every rate is
constant, so at each change the engine advances every job and schedules the next completion (exact for piecewise
constant rates). A softmax beside both another softmax and a wgmma group in flight takes both factors, multiplied:
an assumption (the three-warpgroup microbenchmark micro_mix_softmax_v4.cu measures that state; tensor_share predicts
it, the factors here do not).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from lapis.errors import ScheduleError

KINDS = ("softmax", "pipe")


@dataclass(eq=False)  # identity: two jobs with equal fields are still two jobs
class _Job:
    kind: str
    left: float  # alone-speed ns still to do
    done: object  # simpy event
    rate: float = 1.0


@dataclass
class Contention:
    """One SM's contention state. Factors are rates relative to alone (0 < factor <= 1 slows; measured values
    may exceed 1 by noise). `busy["softmax"]` accumulates the ns with at least one softmax job running (pass the
    schedule's unit-busy dict to have it there)."""

    env: object
    softmax_under_gemm: float
    softmax_pair: float
    pipe_under_softmax: float
    in_flight: int = 0
    busy: dict = field(default_factory=dict)
    _jobs: list = field(default_factory=list)
    _t: float = 0.0
    _gen: int = 0

    def __post_init__(self):
        for name in ("softmax_under_gemm", "softmax_pair", "pipe_under_softmax"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < v < math.inf):
                raise ScheduleError("a contention factor is a finite rate relative to alone, > 0", f"{name} = {v!r}",
                                    "check the softmax costs that gave it (lapis.model.contend)")
        self._t = self.env.now
        self.busy.setdefault("softmax", 0.0)

    def run(self, kind: str, work_ns: float):
        """Process body: `work_ns` of work (alone speed) of `kind` ("softmax" or "pipe"); returns when done."""
        if kind not in KINDS:
            raise ScheduleError("a contention job is a softmax or a tensor-pipe job", repr(kind), f"use one of {KINDS}")
        if isinstance(work_ns, bool) or not isinstance(work_ns, (int, float)) or not math.isfinite(work_ns):
            raise ScheduleError("a job's work is a finite number of ns", repr(work_ns), "check the cost that gave it")
        if work_ns <= 0:
            return
        self._advance()
        job = _Job(kind, float(work_ns), self.env.event())
        self._jobs.append(job)
        self._replan()
        yield job.done

    def gemm_issued(self) -> None:
        """A wgmma group was issued on the SM (in flight until gemm_done)."""
        self._advance()
        self.in_flight += 1
        self._replan()

    def gemm_done(self) -> None:
        """A wgmma group issued with gemm_issued completed. ScheduleError without one in flight."""
        if self.in_flight <= 0:
            raise ScheduleError("gemm_done needs a wgmma group in flight", f"in_flight {self.in_flight}",
                                "call gemm_issued when the group is issued")
        self._advance()
        self.in_flight -= 1
        self._replan()

    def _rate(self, kind: str, softmax_jobs: int) -> float:
        if kind == "pipe":
            return self.pipe_under_softmax if softmax_jobs else 1.0
        r = self.softmax_pair ** (softmax_jobs - 1)
        return r * self.softmax_under_gemm if self.in_flight else r

    def _advance(self) -> None:
        dt = self.env.now - self._t
        if dt > 0:
            for j in self._jobs:
                j.left -= dt * j.rate
            if any(j.kind == "softmax" for j in self._jobs):
                self.busy["softmax"] += dt
        self._t = self.env.now

    def _replan(self) -> None:
        n = sum(j.kind == "softmax" for j in self._jobs)
        for j in self._jobs:
            j.rate = self._rate(j.kind, n)
        if not self._jobs:
            return
        self._gen += 1
        gen = self._gen
        dt = max(0.0, min(j.left / j.rate for j in self._jobs))
        self.env.timeout(dt).callbacks.append(lambda _ev: self._tick(gen))

    def _tick(self, gen: int) -> None:
        if gen != self._gen:  # a later change replanned: this completion time is stale
            return
        self._advance()
        eps = max(1e-6, 1e-12 * self.env.now)  # ns: float spacing grows with the clock
        done = [j for j in self._jobs if j.left / j.rate <= eps]
        self._jobs = [j for j in self._jobs if j not in done]
        for j in done:
            j.done.succeed()
        self._replan()
