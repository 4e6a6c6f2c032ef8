"""The K/V-tile loop of a kernel whose every warp loads, multiplies and normalizes in order (FlashAttention-2's
mainloop: mma.sync, cp.async, __syncthreads), from its SASS, costed on the SM sub-partitions (lapis.model.smsp).

A warp's steady-state iteration (steady_body): the loop's instructions from its head to its backward branch, in
the order a warp executes them on all but the last iteration: a predicated branch out of the loop to a block that
ends in a branch back into it (the compiler's out-of-line block for a condition true on every iteration but the
last: FA2's cp.async of the next K tile) is followed, every other forward branch is not taken.

The iteration is split at its CTA barriers (BAR.SYNC: __syncthreads; the schedule models the wait itself):
segments() returns the code from the loop head up to the first barrier, between the barriers, and after the
last, each without the barrier. segment_cycles() costs each segment with smsp.simulate: `warps` warps per SMSP
run it in a loop, cycle by cycle, from the compiler's stall counts and scoreboards with the pipes capture's rates
and latencies (the tensor pipe, MUFU, the shared-memory path: ldmatrix and cp.async, shared by the warps). The
result is SMSP cycles per warp and segment: a warp's share of its sub-partition, so `warps` warps each take
`warps` times that per iteration.

LOOPS (lapis/data/warp_loops.json) holds every FA2 kernel's loops of the FA2 SASS capture (CAPTURE: torch 2.11.0's
flash_fwd_kernel for head dims 64, 128, 256, causal and not), costed with WARPS warps per SMSP (FA2 keeps two CTAs
of four warps on an SM at each of them), written by

    python -m lapis.model.warp_loop --write

with the capture files' sha256 and the constants' path; a test rebuilds it from the capture.

Not modelled: register-bank conflicts and dispatch stalls, local-memory spills beyond their LSU issue and
latency (an L1 hit assumed), instruction-cache misses, bank conflicts of ldmatrix (FA2's swizzled layout has
none: capture ncu/h200-2026-12-01-units, L1 Wavefronts Shared equal to Ideal).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import numbers
import sys
from pathlib import Path

from lapis.data import CAPTURES, DATA
from lapis.errors import CaptureError, LapisError, ScheduleError
from lapis.model import sass, smsp

TENSOR = ("HMMA",)
CAPTURE = CAPTURES / "sass" / "fa2-h200-2026-12-02" / "fa2_sass"
LOOPS = DATA / "warp_loops.json"
SCHEMA = "lapis.warp-loops/1"
WARPS = 2  # warps per SMSP: FA2's two resident CTAs of four warps (fa2_flash.resident_limit at every head dim)


def mma_loops(instrs: list[sass.Instruction]) -> list[sass.Loop]:
    """The loops holding mma.sync (HMMA), by address; a loop nested in another is dropped (the outer one is the
    tile loop only where the inner one is a retry: FA2 has none)."""
    lps = [lp for lp in sass.loops(instrs) if any(i.opcode in TENSOR for i in instrs[lp.head:lp.tail + 1])]
    return sorted(lps, key=lambda lp: lp.head)


def steady_body(instrs: list[sass.Instruction], loop: sass.Loop) -> list[sass.Instruction]:
    """The loop's steady-state iteration in execution order (module docstring). CaptureError when a detour does
    not come back into the loop within len(instrs) steps."""
    index = {ins.address: k for k, ins in enumerate(instrs)}
    out, k, steps = [], loop.head, 0
    while k <= loop.tail:
        ins = instrs[k]
        out.append(ins)
        if k == loop.tail:
            break
        tgt = index.get(ins.target) if ins.opcode == "BRA" and ins.target is not None else None
        if tgt is not None and ins.predicate and not loop.head <= tgt <= loop.tail:
            back = _detour(instrs, index, tgt, loop)
            if back is not None:
                out.extend(instrs[tgt:back[0] + 1])
                k = back[1]
                continue
        if tgt is not None and not ins.predicate:
            k = tgt if loop.head <= tgt <= loop.tail else k + 1
        else:
            k += 1
        steps += 1
        if steps > len(instrs):
            raise CaptureError("a loop's iteration does not reach its backward branch", f"loop at {loop.head}",
                               "check the SASS")
    return out


def _detour(instrs, index, start: int, loop: sass.Loop) -> tuple[int, int] | None:
    """(index of the unconditional BRA that ends the out-of-loop block at `start`, its target inside the loop),
    or None when the block does not return into the loop."""
    for j in range(start, len(instrs)):
        ins = instrs[j]
        if ins.opcode == "BRA" and not ins.predicate:
            tgt = index.get(ins.target)
            return (j, tgt) if tgt is not None and loop.head <= tgt <= loop.tail else None
        if ins.opcode in ("EXIT", "RET") or loop.head <= j <= loop.tail:
            return None
    return None


def segments(body: list[sass.Instruction]) -> list[list[sass.Instruction]]:
    """The body split at its BAR.SYNC instructions (each left out): len = barriers + 1."""
    out: list[list[sass.Instruction]] = [[]]
    for ins in body:
        if ins.opcode == "BAR" and "SYNC" in ins.modifiers:
            out.append([])
        else:
            out[-1].append(ins)
    return out


def segment_cycles(segs: list[list[sass.Instruction]], warps: int, consts: smsp.Constants) -> list[float]:
    """SMSP cycles per warp of each segment with `warps` warps per SMSP running it (smsp.simulate); 0 for an empty
    segment. CaptureError without control bits."""
    return [smsp.simulate(s, warps, consts) if s else 0.0 for s in segs]


def tile_loops(instrs: list[sass.Instruction]) -> list[sass.Loop]:
    """The mma loops that are K/V-tile loops, by address: mma_loops less the back-edges of out-of-loop blocks (a
    loop whose head lies before another's and whose branch lies inside it). A causal FA2 kernel has two (the
    masked tiles' loop, then the rest), a non-causal one one."""
    lps = mma_loops(instrs)
    return [a for a in lps if not any(b.head > a.head and b.head <= a.tail < b.tail for b in lps)]


def last_tile_loop(instrs: list[sass.Instruction]) -> sass.Loop:
    """The last of tile_loops (FA2's steady K/V-tile loop). CaptureError when the code holds no loop with mma.sync
    (a dump cut short, or not a mainloop kernel)."""
    lps = tile_loops(instrs)
    if not lps:
        raise CaptureError("no loop holding mma.sync (HMMA) in the function", f"{len(instrs)} instructions",
                           "pass a whole cuobjdump -sass dump of FA2's flash_fwd_kernel")
    return lps[-1]


def peeled_tiles(instrs: list[sass.Instruction]) -> list[list[list[sass.Instruction]]]:
    """The tiles the compiler peeled off before the last tile loop (FA2: a non-causal kernel's first tile, a
    causal one's masked tiles), each as its two segments (QK: from its K barrier to its V barrier; softmax and PV:
    from the V barrier to the next tile's K barrier or the loop's head), barriers left out: the code between the
    first BAR.SYNC before the first HMMA and the loop, cut at its barriers and paired. CaptureError when that code
    does not hold two barriers per tile."""
    loop = last_tile_loop(instrs)
    first = next((k for k, i in enumerate(instrs) if i.opcode in TENSOR), None)
    if first is None or first >= loop.head:
        return []
    bars = [k for k in range(loop.head) if instrs[k].opcode == "BAR" and "SYNC" in instrs[k].modifiers]
    start = max((k for k in bars if k < first), default=None)
    cuts = [k for k in bars if start is not None and k >= start] + [loop.head]
    if start is None or len(cuts) % 2 == 0:
        raise CaptureError("the peeled tiles before the loop do not pair their barriers",
                           f"{len(cuts) - 1} barriers from the first mma.sync's", "check the SASS")
    segs = [[i for i in instrs[a + 1:b] if not (i.opcode == "BAR" and "SYNC" in i.modifiers)]
            for a, b in zip(cuts, cuts[1:])]
    return [segs[k:k + 2] for k in range(0, len(segs), 2)]


def ends(instrs: list[sass.Instruction]) -> dict[str, list[sass.Instruction]]:
    """The code around the tiles: "prologue", from the function's start to the first BAR.SYNC before the first
    HMMA (index math, Q's and the first K's cp.async), and "epilogue", from the last tile loop's branch to the
    first EXIT after it (the row sums' reduction, O's normalization, its round trip through shared memory and
    its store); barriers left out."""
    loop = last_tile_loop(instrs)
    first = next(k for k, i in enumerate(instrs) if i.opcode in TENSOR)
    start = max((k for k in range(first) if instrs[k].opcode == "BAR" and "SYNC" in instrs[k].modifiers), default=0)
    stop = next((k for k in range(loop.tail + 1, len(instrs)) if instrs[k].opcode == "EXIT"), len(instrs))

    def plain(seg):
        return [i for i in seg if not (i.opcode == "BAR" and "SYNC" in i.modifiers)]
    return dict(prologue=plain(instrs[:start]), epilogue=plain(instrs[loop.tail + 1:stop]))


def loop_costs(instrs: list[sass.Instruction], warps: int, consts: smsp.Constants) -> list[dict]:
    """Per tile loop (tile_loops, by address): its steady iteration's instruction count, per-pipe mix, HMMA
    count, and per segment its instructions, HMMA, FP32 and MUFU counts (busy_counts) and SMSP cycles per warp with
    `warps` warps per SMSP (segment_cycles)."""
    out = []
    for lp in tile_loops(instrs):
        body = steady_body(instrs, lp)
        segs = segments(body)
        out.append(dict(instructions=len(body), hmma=sum(i.opcode in TENSOR for i in body),
                        pipes=dict(sorted(sass.pipe_mix(body).items())), barriers=len(segs) - 1,
                        segment_instructions=[len(s) for s in segs],
                        segment_hmma=[sum(i.opcode in TENSOR for i in s) for s in segs],
                        segment_busy=[busy_counts(s) for s in segs],
                        segment_cycles=segment_cycles(segs, warps, consts)))
    return out


def busy_counts(seg: list[sass.Instruction]) -> dict[str, int]:
    """The segment's instructions on the FP32 pipe ("fma") and MUFU ("xu"): what the schedule reports those
    pipes' busy time from."""
    mix = sass.pipe_mix(seg)
    return {"fma": mix.get("fma", 0), "xu": mix.get("xu", 0)}


def build(capture: Path = CAPTURE) -> dict:
    """Every kernel of the capture's manifest costed by loop_costs, with provenance (the capture's path relative to
    the repository when it lies inside it). CaptureError when the manifest is malformed, a file unreadable, or a
    function lacks its tile loop."""
    capture = Path(capture)
    man = smsp._read_json(capture / "manifest.json")
    fault = _manifest_fault(man)
    if fault:
        raise CaptureError("FA2 SASS manifest malformed", f"{capture / 'manifest.json'}: {fault}",
                           "re-extract: python -m lapis.gpu.capture_fa2_sass")
    consts = smsp.Constants.from_pipes_capture(smsp.PIPES_CAPTURE)
    kernels, digests = {}, {}
    for key, k in sorted(man["kernels"].items()):
        path = capture / k["file"]
        fns = sass.parse_cuobjdump(path)
        if k["function"] not in fns:
            raise CaptureError("the capture's file lacks its function", f"{path}: {k['function'][:60]}",
                               "re-extract: python -m lapis.gpu.capture_fa2_sass")
        ins = fns[k["function"]]
        if not tile_loops(ins):
            raise CaptureError("no loop holding mma.sync (HMMA) in the function", f"{path}: {k['function'][:60]}",
                               "re-extract: python -m lapis.gpu.capture_fa2_sass")
        kernels[key] = dict(function=k["function"], head_dim=k["head_dim"], causal=k["causal"],
                            loops=loop_costs(ins, WARPS, consts),
                            peeled=[dict(segment_instructions=[len(x) for x in t],
                                         segment_hmma=[sum(i.opcode in TENSOR for i in x) for x in t],
                                         segment_busy=[busy_counts(x) for x in t],
                                         segment_cycles=segment_cycles(t, WARPS, consts))
                                    for t in peeled_tiles(ins)],
                            **{name: dict(instructions=len(seg), cycles=segment_cycles([seg], WARPS, consts)[0])
                               for name, seg in ends(ins).items()})
        digests[k["file"]] = hashlib.sha256(path.read_bytes()).hexdigest()
    return {"schema": SCHEMA, "capture": _shown(capture), "sha256": digests,
            "constants": _shown(smsp.PIPES_CAPTURE), "warps_per_smsp": WARPS, "kernels": kernels}


def _shown(path: Path) -> str:
    """path relative to the repository root when it lies inside it, else as given."""
    root = DATA.parent.parent
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _manifest_fault(man) -> str | None:
    """What is wrong with an FA2 SASS manifest's kernels (each a file name in the capture, a function, a head dim
    and a mask), or None."""
    if not isinstance(man, dict) or not isinstance(man.get("kernels"), dict):
        return "no 'kernels' object"
    for key, k in man["kernels"].items():
        if not isinstance(k, dict):
            return f"{key}: {k!r:.60} not an object"
        f = k.get("file")
        if not isinstance(f, str) or not f or Path(f).name != f:
            return f"{key}: file {f!r:.60} not a file name in the capture"
        if (not isinstance(k.get("function"), str) or isinstance(k.get("head_dim"), bool)
                or not isinstance(k.get("head_dim"), int) or not isinstance(k.get("causal"), bool)):
            return f"{key}: function, head_dim or causal missing or mistyped"
    return None


def load(path: Path = LOOPS) -> dict:
    """The committed file, read once per file version. CaptureError if unreadable or malformed."""
    st = Path(path).stat() if Path(path).is_file() else None
    return _load(Path(path), (st.st_mtime_ns, st.st_size) if st else None)


@functools.lru_cache(maxsize=4)
def _load(path: Path, _version) -> dict:
    d = smsp._read_json(path)
    fault = _fault(d)
    if fault:
        raise CaptureError("warp-loop file malformed", f"{path}: {fault}",
                           "regenerate it: python -m lapis.model.warp_loop --write")
    return d


MAX_CYCLES = 1e9  # SMSP cycles of one segment: half a second at the H200's clock, far past any kernel's


def _cycles(c) -> bool:
    return not isinstance(c, bool) and isinstance(c, (int, float)) and math.isfinite(c) and 0 <= c <= MAX_CYCLES


def _segments_fault(where: str, x, n: int | None) -> str | None:
    """What is wrong with x's segment_cycles and segment_hmma (n of each when n is given), or None."""
    cyc = x.get("segment_cycles") if isinstance(x, dict) else None
    hmma = x.get("segment_hmma") if isinstance(x, dict) else None
    if not isinstance(cyc, list) or not cyc or (n and len(cyc) != n) or not all(_cycles(c) for c in cyc):
        return f"{where} segment_cycles {cyc!r:.60} not {n or 'a list of'} finite cycles in [0, {MAX_CYCLES:g}]"
    if (not isinstance(hmma, list) or len(hmma) != len(cyc)
            or any(isinstance(h, bool) or not isinstance(h, int) or h < 0 for h in hmma)):
        return f"{where} segment_hmma {hmma!r:.60} not {len(cyc)} counts >= 0"
    return None


def _fault(d) -> str | None:
    """What is wrong with a warp-loop file, or None: every value fa2_flash.loop_costs reads is checked."""
    if not isinstance(d, dict) or d.get("schema") != SCHEMA or not isinstance(d.get("kernels"), dict):
        return f"schema is not {SCHEMA}"
    for key, k in d["kernels"].items():
        loops = k.get("loops") if isinstance(k, dict) else None
        if not isinstance(loops, list) or not loops:
            return f"{key}: no loops"
        peeled = k.get("peeled", [])
        if not isinstance(peeled, list):
            return f"{key}: peeled {peeled!r:.60} not a list"
        faults = [_segments_fault(f"{key}: loop", lp, None) for lp in loops]
        faults += [_segments_fault(f"{key}: peeled tile", t, 2) for t in peeled]
        faults += [f"{key}: {end} cycles {k.get(end)!r:.60} not finite cycles in [0, {MAX_CYCLES:g}]"
                   for end in ("prologue", "epilogue")
                   if not (isinstance(k.get(end), dict) and _cycles(k[end].get("cycles")))]
        if any(faults):
            return next(f for f in faults if f)
    return None


def kernel(head_dim: int, causal: bool, path: Path = LOOPS) -> dict | None:
    """The committed loops of FA2's kernel for a head dim and mask, or None when the capture has none.
    head_dim: a whole number of elements (an int, a numpy integer or an integral float: 128.0 is 128); ScheduleError
    for anything else (the lookup key is "hdim<D>", which "hdim128.0" would silently miss)."""
    if (isinstance(head_dim, bool) or not isinstance(head_dim, numbers.Real) or not math.isfinite(head_dim)
            or head_dim != int(head_dim)):
        raise ScheduleError("the head dim is a whole number of elements", repr(head_dim),
                            "pass an integer head dim, e.g. 64, 128 or 256")
    return load(path)["kernels"].get(f"hdim{int(head_dim)}" + ("_causal" if causal else ""))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lapis.model.warp_loop", description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"write {LOOPS.name} (else print it)")
    a = ap.parse_args(argv)
    try:
        d = build()
    except LapisError as e:
        print(f"python -m lapis.model.warp_loop: {e}", file=sys.stderr)
        return 2
    text = json.dumps(d, indent=1, sort_keys=True) + "\n"
    if a.write:
        tmp = LOOPS.with_suffix(".json.tmp")
        tmp.write_text(text)
        tmp.replace(LOOPS)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
