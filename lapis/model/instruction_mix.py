"""Instruction mixes of the measured kernels, per code region, and the executed counts they give for a run.

A kernel's SASS (lapis.model.sass) is split into regions by its loops. Loops of at most TINY instructions are
waits and elect-one retries (an mbarrier try_wait spin, a TMA issue loop): counted once per entry, as straight
code. Of the others, a loop holding tensor instructions (HGMMA, HMMA) is a consumer loop and one holding UTMALDG
(TMA loads) without them a producer loop; the innermost of each kind runs once per K/V (or K) block, an enclosing
one once per tile (a persistent kernel's tile loop):

    block        innermost consumer loop             one iteration per block, every consumer warp
    rescale      its conditional O rescale           rescale_per_block of the block iterations
    tile         enclosing consumer loop, the rest   one iteration per tile, every consumer warp
    load_block   innermost producer loop             one iteration per block, one producer warp
    load_tile    enclosing producer loop, the rest   one iteration per tile, one producer warp
    straight     everything else                     once per CTA, every warp of the CTA (an upper bound: a
                                                     warp runs only its role's branch)

The block iterations are fixed by the run's tensor work, not by a count of the trace: every consumer warp issues
`tensor_per_block` tensor instructions per block of the simulation's work order (tiles x blocks per tile), so the
block loop runs (that total - the tile and straight regions' tensor instructions) / its own, which also covers a
first or last block the compiler peeled out of the loop. executed() returns warp-level instruction counts per pipe
(what Nsight Compute's sm__inst_executed_pipe_<pipe>.sum counts; NCU_PIPE, "other" for none). Spin loops are counted once, so the lsu, adu and
cbu counts are low by every repeated try_wait.

MIXES (lapis/data/instruction_mix.json) holds the regions' per-pipe counts of each kernel function, written by

    python -m lapis.model.instruction_mix --write    # compiles attention_h200.cu and gemm_ws.cu (nvcc, sm_90a)

with its provenance (nvcc release, the sources' sha256); the FA2 kernel's from the SASS column of its Nsight
Compute source page (captures/ncu/h200-2026-12-01-units/flash_sass_counts.csv.gz; the executed counts there are
not used).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import sys
from collections import Counter
from pathlib import Path

from lapis.data import CAPTURES, DATA
from lapis.errors import CaptureError, LapisError
from lapis.model import sass, smsp

MIXES = DATA / "instruction_mix.json"
KERNELS = DATA.parent / "gpu" / "kernels"
FLASH_CSV = CAPTURES / "ncu" / "h200-2026-12-01-units" / "flash_sass_counts.csv.gz"
FLAGS = "-std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin"  # what smsp.softmax_sass compiles with
TINY = 16  # instructions: a loop this short is a wait or an elect-one retry, not a block or tile loop
TENSOR_OPS = ("HGMMA", "HMMA")
REGIONS = ("block", "rescale", "tile", "load_block", "load_tile", "straight")
RESCALE_FMULS = 32  # a forward branch in the block loop over at least this many FMUL skips the O rescale
# Nsight Compute's sm__inst_executed_pipe_<pipe> for opcodes whose pipe lapis.model.sass.PIPE_OF (the issue model's)
# does not give there; None: counted in no pipe (only in sm__inst_executed.sum). Chosen on the ncu units capture
# (h200-2026-12-01-units): with R2UR on uniform the alu counts of s3..s9 and the GEMM were 4-28% low, with UMOV and
# SYNCS on uniform and lsu those pipes 55-74% and 180-1600% high (and FA2's uniform 15%); so these three rows are
# fitted to that capture, not independent of it.
NCU_PIPE = {"R2UR": "alu", "UMOV": None, "SYNCS": None}
# the kernel functions of the ncu units captures built here: (source, function); s14 beside s13, the same kernel
# but for the wgmma descriptors built by increments (its K/V-tile loop's uniform-datapath work)
BUILT = {"s3": ("attention_h200.cu", "attn_s3_two_consumers_s2_n128_c2"),
         "s5": ("attention_h200.cu", "attn_s5_intra_overlap_s2_n128_c2"),
         "s9": ("attention_h200.cu", "attn_s9_tuned_s3_n128_c2"),
         "s9:causal": ("attention_h200.cu", "attn_s9_tuned_causal_s3_n128_c2"),
         "s13": ("attention_h200.cu", "attn_s13_two_q_one_chain_s2_n128_c2"),
         "s14": ("attention_h200.cu", "attn_s14_desc_inc_s2_n128_c2"),
         "gemm": ("gemm_ws.cu", "gemm_ws_s4_c2_n128_bf16")}


# instructions between a TRYWAIT and the branch that skips its retry path when it succeeds. ptxas puts an IMAD.MOV
# between them in s4, s6, s7, s9, s10 and s18; counting those retry paths as skipped too (2) makes s9's softmax side
# 60 cycles cheaper and the simulated s9 faster than s8, where the H200 ran s8 1-5% faster at the FA4 shapes
# (tests/pipeline_sim/test_hopper_schedules.py): the cost that ordering needs is not modelled, so those paths stay
WAIT_GAP = 0


def _tensor(instrs) -> int:
    return sum(i.opcode in TENSOR_OPS for i in instrs)


def waits_slow_path(instrs: list[sass.Instruction]) -> set[int]:
    """Indices skipped when every mbarrier wait succeeds at its first try: the instructions between a forward
    branch on a wait's result and the branch's target (the wait's retry and timeout path). The result is either a
    SYNCS...TRYWAIT's, which the branch follows within WAIT_GAP instructions (right after it), or a non-blocking test's
    (SYNCS.PHASECHK without TRYWAIT: mbarrier.test_wait, attention_h200.cu s19), taken earlier: the latest write of
    the predicate on the way back from the branch, past instructions already skipped and past no other branch and
    no other branch's target (a loop head or a join, where the predicate may come from another path). An
    unguarded write only: a guarded test (@P SYNCS.PHASECHK) may leave the predicate as it was."""
    index = {ins.address: k for k, ins in enumerate(instrs)}
    joins: dict[int, list[int]] = {}  # instruction index -> the branches that jump to it
    for k, ins in enumerate(instrs):
        if ins.opcode == "BRA" and ins.target in index:
            joins.setdefault(index[ins.target], []).append(k)
    out: set[int] = set()
    for k in range(1, len(instrs)):
        ins = instrs[k]
        if not (ins.opcode == "BRA" and ins.predicate and not ins.predicate.startswith("!")
                and ins.target in index and ins.target > ins.address):
            continue
        at = _predicate_writer(instrs, k, out, joins)
        if at is not None and instrs[at].opcode == "SYNCS" and "PHASECHK" in instrs[at].modifiers \
                and instrs[at].predicate is None and ("TRYWAIT" not in instrs[at].modifiers or k - at <= WAIT_GAP + 1):
            out.update(range(k + 1, index[ins.target]))
    return out


def _predicate_writer(instrs: list[sass.Instruction], k: int, skipped: set[int],
                      joins: dict[int, list[int]]) -> int | None:
    """The index of the instruction that last wrote branch k's predicate on the path that skips `skipped`: walking
    back over skipped instructions and over the branches that jump them; None at any other branch, or past an
    instruction that another branch jumps to (`joins`), unless that branch is one that jumps skipped
    instructions to it."""
    pred = instrs[k].predicate
    for j in range(k, -1, -1):
        if j in skipped:
            continue
        prev = instrs[j]
        if j < k and pred in prev.dests:
            return j
        if j < k and prev.opcode in ("BRA", "CALL", "RET", "EXIT") and not (prev.opcode == "BRA" and j + 1 in skipped):
            return None
        if any(not (b < j and all(i in skipped for i in range(b + 1, j))) for b in joins.get(j, ())):
            return None  # j is reached from elsewhere too (the branch k itself included: a loop head)
    return None


def ncu_pipe(opcode: str) -> str:
    """The pipe Nsight Compute counts an opcode in (NCU_PIPE, else PIPE_OF); "other": none of them."""
    op = opcode.split(".")[0]
    return (NCU_PIPE[op] or "other") if op in NCU_PIPE else sass.pipe_of(op)


def rescale_path(instrs: list[sass.Instruction], region: list[str]) -> set[int]:
    """Indices of the block loop's conditional O rescale: what a forward branch there jumps over when that holds
    at least RESCALE_FMULS FMULs (attention_softmax.cuh: rescale_o runs only when a row's max moved)."""
    index = {ins.address: k for k, ins in enumerate(instrs)}
    out: set[int] = set()
    for k, ins in enumerate(instrs):
        if (region[k] == "block" and ins.opcode == "BRA" and "DIV" not in ins.modifiers and ins.predicate
                and ins.target in index and ins.target > ins.address):
            span = range(k + 1, index[ins.target])
            inside_block = all(region[j] == "block" for j in span)
            if inside_block and sum(instrs[j].opcode == "FMUL" for j in span) >= RESCALE_FMULS:
                out.update(span)
    return out


def regions(instrs: list[sass.Instruction]) -> dict[str, Counter]:
    """Per-pipe instruction counts of each region (module docstring), plus "tensor_ops" per region."""
    big = [lp for lp in sass.loops(instrs) if lp.tail - lp.head + 1 > TINY]

    def inside(a, b) -> bool:  # loop a within loop b
        return b.head <= a.head and a.tail <= b.tail and a != b

    kind = {}
    for lp in big:
        body = instrs[lp.head:lp.tail + 1]
        if _tensor(body):
            kind[lp] = "block"
        elif any(i.opcode == "UTMALDG" for i in body):
            kind[lp] = "load_block"
    region = ["straight"] * len(instrs)
    for lp in sorted(kind, key=lambda x: x.head - x.tail):  # outermost first, inner loops overwrite
        encloses = any(inside(o, lp) for o in kind if kind[o] == kind[lp])  # then lp is a tile loop
        name = kind[lp].replace("block", "tile") if encloses else kind[lp]
        for k in range(lp.head, lp.tail + 1):
            region[k] = name
    slow = waits_slow_path(instrs)
    for k in rescale_path(instrs, region):
        region[k] = "rescale"
    out = {r: Counter() for r in REGIONS}
    for k, (ins, r) in enumerate(zip(instrs, region)):
        if k in slow:
            continue
        out[r][ncu_pipe(ins.opcode)] += 1
        out[r]["tensor_ops"] += ins.opcode in TENSOR_OPS
    return out


def executed(mix: dict, tiles: int, blocks: int, ctas: int, consumer_warps: int, warps_per_cta: int,
             tensor_per_block: float, rescale_per_block: float = 1.0) -> dict[str, float]:
    """Warp instructions per pipe over the whole run (module docstring). tiles, blocks (summed over tiles) and
    ctas: the simulation's work order; tensor_per_block: tensor instructions one consumer warp issues per block;
    rescale_per_block: how often a warp runs the conditional O rescale per block. Pipes: sass.PIPES and "other".
    CaptureError when the block loop cannot carry the run's tensor work."""
    blk, tile, straight = mix["block"], mix["tile"], mix["straight"]
    tile_iters = tiles if sum(tile.values()) else 0
    rest = blocks * tensor_per_block - tile_iters * tile.get("tensor_ops", 0) - ctas * straight.get("tensor_ops", 0)
    if not blk.get("tensor_ops") or rest < 0:
        raise CaptureError("the kernel's block loop cannot carry the run's tensor instructions",
                           f"block loop {blk.get('tensor_ops', 0)}, left {rest}", "check the kernel and its case")
    block_iters = rest / blk["tensor_ops"]
    load_tile_iters = tiles if sum(mix["load_tile"].values()) else 0
    out = {}
    resc = mix.get("rescale", {})
    for p in (*sass.PIPES, "other"):
        out[p] = (consumer_warps * (block_iters * (blk.get(p, 0) + rescale_per_block * resc.get(p, 0))
                                    + tile_iters * tile.get(p, 0))
                  + warps_per_cta * ctas * straight.get(p, 0)
                  + blocks * mix["load_block"].get(p, 0) + load_tile_iters * mix["load_tile"].get(p, 0))
    return out


@functools.lru_cache(maxsize=1)
def fa2_phases() -> dict[str, tuple[sass.Instruction, ...]]:
    """FA2's K/V-tile loop (its block region, in address order; FLASH_CSV's SASS at hdim 128: block 128 x 64, 4
    warps) split where QK's mma.sync end and PV's begin: "qk" up to QK's last HMMA, "head" (the row max, the
    rescale factors, the O rescale, the first row's exponentials) up to PV's first HMMA, "pv" the rest. HMMA and
    LDSM are left out (the schedule costs the GEMMs itself). CaptureError if the loop has not two equal GEMMs."""
    instrs = sass.parse_ncu_source_csv(FLASH_CSV)
    big = [lp for lp in sass.loops(instrs) if lp.tail - lp.head + 1 > TINY and _tensor(instrs[lp.head:lp.tail + 1])]
    if not big:
        raise CaptureError("no mma.sync loop in FA2's SASS", str(FLASH_CSV), "check the capture's source page")
    body = instrs[min(lp.head for lp in big):max(lp.tail for lp in big) + 1]
    mma = [k for k, i in enumerate(body) if i.opcode == "HMMA"]
    if len(mma) % 2:
        raise CaptureError("FA2's loop should hold QK's and PV's mma.sync, as many each", len(mma),
                           "check the capture's source page")
    qk_end, pv_start = mma[len(mma) // 2 - 1], mma[len(mma) // 2]

    def keep(seg):
        return tuple(i for i in seg if i.opcode not in ("HMMA", "LDSM"))

    return {"qk": keep(body[:qk_end + 1]), "head": keep(body[qk_end + 1:pv_start]), "pv": keep(body[pv_start:])}


def load(path: Path = MIXES) -> dict:
    """The committed mixes ({kernel key: {function, source, regions}}, provenance). CaptureError if unreadable."""
    d = smsp._read_json(path)
    if d.get("schema") != "lapis.instruction-mix/1" or not isinstance(d.get("kernels"), dict):
        raise CaptureError("not an instruction-mix file", str(path), "regenerate: python -m lapis.model.instruction_mix"
                           " --write")
    return d


# ------------------------------------------------------------------------------------------ --write --

def compiled(source: Path) -> dict[str, list[sass.Instruction]]:
    """A kernel file's SASS per function (smsp.softmax_sass: nvcc FLAGS, cuobjdump -sass, parsed), compiled once
    per process and file content."""
    source = Path(source)
    return _compiled(source, hashlib.sha256(source.read_bytes()).hexdigest())


@functools.lru_cache(maxsize=4)
def _compiled(source: Path, _sha256: str) -> dict[str, list[sass.Instruction]]:
    return smsp.softmax_sass(source)


def build() -> dict:
    """The mixes of BUILT (compiled here) and of the FA2 kernel (its ncu source page), with provenance."""
    out: dict = {}
    for key, (src, fn) in BUILT.items():
        out[key] = dict(function=fn, source=f"lapis/gpu/kernels/{src}",
                        regions=_plain(regions(compiled(KERNELS / src)[fn])))
    flash = sass.parse_ncu_source_csv(FLASH_CSV)
    out["flash"] = dict(function="pytorch_flash::flash_fwd_kernel (FA2 forward, the ncu capture's)",
                        source=str(FLASH_CSV.relative_to(DATA)) + " (Source column; executed counts not used)",
                        regions=_plain(regions(flash)))
    return {"schema": "lapis.instruction-mix/1", "nvcc": nvcc_release(), "flags": FLAGS,
            "source_sha256": source_digests(),
            "regions": f"lapis.model.instruction_mix.regions (TINY = {TINY})", "kernels": out}


def nvcc_release() -> str:
    """The last line of `nvcc --version` (its build); CaptureError (smsp.run_tool) when nvcc fails or does not
    answer in 60 s."""
    return smsp.run_tool([smsp._tool("nvcc"), "--version"], 60, "printing its version").strip().splitlines()[-1]


def source_digests() -> dict[str, str]:
    """sha256 of the compiled sources and of every header beside them (what a rebuild would read)."""
    files = sorted({src for src, _ in BUILT.values()} | {f.name for ext in ("*.cuh", "*.h", "*.inc")
                                                          for f in KERNELS.glob(ext)})
    return {f"lapis/gpu/kernels/{f}": hashlib.sha256((KERNELS / f).read_bytes()).hexdigest() for f in files}


def _plain(r: dict) -> dict:
    return {name: {k: v for k, v in sorted(c.items()) if v} for name, c in r.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lapis.model.instruction_mix", description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"compile the kernels and write {MIXES.name}")
    a = ap.parse_args(argv)
    try:
        d = build() if a.write else load()
    except LapisError as e:
        print(f"lapis.model.instruction_mix: {e}", file=sys.stderr)
        return 2
    if a.write:
        MIXES.write_text(json.dumps(d, indent=1, sort_keys=False) + "\n")
    for key, k in d["kernels"].items():
        print(key, {r: sum(v for p, v in c.items() if p != "tensor_ops") for r, c in k["regions"].items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
