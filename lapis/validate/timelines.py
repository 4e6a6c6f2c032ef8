"""`lapis validate timelines`: every committed timed measurement against the simulator's prediction.

A case is one (variant, shape, causal) of a timed capture: attention (lapis.captures.attention), the GEMM
(lapis.captures.gemm) and the third-party kernels of the race captures (lapis.gpu.race: torch's FA2 `flash` and
cuDNN `cudnn`, simulated by their schedules in lapis.catalog.third_party), found generically from the captures, so new variants and causal rows join by being
captured. A case measured by several captures takes its time from the last one; the earlier ones give the
run-to-run spread.
- predicted_us: the calibrated profile and the schedule alone, with the kernel's parameters as the capture
  records them: the committed prediction cache (lapis.pipeline_sim.predictions) where it holds the case, else a
  simulation. measured_us: the plain (uninstrumented) build's median. err_pct = 100 (predicted - measured) /
  measured (negative: the model is too fast).
- blind: a lapis/data/blind/*.json entry for the same schedule, variant, shape and causal flag, dated no later than
  the capture (the git history shows the order; this check works without it); blind_err_pct is its error.
- mape_pct = mean |err_pct|; max_abs_err_pct = the largest; mape_pct_blind = mean |blind_err_pct| over blind
  cases. spread_pct = the largest run-to-run difference, 100 (max - min) / min, over cases timed by more than
  one capture (without repeats: the median within-run IQR spread, and spread_source says so). rank_pairs = pairs
  of variants at one shape (and causal flag) whose measured gap exceeds 2 spread_pct; rank_agreement = the
  fraction the prediction orders the same way (a predicted tie is wrong), null without pairs.
- clock_model_mhz, clock_model_err_pct (only when a clock capture exists: lapis.model.clock): the SM clock the
  clock model gives the case's predicted tensor and FMA activity, and its error against the clock the capture
  measured; clock_model_mape_pct over the cases with a measured clock, and clock_model_by_day: that error per UTC day
  the cases' captures ran (capture_date, from their provenance; the clock capture's name beside them), so the
  model fitted on one day is read against runs of other days. Reported, never gated; the predicted time still uses
  the profile's one clock.
- clock_mhz and its source: for any kernel of a race capture, its bracket clock (lapis.gpu.protocol: the SM's mean
  clock between two probes around its batch) where the capture has it and every round's batch kept the GPU busy
  (busy >= BRACKET_BUSY_MIN) ("bracket probe"; lapis's kernels keep their in-kernel probe beside it,
  clock.probe_mhz); else the plain build's clock probe for lapis's kernels ("probe", "probed"); for a race's
  third-party kernel the post-batch probe (lapis.gpu.race) where the capture has it, times probe_to_post of its row
  (or, for a row without lapis's kernels, of its capture) ("post-batch probe x probe ratio"; the post-batch probe
  alone, "post-batch probe", where the capture has no in-kernel probe beside one), else nvidia-smi's sample times the
  row's probe_to_sampled ("sampled x probe ratio"), else the sample ("sampled").
  post_probe_agreement: {median_ratio, rows}, the median of post-batch probe / in-kernel probe over lapis's race
  rows that have both (None without any), so the post-batch probe is read against the in-kernel one;
  bracket_agreement the same for the bracket clock, with the lowest and highest ratio.
- not_compared (present when there are any): {"<kind>/<capture>": {reason: count}} of the variant entries of a
  timed capture that hold no plain-build time (the run stopped before timing them; lapis.captures.readers),
  printed under the table. They are left out of the cases; they do not change the exit code.
- Where the capture holds the case's timeline (the instrumented build: the truth for events, not for total
  time), both timelines are renamed into one vocabulary (lapis.validate.timeline_align) and give the steady-state
  iteration time (lapis.validate.timeline_compare), per-role busy and wait fractions, the ns per tile of each op, the
  first divergence from the launch on, and the steady-state divergence (the same inside the middle work item,
  from its third K/V tile on): logical ids, never buffer positions; offsets in ns and % of the measured iteration.
  These metrics are cached beside the predicted times (key: the schedule's prediction key, the measured
  canonical events' digest, the tolerance, compare_hash() and the model hash), so a run that draws no per-case
  Gantt chart simulates only what the cache lacks.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import math
import os
import re
import statistics
import sys
import zipfile
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from functools import lru_cache
from pathlib import Path

from lapis.captures import attention as ac
from lapis.captures import gemm as gc
from lapis.captures.manifest import read_original
from lapis.captures.readers import read_race
from lapis.captures.store import captures_root, manifests
from lapis.catalog import attention, third_party
from lapis.errors import CaptureError, LapisError, NotModelled, ScheduleError, shown
from lapis.figures.compare_gantt import compare_gantt
from lapis.figures.validation import progression, scatter
from lapis.gpu.attention_plan import OPS, ROLES
from lapis.gpu.protocol import BUSY_MAX
from lapis.model import clock as clock_model
from lapis.model.profile import load_profile
from lapis.pipeline_sim import predictions
from lapis.pipeline_sim.recorder import Event
from lapis.pipeline_sim.schedule import lookup
from lapis.pipeline_sim.simulate import simulate
from lapis.validate.blind import BLIND, entry_key, read as read_blind
from lapis.validate.ordering import ordering
from lapis.validate.timeline_align import CANONICAL, canonical, first_divergence, steady_divergence
from lapis.validate.timeline_compare import busy_fractions, err_pct, iteration_ns

GPU = "h200"
TOLERANCE_PCT = 10.0  # first divergence: an offset beyond this % of the measured steady-state iteration
# a bracket clock counts where the timed launches filled at least this fraction of its span in every round: an idle
# SM's clock differs from a loaded one's by up to 10% (the post-batch probe reads 8-13% above in-kernel probes), so
# 5% of idle moves the mean by under 0.5%
BRACKET_BUSY_MIN = 0.95
MAX_JOBS = 8  # worker processes for the cases (each simulates one schedule: about a second, single-threaded)


# ---------------------------------------------------------------- cases from the captures

def _capture_time(root: Path, capture: str, memo: dict) -> str:
    """The capture's provenance date in UTC, ISO 8601 to the microsecond (2026-12-02T16:35:54.000000+00:00: the
    strings order as the times do, and the first 10 characters are the UTC day). CaptureError when the date is not
    ISO 8601 with a time and a UTC offset, as the capture scripts write it (datetime.now(timezone.utc)): a bare
    day, a local time or a free string would order the captures wrongly."""
    if capture not in memo:
        date = read_original(root / capture)["provenance"]["date"]
        try:
            t = datetime.datetime.fromisoformat(date)
        except ValueError:
            t = None
        if t is None or t.tzinfo is None:  # a bare day parses without one
            raise CaptureError("a capture's provenance date is ISO 8601 with a time and a UTC offset "
                               "(2026-12-02T16:35:54+00:00)", f"{capture}: provenance.date = {date!r}",
                               "restore the capture from git (captures are never edited by hand)")
        memo[capture] = t.astimezone(datetime.timezone.utc).isoformat(timespec="microseconds")
    return memo[capture]


def _attention(root: Path) -> list[dict]:
    return [dict(family="attention", variant=r["variant"], schedule=r["schedule"], shape=r["shape"],
                 causal=bool(r["causal"]), params=dict(r["params"]), measured_us=r["median_us"],
                 spread_pct=r["spread_pct"], capture=r["capture"], timeline=r["timeline_key"],
                 timeline_capture=r["timeline_capture"], clock_mhz=r["clock_probe_mhz"])
            for r in ac.measurements(root)]


def _gemm(root: Path) -> list[dict]:
    out = []
    for folder in gc.timed_captures(root):
        man = gc.manifest(folder)
        for e, timed in gc.timed_entries(man):
            for v in timed:
                m = gc.measured(man, v, e["shape"])
                out.append(dict(family="gemm", variant=v, schedule=man["schedule"], shape=e["shape"], causal=False,
                                params=dict(man["variants"][v]), measured_us=m["measured_us"],
                                spread_pct=m["spread_pct"], capture=f"gemm/{folder.name}", timeline=m["timeline_file"],
                                timeline_capture=f"gemm/{folder.name}", clock_mhz=None))
    return out


def _own_variant(kernel: str, causal: bool) -> str | None:
    """The lapis variant whose kernel (its causal build when `causal`) is `kernel`, or None."""
    return next((n for n, v in attention.VARIANTS.items()
                 if (not causal or v["causal_build"]) and attention.kernel_name(v, causal) == kernel), None)


def _own_race_case(variant: str, e: dict, k: dict, folder: Path) -> dict:
    """A lapis variant's row of a race capture as a case: the catalog's simulator parameters and the clock: its
    bracket clock (_bracket_clock: the mean over the timed batch, as the third-party kernels get it) where the
    capture has one, else its in-kernel probe (the last launch of each round), which clock_probe_mhz keeps beside
    the bracket. Over a batch the clock drifts, and the last launch's probe reads the drift's end: s24 at
    8x16x4096x128 (race/h200-2026-12-03-bracket) probed 1446 MHz against a bracket of 1527, and 1724 µs at 1527 MHz
    is 2.633 M cycles, where Nsight Compute counted 2.652 M (ncu/h200-2026-12-03-s24). CaptureError (_race_mhz) when
    a clock is not a plausible SM clock."""
    v = attention.VARIANTS[variant]
    params = attention.sim_params(v, e["causal"])
    params.pop("causal", None)
    name = attention.kernel_name(v, e["causal"])
    clock = _race_clock(name, k)
    probe, bracket = _race_mhz(name, clock, "mhz_median"), _bracket_clock(name, clock)
    return dict(family="attention", variant=variant, schedule=v["schedule"], shape=e["shape"], causal=e["causal"],
                params=params, measured_us=k["median_us"], spread_pct=k["spread_pct"], capture=f"race/{folder.name}",
                timeline=None, timeline_capture=None, clock_mhz=bracket or probe,
                clock_source="bracket probe" if bracket else clock.get("source"),
                **({"clock_probe_mhz": probe} if bracket and clock.get("source") == "probe" else {}))


def probe_to_sampled(e: dict) -> float | None:
    """The race row's (one shape and causal flag) median over lapis's kernels of probed clock / nvidia-smi's
    sampled clock during their batches (lapis.gpu.race: both are recorded for a kernel with a clock probe); None
    when no kernel of the row has both. nvidia-smi samples the clock over its own interval, gaps between launches
    included, so it reads above the clock a kernel runs at (10-14% in the H200 races of 2026-12-02); the rounds
    are interleaved in one process, so the ratio carries over to the row's third-party kernels. CaptureError
    (_race_mhz) when a probed kernel's clock holds a value that is not a positive finite number of MHz."""
    ratios = [mhz / sampled for mhz, sampled in _probed_pairs([e], "sampled_mhz_median")]
    return statistics.median(ratios) if ratios else None


