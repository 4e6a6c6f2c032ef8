"""An SMSP's cycles shared between its warps' issue and the tensor pipe's wgmma in flight.

Measured on the H200 (kernels/micro_beside_v1.cu, capture micro/h200-2026-12-02-beside): a stream of one SASS
class issued by one warp per SMSP beside another warpgroup's wgmma groups. An FFMA stream keeps 88% of its rate
and leaves the tensor pipe 18% of its own; an FMNMX, LOP3 or F2FP stream (the ALU pipe, half rate) keeps 57-62%
and leaves 73%; SHFL keeps 30% and leaves 92%; MUFU.EX2 keeps 75% and leaves the tensor pipe at its full rate. In
every pairing but MUFU's, the class's issue rate plus the tensor pipe's fraction of its own rate is 0.93-1.0: one
cycle of the SMSP serves either an issue or a cycle of the tensor pipe's work. That is the model here:

- while a wgmma is in flight, every cycle is contested: a warp that can issue (the cycle simulation's rules,
  lapis.model.smsp.simulate) wins it with a per-pipe share `win[pipe]`, else the tensor pipe takes it;
- the tensor pipe advances one cycle of its work in each cycle it takes, and also in cycles where the issued
  instruction's pipe does not take the tensor pipe's cycle (`free` pipes: MUFU's, whose stream left the tensor
  pipe at full rate). A free pipe's warp still waits for its share like any other (MUFU's stream kept only 75% of
  its rate): the cycle it loses goes unused by it, not to the tensor pipe, which advances either way;
- `win[pipe]` is solved from the class stream's two rates: a warp ready every 1 / r_alone cycles that loses each
  contested cycle with probability 1 - w waits (1 - w) / w cycles more on average, so
  w = 1 / (1 + 1 / r_beside - 1 / r_alone) (warp-instructions per clock, wgmma from shared memory in flight);
  deterministically, the warp wins when its credit (w added per contested cycle) reaches one.

A tensor job is a repeating unit: `slots` cycles of tensor-pipe work (its FLOP at the wgmma rate), then `gap`
cycles in which nothing is in flight (the group's completion latency before the next issue).

Nothing here reads the contend or mix microbenchmarks, which `lapis validate micro` predicts with it.

A stream's density matters (kernels/micro_beside_v2.cu and _v3.cu, captures micro/h200-2026-12-03-density and
-04-sweep: FFMA on 1 to 8 dependent chains, FMNMX on 1 to 4). Three rules follow:
- FFMA or FMNMX on one dependent chain (an instruction ready about every 4.5 cycles) leaves the tensor pipe
  98.5-99.3% of its rate and itself waits about 1.7 cycles an instruction. So an instruction of a pipe with a
  `sparse` share counts as *isolated* when it became ready at least SPARSE_GAP cycles after the SMSP's last
  contested issue: it waits with that share (solved as `win` from the one-chain stream alone and beside wgmma) and
  the tensor pipe keeps the cycle it issues in. An FMA-pipe instruction ready 2 cycles after waits with the same
  share and takes the cycle.
- Back to back (ready by the cycle after the SMSP's last contested issue), an FMA-pipe instruction wins every
  contested cycle (STREAK_PIPES: no `win` share). FFMA on 4 to 8 chains, whose warp has an instruction ready in
  nearly every cycle, leaves the wgmma 27-29 cycles of each loop iteration whatever the loop's length (36 to 132
  instructions): the tensor pipe takes its cycles at the loop's taken branch, not between the FFMAs.
- After a taken branch (lapis.model.smsp.taken_branches) issued while a wgmma is in flight, an FMA-pipe
  instruction back to back after an FMA-pipe issue does not contest: the tensor pipe keeps those cycles through the
  branch's stall and redirect (consts.taken_branch) and consts.branch_hold more cycles of wgmma in flight
  (lapis.model.branch derives both). Other instructions contest as usual meanwhile.
Other back-to-back instructions contest with their pipe's `win` share.
"""

from __future__ import annotations

import math
import numbers
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from lapis.data import CAPTURES
from lapis.errors import CaptureError, ScheduleError, as_int
from lapis.model import micro_campaign as mc
from lapis.model import sass, smsp

