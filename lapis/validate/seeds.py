"""`lapis validate seeds`: the two seed write-ups' own measured tables against lapis's current predictions.

The measurements are data, read from lapis/data/seeds/ and never written by lapis:
- b200_progression.json: the 18 numbered kernels of IaroslavElistratov/b200-attention as a % of same-run stock
  FlashAttention-4 on one B200 at 4K, 8K and 16K (benchmarks/README.md at the commit it names). Kernel n is the
  n-th schedule of lapis.pipeline_sim.schedules.attention_b200 (k01..k14, then m1..m4 for kernels 15..18),
  predicted on the b200 profile at the table's shapes; its predicted % of FA4 is 100 x predicted TFLOP/s over
  the table's own reference, a same-run stock FA4: the FA4 paper's TFLOP/s at that shape (the repository's
  benchmarks/registry.py, PAPER_FA4_TFLOPS: 1532 / 1579 / 1601) times the fraction of them stock FA4 reached on
  the write-up's B200s (its benchmarks/README.md: about 97%), fa4_reference(). Error: predicted - measured, in
  points; error_rel_pct: 100 x (predicted / measured - 1), the relative error of the throughput.
- emmy_moves.json: the Emmy compiler's move stack on one RTX 5090 (the seed write-up emmy-flashattention2-
  consumer-blackwell), in µs at 1x8x4096x64 fp16. Move n is the n-th schedule of
  lapis.pipeline_sim.schedules.attention_sm120 (m01..m07), predicted on the rtx5090 profile. A move whose time
  the text does not state gets the previous move's time over its stated speed-up. Error: % of the measured time.
  The refused moves (warp-scoped barrier, fast exp, deeper rings d3 and d4, warp specialization) are the
  schedules of attention_sm120.REFUSED, each one kept move's flags changed (its baseline); a refused row is
  the predicted change of the time from that baseline's, in %, against the write-up's statement.

Step direction: a step is the change from the previous kernel/move. Only steps whose measured change exceeds
STEP_MOVED (points of FA4 for B200, % of the previous time for Emmy) are scored; a hit is a predicted change of
the same sign (a predicted change of exactly 0 is a miss). A refused move is scored by what the write-up states (refused_verdict):
a stated change (213 vs 206 µs: +3.4%; "~0 µs": 0%) is a hit when the predicted change is within NO_GAIN x 100
points of it; a move refused with no time stated ("occupancy loss beats extra overlap") is a hit when no gain is
predicted: the predicted time does not fall by more than NO_GAIN.
Summary: mean |error| per table, the mean and max relative error, the direction hit rate (hits / scored steps)
per table and overall, and `open`: for B200 (held to a mean) whether the mean relative error is past GOAL_REL_PCT
(15%), for the RTX 5090 (held to every move) the moves whose relative error is past it; those rows stay open.
Predictions come from the committed cache (lapis.pipeline_sim.predictions), re-simulated only when stale.
Errors: CaptureError for a missing or malformed table, or one whose row count differs from the schedules'.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from lapis.data import SEEDS
from lapis.errors import CaptureError
from lapis.pipeline_sim import predictions
from lapis.pipeline_sim.schedules import attention_b200, attention_sm120

B200_TABLE = SEEDS / "b200_progression.json"
EMMY_TABLE = SEEDS / "emmy_moves.json"
STEP_MOVED = 1.0  # a measured step counts for direction only past this (points of FA4; % of the previous time)
GOAL_REL_PCT = 15.0  # |predicted / measured - 1| past this (%) leaves a row open
NO_GAIN = 0.03  # a refused move's tolerance: 3% of the baseline's time
MIN_MEASURED = 0.01  # the least measured value (% of FA4, µs, TFLOP/s, speed-up, FA4 fraction) a table may hold


def load_table(path: Path, keys: tuple) -> dict:
    """A seed table as a dict holding `keys`; CaptureError naming the file when it is missing or malformed."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:  # ValueError: JSONDecodeError, UnicodeDecodeError (not UTF-8)
        raise CaptureError("a seed table is a readable JSON file", f"{path}: {exc}",
                           "restore it from the lapis repository (lapis/data/seeds/)") from None
    missing = [k for k in keys if k not in doc]
    if missing:
        raise CaptureError("a seed table holds its measured rows and their source", f"{path} lacks {missing}",
                           "restore it from the lapis repository (lapis/data/seeds/)")
    return doc


