"""The report's "Schedules" section: predicted TFLOP/s of the built-in schedules, and Gantt charts.

Predictions come from the committed cache (lapis.pipeline_sim.predictions) and are re-simulated only when
stale, or all of them with `lapis report --resimulate`.
"""

from __future__ import annotations

import time
from pathlib import Path

from lapis.captures import attention as ac
from lapis.captures import gemm as gc
from lapis.captures.readers import read_race
from lapis.captures.store import captures_root, manifests
from lapis.catalog import third_party
from lapis.figures.gantt import gantt, steady_state_window
from lapis.pipeline_sim import predictions
from lapis.pipeline_sim.schedules.attention_b200 import UNMODELLED, VARIANTS
from lapis.pipeline_sim.schedules.attention_sm120 import MEASURED_US
from lapis.pipeline_sim.simulate import SCHEDULES, default_gpu, simulate
from lapis.validate.seeds import B200_TABLE, fa4_reference, load_table

FA4_SHAPES = ("8x16x4096x128", "4x16x8192x128", "2x16x16384x128")  # the B200 write-up's benchmark shapes
# FlashAttention-2 measured on the H200 with torch 2.11 SDPA, bf16, hdim 128, non-causal, at FA4_SHAPES (team run,
# 2026-11-29; not a lapis capture). cuDNN's bar is read from the newest race capture instead (cudnn_measured).
H200_MEASURED = dict(flash2=(326, 354))
GEMM_SHAPE = "8192x8192x8192"
EMMY_SHAPE = "1x8x4096x64"  # the Emmy write-up's SDPA_P benchmark (fp16, non-causal)
GANTT = (("h200-s3-two-consumers", "1x16x2048x128"), ("h200-s5-intra-overlap", "1x16x2048x128"),
         ("h200-gemm-ws", "2048x2048x2048"))


def report_cases() -> list[tuple]:
    """(schedule, gpu, shape, params) for every row of the section's tables."""
    cases = []
    for name, s in SCHEDULES.items():
        gpu = s.gpu
        shapes = (GEMM_SHAPE,) if s.shape == "gemm" else (EMMY_SHAPE,) if name.startswith("sm120") else FA4_SHAPES
        cases += [(name, gpu, s, {}) for s in shapes]
    return cases


def measured_schedules(captures: str | None = None) -> set[str]:
    """The schedules a timed capture measured on the H200, from the captures: lapis's attention kernels and GEMM,
    and the schedules mirroring the third-party kernels a race capture timed (lapis.catalog.third_party, by their
    `timed` name)."""
    root = captures_root(captures, kinds=())
    found = {r["schedule"] for r in ac.rows(root)} if ac.has_timed(root) else set()
    return found | {gc.manifest(folder)["schedule"] for folder in gc.timed_captures(root)} | _race_schedules(root)


def _race_schedules(root: Path) -> set[str]:
    """The schedules of the third-party kernels the race captures under `root` timed."""
    out = set()
    for folder in manifests(root, "race") if (root / "race").is_dir() else []:
        if not third_party.timed_alone(folder.name):
            continue
        for e in read_race(folder).manifest["results"]:
            out |= {found[1]["schedule"] for name in e.get("kernels", {})
                    if (found := third_party.by_timed_name(name))}
    return out


def cudnn_measured(root: Path) -> dict | None:
    """cuDNN's TFLOP/s (FLOPs / median µs) at FA4_SHAPES, non-causal, from the newest race capture under `root`
    (provenance date) that timed the third-party kernels alone (lapis.catalog.third_party.timed_alone) and timed
    cuDNN at them: {capture, date, tflops: {shape: TFLOP/s}}; None when no race capture did."""
    best = None
    for folder in manifests(root, "race") if (root / "race").is_dir() else []:
        if not third_party.timed_alone(folder.name):
            continue
        m = read_race(folder).manifest
        tflops = {e["shape"]: e["flops"] / e["kernels"]["cudnn"]["median_us"] / 1e6 for e in m["results"]
                  if e["shape"] in FA4_SHAPES and not e.get("causal") and "cudnn" in e.get("kernels", {})}
        date = m["provenance"]["date"]
        if tflops and (best is None or date > best["date"]):
            best = dict(capture=f"race/{folder.name}", date=date, tflops=tflops)
    return best


