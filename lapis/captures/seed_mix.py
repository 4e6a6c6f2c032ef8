"""Instruction mixes of a seed repository's kernels, derived from their SASS: the compact capture lapis keeps.

Input: one `cuobjdump -sass` listing per kernel (built elsewhere, compile only: sm_100a for the B200 seed, sm_120a for
the Emmy one); output: a capture
folder lapis/data/captures/seeds/<name>/ holding manifest.json and nothing else: the provenance (repository,
commit, file of each kernel, nvcc version, flags, cuobjdump version) and, per kernel, numbers derived from its
SASS. No source and no listing is kept.

Per kernel (lapis.model.sass reads the listing; its PIPE_OF classes the opcodes, sm_100 ones included):
- instructions, pipes: the whole function's static instruction count and its count per pipe.
- loops: every loop of the main code (a backward branch whose target and branch both precede the function's last
  EXIT; the out-of-line mbarrier try-wait retries the compiler places after it are counted in wait_loops instead)
  with at least MIN_BODY instructions: head and branch address, depth (0: outermost), its static instructions
  per pipe and per op (mnemonic with modifiers, operands dropped), the RAW dependency chain of one pass straight
  through it (lapis.model.sass.critical_path, weight 1: `chain_first` and `chain_per_iteration` in
  instructions), and `role`: the warp role its instructions suggest (ROLE_RULES, first match).
- per loop, on the SMSP constants of --constants (default CONSTANTS, the sm_100 ones: lapis/data/smsp_sm100.json;
  `--constants none` leaves these three fields out, for an arch with no constants file, e.g. sm_120): `chain_links`, the pipe of every link
  of the RAW chain of one pass when each link weighs its pipe's dependent-issue latency
  (lapis.model.smsp.dependent_latency: a TMEM load 16 cycles, MUFU 18, a shuffle 24, FMA/ALU 4), as counts per
  pipe, and `chain_cycles`, that chain's length in cycles; `warp_cycles`, one warp's cycles per iteration when it
  runs the loop alone, in order, under the compiled control bits (lapis.model.smsp.simulate with 1 warp: the
  compiler's stall counts, and the scoreboard waits of variable-latency instructions, a TMEM load's included,
  released after their pipe's latency).
Static counts: an instruction counts once whatever its guard or branch arm; execution counts need a profiler.

    python -m lapis.captures.seed_mix --sass DIR --sources FILE.json --out FOLDER [--constants PATH|none]
FILE.json: {"repository", "commit", "nvcc", "flags", "cuobjdump", "date", "kernels": {stem: repository path, or a
dict of provenance fields (e.g. file, knobs) stored in the kernel's record before its derived numbers}};
DIR holds <stem>.sass for each stem. Errors: CaptureError for a missing listing or a listing with no function.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from lapis.errors import CaptureError
from lapis.model import sass, smsp

CONSTANTS = smsp.SM100  # the SMSP constants the cycle fields are computed on
MIN_BODY = 8  # instructions: shorter loops are address arithmetic or spin waits, not a role's body
# (role, test on the loop's opcodes): the first that holds names the loop
ROLE_RULES = (
    ("serial", lambda ops: (_has(ops, "UTCHMMA") or _has(ops, "HMMA")) and _has(ops, "MUFU")),  # HMMA: mma.sync
    ("mma", lambda ops: _has(ops, "UTCHMMA")),
    ("softmax", lambda ops: _has(ops, "MUFU.EX2") or _has(ops, "FFMA2")),
    ("correction", lambda ops: _has(ops, "LDTM") and _has(ops, "STTM")),
    ("load", lambda ops: _has(ops, "UTMALDG")),
    ("epilogue", lambda ops: _has(ops, "LDTM") or _has(ops, "STG")),
)


def _has(ops: Counter, prefix: str) -> bool:
    return any(op == prefix or op.startswith(prefix + ".") for op in ops)


def role_of(ops: Counter) -> str:
    """The warp role a loop's opcodes suggest (ROLE_RULES), "other" when none holds."""
    return next((name for name, test in ROLE_RULES if test(ops)), "other")


def _mnemonic(ins: sass.Instruction) -> str:
    return ".".join((ins.opcode, *ins.modifiers))