def _probed_pairs(rows: list[dict], key) -> list[tuple[float, float]]:
    """(in-kernel probe, other clock) in MHz of every lapis kernel (clock source "probe") in race rows `rows` that
    has both (a capture older than the field has none): the other clock is clock[key] for a key, or key(name, clock)
    for a function (_bracket_clock); CaptureError (_race_mhz) for a clock that is not a positive finite number of
    MHz."""
    pairs = []
    for e in rows:
        for name, k in e.get("kernels", {}).items():
            c = _race_clock(name, k)
            if c.get("source") == "probe":
                mhz = _race_mhz(name, c, "mhz_median")
                other = key(name, c) if callable(key) else _race_mhz(name, c, key)
                if mhz is not None and other is not None:
                    pairs.append((mhz, other))
    return pairs


_RACE_FIX = "restore the capture from git or time it again (python -m lapis.gpu.race)"


def _race_clock(name: str, k) -> dict:
    """Kernel `name`'s clock record in a race row ({} without one); CaptureError when it is not an object."""
    c = k.get("clock") if isinstance(k, dict) else None
    if c is not None and not isinstance(c, dict):
        raise CaptureError("a race kernel's clock is an object {mhz_median, source, ...}",
                           f"kernels.{name}.clock = {c!r}", _RACE_FIX)
    return c or {}


