"""`lapis simulate`: run a schedule on a GPU profile and summarize it (predicted time, bound, roles).

Schedules register here by name: the warp-specialized Hopper GEMM, the Hopper attention table (h200-*), the
B200 progression (b200-*) and the Emmy moves on sm_120 (sm120-*).
"""

from __future__ import annotations

import importlib
import math
import numbers
import time
from functools import partial
from collections import defaultdict

from lapis.errors import LapisError, NotModelled, ScheduleError
from lapis.pipeline_sim import engine
from lapis.pipeline_sim.schedule import REGISTRY, lookup, register
from lapis.model import consumer_loop, roofline
from lapis.model.profile import load_profile
from lapis.pipeline_sim import recorder
from lapis.pipeline_sim.deadlock import Deadlock
from lapis.pipeline_sim.recorder import union_spans as _union
from lapis.pipeline_sim.watchdog import stall_seconds
from lapis.pipeline_sim.work_order import ORDERS, fullest

# The built-in schedule modules, in `lapis simulate --list` order; each lists its Schedule objects in SCHEDULES.
BUILT_IN = ("gemm_ws", "attention_h200", "attention_h200_fa2", "attention_b200", "attention_sm120", "fa2_flash", "fa4_sm90", "cudnn_fprop")
for _name in BUILT_IN:
    register(*importlib.import_module(f"lapis.pipeline_sim.schedules.{_name}").SCHEDULES)
SCHEDULES = REGISTRY  # name -> Schedule, every built-in one


def default_gpu(schedule) -> str:
    """The profile a schedule was written for (its `gpu`); h200 for a name that is not a schedule."""
    try:
        return lookup(schedule).gpu
    except ScheduleError:
        return "h200"


# Ranges every schedule's parameters must lie in, whichever schedules use them.
PARAM_RANGES = {"emulate_frac": (0, 1), "threshold": (0, None), "causal": (0, 1), "sw_exp_per16": (0, 16),
                "regs_producer": (24, 256), "regs_consumer": (24, 256)}  # setmaxnreg's range (PTX ISA)
COUNTS = ("stages", "kv_stages", "block_m", "block_n", "block_k", "consumer_wgs", "warps", "regs_per_thread",
          "regs_producer", "regs_consumer", "q_tiles_per_cta", "ctas_per_sm", "q_slots", "softmax_chains", "side_warps")
# parameters that take a name: work_order.ORDERS; a built kernel whose consumer loop costs the run, or its own
# (lapis.model.consumer_loop.LOOPS)
CHOICES = {"persistent_order": ORDERS, "kernel_loop": ("own", *consumer_loop.load()["loops"])}
# parameters that switch a model off (0) or on (1); each schedule that has one refuses other values
FLAGS = ("causal", "mix", "in_order", "softmax_smsp", "loop_smsp", "late_v", "cross_item")


def parse_params(items: list[str]) -> dict:
    """['stages=3', 'emulate_frac=0.25'] -> {'stages': 3, 'emulate_frac': 0.25} (integers, else floats; the
    names of CHOICES, e.g. persistent_order=lpt, stay strings). ScheduleError for an item that is not key=value,
    a value that is not a number, or a key given twice (which value was meant cannot be told)."""
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ScheduleError("a schedule parameter is key=value", repr(item), "e.g. --param stages=3")
        if key in out:
            raise ScheduleError("each schedule parameter is given once", repr(key),
                                f"pass --param {key}=... once (to compare values, use lapis sweep --grid {key}=a,b)")
        if key in CHOICES:
            out[key] = value
            continue
        try:
            out[key] = int(value)
        except ValueError:
            try:
                out[key] = float(value)
            except ValueError:
                raise ScheduleError(f"parameter {key} must be a number", repr(value), _number_fix(key)) from None
    return out


def _number_fix(key: str) -> str:
    """A fix for a parameter value that is not a number: both values of a FLAGS parameter, the low end of a
    PARAM_RANGES one, else 2 (every count and threshold accepts it)."""
    if key in FLAGS:
        return f"--param {key}=0 or --param {key}=1 (its only values)"
    return f"e.g. --param {key}={PARAM_RANGES.get(key, (2, None))[0]}"


