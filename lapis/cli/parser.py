"""The argument parser of every `lapis` subcommand, in one place, so one grammar serves all of them.

One name per idea: an option or value spelled two ways is spelled one way here; the old spellings still work for
one release (DEPRECATED_OPTIONS, DEPRECATED_VALUES), rewritten before parsing with a note on stderr. Every
subcommand takes --json (its result as JSON on stdout, nothing else there) and exits with EXIT_CODES.

Imports nothing heavy: `lapis --help` and `lapis capture ...` run on a GPU host without simpy or tensor-layouts.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys

import lapis
from lapis.cli.tma import add_map_args, integer
from lapis.errors import FIX_CHARS, shown
from lapis.pipeline_sim.work_order import ORDERS

# One set of exit codes for every subcommand; lapis.cli.main maps lapis.errors.LapisError to "bad input".
EXIT_CODES = {"ok": 0, "check failed": 1, "bad input": 2, "deadlock": 3, "race": 4}
EXIT_MEANINGS = {0: "ok", 1: "a check found a problem (a capture that disagrees with the layout or mma model, a "
                 "tensor map the driver would reject); the accuracy reports (validate timelines, units, seeds, "
                 "micro) and compare exit 0 whatever their errors", 2: "bad input (a named error on stderr)", 3: "deadlock (lapis simulate)",
                 4: "race (lapis simulate --races)"}
EPILOG = "exit status, the same for every command:\n" + "\n".join(f"  {c}  {m}" for c, m in EXIT_MEANINGS.items())

# Old spelling -> the one name. Accepted for one release; lapis.cli.main rewrites them and says so on stderr.
DEPRECATED_OPTIONS = {"--base": "--smem-base", "--png": "--figure", "--runs": "--repeats",
                      "--timeout": "--timeout-s", "--item-timeout-s": "--timeout-s"}
# Values of --swizzle: the driver's CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B and PTX's "128B with 32B atomicity".
DEPRECATED_VALUES = {"--swizzle": {"128B_base32B": "128B_atom32B"}}

# Subcommands whose options belong to a lapis.gpu module's own parser: lapis reads --json, forwards the rest.
FORWARDED = {("capture", "wgmma"): "lapis.gpu.capture_wgmma", ("capture", "micro"): "lapis.gpu.capture_micro",
             ("capture", "gemm"): "lapis.gpu.bench_gemm", ("bench", "attention"): "lapis.gpu.bench_attention"}

DTYPE_CHOICES = ("e4m3", "e5m2", "f16", "bf16", "tf32", "f32", "u8", "s8")
SWIZZLE_CHOICES = ("none", "32B", "64B", "128B", "128B_atom32B")


def package_version() -> str:
    """The installed distribution's version (pyproject.toml), else lapis.__version__ (a source checkout)."""
    try:
        return importlib.metadata.version("lapis")
    except importlib.metadata.PackageNotFoundError:
        return getattr(lapis, "__version__", "unknown")


def deprecations(argv: list[str]) -> tuple[list[str], list[str]]:
    """(argv with every old spelling replaced by its one name, one note per replacement for stderr)."""
    out, notes = [], []
    for tok in argv:
        name, eq, value = tok.partition("=")
        if name in DEPRECATED_OPTIONS:
            notes.append(f"{name} is deprecated; use {DEPRECATED_OPTIONS[name]}")
            name = DEPRECATED_OPTIONS[name]
            tok = name + eq + value
        flag, old = (name, value) if eq else (out[-1] if out else "", tok)
        new = DEPRECATED_VALUES.get(flag, {}).get(old)
        if new:
            notes.append(f"{flag} {old} is deprecated; use {flag} {new}")
            tok = f"{flag}={new}" if eq else new
        out.append(tok)
    return out, notes


