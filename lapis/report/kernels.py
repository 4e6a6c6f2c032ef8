"""The report's "Kernels" section: the real Hopper attention kernels (lapis/gpu/kernels/attention_h200.cu, every
variant a capture timed) measured on the H200, against cuDNN in the same run and against the simulator's
predictions.

CPU only: measurements from the timed attention captures (lapis.captures.attention.rows: a case timed again by a
later capture comes from the later one), the sanitizer verdicts from the sanitizer captures, the blind predictions
from lapis/data/blind/attention_h200*.json (each committed before the timed run it predicts), the current ones
from the prediction cache (lapis.pipeline_sim.predictions; cases it lacks are simulated) at the kernel's
parameters as the capture records them. The findings compare s1 and s2 at the first shape (SM 0's timelines).
err_pct = 100 * (predicted TFLOP/s - measured TFLOP/s) / measured: positive means the model is too fast (an error
in TFLOP/s, labelled "TFLOP/s err %"; the other sections' "time err %" is on time, of the opposite sign).
"""

from __future__ import annotations

import time
from pathlib import Path

from lapis.captures import attention as ac
from lapis.captures.readers import read_race
from lapis.captures.store import captures_root, manifests, read_manifest
from lapis.catalog.attention import sim_params
from lapis.data import BLIND
from lapis.figures.gantt import gantt, lane_order, steady_state_window
from lapis.figures.predicted_measured import predicted_measured_bars
from lapis.gpu.attention_plan import OPS, ROLES
from lapis.gpu.attention_plan import load as load_plan
from lapis.gpu.bench_attention import VARIANTS, kernel_name, smem_bytes, threads
from lapis.model.numerics import rescale_frequency_of
from lapis.model.occupancy import resident_ctas
from lapis.model.profile import load_profile
from lapis.pipeline_sim import predictions
from lapis.report import yes_no
from lapis.validate.blind import load

# lapis/data/blind/attention_h200*.json, each committed before its capture (sets never overlap in (variant, shape))
BLINDS = tuple(sorted(p.stem for p in BLIND.glob("attention_h200*.json")))
GPU = "h200"
JSON_KEYS = ("variant", "shape", "causal", "tflops", "spread_pct", "cudnn_tflops", "ratio_to_cudnn", "rel_err",
             "sanitizer_clean", "instrumentation_overhead_pct", "predicted_tflops", "blind_predicted_tflops",
             "err_pct", "blind_err_pct")
SERIES = (("blind_predicted_tflops", "predicted (blind)", "#9ecae1"),
          ("predicted_tflops", "predicted (now)", "#3182bd"),
          ("measured_tflops", "measured (plain build)", "#e6550d"),
          ("cudnn_tflops", "cuDNN SDPA (same run)", "#969696"))


def _err(pred, meas):
    return None if pred is None else 100 * (pred - meas) / meas


def kernel_rows(captures: str | None = None) -> list[dict]:
    """Every timed (variant, shape, causal) with its blind and current predicted TFLOP/s (see the module doc)."""
    root = captures_root(captures, kinds=(ac.KIND,))
    blind = {(e["variant"], e["shape"], e.get("causal", False)): e["tflops"] for name in BLINDS
             for e in load(name)["entries"]}
    cache, out = predictions.load(), []
    for r in ac.rows(root):  # current predictions with the kernel's parameters (the capture records them)
        pred, _ = predictions.predict(r["schedule"], GPU, r["shape"], r["params"], cache)
        b = blind.get((r["variant"], r["shape"], r["causal"]))
        out.append({**r, "measured_tflops": r["tflops"], "predicted_tflops": pred["tflops"],
                    "predicted_bound_by": pred["bound_by"], "blind_predicted_tflops": b,
                    "err_pct": _err(pred["tflops"], r["tflops"]), "blind_err_pct": _err(b, r["tflops"])})
    return out


def _step_base(name: str) -> str | None:
    """The variant a step builds on: the one before it in the catalog's order, skipping diagnostic builds."""
    order = [n for n, v in VARIANTS.items() if not v["diagnostic"]]
    i = order.index(name)
    return order[i - 1] if i else None