def _race_mhz(name: str, clock: dict, key: str) -> float | None:
    """clock[key] of kernel `name` in MHz; None when absent; CaptureError unless a positive finite number within
    lapis.model.clock.PROBE_MHZ (a bool, a string, 0, a negative, NaN, inf, or a clock of 1 MHz or 1e300 MHz would
    scale every third-party clock of the row)."""
    v = clock.get(key)
    if v is None:
        return None
    lo, hi = clock_model.PROBE_MHZ
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise CaptureError("a race kernel's clock in MHz is a positive finite number",
                           f"kernels.{name}.clock.{key} = {v!r}", _RACE_FIX)
    if not lo <= v <= hi:
        raise CaptureError(f"a race kernel's clock reads an SM clock between {lo:.0f} and {hi:.0f} MHz",
                           f"kernels.{name}.clock.{key} = {v!r}", _RACE_FIX)
    return float(v)


def _race_clocks(folder: Path, man: dict) -> dict:
    """The race manifest `man` once every kernel's clocks (mhz_median, sampled_mhz_median, post_mhz_median) pass
    _race_mhz; its CaptureError names the capture and the row (results[i], shape, causal) otherwise."""
    for i, e in enumerate(man["results"]):
        for name, k in e.get("kernels", {}).items():
            try:
                c = _race_clock(name, k)
                for key in ("mhz_median", "sampled_mhz_median", "post_mhz_median"):
                    _race_mhz(name, c, key)
                _bracket_clock(name, c)
            except CaptureError as exc:
                raise CaptureError(exc.rule, f"race/{folder.name}: results[{i}] ({e['shape']}, causal "
                                   f"{e['causal']}): {exc.value}", exc.fix) from None
    return man


def probe_to_post(rows: list[dict]) -> float | None:
    """The median over lapis's kernels (clock source "probe") in race rows `rows` of in-kernel probe / post-batch
    probe (clock.mhz_median / clock.post_mhz_median); None when no kernel there has both. The post-batch probe runs
    after the batch's last launch has finished, and the idle SM's clock has risen by then: it reads 8-13% above the
    in-kernel probe on the H200 (race/h200-2026-12-02-s21, 40 rows: ratio 0.872-0.921, median 0.899), a narrower
    spread than nvidia-smi's sample (0.78-0.97 there). CaptureError (_race_mhz) for a clock that is not a positive
    finite number of MHz."""
    ratios = [mhz / post for mhz, post in _probed_pairs(rows, "post_mhz_median")]
    return statistics.median(ratios) if ratios else None


def _bracket_clock(name: str, c: dict) -> float | None:
    """The bracket clock (MHz) of kernel `name`'s clock record c where every round's batch kept the GPU busy
    (min(busy) >= BRACKET_BUSY_MIN: idle gaps between launches would put the idle SM's clock into it); None where
    the record has none or a round idled; CaptureError (_race_mhz) for a clock that is not an SM clock, or busy
    fractions that are not a non-empty list of positive numbers."""
    mhz = _race_mhz(name, c, "bracket_mhz_median")
    if mhz is None:
        return None
    readings = c.get("bracket_mhz")
    if not isinstance(readings, list) or not readings:
        raise CaptureError("a race kernel's bracket clock keeps its readings, one per round (bracket_mhz)",
                           f"kernels.{name}.clock.bracket_mhz = {readings!r}", _RACE_FIX)
    for i in range(len(readings)):  # each round's reading an SM clock, not only their median
        _race_mhz(name, {f"bracket_mhz[{i}]": readings[i]}, f"bracket_mhz[{i}]")
    busy = c.get("busy")
    if not isinstance(busy, list) or not busy or not all(
            isinstance(b, (int, float)) and not isinstance(b, bool) and 0 < b <= BUSY_MAX for b in busy):
        raise CaptureError(f"a race kernel's busy fractions are a non-empty list of numbers in (0, {BUSY_MAX}], one "
                           "per round (the timed launches sit inside their bracket)",
                           f"kernels.{name}.clock.busy = {busy!r}", _RACE_FIX)
    return mhz if min(busy) >= BRACKET_BUSY_MIN else None


def _third_party_clock(k: dict, ratio: float | None, name: str = "?", post_ratio: float | None = None) -> tuple:
    """(clock_mhz, clock_source, sampled_mhz) of a third-party kernel's race row: its bracket clock (_bracket_clock,
    "bracket probe") where it has one, else its post-batch probe
    (clock.post_mhz_median, lapis.gpu.race) where the capture has one, times post_ratio (probe_to_post) where given
    ("post-batch probe x probe ratio") or alone ("post-batch probe"), else its nvidia-smi sample times the row's
    probe_to_sampled where the row has one ("sampled x probe ratio"), else the sample ("sampled"); sampled_mhz is
    the sample either way. CaptureError (_race_mhz) when the post-batch probe or the sample is not a positive finite
    number of MHz."""
    c = _race_clock(name, k)
    mhz, post = _race_mhz(name, c, "mhz_median"), _race_mhz(name, c, "post_mhz_median")
    bracket = _bracket_clock(name, c)
    if bracket is not None:
        return bracket, "bracket probe", mhz
    if post is not None:
        return (post * post_ratio, "post-batch probe x probe ratio", mhz) if post_ratio else \
            (post, "post-batch probe", mhz)
    if mhz is None or ratio is None:
        return mhz, c.get("source"), mhz
    return mhz * ratio, "sampled x probe ratio", mhz


def _race_rows(root: Path) -> list[dict]:
    """Every row of every race capture under root, its clocks checked (_race_clocks); [] without race captures."""
    return [e for folder in (manifests(root, "race") if (Path(root) / "race").is_dir() else [])
            for e in _race_clocks(folder, read_race(folder).manifest)["results"]]


