"""`lapis validate seeds`: the two seed write-ups' own measured tables against lapis's current predictions.

The measurements are data, read from lapis/data/seeds/ and never written by lapis:
- b200_progression.json: the 18 numbered kernels of IaroslavElistratov/b200-attention as a % of same-run stock
  FlashAttention-4 on one B200 at 4K, 8K and 16K (benchmarks/README.md at the commit it names). Kernel n is the
  n-th schedule of lapis.pipeline_sim.schedules.attention_b200 (k01..k14, then m1..m4 for kernels 15..18),
  predicted on the b200 profile at the table's shapes; its predicted % of FA4 is 100 x predicted TFLOP/s over
  the FA4 TFLOP/s the file states for that shape (1256 / 1289 / 1330). Error: predicted - measured, in points.
- emmy_moves.json: the Emmy compiler's move stack on one RTX 5090 (the seed write-up emmy-flashattention2-
  consumer-blackwell), in µs at 1x8x4096x64 fp16. Move n is the n-th schedule of
  lapis.pipeline_sim.schedules.attention_sm120 (m01..m07), predicted on the rtx5090 profile. A move whose time
  the text does not state gets the previous move's time over its stated speed-up. Error: % of the measured time.
  The refused moves (warp-scoped barrier, fast exp, deeper rings, warp specialization) are listed with their
  stated effect; lapis has no schedule for them, so they are shown as not predicted, with that reason.

Step direction: a step is the change from the previous kernel/move. Only steps whose measured change exceeds
STEP_MOVED (points of FA4 for B200, % of the previous time for Emmy) are scored; a hit is a predicted change of
the same sign (a predicted change of exactly 0 is a miss). A refused move scores "no gain predicted" when lapis's
predicted time stays within NO_GAIN of the baseline's.
Summary: mean |error| per table and the direction hit rate (hits / scored steps) per table and overall.
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
NO_GAIN = 0.03  # a refused move is "no gain" when the predicted time changes by at most 3%
NO_SCHEDULE = "not predicted: lapis has no schedule for this move (attention_sm120 models the kept moves only)"


def load_table(path: Path, keys: tuple) -> dict:
    """A seed table as a dict holding `keys`; CaptureError naming the file when it is missing or malformed."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CaptureError("a seed table is a readable JSON file", f"{path}: {exc}",
                           "restore it from the lapis repository (lapis/data/seeds/)") from None
    missing = [k for k in keys if k not in doc]
    if missing:
        raise CaptureError("a seed table holds its measured rows and their source", f"{path} lacks {missing}",
                           "restore it from the lapis repository (lapis/data/seeds/)")
    return doc


