"""`lapis compare`: one GEMM schedule's prediction against the committed H200 capture of the real kernel.

For one (variant, shape) of the capture: the schedule simulated now with the variant's parameters (from the
capture manifest) on the current profile, the plain build's measured time, the blind prediction committed
before the capture (lapis/data/blind/gemm_ws.json), and, when the capture holds the variant's timeline, the
steady-state K-iteration time and per-role busy fractions of one SM (lapis.validate.timeline_compare). Errors are
(predicted - measured) / measured in percent: negative means the model is too fast.
"""

from __future__ import annotations

from pathlib import Path

from lapis.captures import gemm as gemm_capture
from lapis.catalog import gemm
from lapis.captures.store import captures_root
from lapis.errors import CaptureError, ScheduleError
from lapis.model.profile import load_profile
from lapis.pipeline_sim.predictions import model_hash, profile_hash
from lapis.pipeline_sim.simulate import default_gpu, simulate
from lapis.validate.blind import load, set_names
from lapis.validate.timeline_compare import compare, err_pct

BLIND_SETS = set_names(gemm.VARIANTS)  # lapis/data/blind/<name>.json, each committed before its capture


def blind_entry(variant: str, shape: str) -> dict | None:
    """The blind prediction of (variant, shape) from any of the GEMM's blind sets, or None."""
    return next((e for name in BLIND_SETS for e in load(name)["entries"]
                 if e["variant"] == variant and e["shape"] == shape), None)


def default_variant(folder: Path, man: dict, shape: str) -> str:
    """The capture's first variant with a saved timeline at `shape`, else its first variant."""
    variants = gemm_capture.entry(man, shape)["variants"]
    saved = [n for n, v in variants.items() if (folder / v.get("timeline", {}).get("file", "-")).is_file()]
    return saved[0] if saved else next(iter(variants))


def compare_gemm(schedule: str, shape: str, variant: str | None = None, captures: str | None = None,
                 keep_events: bool = False) -> dict:
    """The comparison as a JSON-able dict (times in µs, iteration in ns, errors in percent).

    Raises ScheduleError for a schedule lapis compare does not cover, CaptureError for a schedule the capture
    does not measure, or a shape or variant it lacks.
    keep_events: add `_predicted_events` and `_measured_events` (recorder.Event lists) for the Gantt."""
    if not schedule.endswith("-gemm-ws"):  # before looking the shape up: the attention ones are validated elsewhere
        raise ScheduleError("lapis compare covers the GEMM schedule h200-gemm-ws", schedule,
                            "for the attention schedules use `lapis validate timelines` (every variant, shape and "
                            "causal flag the captures hold)")
    folder = gemm_capture.find(captures_root(captures, kinds=("gemm",)), shape, variant)
    man = gemm_capture.manifest(folder)
    if schedule != man["schedule"]:
        raise CaptureError("no capture of this schedule's kernel", schedule, f"use --schedule {man['schedule']} "
                           f"(the kernel {man['kernel']} captured in {folder.name})")
    chosen = variant or default_variant(folder, man, shape)
    meas = gemm_capture.measured(man, chosen, shape)
    params = man["variants"][chosen]
    gpu = default_gpu(schedule)
    sim = simulate(schedule, gpu, shape, dict(params))
    pred_us = sim["predicted_us"]
    blind = blind_entry(chosen, shape)
    out = dict(schedule=schedule, gpu=gpu, shape=shape, variant=chosen, variant_given=variant is not None,
               params=params, capture=f"gemm/{folder.name}", capture_commit=man["provenance"].get("commit"),
               predicted_us=pred_us, predicted_tflops=sim["tflops"], bound_by=sim["bound_by"],
               profile_clock_mhz=1e3 * load_profile(gpu)["clock_ghz"], **meas,
               total_err_pct=err_pct(pred_us, meas["measured_us"]))
    out["blind"] = None if blind is None else dict(
        predicted_us=blind["predicted_us"], tflops=blind["tflops"],
        err_pct=err_pct(blind["predicted_us"], meas["measured_us"]),
        same_profile=blind["profile_hash"] == profile_hash(gpu), same_model=blind["model_hash"] == model_hash())
    got = gemm_capture.measured_events(folder, meas["timeline_file"])
    if got is None:
        out["timeline"] = None
        out["timeline_missing"] = (f"{meas['timeline_file'] or 'no timeline'} is not in {out['capture']}: only "
                                   "total-time errors")
        return out
    events, sm, why = got
    c = compare(sim["_events"], events, pred_us * 1e3, meas["measured_us"] * 1e3)
    out["timeline"] = dict(sm=sm, sm_choice=why, iteration_ns=c["iteration_ns"], busy=c["busy"],
                           build="instrumented (-DLAPIS_TIMELINE=1)")
    if keep_events:
        out["_predicted_events"], out["_measured_events"] = sim["_events"], events
    return out


def _pct(x) -> str:
    return "-" if x is None else f"{x:+.1f}%"


def _frac(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def render(r: dict) -> str:
    """The comparison as the lines `lapis compare` prints."""
    p = r["params"]
    lines = [f"{r['schedule']} {r['variant']}{'' if r['variant_given'] else ' (default variant)'} (stages "
             f"{p['stages']}, consumer_wgs {p['consumer_wgs']}, block {p['block_m']}x{p['block_n']}x{p['block_k']}) "
             f"at {r['shape']} on {r['gpu']}, capture {r['capture']}",
             f"total time: predicted {r['predicted_us']:.1f} µs ({r['predicted_tflops']:.0f} TFLOP/s, "
             f"bound: {r['bound_by']}), measured {r['measured_us']:.1f} µs ({r['tflops']:.0f} TFLOP/s; plain build, "
             f"spread {r['spread_pct']:.2f}%): error {_pct(r['total_err_pct'])}"]
    b = r["blind"]
    if b:
        same = "the same profile and model as now" if b["same_profile"] and b["same_model"] else \
            "an older " + " and ".join(w for w, s in (("profile", b["same_profile"]), ("model", b["same_model"]))
                                       if not s)
        lines.append(f"blind prediction (lapis/data/blind/, committed before the capture; {same}): "
                     f"{b['predicted_us']:.1f} µs ({b['tflops']:.0f} TFLOP/s), error {_pct(b['err_pct'])}")
    clock = "-" if r["sm_clock_mhz"] is None else f"{r['sm_clock_mhz']:.0f}"
    lines.append(f"SM clock during the run {clock} MHz (nvidia-smi median; the profile assumes "
                 f"{r['profile_clock_mhz']:.0f}); cuBLAS in the same run {r['cublas_us']:.1f} µs "
                 f"({r['cublas_tflops']:.0f} TFLOP/s)")
    t = r["timeline"]
    if t is None:
        lines.append(f"no measured timeline: {r['timeline_missing']}")
        return "\n".join(lines)
    it = t["iteration_ns"]
    ovh = r["timeline_overhead_pct"]
    lines += [f"measured timeline: {t['sm_choice']}; {t['build']} build, {ovh:.0f}% slower than the plain build",
              f"steady-state K iteration: predicted {_ns(it['predicted'])}, measured {_ns(it['measured'])}: "
              f"error {_pct(it['err_pct'])}",
              "busy fraction per role (non-wait spans over the SM's timeline): predicted / measured"]
    width = max(len(role) for role in t["busy"])
    lines += [f"  {role:<{width}}  {_frac(v['predicted'])} / {_frac(v['measured'])}" for role, v in t["busy"].items()]
    return "\n".join(lines)


def _ns(x) -> str:
    return "-" if x is None else f"{x:.0f} ns"