def _positive(value, where: str, path: Path) -> float:
    """A table's measured value as a float; CaptureError unless it is a finite number of at least MIN_MEASURED (a
    relative error against a value near zero overflows)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and value >= MIN_MEASURED
    if not ok:
        raise CaptureError(f"a seed table's measured values are positive finite numbers (at least {MIN_MEASURED:g})",
                           f"{path}: {where} = {value!r}", "restore it from the lapis repository (lapis/data/seeds/)")
    return float(value)


def _schedules(names: list, rows: list, path: Path) -> list:
    if len(names) != len(rows):
        raise CaptureError("a seed table has one row per schedule of its progression",
                           f"{len(rows)} rows in {path} for {len(names)} schedules",
                           "add the missing rows to the table or the schedules to lapis")
    return names


def _step(prev_m, prev_p, m, p, moved: float) -> dict:
    """The direction verdict of one step: measured and predicted change, scored only past `moved`."""
    dm, dp = m - prev_m, p - prev_p
    scored = abs(dm) > moved
    return dict(measured_change=dm, predicted_change=dp, scored=scored,
                hit=(dm > 0) == (dp > 0) and dp != 0 if scored else None)


def fa4_reference(table: dict) -> dict:
    """Shape label -> the table's FA4 reference in TFLOP/s: fa4_paper_tflops x fa4_same_run_fraction.
    CaptureError for no shapes, or a same-run fraction that is no fraction of the paper's figures (above 1)."""
    if not isinstance(table["shapes"], dict) or not table["shapes"]:
        raise CaptureError("the B200 table names its shapes (label -> BxHxLxD)", f"{B200_TABLE}: shapes = "
                           f"{table['shapes']!r}", "restore it from the lapis repository (lapis/data/seeds/)")
    frac = _positive(table["fa4_same_run_fraction"], "fa4_same_run_fraction", B200_TABLE)
    if frac > 1:
        raise CaptureError("fa4_same_run_fraction is the fraction of the paper's TFLOP/s stock FA4 reached, in "
                           "(0, 1]", f"{B200_TABLE}: {frac}", "restore it from the lapis repository "
                           "(lapis/data/seeds/)")
    return {label: frac * _positive(table["fa4_paper_tflops"][label], f"fa4_paper_tflops[{label}]", B200_TABLE)
            for label in table["shapes"]}


def b200_rows(table: dict, cache: dict) -> list[dict]:
    """One row per (kernel, shape): measured and predicted % of FA4, error in points, and the step."""
    names = _schedules([s.name for s in attention_b200.SCHEDULES], table["kernels"], B200_TABLE)
    rows, prev, fa4 = [], {}, fa4_reference(table)
    for name, k in zip(names, table["kernels"]):
        for label, shape in table["shapes"].items():
            r, _ = predictions.predict(name, "b200", shape, {}, cache)
            meas = _positive(k["pct_of_fa4"][label], f"kernel {k['kernel']} pct_of_fa4[{label}]", B200_TABLE)
            pred = 100.0 * r["tflops"] / fa4[label]
            row = dict(kernel=k["kernel"], change=k["change"], schedule=name, shape=label, measured_pct=meas,
                       predicted_pct=pred, error=pred - meas, error_rel_pct=100.0 * (pred / meas - 1))
            if label in prev:  # the step from the previous kernel at the same shape
                row["step"] = _step(*prev[label], meas, pred, STEP_MOVED)
            prev[label] = (meas, pred)
            rows.append(row)
    return rows


def emmy_measured_us(table: dict) -> list[float]:
    """Each kept move's time in µs: as stated, else the previous move's time over its stated speed-up."""
    out: list[float] = []
    for m in table["moves"]:
        if m.get("stated_us") is not None:
            out.append(_positive(m["stated_us"], f"{m.get('move')} stated_us", EMMY_TABLE))
        elif out and m.get("stated_speedup"):
            out.append(out[-1] / _positive(m["stated_speedup"], f"{m.get('move')} stated_speedup", EMMY_TABLE))
        else:
            raise CaptureError("an Emmy move states its time, or its speed-up over the previous move",
                               m.get("move"), "add stated_us or stated_speedup to lapis/data/seeds/emmy_moves.json")
    return out


