"""`lapis sweep`: the command line over lapis.sweep.run.run_sweep (argument parsing and printing only).

Imports nothing heavy at module level: `lapis --help` must work on a machine without simpy or matplotlib.
"""

from __future__ import annotations

import json
import sys

from lapis.cli.output import check_out_dir
from lapis.errors import LapisError
from lapis.sweep.run import run_sweep
from lapis.sweep.table import top_text
from lapis.sweep.validate import validate_top


def check_validate_args(args) -> None:
    """--validate-top K needs K >= 1; --provenance only goes with it. Raises LapisError before anything runs."""
    if args.validate_top is not None and args.validate_top < 1:
        raise LapisError("--validate-top times a count of configurations >= 1", args.validate_top,
                         "e.g. --validate-top 2, or leave it out")
    if args.provenance is not None and args.validate_top is None:
        raise LapisError("--provenance goes with --validate-top (it describes the kernels timed)",
                         repr(args.provenance), "add --validate-top K, or drop --provenance")


def cli_sweep(args) -> int:
    check_validate_args(args)
    check_out_dir("--out", args.out, "lapis-sweep")
    r = run_sweep(args.schedule, args.shapes, args.grid, args.gpu, args.random, args.seed, args.fast,
                  args.executor, args.workers, args.out, args.check, args.top)
    if args.json:
        print(json.dumps({k: v for k, v in r.items() if k not in ("csv", "ranked")}, indent=1))
    else:
        print(summary_text(r))
        print(top_text(r["ranked"], r["shapes"], args.top))
    if args.validate_top is not None:
        path = validate_top(r, args.validate_top, args.out, args.provenance)  # LapisError without a GPU: exit 2, table kept
        print(f"wrote {path}", file=sys.stderr if args.json else sys.stdout)
    return 0


def summary_text(r: dict) -> str:
    c = r["counts"]
    lines = [f"{r['schedule']} on {r['gpu']} ({r['mode']}): {r['configurations']} configurations x "
             f"{len(r['shapes'])} shapes = {c['rows']} rows ({c['computed']} computed in {c['wall_s']:.1f} s, "
             f"{c['resumed']} resumed); {r['fits']} fit, {r['runnable']} runnable"]
    if c["stale"] or r["dropped_partial_lines"]:
        lines.append(f"resume store: {c['stale']} stored rows recomputed as stale (another profile, model or lapis "
                     f"version), {r['dropped_partial_lines']} stored lines failed their check (cut short, "
                     "unreadable, a bad checksum or not a valid row: dropped, their rows recomputed where swept)")
    if r["simulator_limit"]:
        lines.append(f"{r['simulator_limit']} rows over the simulator's event bound (not simulated; not a "
                     "hardware limit)")
    fc = r["fast_check"]
    if fc:
        lines.append(f"fast-mode error against full simulation on {fc['sample']} sampled rows: max "
                     f"{100 * fc['max_abs_error']:.2f}%, mean {100 * fc['mean_abs_error']:.2f}% (predicted time)")
    if r["pareto"]:
        lines.append("Pareto front (max TFLOP/s, min smem): " + "; ".join(
            f"{p['config']} {p['geomean_tflops']:.1f} TFLOP/s at {p['smem_bytes']} B" for p in r["pareto"]))
    lines.append("wrote " + ", ".join(r["files"].values()))
    return "\n".join(lines)
