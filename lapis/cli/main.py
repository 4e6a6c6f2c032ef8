"""`lapis`: parse, dispatch to the command group's module, and map lapis's errors to exit codes.

Exit codes, the same for every subcommand (lapis.cli.parser.EXIT_CODES, listed by `lapis --help`):
  0  ok
  1  a check found a problem (a capture that disagrees with the layout or mma model, a tensor map the driver
     would reject); the accuracy reports (validate timelines, units, seeds, micro) and compare exit 0 whatever
     their errors
  2  bad input (any lapis.errors.LapisError, and argparse's usage errors)
  3  deadlock (lapis simulate)
  4  race (lapis simulate --races)

main() returns the code and raises nothing for bad input: argparse's SystemExit becomes its code, and with --json
the error is also printed on stdout as {"ok": false, "exit_code": 2, "error": ...}.
"""

from __future__ import annotations

import argparse
import json
import sys

from lapis.cli.parser import EXIT_CODES, FORWARDED, build_parser, deprecations, join_negative_lists
from lapis.errors import LapisError


def say(text: str, stream=None) -> None:
    """Print to stderr (or `stream`) whatever the text holds: undecodable bytes a user typed come back escaped."""
    stream = stream or sys.stderr
    encoding = getattr(stream, "encoding", None) or "utf-8"
    print(text.encode(encoding, "backslashreplace").decode(encoding, "replace"), file=stream)


def json_error(message: str, code: int) -> None:
    """The --json answer of a command that failed before it had a result: one object on stdout."""
    print(json.dumps({"ok": False, "exit_code": code, "error": message}))


def parse(argv: list[str]):
    """The parsed namespace; forwarded subcommands (FORWARDED) keep their unknown options in args.forward_args."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if tuple(argv[:2]) in FORWARDED:
        args.forward_args = extra
    elif extra:  # named by the subcommand's parser, so its usage line is the one printed
        subcommand(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def subcommand(parser: argparse.ArgumentParser, args) -> argparse.ArgumentParser:
    """The parser of the subcommand `args` was parsed into (e.g. `lapis layout show`'s)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and getattr(args, action.dest, None) in action.choices:
            return subcommand(action.choices[getattr(args, action.dest)], args)
    return parser


def main(argv=None) -> int:
    argv, notes = deprecations(join_negative_lists(list(sys.argv[1:] if argv is None else argv)))
    for note in notes:
        say(f"lapis: {note}")
    try:
        args = parse(argv)
    except SystemExit as exc:  # --help, --version (0) and usage errors (2): argparse has printed them
        code = exc.code if isinstance(exc.code, int) else EXIT_CODES["bad input"]
        if code and "--json" in argv:
            json_error(getattr(exc, "usage_error", "usage error (see stderr)"), code)
        return code
    try:
        return _dispatch(args) or 0
    except LapisError as exc:
        say(f"lapis: error: {exc}")
        if getattr(args, "json", False):
            json_error(str(exc), EXIT_CODES["bad input"])
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
            "units": validate.cli_validate_units, "seeds": validate.cli_validate_seeds,
            "micro": validate.cli_validate_micro}[args.validate_cmd](args)


if __name__ == "__main__":
    sys.exit(main())
