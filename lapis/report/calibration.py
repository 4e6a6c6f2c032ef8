"""The report's "Calibration" section: the fitted h200 profile, and the GEMM predicted against measured.

CPU only: the profile is read from lapis/data/profiles/h200.json (fitted by lapis.model.fit from the micro
captures), the measurements from the timed GEMM captures (lapis.captures.gemm; a case timed again by a later
capture comes from the later one), the blind predictions from lapis/data/blind/gemm_ws*.json
(lapis.validate.compare.BLIND_SETS); the current predictions (lapis.validate.compare.compare_gemm) from the
prediction cache where current, else simulated; the Gantt chart's case is simulated.
err_pct = 100 * (predicted - measured) / measured, measured = the plain build's median.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from lapis.captures import gemm as gemm_capture
from lapis.captures.store import captures_root
from lapis.figures.compare_gantt import compare_gantt
from lapis.figures.predicted_measured import predicted_measured_bars
from lapis.model.profile import PROFILES
from lapis.pipeline_sim import predictions
from lapis.validate.compare import compare_gemm
from lapis.validate.ordering import ordering

SCHEDULE = "h200-gemm-ws"
PROFILE = "h200"


def profile_numbers(name: str = PROFILE) -> dict:
    """The profile's values as the JSON holds them: {key: {value, unit, spread_pct, source}}, and what it was
    fitted from."""
    import json

    data = json.loads((PROFILES / f"{name}.json").read_text())
    values = {k: dict(value=v["value"], unit=v["unit"], spread_pct=v.get("spread_pct"), source=v["source"])
              for k, v in sorted(data["values"].items())}
    return dict(name=name, fitted_from=data.get("fitted_from", {}), values=values)


COMPARED_BY = ("validate/compare.py", "validate/timeline_compare.py", "captures/gemm.py")  # compare_gemm's code


def _compare(shape: str, variant: str, captures: str | None, cache: dict, resimulate: bool) -> dict:
    """compare_gemm's dict from the prediction cache where current (key: the case, the h200 profile's hash, the
    digest of the capture's manifest and timelines files, the comparing code and the model hash), else computed
    (one simulation) and stored in `cache`."""
    folder = gemm_capture.find(captures_root(captures, kinds=("gemm",)), shape, variant)
    files = [f for f in sorted(folder.iterdir()) if f.is_file()]
    parts = ["compare_gemm", SCHEDULE, shape, variant, predictions.profile_hash("h200"), predictions.digest(files),
             predictions.digest([predictions.PACKAGE / p for p in COMPARED_BY])]
    value, _ = predictions.cached(parts, lambda: json.loads(json.dumps(compare_gemm(SCHEDULE, shape, variant,
                                                                                    captures))), cache, resimulate)
    return value


def gemm_rows(captures: str | None = None, cache: dict | None = None, resimulate: bool = False) -> list[dict]:
    """One row per captured (variant, shape) over every timed capture (a later capture of a case wins);
    times in µs, errors in percent. Predictions through _compare (cache None: the committed one, read only)."""
    rows, cache = [], predictions.load() if cache is None else cache
    for _, shape, variant in gemm_capture.cases(captures_root(captures, kinds=("gemm",))):
        m, n, k = (int(x) for x in shape.split("x"))
        flop = 2.0 * m * n * k
        c = _compare(shape, variant, captures, cache, resimulate)
        b, t = c["blind"], c["timeline"]
        rows.append(dict(
            variant=variant, shape=shape, predicted_us=c["predicted_us"], measured_us=c["measured_us"],
            err_pct=c["total_err_pct"], spread_pct=c["spread_pct"],
            blind_predicted_us=None if b is None else b["predicted_us"],
            blind_err_pct=None if b is None else b["err_pct"],
            predicted_tflops=c["predicted_tflops"], measured_tflops=c["tflops"],
            blind_tflops=None if b is None else flop / b["predicted_us"] / 1e6,
            q1_tflops=flop / c["q1_us"] / 1e6, q3_tflops=flop / c["q3_us"] / 1e6,
            cublas_tflops=c["cublas_tflops"], sm_clock_mhz=c["sm_clock_mhz"],
            timeline_overhead_pct=c["timeline_overhead_pct"],
            iteration_err_pct=None if t is None else t["iteration_ns"]["err_pct"]))
    return rows


def _f(x, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def calibration_section(out: Path, captures: str | None = None, resimulate: bool = False) -> tuple[str, dict]:
    """(markdown, {"calibration": {profile, gemm, ...}}); writes two figures into `out`."""
    t0 = time.time()
    prof = profile_numbers()
    md = ["## Calibration: the h200 profile, fitted, and the GEMM predicted blind against measured", "",
          f"The `{prof['name']}` profile is fitted by `python -m lapis.model.fit` from the microbenchmark capture(s) "
          + ", ".join(f"`{k}`" for k in prof["fitted_from"]) + " (`lapis capture micro`). spread_pct = IQR / median "
          "over the timed runs of one process.", "",
          "| key | value | unit | spread % | source |", "|---|---:|---|---:|---|"]
    md += [f"| `{k}` | {v['value']:g} | {v['unit']} | {_f(v['spread_pct'], '.2f')} | {v['source']} |"
           for k, v in prof["values"].items()]
    rows = gemm_rows(captures, resimulate=resimulate)
    order = ordering(rows)
    md += ["", f"### GEMM `{SCHEDULE}`: predicted against the H200 (plain build, CUDA events)", "",
           "| variant | shape | predicted µs (blind) | predicted µs (now) | measured µs | time err % (blind) | "
           "time err % (now) | "
           "spread % | measured TFLOP/s | cuBLAS TFLOP/s | SM MHz |", "|---|---|" + "---:|" * 9]
    md += [f"| `{r['variant']}` | {r['shape']} | {_f(r['blind_predicted_us'], '.1f')} | {r['predicted_us']:.1f} | "
           f"{r['measured_us']:.1f} | {_f(r['blind_err_pct'], '+.1f')} | {r['err_pct']:+.1f} | {r['spread_pct']:.2f} | "
           f"{r['measured_tflops']:.0f} | {r['cublas_tflops']:.0f} | {_f(r['sm_clock_mhz'], '.0f')} |" for r in rows]
    worst = max(rows, key=lambda r: abs(r["err_pct"]))
    md += ["", "time err % = predicted / measured µs - 1. "
           f"Goal: within 5% of total time. Largest miss: `{worst['variant']}` at {worst['shape']}, "
           f"{worst['err_pct']:+.1f}% (negative: the model is too fast). The SM clock is nvidia-smi's median during "
           "the timed runs; the profile assumes the clock measured under sustained wgmma load, "
           f"{prof['values']['clock_ghz']['value'] * 1e3:.0f} MHz. Faster variant: of {order['resolved']} pairs "
           f"whose measured gap exceeds twice the spread, the model orders {order['predicted_right']} correctly "
           "(a predicted tie counts as wrong).", ""]
    bars = out / "calibration_gemm_tflops.png"
    predicted_measured_bars(rows, bars, title=f"{SCHEDULE}: predicted against measured on the H200")
    md += [f"![GEMM predicted against measured]({bars.name})", ""]
    gantt_md, gantt_case = _gantt(out, rows, captures)
    md += gantt_md
    numbers = dict(profile=prof, gemm=rows, ordering=order, gantt=gantt_case, wall_s=round(time.time() - t0, 2))
    return "\n".join(md), {"calibration": numbers}


def _gantt(out: Path, rows: list[dict], captures: str | None) -> tuple[list[str], dict | None]:
    """The compare Gantt of the middle captured shape (its default variant: the first with a saved timeline)."""
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    c = compare_gemm(SCHEDULE, shapes[len(shapes) // 2], None, captures, keep_events=True)
    if c["timeline"] is None:
        return [f"No compare Gantt: {c['timeline_missing']}.", ""], None
    path = out / "calibration_compare_gantt.png"
    compare_gantt(c.pop("_predicted_events"), c.pop("_measured_events"), path,
                  title=f"{c['variant']} at {c['shape']}: predicted vs measured (SM {c['timeline']['sm']})")
    it, t = c["timeline"]["iteration_ns"], c["timeline"]
    md = [f"### Predicted and measured per role: `{c['variant']}` at {c['shape']}", "",
          f"![predicted vs measured Gantt]({path.name})", "",
          f"Measured: {t['sm_choice']}; the instrumented build, {c['timeline_overhead_pct']:.0f}% slower than the "
          f"plain one, so its offsets are stretched. Steady-state K iteration: predicted {it['predicted']:.0f} ns, "
          f"measured {it['measured']:.0f} ns ({it['err_pct']:+.1f}%). Busy fraction (predicted / measured): "
          + ", ".join(f"{role} {_f(v['predicted'], '.2f')} / {_f(v['measured'], '.2f')}" for role, v in t["busy"].items())
          + ". The measured consumers' busy spans are their wgmma issue; the predicted ones are tensor-pipe time.", ""]
    return md, dict(variant=c["variant"], shape=c["shape"], sm=t["sm"], iteration_ns=it, busy=t["busy"])
