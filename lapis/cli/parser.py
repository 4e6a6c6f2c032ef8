"""The argument parser of every `lapis` subcommand, in one place, so one grammar serves all of them.

Imports nothing heavy: `lapis --help` and `lapis capture ...` run on a GPU host without simpy or tensor-layouts.
"""

from __future__ import annotations

import argparse

from lapis.cli.tma import add_map_args

# One set of exit codes for every subcommand; lapis.cli.main maps lapis.errors.LapisError to "bad input".
EXIT_CODES = {"ok": 0, "check failed": 1, "bad input": 2, "deadlock": 3, "race": 4}

DTYPE_CHOICES = ("e4m3", "e5m2", "f16", "bf16", "tf32", "f32", "u8", "s8")
SWIZZLE_CHOICES = ("none", "32B", "64B", "128B", "128B_base32B")


def integer(text: str) -> int:
    """Integers in decimal or 0x hex (sizes, addresses, descriptors)."""
    return int(text, 0)


LIST_OPTIONS = ("--dims", "--strides", "--box", "--elem-strides", "--coords", "--shape")


def join_negative_lists(argv: list[str]) -> list[str]:
    """`--coords -8,-3` -> `--coords=-8,-3`: argparse would read '-8,-3' as an option (and `--shape -1x8x8`,
    which the shape check then names)."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] in LIST_OPTIONS and i + 1 < len(argv) and argv[i + 1][:1] == "-" and argv[i + 1][1:2].isdigit():
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def _lines(text: str):
    """A line count or 'all'."""
    if text == "all" or (text.isdigit() and int(text) > 0):
        return text
    raise argparse.ArgumentTypeError(f"expected a positive line count or 'all', got {text!r}")


def _layout_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cute", help="the layout as CuTe prints it, e.g. 'Sw<3,4,3> o smem_ptr[16b](unset) o "
                   "(_8,_64):(_64,_1)' (strides in elements, swizzle on byte addresses); replaces the next 5 flags")
    p.add_argument("--major", choices=("K", "MN"), help="K-major or MN-major operand")
    p.add_argument("--swizzle", choices=SWIZZLE_CHOICES, help="swizzle span; none = interleave")
    p.add_argument("--dtype", choices=DTYPE_CHOICES, help="element type")
    p.add_argument("--rows", type=integer, help="MN extent of the tile, in elements")
    p.add_argument("--cols", type=integer, help="K extent of the tile, in elements")
    p.add_argument("--base", type=integer, default=0,
                   help="absolute shared-memory byte address of the tile (decimal or 0x hex); default 0")
    p.add_argument("--order", choices=("mn-first", "k-first"),
                   help="atom stacking order; default mn-first for K-major, k-first for MN-major")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="lapis", description="Layout and pipeline simulator for Hopper/Blackwell "
                                 "kernels, checked against H200 captures.")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    rep = sub.add_parser("report", help="validate the model against the shipped captures and write a report")
    rep.add_argument("--out", default="lapis-report", help="output folder (default lapis-report/)")
    rep.add_argument("--captures", help="captures folder (default: the ones shipped with lapis)")
    rep.add_argument("--json", action="store_true", help="print the report's numbers as JSON")
    rep.add_argument("--resimulate", action="store_true", help="re-simulate every schedule prediction instead of "
                     "reading the current ones from the committed cache")

    lay = sub.add_parser("layout", help="canonical smem layouts and matrix descriptors").add_subparsers(
        dest="layout_cmd", required=True, metavar="SUBCOMMAND")
    show = lay.add_parser("show", help="print a canonical layout: atom, CuTe form, LBO/SBO, byte map")
    _layout_args(show)
    show.add_argument("--png", help="also draw the tile's 16-byte chunks to this PNG")
    show.add_argument("--lines", default="16", type=_lines, help="byte-map lines to print (one swizzle span each), or 'all' "
                      "(default 16)")
    desc = lay.add_parser("desc", help="the matrix descriptor of a canonical layout, field by field")
    desc.add_argument("--arch", required=True, choices=("sm90", "sm100"),
                      help="sm90: the wgmma matrix descriptor; sm100: the tcgen05 smem descriptor (spec-checked)")
    _layout_args(desc)
    desc.add_argument("--step", type=integer, default=0,
                      help="MMA K-step index (each step is 32 B of K; the start address advances per step)")
    chk = lay.add_parser("check", help="do TMA loads and wgmma descriptors agree? (exit 1 if not)",
                         description="Places the tile with the TMA model and reads it through each K-step's "
                         "descriptor; names the first wrong element and the field that causes it.")
    add_map_args(chk, required=False)
    chk.add_argument("--cute", help="instead of a TMA plan: the smem layout as CuTe prints it (with --smem-base)")
    chk.add_argument("--smem-base", required=True, type=integer, help="absolute smem byte address of the first box")
    chk.add_argument("--coords", help="tile corner in the tensor, elements, innermost first (TMA plan)")
    chk.add_argument("--tile-cols", type=integer, help="tile extent along dimension 0 when wider than one box "
                     "(loaded as several boxes, one footprint apart)")
    chk.add_argument("--major", choices=("K", "MN"), help="the tile's major-ness in the tensor (dimension 0 is K "
                     "for K-major, MN for MN-major); with --cute it is read from the layout")
    chk.add_argument("--rows", required=True, type=integer, help="operand rows: 64 for A, N for B")
    chk.add_argument("--desc", action="append", type=integer, help="matrix descriptor of K-step 0, 1, ... (repeat)")
    chk.add_argument("--trans", type=int, choices=(0, 1), default=0,
                     help="the instruction's transpose: wgmma imm-trans, tcgen05 a/b_major (1 = MN-major)")
    chk.add_argument("--arch", choices=("sm90", "sm100"), default="sm90",
                     help="sm90: wgmma descriptors (default); sm100: tcgen05 descriptors (spec-checked)")
    dec = lay.add_parser("decode", help="decode a 64-bit matrix descriptor")
    dec.add_argument("--arch", required=True, choices=("sm90", "sm100"),
                     help="sm90: the wgmma matrix descriptor; sm100: the tcgen05 smem descriptor (spec-checked)")
    dec.add_argument("value", type=integer, help="descriptor value, e.g. 0x4000004000010040")
    dec.add_argument("--json", action="store_true", help="machine-readable output")

    tma = sub.add_parser("tma", help="TMA tensor maps: cuTensorMapEncodeTiled rules and box placement").add_subparsers(
        dest="tma_cmd", required=True, metavar="SUBCOMMAND")
    add_map_args(tma.add_parser("check", help="list every cuTensorMapEncodeTiled rule the tensor map breaks",
                                description="Exit status: 0 if every rule holds, 2 if any is broken (each is "
                                "listed) or the input is malformed."))
    place = tma.add_parser("place", help="where each element of one box lands in shared memory")
    add_map_args(place)
    place.add_argument("--smem-base", required=True, type=integer,
                       help="absolute shared-memory byte address of the box (128 B aligned; Python: dst=)")
    place.add_argument("--coords", required=True, help="box corner, elements, innermost first: 0,8 (may be < 0)")

    cap = sub.add_parser("capture", help="run capture campaigns on the GPU").add_subparsers(
        dest="capture_cmd", required=True, metavar="CAMPAIGN")
    ctma = cap.add_parser("tma", help="TMA placement dumps and cuTensorMapEncodeTiled decisions (GPU only)")
    ctma.add_argument("--out", required=True, help="output folder; gets tma/ and encode/ capture folders")
    ctma.add_argument("--provenance", help="JSON from `python -m lapis.captures.provenance` (commit, dirty, blobs)")
    ctma.add_argument("--what", choices=("all", "dumps", "encode"), default="all",
                      help="which campaign to run (default all)")
    ctma.add_argument("--tags", help="comma-separated campaign tags to run (default: all)")

    cwg = cap.add_parser("wgmma", help="wgmma reads through matrix descriptors: `prepare --out DIR` (CPU), then "
                         "`run --inputs DIR --out OUT` (GPU only)")
    cwg.add_argument("wgmma_args", nargs=argparse.REMAINDER, help="prepare|run and their options")
    # micro and gemm forward every option to their module's own parser ('+' prefix: argparse leaves '--out' alone)
    for name, text in (("micro", "microbenchmarks for the h200 profile: --out DIR [--provenance FILE] (GPU only; "
                                 "--help lists the rest)"),
                       ("gemm", "time the warp-specialized GEMM against cuBLAS, with timelines: --out DIR "
                                "[--provenance FILE] [--sizes ...] [--variants ...] (GPU only; --help lists the rest)")):
        forward = cap.add_parser(name, help=text, prefix_chars="+", add_help=False)
        forward.add_argument("forward_args", nargs=argparse.REMAINDER, help="the options of " + name)

    bench = sub.add_parser("bench", help="benchmark real kernels on the GPU").add_subparsers(
        dest="bench_cmd", required=True, metavar="KERNEL")
    att = bench.add_parser("attention", prefix_chars="+", add_help=False,
                           help="check and time the Hopper attention kernels against torch SDPA, with timelines: "
                           "[--variants s1,s2] [--shapes BxHxLxD,...] --out DIR [--provenance FILE] [--check-only] "
                           "(GPU only; --help lists the rest)")
    att.add_argument("forward_args", nargs=argparse.REMAINDER, help="the options of lapis.gpu.bench_attention")

    cmp = sub.add_parser("compare", help="a GEMM schedule predicted against the committed H200 capture, or your "
                         "schedule against your kernel's measured timeline (--measured)",
                         description="Simulates the schedule with the captured variant's parameters and states the "
                         "total-time, steady-state K-iteration and per-role busy errors against the measured kernel, "
                         "beside the blind prediction committed before the capture. With --measured: your schedule "
                         "against the timeline your kernel recorded with lapis_timeline.cuh (docs/timeline-format.md),"
                         " aligned by role, op, work item and K index, with the first divergence.")
    cmp.add_argument("--schedule", required=True, help="the captured kernel's schedule (h200-gemm-ws); with "
                     "--measured, your schedule as path/to/file.py:NAME")
    cmp.add_argument("--measured", metavar="FILE", help="a timeline your kernel recorded with lapis_timeline.cuh "
                     "(.npz with buffer and meta, or the raw .bin buffer)")
    cmp.add_argument("--shape", required=True, help="a captured MxNxK, e.g. 4096x4096x4096")
    cmp.add_argument("--variant", help="a captured variant, e.g. ws_s3_c2_n128 (default: the capture's first with a "
                     "saved timeline at this shape)")
    cmp.add_argument("--captures", help="captures folder holding gemm/<capture>/ (default: the ones shipped)")
    cmp.add_argument("--png", help="write predicted and measured Gantt rows per role, interleaved, to this PNG")
    cmp.add_argument("--trace", help="write the predicted and the measured run into one Chrome/Perfetto trace (JSON, "
                     "µs), as two processes")
    cmp.add_argument("--json", action="store_true", help="machine-readable output")

    sim = sub.add_parser("simulate", help="simulate a warp-specialized schedule on a GPU profile")
    sim.add_argument("--list", action="store_true", help="list the schedules")
    sim.add_argument("--schedule", help="schedule name (see --list)")
    sim.add_argument("--gpu", help="profile in lapis/data/profiles (default: the schedule's own, from its name: "
                     "h200-* on h200, b200-* on b200, sm120-* on rtx5090)")
    sim.add_argument("--shape", help="the schedule's own shape form: MxNxK for the GEMM, BxHxLxD for attention")
    sim.add_argument("--param", action="append", help="key=value schedule parameter (repeat)")
    sim.add_argument("--trace", help="write a Chrome/Perfetto trace (JSON, µs) to this file")
    sim.add_argument("--png", help="write a Gantt chart of the run (one lane per role, a steady-state window of "
                     "~3 K iterations, µs) to this PNG")
    sim.add_argument("--causal", action="store_true", help="causal masking (the same as --param causal=1)")
    sim.add_argument("--full", action="store_true", help="simulate every SM, not only the representative one "
                     "(SMs with identical work lists are simulated once; the tail gets more bandwidth per SM)")
    sim.add_argument("--races", action="store_true", help="also run the happens-before race check over every "
                     "ring slot access (exit status 4 if a race is found; best at small shapes)")
    sim.add_argument("--json", action="store_true", help="machine-readable output")

    add_sweep_parser(sub)

    val = sub.add_parser("validate", help="check the model against captures").add_subparsers(
        dest="validate_cmd", required=True, metavar="WHAT")
    vl = val.add_parser("layouts", help="TMA placement and encode rules against H200 captures")
    vl.add_argument("--captures", help="captures folder (default: the ones shipped with lapis)")
    vl.add_argument("--json", action="store_true", help="machine-readable output")
    vm = val.add_parser("mma", help="what wgmma reads through matrix descriptors, against H200 captures")
    vm.add_argument("--captures", help="captures folder (default: the ones shipped with lapis)")
    vm.add_argument("--json", action="store_true", help="machine-readable output")
    vt = val.add_parser("timelines", help="every timed kernel capture against the simulator: total-time error, "
                        "rank agreement, first divergence of the timelines")
    vt.add_argument("--captures", help="captures folder (default: the ones shipped with lapis)")
    vt.add_argument("--figures", metavar="DIR", help="write a Gantt per case, the scatter and the progression chart")
    vt.add_argument("--json", action="store_true", help="machine-readable output")
    vu = val.add_parser("units", help="per-unit numbers (cycles, clock, tensor pipe, DRAM bytes, instructions per "
                        "pipe) of every kernel Nsight Compute measured, against the simulator")
    vu.add_argument("--captures", help="captures folder (default: the ones shipped with lapis)")
    vu.add_argument("--json", action="store_true", help="machine-readable output")
    return ap


def add_sweep_parser(sub) -> None:
    sw = sub.add_parser("sweep", help="simulate a schedule over a grid of parameters and shapes (table, top, "
                        "Pareto front)", description="One row per configuration x shape, sorted by configuration; "
                        "configurations that do not fit are kept with the simulator's reason. Finished rows are "
                        "stored in OUT/rows.jsonl, so a rerun with the same --out computes only what is missing.")
    sw.add_argument("--schedule", required=True, help="schedule name (lapis simulate --list)")
    sw.add_argument("--gpu", choices=("h200", "b200", "rtx5090"), help="profile (default: the schedule's own)")
    sw.add_argument("--shapes", required=True, type=lambda s: [x for x in s.split(",") if x],
                    help="comma-separated shapes in the schedule's form, e.g. 8x16x4096x128,4x16x8192x128")
    sw.add_argument("--grid", action="append", metavar="KEY=V1,V2,...", help="a swept parameter (repeat)")
    sw.add_argument("--random", type=int, metavar="N", help="N configurations drawn from the grid, not all")
    sw.add_argument("--seed", type=int, default=0, help="seed of --random and of the fast-mode check (default 0)")
    sw.add_argument("--fast", action="store_true", help="steady-state extrapolation from short runs (lapis.sweep."
                    "fast), checked against full simulations of --check sampled rows")
    sw.add_argument("--check", type=int, default=3, metavar="N", help="rows simulated in full to measure the "
                    "fast-mode error (default 3; 0: none)")
    sw.add_argument("--executor", default="pool", help="serial, pool (default: a local process pool), dask-local "
                    "(a Dask LocalCluster) or dask://HOST:PORT (a running Dask scheduler)")
    sw.add_argument("--workers", type=int, help="worker processes for pool and dask-local (default: CPU count)")
    sw.add_argument("--out", default="lapis-sweep", help="output folder: rows.jsonl, sweep.csv, pareto.png, "
                    "summary.json (default lapis-sweep)")
    sw.add_argument("--top", type=int, default=5, help="configurations printed (default 5)")
    sw.add_argument("--validate-top", type=int, metavar="K", help="GPU only: build and time the K best runnable "
                    "configurations with lapis.gpu.bench_attention; adds measured columns (validated.csv)")
    sw.add_argument("--provenance", help="with --validate-top: JSON from `python -m lapis.captures.provenance $(lapis bench "
                    "attention --sources)`, made where git is, for the kernels' manifest")
    sw.add_argument("--json", action="store_true", help="machine-readable output (summary and rows)")