def schedules_section(out: Path, resimulate: bool = False, captures: str | None = None) -> tuple[str, dict]:
    """(markdown, {"schedules": numbers}): the tables of every built-in schedule's prediction, the B200
    statements, the Emmy moves and three Gantt charts (drawn into `out`). captures: where to look for the
    schedules measured on hardware (the text names them)."""
    t0 = time.time()
    cache, rows, stale = predictions.load(), {}, 0
    for name, gpu, shape, params in report_cases():
        r, fresh = predictions.predict(name, gpu, shape, params, cache, resimulate)
        stale += fresh
        rows.setdefault((gpu, name), {})[shape] = r
    md = ["## Schedules (predicted: h200 fitted to H200 microbenchmarks, b200 and rtx5090 from datasheets)", "",
          f"{len(report_cases())} predictions, {stale} re-simulated (the rest from the committed cache: "
          "`python -m lapis.report.refresh` refreshes it).", ""]
    measured = measured_schedules(captures)
    cudnn = cudnn_measured(captures_root(captures, kinds=()))
    md += _table("h200", {n: v for (g, n), v in rows.items() if g == "h200"}) + _h200_measured(rows, measured, cudnn)
    md += _table("b200", {n: v for (g, n), v in rows.items() if g == "b200"})
    fa4, final_pct = fa4_same_run()
    md += ["The B200 write-up's reference, a same-run stock FA4 (the FA4 paper's TFLOP/s x the fraction stock FA4 "
           "reached on its B200s, lapis/data/seeds/b200_progression.json): " +
           ", ".join(f"{fa4[s]:.0f}" for s in FA4_SHAPES) + " TFLOP/s at the three shapes; its final kernel "
           "measured " + " / ".join(f"{final_pct[s]:.1f}%" for s in FA4_SHAPES) + " of that: " +
           ", ".join(f"{final_pct[s] / 100 * fa4[s]:.0f}" for s in FA4_SHAPES) + " TFLOP/s.", ""]
    statements = seed_statements({n: v for (g, n), v in rows.items() if g == "b200"})
    md += ["### The B200 write-up's statements, in prediction", "",
           "| statement | model | verdict |", "|---|---|---|",
           *[f"| {st['statement']} | {st['model']} | {st['verdict']}"
             f"{'' if st['verdict'].startswith('not') else ' (tolerance ' + st['tolerance'] + ')'} |"
             for st in statements], "",
           "Scored only where the chapter's mechanism is modelled; the profile is not fitted, and nothing is "
           "tuned to agree.", ""]
    md += _emmy_table({n: v[EMMY_SHAPE] for (g, n), v in rows.items() if g == "rtx5090" and n in MEASURED_US})
    md += ["### Steady-state Gantt charts", ""]
    for name, shape in GANTT:
        md += [f"![{name} at {shape}]({_gantt(out, name, shape).name})", ""]
    return "\n".join(md), {"schedules": dict(predictions=len(report_cases()), resimulated=stale,
                                             measured=sorted(measured), statements=statements,
                                             wall_s=round(time.time() - t0, 2))}


def fa4_same_run() -> tuple[dict, dict]:
    """({shape: TFLOP/s}, {shape: %}) at FA4_SHAPES: the B200 table's same-run FA4 reference
    (lapis.validate.seeds.fa4_reference) and its final kernel's measured % of it, both read from
    lapis/data/seeds/b200_progression.json. CaptureError when the table is missing or malformed."""
    table = load_table(B200_TABLE, ("shapes", "fa4_paper_tflops", "fa4_same_run_fraction", "kernels"))
    ref, final = fa4_reference(table), table["kernels"][-1]["pct_of_fa4"]
    return ({shape: ref[label] for label, shape in table["shapes"].items()},
            {shape: float(final[label]) for label, shape in table["shapes"].items()})


def _gain(rows: dict, name: str, prev: str) -> float:
    """Mean speed-up of `name` over `prev` across the FA4 shapes."""
    return sum(rows[name][s]["tflops"] / rows[prev][s]["tflops"] for s in FA4_SHAPES) / len(FA4_SHAPES)


def seed_statements(rows: dict) -> list[dict]:
    """The write-up's four checkable statements against the B200 predictions. A step whose mechanism
    lapis does not model is "not tested"; the tolerance of each verdict is stated in its row."""
    if not rows:
        return []
    final = list(rows)[-1]

    def step(name, prev):
        return set(VARIANTS[name]) - set(VARIANTS[prev]) - {"serial"}

    out = []
    for text, name, prev, ok in (
            ("chapter 2 alone does not improve performance", "b200-k02-p-in-tmem", "b200-k01-baseline",
             lambda g: g < 1.02),
            ("chapter 4 alone is not expected to help", "b200-k04-warp-specialization", "b200-k03-swizzle",
             lambda g: g < 1.02),
            ("chapter 8 gives about +10%", "b200-k08-hw-approx", "b200-k07-compute-pipeline",
             lambda g: 1.05 <= g <= 1.15)):
        g = _gain(rows, name, prev)
        verdict = "not tested (mechanism not modelled)" if step(name, prev) <= UNMODELLED else \
            ("agrees" if ok(g) else "disagrees")
        out.append(dict(statement=text, model=f"{name} / {prev}: {g:.3f}x", verdict=verdict,
                        tolerance="< 1.02x" if "not" in text else "1.05-1.15x"))
    fa4, pct = fa4_same_run()
    ratio = [rows[final][s]["tflops"] / (pct[s] / 100 * fa4[s]) for s in FA4_SHAPES]
    out.append(dict(statement="the final kernel reaches " + "/".join(f"{pct[s]:.1f}" for s in FA4_SHAPES) +
                    "% of a same-run FA4 (" + "/".join(f"{fa4[s]:.0f}" for s in FA4_SHAPES) + " TFLOP/s)",
                    model=f"{final}: " + ", ".join(f"{r:.2f}x" for r in ratio) + " of the measured final kernel",
                    verdict="agrees" if all(0.95 <= r <= 1.05 for r in ratio) else "disagrees",
                    tolerance="within 5%"))
    return out