def post_probe_agreement(root: Path, rows: list[dict] | None = None) -> dict | None:
    """{median_ratio, rows}: over the race rows (every race capture under root, or `rows`, _race_rows) of lapis's
    kernels (clock source "probe") that hold both clocks, the median of the post-batch probe over the kernel's
    in-kernel probe (clock.post_mhz_median / clock.mhz_median), and the number of those rows; None when no race
    capture has a post-batch probe beside an in-kernel one. Near 1 when the post-batch probe, the clock of the
    third-party kernels, reads the clock the kernels ran at. CaptureError (_race_mhz) for a clock that is not a
    positive finite number of MHz."""
    ratios = [post / mhz for mhz, post in _probed_pairs(_race_rows(root) if rows is None else rows, "post_mhz_median")]
    return dict(median_ratio=statistics.median(ratios), rows=len(ratios)) if ratios else None


def bracket_agreement(root: Path, rows: list[dict] | None = None) -> dict | None:
    """{median_ratio, min_ratio, max_ratio, rows}: over the race rows (as post_probe_agreement's) of lapis's kernels
    (clock source "probe") whose bracket clock counts (_bracket_clock), bracket clock / in-kernel probe, and the
    number of those rows; None without any. Near 1 when the bracket clock, the clock of the third-party kernels,
    reads the clock the kernels ran at."""
    ratios = [b / mhz for mhz, b in _probed_pairs(_race_rows(root) if rows is None else rows, _bracket_clock)]
    return dict(median_ratio=statistics.median(ratios), min_ratio=min(ratios), max_ratio=max(ratios),
                rows=len(ratios)) if ratios else None


def _race(root: Path) -> list[dict]:
    """The third-party kernels (lapis.catalog.third_party, by their `timed` name) of every race capture
    (lapis.gpu.race): one case per (kernel, shape, causal), with the kernel's tile parameters at that head dim
    and its SM clock (_third_party_clock: the post-batch probe times probe_to_post of its row, or of its capture
    where the row has no lapis kernel, else the clock nvidia-smi sampled during its batches, corrected by the row's
    probe_to_sampled where lapis's kernels in the same rounds measured both; clock_sampled_mhz keeps the sample)."""
    out = []
    for folder in (manifests(root, "race") if (Path(root) / "race").is_dir() else []):
        if not third_party.timed_alone(folder.name):
            continue
        man = _race_clocks(folder, read_race(folder).manifest)
        whole = probe_to_post(man["results"])
        for e in man["results"]:
            ratio, post_ratio = probe_to_sampled(e), probe_to_post([e]) or whole
            for name, k in e.get("kernels", {}).items():
                own = _own_variant(name, e["causal"])
                if own:  # a lapis step; s1..s9 are timed by bench captures too (measured_cases takes the last)
                    out.append(_own_race_case(own, e, k, folder))
                    continue
                found = third_party.by_timed_name(name)
                if not found:
                    continue
                variant, entry = found
                d = e["shape"].split("x")[-1]
                params = next((dict(c[2]) for c in entry["cases"] if c[0].endswith(f"x{d}")), {})
                params.pop("causal", None)
                mhz, source, sampled = _third_party_clock(k, ratio, name, post_ratio)
                out.append(dict(family="attention", variant=variant, schedule=entry["schedule"],
                                shape=e["shape"], causal=e["causal"], params=params, measured_us=k["median_us"],
                                spread_pct=k["spread_pct"], capture=f"race/{folder.name}", timeline=None,
                                timeline_capture=None, clock_mhz=mhz, clock_source=source,
                                clock_sampled_mhz=sampled))
    return out


def measured_cases(root: Path) -> list[dict]:
    """One dict per (family, variant, shape, causal), from the last capture that timed it; runs_us lists the
    medians of every capture that timed it, in capture order. "Last" by the captures' provenance dates (capture
    folders sort by name, and a name says nothing of the hour: race/h200-2026-12-02-s7 ran before -s20; of two
    captures at the same second, the one read later: attention, gemm, then race, each by name); capture_date is
    that date's UTC day (YYYY-MM-DD; _capture_time, CaptureError for a date without a time and offset). A race row
    has no timeline: where it is last, the case keeps the timeline of the last bench capture that timed it
    (timeline, timeline_capture), and its time and clock are the race's."""
    cases, times = {}, {}
    try:
        rows = (_attention(root) if ac.has_timed(root) else []) + _gemm(root) + _race(root)
        for r in rows:
            _capture_time(root, r["capture"], times)
    except CaptureError:  # the capture readers name the file and field
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CaptureError("a timed capture's manifest is unreadable or incomplete", f"{type(exc).__name__}: {exc}",
                           "restore the capture from git, or point --captures at a folder of whole captures") from None
    for r in rows:
        if not (isinstance(r["measured_us"], (int, float)) and r["measured_us"] > 0):
            raise CaptureError("a measured time is a positive number of µs", f"{r['capture']}: {r['variant']} at "
                               f"{r['shape']}: {r['measured_us']!r}", "restore the capture from git")
        key = (r["family"], r["variant"], r["shape"], r["causal"])
        runs = cases[key]["runs_us"] + [r["measured_us"]] if key in cases else [r["measured_us"]]
        if key not in cases or times[r["capture"]] >= times[cases[key]["capture"]]:
            kept = {k: cases[key][k] for k in ("timeline", "timeline_capture")} \
                if key in cases and cases[key]["timeline"] and not r["timeline"] else {}
            cases[key] = dict(r, capture_date=times[r["capture"]][:10], **kept)
        elif r["timeline"] and not cases[key]["timeline"]:  # an earlier bench capture's timeline
            cases[key].update(timeline=r["timeline"], timeline_capture=r["timeline_capture"])
        cases[key]["runs_us"] = runs
    return list(cases.values())


# ---------------------------------------------------------------- predictions