def main_loops(instrs: list[sass.Instruction]) -> tuple[list[sass.Loop], int]:
    """(the loops of the main code, outermost first then by address; the out-of-line wait loops counted)."""
    exits = [i for i, ins in enumerate(instrs) if ins.opcode == "EXIT"]
    end = exits[-1] if exits else len(instrs) - 1
    found = sass.loops(instrs)
    main = [lp for lp in found if lp.tail <= end]
    waits = sum(lp.head > end for lp in found)
    return sorted(main, key=lambda lp: (lp.head, -lp.tail)), waits


def loop_record(instrs: list[sass.Instruction], lp: sass.Loop, depth: int, constants: Path | None = CONSTANTS) -> dict:
    """One loop's record (module docstring); constants None: without chain_links, chain_cycles and warp_cycles."""
    body = instrs[lp.head:lp.tail + 1]
    ops = Counter(_mnemonic(ins) for ins in body)
    chain = sass.critical_path(body)
    rec = dict(head=hex(lp.head_address), branch=hex(lp.branch_address), depth=depth, role=role_of(ops),
               instructions=len(body), pipes=_pipes(sass.pipe_mix(body)), ops=dict(sorted(ops.items())),
               chain_first=chain.first, chain_per_iteration=chain.per_iteration)
    if constants is None:
        return rec
    consts = smsp.Constants.load(constants)
    timed = sass.critical_path(body, weight=lambda ins: smsp.dependent_latency(ins, consts))
    return dict(rec, chain_links=_pipes(Counter(body[i].pipe for i in timed.path)), chain_cycles=timed.first,
                warp_cycles=round(smsp.simulate(body, 1, consts), 2))


def _pipes(mix: Counter) -> dict:
    return {p: mix[p] for p in sass.PIPES if mix[p]}


def kernel_record(listing: str | Path, constants: Path | None = CONSTANTS) -> dict:
    """The derived numbers of one kernel's listing (module docstring), the cycle fields on `constants` (None: left
    out). The listing's first function is the kernel (the seed files define one each)."""
    functions = sass.parse_cuobjdump(listing)
    name, instrs = next(iter(functions.items()))
    loops, waits = main_loops(instrs)
    records = []
    for lp in loops:
        if lp.tail - lp.head + 1 < MIN_BODY:
            continue
        depth = sum(o.head <= lp.head and lp.tail <= o.tail and o != lp for o in loops)
        records.append(loop_record(instrs, lp, depth, constants))
    return dict(function=name, instructions=len(instrs), pipes=_pipes(sass.pipe_mix(instrs)), wait_loops=waits,
                loops=records)


def capture(sass_dir: Path, sources: dict, constants: Path | None = CONSTANTS) -> dict:
    """manifest.json's content: the provenance and every kernel's record, in the order `sources` lists them, the
    loops' cycle fields on `constants` (None: left out, and the manifest's "constants" is null)."""
    kernels = {}
    for stem, path in sources["kernels"].items():
        listing = Path(sass_dir) / f"{stem}.sass"
        if not listing.is_file():
            raise CaptureError("every kernel of the sources file has a listing", str(listing),
                               "run cuobjdump -sass on its cubin into that file")
        fields = path if isinstance(path, dict) else dict(file=path)
        kernels[stem] = dict(**fields, **kernel_record(listing, constants))
    prov = dict(gpu="none (compiled only, not run)", driver="none", date=sources["date"],
                command=f"python -m lapis.captures.seed_mix --sass <listings> --sources <sources.json>",
                commit=sources["commit"], dirty=False, source_blobs={}, repository=sources["repository"],
                nvcc=sources["nvcc"], flags=sources["flags"], cuobjdump=sources["cuobjdump"],
                note=sources.get("note", ""))
    return dict(provenance=prov, min_body=MIN_BODY, pipes=list(sass.PIPES),
                constants=None if constants is None else f"lapis/data/{Path(constants).name}", kernels=kernels)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lapis.captures.seed_mix", description=__doc__.splitlines()[0])
    ap.add_argument("--sass", required=True, help="folder of <stem>.sass listings")
    ap.add_argument("--sources", required=True, help="JSON: repository, commit, nvcc, flags, kernels {stem: path}")
    ap.add_argument("--out", required=True, help="capture folder to write manifest.json into")
    ap.add_argument("--constants", default=str(CONSTANTS),
                    help="SMSP constants file for the cycle fields, or none to leave them out (default: %(default)s)")
    a = ap.parse_args(argv)
    consts = None if a.constants == "none" else Path(a.constants)
    man = capture(Path(a.sass), json.loads(Path(a.sources).read_text()), consts)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").write_text(json.dumps(man, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
