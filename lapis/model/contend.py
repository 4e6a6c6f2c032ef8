"""A softmax loop body's cycles in the contend microbenchmark's four states, from its SASS and single-instruction
constants: what a consumer warpgroup's softmax tile and the other warpgroup's GEMM pair cost the schedules.

The states (kernels/micro_mix_softmax_v3.cu measures them; `lapis validate micro` holds these predictions against
it, and nothing here reads it):

    tile        a softmax tile alone: one warp per SMSP issues `body` (lapis.model.smsp.simulate, one warp)
    pair        each tile while the other warpgroup's warp runs the same body on the SMSP: 2 x simulate(body, 2)
                over smsp.PHASES starting phases (two warpgroups' softmaxes run unsynchronised); a kernel's
                side (resync): smsp.tile_pair, one tile each from offsets the ping-pong sets anew every tile
    under_gemm  a tile while the other warpgroup's GEMM pairs are in flight, and
    gemm_under_softmax  that GEMM pair's cycles beside it: one lapis.model.tensor_share.run of the body beside the
                pair's tensor job
    gemm        a GEMM pair alone: its tensor-pipe cycles and its completion gap

A GEMM pair is QK and PV, m64 n128 k128 each (PAIR_WGMMAS wgmma m64n128k16), PV's A from registers: its
tensor-pipe cycles are its FLOP at the wgmma rate (wgmma_flop_per_clk_sm: the clock capture's full-duty wgmma
bursts, FLOP per probed cycle per SM), its completion gap the last group's wgmma latency less one wgmma's pipe
cycles (completion_gap: wgmma.latency.n128.rs of micro/h200-2026-11-29, one m64n128k16 waited). All in SM cycles.

STATES names each state's contend measurement (contend.<flavour>.<state>); tt, two warpgroups' pairs on one tensor
pipe, is 2 x the pair's tensor-pipe cycles.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from lapis.data import CAPTURES
from lapis.errors import CaptureError, ScheduleError, as_int
from lapis.model import clock, sass, smsp, tensor_share

WGMMA_FLOP = 2 * 64 * 128 * 16  # one wgmma m64n128k16
PAIR_WGMMAS = 16  # a GEMM pair: QK and PV, m64 n128 k128 each
WGMMA_CAPTURE = CAPTURES / "clock" / "h200-2026-12-02" / "clock" / "results.json"  # lapis.gpu.capture_clock
LATENCY_CAPTURE = CAPTURES / "micro" / "h200-2026-11-29" / "micro" / "results.json"  # wgmma.latency.*
SOURCES = ("ss", "rs")  # where a wgmma's A comes from: shared memory, registers
CHAIN_MAX = 1 << 20  # wgmmas in one chain_cycles chain (the kernels' GEMM pair: PAIR_WGMMAS)


def role_loop(instrs: list, role: str) -> sass.Loop:
    """The innermost loop of `role` ("softmax": MUFU, no HGMMA; "gemm": HGMMA, no MUFU). CaptureError if none."""
    want, avoid = ("MUFU", "HGMMA") if role == "softmax" else ("HGMMA", "MUFU")
    for lp in sass.loops(instrs):
        ops = {i.opcode for i in instrs[lp.head:lp.tail + 1]}
        if want in ops and avoid not in ops:
            return lp
    raise CaptureError(f"no {role} loop in the kernel's SASS", f"{len(instrs)} instructions",
                       "check the kernel source (a loop with MUFU for softmax, HGMMA for the GEMM)")


def softmax_body(instrs: list, flavour: str) -> list:
    """One softmax tile's instructions from a microbenchmark's softmax loop (role_loop), with the forward branches
    one iteration takes: the follower's flag read (a branch over an LDS; the leader never reads the flag) and, for
    the smsp.COND_FLAVOURS, the O rescale's skip (the scores repeat, so the row maximum never changes after the first
    tile: micro_softmax_v1.cu)."""
    lp = role_loop(instrs, "softmax")
    index = {i.address: k for k, i in enumerate(instrs)}
    taken = set()
    for k in range(lp.head, lp.tail):
        ins = instrs[k]
        if ins.opcode != "BRA" or "DIV" in ins.modifiers or not (ins.target and ins.target > ins.address):
            continue
        skipped = instrs[k + 1:index.get(ins.target, k + 1)]
        if any(i.opcode == "LDS" for i in skipped) or flavour in smsp.COND_FLAVOURS:
            taken.add(ins.address)
    return [instrs[k] for k in sass.loop_body(instrs, lp, taken)]


def wgmma_flop_per_clk_sm(path: Path | None = None) -> float:
    """The wgmma rate (FLOP per cycle per SM): the best of the clock capture's points with the tensor pipe at full
    duty and the FMA pipe idle (`path`, else WGMMA_CAPTURE as it is at the call). CaptureError when the capture has
    none (lapis.model.clock.read_points)."""
    return _wgmma_rate(WGMMA_CAPTURE if path is None else Path(path))


@functools.lru_cache(maxsize=2)
def _wgmma_rate(path: Path) -> float:
    rates = [p["tensor_flop_per_clk_sm"] for p in clock.read_points(path)
             if p["tensor_duty"] == 1 and p["fma_duty"] == 0]
    if not rates:
        raise CaptureError("the wgmma rate needs a clock-capture point at tensor duty 1 and FMA duty 0", str(path),
                           "capture one: benchmarks/h200_clock.sh")
    return max(rates)


def gemm_cycles(wgmmas: int) -> float:
    """Cycles of `wgmmas` wgmma m64n128k16 on the tensor pipe at the wgmma rate."""
    return wgmmas * WGMMA_FLOP / wgmma_flop_per_clk_sm()


def _source(src) -> str:
    """`src` when it is one of SOURCES, else ScheduleError."""
    if src not in SOURCES:
        raise ScheduleError("a wgmma's A comes from shared memory or registers", f"src {src!r}",
                            f"use one of {SOURCES}")
    return src


def completion_gap(src: str, path: Path | None = None) -> float:
    """Cycles from a waited group's last tensor-pipe cycle to the wait's return: wgmma.latency.n128.<src> (one
    m64n128k16 issued and waited, src "ss" or "rs") less its tensor-pipe cycles, from `path` (else LATENCY_CAPTURE
    as it is at the call). ScheduleError for another src; CaptureError naming the file when the capture lacks the
    measurement, holds two ok records of it, or its median is not a finite number of cycles at or above one
    wgmma's tensor-pipe cycles (a latency shorter than the wgmma's own pipe time is no measurement of it)."""
    name, path = f"wgmma.latency.n128.{_source(src)}", LATENCY_CAPTURE if path is None else Path(path)
    found = [m for m in tensor_share._measurements(path) if m["name"] == name and m.get("status") == "ok"]
    fix = "restore the capture from git, or capture it: lapis capture micro --only wgmma.latency"
    if len(found) != 1:
        raise CaptureError("the wgmma completion gap needs one ok measurement of the latency microbenchmark",
                           f"{path}: {len(found)} ok records of {name}", fix)
    value, pipe = found[0].get("value"), gemm_cycles(1)
    v = value.get("median") if isinstance(value, dict) else None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < pipe:
        raise CaptureError(f"a wgmma latency is a finite number of cycles at or above one wgmma's tensor-pipe cycles "
                           f"({pipe:.1f})", f"{path}: {name} value.median {v!r}", fix)
    return float(v) - pipe


def chain_cycles(wgmmas: int, last: str) -> float:
    """Cycles from wgmma.fence to wait_group 0 returning for `wgmmas` m64n128k16 issued back to back by one
    warpgroup, the last group's A from `last` ("ss" or "rs"): their tensor-pipe cycles and the last group's
    completion gap (kernels/micro_wgmma_v2.cu measures it: `lapis validate micro`'s chain rows). ScheduleError for
    wgmmas not a whole number in 1..CHAIN_MAX or another `last`."""
    return gemm_cycles(_chain(wgmmas)) + completion_gap(_source(last))


def _chain(wgmmas) -> int:
    """`wgmmas` when it is a whole number in 1..CHAIN_MAX, else ScheduleError."""
    if not 1 <= as_int(wgmmas, "chain_cycles' wgmmas", ScheduleError) <= CHAIN_MAX:
        raise ScheduleError(f"a wgmma chain holds 1 to {CHAIN_MAX} wgmmas", f"wgmmas {wgmmas!r}",
                            f"pass a count in 1..{CHAIN_MAX} (the GEMM pair: {PAIR_WGMMAS})")
    return wgmmas


@dataclass(frozen=True)
class Contend:
    """A softmax body's cycles per tile (tile, pair, under_gemm) and the GEMM pair's (gemm, gemm_under_softmax) in
    the contend states (module docstring); gap: the pair's completion gap within gemm."""

    tile: float
    pair: float
    under_gemm: float
    gemm: float
    gemm_under_softmax: float
    gap: float

    def factors(self) -> dict[str, float]:
        """The rates relative to alone that lapis.pipeline_sim.contention.Contention takes. ScheduleError when pair,
        under_gemm or gemm_under_softmax less gap is not above zero (a rate has no finite value)."""
        if min(self.pair, self.under_gemm, self.gemm_under_softmax - self.gap) <= 0:
            raise ScheduleError("a Contend's pair and under_gemm cycles, and gemm_under_softmax less gap, are above "
                                "zero", repr(self), "build it with contend.of, or load consumer_loops.json through "
                                "lapis.model.consumer_loop.load (which checks it)")
        pipe = self.gemm - self.gap
        return dict(softmax_pair=self.tile / self.pair, softmax_under_gemm=self.tile / self.under_gemm,
                    pipe_under_softmax=pipe / (self.gemm_under_softmax - self.gap))

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


FIELDS = tuple(Contend.__dataclass_fields__)
STATES = {"s": "tile", "ss": "pair", "st": "under_gemm", "ts": "gemm_under_softmax", "t": "gemm"}


def state_cycles(c: Contend, state: str) -> float:
    """The leader's cycles per unit in contend state `state` (STATES, or tt). ScheduleError for another state."""
    if not (isinstance(state, str) and (state == "tt" or state in STATES)):
        raise ScheduleError("a contend state is one of the contend microbenchmark's", f"state {state!r}",
                            f"use one of {[*STATES, 'tt']}")
    return 2 * (c.gemm - c.gap) if state == "tt" else getattr(c, STATES[state])


def of(body: list[sass.Instruction], consts: smsp.Constants, share: tensor_share.Share,
       wgmmas: int = PAIR_WGMMAS, last: str = "rs", resync: bool = False) -> Contend:
    """The body's Contend (module docstring) beside a GEMM unit of `wgmmas` m64n128k16 whose last group's A comes
    from `last` (default the GEMM pair; micro_mix_softmax_v4.cu's unit is one QK group: 8, "ss"). CaptureError for a
    body without control bits (cuobjdump input); ScheduleError for a unit chain_cycles refuses. resync: the pair
    state from smsp.tile_pair (a kernel's two softmax warps, which the GEMM turns' barriers start anew every tile)
    instead of two free-running warps' steady state (the contend microbenchmark's)."""
    if not isinstance(resync, bool):  # "no" would pick tile_pair by its truthiness
        raise ScheduleError("resync is True (a kernel's restarted tiles) or False (free-running warps)",
                            repr(resync), "pass resync=True or resync=False")
    slots, gap = gemm_cycles(_chain(wgmmas)), completion_gap(last)  # chain_cycles' two terms, the capture read once
    soft, beside = tensor_share.run(body, consts, share, slots, gap)
    pair = smsp.tile_pair(body, consts) if resync else 2 * smsp.simulate(body, 2, consts, phases=smsp.PHASES)
    return Contend(tile=smsp.simulate(body, 1, consts), pair=pair,
                   under_gemm=soft, gemm=slots + gap, gemm_under_softmax=beside, gap=gap)