def sim_params(schedule: str, params: dict, causal: bool) -> dict:
    """The parameters to simulate with: {} when the capture's all equal the schedule's own (so the committed
    cache's key matches), else all of them; causal=1 for a causal row."""
    s = lookup(schedule)
    own = {**s.defaults, **{k: v for k, v in s.flags.items() if k in s.defaults}}
    out = {} if all(own.get(k, object()) == v for k, v in params.items()) else dict(params)
    return {**out, "causal": 1} if causal else out


def blind_entries() -> list[dict]:
    """Every entry of lapis/data/blind/*.json, with its set's name and date (lapis.validate.blind.read: CaptureError
    naming a damaged file)."""
    out = []
    for path in sorted(BLIND.glob("*.json")):
        d = read_blind(path)  # CaptureError naming the file for a damaged set
        out += [dict(e, set=d["name"], date=d["date"]) for e in d["entries"]]
    return out


def blind_for(case: dict, entries: list[dict]) -> dict | None:
    """The blind entry of this case dated no later than its capture, or None; never for a third-party
    configuration measured before its predictions were made (lapis.catalog.third_party `seen`)."""
    seen = third_party.KERNELS.get(case["variant"], {}).get("seen", ())
    if (case["shape"], case["causal"]) in seen:
        return None
    key = (case["variant"], case["schedule"], case["shape"], case["causal"])
    return next((e for e in entries if entry_key(e) == key and e["date"] <= case["capture_date"]), None)


# ---------------------------------------------------------------- timelines

def measured_events(root: Path, case: dict) -> list | None:
    """The measured events of the case's timeline (attention: SM 0; GEMM: gemm_capture.pick_sm), or None."""
    if not case["timeline"]:
        return None
    try:
        if case["family"] == "attention":
            return ac.sm_events(ac.timeline(root, case["timeline"], case["timeline_capture"]), 0, ROLES, OPS)
        got = gc.measured_events(root / case["capture"], case["timeline"])
    except CaptureError:  # a damaged packed file: it names the file
        raise
    except (OSError, ValueError, EOFError, KeyError, IndexError, TypeError, zipfile.BadZipFile) as exc:
        raise CaptureError("a capture's timelines.npz is unreadable", f"{case['timeline_capture']}: "
                           f"{type(exc).__name__}: {exc}", "restore the capture from git") from None
    return None if got is None else got[0]


def timeline_metrics(pred, meas, family: str, tolerance_pct: float = TOLERANCE_PCT) -> dict:
    """Iteration time, busy/wait fractions per role, ns per tile of each canonical op (summed over the
    consumer roles) and the first divergence, from two canonical event lists (lapis.validate.timeline_align)."""
    it_p, it_m = iteration_ns(pred), iteration_ns(meas)
    fr = {side: (busy_fractions(ev), busy_fractions(ev, waits=True)) for side, ev in (("p", pred), ("m", meas))}
    roles = {r: dict(busy=dict(predicted=fr["p"][0].get(r), measured=fr["m"][0].get(r)),
                     wait=dict(predicted=fr["p"][1].get(r), measured=fr["m"][1].get(r)))
             for r in sorted(set(fr["p"][0]) | set(fr["m"][0]) | set(fr["p"][1]) | set(fr["m"][1]))}
    op_p, op_m = ac.iteration_ns(pred), ac.iteration_ns(meas)
    ops = {op: dict(predicted=op_p.get(op), measured=op_m.get(op)) for op in dict.fromkeys(CANONICAL[family].values())
           if op in op_p or op in op_m}
    return dict(iteration_ns=dict(predicted=it_p, measured=it_m, err_pct=err_pct(it_p, it_m) if it_p and it_m
                                  else None),
                roles=roles, ops_ns_per_tile=ops,
                first_divergence=first_divergence(pred, meas, it_m, tolerance_pct) if it_m else None,
                steady_divergence=steady_divergence(pred, meas, it_m, tolerance_pct) if it_m else None)


# ---------------------------------------------------------------- the whole table

def _progress(progress, text: str, done: int | None = None, total: int | None = None) -> None:
    """progress: False (silent), True (a line on stderr) or a callable(text, done, total) (the report's bar)."""
    if callable(progress):
        progress(text, done, total)
    elif progress:
        print(text, file=sys.stderr, flush=True)


COMPARED_BY = ("validate/timeline_align.py", "validate/timeline_compare.py", "validate/timelines.py",
               "captures/attention.py", "captures/gemm.py")  # the code that turns two timelines into metrics


@lru_cache(maxsize=None)
def compare_hash() -> str:
    """Digest of the modules that compute a case's timeline metrics (a cached entry goes stale with them)."""
    return predictions.digest([predictions.PACKAGE / p for p in COMPARED_BY])


def events_digest(events) -> str:
    """sha256 (16 hex digits) of an event list, field by field: the measured side of a cached comparison. The
    text hashed is repr(list(events)) (a cached entry's key depends on it), each recorder.Event formatted by
    _event_repr."""
    return hashlib.sha256(("[" + ", ".join(map(_event_repr, events)) + "]").encode()).hexdigest()[:16]


# recorder.Event's fields in the order its dataclass __repr__ prints them; _event_repr writes that text itself
_EVENT_FIELDS = ("role", "op", "start_ns", "end_ns", "sm", "cta", "work_item", "k_index", "kind", "flow_from", "id")
_FAST_REPR = tuple(f.name for f in dataclasses.fields(Event) if f.repr) == _EVENT_FIELDS


def _event_repr(e) -> str:
    """repr(e): for a recorder.Event the dataclass's text written by one f-string (its generated __repr__, with
    its recursion guard, costs about twice as much over a timeline's ~30,000 events); anything else by repr."""
    if not _FAST_REPR or type(e) is not Event:
        return repr(e)
    return (f"Event(role={e.role!r}, op={e.op!r}, start_ns={e.start_ns!r}, end_ns={e.end_ns!r}, sm={e.sm!r}, "
            f"cta={e.cta!r}, work_item={e.work_item!r}, k_index={e.k_index!r}, kind={e.kind!r}, "
            f"flow_from={e.flow_from!r}, id={e.id!r})")


