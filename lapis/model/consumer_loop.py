"""A consumer warpgroup's K/V-tile loop from the kernel's SASS: its GEMM turn's issue time, and what its softmax
side costs against the softmax microbenchmark the H200 measured.

The GEMM turn. In the ping-pong attention kernels (lapis/gpu/kernels/attention_h200.cu, s4+) a consumer warpgroup
takes a GEMM turn per K/V tile: it `bar.sync`s its named barrier, waits for V, builds the wgmma matrix descriptors
and issues QK_j's and PV_{j-1}'s wgmma instructions, then `bar.arrive`s the next warpgroup's barrier. The other
warpgroup cannot start its own turn before that arrive, and the turn's first wgmma cannot reach the tensor pipe
before it is issued, so the turn's issue time is on the schedule's critical path. Each of the warpgroup's four
warps issues the turn on its own SM sub-partition (SMSP), so one warp's in-order issue time is the turn's. The
turn is split at its wgmma groups (the innermost consumer loop of the function, lapis.model.sass.loops):

    pre     after the loop's last BAR.SYNC up to the first HGMMA   (the V wait, descriptors, warpgroup.arrive)
    first   the first group's HGMMAs up to the second group's      (its k-steps and their descriptors)
    second  the second group's first HGMMA through the last BAR.ARV (its k-steps, the turn's hand-over)

s5+ issue QK_j first and PV_{j-1} second; s4 issues PV_{j-1} first. A group starts where the HGMMA accumulator
(its first operand) changes. A segment's cycles are one warp issuing it alone, in order (lapis.model.smsp's cycle
simulation over the segment once, without the retry paths of mbarrier waits that succeed at once:
instruction_mix.waits_slow_path): the compiler's stall counts and scoreboard waits with
the pipes' latencies of smsp.Constants from the pipes capture. HGMMA is issued at one per cycle here: the tensor
pipe runs it asynchronously, and the stall counts hold the spacing the compiler needs between two of them.

The softmax side: the rest of the loop (the loop less the turn and the retry paths of waits that succeed:
lapis.model.instruction_mix), with the O rescale where the microbenchmark's loop of that flavour rescales every
tile (exp2f, ex2, the emu flavours) and without it for ex2_cond (whose measured tile never rescales). The simulator's softmax tile is measured on the
H200 in lapis/gpu/kernels/micro_mix_softmax_v3.cu, whose softmax loop runs the kernels' own softmax code but not
their loop's bookkeeping (mbarrier arrives, masks of ragged tiles, the work item's state). `softmax_scale` is the
SMSP model's cycles for the kernel's side over those for the microbenchmark's softmax loop of the same flavour (the
same exclusions), both with two softmax warps per SMSP (smsp.simulate, cycle by cycle): the measured tile times it
is the kernel's. `softmax_scale_alone` is the same ratio with one softmax warp per SMSP (SIDE_WARPS_ALONE: the
ping-pong's ideal, the other warpgroup's warp in its GEMM turn), where one warp's in-order issue and its
instructions' latencies are not hidden by a second warp: a block of F2FP packs after the last MUFU.EX2 costs its
issue there, interleaved with the MUFU.EX2 stream it costs little (the schedule's `side_warps` picks the ratio).

Each softmax side, and each flavour's microbenchmark tile (micro_reference, the body `lapis validate micro` scores),
also carries its cycles in the contend states (`contend`: lapis.model.contend), which the schedules take.

LOOPS (lapis/data/consumer_loops.json) holds the turn and softmax side of every catalog kernel with GEMM turns
(lapis.catalog.attention, keyed by its catalog key), of THIRD_PARTY's kernels (FA4's sm90 forward at head dims 64
and 128, from its committed SASS: third_party), and for each simulator schedule the kernel a run is costed from by
default (the first in the table that mirrors it; the schedule's `kernel_loop` parameter names another), written by

    python -m lapis.model.consumer_loop --write    # compiles attention_h200.cu and micro_mix_softmax_v3.cu

with the nvcc release and the sources' sha256. cuDNN's kernel has no SASS here (its license forbids disassembly).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gzip
import json
import math
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

from lapis.catalog import attention as catalog
from lapis.data import CAPTURES, DATA
from lapis.errors import CaptureError, LapisError
from lapis.model import contend, instruction_mix, sass, smsp, tensor_share

LOOPS = DATA / "consumer_loops.json"
SCHEMA = "lapis.consumer-loops/1"
MICRO = "micro_mix_softmax_v3.cu"  # the contend microbenchmark (micro_reference: its softmax loop per flavour)
SIDE_WARPS = 2  # softmax warps per SMSP: one of each consumer warpgroup (the built kernels have two)
SIDE_WARPS_ALONE = 1  # one softmax warp per SMSP: the other warpgroup's warp is in its GEMM turn
SEGMENTS = ("pre", "first", "second")


def _consumer_loop(instrs: list[sass.Instruction]) -> sass.Loop:
    """The innermost loop (longer than instruction_mix.TINY) holding MUFU and HGMMA into two accumulators (QK's and
    PV's: FA4's sm90 forward also loops over a last PV alone). CaptureError without one."""
    def both(lp: sass.Loop) -> bool:
        body = instrs[lp.head:lp.tail]
        return any(i.opcode == "MUFU" for i in body) and len({i.operands[0] for i in body if i.opcode == "HGMMA"}) > 1
    lps = [lp for lp in sass.loops(instrs) if lp.tail - lp.head > instruction_mix.TINY and both(lp)]
    if not lps:
        raise CaptureError("no consumer loop (a loop holding MUFU and HGMMA into QK's and PV's accumulators)",
                           f"{len(instrs)} instructions", "pass a wgmma attention kernel's SASS")
    return min(lps, key=lambda x: x.tail - x.head)


def _turn_bounds(instrs: list[sass.Instruction]) -> tuple[int, int, int, int]:
    """(turn start, first HGMMA, the second group's first HGMMA, turn end) as indices into `instrs`."""
    lp = _consumer_loop(instrs)
    idx = range(lp.head, lp.tail + 1)
    syncs = [k for k in idx if instrs[k].opcode == "BAR" and "SYNC" in instrs[k].modifiers]
    arvs = [k for k in idx if instrs[k].opcode == "BAR" and "ARV" in instrs[k].modifiers]
    hg = [k for k in idx if instrs[k].opcode == "HGMMA"]
    if not syncs or not arvs or not any(k < hg[0] for k in syncs):
        raise CaptureError("the consumer loop has no GEMM turn (BAR.SYNC, HGMMA, BAR.ARV)",
                           f"{len(syncs)} BAR.SYNC, {len(hg)} HGMMA, {len(arvs)} BAR.ARV", "pass a ping-pong kernel")
    second = next(k for k in hg if instrs[k].operands[0] != instrs[hg[0]].operands[0])  # _consumer_loop: two exist
    return max(k for k in syncs if k < hg[0]) + 1, hg[0], second, max(arvs) + 1


def turn_slice(instrs: list[sass.Instruction]) -> dict[str, list[sass.Instruction]]:
    """The turn's segments (module docstring) of a ping-pong kernel function. CaptureError when the innermost
    consumer loop has no BAR.SYNC ... BAR.ARV around two HGMMA groups."""
    start, first, second, end = _turn_bounds(instrs)
    slow = instruction_mix.waits_slow_path(instrs)  # a wait that succeeds at once skips its retry path

    def part(a: int, b: int) -> list[sass.Instruction]:
        return [instrs[k] for k in range(a, b) if k not in slow]
    return dict(pre=part(start, first), first=part(first, second), second=part(second, end))


def issue_cycles(segment: list[sass.Instruction], consts: smsp.Constants) -> float:
    """Cycles one warp takes to issue `segment` once, alone, in order, up to issuing its last instruction
    (smsp's cycle simulation with HGMMA accepted at one per cycle). CaptureError without control bits."""
    if any(i.control is None for i in segment):
        raise CaptureError("issue_cycles needs control bits (cuobjdump -sass input)", "an instruction without them",
                           "compile the kernel and read it with cuobjdump")
    if not segment:
        return 0.0
    fast = dataclasses.replace(consts, rate={**consts.rate, "tensor": 1.0})
    return smsp._issue_all(segment, 1, fast, 1)


SYNC_FORMS = ("imm", "pred", "reg")  # sync_form's values


def sync_form(instrs: list[sass.Instruction]) -> str:
    """How the turn's wait is written: the BAR.SYNC right before the turn's first segment names its barrier in a
    register ("reg": s17+, FA4's sm90 forward), is one of a predicated pair ("pred": s4..s16, one per warpgroup), or
    names an immediate id unpredicated ("imm"). The forms of micro_bar_v1.cu's hand-over measurements."""
    bar = instrs[_turn_bounds(instrs)[0] - 1]
    return "reg" if bar.operands and bar.operands[0].startswith("R") else "pred" if bar.predicate else "imm"


def turn_of(instrs: list[sass.Instruction], consts: smsp.Constants) -> dict:
    """One function's turn: per segment its cycles, instructions and per-pipe counts; HGMMA per group; the form of
    its bar.sync (sync_form)."""
    seg = turn_slice(instrs)
    return dict(sync_form=sync_form(instrs), cycles={k: issue_cycles(v, consts) for k, v in seg.items()},
                instructions={k: len(v) for k, v in seg.items()},
                pipes={k: dict(sorted(Counter(i.pipe for i in v).items())) for k, v in seg.items()},
                hgmma={k: sum(i.opcode == "HGMMA" for i in seg[k]) for k in SEGMENTS[1:]})


def _side_body(instrs: list[sass.Instruction], lp: sass.Loop, skip: set[int],
               rescale: bool = False) -> list[sass.Instruction]:
    """The loop's instructions in order, less `skip`, the retry paths of waits and, unless `rescale`, the O rescale
    behind a branch."""
    region = ["block" if lp.head <= k <= lp.tail else "straight" for k in range(len(instrs))]
    drop = skip | instruction_mix.waits_slow_path(instrs)
    if not rescale:
        drop |= instruction_mix.rescale_path(instrs, region)
    return [instrs[k] for k in range(lp.head, lp.tail + 1) if k not in drop]


def kernel_side(instrs: list[sass.Instruction], rescale: bool = False, turn: bool = True) -> list[sass.Instruction]:
    """A ping-pong kernel's softmax side: its consumer loop less the GEMM turn (module docstring); with `rescale`
    its O rescale counts even where a branch guards it (the flavours whose microbenchmark loop rescales every
    tile: all but ex2_cond). turn=False: a kernel without ping-pong (no bar.sync turn: FA4's d256 forward), the
    loop less the span from its first HGMMA to its last (both groups and the V wait between them)."""
    if turn:
        start, _, _, end = _turn_bounds(instrs)
    else:
        lp = _consumer_loop(instrs)
        hg = [k for k in range(lp.head, lp.tail + 1) if instrs[k].opcode == "HGMMA"]
        start, end = hg[0], hg[-1] + 1
    return _side_body(instrs, _consumer_loop(instrs), set(range(start, end)), rescale)


def micro_side(instrs: list[sass.Instruction]) -> list[sass.Instruction]:
    """The contend microbenchmark's softmax loop (the shortest loop holding MUFU and no HGMMA) with the same
    exclusions. CaptureError without one."""
    lps = [lp for lp in sass.loops(instrs) if lp.tail - lp.head > instruction_mix.TINY
           and any(i.opcode == "MUFU" for i in instrs[lp.head:lp.tail])
           and not any(i.opcode == "HGMMA" for i in instrs[lp.head:lp.tail])]
    if not lps:
        raise CaptureError("no softmax loop (MUFU without HGMMA)", f"{len(instrs)} instructions",
                           f"pass a {MICRO} function")
    return _side_body(instrs, min(lps, key=lambda x: x.tail - x.head), set())


def side_of(body: list[sass.Instruction], consts: smsp.Constants) -> dict:
    """A softmax side's SMSP cycles per warp-iteration with SIDE_WARPS warps issuing it (cycles) and with
    SIDE_WARPS_ALONE (alone_cycles) (smsp.simulate: the cycle simulation, where the bound model's MUFU limit would
    hide the extra instructions), and its per-pipe counts."""
    return dict(cycles=smsp.simulate(body, SIDE_WARPS, consts), alone_cycles=smsp.simulate(body, SIDE_WARPS_ALONE,
                                                                                           consts),
                instructions=len(body), pipes=dict(sorted(sass.pipe_mix(body).items())))


def kernels() -> dict[str, dict]:
    """{catalog key: variant}: every non-diagnostic catalog kernel with GEMM turns (lapis.catalog.attention)."""
    return {k: v for k, v in catalog.VARIANTS.items() if v["pp"] and v["diagnostic"] is None}


def schedule_defaults() -> dict[str, str]:
    """{schedule: catalog key}: the first of kernels() that each simulator schedule mirrors (table order), the loop
    a run of that schedule is costed from unless it names another (the schedule's `kernel_loop` parameter)."""
    out: dict = {}
    for key, v in kernels().items():
        out.setdefault(v["schedule"], key)
    return out


FLAVOURS = ("exp2f", "ex2", "ex2_cond", "emu8", "emu4")  # micro_mix_softmax_v3.cu's micro_contend_<flavour>
COND_FLAVOURS = ("ex2_cond",)  # its microbenchmark's tile skips the O rescale (the row max never moves)


def flavour_of(v: dict) -> str:
    """The contend microbenchmark flavour a catalog kernel's softmax is (micro_reference[flavour]; emu: the
    software exp2 on 1/8 (emu 4) or 1/4 (emu 2) of the scores)."""
    if not v["exp2"]:
        return "exp2f"
    return {4: "emu8", 2: "emu4"}.get(v["emu"], "ex2_cond" if v["cond"] else "ex2")


FA4_SASS = CAPTURES / "sass" / "fa4-sm90-2026-12-03"  # lapis.captures.fa4_sass: FA4's sm90 forward, compiled only
# key: (folder, file, flavour, GEMM turn (ping-pong), block_n): FA4's sm90 forward (flash_fwd_sm90.py
# use_scheduler_barrier, interface._tile_size_fwd_sm90: d256 has no ping-pong and 80-key tiles)
THIRD_PARTY = {f"fa4_sm90_d{d}": (FA4_SASS, f"d{d}.sass.gz", "ex2", d <= 128, 128 if d <= 128 else 80)
               for d in (64, 128, 256)}
KEYS = 128  # the microbenchmark tile's columns: a side of another block_n is scaled to it


def third_party_sass(key: str) -> list[sass.Instruction]:
    """The one function of THIRD_PARTY[key]'s committed cuobjdump listing. CaptureError for a key not in
    THIRD_PARTY, and naming the file when it is missing, not a gzip'd UTF-8 listing (sass.read_text: at most
    sass.MAX_TEXT_BYTES inflated), or holds another number of functions ('Function :' headers: two of one name
    would otherwise read as the last) or no instructions with control bits."""
    if key not in THIRD_PARTY:
        raise CaptureError("a third-party kernel with committed SASS is one of consumer_loop.THIRD_PARTY", repr(key),
                           f"use one of {sorted(THIRD_PARTY)}")
    folder, name = THIRD_PARTY[key][:2]
    path = folder / name
    rule, fix = ("a third-party kernel's SASS is a gzip'd cuobjdump -sass listing of one function",
                 "restore the capture from git (captures are never edited by hand)")
    try:
        text = sass.read_text(path)
    except CaptureError as e:
        raise CaptureError(rule, f"{path}: {e.rule}: {e.value}", fix) from None
    heads = sum("Function : " in line for line in text.splitlines())
    if heads != 1:
        raise CaptureError(rule, f"{path}: {heads} 'Function :' headers", fix)
    instrs = next(iter(sass.parse_cuobjdump(text + "\n").values()))  # the newline: text, never a path
    if not instrs:
        raise CaptureError(rule, f"{path}: a function without instructions (cuobjdump -sass lines with their "
                           "control words)", fix)
    return instrs


def loop_of(instrs: list[sass.Instruction], flavour: str, reference: dict, consts: smsp.Constants,
            share: tensor_share.Share, turn: bool = True, block_n: int = KEYS) -> dict:
    """A kernel function's GEMM turn (None without ping-pong: turn=False) and softmax side (its cycles, contend
    states and scale against the microbenchmark's loop of `flavour`, reference[flavour], per KEYS columns: a side
    of block_n keys scaled by KEYS / block_n)."""
    body = kernel_side(instrs, rescale=flavour not in COND_FLAVOURS, turn=turn)
    own = contend.of(body, consts, share, resync=True)  # the ping-pong restarts each tile: a restarted pair
    side, ref = dict(side_of(body, consts), contend=own.as_dict()), reference[flavour]
    per = KEYS / block_n
    return dict(turn=turn_of(instrs, consts) if turn else None,
                softmax_side=dict(side, flavour=flavour, block_n=block_n,
                                  softmax_scale=side["cycles"] * per / ref["cycles"],
                                  softmax_scale_alone=side["alone_cycles"] * per / ref["alone_cycles"]))


def build() -> dict:
    """The loops of kernels() and THIRD_PARTY (their committed SASS) and the microbenchmark's softmax loops, compiled
    here, with provenance."""
    fns = instruction_mix.compiled(instruction_mix.KERNELS / "attention_h200.cu")
    micro = instruction_mix.compiled(instruction_mix.KERNELS / MICRO)
    consts = smsp.Constants.from_pipes_capture(smsp.PIPES_CAPTURE)
    share = tensor_share.Share.from_capture()
    reference = {f: dict(side_of(micro_side(micro[f"micro_contend_{f}"]), consts),
                         contend=contend.of(contend.softmax_body(micro[f"micro_contend_{f}"], f), consts,
                                            share).as_dict()) for f in FLAVOURS}
    loops: dict = {}
    for key, v in kernels().items():
        fn = catalog.kernel_name(v)
        if fn not in fns:
            raise CaptureError("a catalog kernel is missing from the compiled file", fn,
                               "regenerate attention_variants.inc: python -m lapis.catalog.generate")
        loops[key] = dict(function=fn, schedule=v["schedule"], overlap=v["overlap"], late_v=v["late_v"],
                          cross=v["cross"], **loop_of(fns[fn], flavour_of(v), reference, consts, share))
    third = {k: dict(source=str((folder / name).relative_to(DATA.parent.parent)),
                     **loop_of(third_party_sass(k), fl, reference, consts, share, turn, bn))
             for k, (folder, name, fl, turn, bn) in THIRD_PARTY.items()}
    return {"schema": SCHEMA, "nvcc": instruction_mix.nvcc_release(), "flags": instruction_mix.FLAGS,
            "source_sha256": instruction_mix.source_digests(), "constants": str(smsp.PIPES_CAPTURE.relative_to(
                DATA.parent.parent)), "micro_reference": reference, "schedules": schedule_defaults(), "loops": loops,
            "third_party": third}


def load(path: Path | None = None) -> dict:
    """The committed file ({loops: {catalog key: loop}, schedules: {schedule: catalog key}, ...}): `path`, else LOOPS
    as it is at the call; read once per file version. CaptureError if unreadable or malformed."""
    path = Path(LOOPS if path is None else path)
    return _load(path, path.stat().st_mtime_ns if path.is_file() else None)


SEGMENT_MAX = 2000  # cycles: one warp issuing one turn segment (the built kernels' take 53-154)
KSTEPS_MAX = 16  # HGMMA per wgmma group: k16 steps at D or block_n <= 256
CONTEND_MAX = 100_000  # cycles: a softmax tile or GEMM pair in a contend state (the built kernels' take 0.1k-2k)


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _loop_fault(key: str, loop) -> str | None:
    """Why `loop` (the file's loops[key]) cannot cost a run, or None: a catalog ping-pong kernel (lapis.catalog
    .attention) with that kernel's schedule, turn order (overlap, late_v, cross) and flavour (flavour_of), segment
    cycles in [0, SEGMENT_MAX), HGMMA counts in 1..KSTEPS_MAX equal to the segment's tensor-pipe count, and a
    softmax_scale and softmax_scale_alone in (0.25, 4)."""
    if not isinstance(loop, dict) or not isinstance(loop.get("turn"), dict) \
            or not isinstance(loop.get("softmax_side"), dict):
        return "not an object with turn and softmax_side objects"
    v = kernels().get(key)
    if v is None:
        return "not a ping-pong kernel of lapis.catalog.attention"
    if loop.get("schedule") != v["schedule"] or loop.get("overlap") is not bool(v["overlap"]) \
            or loop.get("late_v") is not bool(v["late_v"]) or loop.get("cross") is not bool(v["cross"]):
        return (f"schedule {loop.get('schedule')!r}, overlap {loop.get('overlap')!r}, late_v {loop.get('late_v')!r}, "
                f"cross {loop.get('cross')!r}; the catalog says {v['schedule']!r}, {bool(v['overlap'])}, "
                f"{bool(v['late_v'])}, {bool(v['cross'])}")
    if loop["softmax_side"].get("flavour") != flavour_of(v):
        return f"softmax_side flavour {loop['softmax_side'].get('flavour')!r}; the catalog says {flavour_of(v)!r}"
    return _body_fault(loop)


def _body_fault(loop: dict, turn: bool = True) -> str | None:
    """Why a loop's turn and softmax side cannot cost a run, or None (_loop_fault's rules past the catalog's; a
    softmax_side flavour of FLAVOURS); turn=False: a loop without ping-pong, whose turn is None."""
    if not isinstance(loop, dict) or not isinstance(loop.get("softmax_side"), dict) \
            or not (isinstance(loop.get("turn"), dict) if turn else loop.get("turn") is None):
        return "not an object with " + ("turn and softmax_side objects" if turn else "softmax_side and a None turn")
    if not turn:
        return _side_fault(loop["softmax_side"].get("softmax_scale"), loop["softmax_side"])
    t, scale = loop["turn"], loop["softmax_side"].get("softmax_scale")
    cyc, hg, pipes = t.get("cycles"), t.get("hgmma"), t.get("pipes")
    if not isinstance(cyc, dict) or set(cyc) != set(SEGMENTS) or not all(
            _num(x) and 0 <= x < SEGMENT_MAX for x in cyc.values()):
        return f"turn cycles {cyc!r}, not pre/first/second in [0, {SEGMENT_MAX})"
    if not isinstance(hg, dict) or not isinstance(pipes, dict) or not all(
            isinstance(hg.get(g), int) and not isinstance(hg[g], bool) and 0 < hg[g] <= KSTEPS_MAX
            and isinstance(pipes.get(g), dict) and pipes[g].get("tensor") == hg[g] for g in SEGMENTS[1:]):
        return f"turn hgmma {hg!r}, not 1..{KSTEPS_MAX} per group matching the segments' tensor-pipe counts"
    if t.get("sync_form") not in SYNC_FORMS:
        return f"turn sync_form {t.get('sync_form')!r}, not one of {SYNC_FORMS}"
    return _side_fault(scale, loop["softmax_side"])


def _side_fault(scale, side: dict) -> str | None:
    """Why a softmax side's flavour is not one of FLAVOURS, or its softmax_scale (`scale`) or softmax_scale_alone
    is outside (0.25, 4), or None."""
    if side.get("flavour") not in FLAVOURS:
        return f"softmax_side flavour {side.get('flavour')!r}, not one of {FLAVOURS}"
    if not (_num(scale) and 0.25 < scale < 4):
        return f"softmax_scale {scale!r}, not in (0.25, 4)"
    alone = side.get("softmax_scale_alone")
    if not (_num(alone) and 0.25 < alone < 4):
        return f"softmax_scale_alone {alone!r}, not in (0.25, 4)"
    return None


def _scale_fault(loop: dict, reference) -> str | None:
    """Why loop's softmax_scale (softmax_scale_alone) is not its side's cycles (alone_cycles) per KEYS columns
    (its block_n, KEYS where absent) over micro_reference[its flavour]'s, or None."""
    side = loop["softmax_side"]
    ref = reference.get(side.get("flavour"), {}) if isinstance(reference, dict) else {}
    bn = side.get("block_n", KEYS)
    if not (isinstance(bn, int) and not isinstance(bn, bool) and 16 <= bn <= 256 and bn % 16 == 0):
        return f"block_n {bn!r}, not a multiple of 16 in 16..256"
    for scale, field in (("softmax_scale", "cycles"), ("softmax_scale_alone", "alone_cycles")):
        cycles, ref_cycles = side.get(field), ref.get(field) if isinstance(ref, dict) else None
        if not (_num(cycles) and _num(ref_cycles) and ref_cycles > 0
                and math.isclose(side[scale], cycles * KEYS / bn / ref_cycles, rel_tol=1e-9)):
            return (f"{scale} {side[scale]!r} is not its side's {field} {cycles!r} over the "
                    f"{side.get('flavour')!r} reference's {ref_cycles!r}")
    return None


def _contend_fault(c) -> str | None:
    """Why `c` is not a lapis.model.contend.Contend's fields (finite cycles above zero; gap at or above zero and
    below gemm and gemm_under_softmax, so Contend.factors has finite rates), or None."""
    if not isinstance(c, dict) or set(c) != set(contend.FIELDS) or not all(
            _num(x) and 0 <= x < CONTEND_MAX for x in c.values()):
        return f"contend {c!r}, not {contend.FIELDS} in [0, {CONTEND_MAX}) cycles"
    if min(v for k, v in c.items() if k != "gap") <= 0 or c["gap"] >= min(c["gemm"], c["gemm_under_softmax"]):
        return f"contend {c!r}: a state of zero cycles, or a gap not below the GEMM pair's cycles (gemm, " \
               "gemm_under_softmax)"
    return None


def _file_fault(d) -> str | None:
    """Why `d` is not a consumer-loop file, or None: each loop passes _loop_fault and _scale_fault, each
    third_party loop _body_fault and _scale_fault with THIRD_PARTY's flavour, and schedules
    holds schedule_defaults()'s entries whose loop is here. A kernel added to the catalog since the file was
    written has no loop yet (kernel_loop cannot name it until --write), and is not a fault."""
    if not isinstance(d, dict) or d.get("schema") != SCHEMA:
        return f"schema {d.get('schema') if isinstance(d, dict) else type(d).__name__!r}, not {SCHEMA!r}"
    loops, schedules = d.get("loops"), d.get("schedules")
    if not isinstance(loops, dict) or not isinstance(schedules, dict):
        return "no loops or schedules object"
    ref = d.get("micro_reference")
    if not isinstance(ref, dict) or set(ref) != set(FLAVOURS):
        return f"micro_reference, not one entry per flavour {FLAVOURS}"
    for f, r in ref.items():
        if (why := _contend_fault(r.get("contend") if isinstance(r, dict) else None)) is not None:
            return f"micro_reference {f!r}: {why}"
    for key, loop in loops.items():
        if (why := _loop_fault(key, loop) or _scale_fault(loop, ref)
                or _contend_fault(loop["softmax_side"].get("contend"))) is not None:
            return f"loop {key!r}: {why}"
    third = d.get("third_party")
    if not isinstance(third, dict) or set(third) != set(THIRD_PARTY):
        return f"third_party, not one loop per kernel of {sorted(THIRD_PARTY)}"
    for key, loop in third.items():
        if (why := _body_fault(loop, THIRD_PARTY[key][3]) or _scale_fault(loop, ref)
                or _contend_fault(loop["softmax_side"].get("contend"))) is not None:
            return f"third_party loop {key!r}: {why}"
        if loop["softmax_side"]["flavour"] != THIRD_PARTY[key][2]:
            return f"third_party loop {key!r}: flavour {loop['softmax_side']['flavour']!r}, not {THIRD_PARTY[key][2]!r}"
    defaults = schedule_defaults()
    if not schedules or any(k not in loops or defaults.get(s) != k for s, k in schedules.items()):
        return f"schedules, not each the catalog's default with its loop here: {schedules!r} (catalog: {defaults!r})"
    return None


@functools.lru_cache(maxsize=4)
def _load(path: Path, _version) -> dict:
    d = smsp._read_json(path)
    if (why := _file_fault(d)) is not None:
        raise CaptureError("not a consumer-loop file (the loop of each ping-pong kernel of lapis.catalog.attention "
                           "with its schedule and turn order, plausible turn cycles and HGMMA counts and its "
                           "softmax_scale; each schedule's default)", f"{path}: {why}"[:500],
                           "regenerate: python -m lapis.model.consumer_loop --write")
    return d


def segment_cycles(turn: dict, first_ksteps: int, second_ksteps: int) -> dict[str, float]:
    """A turn's segment cycles when its first and second wgmma groups have `first_ksteps` and `second_ksteps` k16
    steps (QK: D / 16, PV: block_n / 16): each group's segment scales with its HGMMA count (descriptors and issue
    per k-step), pre stays."""
    c, h = turn["cycles"], turn["hgmma"]
    return dict(pre=c["pre"], first=c["first"] * first_ksteps / h["first"],
                second=c["second"] * second_ksteps / h["second"])


def write(path: Path, text: str) -> None:
    """Write `text` to `path` atomically: a temporary file in the same folder, then os.replace, so a reader (or a
    run interrupted part-way) sees the old file or the new one, never half of one. CaptureError naming the path when
    the folder cannot be written; the temporary file is removed."""
    path, tmp = Path(path), None
    try:
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp",
                                         delete=False) as f:
            tmp = Path(f.name)
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        raise CaptureError(f"{path.name} is written in its folder (a temporary file, then os.replace)",
                           f"{path}: {e}", f"make {path.parent} writable, then rerun with --write") from None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lapis.model.consumer_loop", description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"compile the kernels and write {LOOPS.name}")
    a = ap.parse_args(argv)
    try:
        if a.write:
            write(LOOPS, json.dumps(build(), indent=0) + "\n")
        d = load()
    except LapisError as e:
        print(f"lapis.model.consumer_loop: {e}", file=sys.stderr)
        return 2
    print(f"{'kernel':<8} {'schedule':<24} {'pre':>5} {'first':>5} {'second':>6}  turn cycles; softmax side: "
          "instructions, scale and scale alone (against the microbenchmark's loop)")
    for key, lp in d["loops"].items():
        c, side = lp["turn"]["cycles"], lp["softmax_side"]
        print(f"{key:<8} {lp['schedule']:<24} {c['pre']:>5.0f} {c['first']:>5.0f} {c['second']:>6.0f}  "
              f"{side['instructions']:>4} x{side['softmax_scale']:.3f} x{side['softmax_scale_alone']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
