"""The wall-clock watchdog of a simulation run: a role that spins in Python without yielding (``while True:
pass``) never hands control back to simpy, so no event bound or idle count can see it; a daemon thread can.

`Watchdog(stall_s, progress, who)` starts a daemon thread that reads `progress()` (lapis.pipeline_sim.deadlock
passes simpy's count of events scheduled, which every event a role yields or triggers moves, at no cost to the
run loop). When it has not changed for `stall_s` seconds of wall time, it notes `who()` (the role that was running: simpy's active process) and
interrupts the thread that runs the simulation: `_thread.interrupt_main` for the main thread where Python
handles SIGINT, else an asynchronous exception (CPython's PyThreadState_SetAsyncExc) set on that thread. The run loop catches that (`stalled`) and raises
ScheduleError naming the role. Progress resets the clock, so a long run that keeps stepping never trips it.

stall_s: the `stall_s` keyword of lapis.pipeline_sim.simulate.simulate, else the environment variable
LAPIS_STALL_S, else DEFAULT_STALL_S (60 s); 0 turns the watchdog off.
"""

from __future__ import annotations

import _thread
import ctypes
import math
import os
import signal
import threading
import time

from lapis.errors import ScheduleError

DEFAULT_STALL_S = 60.0
ENV = "LAPIS_STALL_S"
_POLL_S = 0.05  # how often the thread looks; a stall is reported at most this late


class Stalled(BaseException):
    """Delivered to a simulation thread other than the main one when it stalls (a BaseException: a role's
    `except Exception` does not swallow it)."""


def stall_seconds(stall_s=None) -> float:
    """The watchdog's limit in seconds: `stall_s`, else $LAPIS_STALL_S, else DEFAULT_STALL_S; ScheduleError for a
    value that is not a finite number >= 0 (0: no watchdog)."""
    source = "stall_s"
    if stall_s is None:
        stall_s, source = os.environ.get(ENV, DEFAULT_STALL_S), ENV
    try:
        value = float(stall_s) if not isinstance(stall_s, bool) else math.nan
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise ScheduleError(f"{source} (the wall-clock seconds a run may go without simulator progress) is a finite "
                            "number >= 0", repr(stall_s), f"e.g. {ENV}=60, or 0 to turn the watchdog off")
    return value


class Watchdog:
    """A context manager around a run loop (module docstring); `fired` is the name of the role it interrupted,
    None while it has not fired."""

    def __init__(self, stall_s: float, progress, who):
        self.stall_s, self.progress, self.who = stall_s, progress, who
        self.fired = None
        self._lock, self._done = threading.Lock(), threading.Event()
        self._target = threading.current_thread()
        self._thread = None

    def __enter__(self):
        if self.stall_s > 0:
            self._thread = threading.Thread(target=self._watch, name="lapis-watchdog", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:  # after this, the thread never interrupts: the run is over
            self._done.set()

    def _watch(self) -> None:
        seen, since = self.progress(), time.monotonic()
        while not self._done.wait(_POLL_S):
            now = self.progress()
            if now != seen:
                seen, since = now, time.monotonic()
            elif time.monotonic() - since >= self.stall_s:
                with self._lock:
                    if self._done.is_set():
                        return
                    try:
                        self.fired = self.who() or "(no role running: the schedule's own code)"
                    except Exception:  # the role's name is a courtesy; the interrupt must still happen
                        self.fired = "(unknown role)"
                    self._interrupt()
                return

    def _interrupt(self) -> None:
        # interrupt_main does nothing where SIGINT is ignored (a job started in the background by a shell):
        # there, and in any thread but the main one, the exception is set on the thread itself
        if self._target is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            _thread.interrupt_main()
        else:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._target.ident), ctypes.py_object(Stalled))

    def error(self, now_ns: float) -> ScheduleError:
        """The ScheduleError for a fired watchdog, naming the role and the limit."""
        return ScheduleError("a schedule's roles yield to the simulator (a role runs Python code between yields, "
                             "never forever)", f"role {self.fired} ran {self.stall_s:g} s of wall time without a "
                             f"simulator event, at t = {now_ns:,.0f} ns",
                             "make every loop in the role yield (a timeout, a barrier wait, ctx.record); for a role "
                             f"that is only slow, raise the limit with stall_s= or {ENV}")