def validate_timelines(captures: str | None = None, figures: str | Path | None = None, progress=False,
                       tolerance_pct: float = TOLERANCE_PCT, select=None, gantts: bool = True,
                       cache: dict | None = None, resimulate: bool = False) -> dict:
    """The table (module docstring) as a JSON-able dict. figures: a folder for the scatter and the progression
    chart (lapis.figures.validation) and, with gantts, every case's Gantt chart (each one simulates its case).
    progress: see _progress. select: keep only the cases (measured_cases dicts) for which it returns True.
    cache: the prediction cache to read and extend (None: the committed one, read only); a case's predicted time
    and its timeline metrics come from it where current (keys: the schedule's, and for the metrics also the
    measured timeline's digest, the tolerance and compare_hash), else are computed; resimulate recomputes all.
    Each row's predicted_source says which ("cache" or "simulated").
    Raises CaptureError when the captures hold no timed attention or GEMM capture (or select keeps none), and
    LapisError for a figures folder it cannot make."""
    root = captures_root(captures, kinds=())
    cases = [c for c in measured_cases(root) if select is None or select(c)]
    if not cases:
        raise CaptureError("no timed attention or GEMM capture", f"{root}", "pass --captures DIR holding "
                           "attention/<capture>/ or gemm/<capture>/ with timed results (lapis bench ...)")
    fig_dir = Path(figures) if figures else None
    if fig_dir:
        try:
            fig_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # an existing file, a read-only or pseudo file system
            raise LapisError("--figures must be a folder lapis can write", str(fig_dir),
                             "pass a new or existing folder") from exc
    cache = predictions.load() if cache is None else cache
    blinds, per_case = blind_entries(), []
    args = [(root, case, cache, blind_for(case, blinds), fig_dir if gantts else None, tolerance_pct, resimulate)
            for case in cases]
    jobs = min(len(cases), os.cpu_count() or 1, MAX_JOBS)
    with ProcessPoolExecutor(jobs) if jobs > 1 else nullcontext() as pool:
        rows = pool.map(_case_row, *zip(*args)) if pool else map(_case_row, *zip(*args))
        for i, (case, (row, new)) in enumerate(zip(cases, rows)):  # in order, as each case completes
            _progress(progress, f"validate timelines: {i + 1}/{len(cases)} {case['variant']} {case['shape']}",
                      i + 1, len(cases))
            cache.update(new)
            per_case.append(row)
    out = summarize(per_case, tolerance_pct)
    rows = _race_rows(root)  # read once for both agreements
    out["post_probe_agreement"] = post_probe_agreement(root, rows)
    out["bracket_agreement"] = bracket_agreement(root, rows)
    skipped = {**(ac.not_timed(root) if ac.has_timed(root) else {}), **gc.not_timed(root)}
    if skipped:
        out["not_compared"] = skipped
    if fig_dir:
        _progress(progress, "validate timelines: scatter and progression charts")
        scatter(out["per_case"], fig_dir / "validation_scatter.png")
        progression(out["per_case"], fig_dir / "validation_progression.png")
        out["figures"] = dict(scatter="validation_scatter.png", progression="validation_progression.png")
    return out


def _case_row(root: Path, case: dict, cache: dict, blind: dict | None, fig_dir: Path | None,
              tolerance_pct: float, resimulate: bool = False) -> tuple[dict, dict]:
    """(one per_case row (module docstring), the cache entries it computed); draws the case's Gantt into fig_dir
    when given. A top-level function: validate_timelines runs it in worker processes."""
    meas_ev = measured_events(root, case)
    row = {k: case[k] for k in ("family", "variant", "schedule", "shape", "causal", "capture", "capture_date",
                                "runs_us")}
    new = {}
    mc = None if meas_ev is None else canonical(meas_ev, case["family"])
    try:
        metrics_key = None if mc is None else json.dumps([*_metrics_parts(case, mc, tolerance_pct),
                                                          predictions.model_hash()])
        params = sim_params(case["schedule"], case["params"], case["causal"])
        pkey = predictions.key(case["schedule"], GPU, case["shape"], params)
        fresh = resimulate or pkey not in cache or (metrics_key is not None and metrics_key not in cache)
        pred_ev = None
        if fresh or fig_dir is not None and mc is not None:
            r = simulate(case["schedule"], GPU, case["shape"], dict(params))
            pred_ev = r["_events"]
            if resimulate or pkey not in cache:
                new[pkey] = {f: r[f] for f in predictions.KEPT}
        pred_us = (new.get(pkey) or cache[pkey])["predicted_us"]
    except (ScheduleError, NotModelled) as exc:  # a schedule that cannot run this case (e.g. causal not modelled)
        # the measured kernel ran: the limit is the built-in schedule's, so its fix is no advice to the reader
        why = f"not modelled: the schedule {case['schedule']} cannot run this case ({exc.rule}: {shown(exc.value)})"
        return dict(row, predicted_us=None, measured_us=case["measured_us"], err_pct=None, blind=False,
                    blind_err_pct=None, first_divergence=None, steady_divergence=None, error=why), new
    row.update(predicted_us=pred_us, predicted_source="simulated" if pkey in new else "cache",
               measured_us=case["measured_us"], err_pct=err_pct(pred_us, case["measured_us"]),
               within_run_spread_pct=case["spread_pct"], **cycles(pred_us, case),
               **modelled_clock((new.get(pkey) or cache[pkey]).get("utilization"), case),
               blind=blind is not None, blind_set=blind and blind["set"],
               blind_predicted_us=blind and blind["predicted_us"],
               blind_err_pct=blind and err_pct(blind["predicted_us"], case["measured_us"]))
    if mc is None:
        return dict(row, first_divergence=None, steady_divergence=None, timeline=None), new
    pc = None if pred_ev is None else canonical(pred_ev, case["family"])
    if resimulate or metrics_key not in cache:
        # through JSON, so a computed entry reads exactly as the cached one will
        new[metrics_key] = json.loads(json.dumps(timeline_metrics(pc, mc, case["family"], tolerance_pct)))
    t = dict(new.get(metrics_key) or cache[metrics_key])
    row.update(first_divergence=t.pop("first_divergence"), steady_divergence=t.pop("steady_divergence"), timeline=t)
    if fig_dir:
        row["gantt"] = _gantt(fig_dir, row, pc, mc)
    return row, new