BESIDE_CAPTURE = CAPTURES / "micro" / "h200-2026-12-02-beside" / "micro" / "results.json"
DENSITY_CAPTURE = CAPTURES / "micro" / "h200-2026-12-03-density" / "micro" / "results.json"
SPARSE_CLASSES = {"fma": "ffma", "alu": "fmnmx"}  # pipe -> its one-chain stream (density.<class>_c1.*)
RECAPTURE = "recapture it: bash benchmarks/h200_beside.sh (beside) or bash benchmarks/h200_micro.sh density (density)"
SPARSE_GAP = 3  # cycles from the SMSP's last contested issue to an instruction's readiness that make it isolated
STREAK_PIPES = frozenset({"fma"})  # pipes whose back-to-back issue wins every contested cycle (no win share)
FREE_TENSOR = 0.98  # a class whose stream leaves the tensor pipe at least this fraction of its rate does not contest
MAX_CYCLES = 50_000_000  # a simulation past this is a broken input (a pipe rate near zero)
MAX_WARPS = 16  # resident warps per SMSP: 64 per SM on sm_90 (lapis.model.occupancy), 4 SMSPs


@dataclass(frozen=True)
class Share:
    """win[pipe]: the warp's share of contested cycles (0..1] for an instruction back to back with the SMSP's last
    contested issue (none for STREAK_PIPES: share 1); free: pipes whose issue does not take the tensor pipe's
    cycle; source: the captures they come from; sparse[pipe]: the share of an instruction ready later (module
    docstring), which leaves the tensor pipe its cycle when isolated (no entry: the pipe always contests)."""

    win: dict
    free: frozenset
    source: str
    sparse: dict = field(default_factory=dict)

    @classmethod
    def from_capture(cls, path: Path | None = None, mode: str = "ss", density: Path | None = None) -> Share:
        """win (but STREAK_PIPES') and free for smsp.PIPE_CLASS's pipes (the class that stands for each) from a
        beside capture (path; None: BESIDE_CAPTURE, read when called), and sparse for SPARSE_CLASSES' pipes from a
        density capture (density; None: DENSITY_CAPTURE): density.<class>_c1.alone and .ss, solved as win is. From
        the beside capture: beside.<class>.alone, beside.<class>.<mode> (the class rate) and its follower_rate
        (the tensor pipe's units per clock, against beside.wgmma.<mode>). CaptureError naming the file when one is
        missing, or when a rate is not a finite number above zero (a class rate smsp.RATE_MIN to smsp.ISSUE_MAX
        warp-instructions per clock: _stream_rate) or a follower_rate is not a non-empty list of finite numbers at
        or above zero."""
        path = BESIDE_CAPTURE if path is None else path
        found = {m["name"]: m for m in _measurements(path) if m.get("status") == "ok"}

        def value(name):
            if name not in found:
                raise CaptureError("a beside capture has every class alone and beside wgmma", f"{path}: no {name}",
                                   "capture it: benchmarks/h200_beside.sh")
            return _positive(found[name].get("value"), name, path)

        wgmma = value(f"beside.wgmma.{mode}")
        win, free = {}, set()
        for pipe, cls_ in smsp.PIPE_CLASS.items():
            if f"beside.{cls_}.alone" not in found and pipe == "tensor":
                continue  # mma.sync beside wgmma is not measured: a warp's HMMA is not a softmax instruction
            rates = [_stream_rate(value(n), n, path, mc.BESIDE_CLASS_STEPS, "recapture it: benchmarks/h200_beside.sh")
                     for n in (f"beside.{cls_}.alone", f"beside.{cls_}.{mode}")]
            if pipe not in STREAK_PIPES:  # back to back, a streak pipe always wins (module docstring)
                win[pipe] = _win(*rates)
            tensor = statistics.median(_follower(found[f"beside.{cls_}.{mode}"], f"beside.{cls_}.{mode}", path)) / wgmma
            if tensor >= FREE_TENSOR:
                free.add(pipe)
        density = DENSITY_CAPTURE if density is None else density
        return cls(win, frozenset(free), f"{path}, {density}", _sparse(density))


