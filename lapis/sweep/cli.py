"""`lapis sweep`: the command line over lapis.sweep.run.run_sweep (argument parsing and printing only).

Imports nothing heavy at module level: `lapis --help` must work on a machine without simpy or matplotlib.
"""

from __future__ import annotations

import json
import sys


def add_parser(sub) -> None:
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
    sw.add_argument("--provenance", help="with --validate-top: JSON from `python -m lapis.provenance $(lapis bench "
                    "attention --sources)`, made where git is, for the kernels' manifest")
    sw.add_argument("--json", action="store_true", help="machine-readable output (summary and rows)")


def check_validate_args(args) -> None:
    """--validate-top K needs K >= 1; --provenance only goes with it. Raises LayoutError before anything runs."""
    from lapis.errors import LayoutError
    if args.validate_top is not None and args.validate_top < 1:
        raise LayoutError("--validate-top times a count of configurations >= 1", args.validate_top,
                          "e.g. --validate-top 2, or leave it out")
    if args.provenance is not None and args.validate_top is None:
        raise LayoutError("--provenance goes with --validate-top (it describes the kernels timed)",
                          repr(args.provenance), "add --validate-top K, or drop --provenance")


def cli_sweep(args) -> int:
    from lapis.sweep.run import run_sweep
    check_validate_args(args)
    from lapis.sweep.table import top_text
    r = run_sweep(args.schedule, args.shapes, args.grid, args.gpu, args.random, args.seed, args.fast,
                  args.executor, args.workers, args.out, args.check, args.top)
    if args.json:
        print(json.dumps({k: v for k, v in r.items() if k not in ("csv", "ranked")}, indent=1))
    else:
        print(summary_text(r))
        print(top_text(r["ranked"], r["shapes"], args.top))
    if args.validate_top is not None:
        from lapis.sweep.validate import validate_top
        path = validate_top(r, args.validate_top, args.out, args.provenance)  # LayoutError without a GPU: exit 2, table kept
        print(f"wrote {path}", file=sys.stderr if args.json else sys.stdout)
    return 0


def summary_text(r: dict) -> str:
    c = r["counts"]
    lines = [f"{r['schedule']} on {r['gpu']} ({r['mode']}): {r['configurations']} configurations x "
             f"{len(r['shapes'])} shapes = {c['rows']} rows ({c['computed']} computed in {c['wall_s']:.1f} s, "
             f"{c['resumed']} resumed); {r['fits']} fit, {r['runnable']} runnable"]
    if c["stale"] or r["dropped_partial_lines"]:
        lines.append(f"resume store: {c['stale']} stored rows recomputed as stale (another profile, model or lapis "
                     f"version), {r['dropped_partial_lines']} invalid or cut-short lines dropped (their rows "
                     "recomputed where swept)")
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