def _metrics_parts(case: dict, measured, tolerance_pct: float) -> list:
    """What decides a case's timeline metrics besides the model: the schedule's prediction key, the measured
    canonical events, the tolerance and the comparing code."""
    params = sim_params(case["schedule"], case["params"], case["causal"])
    return ["timeline_metrics", case["schedule"], GPU, case["shape"], sorted(params.items()),
            predictions.profile_hash(GPU), events_digest(measured), tolerance_pct, compare_hash()]


def case_gantt(captures: str | None, row: dict, folder: Path) -> str:
    """Draw one per_case row's predicted-against-measured Gantt chart into `folder` (simulates the case: the
    chart needs every predicted event); returns the file name."""
    root = captures_root(captures, kinds=())
    case = next(c for c in measured_cases(root) if all(c[k] == row[k] for k in ("family", "variant", "shape",
                                                                                  "causal")))
    params = sim_params(case["schedule"], case["params"], case["causal"])
    pred = simulate(case["schedule"], GPU, case["shape"], dict(params))["_events"]
    return _gantt(folder, row, canonical(pred, case["family"]),
                  canonical(measured_events(root, case), case["family"]))


@lru_cache(maxsize=1)
def _profile_clock_ghz() -> float:
    return load_profile(GPU)["clock_ghz"]


def cycles(pred_us: float, case: dict) -> dict:
    """The error in SM cycles where the capture measured the run's clock (clock: {"mhz", "source"}: "probed" or
    "probe", the plain build's clock probe; "sampled x probe ratio", nvidia-smi during a third-party kernel's
    batches in a race capture times the row's probe_to_sampled, with "sampled_mhz" the sample itself; "sampled",
    the sample where the row had no probe; "post-batch probe x probe ratio", a race's clock-probe kernel launched
    after the third-party kernel's batches, times probe_to_post, or "post-batch probe" alone, with "sampled_mhz" the
    sample): the prediction at the profile's clock_ghz against the measurement at that clock. The time error mixes
    this with the clock the run had, which the model does not predict (one profile clock for every kernel)."""
    if not case.get("clock_mhz"):
        return dict(clock_mhz=None, clock=None, cycles_err_pct=None)
    ghz = _profile_clock_ghz()
    clock = dict(mhz=case["clock_mhz"], source=case.get("clock_source") or "probed")
    if case.get("clock_sampled_mhz") not in (None, case["clock_mhz"]):
        clock["sampled_mhz"] = case["clock_sampled_mhz"]
    if case.get("clock_probe_mhz") is not None:  # a lapis kernel's in-kernel probe beside its bracket clock
        clock["probe_mhz"] = case["clock_probe_mhz"]
    return dict(clock_mhz=case["clock_mhz"], clock=clock,
                cycles_err_pct=err_pct(pred_us * ghz, case["measured_us"] * case["clock_mhz"] / 1e3))


@lru_cache(maxsize=1)
def _clock_model():
    return clock_model.load()


def clock_model_by_day(scored: list[dict]) -> dict:
    """{day: {mape_pct, cases}} of the clock model's error over the scored cases with a measured clock, by the day
    their capture ran (capture_date, YYYY-MM-DD from the capture's provenance: measured_cases; "unknown" where a
    row has none), days in order."""
    days: dict = {}
    for r in scored:
        if r.get("clock_model_err_pct") is not None:
            days.setdefault(r.get("capture_date") or "unknown", []).append(abs(r["clock_model_err_pct"]))
    return {d: dict(mape_pct=sum(e) / len(e), cases=len(e)) for d, e in sorted(days.items())}


def modelled_clock(utilization: dict | None, case: dict) -> dict:
    """Where a clock capture exists (lapis.model.clock): clock_model_mhz, the clock the model gives the case's
    predicted unit activity (the simulation's utilization), and clock_model_err_pct = 100 (model - measured) /
    measured against the capture's clock (None without one). Reported, not gated. {} without a clock capture or
    without a utilization, so the row is as before."""
    model = _clock_model()
    if model is None or not utilization:
        return {}
    mhz = model.predict_utilization(utilization)
    return dict(clock_model_mhz=mhz, clock_model_err_pct=err_pct(mhz, case["clock_mhz"]) if case.get("clock_mhz")
                else None)


def _gantt(folder: Path, row: dict, pred, meas) -> str:
    name = f"validation_gantt_{row['variant']}_{row['shape']}{'_causal' if row['causal'] else ''}.png"
    fig = compare_gantt(pred, meas, None, title=f"{row['variant']} ({row['schedule']}) at {row['shape']}"
                        f"{' causal' if row['causal'] else ''}: predicted vs measured (instrumented build)")
    fig.savefig(folder / name, dpi=80)  # one per case: a smaller file, and a third less time than 110 dpi
    fig.clear()
    return name


def run_to_run_spread(per_case: list[dict]) -> tuple[float | None, str]:
    """(spread_pct, how it was measured): the largest 100 (max - min) / min over cases timed more than once,
    else the median within-run IQR spread."""
    from statistics import median
    repeats = [100 * (max(r["runs_us"]) - min(r["runs_us"])) / min(r["runs_us"]) for r in per_case
               if len(r["runs_us"]) > 1]
    if repeats:
        return max(repeats), f"largest run-to-run difference over {len(repeats)} case(s) timed by several captures"
    within = [r["within_run_spread_pct"] for r in per_case if r.get("within_run_spread_pct") is not None]
    return (median(within), "median within-run IQR spread (no case was timed twice)") if within else \
        (None, "no timed case")