def _sparse(path: Path) -> dict:
    """{pipe: isolated share} from the one-chain streams of a density capture (Share.from_capture); CaptureError
    naming the file when a stream is missing or its rate is not a finite number above zero, or is outside
    smsp.RATE_MIN to smsp.ISSUE_MAX warp-instructions per clock (_stream_rate)."""
    found = {m["name"]: m for m in _measurements(path) if m.get("status") == "ok"}
    out = {}
    for pipe, cls_ in SPARSE_CLASSES.items():
        rates = []
        for name in (f"density.{cls_}_c1.alone", f"density.{cls_}_c1.ss"):
            if name not in found:
                raise CaptureError("a density capture has each one-chain stream alone and beside wgmma",
                                   f"{path}: no {name}", "capture it: bash benchmarks/h200_micro.sh density")
            rates.append(_stream_rate(_positive(found[name].get("value"), name, path), name, path,
                                      mc.DENSITY_UNROLL, "recapture it: bash benchmarks/h200_micro.sh density"))
        out[pipe] = _win(*rates)
    return out


def _win(alone: float, beside: float) -> float:
    """The share of contested cycles a stream issuing `alone` warp-instructions per clock alone and `beside` beside
    wgmma wins: each contested issue waits 1 / beside - 1 / alone cycles more on average (module docstring)."""
    return 1.0 / (1.0 + max(1 / beside - 1 / alone, 0.0))


def _stream_rate(median: float, name: str, path: Path, per_unit: int, fix: str) -> float:
    """A class stream's warp-instructions per clock (its units per clock x per_unit), or CaptureError naming the
    file and the measurement unless it is from smsp.RATE_MIN to smsp.ISSUE_MAX: above, the SMSP cannot issue it;
    below, the measurement is broken (smsp.RATE_MIN's rule), and its share of contested cycles (near 1e-300 from a
    median of 1e-300) would stall run() until MAX_CYCLES."""
    rate = median * per_unit
    if not smsp.RATE_MIN <= rate <= smsp.ISSUE_MAX:
        raise CaptureError(f"a class stream issues {smsp.RATE_MIN:g} to {smsp.ISSUE_MAX} warp-instructions per clock "
                           f"(median x {per_unit} per unit)", f"{path}: {name} {rate}", fix)
    return rate


def _measurements(path: Path) -> list[dict]:
    """The capture's measurement records (dicts with a name), or CaptureError naming the file."""
    doc = smsp._read_json(path)
    ms = doc.get("measurements") if isinstance(doc, dict) else None
    if not isinstance(ms, list) or not all(isinstance(m, dict) and isinstance(m.get("name"), str) for m in ms):
        raise CaptureError("a capture's results.json is {measurements: [{name, status, value, raw}, ...]}",
                           f"{path}: " + (type(doc if ms is None else ms).__name__ if not isinstance(ms, list)
                                          else "a record without a name"),
                           RECAPTURE)
    return ms


def _positive(value, name: str, path: Path) -> float:
    """value["median"] as a float, or CaptureError unless it is a finite number above zero (units per clock)."""
    v = value.get("median") if isinstance(value, dict) else None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise CaptureError("a beside rate is a finite number of units per clock above zero",
                           f"{path}: {name} value.median {v!r}", RECAPTURE)
    return float(v)


def _follower(m: dict, name: str, path: Path) -> list[float]:
    """m["raw"]["follower_rate"] (the tensor pipe's units per clock, one per repeat), or CaptureError unless it is
    a non-empty list of finite numbers at or above zero."""
    rates = m.get("raw", {}).get("follower_rate") if isinstance(m.get("raw"), dict) else None
    if (not isinstance(rates, list) or not rates
            or not all(isinstance(r, (int, float)) and not isinstance(r, bool) and math.isfinite(r) and r >= 0
                       for r in rates)):
        raise CaptureError("a class beside wgmma records the tensor pipe's rate in each repeat (raw.follower_rate, "
                           "finite numbers >= 0)", f"{path}: {name} follower_rate {rates!r}",
                           "recapture it: benchmarks/h200_beside.sh")
    return rates


