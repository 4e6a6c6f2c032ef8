"""`lapis`: parse, dispatch to the command group's module, and map lapis's errors to exit codes.

Exit codes, the same for every subcommand (lapis.cli.parser.EXIT_CODES):
  0  ok
  1  a check found a problem (a disagreement, a rejected tensor map, a prediction off)
  2  bad input (any lapis.errors.LapisError)
  3  deadlock (lapis simulate)
  4  race (lapis simulate --races)
"""

from __future__ import annotations

import sys

from lapis.cli.parser import EXIT_CODES, build_parser, join_negative_lists
from lapis.errors import LapisError


def main(argv=None) -> int:
    argv = join_negative_lists(list(sys.argv[1:] if argv is None else argv))
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args) or 0
    except LapisError as exc:
        print(f"lapis: error: {exc}", file=sys.stderr)
        return EXIT_CODES["bad input"]
    except BrokenPipeError:  # `lapis ... | head` closed the pipe: not an error
        sys.stderr.close()
        return 0


def _dispatch(args) -> int | None:
    # Each command group's module loads only when it runs: `lapis capture` and `lapis bench` must work on the
    # GPU host, which has neither simpy nor tensor-layouts (the other groups import them).
    if args.cmd == "report":
        from lapis.cli.report import cli_report
        return cli_report(args)
    if args.cmd == "layout":
        from lapis.cli import layout
        return {"show": layout.cli_show, "desc": layout.cli_desc, "decode": layout.cli_decode,
                "check": layout.cli_check}[args.layout_cmd](args)
    if args.cmd == "simulate":
        from lapis.cli.simulate import cli_simulate
        return cli_simulate(args)
    if args.cmd == "sweep":
        from lapis.cli.sweep import cli_sweep
        return cli_sweep(args)
    if args.cmd == "tma":
        from lapis.cli import tma
        return {"check": tma.cli_check, "place": tma.cli_place}[args.tma_cmd](args)
    if args.cmd == "capture":
        from lapis.cli.capture import cli_capture
        return cli_capture(args)
    if args.cmd == "bench":
        from lapis.cli.bench import cli_bench
        return cli_bench(args)
    if args.cmd == "compare":
        from lapis.cli.compare import cli_compare
        return cli_compare(args)
    from lapis.cli import validate
    return {"layouts": validate.cli_validate_layouts, "mma": validate.cli_validate_mma,
            "timelines": validate.cli_validate_timelines,
            "units": validate.cli_validate_units}[args.validate_cmd](args)


if __name__ == "__main__":
    sys.exit(main())