def _table(gpu: str, rows: dict) -> list[str]:
    """Attention rows at the FA4 shapes, then GEMM rows as one line each."""
    md = [f"### {gpu}", "", "| schedule | " + " | ".join(FA4_SHAPES) + " | busiest unit |",
          "|---|" + "---:|" * len(FA4_SHAPES) + "---|"]
    gemm = []
    for name, by_shape in rows.items():
        if GEMM_SHAPE in by_shape:
            r = by_shape[GEMM_SHAPE]
            gemm.append(f"`{name}` at {GEMM_SHAPE}: {r['tflops']:.0f} TFLOP/s, busiest unit {r['bound_by']}.")
            continue
        cells = [f"{by_shape[s]['tflops']:.0f}" for s in FA4_SHAPES]
        md.append(f"| `{name}` | " + " | ".join(cells) + f" | {by_shape[FA4_SHAPES[-1]]['bound_by']} |")
    return md + ["", "Predicted TFLOP/s, bf16, hdim 128, non-causal (BxHxLxD); the busiest unit has the highest "
                 "utilization, which at low TFLOP/s is latency, not a bound.", "",
                 *gemm, ""]


def _h200_measured(rows: dict, measured: set[str], cudnn: dict | None) -> list[str]:
    """The bar the Hopper rows have to meet (cuDNN from the newest race capture, cudnn_measured; FlashAttention-2
    from torch SDPA, H200_MEASURED), and which rows a capture measured."""
    theirs = {k["schedule"] for k in third_party.KERNELS.values()}  # models of kernels lapis did not write
    h200 = [r["tflops"] for (g, n), v in rows.items() if g == "h200" and n not in theirs
            for s, r in v.items() if s in FA4_SHAPES]
    if not h200:
        return []
    f_lo, f_hi = H200_MEASURED["flash2"]
    names = [n for (g, n) in rows if g == "h200"]
    done, not_yet = [n for n in names if n in measured], [n for n in names if n not in measured]
    if cudnn:
        lo, hi = min(cudnn["tflops"].values()), max(cudnn["tflops"].values())
        bar = (f"Measured on the H200: cuDNN {lo:.0f}-{hi:.0f} TFLOP/s at {len(cudnn['tflops'])} of these shapes "
               f"(`{cudnn['capture']}`, {cudnn['date'][:10]}, FLOPs / median µs); FlashAttention-2 {f_lo}-{f_hi} "
               f"(torch SDPA, 2026-11-29). The best predicted schedule of lapis's own reaches {max(h200):.0f}, "
               f"{max(h200) / hi:.2f}x cuDNN's best. ")
    else:
        bar = (f"Measured on the H200: FlashAttention-2 {f_lo}-{f_hi} TFLOP/s (torch SDPA, 2026-11-29); no race "
               f"capture here timed cuDNN alone. The best predicted schedule of lapis's own reaches {max(h200):.0f}. ")
    return [bar + "The h200 profile is fitted to microbenchmarks; "
            + (f"{len(done)} of these {len(names)} schedules have been timed on the H200 by a capture "
               f"({', '.join(f'`{n}`' for n in done)}: sections Calibration, Kernels, Predicted vs measured and Kernels no one here wrote)"
               if done else "none of these schedules has been timed on the H200 by a capture")
            + (f"; not validated on hardware: {', '.join(f'`{n}`' for n in not_yet)}." if not_yet else "."), ""]


def _emmy_table(rows: dict) -> list[str]:
    """The Emmy moves on the rtx5090 profile against the write-up's measured latencies, untuned."""
    md = [f"### rtx5090: the Emmy moves at {EMMY_SHAPE}", "",
          "| schedule | predicted µs | write-up µs | time err % |", "|---|---:|---:|---:|"]
    for name, r in rows.items():
        meas = MEASURED_US[name]
        md.append(f"| `{name}` | {r['predicted_us']:.0f} | {meas:.0f} | {r['predicted_us'] / meas - 1:+.0%} |")
    return md + ["", "Datasheet profile, no tuning. Write-up times for m02, m05 and m06 are derived from its stated "
                 "speed-ups (its stated times do not chain: 612 / 1.20 = 510, then 271 after two 1.16x fixes).", ""]


def _gantt(out: Path, name: str, shape: str) -> Path:
    r = simulate(name, default_gpu(name), shape)
    path = out / f"gantt-{name}.png"
    gantt(r["_events"], path, title=f"{name} at {shape}, predicted", window_ns=steady_state_window(r["_events"]))
    return path
