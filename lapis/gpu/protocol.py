"""The timing protocol of every timed comparison: same process, interleaved rounds, ratios per round.

- **Same process.** Every kernel compared is timed in one process, in `rounds` interleaved rounds (at least
  MIN_ROUNDS). A round runs every kernel once, in a rotating order (round r starts at kernel r mod n), and times
  `launches` launches of it (at least MIN_LAUNCHES), each with its own CUDA events, over rotating input sets.
- **Summaries.** Per kernel: the median of all its launches (µs) and the spread, IQR / median (%); per round,
  the round's median. Ratios to the reference kernel are taken per round (kernel round median over reference
  round median, the speed-up of the kernel when below 1 is a slow-down) and summarised by their median and IQR.
- **The clock.** A kernel that probes the SM clock itself (lapis's kernels: %clock64 and %globaltimer per CTA)
  reports its probe per round; for the others the SM clock is sampled (nvidia-smi, lapis.gpu.bench_gemm
  .SmiSampler) during their batches. Either way the summary gives the MHz with its source. Every kernel, probed or
  not, also gets the post-batch probe: after its batch of each round (outside the timed events) one launch of a
  clock-probe kernel on the same stream measures the clock the same way for all (post_clock, e.g. lapis.gpu.race's
  lapis/gpu/kernels/micro_launch_v1.cu), its MHz per round and their median in the summary's clock record.
- **The bracket clock.** Where the timer brackets each batch with two probe launches on the same stream (one right
  before the first timed launch, one right after the last: event_batch's `bracket`), bracket_clock gives the SM's
  mean clock between them: %clock64 cycles over %globaltimer ns from the first probe's end to the second's start on
  each SM, which spans the batch and nothing else queued. `busy` is the timed launches' µs over that span: below 1
  where the GPU waited for the host between launches, so the bracket also holds idle time.

`run` takes the launches and a `time_batch` function, so the protocol itself needs no GPU (tests give it fakes);
`event_batch(cp, torch)` is the CUDA-event timer the benches use.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lapis.errors import LapisError
from lapis.model.clock import PROBE_MHZ

MIN_ROUNDS, MIN_LAUNCHES = 5, 30
# CUDA events time a launch to about 0.5 µs and %globaltimer ticks every 32 ns: a batch of launches inside its
# bracket can read a little over 1
BUSY_MAX = 1.01


@dataclass
class Timed:
    """One kernel under the protocol. launch(i) enqueues one launch on input set i (0 <= i < n_sets);
    probe() -> the SM clock (MHz) of the last launch from the kernel's own probe, or None."""

    name: str
    launch: Callable[[int], None]
    n_sets: int = 1
    probe: Callable[[], float | None] | None = None


def rotation(items: list, r: int) -> list:
    """Round r's order: the list rotated by r (every kernel leads once every len(items) rounds)."""
    k = r % len(items)
    return items[k:] + items[:k]


def quartiles(xs) -> tuple[float, float, float]:
    q1, med, q3 = np.percentile(np.asarray(xs, dtype=float), [25, 50, 75])
    return float(q1), float(med), float(q3)


def check_counts(rounds: int, launches: int) -> None:
    if rounds < MIN_ROUNDS or launches < MIN_LAUNCHES:
        raise LapisError(f"the timing protocol takes at least {MIN_ROUNDS} rounds of {MIN_LAUNCHES} launches",
                         f"{rounds} rounds of {launches}", f"use rounds >= {MIN_ROUNDS} and launches >= {MIN_LAUNCHES}")


def _post_mhz(post, name: str, r: int) -> float | None:
    """post_clock's reading after kernel `name`'s batch of round r: None, or a positive finite number of MHz;
    LapisError otherwise (NaN would be written to the manifest as NaN, a bool or a string taken as a number)."""
    if post is None:
        return None
    if not _positive_number(post):
        raise LapisError("post_clock returns the post-batch probe's SM clock in MHz, a positive finite number, or None",
                         f"{post!r} after {name}'s batch of round {r}",
                         "return the probe's MHz (lapis.gpu.race.post_probe_mhz), or None where no CTA recorded one")
    return float(post)