def emmy_rows(table: dict, cache: dict) -> list[dict]:
    """One row per kept move: measured (stated or derived) and predicted µs, error in % of measured, the step."""
    names = _schedules(list(attention_sm120.VARIANTS), table["moves"], EMMY_TABLE)
    rows, prev = [], None
    for name, m, meas in zip(names, table["moves"], emmy_measured_us(table)):
        r, _ = predictions.predict(name, "rtx5090", table["shape"], {}, cache)
        pred = r["predicted_us"]
        row = dict(move=m["move"], schedule=name, measured_us=meas, derived=m.get("stated_us") is None,
                   predicted_us=pred, error=100.0 * (pred - meas) / meas)
        if prev:
            # time falls when a move helps: the step is scored on the relative change of the time
            row["step"] = _step(0.0, 0.0, 100.0 * (meas - prev[0]) / prev[0], 100.0 * (pred - prev[1]) / prev[1],
                                STEP_MOVED)
        prev = (meas, pred)
        rows.append(row)
    return rows


def refused_measured_change(m: dict, baseline_us: float) -> float | None:
    """A refused move's stated change in % of its baseline's time: stated_us over baseline_us, or
    stated_delta_us over `baseline_us` (the baseline move's measured time); None where no time is stated."""
    if "baseline_us" in m:
        base = _positive(m["baseline_us"], f"{m.get('move')} baseline_us", EMMY_TABLE)
        return 100.0 * (_positive(m["stated_us"], f"{m.get('move')} stated_us", EMMY_TABLE) / base - 1.0)
    if m.get("stated_delta_us") is None:
        return None
    return 100.0 * _finite(m["stated_delta_us"], f"{m.get('move')} stated_delta_us") / baseline_us