def run(body: list[sass.Instruction], consts: smsp.Constants, share: Share, slots: float, gap: float,
        iterations: int = 12, warps: int = 1) -> tuple[float, float]:
    """(cycles per iteration of `body` per warp, cycles per tensor unit) in steady state: `warps` warps per SMSP
    each issue `body` in a loop (smsp.simulate's rules: one issue per cycle, greedy-then-oldest, shared pipes)
    beside a tensor job of `slots` cycles of work and `gap` idle cycles per unit (module docstring); slots 0 is no
    tensor job (cycles per unit inf). The warps contest the tensor pipe's cycles as one issue port: the SMSP's
    credit grows by the share of the instruction the picked warp would issue (a free pipe's too: it issues at its
    beside rate, and the tensor pipe keeps the cycle; an isolated one's, share.sparse, likewise; share_of picks the
    share). Pipes without a win share contest back to back with share 1 (they always win). After a taken branch
    issued with a wgmma in flight, an FMA-pipe instruction back to back after an FMA-pipe issue (a streak) waits
    out the branch's stall count, consts.taken_branch and consts.branch_hold cycles of wgmma in flight.
    CaptureError for an empty body, a body without control bits or a run past MAX_CYCLES; ScheduleError for slots
    or gap not finite and >= 0, a win or sparse share outside (0, 1], iterations below 2 or warps not an integer
    from 1 to MAX_WARPS (a huge count would run for hours); CaptureError for constants or a body smsp.simulate
    refuses (smsp._check_body). Steady state: from the end of round iterations // 2 (every warp's iteration of
    that number) to the end, so an odd `iterations` still times whole rounds of the warps."""
    if not body:
        raise CaptureError("the shared-cycle simulation needs a loop body", "0 instructions",
                           "pass a loop body parsed from cuobjdump -sass")
    if any(ins.control is None for ins in body):
        raise CaptureError("the shared-cycle simulation needs control bits (cuobjdump -sass input)",
                           f"{len(body)} instructions", "pass a loop body parsed from cuobjdump -sass")
    smsp._check_body(body, consts)  # the constants' bounds (branch cycles too) and a pipe for every instruction
    _check_job(share, slots, gap, iterations)
    if not 1 <= as_int(warps, "warps", ScheduleError) <= MAX_WARPS:
        raise ScheduleError(f"the shared-cycle simulation runs 1 to {MAX_WARPS} warps per SMSP (64 resident warps "
                            "per SM on sm_90)", repr(warps), "pass the softmax warps per SMSP (1 or 2)")
    occ = {p: 1.0 / r for p, r in consts.rate.items()}
    smem = [smsp.smem_wavefronts(ins) * consts.smem_cycles_per_wavefront for ins in body]
    pcs, nxts, sbs = [0] * warps, [0.0] * warps, [[0.0] * 6 for _ in range(warps)]
    done, pipe_free, last = 0, {}, 0
    t, credit, left, idle, units = 0.0, 0.0, float(slots), 0.0, 0.0
    marks, ready_at, last_contested = [], [None] * warps, -math.inf  # when each warp's next one's operands were ready
    taken, hold = smsp.taken_branches(body), 0.0  # cycles of wgmma in flight the tensor pipe keeps the SMSP's cycles
    last_pipe = None  # the pipe of the SMSP's last contested issue

    def operands_ready(w: int) -> bool:  # its stall count and scoreboard waits are over
        c = body[pcs[w]].control
        return nxts[w] <= t and not any(sbs[w][k] > t for k in range(6) if c.wait_mask >> k & 1)

    def can_issue(w: int) -> bool:
        p, m = body[pcs[w]].pipe, smem[pcs[w]]
        return (operands_ready(w) and pipe_free.get(p, 0.0) - t < 1 - 1e-9
                and not (m and pipe_free.get("smem", 0.0) - t >= 1 - 1e-9))

    while done < iterations * warps:
        if t > MAX_CYCLES:
            raise CaptureError("the shared-cycle simulation ends", f"past {MAX_CYCLES} cycles",
                               "check the pipe rates and the tensor job")
        busy = slots > 0 and idle <= 0  # a wgmma is in flight: this cycle is contested
        took = False  # a warp took the tensor pipe's cycle
        for k in range(warps):
            if ready_at[k] is None and operands_ready(k):
                ready_at[k] = t
        w = last if can_issue(last) else next((k for k in range(warps) if can_issue(k)), None)
        ready = w is not None
        if ready and busy:
            pipe = body[pcs[w]].pipe
            since = ready_at[w] - last_contested  # cycles from the last contested issue to this one's readiness
            streak = pipe in STREAK_PIPES and since <= 1 and last_pipe in STREAK_PIPES  # FMA after FMA, back to back
            if hold > 0 and streak:  # after a taken branch the streak yields
                ready = False
            else:
                isolated = pipe in share.sparse and since >= SPARSE_GAP
                credit += share_of(share, pipe, since)
                ready = credit >= 1 - 1e-12
                if ready:
                    credit -= 1.0
                    took = pipe not in share.free and not isolated
        if ready:
            ins, sb, last = body[pcs[w]], sbs[w], w
            c, p, m = ins.control, ins.pipe, smem[pcs[w]]
            if p not in share.free:
                last_contested, last_pipe = t, p
            ready_at[w] = None
            nxts[w] = smsp.next_issue(t, ins, taken[pcs[w]], consts)
            if taken[pcs[w]] and busy:
                hold = max(hold, nxts[w] - t + consts.branch_hold)
            pipe_free[p] = max(pipe_free.get(p, 0.0), t) + occ[p]
            if m:
                pipe_free["smem"] = max(pipe_free.get("smem", 0.0), t) + m
            if c.write_sb is not None:
                sb[c.write_sb] = max(sb[c.write_sb], t + smsp.dependent_latency(ins, consts))
            if c.read_sb is not None:
                sb[c.read_sb] = max(sb[c.read_sb], t + occ[p])
            pcs[w] += 1
            if pcs[w] == len(body):
                pcs[w], done = 0, done + 1
                marks.append((t, units + (1 - left / slots if slots else 0.0)))
        if busy:
            hold -= 1
        if slots > 0:
            if idle > 0:
                idle -= 1
            elif not took:
                left -= 1
                if left <= 0:
                    units, left, idle = units + 1, float(slots), float(gap)
        t += 1.0
    h = warps * (iterations // 2)  # the steady state: whole rounds of every warp's iterations (the second half)
    (t0, u0), (t1, u1) = marks[h - 1], marks[-1]
    per_unit = (t1 - t0) / (u1 - u0) if u1 > u0 else math.inf
    return (t1 - t0) * warps / (len(marks) - h), per_unit


def share_of(share: Share, pipe: str, since: float) -> float:
    """The share of a contested cycle an instruction of `pipe` wins, ready `since` cycles after the SMSP's last
    contested issue (module docstring): share.sparse[pipe] when isolated (since >= SPARSE_GAP), or for a
    STREAK_PIPES pipe ready later than back to back (since > 1); else share.win[pipe] (1 where the pipe has none:
    it always wins)."""
    later = since >= SPARSE_GAP or (since > 1 and pipe in STREAK_PIPES)
    return share.sparse[pipe] if later and pipe in share.sparse else share.win.get(pipe, 1.0)


def _check_job(share: Share, slots: float, gap: float, iterations: int) -> None:
    """ScheduleError unless the tensor job's slots and gap are finite cycles >= 0, win and sparse are dicts whose
    every share is in (0, 1] (a share of 0 or NaN never issues: the run would end only at MAX_CYCLES; one above 1
    issues more than the SMSP can) and iterations is an integer >= 2 (the steady state is read from the second half
    of the iterations)."""
    for what, v in (("slots", slots), ("gap", gap)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v < 0:
            raise ScheduleError(f"a tensor job's {what} is a finite number of cycles >= 0", repr(v),
                                f"pass {what} as cycles (0 for none)")
    for what, shares in (("win", share.win), ("sparse", share.sparse)):
        bad = shares if not isinstance(shares, dict) else {
            p: w for p, w in shares.items() if isinstance(w, bool) or not isinstance(w, numbers.Real) or not 0 < w <= 1}
        if bad or not isinstance(shares, dict):
            raise ScheduleError(f"a pipe's share of contested cycles is in (0, 1] (share.{what})",
                                f"{share.source}: {bad}", "build the shares with Share.from_capture")
    if as_int(iterations, "iterations", ScheduleError) < 2:
        raise ScheduleError("the shared-cycle simulation runs at least 2 iterations (steady state from the second "
                            "half)", repr(iterations), "pass iterations >= 2 (12 by default)")