class LapisParser(argparse.ArgumentParser):
    """argparse with abbreviations off: `--rep` is not a second name of `--repeats`."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        """argparse's usage error (usage and message on stderr, exit 2), with the message kept on the SystemExit
        for lapis.cli.main's --json answer; a message longer than lapis.errors.FIX_CHARS is cut."""
        self.print_usage(sys.stderr)
        exc = SystemExit(2)
        # argparse quotes what was typed, whole: cut it as lapis's own errors are (lapis.errors.shown)
        exc.usage_error = f"{self.prog}: error: {shown(message, FIX_CHARS)}"
        self._print_message(exc.usage_error + "\n", sys.stderr)
        raise exc

    def _print_message(self, message, file=None):
        # usage errors quote what was typed, which may hold bytes no encoding takes (os.fsdecode(b"\xff"))
        if message:
            file = file or sys.stderr
            enc = getattr(file, "encoding", None) or "utf-8"
            file.write(message.encode(enc, "backslashreplace").decode(enc, "replace"))


def count(least: int):
    """An argparse type: a whole number >= least (a count of rows, workers, configurations...)."""
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {least}, got {text!r}") from None
        if value < least or value >= 2**31:
            raise argparse.ArgumentTypeError(f"expected a whole number from {least} to 2**31 - 1, got {text}")
        return value
    parse.__name__ = f"count>={least}"
    return parse


def below_2_31(text: str) -> int:
    """An argparse type: a whole number below 2**31 (counts whose lower bound the library checks and names)."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value >= 2**31:
        raise argparse.ArgumentTypeError(f"expected a whole number below 2**31, got {text}")
    return value


def text(value: str) -> str:
    """An argparse type: a non-empty string (an empty one would read as 'not given' and pick the default)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("expected a value, got an empty string")
    return value


# string options where an empty value means something: a rank-1 tensor has no strides; all 1 element strides
EMPTY_ALLOWED = {"--strides", "--elem-strides"}


