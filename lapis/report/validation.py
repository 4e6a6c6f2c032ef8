"""The report's "Predicted vs measured (Hopper progression)" section: `lapis validate timelines` as tables and
figures, and the B200 progression, predicted only.

CPU only: measurements and timelines from the committed captures; predicted times and timeline metrics from the
committed prediction cache (the cases it lacks are simulated, as is every case with --resimulate). The largest
miss gets its Gantt chart (one simulation); every case's chart: `lapis validate timelines --figures DIR`.
Definitions: lapis.validate.timelines.
"""

from __future__ import annotations

import time
from pathlib import Path

from lapis.figures.validation import progression
from lapis.pipeline_sim import predictions
from lapis.pipeline_sim.simulate import SCHEDULES
from lapis.report import yes_no
from lapis.report.schedules import FA4_SHAPES
from lapis.validate.timelines import case_gantt, divergence_text, validate_timelines

GOALS = dict(mape_pct=5.0, max_abs_err_pct=10.0, rank_agreement=1.0)  # the headline table's met / not met
B200_PREFIX = "b200-k"  # the B200 write-up's kernels k01..k14 (lapis.pipeline_sim.schedules.attention_b200)


def _f(x, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _headline(r: dict) -> list[str]:
    ok = lambda x, goal, le=True: "-" if x is None else ("met" if (x <= goal if le else x >= goal) else "not met")  # noqa: E731
    return ["| metric | value | goal |", "|---|---:|---|",
            f"| cases | {r['cases']} ({r['scored']} predicted) | |",
            f"| mape_pct | {_f(r['mape_pct'], '.1f')} | <= {GOALS['mape_pct']:.0f} ({ok(r['mape_pct'], 5.0)}) |",
            f"| mape_pct_blind | {_f(r['mape_pct_blind'], '.1f')} ({r['blind_cases']} blind cases) | |",
            f"| max_abs_err_pct | {_f(r['max_abs_err_pct'], '.1f')} | <= {GOALS['max_abs_err_pct']:.0f} "
            f"({ok(r['max_abs_err_pct'], 10.0)}) |",
            f"| mape_cycles_pct | {_f(r.get('mape_cycles_pct'), '.1f')} ({r.get('cycles_cases', 0)} cases with a clock "
            f"probe) | SM cycles: the prediction at the profile clock against the measurement at the clock the run "
            f"had (plain build's probe); the time error adds that clock, which the model does not predict |",
            f"| max_abs_cycles_err_pct | {_f(r.get('max_abs_cycles_err_pct'), '.1f')} | |",
            f"| spread_pct | {_f(r['spread_pct'], '.2f')} | {r['spread_source']} |",
            f"| rank_pairs | {r['rank_pairs']} | pairs whose measured gap exceeds 2 x spread_pct |",
            f"| rank_agreement | {_f(r['rank_agreement'], '.0%')} | 100% "
            f"({'unmet: no pairs' if r['rank_agreement'] is None else ok(r['rank_agreement'], 1.0, le=False)}) |"]


def _cases(r: dict) -> list[str]:
    md = ["| variant | shape | causal | predicted µs | measured µs | time err % | blind time err % | run MHz | cycles err % "
          "| iteration ns pred / meas (instrumented build) | first divergence (measured - predicted) | steady-state divergence |",
          "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for c in r["per_case"]:
        it = (c.get("timeline") or {}).get("iteration_ns") or {}
        md.append(f"| `{c['variant']}` | {c['shape']} | {yes_no(c['causal'])} | {_f(c['predicted_us'], '.1f')} | "
                  f"{c['measured_us']:.1f} | {_f(c['err_pct'], '+.1f')} | {_f(c['blind_err_pct'], '+.1f')} | "
                  f"{_f(c.get('clock_mhz'), '.0f')} | {_f(c.get('cycles_err_pct'), '+.1f')} | "
                  f"{_f(it.get('predicted'), '.0f')} / {_f(it.get('measured'), '.0f')} | "
                  f"{c.get('error') or divergence_text(c['first_divergence'])} | {divergence_text(c['steady_divergence'])} |")
    return md


def _miss(r: dict, timeline: bool = False) -> dict | None:
    """The per_case row with the largest |err_pct| (timeline: among the rows whose capture holds a timeline), or
    None."""
    scored = [c for c in r["per_case"] if c["err_pct"] is not None and (not timeline or c.get("timeline") is not None)]
    return max(scored, key=lambda c: abs(c["err_pct"])) if scored else None


def _largest_miss(r: dict) -> list[str]:
    """The largest miss: where its timelines first diverge and what a steady-state tile costs per op (and its
    Gantt chart, where the row names one); where its capture holds no timeline, the same for the largest miss whose
    capture does."""
    w = _miss(r)
    if w is None:
        return []
    md = _miss_detail(r, w, "Largest miss")
    if w.get("timeline") is None and (wt := _miss(r, timeline=True)) is not None:
        md += _miss_detail(r, wt, "Largest miss with a measured timeline")
    return md


def _miss_detail(r: dict, w: dict, title: str) -> list[str]:
    md = [f"### {title}: `{w['variant']}` at {w['shape']}{' causal' if w['causal'] else ''}, "
          f"{w['err_pct']:+.1f}%", ""]
    if w.get("cycles_err_pct") is not None:
        source = (w.get("clock") or {}).get("source", "probed")
        read = "the run's clock probe read" if source in ("probed", "probe") else f"the run's clock ({source})"
        md += [f"In SM cycles, at the {w['clock_mhz']:.0f} MHz {read} (the model takes one profile clock for every "
               f"kernel): {w['cycles_err_pct']:+.1f}%.", ""]
    t = w.get("timeline")
    if t is None:
        return md + ["The capture holds no timeline for this case: only its total time is compared.", ""]
    d, it = w["first_divergence"], t["iteration_ns"]
    s = w["steady_divergence"]
    md += [f"First divergence (tolerance {r['tolerance_pct']:.0f}% of the measured iteration): "
           f"{divergence_text(d)}." if d else "No matched milestone.",
           f"Steady-state divergence (the middle work item from its third tile): {divergence_text(s)}"
           + ("" if not (s and s["span"]) else f", after {s['span']['from_op']} of tile {s['span']['from_k_index']}: "
              f"{s['span']['predicted_ns']:.0f} ns predicted, {s['span']['measured_ns']:.0f} ns measured") + ".",
           f"Steady-state iteration: predicted {_f(it['predicted'], '.0f')} ns, measured {_f(it['measured'], '.0f')} "
           f"ns ({_f(it['err_pct'], '+.0f')}%; the instrumented build, {w['variant']}'s timeline overhead included).",
           "", "ns per steady-state tile (k >= 2), summed over the consumer roles:", "",
           "| op | predicted | measured (instrumented build) |", "|---|---:|---:|"]
    md += [f"| {op} | {_f(v['predicted'], '.0f')} | {_f(v['measured'], '.0f')} |"
           for op, v in t["ops_ns_per_tile"].items()]
    md += ["", "Busy / wait fraction per role (predicted -> measured): " + "; ".join(
        f"{role} busy {_f(v['busy']['predicted'], '.2f')} -> {_f(v['busy']['measured'], '.2f')}, wait "
        f"{_f(v['wait']['predicted'], '.2f')} -> {_f(v['wait']['measured'], '.2f')}" for role, v in t["roles"].items())
        + ".", ""]
    if w.get("gantt"):
        md += [f"![{w['variant']} at {w['shape']}: predicted vs measured]({w['gantt']})", ""]
    return md


def b200_progression(out: Path) -> tuple[list[str], list[dict]]:
    """The b200-k01..k14 predictions at the FA4 shapes from the committed cache, a table and a chart."""
    cache, rows = predictions.load(), []
    names = [n for n in SCHEDULES if n.startswith(B200_PREFIX)]
    for shape in FA4_SHAPES:
        for n in names:
            r, _ = predictions.predict(n, "b200", shape, None, cache)
            rows.append(dict(variant=n.split("-")[1], schedule=n, shape=shape, causal=False,
                             predicted_us=r["predicted_us"], tflops=r["tflops"], measured_us=None))
    path = out / "validation_b200_progression.png"
    progression(rows, path, title="B200 progression: predicted only (b200 profile; not validated on hardware)")
    md = ["### B200 progression: predicted, not validated on hardware", "",
          "**Not validated on hardware here**: lapis has no B200 to measure on. These are the b200 profile's "
          "predictions (datasheet figures, not fitted to microbenchmarks) for the write-up's kernels k01-k14; the "
          "write-up's own figures are compared in the Schedules section. Predicted TFLOP/s, bf16, hdim 128, "
          "non-causal:", "",
          "| schedule | " + " | ".join(FA4_SHAPES) + " |", "|---|" + "---:|" * len(FA4_SHAPES)]
    md += [f"| `{n}` | " + " | ".join(f"{next(r['tflops'] for r in rows if r['schedule'] == n and r['shape'] == s):.0f}"
                                     for s in FA4_SHAPES) + " |" for n in names]
    md += ["", f"![B200 progression, predicted]({path.name})", ""]
    return md, rows


def validation_section(out: Path, captures: str | None = None, resimulate: bool = False,
                       progress=False) -> tuple[str, dict]:
    """(markdown, {"validation": numbers, "b200_progression": rows}); writes the figures into `out`.
    progress: as lapis.validate.timelines.validate_timelines takes it."""
    t0 = time.time()
    r = validate_timelines(captures, figures=out, progress=progress, gantts=False, resimulate=resimulate)
    md = ["## Predicted vs measured (Hopper progression)", "",
          "Every committed timed measurement (variant, shape, causal) against the simulator's prediction from the "
          "calibrated h200 profile and the variant's schedule alone (`lapis validate timelines`). Measured = the "
          "plain build's median; time err % = predicted / measured time - 1 (negative: the model is too fast); "
          "blind = a prediction committed before the capture (lapis/data/blind/). Timelines are the instrumented "
          "build's (the truth for events, not for total time): the iteration ns column compares the prediction "
          "with the instrumented build's steady-state iteration, its timeline overhead included; aligned by logical ids (work item on the SM, K/V "
          "index, role, op); the first divergence is the first matched op start whose offset exceeds "
          f"{r['tolerance_pct']:.0f}% of the measured steady-state iteration, from the launch on (the first tiles "
          "usually decide it); the steady-state divergence applies the same test inside the middle work item from "
          "its third K/V tile, anchored there.", ""]
    md += _headline(r) + [""]
    if r.get("figures"):
        md += [f"![predicted against measured]({r['figures']['scatter']})", "",
               f"![progression]({r['figures']['progression']})", ""]
    md += _cases(r) + [""]
    wrong = [p for p in r["pairs"] if not p["predicted_right"]]
    if wrong:
        md += ["Pairs the model orders wrongly (or ties): " + "; ".join(
            f"{p['shape']}: `{p['faster']}` measured {p['gap_pct']:.1f}% faster than `{p['slower']}`" for p in wrong)
            + ".", ""]
    w = _miss(r, timeline=True)
    if w is not None:
        w["gantt"] = case_gantt(captures, w, out)  # the one per-case chart the report draws
    md += _largest_miss(r)
    md += ["Every case's Gantt chart (predicted and measured lanes per role, one colour per op): "
           "`lapis validate timelines --figures DIR`.", ""]
    b_md, b_rows = b200_progression(out)
    md += b_md
    r["wall_s"] = round(time.time() - t0, 2)
    return "\n".join(md), {"validation": r, "b200_progression": b_rows}
