"""`lapis report`: the main job; exit 1 when a layout or MMA check found a disagreement."""

from __future__ import annotations

import json
from pathlib import Path

from lapis.cli.output import check_out_dir
from lapis.report.build import build_report, summary_table
from lapis.validate.layouts import passed
from lapis.validate.mma import passed as mma_passed


def cli_report(args) -> int:
    check_out_dir("--out", args.out, "lapis-report")
    numbers = build_report(args.out, args.captures, getattr(args, "resimulate", False), progress=not args.json)
    if args.json:
        print(json.dumps(numbers, indent=1))
    else:
        print(summary_table(numbers))
        print(f"\nreport: {Path(args.out) / 'report.md'}")
    return 0 if passed(numbers["layouts"]) and ("mma" not in numbers or mma_passed(numbers["mma"])) else 1