def step_rows(captures: str | None = None) -> list[dict]:
    """The steps timed in a race beside the variant they build on (lapis.gpu.race, one process): per step, shape and
    causal flag, the measured gain (base's median time / the step's - 1, same run) and the gain the current model
    predicts at both kernels' parameters (lapis.catalog.attention.sim_params). A later capture's row replaces an
    earlier one's."""
    root = captures_root(captures, kinds=())
    if not (root / "race").is_dir():
        return []
    names = {(kernel_name(v, c), c): n for n, v in VARIANTS.items() for c in (False, True)
             if not c or v["causal_build"]}
    cache, out = predictions.load(), {}
    for folder in manifests(root, "race"):
        for e in read_race(folder).manifest["results"]:
            times = {names[(k, e["causal"])]: r["median_us"] for k, r in e.get("kernels", {}).items()
                     if (k, e["causal"]) in names}
            for step, t in times.items():
                base = _step_base(step)
                if base not in times or VARIANTS[step]["schedule"] != "h200-s9-tuned":
                    continue
                pred = [predictions.predict(VARIANTS[n]["schedule"], GPU, e["shape"], sim_params(VARIANTS[n], e["causal"]),
                                            cache)[0]["predicted_us"] for n in (base, step)]
                out[(step, e["shape"], e["causal"])] = dict(
                    step=step, base=base, shape=e["shape"], causal=e["causal"], capture=f"race/{folder.name}",
                    measured_gain_pct=100 * (times[base] / t - 1), predicted_gain_pct=100 * (pred[0] / pred[1] - 1))
    return list(out.values())