def _positive(value, where: str, path: Path) -> float:
    """A table's measured value as a float; CaptureError unless it is a positive finite number."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if not ok:
        raise CaptureError("a seed table's measured values are positive finite numbers", f"{path}: {where} = "
                           f"{value!r}", "restore it from the lapis repository (lapis/data/seeds/)")
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


def b200_rows(table: dict, cache: dict) -> list[dict]:
    """One row per (kernel, shape): measured and predicted % of FA4, error in points, and the step."""
    names = _schedules([s.name for s in attention_b200.SCHEDULES], table["kernels"], B200_TABLE)
    rows, prev = [], {}
    for name, k in zip(names, table["kernels"]):
        for label, shape in table["shapes"].items():
            r, _ = predictions.predict(name, "b200", shape, {}, cache)
            meas = _positive(k["pct_of_fa4"][label], f"kernel {k['kernel']} pct_of_fa4[{label}]", B200_TABLE)
            pred = 100.0 * r["tflops"] / _positive(table["fa4_tflops"][label], f"fa4_tflops[{label}]", B200_TABLE)
            row = dict(kernel=k["kernel"], change=k["change"], schedule=name, shape=label, measured_pct=meas,
                       predicted_pct=pred, error=pred - meas)
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
    names = _schedules([s.name for s in attention_sm120.SCHEDULES], table["moves"], EMMY_TABLE)
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


def refused_rows(table: dict) -> list[dict]:
    """The refused moves: what the write-up states and why lapis has no prediction for them."""
    out = []
    for m in table["refused"]:
        stated = (f"{m['stated_us']:g} vs {m['baseline_us']:g} µs" if "baseline_us" in m else
                  "no time stated" if m.get("stated_delta_us") is None else
                  f"{'~' if m.get('approximate') else ''}{m['stated_delta_us']:g} µs change")
        out.append(dict(move=m["move"], stated=stated, predicted=None, no_gain_predicted=None, why=NO_SCHEDULE))
    return out


def summary(rows: list[dict]) -> dict:
    """Mean |error| and the direction hits over the scored steps of one table."""
    scored = [r["step"] for r in rows if r.get("step", {}).get("scored")]
    hits = sum(s["hit"] for s in scored)
    return dict(rows=len(rows), mean_abs_error=sum(abs(r["error"]) for r in rows) / len(rows),
                scored_steps=len(scored), direction_hits=hits,
                direction_hit_rate=hits / len(scored) if scored else None)


def validate_seeds() -> dict:
    """Both tables against the predictions (module docstring)."""
    b200 = load_table(B200_TABLE, ("source", "shapes", "fa4_tflops", "kernels"))
    emmy = load_table(EMMY_TABLE, ("source", "shape", "moves", "refused"))
    cache = predictions.load()
    try:
        brows, erows = b200_rows(b200, cache), emmy_rows(emmy, cache)
    except (KeyError, TypeError, AttributeError) as exc:  # a row lacking a field, or a field of the wrong kind
        raise CaptureError("a seed table's rows hold their measured fields (pct_of_fa4 per shape; stated_us or "
                           "stated_speedup per move)", f"{type(exc).__name__}: {exc}",
                           "restore the tables from the lapis repository (lapis/data/seeds/)") from None
    bsum, esum = summary(brows), summary(erows)
    scored = bsum["scored_steps"] + esum["scored_steps"]
    hits = bsum["direction_hits"] + esum["direction_hits"]
    return dict(
        b200=dict(source=b200["source"], fa4_tflops=b200["fa4_tflops"], shapes=b200["shapes"], error_unit="points",
                  rows=brows, summary=bsum),
        rtx5090=dict(source=emmy["source"], shape=emmy["shape"], error_unit="% of measured", rows=erows,
                     refused=refused_rows(emmy), summary=esum),
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
             + " / ".join(f"{v:g}" for v in b["fa4_tflops"].values()) + " TFLOP/s at "
             + " / ".join(b["shapes"]) + ")",
             f"{'kernel':>6}  {'schedule':<30}{'shape':>5}{'measured':>10}{'predicted':>10}{'error':>8}"
             f"{'step meas':>10}{'pred':>8}  direction"]
    for row in b["rows"]:
        lines.append(f"{row['kernel']:>6}  {row['schedule']:<30}{row['shape']:>5}{row['measured_pct']:>9.1f}%"
                     f"{row['predicted_pct']:>9.1f}%{row['error']:>+8.1f}  {_dir(row.get('step'))}")
    lines += ["", f"RTX 5090: µs at {e['shape']} (measured: the Emmy write-up; ~ derived from its stated speed-ups)",
              f"{'move':<24}{'schedule':<28}{'measured':>10}{'predicted':>10}{'error':>8}"
              f"{'step meas':>10}{'pred':>8}  direction"]
    for row in e["rows"]:
        meas = f"{'~' if row['derived'] else ''}{row['measured_us']:.1f}"
        lines.append(f"{row['move']:<24}{row['schedule']:<28}{meas:>10}{row['predicted_us']:>10.1f}"
                     f"{row['error']:>+7.1f}%  {_dir(row.get('step'))}")
    lines.append("refused moves:")
    lines += [f"  {m['move']:<24}{m['stated']:<22}{m['why']}" for m in e["refused"]]
    lines.append("")
    for label, t, unit in (("B200", b, "points"), ("RTX 5090", e, "%")):
        s = t["summary"]
        lines.append(f"{label}: mean |error| {s['mean_abs_error']:.1f} {unit} over {s['rows']} rows; direction "
                     f"{s['direction_hits']}/{s['scored_steps']} steps that moved > {r['summary']['step_moved']:g}"
                     f"{' point' if unit == 'points' else '%'}")
    s = r["summary"]
    rate = "-" if s["direction_hit_rate"] is None else f"{100 * s['direction_hit_rate']:.0f}%"
    lines.append(f"direction hit rate, both tables: {s['direction_hits']}/{s['scored_steps']} ({rate})")
    return "\n".join(lines)
