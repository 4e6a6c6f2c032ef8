"""Predicted against measured on one time axis: per role, a "(predicted)" lane above a "(measured)" lane.

Inputs: two lists of `lapis.pipeline_sim.recorder.Event` (ns): the simulator's representative SM and one SM of
a real kernel's timeline (lapis.captures.gemm). Each side is cut to its own steady-state window of a few K
iterations (`gantt.steady_state_window`) and shifted so that the window starts at 0, the start of a K
iteration on both sides; the axis runs for the longer of the two windows. Drawn by `gantt.gantt`, so an op
kind has the same colour in every lane (a predicted "wgmma" and a measured "issue wgmma" match) and waits
are grey.
"""

from __future__ import annotations

from dataclasses import replace

from lapis.figures.gantt import gantt, lane_order, steady_state_window

__all__ = ["compare_gantt"]

SIDES = ("predicted", "measured")


def compare_gantt(predicted, measured, path=None, title: str = "", iterations: int = 3):
    """Draw the interleaved Gantt chart and save it as a PNG at `path` (if given); returns the Figure.

    Lanes are named "ROLE (predicted)" and "ROLE (measured)", the roles in `gantt.lane_order` order; a role on
    one side only gets only that side's lane. x axis: µs from the start of each side's window.
    Raises ValueError when either side has no events."""
    sides = dict(zip(SIDES, (list(predicted), list(measured))))
    if not all(sides.values()):
        raise ValueError("both timelines need events")
    rows, length, present = [], 0.0, set()
    for side, events in sides.items():
        t0, t1 = steady_state_window(events, iterations)
        length = max(length, t1 - t0)
        present |= {f"{e.role} ({side})" for e in events}
        rows += [(side, t0, e) for e in events if e.end_ns >= t0]  # gantt drops what ends before the window
    rows = [replace(e, role=f"{e.role} ({side})", start_ns=e.start_ns - t0, end_ns=e.end_ns - t0)
            for side, t0, e in rows if e.start_ns - t0 <= length]
    lanes = [f"{r} ({s})" for r in lane_order(e.role for v in sides.values() for e in v) for s in SIDES
             if f"{r} ({s})" in present]
    fig = gantt(rows, None, title=title, window_ns=(0.0, length), lanes=lanes)
    fig.axes[0].set_xlabel(f"µs from the start of a steady-state K iteration (each side's window of {iterations})")
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