def _step_table(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    md = ["### Steps past s9: predicted against measured gain", "",
          "Each step against the variant before it, timed in one process (the race capture named); predicted: the "
          "current model at both kernels' parameters. Each step's blind prediction is in lapis/data/blind.", "",
          "| step | over | shape | causal | measured gain % | predicted gain % | capture |", "|---|---|---|---|---|---|---|"]
    md += [f"| {r['step']} | {r['base']} | {r['shape']} | {'yes' if r['causal'] else 'no'} | "
           f"{r['measured_gain_pct']:+.1f} | {r['predicted_gain_pct']:+.1f} | `{r['capture']}` |" for r in rows]
    return md + [""]


def kernel_cases(captures: str | None = None) -> list[tuple]:
    """(schedule, gpu, shape, params) of every timed kernel row: lapis.pipeline_sim.predictions caches them."""
    return [(r["schedule"], GPU, r["shape"], r["params"]) for r in ac.rows(captures_root(captures, kinds=(ac.KIND,)))]


def occupancy(captures: str | None = None) -> dict:
    """variant -> resident CTAs per SM (lapis.model.occupancy, the rule the simulator uses) from the capture's
    ptxas report (plain build: registers, static smem) and the kernel's dynamic smem (bench_attention.smem_bytes)."""

    root, plan, out = captures_root(captures, kinds=(ac.KIND,)), load_plan(), {}
    for r in ac.rows(root):
        man = read_manifest(root / r["capture"])  # through lapis.captures.safe: limits and checksums
        ptxas, name = man["builds"]["plain"]["ptxas"], r["variant"]
        v = VARIANTS[name]
        p = ptxas[kernel_name(v)]
        smem = smem_bytes(v, plan) + p["smem_bytes"]
        o = resident_ctas(load_profile("h200"), threads(v), p["registers"], smem)
        out[name] = dict(threads=threads(v), registers=p["registers"], smem_bytes=smem, ctas=o.ctas_per_sm,
                         bound_by=o.limiter, limits=o.limits, registers_per_cta=o.registers_per_cta,
                         smem_per_cta=o.smem_per_cta)
    return out


def limiter(captures: str | None, rows: list[dict]) -> dict:
    """Per variant at the first shape: CTAs overlapping on an SM (every CTA's span), SM 0's per-role time split
    and steady-state tile time (instrumented build), and the K/V bytes per ns per SM the plain build moved."""
    root = captures_root(captures, kinds=(ac.KIND,))
    shape = rows[0]["shape"]
    prof = load_profile(GPU)
    out = dict(shape=shape, sm=0, l2_shared_tb_s=prof["l2_shared_tb_s"], sm_count=prof["sm_count"], variants={})
    for r in (r for r in rows if r["shape"] == shape):
        z = ac.timeline(root, r["timeline_key"], r["timeline_capture"])
        events = ac.sm_events(z, 0, ROLES, OPS)
        b, h, seq, _ = (int(x) for x in shape.split("x"))
        p = r["params"]
        kv_bytes = (b * h * seq // p["block_m"]) * (seq // p["block_n"]) * 2 * p["block_n"] * 128 * 2
        per_ns = kv_bytes / (r["median_us"] * 1e3)
        out["variants"][r["variant"]] = dict(
            concurrency=ac.concurrency(z), roles=ac.role_breakdown(events), tile_ns=ac.iteration_ns(events),
            kv_bytes=kv_bytes, kv_tb_s=per_ns / 1e3, kv_bytes_per_ns_sm=per_ns / prof["sm_count"],
            flop_per_kv_byte=r["tflops"] * 1e12 / (per_ns * 1e9))
    return out


def _f(x, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _gantt(out: Path, captures: str | None, row: dict) -> Path:
    """SM 0's timeline of one variant: the middle CTA on SM 0, a steady-state window of 3 K/V tiles, with
    every CTA that ran on SM 0 during that window (lanes "ROLE (CTA n)")."""
    from dataclasses import replace

    z = ac.timeline(captures_root(captures, kinds=(ac.KIND,)), row["timeline_key"], row["timeline_capture"])
    events = ac.sm_events(z, 0, ROLES, OPS)
    ctas = sorted({e.cta for e in events}, key=lambda c: min(e.start_ns for e in events if e.cta == c))
    mid = ctas[len(ctas) // 2]
    t0, t1 = steady_state_window([e for e in events if e.cta == mid], 3)
    shown = [replace(e, role=f"{e.role} (CTA {e.cta})") for e in events if e.end_ns > t0 and e.start_ns < t1]
    lanes = [f"{role} (CTA {c})" for c in ctas for role in lane_order(ROLES)
             if any(e.role == f"{role} (CTA {c})" for e in shown)]
    path = out / f"kernels_gantt_{row['variant']}.png"
    fig = gantt(shown, None, title=f"{row['schedule']} at {row['shape']}: measured on SM 0 (instrumented build)",
                window_ns=(t0, t1), lanes=lanes)
    fig.savefig(path, dpi=110)
    return path


def _table(rows: list[dict]) -> list[str]:
    md = ["| variant | shape | causal | TFLOP/s | spread % | cuDNN TFLOP/s | ratio to cuDNN | rel err normal / heavy | "
          "sanitizer clean | timeline overhead % | predicted blind | predicted now | TFLOP/s err % blind | "
          "TFLOP/s err % now |",
          "|---|---|---|" + "---:|" * 11]
    return md + [f"| `{r['variant']}` | {r['shape']} | {'yes' if r['causal'] else 'no'} | {r['tflops']:.0f} | {r['spread_pct']:.2f} | "
                 f"{_f(r['cudnn_tflops'], '.0f')} | {_f(r['ratio_to_cudnn'], '.3f')} | "
                 f"{r['rel_err']['normal']:.1e} / {r['rel_err']['heavy']:.1e} | {yes_no(r['sanitizer_clean'])} | "
                 f"{r['instrumentation_overhead_pct']:.0f} | {_f(r['blind_predicted_tflops'], '.0f')} | "
                 f"{r['predicted_tflops']:.0f} | {_f(r['blind_err_pct'], '+.0f')} | {r['err_pct']:+.0f} |"
                 for r in rows]


def _findings(occ: dict, lim: dict) -> list[str]:
    s1, s2 = lim["variants"]["s1"], lim["variants"]["s2"]
    c, p = s2["roles"]["consumer0"], s2["roles"]["producer"]
    waits_kv = c.get("wait K", 0) + c.get("wait V", 0)
    mma = sum(c.get(op, 0) for op in ("issue QK", "wait QK", "issue PV", "wait PV"))
    occ_txt = "; ".join(f"`{n}`: {o['threads']} threads x {o['registers']} registers, {o['smem_bytes']} B smem "
                        f"-> {o['ctas']} CTA(s) per SM (limits: {', '.join(f'{k} {v}' for k, v in o['limits'].items())};"
                        f" bound by {o['bound_by']})" for n, o in occ.items())
    conc = {n: v["concurrency"] for n, v in lim["variants"].items()}
    return [
        f"**Occupancy** (CUDA occupancy rules, `lapis.model.occupancy`): {occ_txt}. The measured CTA spans agree: "
        + "; ".join(f"`{n}` had at most {max(cc['max_per_sm'])} CTA(s) on an SM at once (on "
                    f"{cc['max_per_sm'][max(cc['max_per_sm'])]} of {lim['sm_count']} SMs), "
                    f"{cc['mean']:.2f} on average" for n, cc in conc.items()) + f" at {lim['shape']}.",
        "",
        f"**What limits `s2`** (SM 0's timeline at {lim['shape']}, instrumented build, so fractions, not times): "
        f"its producer warp spends {100 * p.get('wait empty', 0):.0f}% of its time waiting for an empty slot and "
        f"{100 * p.get('issue TMA', 0):.0f}% issuing TMA, so it is not the bottleneck in issue terms. Its one "
        f"consumer warpgroup is busy in softmax {100 * c.get('softmax', 0):.0f}% of the time, in its own wgmma "
        f"chain (issue + wait QK and PV) {100 * mma:.0f}%, and waits on the K/V full barriers "
        f"{100 * waits_kv:.0f}% (K {100 * c.get('wait K', 0):.0f}%, V {100 * c.get('wait V', 0):.0f}%). "
        f"A steady-state tile takes (instrumented build): " + ", ".join(f"{op} {ns:.0f} ns" for op, ns in s2["tile_ns"].items()) + ". "
        "With one consumer warpgroup and one CTA per SM, the tensor core idles during every softmax, and the "
        "2-slot ring frees a slot only after the PV of its tile, leaving one tile's time for the next load to land.",
        "",
        f"**Why `s1` beats `s2`**: two `s1` CTAs share each SM, so one CTA's wgmma runs during the other's softmax "
        "and loads (a ping-pong the hardware scheduler gives for free); `s2` fits one CTA. Both kernels move the "
        "same K/V bytes per FLOP (block_m 64: every 64 query rows read all of K and V, "
        f"{s1['flop_per_kv_byte']:.0f} FLOP per byte), and both run close to the profile's shared-tensor L2 "
        f"bandwidth ({lim['l2_shared_tb_s']:.2f} TB/s): plain builds moved K/V at {s1['kv_tb_s']:.2f} TB/s "
        f"({s1['kv_bytes_per_ns_sm']:.0f} B/ns per SM, `s1`) and {s2['kv_tb_s']:.2f} TB/s "
        f"({s2['kv_bytes_per_ns_sm']:.0f} B/ns per SM, `s2`). A block_m of 128 (two consumer warpgroups sharing "
        "each K/V tile) would halve that traffic per FLOP.",
        "",
        "**The blind miss**: the simulator runs one CTA per SM, so it serializes `s1`'s load, wgmma and softmax on "
        "the SM and predicts about half of what two resident CTAs reach; for `s2` it assumes the TMA keeps the "
        "ring full and overshoots.",
    ]


RESCALE = dict(rows=64, seeds=2)  # the numerics' sample: 64 query rows x 2 draws of the inputs


def rescale_rows(captures: str | None = None, variant: str = "s7", cache: dict | None = None,
                 resimulate: bool = False) -> list[dict]:
    """s7's conditional rescale: per shape and input kind, the frequency the instrumented build counted (the latest
    capture that counted it) beside lapis.model.numerics.rescale_frequency_of on inputs drawn the same way. The
    prediction comes from the prediction cache (keyed by kind, seq and the sample) where it is current, else it
    is computed (about a second a shape) and stored in `cache`; cache None reads the committed one."""

    root, found = captures_root(captures, kinds=(ac.KIND,)), {}
    for folder in ac._folders(root, "manifests"):  # oldest first: a later capture wins
        for e in read_manifest(folder)["results"]:
            for key, r in e.get("rescales", {}).items():
                if key.split("/")[0] == variant:
                    found[(e["shape"], key.split("/")[1])] = dict(r, capture=f"{ac.KIND}/{folder.name}")
    out, cache = [], predictions.load() if cache is None else cache
    for (shape, kind), r in found.items():
        seq = int(shape.split("x")[2])
        if seq < 1024:
            continue  # the small correctness shape: too few tiles to say much
        pred, _ = predictions.cached(["rescale_frequency_of", kind, seq, sorted(RESCALE.items())],
                                     lambda: rescale_frequency_of(kind, seq, **RESCALE), cache, resimulate)
        out.append(dict(variant=variant, shape=shape, inputs=kind, measured=r["frequency"], capture=r["capture"],
                        predicted=pred))
    return out


def _rescale_table(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    md = ["### Conditional rescale (s7): how often O is rescaled, predicted against counted", "",
          "Per row and K/V tile past the first, threshold 8 (log2 units): counted by the instrumented s7 build over "
          "every row of the shape; predicted by lapis.model.numerics on 64 rows x 2 draws of the same inputs.", "",
          "| shape | inputs | counted | predicted |", "|---|---|---:|---:|"]
    md += [f"| {r['shape']} | {r['inputs']} | {r['measured']:.4f} | {r['predicted']:.4f} |" for r in rows]
    return md + [""]


def kernels_section(out: Path, captures: str | None = None, resimulate: bool = False) -> tuple[str, dict]:
    """(markdown, {"kernels": [row], "kernels_analysis": {...}}); writes the bar chart and one Gantt per variant."""
    t0 = time.time()
    rows = kernel_rows(captures)
    occ, lim = occupancy(captures), limiter(captures, rows)
    md = ["## Kernels: real Hopper attention on the H200", "",
          f"Captures {', '.join(f'`{c}`' for c in dict.fromkeys(r['capture'] for r in rows))} (plain build, CUDA events, torch SDPA with each backend forced in the "
          "same process). TFLOP/s = 4 B H L² D / median (causal rows: half the FLOPs, SDPA with is_causal); "
          "ratio to cuDNN = cuDNN's median time / ours "
          "(above 1: faster than cuDNN); rel err = ||O - ref|| / ||ref|| against float64 on normal and "
          "heavy-tailed scores; sanitizer clean = memcheck, racecheck and synccheck with 0 errors at "
          "1x2x512x128; timeline overhead = how much slower the instrumented build is. TFLOP/s err % = predicted / "
          "measured TFLOP/s - 1 (positive: the model is too fast; the other sections' time err % = predicted / "
          "measured time - 1 has the opposite sign); blind = committed before the timed "
          "run, now = the current profile and model at the kernel's parameters.", ""]
    md += _table(rows)
    steps = step_rows(captures)
    md += [""] + _step_table(steps)
    bars = out / "kernels_tflops.png"
    predicted_measured_bars(rows, bars, title="Hopper attention: predicted against measured on the H200",
                            series=SERIES, label=lambda r: f"{r['variant']}\n{r['shape']}",
                            ylabel="TFLOP/s (bf16, 4·B·H·L²·D / time)")
    md += ["", f"![attention predicted against measured]({bars.name})", ""]
    md += _findings(occ, lim) + [""]
    resc = rescale_rows(captures, resimulate=resimulate)
    md += _rescale_table(resc)
    for name in occ:
        row = next(r for r in rows if r["variant"] == name)
        path = _gantt(out, captures, row)
        md += [f"### Measured: the `{name}` build (schedule `{row['schedule']}`) at {row['shape']}, SM 0", "",
               f"![{name} measured]({path.name})", ""]
    numbers = dict(kernels=[{k: r[k] for k in JSON_KEYS} for r in rows], kernel_steps=steps,
                   kernels_analysis=dict(occupancy=occ, limiter=lim, rescales=resc, wall_s=round(time.time() - t0, 2)))
    return "\n".join(md), numbers
