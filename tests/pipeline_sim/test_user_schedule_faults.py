"""A user's schedule with a bug ends in a named ScheduleError: a role that loops without recording work, a role
that raises, a NaN cost. The schedules are the ws_gemm example with one role or cost changed."""

import dataclasses
import math
import sys
import time
from pathlib import Path

import pytest

from lapis.errors import ScheduleError
from lapis.pipeline_sim.simulate import simulate

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import ws_gemm  # noqa: E402

SHAPE = "512x512x1024"


def _with_role(role):
    def launch(ctx):
        ws_gemm.launch(ctx)
        ctx.spawn("user_role", role(ctx))
    return dataclasses.replace(ws_gemm.WS_GEMM, name="user-bug", launch=launch)


def _spin(ctx):
    while True:  # yields forever and records nothing: the event bound cannot see it
        yield ctx.env.timeout(1)


def _boom(ctx):
    yield ctx.env.timeout(1)
    raise ZeroDivisionError("user bug")


def test_the_example_itself_runs():
    assert simulate(ws_gemm.WS_GEMM, "h200", SHAPE)["predicted_us"] > 0


def test_a_role_that_loops_without_working_is_stopped_by_name():
    with pytest.raises(ScheduleError, match="no op recorded"):
        simulate(_with_role(_spin), "h200", SHAPE)


def test_a_role_that_raises_is_a_schedule_error_naming_it():
    with pytest.raises(ScheduleError, match="user-bug: ZeroDivisionError: user bug"):
        simulate(_with_role(_boom), "h200", SHAPE)


def test_a_nan_cost_is_refused_not_printed():
    def costs(p, dims, prm, flags):
        c = ws_gemm.costs(p, dims, prm, flags)
        return dataclasses.replace(c, **{f.name: math.nan for f in dataclasses.fields(c)
                                         if isinstance(getattr(c, f.name), float)})
    with pytest.raises(ScheduleError):
        simulate(dataclasses.replace(ws_gemm.WS_GEMM, name="nan-cost", costs=costs), "h200", SHAPE)


def _busy(ctx):
    yield ctx.env.timeout(1)
    while True:  # never yields again: no simulator event can happen, only the wall-clock watchdog sees it
        pass


def test_a_role_that_spins_without_yielding_is_stopped_by_the_watchdog_naming_it():
    with pytest.raises(ScheduleError, match="role user_role ran 1 s of wall time without a simulator event"):
        simulate(_with_role(_busy), "h200", SHAPE, stall_s=1)


def test_the_watchdog_limit_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("LAPIS_STALL_S", "1")
    with pytest.raises(ScheduleError, match="role user_role ran 1 s of wall time"):
        simulate(_with_role(_busy), "h200", SHAPE)
    monkeypatch.setenv("LAPIS_STALL_S", "soon")
    with pytest.raises(ScheduleError, match="LAPIS_STALL_S .* is a finite number >= 0: got 'soon'"):
        simulate(ws_gemm.WS_GEMM, "h200", SHAPE)


def _slow(ctx):
    for _ in range(8):  # 8 events of 0.2 s of Python each: 1.6 s in all, never 1 s without an event
        time.sleep(0.2)
        yield ctx.env.timeout(1)


def test_a_role_that_is_slow_but_yields_never_trips_the_watchdog():
    """Every event resets the watchdog: a run longer than the limit, whose events each come sooner, ends
    normally with the same prediction as without the slow role (it records nothing)."""
    assert simulate(_with_role(_slow), "h200", SHAPE, stall_s=1)["predicted_us"] == \
        simulate(ws_gemm.WS_GEMM, "h200", SHAPE)["predicted_us"]


def test_the_watchdog_stops_a_spinning_role_in_a_thread_and_where_sigint_is_ignored(monkeypatch):
    import signal
    import threading
    box = {}

    def run():
        try:
            simulate(_with_role(_busy), "h200", SHAPE, stall_s=1)
        except ScheduleError as exc:
            box["error"] = str(exc)
    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(120)
    assert "role user_role ran 1 s of wall time" in box["error"]
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a background job: interrupt_main would do nothing
    try:
        with pytest.raises(ScheduleError, match="role user_role ran 1 s of wall time"):
            simulate(_with_role(_busy), "h200", SHAPE, stall_s=1)
    finally:
        signal.signal(signal.SIGINT, old)
