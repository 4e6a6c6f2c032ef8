"""The report's "The seeds' own tables" section: `lapis validate seeds` as a summary, its missed steps and a chart.

CPU only: the measured tables are lapis/data/seeds/ (never written by lapis); predictions come from the committed
cache (lapis.pipeline_sim.predictions), re-simulated only when stale. Definitions: lapis.validate.seeds.
"""

from __future__ import annotations

import time
from pathlib import Path

from lapis.figures.seeds import seeds_progression
from lapis.validate.seeds import validate_seeds

FIGURE = "seeds_progression.png"


def _missed(rows: list[dict], label) -> list[str]:
    """One line per scored step predicted in the wrong direction."""
    return [f"{label(r)}: measured {r['step']['measured_change']:+.1f}, predicted {r['step']['predicted_change']:+.1f}"
            for r in rows if r.get("step", {}).get("scored") and not r["step"]["hit"]]


def seeds_section(out: Path) -> tuple[str, dict]:
    """(markdown, {"seeds": numbers}): both tables' mean |error| and direction hits, the steps predicted in the
    wrong direction, the refused Emmy moves, and the chart FIGURE drawn into `out`. CaptureError (from
    lapis.validate.seeds) when a table is missing or malformed."""
    t0 = time.time()
    r = validate_seeds()
    b, e = r["b200"], r["rtx5090"]
    path = Path(out) / FIGURE
    seeds_progression(b["rows"], e["rows"], path)
    bs, es, rs, s = b["summary"], e["summary"], e["refused_summary"], r["summary"]
    src = b["source"]
    md = ["## The seeds' own tables", "",
          f"The B200 write-up's progression ({src['repository']}@{src['commit'][:7]}, {src['file']}: each kernel as "
          "% of a same-run stock FA4, " + " / ".join(f"{v:.0f}" for v in b["fa4_reference_tflops"].values()) +
          " TFLOP/s at " + " / ".join(b["shapes"]) + ") and the Emmy write-up's moves on one RTX 5090 (µs at "
          f"{e['shape']}), against the current predictions (`lapis validate seeds`). Nothing here is fitted to "
          "these tables.", "",
          "| table | rows | mean \\|error\\| | direction (steps that moved) |", "|---|---:|---:|---:|",
          f"| B200 progression | {bs['rows']} | {bs['mean_abs_error']:.1f} points | "
          f"{bs['direction_hits']}/{bs['scored_steps']} |",
          f"| Emmy moves | {es['rows']} | {es['mean_abs_error']:.1f}% | {es['direction_hits']}/{es['scored_steps']} |",
          "", f"Refused Emmy moves as the write-up states: {rs['hits']}/{rs['rows']}. Direction over both tables: "
          f"{s['direction_hits']}/{s['scored_steps']} steps that moved more than {s['step_moved']:g} point (B200) "
          "or % (Emmy).", ""]
    missed = _missed(b["rows"], lambda x: f"kernel {x['kernel']} ({x['change']}) at {x['shape']}") + \
        _missed(e["rows"], lambda x: f"move {x['move']}")
    if missed:
        md += ["Steps predicted in the wrong direction (points of FA4 for B200, % of time for Emmy): " +
               "; ".join(missed) + ".", ""]
    md += [f"![The seeds' own tables: predicted against measured]({FIGURE})", ""]
    numbers = dict(b200=bs, rtx5090=es, refused=rs, summary=s, figure=FIGURE, wall_s=round(time.time() - t0, 2))
    return "\n".join(md), {"seeds": numbers}
