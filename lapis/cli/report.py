"""`lapis report`: the main job; exit 1 when a layout or MMA check found a disagreement."""

from __future__ import annotations

import json
import os
from pathlib import Path

from lapis.cli.output import check_out_dir
from lapis.errors import LapisError
from lapis.report.build import build_report, summary_table
from lapis.validate.layouts import passed
from lapis.validate.mma import passed as mma_passed


REPORT_FILES = ("report.md", "report.json")  # what build_report writes beside the figures


def cli_report(args) -> int:
    check_out_dir("--out", args.out, "lapis-report")
    for name in REPORT_FILES:  # checked before minutes of work, not after
        target = Path(args.out) / name
        if os.path.lexists(target) and not target.is_file():
            raise LapisError(f"--out must be a folder where lapis can write {name}, and {name} there is not a "
                             "regular file", str(target), f"remove or rename {target}, or pass another --out")
    numbers = build_report(args.out, args.captures, getattr(args, "resimulate", False), progress=not args.json)
    if args.json:
        print(json.dumps(numbers, indent=1))
    else:
        print(summary_table(numbers))
        print(f"\nreport: {Path(args.out) / 'report.md'}")
    return 0 if passed(numbers["layouts"]) and ("mma" not in numbers or mma_passed(numbers["mma"])) else 1