def summarize(per_case: list[dict], tolerance_pct: float = TOLERANCE_PCT) -> dict:
    """The headline numbers over per_case rows (keys: family, variant, shape, causal, predicted_us,
    measured_us, err_pct, blind_err_pct, runs_us, within_run_spread_pct)."""
    scored = [r for r in per_case if r["err_pct"] is not None]
    errs = [abs(r["err_pct"]) for r in scored]
    blind = [abs(r["blind_err_pct"]) for r in scored if r.get("blind_err_pct") is not None]
    spread, how = run_to_run_spread(per_case)
    order = ordering(scored, spread_pct=spread, group=lambda r: (r["family"], r["shape"], r["causal"]))
    cyc = [abs(r["cycles_err_pct"]) for r in scored if r.get("cycles_err_pct") is not None]
    clk = [abs(r["clock_model_err_pct"]) for r in scored if r.get("clock_model_err_pct") is not None]
    has_model = any("clock_model_mhz" in r for r in per_case)
    model = _clock_model() if has_model else None
    modelled = dict(clock_model_mape_pct=sum(clk) / len(clk) if clk else None, clock_model_cases=len(clk),
                    clock_model_by_day=clock_model_by_day(scored),
                    clock_model_fitted_to=Path(model.source).parent.parent.name if model else None) \
        if has_model else {}
    return dict(**modelled,cases=len(per_case), scored=len(scored), mape_pct=sum(errs) / len(errs) if errs else None,
                mape_cycles_pct=sum(cyc) / len(cyc) if cyc else None, cycles_cases=len(cyc),
                max_abs_cycles_err_pct=max(cyc) if cyc else None,
                mape_pct_blind=sum(blind) / len(blind) if blind else None, blind_cases=len(blind),
                max_abs_err_pct=max(errs) if errs else None, rank_pairs=order["resolved"],
                rank_agreement=order["predicted_right"] / order["resolved"] if order["resolved"] else None,
                spread_pct=spread, spread_source=how, pairs=order["pairs"], tolerance_pct=tolerance_pct,
                per_case=per_case)


# ---------------------------------------------------------------- text and CLI

def _f(x, fmt: str) -> str:
    """format(x, fmt), or "-" for None, right-aligned to fmt's width so a table column stays aligned."""
    if x is not None:
        return format(x, fmt)
    width = re.match(r"(?:.?[<>=^])?[-+ ]?z?#?0?(\d*)", fmt).group(1)
    return "-".rjust(int(width or 0))


def divergence_text(d: dict | None) -> str:
    if d is None:
        return "-"
    where = f"{d['role']} {d['op']} (item {d['work_item']}, k {d['k_index']})"
    if not d["diverged"]:
        return f"none beyond {d['tolerance_ns']:.0f} ns (largest {d['offset_ns']:+.0f} ns at {where})"
    return f"{where}: {d['offset_ns']:+.0f} ns ({d['offset_pct']:+.0f}% of an iteration)"


def render(r: dict) -> str:
    lines = [f"{r['cases']} cases ({r['scored']} scored): mape {_f(r['mape_pct'], '.1f')}% (blind: {_f(r['mape_pct_blind'], '.1f')}% over "
             f"{r['blind_cases']}), max |err| {_f(r['max_abs_err_pct'], '.1f')}%; rank pairs {r['rank_pairs']} "
             f"(gap > 2 x spread {_f(r['spread_pct'], '.2f')}%: {r['spread_source']}), rank agreement "
             f"{_f(r['rank_agreement'], '.0%')}",
             f"in SM cycles (the {r.get('cycles_cases', 0)} cases whose capture probed the clock): mape "
             f"{_f(r.get('mape_cycles_pct'), '.1f')}%, max |err| {_f(r.get('max_abs_cycles_err_pct'), '.1f')}%",
             *([f"clock model (lapis.model.clock, reported, not gated): mape {_f(r['clock_model_mape_pct'], '.1f')}% "
                f"over the {r['clock_model_cases']} cases with a measured clock; by the day of the run: "
                + ", ".join(f"{d} {_f(v['mape_pct'], '.1f')}% ({v['cases']})"
                            for d, v in r.get("clock_model_by_day", {}).items())
                + f" (fitted to clock/{r.get('clock_model_fitted_to')})"] if "clock_model_cases" in r else []),
             *([f"post-batch probe / in-kernel probe: median {a['median_ratio']:.4f} over the {a['rows']} race rows "
                "of lapis's kernels that have both"] if (a := r.get("post_probe_agreement")) else []),
             *([f"bracket clock / in-kernel probe: median {a['median_ratio']:.4f} ({a['min_ratio']:.4f}.."
                f"{a['max_ratio']:.4f}) over the {a['rows']} race rows of lapis's kernels that have both"]
               if (a := r.get("bracket_agreement")) else []),
             "",
             f"{'variant':<14} {'shape':<16} {'causal':<6} {'pred µs':>9} {'meas µs':>9} {'err %':>7} "
             f"{'blind %':>8} {'MHz':>5} {'cyc %':>6}  first divergence | steady-state divergence (offset: measured - predicted)"]
    lines += [f"{c['variant']:<14} {c['shape']:<16} {str(c['causal']):<6} {_f(c['predicted_us'], '9.1f')} "
              f"{c['measured_us']:9.1f} {_f(c['err_pct'], '+7.1f')} {_f(c['blind_err_pct'], '+8.1f')} "
              f"{_f(c.get('clock_mhz'), '.0f'):>5} {_f(c.get('cycles_err_pct'), '+.1f'):>6}  "
              f"{c.get('error') or divergence_text(c['first_divergence'])} | {divergence_text(c['steady_divergence'])}"
              for c in r["per_case"]]
    lines += [f"{'clock model':<14} {c['variant']:<14} {c['shape']:<16} {str(c['causal']):<6} "
              f"{c['clock_model_mhz']:5.0f} MHz (measured {_f(c.get('clock_mhz'), '.0f')}, "
              f"err {_f(c.get('clock_model_err_pct'), '+.1f')}%)" for c in r["per_case"] if "clock_model_mhz" in c]
    lines += [f"not compared: {capture}: " + ", ".join(f"{n} variant entries with {why}" for why, n in sorted(
        counts.items())) for capture, counts in r.get("not_compared", {}).items()]
    return "\n".join(lines)