def _non_empty_strings(parser: argparse.ArgumentParser) -> None:
    """Give every plain string option of `parser` and its subcommands the `text` type."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _non_empty_strings(sub)
        elif (action.option_strings and action.type is None and action.choices is None and action.nargs is None
              and isinstance(action, (argparse._StoreAction, argparse._AppendAction))
              and not EMPTY_ALLOWED & set(action.option_strings)):
            action.type = text


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


def _json(p: argparse.ArgumentParser, text: str = "machine-readable output") -> None:
    p.add_argument("--json", action="store_true", help=text + " (JSON on stdout; messages go to stderr)")


FIGURE_HELP = "(.png, .svg or .pdf, from the suffix)"


def _layout_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cute", help="the layout as CuTe prints it, e.g. 'Sw<3,4,3> o smem_ptr[16b](unset) o "
                   "(_8,_64):(_64,_1)' (strides in elements, swizzle on byte addresses); replaces the next 5 flags")
    p.add_argument("--major", choices=("K", "MN"), help="K-major or MN-major operand")
    p.add_argument("--swizzle", choices=SWIZZLE_CHOICES, help="swizzle span; none = interleave; 128B_atom32B = "
                   "128B with 32B atomicity (tcgen05, MN-major)")
    p.add_argument("--dtype", choices=DTYPE_CHOICES, help="element type")
    p.add_argument("--rows", type=integer, help="MN extent of the tile, in elements")
    p.add_argument("--cols", type=integer, help="K extent of the tile, in elements")
    p.add_argument("--smem-base", type=integer, default=0,
                   help="absolute shared-memory byte address of the tile (decimal or 0x hex); default 0")
    p.add_argument("--order", choices=("mn-first", "k-first"),
                   help="atom stacking order; default mn-first for K-major, k-first for MN-major")
    _json(p)


def _forwarded(sub, name: str, text: str):
    """A subcommand whose options are a lapis.gpu module's (FORWARDED): lapis reads --json, the module the rest
    (--help included)."""
    p = sub.add_parser(name, help=text, add_help=False)
    _json(p, "a JSON summary: the exit status, and the error when there is one")
    p.set_defaults(forward_args=[])
    return p


def build_parser() -> argparse.ArgumentParser:
    ap = LapisParser(prog="lapis", description="Layout and pipeline simulator for Hopper/Blackwell kernels, "
                     "checked against H200 captures.", epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=f"lapis {package_version()}")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    rep = sub.add_parser("report", help="validate the model against the shipped captures and write a report")
    rep.add_argument("--out", default="lapis-report", help="output folder (default lapis-report/)")
    rep.add_argument("--captures", help="captures folder (default: the ones shipped with lapis)")
    _json(rep, "the report's numbers")
    rep.add_argument("--resimulate", action="store_true", help="re-simulate every schedule prediction instead of "
                     "reading the current ones from the committed cache")

    lay = sub.add_parser("layout", help="canonical smem layouts and matrix descriptors").add_subparsers(
        dest="layout_cmd", required=True, metavar="SUBCOMMAND")
    show = lay.add_parser("show", help="print a canonical layout: atom, CuTe form, LBO/SBO, byte map")
    _layout_args(show)
    show.add_argument("--figure", help="also draw the tile's 16-byte chunks to this file " + FIGURE_HELP)
    show.add_argument("--lines", default="16", type=_lines, help="byte-map lines to print (one swizzle span each), or 'all' "
                      "(default 16)")
    desc = lay.add_parser("desc", help="the matrix descriptor of a canonical layout, field by field")
    desc.add_argument("--arch", required=True, choices=("sm90", "sm100"),
                      help="sm90: the wgmma matrix descriptor; sm100: the tcgen05 smem descriptor (spec-checked)")
    _layout_args(desc)
    desc.add_argument("--step", type=count(0), default=0,
                      help="MMA K-step index (each step is 32 B of K; the start address advances per step)")
    chk = lay.add_parser("check", help="do TMA loads and wgmma descriptors (or ldmatrix/LDS reads) agree? (exit 1 if "
                         "not)",
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
    chk.add_argument("--rows", type=integer, help="operand rows: 64 for A, N for B (with --desc)")
    chk.add_argument("--desc", action="append", type=integer, help="matrix descriptor of K-step 0, 1, ... (repeat)")
    chk.add_argument("--trans", type=int, choices=(0, 1), default=0,
                     help="the instruction's transpose: wgmma imm-trans, tcgen05 a/b_major (1 = MN-major)")
    chk.add_argument("--arch", choices=("sm90", "sm100"), default="sm90",
                     help="sm90: wgmma descriptors (default); sm100: tcgen05 descriptors (spec-checked)")
    chk.add_argument("--consumer", choices=("ldmatrix", "ldmatrix.trans", "lds128"),
                     help="instead of --desc: a warp reading the TMA tile's first block with ldmatrix .x4 (.trans) "
                     "or 16 B LDS per thread (rows: box dimension 1, columns: dimension 0)")
    chk.add_argument("--consumer-xor", choices=("absolute", "relative"), default="absolute",
                     help="how the consumer computes the swizzle XOR: absolute = on the smem byte address (CuTe "
                     "Swizzle<3,4,3>, as CUTLASS does; default), relative = on offsets from --smem-base")
    dec = lay.add_parser("decode", help="decode a 64-bit matrix descriptor")
    dec.add_argument("--arch", required=True, choices=("sm90", "sm100"),
                     help="sm90: the wgmma matrix descriptor; sm100: the tcgen05 smem descriptor (spec-checked)")
    dec.add_argument("value", type=integer, help="descriptor value, e.g. 0x4000004000010040")
    _json(dec)

    tma = sub.add_parser("tma", help="TMA tensor maps: cuTensorMapEncodeTiled rules and box placement").add_subparsers(
        dest="tma_cmd", required=True, metavar="SUBCOMMAND")
    add_map_args(tma.add_parser("check", help="list every cuTensorMapEncodeTiled rule the tensor map breaks",
                                description="Exit status: 0 if every rule holds, 1 if any is broken (each is "
                                "listed: the driver would reject the map), 2 if the input is malformed."))
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
    _json(ctma, "a JSON summary: the exit status, and the error when there is one")

    _forwarded(cap, "wgmma", "wgmma reads through matrix descriptors: `prepare --out DIR` (CPU), then "
               "`run --inputs DIR --out OUT` (GPU only)")
    _forwarded(cap, "micro", "microbenchmarks for the h200 profile: --out DIR [--provenance FILE] (GPU only; "
               "--help lists the rest)")
    _forwarded(cap, "gemm", "time the warp-specialized GEMM against cuBLAS, with timelines: --out DIR "
               "[--provenance FILE] [--sizes ...] [--variants ...] (GPU only; --help lists the rest)")

    bench = sub.add_parser("bench", help="benchmark real kernels on the GPU").add_subparsers(
        dest="bench_cmd", required=True, metavar="KERNEL")
    _forwarded(bench, "attention", "check and time the Hopper attention kernels against torch SDPA, with timelines: "
               "[--variants s1,s2] [--shapes BxHxLxD,...] --out DIR [--provenance FILE] [--check-only] "
               "(GPU only; --help lists the rest)")

    cmp = sub.add_parser("compare", help="a GEMM schedule predicted against the committed H200 capture, or your "
                         "schedule against your kernel's measured timeline (--measured)",
                         description="Simulates the schedule with the captured variant's parameters and states the "
                         "total-time, steady-state K-iteration and per-role busy errors against the measured kernel, "
                         "beside the blind prediction committed before the capture. With --measured: your schedule "
                         "against the timeline your kernel recorded with lapis_timeline.cuh (docs/timeline-format.md)"
                         " or with Triton Proton's instrumentation mode (docs/timeline-format.md#triton-proton-traces),"
                         " aligned by role, op, work item and K index, with the first divergence.")
    cmp.add_argument("--schedule", required=True, help="the captured kernel's schedule (h200-gemm-ws); with "
                     "--measured, your schedule as path/to/file.py:NAME")
    cmp.add_argument("--measured", metavar="FILE", help="a timeline your kernel recorded with lapis_timeline.cuh "
                     "(.npz with buffer and meta, or the raw .bin buffer), or a Triton Proton trace (.chrome_trace, "
                     "or a folder with capture.json beside it)")
    cmp.add_argument("--shape", required=True, help="a captured MxNxK, e.g. 4096x4096x4096")
    cmp.add_argument("--variant", help="a captured variant, e.g. ws_s3_c2_n128 (default: the capture's first with a "
                     "saved timeline at this shape)")
    cmp.add_argument("--captures", help="captures folder holding gemm/<capture>/ (default: the ones shipped)")
    cmp.add_argument("--figure", help="write predicted and measured Gantt rows per role, interleaved, to this file "
                     + FIGURE_HELP)
    cmp.add_argument("--trace", help="write the predicted and the measured run into one Chrome/Perfetto trace (JSON, "
                     "µs), as two processes")
    _json(cmp)

    sim = sub.add_parser("simulate", help="simulate a warp-specialized schedule on a GPU profile")
    sim.add_argument("--list", action="store_true", help="list the schedules")
    sim.add_argument("--schedule", help="schedule name (see --list)")
    sim.add_argument("--gpu", help="profile in lapis/data/profiles (default: the schedule's own, from its name: "
                     "h200-* on h200, b200-* on b200, sm120-* on rtx5090)")
    sim.add_argument("--shape", help="the schedule's own shape form: MxNxK for the GEMM, BxHxLxD for attention")
    sim.add_argument("--param", action="append", help="key=value schedule parameter (repeat); an unknown key's error "
                     "lists the schedule's own. The Hopper attention schedules' persistent_order is one of "
                     + ", ".join(ORDERS) + " (lapis.pipeline_sim.work_order)")
    sim.add_argument("--trace", help="write a Chrome/Perfetto trace (JSON, µs) to this file")
    sim.add_argument("--figure", help="write a Gantt chart of the run (one lane per role, a steady-state window of "
                     "~3 K iterations, µs) to this file " + FIGURE_HELP)
    sim.add_argument("--causal", action="store_true", help="causal masking (the same as --param causal=1)")
    sim.add_argument("--full", action="store_true", help="simulate every SM, not only the representative one "
                     "(SMs with identical work lists are simulated once; the tail gets more bandwidth per SM)")
    sim.add_argument("--races", action="store_true", help="also run the happens-before race check over every "
                     "ring slot access (exit status 4 if a race is found; best at small shapes)")
    sim.add_argument("--max-events", type=int, metavar="N", help="the run's event bound (default 1,000,000 on the "
                     "representative SM; with --full, 500,000 over every SM simulated, estimated before the run)")
    _json(sim)

    add_sweep_parser(sub)

    val = sub.add_parser("validate", help="check the model against captures").add_subparsers(
        dest="validate_cmd", required=True, metavar="WHAT")
    vl = val.add_parser("layouts", help="TMA placement and encode rules against H200 captures")
    vl.add_argument("--captures", help="captures folder (default: the ones shipped with lapis)")
    _json(vl)
    vm = val.add_parser("mma", help="what wgmma reads through matrix descriptors, against H200 captures")
    vm.add_argument("--captures", help="captures folder (default: the ones shipped with lapis)")
    _json(vm)
    vt = val.add_parser("timelines", help="every timed kernel capture against the simulator: total-time error, "
                        "rank agreement, first divergence of the timelines")
    vt.add_argument("--captures", help="captures folder (default: the ones shipped with lapis)")
    vt.add_argument("--figures", metavar="DIR", help="write a Gantt per case, the scatter and the progression chart "
                    "into this folder")
    _json(vt)
    vu = val.add_parser("units", help="per-unit numbers (cycles, clock, tensor pipe, DRAM bytes, instructions per "
                        "pipe) of every kernel Nsight Compute measured, against the simulator")
    vu.add_argument("--captures", help="captures folder (default: the ones shipped with lapis)")
    _json(vu)
    vs = val.add_parser("seeds", help="the seed write-ups' measured tables (B200 progression %% of FA4, Emmy's RTX 5090 "
                        "moves in µs) beside lapis's predictions: error and step direction")
    _json(vs)
    vmi = val.add_parser("micro", help="every committed softmax microbenchmark (alone, beside softmax, beside "
                         "wgmma, the GEMM pair beside softmax) against the SMSP model's single-instruction "
                         "constants (compiles the microbenchmarks here: nvcc, cuobjdump)")
    _json(vmi)
    _non_empty_strings(ap)
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
    sw.add_argument("--random", type=count(1), metavar="N", help="N configurations drawn from the grid, not all")
    sw.add_argument("--seed", type=count(0), default=0, help="seed of --random and of the fast-mode check (default 0)")
    sw.add_argument("--fast", action="store_true", help="steady-state extrapolation from short runs (lapis.sweep."
                    "fast), checked against full simulations of --check sampled rows")
    sw.add_argument("--check", type=below_2_31, default=3, metavar="N", help="rows simulated in full to measure the "
                    "fast-mode error (default 3; 0: none)")
    sw.add_argument("--executor", default="pool", help="serial, pool (default: a local process pool), dask-local "
                    "(a Dask LocalCluster) or dask://HOST:PORT (a running Dask scheduler)")
    sw.add_argument("--workers", type=below_2_31, help="worker processes for pool and dask-local (default: CPU count)")
    sw.add_argument("--out", default="lapis-sweep", help="output folder: rows.jsonl, sweep.csv, pareto.png, "
                    "summary.json (default lapis-sweep)")
    sw.add_argument("--top", type=below_2_31, default=5, help="configurations printed (default 5)")
    sw.add_argument("--validate-top", type=below_2_31, metavar="K", help="GPU only: build and time the K best runnable "
                    "configurations with lapis.gpu.bench_attention; adds measured columns (validated.csv)")
    sw.add_argument("--provenance", help="with --validate-top: JSON from `python -m lapis.captures.provenance $(lapis bench "
                    "attention --sources)`, made where git is, for the kernels' manifest")
    _json(sw, "machine-readable output (summary and rows)")
