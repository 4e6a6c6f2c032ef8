"""`lapis simulate`: one schedule on one GPU profile; exit 3 on a deadlock, 4 when --races finds a race."""

from __future__ import annotations

import json
import sys
import time

from lapis.cli.output import FIGURE_SUFFIXES, check_out_file, write_output
from lapis.cli.parser import EXIT_CODES
from lapis.errors import ScheduleError
from lapis.figures.gantt import gantt, steady_state_window
from lapis.pipeline_sim.deadlock import Deadlock
from lapis.pipeline_sim.simulate import SCHEDULES, default_gpu, parse_params, simulate
from lapis.pipeline_sim.trace import write_chrome


def bound_text(r: dict) -> str:
    """What bounds a simulated run, as every command prints it: "bound: <unit>", the unit busiest over the run
    (lapis.pipeline_sim.simulate's bound_by; `lapis compare` prints the same words)."""
    return f"bound: {r['bound_by']}"


def counted(n: int, noun: str) -> str:
    """"1 SM", "132 SMs": the count and the noun, plural (an s) unless the count is 1."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def cli_simulate(args) -> int:
    if args.list:
        rows = [dict(name=k, description=s.description) for k, s in SCHEDULES.items()]
        print(json.dumps(rows, indent=1) if args.json else "\n".join(f"{r['name']}: {r['description']}" for r in rows))
        return 0
    if not args.schedule or not args.shape:
        missing = " and ".join(f for f, v in (("--schedule", args.schedule), ("--shape", args.shape)) if not v)
        raise ScheduleError("simulate needs --schedule and --shape", f"{missing} missing", "e.g. --schedule h200-gemm-ws "
                          "--shape 8192x8192x8192 (lapis simulate --list)")
    check_out_file("--figure", args.figure, FIGURE_SUFFIXES)
    check_out_file("--trace", args.trace, ".json")
    try:
        params = parse_params(args.param)
        if args.causal and params.get("causal", 1) != 1:
            raise ScheduleError("--causal and --param causal disagree", f"--causal with causal={params['causal']}",
                              "give one of them")
        params = {**params, **({"causal": 1} if args.causal else {})}
        gpu = args.gpu or default_gpu(args.schedule)
        bar = RunProgress() if sys.stdout.isatty() and not args.json else None
        try:
            r = simulate(args.schedule, gpu, args.shape, params, check_races=args.races, full=args.full,
                         max_events=args.max_events, progress=bar)
        finally:
            if bar is not None:
                bar.close()
    except Deadlock as dl:
        print(f"lapis simulate: {dl}", file=sys.stderr)
        return EXIT_CODES["deadlock"]
    events = r.pop("_events")
    if r["beats_roofline"]:
        print(f"lapis simulate: warning: {r['tflops']:.0f} TFLOP/s beats the roofline ({r['roofline_tflops']:.0f}); "
              "the schedule's model misses a bound at this shape, so do not trust this prediction", file=sys.stderr)
    if args.trace:
        write_output("--trace", args.trace, lambda: write_chrome(events, args.trace))
    if args.json:
        print(json.dumps(r, indent=1))
    else:
        print(f"{r['schedule']} on {r['gpu']} at {r['shape']}: {r['predicted_us']:.1f} µs, {r['tflops']:.0f} TFLOP/s "
              f"(roofline {r['roofline_tflops']:.0f} TFLOP/s, {r['roofline_bound_by']} limit); {bound_text(r)} "
              f"({', '.join(f'{u} {v:.0%}' for u, v in r['utilization'].items())}); {r['events']} events in "
              f"{r['wall_s']:.2f} s")
        g = r["grid"]
        sms, lists = counted(g["sms_simulated"], "SM"), counted(g["work_lists"], "distinct work list")
        print(f"grid: {sms} simulated as {lists}; SM finish "
              f"min/median/max {g['finish_us_min']:.1f}/{g['finish_us_median']:.1f}/{g['finish_us_max']:.1f} µs")
    if args.figure:
        write_output("--figure", args.figure, lambda: gantt(events, args.figure, title=f"{r['schedule']} on "
                                                            f"{r['gpu']} at {r['shape']}",
                                                            window_ns=steady_state_window(events)))
        print(f"wrote {args.figure}", file=sys.stderr if args.json else sys.stdout)  # --json output stays parseable
    if args.races:
        for race in r["races"]:
            print(f"lapis simulate: {race}", file=sys.stderr)
        if not args.json:
            print(f"races: {len(r['races'])} found (happens-before over the barrier edges)")
        return EXIT_CODES["race"] if r["races"] else EXIT_CODES["ok"]
    return 0


class RunProgress:
    """A progress bar of the events recorded (of the estimate, for --full) on stderr, shown once a run has taken
    `after_s` seconds; cleared when the run ends. Needs rich; without it nothing is shown."""

    def __init__(self, after_s: float = 1.0):
        self.t0, self.after_s, self.bar, self.task = time.monotonic(), after_s, None, None

    def __call__(self, events: int, total: int | None) -> None:
        if self.bar is None:
            if time.monotonic() - self.t0 < self.after_s:
                return
            try:
                from rich.console import Console
                from rich.progress import Progress
            except ImportError:
                self.after_s = float("inf")
                return
            self.bar = Progress(console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("simulating (events)", total=total)
        self.bar.update(self.task, completed=events)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