def _positive_number(x) -> bool:
    """x is an int or float (numpy's too, not a bool) that is finite and above zero (an int past a float's range
    is not)."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
        return False
    try:
        return math.isfinite(x) and x > 0
    except OverflowError:
        return False


def _bracket(reading, name: str, r: int) -> tuple[float, float] | None:
    """bracket_clock's reading after kernel `name`'s batch of round r: None, or a tuple or list (MHz, span ns), both
    positive finite numbers and the MHz an SM clock (lapis.model.clock.PROBE_MHZ); LapisError naming the kernel and
    round otherwise."""
    if reading is None:
        return None
    lo, hi = PROBE_MHZ
    if not (isinstance(reading, (tuple, list)) and len(reading) == 2 and all(map(_positive_number, reading))
            and lo <= reading[0] <= hi):
        raise LapisError(f"bracket_clock returns (SM MHz, span ns): two positive finite numbers, the MHz from {lo:.0f} "
                         f"to {hi:.0f}, or None", f"{reading!r} after {name}'s batch of round {r}",
                         "return None where no probe ran")
    return float(reading[0]), float(reading[1])


def _busy(us: list, span_ns: float, name: str, r: int) -> float:
    """The batch's timed µs over the bracket's span; LapisError above BUSY_MAX (the launches sit inside the span, so
    more means the probes did not bracket them)."""
    busy = 1e3 * sum(us) / span_ns
    if not busy <= BUSY_MAX:
        raise LapisError(f"a batch's timed launches fit inside its bracket (busy <= {BUSY_MAX})",
                         f"busy {busy!r} ({sum(us)!r} µs over {span_ns!r} ns) after {name}'s batch of round {r}",
                         "launch the probes on the batch's stream, one before its first launch and one after its "
                         "last (event_batch's bracket)")
    return busy


def run(kernels: list[Timed], time_batch, reference: str | None = None, rounds: int = MIN_ROUNDS,
        launches: int = MIN_LAUNCHES, sample_clock=None, post_clock=None, bracket_clock=None) -> dict:
    """Time `kernels` under the protocol. time_batch(launch, n_sets, launches) -> the launches' times (µs);
    sample_clock(t0, t1) -> sampled SM MHz over a wall-clock window (or None), taken for every kernel, probed or
    not, so the two clocks of a probed kernel can be compared; post_clock() -> the post-batch probe's SM MHz (or
    None), called once after every kernel's batch, after time_batch has returned and the sample's window closed
    (LapisError, _post_mhz, for a reading that is not a positive finite number); bracket_clock() -> (MHz, span ns)
    of the bracket probes around the batch just timed (module docstring), or None, called after post_clock
    (LapisError, _bracket, for values that are not positive finite numbers).
    reference: the kernel the ratios are taken to (default the first). Returns {kernels: {name: summary}, rounds,
    launches, reference, order}."""
    check_counts(rounds, launches)
    names = [k.name for k in kernels]
    if len(set(names)) != len(names):
        raise LapisError("kernels under one protocol run have distinct names", names, "rename the duplicates")
    reference = reference or names[0]
    per = {n: dict(us=[], round_us=[], mhz=[], sampled_mhz=[], post_mhz=[], bracket_mhz=[], busy=[],
                   clock_source=None) for n in names}
    order = []
    for r in range(rounds):
        order.append([k.name for k in rotation(kernels, r)])
        for k in rotation(kernels, r):
            t0 = time.time()
            us = list(time_batch(k.launch, k.n_sets, launches))
            sampled = sample_clock(t0, time.time()) if sample_clock else None
            post = _post_mhz(post_clock(), k.name, r) if post_clock else None
            bracket = _bracket(bracket_clock(), k.name, r) if bracket_clock else None
            mhz, source = (k.probe(), "probe") if k.probe else (sampled, "sampled")
            p = per[k.name]
            if sampled is not None:
                p["sampled_mhz"].append(float(sampled))
            if post is not None:
                p["post_mhz"].append(post)
            if bracket is not None:
                p["bracket_mhz"].append(bracket[0])
                p["busy"].append(_busy(us, bracket[1], k.name, r))
            p["us"] += us
            p["round_us"].append(float(np.median(us)))
            if mhz is not None:
                p["mhz"].append(float(mhz))
                p["clock_source"] = source
    return dict(kernels={n: summary(per[n], per[reference]["round_us"]) for n in names}, rounds=rounds,
                launches=launches, reference=reference, order=order)


def summary(p: dict, reference_rounds: list) -> dict:
    """Median µs, spread (IQR / median, %), per-round medians, ratio to the reference per round (median, IQR); the
    clock record: mhz_median/min/max and source (the kernel's probe, else the samples), sampled_mhz_median beside a
    probe, post_mhz (the post-batch probe per round that read one) with post_mhz_median, and bracket_mhz with
    bracket_mhz_median and busy (per round; module docstring) where the batches were bracketed."""
    q1, med, q3 = quartiles(p["us"])
    ratios = [ref / mine for mine, ref in zip(p["round_us"], reference_rounds)]  # > 1: faster than the reference
    r1, rmed, r3 = quartiles(ratios)
    out = dict(median_us=med, spread_pct=100 * (q3 - q1) / med, round_median_us=p["round_us"],
               speedup_to_reference=dict(median=rmed, iqr=r3 - r1, per_round=ratios), launches=len(p["us"]))
    if p["mhz"]:
        out["clock"] = dict(mhz_median=float(np.median(p["mhz"])), mhz_min=min(p["mhz"]), mhz_max=max(p["mhz"]),
                            source=p["clock_source"])
        if p["clock_source"] == "probe" and p.get("sampled_mhz"):  # nvidia-smi's samples of the same batches
            out["clock"]["sampled_mhz_median"] = float(np.median(p["sampled_mhz"]))
    if p.get("post_mhz"):  # the post-batch probe, for every kernel alike
        out.setdefault("clock", {}).update(post_mhz_median=float(np.median(p["post_mhz"])), post_mhz=p["post_mhz"])
    if p.get("bracket_mhz"):  # the bracket probes, for every kernel alike
        out.setdefault("clock", {}).update(bracket_mhz_median=float(np.median(p["bracket_mhz"])),
                                           bracket_mhz=p["bracket_mhz"], busy=p["busy"])
    return out


def event_batch(cp, torch=None, bracket=None):
    """time_batch over CUDA events (cupy's, on the current stream): the queue is filled ahead by a GPU sleep
    (torch.cuda._sleep, when torch is there) so launch overhead does not show; times in µs. bracket: where given,
    bracket.before() and bracket.after() enqueue its probes right before the first event and right after the last
    (module docstring), so the wait for the last event leaves the second probe queued, not run."""
    def time_batch(launch, n_sets: int, launches: int) -> list[float]:
        for i in range(3):  # warm-up: module load, first-touch allocations
            launch(i % n_sets)
        cp.cuda.Device().synchronize()
        evs = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(launches)]
        if torch is not None:
            torch.cuda._sleep(int(launches * 60e-6 * 2e9))  # ~60 µs of host enqueue per launch at ~2 GHz
        if bracket is not None:
            bracket.before()
        for i, (e0, e1) in enumerate(evs):
            e0.record()
            launch(i % n_sets)
            e1.record()
        if bracket is not None:
            bracket.after()
        evs[-1][1].synchronize()
        return [1e3 * cp.cuda.get_elapsed_time(e0, e1) for e0, e1 in evs]
    return time_batch
