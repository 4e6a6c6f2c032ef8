"""Hardware units (tensor pipe, MUFU, FMA pipe, TMEM path, TMA path) as simpy resources held per operation."""

from __future__ import annotations

import simpy

from lapis.errors import ScheduleError


def occupy(env, rec, unit, ns: float, busy: dict, name: str, role: str, op: str, **kw):
    """Hold `unit` (a simpy Resource) for `ns` ns on behalf of `role`: a "wait <name>" event while it queues
    behind another role, then the op's event; `busy[name]` accumulates the unit's busy time. `ns` may be a
    function called when the unit is granted (a load's time depends on the bandwidth share at that moment)."""
    t0 = env.now
    with unit.request() as req:
        yield req
        t1 = env.now
        if t1 > t0:  # recorded now, so the wait ends where the op starts
            rec.add(role, f"wait {name}", t0, kind="wait", **kw)
        if callable(ns):
            ns = ns()
        yield env.timeout(ns)
    busy[name] += ns
    rec.add(role, op, t1, **kw)


def load_share(p, active: int, reuse: float) -> float:
    """B/ns of load bandwidth per active SM: an equal share of L2, but no more than HBM can feed when each byte
    fetched from HBM serves `reuse` loads through L2 (K/V are read by every Q tile of their head). With no reuse
    (one Q tile per head) every load is compulsory HBM traffic, so the schedule cannot beat the HBM roofline."""
    return chip_load_bandwidth(p, reuse) / active


def chip_load_bandwidth(p, reuse: float) -> float:
    """B/ns the whole chip loads at: L2's bandwidth, or HBM's times `reuse` when HBM is the tighter."""
    return min(p["l2_tb_s"] * 1e3, p.hbm_bytes_per_ns * max(reuse, 1))


def burst_share(p, active: int, reuse: float, duty: float) -> float:
    """B/ns one SM's load gets while it moves, when each SM's load path is busy only `duty` (0..1) of the time:
    the chip's bandwidth (load_share's L2 or HBM x reuse) split among this SM and the other active - 1 SMs'
    loads in flight at that moment, (active - 1) x duty of them on average (every SM runs the same kernel, so
    the representative SM's duty stands for theirs, and their bursts do not line up), capped at the SM's own
    fill rate, smem_bytes_per_clk_sm x clock_ghz (every byte of a cp.async or TMA fill is written to shared
    memory: 32 banks x 4 B a clock, CUDA C++ Programming Guide, shared memory; the sm120 profiles state it).
    duty 1 (every SM loading all the time) is load_share; the chip never moves more than its bandwidth:
    active x duty x this <= the total.
    ScheduleError for a duty outside [0, 1]."""
    if not 0.0 <= duty <= 1.0:
        raise ScheduleError("a load path's duty is the fraction of the time it is busy, in [0, 1]",
                            f"duty = {duty!r}", "pass busy time / elapsed time")
    fill = p["smem_bytes_per_clk_sm"] * p["clock_ghz"]
    return min(fill, chip_load_bandwidth(p, reuse) / (1 + (active - 1) * duty))


SMSP_PER_SM = 4  # sub-partitions per SM (Hopper, Blackwell): one warp scheduler, tensor core and SFU each


class SmspBusy:
    """The SM's busy times as one sub-partition's unit adds to them: an op counts 1/SMSP_PER_SM of its time, so
    utilization is a fraction of the SM's rate (exact: scaling by a power of two commutes with rounding)."""

    def __init__(self, busy: dict):
        self.busy = busy

    def __getitem__(self, unit: str) -> float:
        return self.busy[unit] * SMSP_PER_SM

    def __setitem__(self, unit: str, ns: float) -> None:
        self.busy[unit] = ns / SMSP_PER_SM


class Smsp:
    """One SM sub-partition of an mma.sync kernel: its tensor core, MUFU and FMA pipe, and its issue ("issue": a
    warp's share of the sub-partition's cycles where a cycle simulation costs a whole stretch of code), each a simpy
    resource held by one warp at a time; busy time counts 1/SMSP_PER_SM toward the SM's utilization (SmspBusy)."""

    def __init__(self, ctx):
        self.ctx, self.busy = ctx, SmspBusy(ctx.busy)
        self.units = {u: simpy.Resource(ctx.env, 1) for u in ("tensor", "mufu", "fma", "issue")}

    def use(self, unit: str, ns: float, role: str, op: str, **kw):
        """Hold this sub-partition's `unit` for ns, recording the queueing and the op."""
        yield from occupy(self.ctx.env, self.ctx.rec, self.units[unit], ns, self.busy, unit, role, op, **kw)
