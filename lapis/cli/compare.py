"""`lapis compare`: a GEMM schedule predicted against its committed H200 capture, or (--measured) a user's
schedule against the timeline the user's kernel recorded with lapis_timeline.cuh (lapis.validate.measured)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lapis.cli.output import FIGURE_SUFFIXES, check_out_file, write_output
from lapis.errors import CaptureError
from lapis.figures.compare_gantt import compare_gantt
from lapis.pipeline_sim.trace import write_chrome_runs
from lapis.validate import measured
from lapis.validate.compare import compare_gemm, render


def cli_compare(args) -> int:
    """`lapis compare`: exit 0; 1 when --figure or --trace was asked for but the variant has no measured timeline."""
    check_out_file("--figure", args.figure, FIGURE_SUFFIXES)
    check_out_file("--trace", args.trace, ".json")
    if args.measured:
        return _compare_measured(args)
    r = compare_gemm(args.schedule, args.shape, args.variant, args.captures,
                     keep_events=bool(args.figure or args.trace))
    pred, meas = r.pop("_predicted_events", None), r.pop("_measured_events", None)
    print(json.dumps(r, indent=1) if args.json else render(r))
    if not (args.figure or args.trace):
        return 0
    if meas is None:
        asked = " and ".join(f for f, v in (("--figure", args.figure), ("--trace", args.trace)) if v)
        print(f"lapis compare: {asked} not written: {r['timeline_missing']}", file=sys.stderr)
        return 1
    _figures(args, pred, meas, f"{r['variant']} at {r['shape']}: predicted vs measured (SM {r['timeline']['sm']})")
    return 0


def _compare_measured(args) -> int:
    """--measured: the user's file against the user's schedule; exit 0 (bad input raises a LapisError: exit 2)."""
    given = [f for f, v in (("--variant", args.variant), ("--captures", args.captures)) if v]
    if given:
        raise CaptureError("--measured compares your own file: it takes no capture options", " and ".join(given),
                           "drop them, or drop --measured to compare against lapis's captures")
    r = measured.compare_measured(args.measured, args.schedule, args.shape,
                                  keep_events=bool(args.figure or args.trace))
    pred, meas = r.pop("_predicted_events", None), r.pop("_measured_events", None)
    print(json.dumps(r, indent=1) if args.json else measured.render(r))
    if args.figure or args.trace:
        _figures(args, pred, meas, f"{r['schedule']} at {r['shape']}: predicted vs measured (CTA {r['cta']}, "
                 f"SM {r['sm']})")
    return 0


def _figures(args, pred, meas, title: str) -> None:
    said = sys.stderr if args.json else sys.stdout
    if args.figure:
        write_output("--figure", args.figure, lambda: compare_gantt(pred, meas, Path(args.figure), title=title))
        print(f"wrote {args.figure}", file=said)
    if args.trace:
        write_output("--trace", args.trace, lambda: write_chrome_runs([("predicted", pred), ("measured", meas)],
                                                                      args.trace))
        print(f"wrote {args.trace}", file=said)
