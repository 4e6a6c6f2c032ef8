"""`lapis compare`: a GEMM schedule predicted against its committed H200 capture."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lapis.cli.output import check_out_file, write_output
from lapis.figures.compare_gantt import compare_gantt
from lapis.validate.compare import compare_gemm, render


def cli_compare(args) -> int:
    """`lapis compare`: exit 0; 1 when --png was asked for but the variant has no measured timeline."""
    check_out_file("--png", args.png, ".png")
    r = compare_gemm(args.schedule, args.shape, args.variant, args.captures, keep_events=bool(args.png))
    pred, meas = r.pop("_predicted_events", None), r.pop("_measured_events", None)
    print(json.dumps(r, indent=1) if args.json else render(r))
    if not args.png:
        return 0
    if meas is None:
        print(f"lapis compare: --png not written: {r['timeline_missing']}", file=sys.stderr)
        return 1
    write_output("--png", args.png, lambda: compare_gantt(
        pred, meas, Path(args.png), title=f"{r['variant']} at {r['shape']}: predicted vs measured "
        f"(SM {r['timeline']['sm']})"))
    print(f"wrote {args.png}", file=sys.stderr if args.json else sys.stdout)
    return 0
