"""Fast mode: a steady-state estimate of `simulate()`'s time from three short runs of the representative SM.

In its default (representative) mode the simulator runs one SM: the one dealt the most work, at the load
bandwidth share of the SMs that start with work (lapis.pipeline_sim.grid). Its time is a start-up, plus a cost per
work item (a Q tile: load Q, store O, drain the ring), plus a cost per K/V tile (or GEMM K block) in the
steady state. Fast mode runs that same SM on truncated work lists, at the same bandwidth share, and fits
    T = a + b x items + c x tiles
to three runs: (K1 units, tiles capped at C1), (K2, C1), (K2, C2). T for the full list follows; so does each
unit's busy time (the same fit), hence `utilization` and `bound_by`. Schedules whose work items are not tile
counts (b200, sm120: spans) are truncated by units only: T = a + u x units.

A short run is simulate() with `cut`: every active SM is dealt the truncated list before the run, so the active SM
count, hence the bandwidth share, is unchanged. Nothing in the simulator changes. The error against a full
simulation is measured by the sweep on a sample (lapis.sweep.run) and reported with the table.
"""

from __future__ import annotations

import numpy as np

from lapis.pipeline_sim import work_order
from lapis.pipeline_sim.schedule import lookup
from lapis.pipeline_sim.simulate import simulate

UNITS = (2, 4)  # K1, K2: work units simulated (multiples of 2: a non-persistent SM may keep 2 CTA slots)
TILE_CAPS = (8, 16)  # C1, C2: K/V tiles (GEMM K blocks) per item in the short runs
# A schedule whose work unit is a tuple of per-Q-tile K/V tile counts says so (Schedule.tuple_units); elsewhere a
# tuple holds other fields (b200, sm120: (tiles visited, first masked tile)) and is not capped.


def _shrink(item, cap: int, tuples: bool):
    """An item's tile counts capped at `cap`: an int (fa2, GEMM), a tuple of ints where `tuples`; else None."""
    if isinstance(item, (int, np.integer)):
        return min(int(item), cap)
    if tuples and isinstance(item, tuple) and item and all(isinstance(x, int) for x in item):
        return tuple(min(x, cap) for x in item)
    return None


def _flat(work) -> list:
    """The items of a work list of ints or tuples of ints, in order."""
    return [x for u in work for x in (u if isinstance(u, tuple) else (u,))]


def _counts(work) -> tuple[int, int]:
    """(items, tiles) of a work list of ints or tuples of ints."""
    flat = _flat(work)
    return len(flat), sum(flat)


class _Plan:
    """The truncated work list of one short run, and what the full representative list holds."""

    def __init__(self, units: int, cap: int | None):
        self.units, self.cap, self.tuples = units, cap, False
        self.full = self.short = None

    def cut(self, per_sm: list, cost) -> list:
        rep = list(work_order.fullest(per_sm, cost))
        short = rep[:self.units]
        if self.cap is not None and all(_shrink(u, self.cap, self.tuples) is not None for u in rep):
            short = [_shrink(u, self.cap, self.tuples) for u in short]
        else:
            self.cap = None
        self.full, self.short = rep, short
        return [short for w in per_sm if w]


def _short_run(schedule: str, gpu: str, shape: str, params: dict, plan: _Plan) -> dict:
    """simulate() with every SM's work list cut short by `plan` (the active SM count, hence the share, kept)."""
    plan.tuples = lookup(schedule).tuple_units
    r = simulate(schedule, gpu, shape, params, cut=plan.cut)
    r.pop("_events", None)
    return r


def simulate_full(schedule: str, gpu: str, shape: str, params: dict) -> dict:
    """simulate()'s summary without its event list (a sweep keeps thousands of rows, not their events)."""
    r = simulate(schedule, gpu, shape, params)
    r.pop("_events", None)
    return r


def simulate_fast(schedule: str, gpu: str, shape: str, params: dict | None = None) -> dict:
    """simulate()'s summary with `predicted_us` and `tflops` extrapolated from short runs (module docstring);
    `fast` says how: 'exact' when the full list is no longer than the short runs together or holds a piece of a
    split unit (then it is the full simulation), 'items+tiles' or 'units'. Raises what simulate() raises
    (ScheduleError, NotModelled, deadlock.Deadlock)."""
    params = dict(params or {})
    k1, k2 = UNITS
    c1, c2 = TILE_CAPS
    first = _Plan(k2, c1)
    b = _short_run(schedule, gpu, shape, params, first)
    shrinkable = first.cap is not None
    if first.short == first.full:  # nothing was cut: this is the full simulation
        return dict(b, fast="exact")
    if any(isinstance(x, work_order.PieceTiles) for x in _flat(first.full)):
        # a split unit's piece (work_order split_tail) ends the list with a merge the items + tiles fit cannot carry
        return dict(simulate_full(schedule, gpu, shape, params), fast="exact")
    plans = [_Plan(k1, c1), _Plan(k2, c2)] if shrinkable else [_Plan(k1, None)]
    if shrinkable and _counts(first.full)[1] <= _counts(first.short)[1] * 3:
        # the full list is no longer than the short runs would be: simulate it (exact, and no slower)
        return dict(simulate_full(schedule, gpu, shape, params), fast="exact")
    flops = b["tflops"] * b["predicted_us"] * 1e6  # simulate(): tflops = flops / ns / 1e3
    runs = [(b, first), *((r, pl) for pl in plans for r in [_short_run(schedule, gpu, shape, params, pl)])]
    units = list(b["utilization"])
    # The time and every unit's busy time (µs) are extrapolated alike, so bound_by is the full run's busiest unit.
    y = [[r["predicted_us"], *(r["utilization"][u] * r["predicted_us"] for u in units)] for r, _ in runs]
    at = _design(first.full, shrinkable)
    us, *busy = (float(v) for v in np.array(at) @ _solve([_design(pl.short, shrinkable) for _, pl in runs], y))
    util = {u: x / us for u, x in zip(units, busy)}
    out = dict(b, predicted_us=us, tflops=flops / (us * 1e6), utilization=util, bound_by=max(util, key=util.get),
               fast="items+tiles" if shrinkable else "units")
    out["beats_roofline"] = out["tflops"] > out["roofline_tflops"] * (1 + 1e-9)
    return out


def _design(work: list, shrinkable: bool) -> list:
    """The fit's regressors of a work list: (1, items, tiles), or (1, units) where items are not tile counts."""
    return [1.0, *_counts(work)] if shrinkable else [1.0, float(len(work))]


def _solve(rows: list, values: list) -> np.ndarray:
    """Coefficients (one column per value) of value = a + b items + c tiles (or a + u units) through the short
    runs; least squares where they are degenerate (e.g. items all shorter than the caps)."""
    return np.linalg.lstsq(np.array(rows, dtype=float), np.array(values, dtype=float), rcond=None)[0]