def check_params(schedule: str, params: dict, defaults: dict) -> None:
    """Unknown names, counts below 1 and values out of range are refused before anything runs: ScheduleError, or
    NotModelled for `causal` on a schedule that does not model the mask. A value is a number (numbers.Real:
    Python's or numpy's, not a bool) or, for CHOICES, a name; counts become int and numpy numbers Python ones,
    in place."""
    unknown = set(params) - set(defaults)
    if unknown == {"causal"}:  # legal on the hardware: the schedule just does not model the mask
        raise NotModelled(f"{schedule} has no parameter(s) {sorted(unknown)}", sorted(unknown),
                          "causal masking is not modelled for this schedule; drop --causal")
    if unknown:
        raise ScheduleError(f"{schedule} has no parameter(s) {sorted(unknown)}", sorted(unknown),
                            "use " + ", ".join(sorted(defaults)))
    for key, v in params.items():
        if key in CHOICES:
            if v not in CHOICES[key]:
                raise ScheduleError(f"{key} is one of {', '.join(CHOICES[key])}", repr(v),
                                    f"e.g. --param {key}={defaults[key]} (the schedule's default)")
            continue
        # numbers.Real: Python's and numpy's integers and floats (a value read from an array); bool is a flag
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
            raise ScheduleError(f"{key} must be a finite number", repr(v), f"e.g. {key}={_example(key, defaults)}")
        if key in COUNTS and (v != int(v) or v < 1):
            raise ScheduleError(f"{key} is a count and must be a whole number >= 1", v, _count_fix(key, defaults))
        lo, hi = PARAM_RANGES.get(key, (None, None))
        if (lo is not None and v < lo) or (hi is not None and v > hi) or (key == "causal" and v not in (0, 1)):
            raise ScheduleError(f"{key} must lie in [{lo}, {'inf' if hi is None else hi}]", v,
                                f"e.g. --param {key}={_example(key, defaults)}")
        if key in COUNTS:
            params[key] = int(v)
        elif not isinstance(v, (int, float)):  # a numpy number: the run's parameters stay plain Python (JSON)
            params[key] = v.item()


# The most events any attention schedule records per K/V tile of a work item, fixed per-item events included
# (measured on the representative SM at 1 x 2*sm_count x L x 128, L = 256 and 1024, every registered schedule at
# its defaults: sm120-m04-q-hoist is the highest at 128.5 per item per tile, h200-s1-serial the lowest at 7.4).
# Below this many per tile the run fits the bound whatever the schedule, so no pilot is needed.
MOST_EVENTS_PER_TILE = 200
# _item_events' fit against the events really recorded, 1 x sm_count x L x 128 at L = 128, 1024 and 2048 causal,
# every registered attention schedule at its defaults (items per SM x the fit / len(simulate(...)["events"])):
# 0.40..1.04
# (1.04: h200-s5-intra-overlap at L = 1024, 1128 fitted for 1080 recorded; h200-s9-tuned: 0.95 at L = 128, 20
# fitted for 21 recorded per item, against the floor's 2). Scaled by this, it stays a lower bound.
PILOT_MARGIN = 0.9