def _finite(value, where: str) -> float:
    """A refused move's stated change in µs as a float (0 and negative allowed); CaptureError unless a finite
    number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise CaptureError("a refused move's stated change is a finite number of µs (or null: none stated)",
                           f"{EMMY_TABLE}: {where} = {value!r}",
                           "restore it from the lapis repository (lapis/data/seeds/)")
    return float(value)


def _stated(m: dict) -> str:
    """The write-up's statement of a refused move, its numbers checked first (refused_measured_change's rules)."""
    if "baseline_us" in m:
        base = _positive(m["baseline_us"], f"{m.get('move')} baseline_us", EMMY_TABLE)
        stated = _positive(m.get("stated_us"), f"{m.get('move')} stated_us", EMMY_TABLE)
        return f"{stated:g} vs {base:g} µs"
    if m.get("stated_delta_us") is None:
        return "no time stated"
    delta = _finite(m["stated_delta_us"], f"{m.get('move')} stated_delta_us")
    return f"{'~' if m.get('approximate') else ''}{delta:g} µs change"


def refused_verdict(measured_change: float | None, predicted_change: float) -> bool:
    """A refused move's hit (module docstring): within NO_GAIN x 100 points of a stated change, else no
    predicted gain past NO_GAIN."""
    if measured_change is None:
        return predicted_change >= -100.0 * NO_GAIN
    return abs(predicted_change - measured_change) <= 100.0 * NO_GAIN


def refused_rows(table: dict, cache: dict, measured: dict) -> list[dict]:
    """One row per refused schedule (attention_sm120.REFUSED): the write-up's statement, the predicted times of
    the schedule and of its baseline move, the predicted and stated change in %, and the verdict. `measured`:
    kept move name -> its measured µs (the baseline of a "~0 µs" statement)."""
    out = []
    absent = sorted({move for _, move, _, _, _ in attention_sm120.REFUSED} - {m["move"] for m in table["refused"]})
    if absent:
        raise CaptureError("every schedule of attention_sm120.REFUSED has its move in the Emmy table's refused "
                           "list", f"{EMMY_TABLE}: no row for {absent}",
                           "restore it from the lapis repository (lapis/data/seeds/)")
    for m in table["refused"]:
        stated = _stated(m)
        ours = [(name, base) for name, move, base, _, _ in attention_sm120.REFUSED if move == m["move"]]
        if not ours:
            raise CaptureError("every refused move of the Emmy table has a schedule in attention_sm120.REFUSED",
                               m.get("move"), "add the move's schedule to attention_sm120.REFUSED")
        for name, base in ours:
            pred = predictions.predict(name, "rtx5090", table["shape"], {}, cache)[0]["predicted_us"]
            base_pred = predictions.predict(base, "rtx5090", table["shape"], {}, cache)[0]["predicted_us"]
            change, meas = 100.0 * (pred / base_pred - 1.0), refused_measured_change(m, measured[base])
            out.append(dict(move=m["move"], schedule=name, baseline=base, stated=stated, measured_change=meas,
                            predicted_us=pred, baseline_predicted_us=base_pred, predicted_change=change,
                            hit=refused_verdict(meas, change)))
    return out


def summary(rows: list[dict], rel_key: str = "error", per_row: bool = True) -> dict:
    """Mean |error|, the mean and max |relative error| (rel_key: the rows' relative error in %), what is open
    (module docstring: the rows past GOAL_REL_PCT when per_row, else ["mean"] when the mean is past it) and the
    direction hits over the scored steps of one table."""
    scored = [r["step"] for r in rows if r.get("step", {}).get("scored")]
    hits = sum(s["hit"] for s in scored)
    rel = [abs(r[rel_key]) for r in rows]
    mean_rel = sum(rel) / len(rel)
    past = [r["schedule"] for r in rows if abs(r[rel_key]) > GOAL_REL_PCT] if per_row else \
        ["mean"] * (mean_rel > GOAL_REL_PCT)
    return dict(rows=len(rows), mean_abs_error=sum(abs(r["error"]) for r in rows) / len(rows),
                mean_abs_error_rel_pct=mean_rel, max_abs_error_rel_pct=max(rel), open=past,
                scored_steps=len(scored), direction_hits=hits,
                direction_hit_rate=hits / len(scored) if scored else None)


def validate_seeds() -> dict:
    """Both tables against the predictions (module docstring)."""
    b200 = load_table(B200_TABLE, ("source", "shapes", "fa4_paper_tflops", "fa4_same_run_fraction", "kernels"))
    emmy = load_table(EMMY_TABLE, ("source", "shape", "moves", "refused"))
    cache = predictions.load()
    try:
        fa4, brows, erows = fa4_reference(b200), b200_rows(b200, cache), emmy_rows(emmy, cache)
        refused = refused_rows(emmy, cache, {r["schedule"]: r["measured_us"] for r in erows})
    except (KeyError, TypeError, AttributeError) as exc:  # a row lacking a field, or a field of the wrong kind
        raise CaptureError("a seed table's rows hold their measured fields (pct_of_fa4 and fa4_paper_tflops per "
                           "shape; stated_us or "
                           "stated_speedup per move; a refused move's stated times)", f"{type(exc).__name__}: {exc}",
                           "restore the tables from the lapis repository (lapis/data/seeds/)") from None
    bsum, esum = summary(brows, "error_rel_pct", per_row=False), summary(erows)
    scored = bsum["scored_steps"] + esum["scored_steps"]
    hits = bsum["direction_hits"] + esum["direction_hits"]
    return dict(
        b200=dict(source=b200["source"], fa4_paper_tflops=b200["fa4_paper_tflops"],
                  fa4_same_run_fraction=b200["fa4_same_run_fraction"], fa4_reference_tflops=fa4,
                  shapes=b200["shapes"], error_unit="points",
                  rows=brows, summary=bsum),
        rtx5090=dict(source=emmy["source"], shape=emmy["shape"], error_unit="% of measured", rows=erows,
                     refused=refused, summary=esum,
                     refused_summary=dict(rows=len(refused), hits=sum(r["hit"] for r in refused))),
        summary=dict(scored_steps=scored, direction_hits=hits, direction_hit_rate=hits / scored if scored else None,
                     step_moved=STEP_MOVED, no_gain=NO_GAIN))


def _dir(step: dict | None) -> str:
    if not step:
        return ""
    mark = "hit" if step["hit"] else "miss" if step["scored"] else "-"
    return f"{step['measured_change']:+7.1f} {step['predicted_change']:+7.1f}  {mark}"


def render(r: dict) -> str:
    """The tables `lapis validate seeds` prints."""
    b, e = r["b200"], r["rtx5090"]
    src = b["source"]
    lines = [f"B200: % of FA4 (measured: {src['repository']}@{src['commit'][:7]} {src['file']}; FA4 = "
             f"{b['fa4_same_run_fraction']:g} x the paper's "
             + " / ".join(f"{v:g}" for v in b["fa4_paper_tflops"].values()) + " = "
             + " / ".join(f"{v:.0f}" for v in b["fa4_reference_tflops"].values()) + " TFLOP/s at "
             + " / ".join(b["shapes"]) + ")",
             f"{'kernel':>6}  {'schedule':<30}{'shape':>5}{'measured':>10}{'predicted':>10}{'error':>8}{'rel':>8}"
             f"{'step meas':>10}{'pred':>8}  direction"]
    for row in b["rows"]:
        lines.append(f"{row['kernel']:>6}  {row['schedule']:<30}{row['shape']:>5}{row['measured_pct']:>9.1f}%"
                     f"{row['predicted_pct']:>9.1f}%{row['error']:>+8.1f}{row['error_rel_pct']:>+7.1f}%  "
                     f"{_dir(row.get('step'))}")
    lines += ["", f"RTX 5090: µs at {e['shape']} (measured: the Emmy write-up; ~ derived from its stated speed-ups)",
              f"{'move':<24}{'schedule':<28}{'measured':>10}{'predicted':>10}{'error':>8}"
              f"{'step meas':>10}{'pred':>8}  direction"]
    for row in e["rows"]:
        meas = f"{'~' if row['derived'] else ''}{row['measured_us']:.1f}"
        lines.append(f"{row['move']:<24}{row['schedule']:<28}{meas:>10}{row['predicted_us']:>10.1f}"
                     f"{row['error']:>+7.1f}%  {_dir(row.get('step'))}")
    lines += ["refused moves (change from the baseline move, %; hit: within "
              f"{100 * r['summary']['no_gain']:g} points of the stated change, or no gain where none is stated):",
              f"  {'move':<24}{'schedule':<31}{'stated':<16}{'meas':>6}{'baseline':>10}{'pred':>8}{'change':>8}"]
    for m in e["refused"]:
        meas = "-" if m["measured_change"] is None else f"{m['measured_change']:+.1f}"
        lines.append(f"  {m['move']:<24}{m['schedule']:<31}{m['stated']:<16}{meas:>6}"
                     f"{m['baseline_predicted_us']:>10.1f}{m['predicted_us']:>8.1f}{m['predicted_change']:>+7.1f}%  "
                     f"{'hit' if m['hit'] else 'miss'}")
    lines.append("")
    for label, t, unit in (("B200", b, " points"), ("RTX 5090", e, "%")):
        s = t["summary"]
        rel = f" ({s['mean_abs_error_rel_pct']:.1f}% relative, max {s['max_abs_error_rel_pct']:.1f}%)" \
            if unit == " points" else f", max {s['max_abs_error_rel_pct']:.1f}%"
        lines.append(f"{label}: mean |error| {s['mean_abs_error']:.1f}{unit}{rel} over {s['rows']} rows; direction "
                     f"{s['direction_hits']}/{s['scored_steps']} steps that moved > {r['summary']['step_moved']:g}"
                     f"{' point' if unit == ' points' else '%'}; goal: "
                     + (f"mean |relative error| <= {GOAL_REL_PCT:g}%" if unit == " points"
                        else f"every move within {GOAL_REL_PCT:g}%")
                     + (f": not met, still open: {', '.join(s['open'])}" if s["open"] else ": met"))
    lines.append("columns: error = predicted - measured (points of FA4 for B200, % of measured for the RTX 5090); rel = "
                 "predicted / measured - 1; step meas / pred = the change from the previous row; direction: hit, "
                 f"miss, or - where the measured step is under {r['summary']['step_moved']:g}")
    rs = e["refused_summary"]
    lines.append(f"RTX 5090 refused moves: {rs['hits']}/{rs['rows']} as the write-up states")
    s = r["summary"]
    rate = "-" if s["direction_hit_rate"] is None else f"{100 * s['direction_hit_rate']:.0f}%"
    lines.append(f"direction hit rate, both tables: {s['direction_hits']}/{s['scored_steps']} ({rate})")
    return "\n".join(lines)
