"""An SM sub-partition (SMSP) issue model: cycles per loop iteration from the loop body's SASS.

One SMSP holds `warps` resident warps and issues at most `issue_per_clk` warp-instructions per clock to pipes
of given throughput (warp-instructions per clock) and latency (cycles until a dependent instruction may issue).
For a loop body run by every warp, the cycles the SMSP spends per warp-iteration are the largest of

    issue     N / issue_per_clk                       (N: instructions of one iteration)
    pipe p    n_p / rate_p                            (n_p: its instructions on pipe p; lapis.model.sass.PIPE_OF)
    latency   T_warp / warps                          (T_warp: one warp alone, in-order issue, per iteration)

T_warp is one warp's period when it runs alone: simulate(body, 1) for cuobjdump input (the compiler's stall
counts, scoreboard waits, pipe spacing), else warp_period (in-order issue, each instruction waits for its source
registers: producer issue + latency of the producer's pipe; at least the RAW critical path x latency).
Combination: the plain max (no smoothing, nothing fitted); `bound` names the largest term.

simulate() is the second, finer answer: the warps issue cycle by cycle on one SMSP (stall counts, scoreboards,
shared pipes with fractional rates, greedy-then-oldest warp choice), so bounds that are close interfere as on
the hardware instead of the larger one hiding the other.

Capture loops: loop_prediction() costs one loop of a compiled-only instruction-mix capture (lapis.captures.seed_mix:
per-pipe counts, the RAW chain's links per pipe, and warp_cycles, simulate(body, 1) computed at capture from the
listing's control bits): predict() with the one-warp period max(chain cycles at each link's pipe latency,
warp_cycles).

Constants: Constants.from_pipes_capture of PIPES_CAPTURE (the H200 pipes capture, benchmarks/h200_pipes.sh), over
PENDING (lapis/data/smsp_pending.json) for the pipes it does not measure (marked pending: partly lapis micro
captures, partly published figures), with the mbarrier wait's latency from BAR_CAPTURE (wait_latency).

    python -m lapis.model.smsp --micro     # bound model and simulation vs measured softmax microbenchmarks

--micro compiles lapis/gpu/kernels/micro_softmax_v1.cu for sm_90a (nvcc, cuobjdump), takes each kernel's
outer loop, and compares with the softmax.* measurements of MICRO_CAPTURE: tiles/clk/SM R gives 1 / R SMSP cycles
per warp-iteration (each tile is one iteration of one warp on each of the 4 SMSPs). Nothing is fitted to them.
It is a diagnostic of this module's two answers (the simulation with warps started together); `lapis validate
micro` scores every committed microbenchmark, these rows with two warps averaged over PHASES starting phases.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from lapis.data import CAPTURES, DATA
from lapis.errors import CaptureError, LapisError, as_int, shown
from lapis.model import sass

PENDING = DATA / "smsp_pending.json"
SM100 = DATA / "smsp_sm100.json"  # B200 constants, each cited (CUDA C++ Programming Guide, whitepapers) or assumed
PIPES_CAPTURE = DATA / "captures" / "micro" / "h200-2026-12-01-pipes" / "pipes" / "results.json"
PHASES = 8  # starting phases to average over for warps that run unsynchronised (simulate's phases)
PAIR_OFFSETS = 16  # tile_pair's start offsets of the second warp, k / 16 of a tile apart
MAX_PHASES = 64  # simulate's most phases: each is two full simulations of the warps (about 60 ms for a softmax tile)
ISSUE_MAX = 2.0  # warp-instructions an SMSP dispatches per clock: one on Volta..Blackwell (the whitepapers)
LATENCY_MAX = 1000.0  # cycles of dependent-issue latency: the longest pipe's is tens of cycles
RATE_MIN = 1 / LATENCY_MAX  # warp-instructions per clock: a pipe slower than this is a broken measurement, and
# simulate steps a cycle at a time through its 1 / rate backlog
ONE_CTA_WARPS = 8  # the most warps per SMSP one CTA per SM gives in the pipes capture
MICRO_CAPTURE = CAPTURES / "micro" / "h200-2026-11-30-v3" / "micro" / "results.json"
BAR_CAPTURE = CAPTURES / "micro" / "h200-2026-12-02-bar" / "micro" / "results.json"  # benchmarks/h200_bar.sh
# micro_bar_v1.cu's try_wait loop (nvcc 13, sm_90a) issues 8 fast-path waits per pass, each a
# SYNCS.PHASECHK.TRANS64.TRYWAIT and an @P0 BRA on its scoreboard: per wait, the TRYWAIT's latency, the branch's issue
# once the predicate is there (1 cycle) and the pass's counter and back edge over its 8 waits (about 1 cycle)
TRYWAIT_LOOP_ISSUE = 2.0
# a try_wait on a complete phase reads the SM's own shared memory (48 cycles on the H200); more than an HBM round trip
# (about 1000 cycles) is not that measurement
WAIT_MAX_CYCLES = 1000.0
SOFTMAX_SOURCE = DATA.parent / "gpu" / "kernels" / "micro_softmax_v1.cu"
FLAVOURS = ("exp2f", "ex2", "ex2_cond", "emu8", "emu4")
COND_FLAVOURS = ("ex2_cond",)  # the O rescale's forward branch is taken every iteration (micro_softmax_v1.cu)
MAX_JSON_BYTES = 16 << 20
# the micro_pipes.cu class whose throughput and latency stand for each pipe
PIPE_CLASS = {"fma": "ffma", "alu": "fmnmx", "xu": "ex2", "lsu": "shfl", "tensor": "hmma"}
# shared-memory instructions whose latency the pipes capture measures on its own (class -> opcodes)
SMEM_CLASS = {"ldsm": ("LDSM",), "lds128": ("LDS",)}
SMEM_OPS = ("LDSM", "LDS", "STS", "LDGSTS", "STSM")  # instructions that move data over the SM's shared-memory path
BRANCH_KEYS = ("taken_branch", "branch_hold")  # a constants file's optional branch cycles (Constants)


@dataclass(frozen=True)
class Constants:
    """Hardware constants of one SMSP: issue slots per clock, rate[pipe] (warp-instructions per clock), latency[pipe]
    (cycles); pending: True when they are not all from a pipes capture. BRANCH_KEYS, where the constants file gives
    them (0 where not): taken_branch, cycles a taken BRA delays its warp's next issue beyond its stall count (the
    fetch redirect); branch_hold, cycles after that in which the tensor pipe keeps the SMSP's cycles while a wgmma
    is in flight (lapis.model.tensor_share.run)."""

    issue_per_clk: float
    rate: dict
    latency: dict
    pending: bool = True
    sources: dict = field(default_factory=dict)
    smem_cycles_per_wavefront: float = 0.0  # an SMSP's share of the SM's shared-memory path; 0: not modelled
    op_latency: dict = field(default_factory=dict)  # opcode -> cycles, where it differs from its pipe's
    taken_branch: float = 0.0
    branch_hold: float = 0.0

    @classmethod
    def load(cls, path: Path = PENDING) -> Constants:
        """Read a constants file ({issue_per_clk, rate, latency} of {value, source}, and BRANCH_KEYS of {value,
        source} where known); CaptureError if unreadable."""
        d = _read_json(path)
        try:
            rate = {p: float(v["value"]) for p, v in d["rate"].items()}
            latency = {p: float(v["value"]) for p, v in d["latency"].items()}
            issue = float(d["issue_per_clk"]["value"])
            srcs = {f"{kind}.{p}": v.get("source", "") for kind in ("rate", "latency") for p, v in d[kind].items()}
            srcs["issue_per_clk"] = d["issue_per_clk"].get("source", "")
            branch = {k: float(d[k]["value"]) for k in BRANCH_KEYS if k in d}
            srcs.update({k: d[k].get("source", "") for k in branch})
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
            raise CaptureError("SMSP constants file lacks issue_per_clk/rate/latency values (and BRANCH_KEYS' values "
                               "where given)", f"{path}: {type(e).__name__}: {e}",
                               "write {issue_per_clk: {value}, rate: {pipe: {value}}, latency: {pipe: {value}}}")
        return cls(issue, rate, latency, "PENDING" in str(d.get("status", "")), srcs, **branch).checked(path)

    def checked(self, source) -> Constants:
        """self, or CaptureError naming `source` where a value cannot be an SMSP's: issue_per_clk in
        (0, ISSUE_MAX], each rate in [RATE_MIN, issue_per_clk] (a pipe takes no more than the dispatch issues),
        each latency and op_latency, smem_cycles_per_wavefront and BRANCH_KEYS' cycles, in [0, LATENCY_MAX] cycles
        (NaN fails every test)."""
        bad = [f"issue_per_clk {self.issue_per_clk}"] if not 0 < self.issue_per_clk <= ISSUE_MAX else []
        bad += [f"rate.{p} {v}" for p, v in self.rate.items() if not RATE_MIN <= v <= max(self.issue_per_clk, 0)]
        bad += [f"latency.{p} {v}" for p, v in self.latency.items() if not 0 <= v <= LATENCY_MAX]
        bad += [f"op_latency.{op} {v}" for op, v in self.op_latency.items() if not 0 <= v <= LATENCY_MAX]
        bad += [f"{k} {getattr(self, k)}" for k in ("smem_cycles_per_wavefront", *BRANCH_KEYS)
                if not 0 <= getattr(self, k) <= LATENCY_MAX]
        if bad:
            raise CaptureError(f"SMSP constants: issue_per_clk in (0, {ISSUE_MAX}], rates in [{RATE_MIN:g}, "
                               f"issue_per_clk] warp-instructions per clock, latencies, cycles per shared-memory "
                               f"wavefront and branch cycles in [0, {LATENCY_MAX}] cycles",
                               f"{source}: {', '.join(bad)}", "correct the value from its cited source, or "
                               "re-capture the pipes (benchmarks/h200_pipes.sh)")
        return self


    @classmethod
    def from_pipes_capture(cls, results: Path, base: Path = PENDING, waits: Path | None = BAR_CAPTURE) -> Constants:
        """Constants from a pipes capture (lapis.gpu.capture_pipes results.json): rate[pipe] = the throughput of
        PIPE_CLASS[pipe] at the most warps per SMSP one CTA per SM measures (ONE_CTA_WARPS; the 16-warp points run
        two CTAs per SM over one CTA's clock window and read above the one-instruction-per-clock issue limit, so
        they are not used), latency[pipe] = its dependent-issue latency; pipes
        without a class there keep `base`'s values. pending is False only when every PIPE_CLASS pipe was measured.
        The shared-memory path: smem_cycles_per_wavefront = 1 / (4 x the ldsm class's throughput), an LDSM.x4
        moving four 128-byte wavefronts; op_latency of the SMEM_CLASS opcodes = their class's latency; op_latency
        of SYNCS (the mbarrier wait) from `waits` (wait_latency; None: the lsu pipe's)."""
        base_c = cls.load(base)
        rate, latency, sources = dict(base_c.rate), dict(base_c.latency), dict(base_c.sources)
        found = {m["name"]: m for m in _read_json(results).get("measurements", []) if m.get("status") == "ok"}
        measured = 0
        for pipe, c in PIPE_CLASS.items():
            tputs = sorted((m["warps_per_smsp"], m) for m in found.values()
                           if m.get("cls") == c and m.get("kind") == "tput" and m["warps_per_smsp"] <= ONE_CTA_WARPS)
            lat = found.get(f"pipes.{c}.lat")
            if tputs and lat:
                rate[pipe] = float(tputs[-1][1]["value"]["median"])
                latency[pipe] = float(lat["value"]["median"])
                sources[f"rate.{pipe}"] = f"{results}: {tputs[-1][1]['name']}"
                measured += 1
        op_latency, per_wavefront = {}, 0.0
        for c, ops in SMEM_CLASS.items():
            lat = found.get(f"pipes.{c}.lat")
            if lat:
                op_latency.update(dict.fromkeys(ops, float(lat["value"]["median"])))
        ldsm = sorted((m["warps_per_smsp"], m) for m in found.values() if m.get("cls") == "ldsm"
                      and m.get("kind") == "tput" and m["warps_per_smsp"] <= ONE_CTA_WARPS)
        if ldsm:
            tput = float(ldsm[-1][1]["value"]["median"])
            per_wavefront = 1.0 / (4 * tput) if tput else math.inf  # 0 ldmatrix per clock: checked() refuses it
            sources["smem_cycles_per_wavefront"] = f"{results}: {ldsm[-1][1]['name']}"
        if waits is not None:
            op_latency["SYNCS"] = wait_latency(waits)
            sources["op_latency.SYNCS"] = f"{waits}: bar.try_wait.t384"
        return cls(base_c.issue_per_clk, rate, latency, measured < len(PIPE_CLASS), sources, per_wavefront,
                   op_latency, base_c.taken_branch, base_c.branch_hold).checked(results)


def wait_latency(results: Path) -> float:
    """Cycles from an mbarrier try_wait (SYNCS.PHASECHK.TRANS64.TRYWAIT) on a complete phase to its predicate,
    from the bar capture's bar.try_wait.t384 (cycles per wait of micro_bar_v1.cu's loop) less TRYWAIT_LOOP_ISSUE.
    CaptureError when the capture has no such measurement with status "ok", or its value.median is not a finite
    number in (TRYWAIT_LOOP_ISSUE, WAIT_MAX_CYCLES]."""
    fix = "restore the capture from git or run benchmarks/h200_bar.sh"
    data = _read_json(results)
    ms = data.get("measurements") if isinstance(data, dict) else None
    if not isinstance(ms, list) or not all(isinstance(m, dict) for m in ms):
        raise CaptureError('a bar capture holds {"measurements": [{"name", "status", "value": {"median"}}, ...]}',
                           f"{results}: {shown(ms if isinstance(data, dict) else data, 80)}", fix)
    named = [m for m in ms if m.get("name") == "bar.try_wait.t384"]
    m = next((m for m in named if m.get("status") == "ok"), None)
    if m is None:
        raise CaptureError("the bar capture holds bar.try_wait.t384 with status \"ok\"",
                           f"{results}: {'status ' + repr(named[0].get('status')) if named else 'no such measurement'}",
                           fix)
    v = m["value"].get("median") if isinstance(m.get("value"), dict) else None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not TRYWAIT_LOOP_ISSUE < v <= WAIT_MAX_CYCLES:
        raise CaptureError("the bar capture holds bar.try_wait.t384, cycles per mbarrier wait above the loop's "
                           f"{TRYWAIT_LOOP_ISSUE:g} issue cycles and at most {WAIT_MAX_CYCLES:g}", f"{results}: {v!r}",
                           fix)
    return float(v) - TRYWAIT_LOOP_ISSUE


@dataclass(frozen=True)
class Prediction:
    """SMSP cycles per warp-iteration (`cycles`), every bound term, and the name of the largest."""

    cycles: float
    bounds: dict
    bound: str


def _read_json(path: Path) -> dict:
    """The JSON document at `path`; CaptureError naming the file when it is missing, not a file, over
    MAX_JSON_BYTES, unreadable (permissions, I/O), not UTF-8, not JSON or nested too deep."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size > MAX_JSON_BYTES:
        raise CaptureError(f"JSON file missing or over {MAX_JSON_BYTES} bytes", str(path), "pass an existing file")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as e:  # permissions; JSONDecodeError, not UTF-8; nesting too deep
        raise CaptureError("JSON file unreadable", f"{path}: {type(e).__name__}: {e}"[:400], "regenerate the file")


def warp_period(body: list[sass.Instruction], consts: Constants, iterations: int = 6) -> float:
    """Cycles per iteration of one warp issuing `body` alone, in order (see the module docstring)."""
    ready: dict[str, float] = {}
    t, starts = -1.0, []
    for _ in range(iterations):
        starts.append(t + 1)
        for ins in body:
            t = max([t + 1.0] + [ready.get(r, 0.0) for r in ins.srcs])
            for d in ins.dests:
                ready[d] = t + dependent_latency(ins, consts)
    return starts[-1] - starts[-2]


def smem_wavefronts(ins: sass.Instruction) -> int:
    """128-byte shared-memory wavefronts one warp's instruction moves without bank conflicts: LDSM .1/.2/.4 (ldmatrix
    .x1/.x2/.x4: 8 x 16-byte rows each), LDS/STS/LDGSTS by access width (.128: 512 B a warp, .64: 256 B, else 128 B); 0 for
    instructions that do not use the shared-memory path (SMEM_OPS)."""
    if ins.opcode not in SMEM_OPS:
        return 0
    mods = set(ins.modifiers)
    if ins.opcode == "LDSM":  # LDSM.16.M88.4 / .MT88.2: the matrix count is the last modifier
        return 4 if "4" in mods else 2 if "2" in mods else 1
    return 4 if "128" in mods else 2 if "64" in mods else 1


def dependent_latency(ins: sass.Instruction, consts: Constants) -> float:
    """Cycles until an instruction dependent on `ins` may issue: op_latency[opcode], else latency[pipe]."""
    return consts.op_latency.get(ins.opcode, consts.latency[ins.pipe])


def taken_branches(body: list[sass.Instruction]) -> list[bool]:
    """For each instruction of a loop body (one path through the loop, lapis.model.sass.loop_body), whether it is a
    taken BRA: one whose next instruction on the path (the first, after the last) is not the next in the listing
    (address + 16 bytes). A body parsed without its listing (no addresses) has none; CaptureError for a body with
    addresses on some instructions only (no path can be read from it)."""
    if len({ins.address is None for ins in body}) > 1:
        raise CaptureError("a loop body has every instruction's address (a cuobjdump listing) or none",
                           f"{sum(ins.address is None for ins in body)} of {len(body)} without one",
                           "take the body from one parsed listing (lapis.model.sass.loop_body)")

    def taken(k: int, ins: sass.Instruction) -> bool:
        nxt = body[(k + 1) % len(body)].address
        return ins.opcode == "BRA" and ins.address is not None and nxt is not None and nxt != ins.address + 16
    return [taken(k, ins) for k, ins in enumerate(body)]


def next_issue(t: float, ins: sass.Instruction, taken: bool, consts: Constants) -> float:
    """The cycle a warp that issued `ins` at t may issue again: its stall count (at least 1), and a taken branch's
    redirect (consts.taken_branch) after it."""
    return t + max(ins.control.stall, 1) + (consts.taken_branch if taken else 0.0)


def _issue_all(body: list[sass.Instruction], warps: int, consts: Constants, iterations: int,
               starts: list[float] | None = None) -> float:
    """Cycles until `warps` warps have each issued `body` `iterations` times (simulate's mechanism); starts: the
    cycle each warp may first issue (None: all at 0)."""
    occ = {p: 1.0 / r for p, r in consts.rate.items()}
    taken = taken_branches(body)
    smem = [smem_wavefronts(ins) * consts.smem_cycles_per_wavefront for ins in body]
    pc, it, nxt = [0] * warps, [0] * warps, list(starts) if starts else [0.0] * warps
    sb = [[0.0] * 6 for _ in range(warps)]
    pipe_free: dict[str, float] = {}
    t, last = 0.0, 0
    while min(it) < iterations:
        for w in [last] + [w for w in range(warps) if w != last]:
            if it[w] >= iterations or nxt[w] > t:
                continue
            ins = body[pc[w]]
            c, p, m = ins.control, ins.pipe, smem[pc[w]]
            if any(sb[w][k] > t for k in range(6) if c.wait_mask >> k & 1) or pipe_free.get(p, 0.0) - t >= 1 - 1e-9:
                continue
            if m and pipe_free.get("smem", 0.0) - t >= 1 - 1e-9:
                continue
            nxt[w] = next_issue(t, ins, taken[pc[w]], consts)
            pipe_free[p] = max(pipe_free.get(p, 0.0), t) + occ[p]  # fractional rates: a work backlog
            if m:
                pipe_free["smem"] = max(pipe_free.get("smem", 0.0), t) + m
            if c.write_sb is not None:
                sb[w][c.write_sb] = max(sb[w][c.write_sb], t + dependent_latency(ins, consts))
            if c.read_sb is not None:
                sb[w][c.read_sb] = max(sb[w][c.read_sb], t + occ[p])
            pc[w] += 1
            if pc[w] == len(body):
                pc[w], it[w] = 0, it[w] + 1
            last = w
            break
        t += 1.0
    return t


def _check_body(body: list[sass.Instruction], consts: Constants) -> None:
    """CaptureError unless `body` is a non-empty list of sass.Instruction with control bits (cuobjdump input) on
    pipes `consts` has, and `consts` a Constants within Constants.checked's bounds: what _issue_all needs to end
    with a number (a zero, negative or NaN rate would divide by zero or never hold a pipe; an infinite latency
    would never end)."""
    if not isinstance(body, (list, tuple)) or not body or not all(isinstance(i, sass.Instruction) for i in body):
        raise CaptureError("simulate runs a loop body: a non-empty list of lapis.model.sass.Instruction",
                           shown(body, 80), "pass the loop's instructions parsed from cuobjdump -sass")
    if not isinstance(consts, Constants):
        raise CaptureError("simulate's constants are a lapis.model.smsp.Constants", shown(consts, 80),
                           "build them with Constants.from_pipes_capture or Constants.load")
    consts.checked("the constants passed to simulate")
    if any(ins.control is None for ins in body):
        raise CaptureError("simulate needs control bits (cuobjdump -sass input)", "an instruction without them",
                           "use predict() with warp_period() for ncu source-page input")
    missing = {ins.pipe for ins in body} - (set(consts.rate) & set(consts.latency))
    if missing:
        raise CaptureError("the body uses pipes the constants lack", sorted(missing),
                           "give rate and latency for every pipe of lapis.model.sass.PIPES")


def simulate(body: list[sass.Instruction], warps: int, consts: Constants, iterations: int = 8,
             phases: int = 1) -> float:
    """SMSP cycles per warp-iteration when `warps` warps each run `body` in a loop, cycle by cycle.

    Each cycle the SMSP issues at most one instruction (issue_per_clk = 1), greedy-then-oldest: the warp that
    issued last keeps issuing while it can, else the lowest-numbered ready warp. A warp can issue its next
    instruction when (1) the previous one's stall count has passed (the control bits: the compiler's fixed
    latencies, including the same warp's pipe spacing), and after a taken branch consts.taken_branch more cycles
    (next_issue), (2) every scoreboard in its wait mask is released (a
    write scoreboard at issue + latency[pipe] (op_latency[opcode] where given: LDSM, LDS): MUFU, SHFL, LDS, LDC;
    a read scoreboard at issue + 1 / rate[pipe]), (3) its pipe accepts: each pipe keeps a backlog of 1 / rate[pipe]
    cycles per accepted warp-instruction, shared by the warps, and accepts while the backlog is under one cycle (so a
    rate of 0.97 loses one cycle in 33); (4) a shared-memory instruction also needs the SMSP's share of the SM's
    shared-memory path (a backlog of smem_wavefronts x smem_cycles_per_wavefront cycles, same rule).
    Steady state without warm-up and drain: (T(iterations) - T(iterations / 2)) / (iterations / 2 x warps), T the
    cycles until every warp is done. Several warps: the mean over `phases` starting phases, warp w starting (w x k /
    phases mod 1) of one warp's alone iteration late (k = 0 .. phases - 1). The rule keeps the warps' relative phase
    for good, and the phase sets the rate: two warps of a micro_mix_softmax_v3.cu ex2 tile take 1288 to 1644 cycles
    a pair over the 8 phases (mean 1511), and the two captures of that state (contend.ex2.ss 1325, contend3.ex2.ss
    1448) disagree as much; nothing on the hardware fixes the phase of two warpgroups running unsynchronised (pass
    phases=PHASES for them). The default, 1, starts every warp together: warps whose phase a barrier sets (the
    attention kernels' ping-pong turn), and ratios of two such runs (lapis.model.consumer_loop's softmax_scale).
    Needs cuobjdump input (control bits). CaptureError for warps, iterations or phases that are not integers
    (bools included), warps below 1, iterations below 4, or phases outside 1..MAX_PHASES (checked whatever the warps:
    one warp has no phase), and for a body or constants _check_body refuses."""
    for what, v in (("warps", warps), ("iterations", iterations), ("phases", phases)):
        as_int(v, what, CaptureError)
    _check_body(body, consts)
    if phases > MAX_PHASES:
        raise CaptureError(f"simulate averages over 1 to {MAX_PHASES} starting phases (each is two full simulations "
                           "of the warps)", repr(phases), f"pass phases=smsp.PHASES ({PHASES}) or at most {MAX_PHASES}")
    if warps < 1 or iterations < 4 or phases < 1:
        raise CaptureError("simulate needs warps >= 1, iterations >= 4 and phases >= 1", (warps, iterations, phases),
                           "pass the resident warps per SMSP, at least 4 iterations and at least 1 phase")
    half = iterations // 2
    if warps == 1:
        return (_issue_all(body, 1, consts, iterations) - _issue_all(body, 1, consts, half)) / (iterations - half)
    alone = simulate(body, 1, consts, iterations)
    per_phase = []
    for k in range(phases):
        starts = [(w * k / phases) % 1.0 * alone for w in range(warps)]
        per_phase.append((_issue_all(body, warps, consts, iterations, starts)
                          - _issue_all(body, warps, consts, half, starts)) / ((iterations - half) * warps))
    return statistics.fmean(per_phase)


def tile_pair(body: list[sass.Instruction], consts: Constants, offsets: int = PAIR_OFFSETS) -> float:
    """Cycles per tile while two warps of one SMSP each run one iteration of `body` at once, each starting fresh:
    the ping-pong kernels' two softmax warps, whose relative start the GEMM turns' barriers set anew every tile, so
    that no phase two free-running warps would lock into (simulate) persists. Warp b starts f x A after warp a (A:
    one warp's tile alone, _issue_all over one iteration), f = k / offsets for k = 0 .. offsets - 1; each start
    costs E(f) = S(f) - (1 + f) x A extra cycles (S: until both are done) over an overlap of (1 - f) x A cycles, and
    the tile in the pair costs A x (1 + sum E / sum overlap): the rate at which the two warps' overlapping cycles
    slow each other, averaged over the starts (f x A rounded to whole cycles). CaptureError for a body or constants
    _check_body refuses and for offsets outside 1 .. MAX_PHASES."""
    if as_int(offsets, "offsets", CaptureError) < 1 or offsets > MAX_PHASES:
        raise CaptureError(f"tile_pair averages over 1 to {MAX_PHASES} start offsets", repr(offsets),
                           f"pass offsets=smsp.PAIR_OFFSETS ({PAIR_OFFSETS})")
    _check_body(body, consts)
    alone = _issue_all(body, 1, consts, 1)
    extra = overlap = 0.0
    for k in range(offsets):
        start = float(round(k * alone / offsets))  # whole cycles: a warp issues on a cycle
        extra += _issue_all(body, 2, consts, 1, [0.0, start]) - start - alone
        overlap += alone - start
    return alone * (1 + extra / overlap)


def predict(n_per_pipe: dict, warp_cycles: float, warps: int, consts: Constants) -> Prediction:
    """The max of issue, pipe and latency bounds (module docstring) for instruction counts per pipe of one
    iteration, one warp's in-order period `warp_cycles` and `warps` resident warps per SMSP."""
    if warps < 1:
        raise CaptureError("warps per SMSP must be at least 1", warps, "pass the resident warps per SMSP")
    unknown = set(n_per_pipe) - set(consts.rate)
    if unknown:
        raise CaptureError("instruction counts name pipes the constants lack", sorted(unknown),
                           f"use pipes of {sorted(consts.rate)}")
    bounds = {"issue": sum(n_per_pipe.values()) / consts.issue_per_clk,
              **{f"pipe.{p}": n / consts.rate[p] for p, n in n_per_pipe.items() if n},
              "latency": warp_cycles / warps}
    name = max(bounds, key=bounds.get)
    return Prediction(bounds[name], bounds, name)


def predict_loop(body: list[sass.Instruction], warps: int, consts: Constants) -> Prediction:
    """predict() for a loop body given as SASS instructions. One warp's period: simulate(body, 1) when the body
    has control bits (cuobjdump), which honours the compiler's stall counts, else warp_period (ncu input)."""
    has_control = all(ins.control is not None for ins in body)
    period = simulate(body, 1, consts) if has_control else warp_period(body, consts)
    return predict(dict(sass.pipe_mix(body)), period, warps, consts)


def capture_loop(manifest: Path, kernel: str, role: str, depth: int) -> dict:
    """The loop of `kernel` in a seed_mix manifest (lapis.captures.seed_mix) that runs `role` at nesting `depth`:
    {pipes, chain_first, ...}; CaptureError when the manifest has no such kernel or exactly one such loop is absent."""
    k = _read_json(manifest).get("kernels", {}).get(kernel)
    found = [lp for lp in (k or {}).get("loops", []) if lp.get("role") == role and lp.get("depth") == depth]
    if len(found) != 1:
        raise CaptureError("a capture loop is named by kernel, role and depth and must be unique",
                           f"{manifest}: {kernel} {role} depth {depth}: {len(found)} loops",
                           "fix the chapter's entry in lapis/catalog/attention_b200.py")
    return found[0]


def chain_cycles(loop: dict, consts: Constants) -> float:
    """Cycles of a capture loop's RAW chain of one pass: each link at its pipe's latency (chain_links: the links'
    pipes, lapis.captures.seed_mix), or chain_first x latency["fma"] for a loop captured without them (every link
    costed as an FP32 dependency, a lower bound)."""
    links = loop.get("chain_links")
    if links is None:
        return float(loop["chain_first"]) * consts.latency["fma"]
    return float(sum(n * consts.latency[p] for p, n in links.items()))


def loop_prediction(loop: dict, warps: int, consts: Constants) -> Prediction:
    """predict() for a capture loop (capture_loop): its per-pipe counts, `warps` resident warps per SMSP, and one
    warp's period: the larger of its RAW chain (chain_cycles) and warp_cycles where the capture records it (one
    warp alone under the compiled control bits, simulate(body, 1) on the sm_100 constants: the module's T_warp
    for cuobjdump input)."""
    period = max(chain_cycles(loop, consts), float(loop.get("warp_cycles", 0.0)))
    return predict(dict(loop["pipes"]), period, warps, consts)


# ------------------------------------------------------------------------------------------ --micro --

# PyPI wheels that ship each tool (cuobjdump -sass runs nvdisasm; pip install ".[test]" brings both)
TOOL_WHEELS = {"nvcc": "nvidia-cuda-nvcc", "cuobjdump": "nvidia-cuda-cuobjdump", "nvdisasm": "nvidia-cuda-nvdisasm"}


def _tool(name: str) -> str:
    """nvcc / cuobjdump / nvdisasm: on PATH, else in an nvidia wheel's bin folder (site-packages/nvidia/cu*/bin, where
    TOOL_WHEELS install them). CaptureError naming the tool, the wheel folders looked in (or that no nvidia wheel
    is installed), the PATH searched and the wheel to install when neither has it."""
    if shutil.which(name):
        return shutil.which(name)
    spec = importlib.util.find_spec("nvidia")
    roots = list((spec.submodule_search_locations if spec else None) or [])
    for root in roots:
        for d in sorted(Path(root).glob("cu*/bin")):
            if (d / name).exists():
                return str(d / name)
    path = os.environ.get("PATH", "")
    where = (f"{name}: in none of {', '.join(f'{r}/cu*/bin' for r in roots)} and not on PATH ({path})" if roots
             else f"{name}: not on PATH ({path}), and no nvidia wheel is installed")
    missing = [t for t in TOOL_WHEELS if t != "nvcc" and t != name and not _found(t, roots)]
    wheels = " ".join(TOOL_WHEELS.get(t, "the CUDA toolkit") for t in [name, *missing])  # one install for all
    raise CaptureError(f"{name} must be on PATH or in an nvidia wheel's bin folder (nvidia/cu*/bin)", where,
                       f"pip install {wheels} (a source checkout's pip install \".[test]\" brings the cuobjdump "
                       "and nvdisasm wheels), or put CUDA's bin folder (e.g. /usr/local/cuda/bin) on PATH")


def _found(name: str, roots: list) -> bool:
    """Whether `name` is on PATH or in one of the nvidia wheel roots' cu*/bin folders."""
    return bool(shutil.which(name)) or any((d / name).exists() for r in roots for d in Path(r).glob("cu*/bin"))


NVCC_TIMEOUT_S, CUOBJDUMP_TIMEOUT_S = 600, 120  # one micro kernel compiles in seconds; past these the tool hangs


def run_tool(args: list[str], timeout_s: float, what: str) -> str:
    """A CUDA tool's stdout (text). CaptureError naming the tool, `what` it was doing and the cause when it exits
    non-zero (with the end of its stderr), cannot be started (OSError) or runs past `timeout_s` seconds."""
    tool = Path(args[0]).name
    try:
        return subprocess.run(args, check=True, capture_output=True, text=True, timeout=timeout_s).stdout
    except subprocess.TimeoutExpired:
        raise CaptureError(f"{tool} finishes {what} within {timeout_s:g} s", f"still running after {timeout_s:g} s "
                           "(killed)", f"check that {tool} is not waiting on a lock, licence or network file "
                           "system, then rerun on a less loaded machine") from None
    except subprocess.CalledProcessError as e:
        raise CaptureError(f"{tool} succeeds {what}", f"exit status {e.returncode}: {(e.stderr or '')[-300:]}",
                           "check nvcc 13 (sm_90a) and cuobjdump, and the source it names") from None
    except OSError as e:
        raise CaptureError(f"{tool} can be started {what}", f"{args[0]}: {e}",
                           f"install the CUDA toolkit ({tool}) or put a working one first on PATH") from None


def softmax_sass(source: Path = SOFTMAX_SOURCE) -> dict[str, list[sass.Instruction]]:
    """A micro kernel source's SASS (sm_90a; default the micro_softmax kernels), compiled here: nvcc -cubin
    (NVCC_TIMEOUT_S) then cuobjdump -sass (CUOBJDUMP_TIMEOUT_S), parsed. nvcc, cuobjdump and nvdisasm (which
    cuobjdump -sass runs) are looked up before nvcc runs (CaptureError from _tool when one is missing). Raises
    CaptureError (run_tool) when either tool fails, cannot start or runs past its timeout."""
    nvcc, cuobjdump = _tool("nvcc"), _tool("cuobjdump")
    _tool("nvdisasm")  # cuobjdump -sass runs it: a missing one fails after the compile otherwise
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "softmax.cubin"
        run_tool([nvcc, "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-o", str(cubin),
                  str(source)], NVCC_TIMEOUT_S, f"compiling {source.name}")
        text = run_tool([cuobjdump, "-sass", str(cubin)], CUOBJDUMP_TIMEOUT_S, f"disassembling {source.name}")
    return sass.parse_cuobjdump(text)


def softmax_body(instrs: list[sass.Instruction], flavour: str) -> list[sass.Instruction]:
    """One iteration of the kernel's tile loop (its longest loop): the rescale branch taken for COND_FLAVOURS."""
    found = sass.loops(instrs)
    if not found:
        raise CaptureError("no backward branch in the softmax kernel", flavour, "check the kernel's SASS")
    lp = max(found, key=lambda x: x.tail - x.head)
    fwd = {i.address for i in instrs[lp.head:lp.tail] if i.opcode == "BRA" and i.target > i.address}
    return [instrs[k] for k in sass.loop_body(instrs, lp, fwd if flavour in COND_FLAVOURS else set())]


def micro_table(consts: Constants, functions=None, capture: Path = MICRO_CAPTURE) -> list[dict]:
    """Predicted vs measured SMSP cycles per warp-iteration of every softmax.<flavour>.wg<1|2> measurement: the
    bound model (predict) and the cycle simulation (simulate), each from the kernel's own loop body."""
    functions = functions or softmax_sass()
    measured = {m["name"]: m for m in _read_json(capture)["measurements"]}
    rows = []
    for fl in FLAVOURS:
        for wg in (1, 2):  # wg warpgroups of 4 warps: wg warps per SMSP
            m = measured.get(f"softmax.{fl}.wg{wg}")
            if not m or m.get("status") != "ok":
                continue
            body = softmax_body(functions[f"micro_softmax_{fl}_wg{wg}"], fl)
            p = predict_loop(body, wg, consts)
            sim = simulate(body, wg, consts)
            meas = 1.0 / m["value"]["median"]
            rows.append(dict(name=m["name"], instructions=len(body), bound_model=p.cycles, bound=p.bound,
                             simulated=sim, measured=meas, bound_error_pct=100 * (p.cycles / meas - 1),
                             sim_error_pct=100 * (sim / meas - 1), bounds=p.bounds))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lapis.model.smsp", description=__doc__.splitlines()[0])
    ap.add_argument("--micro", action="store_true", help="predict the softmax microbenchmarks (compiles here)")
    ap.add_argument("--constants", default=str(PENDING), help="constants file (default: the pending one)")
    ap.add_argument("--pipes", default=str(PIPES_CAPTURE) if PIPES_CAPTURE.is_file() else None,
                    help="a pipes capture's results.json (lapis.gpu.capture_pipes): its constants (default: the "
                         "H200 capture shipped with lapis)")
    a = ap.parse_args(argv)
    if not a.micro:
        ap.print_help()
        return 0
    try:
        consts = (Constants.from_pipes_capture(Path(a.pipes), Path(a.constants)) if a.pipes
                  else Constants.load(Path(a.constants)))
        rows = micro_table(consts)
    except LapisError as e:
        print(f"lapis.model.smsp: {e}", file=sys.stderr)
        return 2
    if consts.pending:
        print(f"CONSTANTS PENDING ({a.constants}, {a.pipes or 'no pipes capture'}): no claim is made")
    print(f"measured: {MICRO_CAPTURE.relative_to(DATA.parent.parent)} (tiles/clk/SM -> 1 / value)")
    print("SMSP cycles per warp-iteration; bound model = max(issue, pipes, latency); simulated = cycle by cycle")
    print(f"{'measurement':<22} {'instr':>5} {'bound model':>11} {'(bound)':<11} {'simulated':>9} {'measured':>8}"
          f" {'err bound':>9} {'err sim':>8}")
    for r in rows:
        print(f"{r['name']:<22} {r['instructions']:>5} {r['bound_model']:>11.0f} {r['bound']:<11} "
              f"{r['simulated']:>9.0f} {r['measured']:>8.0f} {r['bound_error_pct']:>+8.1f}% "
              f"{r['sim_error_pct']:>+7.1f}%")
    for key in ("bound_error_pct", "sim_error_pct"):
        errs = [abs(r[key]) for r in rows]
        print(f"{key}: mean |error| {sum(errs) / len(errs):.1f}%, max {max(errs):.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