def check_size(kind: str, dims: tuple, prm: dict, sm_count: int, q_rows: int = 0, bound: int | None = None,
               item_events=None) -> None:
    """Refuse a run whose busiest SM would record more than `bound` events (default recorder.MAX_EVENTS), before
    any work list is built (a huge shape would otherwise take minutes or run out of memory before the in-run
    bound trips).

    prm: the schedule's defaults, variant and parameters merged; q_rows: the most Q rows a work item can take
    where no parameter says (b200: two 128-row tiles). The count is a lower bound: an item records at least
    one event per K block (GEMM), or a QK and a PV MMA per K/V tile (attention, half the tiles when causal),
    with Q tiles no smaller than block_m, 64 rows per consumer warpgroup or 32 rows per warp.
    item_events(rows, block_n, tiles) -> events: the schedule's own count for an attention work item of `tiles`
    K/V tiles (simulate passes _item_events, two one-item pilot runs); asked only where the floor of 2 per tile
    fits the bound but MOST_EVENTS_PER_TILE might not (the Hopper schedules record 7-24 per tile, so the floor
    let a 100000 x 128 x 128 x 128 shape through to build 12.8M work items)."""
    bound = bound or recorder.MAX_EVENTS
    if kind == "gemm":
        m, n, k = dims
        items = math.ceil(m / prm["block_m"]) * math.ceil(n / prm["block_n"])
        per_item = math.ceil(k / prm["block_k"])
    else:
        b, h, seq, _ = dims
        rows = max(prm.get("block_m") or 0, 64 * (prm.get("consumer_wgs") or 0), 32 * (prm.get("warps") or 0),
                   q_rows)
        tiles = math.ceil(seq / prm["block_n"])
        items, tiles = b * h * math.ceil(seq / rows), (max(1, tiles // 2) if prm.get("causal") else tiles)
        per_item = 2 * tiles
        per_sm = math.ceil(items / sm_count)
        if item_events is not None and per_sm * per_item <= bound < per_sm * (tiles + 1) * MOST_EVENTS_PER_TILE:
            per_item = max(per_item, math.floor(item_events(rows, prm["block_n"], tiles)))
    least = math.ceil(items / sm_count) * per_item
    if least > bound:
        raise ScheduleError("the run exceeds the simulator's event bound", f"at least {least:,} tile-level events on "
                            f"the busiest SM (bound {bound:,})",
                            "simulate a smaller shape: per-SM throughput settles within a few thousand tiles, or "
                            "raise the bound with --max-events")


def _item_events(s, p, params: dict, d: int, rows: int, bn: int, tiles: int) -> float:
    """Events one attention work item of one Q tile and `tiles` K/V tiles records (non-causal, q_tiles_per_cta
    at its default), from two pilot runs of one item alone: shape 1 x 1 x L x d at L = lcm(rows, bn) and twice
    that (rows: an item's Q rows, bn: block_n), fitted
    as fixed + per-tile events (each floored at 0), times PILOT_MARGIN. A pilot the schedule refuses (its own
    checks) gives 0: the run itself then says why."""
    base = math.lcm(rows, bn)
    # one Q tile per item: an item of q_tiles_per_cta Q tiles grows with L in both Q and K/V tiles, so its two
    # pilots would fit a per-K/V-tile slope q_tiles_per_cta times too steep and overstate the bound
    pilot = {k: v for k, v in params.items() if k not in ("causal", "q_tiles_per_cta")}
    counts = []
    for seq in (base, 2 * base):
        try:
            r = engine.run(s, p, (1, 1, seq, d), pilot, cut=lambda per_sm, cost: [fullest(per_sm, cost)[:1]],
                           stall_s=0)
        except (LapisError, Deadlock):
            return 0.0
        counts.append((seq // bn, len(r["events"])))
    (t1, e1), (t2, e2) = counts
    slope = max(0.0, (e2 - e1) / (t2 - t1))
    return PILOT_MARGIN * (max(0.0, e1 - slope * t1) + slope * tiles)


def check_full_size(s, p, dims: tuple, params: dict, bound: int | None = None) -> int:
    """Refuse a --full run whose estimated events over every SM simulated (engine.estimate_events: a pilot of one
    work item, scaled by the work of every distinct work list) exceed `bound` (default
    recorder.MAX_FULL_EVENTS), before the run; returns the estimate."""
    bound = bound or recorder.MAX_FULL_EVENTS
    est = engine.estimate_events(s, p, dims, params)
    if est > bound:
        raise ScheduleError("the --full run exceeds the simulator's event bound", f"about {est:,} tile-level events "
                            f"estimated over every SM simulated (bound {bound:,})",
                            f"simulate a smaller shape, drop --full, or raise the bound with --max-events {est} "
                            "(a full run takes about 0.3 KB and 0.1-0.3 ms per event on a 2-core machine)")
    return est


def _example(key: str, defaults: dict):
    """A valid value to suggest: the default, or the range's low end where the default is derived (None)."""
    return defaults[key] if defaults[key] is not None else PARAM_RANGES.get(key, (1, None))[0]


def _count_fix(key: str, defaults: dict) -> str:
    """A fix for a count below 1 or not whole: the schedule's default, which its own checks take (block_n=2 would
    pass this check and fail the schedule's multiple-of-16 rule), or, where the schedule derives the value
    (default None), leaving it out."""
    if defaults.get(key) is not None:
        return f"e.g. --param {key}={defaults[key]} (the schedule's default)"
    return f"leave {key} out: the schedule derives it"


def _check_arguments(params, check_races, full, cut, progress) -> None:
    """ScheduleError for an argument of simulate of the wrong type, before anything runs."""
    if params is not None and not isinstance(params, dict):
        raise ScheduleError("params is a dict of schedule parameters", f"{type(params).__name__} {params!r}",
                            "pass e.g. {'block_n': 128, 'stages': 3}, or None for the schedule's defaults")
    for name, value in (("check_races", check_races), ("full", full)):
        if not isinstance(value, bool):
            raise ScheduleError(f"{name} is True or False", f"{type(value).__name__} {value!r}",
                                f"pass {name}=True or {name}=False")
    for name, value, what in (("cut", cut, "cut(per_sm, cost) -> per_sm (lapis.sweep.fast)"),
                              ("progress", progress, "progress(events, estimated_total)")):
        if value is not None and not callable(value):
            raise ScheduleError(f"{name} is None or a function {what}", f"{type(value).__name__} {value!r}",
                                f"pass a function, or leave {name} out")


def _run(s, *args):
    """engine.run, with an exception a schedule's own code raises (a user's role, costs or work function) turned
    into a ScheduleError naming the schedule; lapis's own errors pass as they are."""
    try:
        return engine.run(s, *args)
    except (LapisError, Deadlock):
        raise
    except (Exception, RecursionError) as exc:  # a bug in the schedule's code, not bad input to lapis
        raise ScheduleError("a schedule's roles and cost functions run without raising",
                            f"{s.name}: {type(exc).__name__}: {exc}"[:400],
                            "fix the schedule; simulate it from Python (lapis.pipeline_sim.simulate) for the "
                            "traceback") from exc


def _check_result(name: str, ns: float, flops: float) -> None:
    """A run's time (ns) and FLOPs are finite and positive: a NaN or negative cost would print as a result."""
    if not (math.isfinite(ns) and ns > 0 and math.isfinite(flops) and flops > 0):
        raise ScheduleError("a schedule's run takes a finite positive time and does a finite positive FLOP count",
                            f"{name}: {ns!r} ns, {flops!r} FLOP", "check the schedule's costs and flops function "
                            "for NaN, infinite or negative values")


def simulate(schedule, gpu: str, shape: str, params: dict | None = None, check_races: bool = False,
             full: bool = False, cut=None, max_events: int | None = None, progress=None,
             stall_s: float | None = None) -> dict:
    """Simulate `schedule` on profile `gpu` at `shape`; the JSON-able summary `lapis simulate --json` prints.

    full: simulate every SM (`--full`; lapis.pipeline_sim.grid: SMs with identical work lists are simulated once,
    exactly), not only the representative one (the most work, at an equal bandwidth share among the SMs that
    start with work). `grid` gives the SMs simulated, the distinct work lists and the SM finish times in µs.

    check_races: also run the happens-before race check (lapis.pipeline_sim.races) over every K/V (or A+B)
    slot access; `races` is then a list of race descriptions (empty when clean), else None. It costs a graph
    node per barrier operation, so it suits the small shapes a protocol check needs.
    schedule: a registered name, `path/to/file.py:NAME` (a Schedule in the user's file) or a Schedule.
    cut: shortens the SMs' work lists before the run (lapis.sweep.fast; engine.run).
    max_events: the run's event bound (`--max-events`; default recorder.MAX_EVENTS on the representative SM, or
    recorder.MAX_FULL_EVENTS over every SM simulated when full); a full run is refused before it starts when
    its estimate (check_full_size) is over the bound, and any run ends with a ScheduleError once it records more.
    progress(events so far, estimated total): called every few thousand simpy events (a progress display).
    stall_s: the wall-clock watchdog (lapis.pipeline_sim.watchdog): a role that runs this many seconds without
    yielding to the simulator ends the run with a ScheduleError naming it (None: $LAPIS_STALL_S, else 60; 0: off).
    Raises ScheduleError for an unknown schedule, parameter or shape, NotModelled for causal masking on a
    schedule that does not model it, and deadlock.Deadlock on a hang; ScheduleError also for arguments of the
    wrong type (params not a dict, check_races or full not a bool, cut or progress neither None nor callable,
    max_events not a positive integer, stall_s not a number >= 0)."""
    _check_arguments(params, check_races, full, cut, progress)
    stall_s = stall_seconds(stall_s)
    if max_events is not None and (isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 1):
        raise ScheduleError("max_events is a positive integer", repr(max_events)[:100], "pass e.g. 1_000_000")
    s = lookup(schedule)
    schedule, kind = s.name, s.shape
    params = dict(params or {})
    check_params(schedule, params, s.defaults)
    dims = s.parse_shape(shape)
    if min(dims) < 1:
        raise ScheduleError("shape extents must be positive", shape, "use extents >= 1")
    if kind == "attention" and dims[3] % 16:
        raise ScheduleError("D is the K of the QK^T MMA and the N of PV, stepped 16 at a time for 16-bit types "
                            "(wgmma .m64nNk16, tcgen05 kind::f16, mma.sync .m16n8k16)", f"D = {dims[3]}",
                            "use a head dimension that is a multiple of 16, e.g. 64, 128")
    p = load_profile(gpu)
    if max_events is not None and (isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 1):
        raise ScheduleError("the event bound is a count >= 1", repr(max_events), "e.g. --max-events 5000000")
    if p.arch != s.arch:
        raise ScheduleError(f"{schedule} is written for {s.arch} hardware", f"profile {gpu} ({p.arch})",
                            f"use --gpu {s.gpu} or a schedule of the {p.arch} family")
    check_size(kind, dims, {**s.defaults, **s.flags, **params}, p["sm_count"], s.q_rows,
               max_events or (recorder.MAX_FULL_EVENTS if full else None),
               partial(_item_events, s, p, params, dims[-1]))
    t0 = time.time()
    expected = check_full_size(s, p, dims, params, max_events) if full and cut is None else None
    tick = None if progress is None else (lambda n: progress(n, expected))
    r = _run(s, p, dims, params, check_races, full, cut, max_events, tick, stall_s)
    if kind == "attention":
        roof = roofline.attention(p, *dims, causal=bool(r["params"].get("causal")))
    else:
        roof = roofline.gemm(p, *dims)
    wall = time.time() - t0
    # The representative (or, full, the last) SM's finish is the kernel's time (the worst wave decides).
    ns = r["env_ns"]
    _check_result(schedule, ns, r["flops"])
    util = {u: busy / ns for u, busy in r["units"].items()}
    # The simulator must never beat the roofline; where it does, a bound is missing from the schedule's model
    # (e.g. Q/O traffic not held to HBM at tiny L), and the output says so instead of hiding it.
    beats = r["flops"] / ns / 1e3 > roof.tflops() * (1 + 1e-9)
    return dict(schedule=schedule, gpu=gpu, shape=shape, params=r["params"], predicted_us=ns / 1e3,
                beats_roofline=beats,
                tflops=r["flops"] / ns / 1e3, roofline_tflops=roof.tflops(), roofline_bound_by=roof.bound_by,
                bound_by=max(util, key=util.get), utilization=util, roles=role_summary(r["events"], ns),
                critical_path=critical_path(r["events"]), work=r["work"], fit=r["fit"], grid=r["grid"],
                races=None if r["races"] is None else [str(x) for x in r["races"]],
                events=len(r["events"]), wall_s=wall, _events=r["events"])


def _length(spans: list) -> float:
    return sum(hi - lo for lo, hi in spans)


def role_summary(events, total_ns: float) -> dict:
    """Per role: the fraction of the run it is busy (any op in flight), the fraction it only waits, and what
    it waits on (ns summed per wait kind; overlapping activities of one role, e.g. an overlapped QK issued
    from a child process, are counted once in the fractions)."""
    ops, waits, on = defaultdict(list), defaultdict(list), defaultdict(lambda: defaultdict(float))
    for e in events:
        if e.kind == "wait":
            waits[e.role].append((e.start_ns, e.end_ns))
            on[e.role][e.op] += e.end_ns - e.start_ns
        elif e.role != "tma":
            ops[e.role].append((e.start_ns, e.end_ns))
    out = {}
    for r in sorted(set(ops) | set(waits)):
        busy = _union(ops[r])
        waiting = _length(_union(waits[r])) - _overlap(_union(waits[r]), busy)
        out[r] = dict(busy=_length(busy) / total_ns, wait=waiting / total_ns, waits_on=dict(on[r]))
    return out


def _overlap(a: list, b: list) -> float:
    """Total length of the intersection of two sorted disjoint span lists."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        total += max(0.0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def critical_path(events, top: int = 5) -> list:
    """The ops that take the most time in total (a first view of what bounds the run)."""
    total = defaultdict(float)
    for e in events:
        if e.kind != "wait":
            total[(e.role, e.op)] += e.end_ns - e.start_ns
    return [dict(role=r, op=o, total_ns=t) for (r, o), t in sorted(total.items(), key=lambda x: -x[1])[:top]]
