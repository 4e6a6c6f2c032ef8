"""`lapis validate units`: the simulator's per-unit numbers against Nsight Compute's, kernel by kernel.

The measurements are the `ncu` captures (lapis.gpu.ncu_units: `ncu --clock-control none`, one launch of each
kernel; read by lapis.captures.readers.read_ncu), the last capture of each kernel. Each kernel is simulated
with the schedule and parameters that mirror it (lapis's own from the variant catalogs, the third-party
ones from lapis.catalog.third_party) at the capture's shape, on the h200 profile.

Units (UNITS), measured from the counters and predicted from the simulation:
- time_us: sm__cycles_elapsed.avg / its per-second rate; predicted: the simulated time.
- sm_cycles: sm__cycles_elapsed.avg (cycles per SM); predicted: simulated ns x the profile's clock_ghz.
- clock_mhz: sm__cycles_elapsed.avg.per_second; predicted: the profile's one clock.
- tensor_active_pct: sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed; predicted: the FLOPs per SM
  over (the tensor instruction's FLOP per clock per SM x predicted cycles): the profile's tensor_flop_per_clk_sm
  for wgmma, mma_sync_flop_per_clk_sm for mma.sync. (On the H200 capture this reproduces Nsight Compute's
  percentage from the measured cycles to within a point for both instructions.)
- dram_mb: dram__bytes_read.sum + dram__bytes_write.sum, in 10^6 bytes; predicted: for the Hopper attention
  schedules (lapis's kernels, cuDNN, FA4) the simulation's HBM traffic (attention_h200.hbm_bytes: Q read and O
  written once, the K/V loads over the reuse the work order leaves in L2, lapis.pipeline_sim.l2_reuse); for the
  others the compulsory traffic (attention: Q, K, V read once and O written, 2-byte elements; GEMM: A and B read
  once, C written), i.e. every re-read an L2 hit.
- inst_<pipe>_m (sm__inst_executed_pipe_<pipe>.sum, millions of warp instructions); predicted from an instruction
  mix (MIX_SOURCE says which): lapis's kernels (s3, s5, s9, the GEMM) from their SASS, compiled for sm_90a, per
  code region, times the simulation's work order (tiles, K/V or K blocks per tile, CTAs:
  lapis.model.instruction_mix.executed, lapis/data/instruction_mix.json); FA2 the same from the SASS of its ncu
  source page; cuDNN's is measured-derived, not a prediction: the capture's counts per tile times the tiles
  simulated (the same tiles, so its error is 0 by construction).
- issue_active_pct (smsp__issue_active.avg.pct_of_peak_sustained_active); predicted: the mix's instructions of
  every pipe / (predicted SM cycles x 4 SMSPs x sm_count).

l2_reuse: the DRAM bytes predicted before their capture (L2_BLIND) beside Nsight Compute's in the diagnostic ncu
captures and the current model's (l2_reuse_rows); the table prints them last.

Errors: percentage units in points (predicted - measured); the others in % of the measured value. A kernel whose
schedule is not registered, or whose profile failed, is listed with the reason and no numbers.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from lapis.captures.readers import read_ncu
from lapis.captures.store import captures_root, manifests, read_manifest
from lapis.catalog import attention, gemm, third_party
from lapis.data import BLIND
from lapis.errors import CaptureError, LapisError
from lapis.model import instruction_mix, sass
from lapis.model.profile import load_profile
from lapis.pipeline_sim import predictions, work_order
from lapis.pipeline_sim.schedules.attention_h200 import VARIANTS as H200_ATTENTION
from lapis.pipeline_sim.schedules.attention_h200 import hbm_bytes, rescale_frequency
from lapis.pipeline_sim.schedule import lookup

GPU = "h200"
# DRAM bytes predicted before diagnostic/h200-2026-12-03-l2-1024 and diagnostic/h200-2026-12-03-l2-4096 ran
L2_BLIND = BLIND / "ncu" / "l2_reuse.json"
NO_MIX = "not predicted: no instruction mix for this kernel"
MIX_SOURCE = {"sass": "SASS compiled here (lapis/data/instruction_mix.json) x the simulation's work order",
              "flash": "FA2's SASS from its ncu source page (lapis/data/instruction_mix.json) x the simulation's "
                       "work order",
              "cudnn": "measured-derived, not predicted: the capture's counts per tile x the tiles simulated"}
SMSPS = 4
PIPES = ("fma", "alu", "xu", "lsu", "tensor")
UNITS = {"time_us": "µs", "sm_cycles": "cycles per SM", "clock_mhz": "MHz",
         "tensor_active_pct": "% of peak, elapsed", "dram_mb": "10^6 bytes read + written",
         "issue_active_pct": "% of issue slots, active cycles",
         **{f"inst_{p}_m": f"10^6 warp instructions ({p} pipe)" for p in PIPES}}
PCT_UNITS = ("tensor_active_pct", "issue_active_pct")
GEMM_VARIANT = "ws_s4_c2_n128"


def kernel_case(key: str, shape: str, gemm_size: int) -> dict:
    """The simulation that mirrors capture kernel `key`: schedule, params, shape, FLOPs, compulsory bytes and
    tensor instruction. LapisError for a key no table names."""
    if key == "gemm":
        v, n = gemm.VARIANTS[GEMM_VARIANT], gemm_size
        return dict(schedule=v["schedule"], params=gemm.sim_params(v), shape=f"{n}x{n}x{n}", flops=2.0 * n ** 3,
                    compulsory_bytes=3 * n * n * 2, instruction="wgmma", variant=GEMM_VARIANT)
    b, h, seq, d = (int(x) for x in shape.split("x"))
    name, _, flag = key.partition(":")
    causal = flag == "causal"
    base = dict(shape=shape, flops=4.0 * b * h * seq * seq * d / (2 if causal else 1),
                compulsory_bytes=4 * b * h * seq * d * 2)
    if name in attention.VARIANTS:
        v = attention.VARIANTS[name]
        return dict(base, schedule=v["schedule"], params=attention.sim_params(v, causal), instruction="wgmma",
                    variant=key)
    found = third_party.by_timed_name(name) or third_party.by_view_name(name)
    if found:
        variant, k = found
        case = next((c for c in k["cases"] if c[0].endswith(f"x{d}")), None)  # its tile choice at this head dim
        if case is None:
            raise LapisError(f"a third-party kernel is simulated at the head dims its catalog entry gives a tile for "
                             f"({', '.join(sorted({c[0].rsplit('x', 1)[1] for c in k['cases']}))})",
                             f"{key} at {shape}", "capture it at one of those head dims")
        tile = {p: v for p, v in case[2].items() if p != "causal"}
        return dict(base, schedule=k["schedule"], params=dict(tile, **({"causal": 1} if causal else {})),
                    instruction=k["instruction"], variant=variant)
    raise LapisError("a captured kernel is a catalog variant, 'gemm' or a kernel of lapis.catalog.third_party",
                     repr(key), "add it to lapis/validate/units.py")


def measured(metrics: dict) -> dict:
    """UNITS from one kernel's Nsight Compute metrics ({name: {"value", "unit"}})."""
    m = {k: v["value"] for k, v in metrics.items()}
    cyc, hz = m["sm__cycles_elapsed.avg"], m["sm__cycles_elapsed.avg.per_second"]
    out = dict(time_us=cyc / hz * 1e6, sm_cycles=cyc, clock_mhz=hz / 1e6,
               tensor_active_pct=m.get("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"),
               dram_mb=(m["dram__bytes_read.sum"] + m["dram__bytes_write.sum"]) / 1e6,
               issue_active_pct=m.get("smsp__issue_active.avg.pct_of_peak_sustained_active"))
    for p in PIPES:
        v = m.get(f"sm__inst_executed_pipe_{p}.sum")
        out[f"inst_{p}_m"] = None if v is None else v / 1e6
    return out


def work(key: str, case: dict, sm_count: int) -> dict:
    """The simulation's trip counts for executed(): tiles, blocks (summed over tiles), CTAs, warps (consumer and
    per CTA) and tensor instructions per block and consumer warp."""
    prm = case["params"]
    if key == "gemm":
        n = int(case["shape"].split("x")[0])
        tiles = (n // prm["block_m"]) * (n // prm["block_n"])  # one CTA per tile (gemm_ws.py)
        wgs = prm["consumer_wgs"]
        return dict(tiles=tiles, blocks=tiles * (n // prm["block_k"]), ctas=tiles, consumer_warps=4 * wgs,
                    warps_per_cta=4 * (wgs + 1), tensor_per_block=prm["block_k"] // 16)  # m64n128k16 per K step
    b, h, seq, d = (int(x) for x in case["shape"].split("x"))
    bm, bn = prm["block_m"], prm["block_n"]
    if key == "flash":  # 4 warps of block_m / 4 rows each, mma.sync m16n8k16: QK (bn/8 x d/16), PV (d/8 x bn/16)
        w = prm["warps"]
        tiles = b * h * (seq // bm)
        return dict(tiles=tiles, blocks=tiles * (seq // bn), ctas=tiles, consumer_warps=w, warps_per_cta=w,
                    tensor_per_block=bm // w // 16 * (bn // 8 * d // 16 + d // 8 * bn // 16))
    flags = H200_ATTENTION.get(case["schedule"], {})  # cuDNN: tiles only
    units = work_order.kv_units_per_sm(b * h, seq // bm, seq // bn, bm, bn, bool(prm.get("causal")), sm_count,
                                       1, prm.get("persistent_order", "grid_stride"))
    per_sm = [[n for u in sm for n in u] for sm in units]
    wgs = prm["consumer_wgs"]
    # cond_rescale: a warp rescales O when any of its 16 rows' max moved (attention_softmax.cuh, __any_sync), each
    # row at the simulator's rate on normal inputs (independent rows: an assumption)
    row = rescale_frequency(bn, prm.get("threshold", 8.0)) if flags.get("cond_rescale") else 1.0
    return dict(tiles=sum(map(len, per_sm)), blocks=sum(map(sum, per_sm)),
                ctas=len(units) if flags.get("persistent") else sum(map(len, units)),
                consumer_warps=4 * wgs, warps_per_cta=4 * (wgs + 1),
                tensor_per_block=d // 16 + bn // 16,  # each warpgroup: 64 rows, QK then PV, m64nNk16
                rescale_per_block=1 - (1 - row) ** 16)


def instructions(key: str, case: dict, sm_count: int, meas_counts: dict | None) -> tuple[dict | None, str | None]:
    """({pipe: warp instructions over the run}, MIX_SOURCE key), or (None, None) without a mix."""
    if key == "cudnn" and meas_counts:
        tiles = work(key, case, sm_count)["tiles"]
        return {p: v / tiles * tiles for p, v in meas_counts.items()}, "cudnn"  # per tile x tiles
    mixes = instruction_mix.load()["kernels"]
    if key not in mixes:
        return None, None
    return instruction_mix.executed(mixes[key]["regions"], **work(key, case, sm_count)), (
        "flash" if key == "flash" else "sass")


def predicted(case: dict, cache: dict, key: str = "", meas_counts: dict | None = None) -> tuple[dict, dict]:
    """(UNITS predicted, reasons for those left null) for one kernel case."""
    prof = load_profile(GPU)
    val = lambda k: prof.values[k]["value"]  # noqa: E731
    r, _ = predictions.predict(case["schedule"], GPU, case["shape"], case["params"], cache)
    ghz = val("clock_ghz")
    cycles = r["predicted_us"] * 1e3 * ghz
    rate = val("tensor_flop_per_clk_sm" if case["instruction"] == "wgmma" else "mma_sync_flop_per_clk_sm")
    counts, source = instructions(key, case, int(val("sm_count")), meas_counts)
    out = dict(time_us=r["predicted_us"], sm_cycles=cycles, clock_mhz=ghz * 1e3,
               tensor_active_pct=100.0 * case["flops"] / val("sm_count") / (rate * cycles),
               dram_mb=dram_mb(case),
               issue_active_pct=None if counts is None else
               100.0 * sum(counts.values()) / (cycles * SMSPS * val("sm_count")),
               **{f"inst_{p}_m": None if counts is None else counts[p] / 1e6 for p in PIPES})
    reasons = {k: NO_MIX for k, v in out.items() if v is None}
    if source:
        reasons["instruction_mix"] = MIX_SOURCE[source]
    return out, reasons


def dram_mb(case: dict) -> float:
    """The predicted DRAM traffic of a kernel case in 10^6 bytes: the schedule's HBM bytes where its costs carry a
    K/V reuse (attention_h200.hbm_bytes, from the schedule's own parameters, work order and costs, as
    lapis.pipeline_sim.engine.run takes them), else the compulsory bytes."""
    s, p = lookup(case["schedule"]), load_profile(GPU)
    dims = s.parse_shape(case["shape"])
    prm, _ = s.resolve(p, dims, dict(case["params"]))
    cost = s.costs(p, dims, prm, s.flags)
    if not hasattr(cost, "kv_reuse"):
        return case["compulsory_bytes"] / 1e6
    return hbm_bytes(s.work(p, dims, prm), dims, cost) / 1e6


def error(unit: str, pred, meas):
    """predicted - measured in points (PCT_UNITS), else in % of the measured value; None without either, or for a
    relative error of a measured 0."""
    if pred is None or meas is None or (meas == 0 and unit not in PCT_UNITS):
        return None
    return pred - meas if unit in PCT_UNITS else 100.0 * (pred - meas) / meas


def kernel_row(key: str, entry: dict, shape: str, gemm_size: int, cache: dict) -> dict:
    if "error" in entry:
        return dict(kernel=key, not_compared=f"profile failed: {entry['error'][:200]}")
    case = kernel_case(key, shape, gemm_size)
    row = dict(kernel=key, name=entry.get("demangled", ""), schedule=case["schedule"], shape=case["shape"],
               params=case["params"], instruction=case["instruction"])
    meas = measured(entry["metrics"])
    counts = {p: entry["metrics"][f"sm__inst_executed_pipe_{p}.sum"]["value"] for p in sass.PIPES
              if f"sm__inst_executed_pipe_{p}.sum" in entry["metrics"]}
    try:
        pred, reasons = predicted(case, cache, key, counts)
    except LapisError as exc:  # the instruction counts need the work order only, not the simulation
        pred, reasons = dict.fromkeys(UNITS), dict.fromkeys(UNITS, f"not simulated: {exc}")
        mix, source = instructions(key, case, int(load_profile(GPU).values["sm_count"]["value"]), counts)
        if mix is not None:
            for p in PIPES:
                pred[f"inst_{p}_m"] = mix[p] / 1e6
                reasons.pop(f"inst_{p}_m")
            reasons["instruction_mix"] = MIX_SOURCE[source]
    if "instruction_mix" in reasons:
        row["instruction_mix"] = reasons.pop("instruction_mix")
    row["units"] = {u: dict(measured=meas.get(u), predicted=pred.get(u), error=error(u, pred.get(u), meas.get(u)),
                            **({"why_not_predicted": reasons[u]} if u in reasons else {})) for u in UNITS}
    return row


def validate_units(captures: str | None = None) -> dict:
    """Every kernel of the last ncu capture that measured it, predicted against measured (module docstring)."""
    root = captures_root(captures, kinds=("ncu",))
    folders = manifests(root, "ncu")
    if not folders:
        raise LapisError("validate units reads ncu captures (lapis.gpu.ncu_units)", f"none under {root}",
                         "pass --captures DIR holding ncu/<name>/manifest.json")
    latest: dict = {}
    for f in folders:
        cap = read_ncu(f)
        for key, entry in cap.manifest["kernels"].items():
            latest[key] = (Path(f).name, cap.manifest, entry)
    cache = predictions.load()
    rows = []
    for key, (name, man, entry) in latest.items():
        row = kernel_row(key, entry, man["shape"], man["gemm_size"], cache)
        rows.append(dict(row, capture=f"ncu/{name}", clock_control=man.get("clock_control")))
    return dict(gpu=GPU, units=UNITS, kernels=rows, largest_miss=largest_misses(rows),
                l2_reuse=l2_reuse_rows(L2_BLIND, root))


def _blind_cases(path: Path) -> list[dict]:
    """The cases of the blind DRAM file; CaptureError naming it when it is not {cases: [{kernel, shape,
    predicted_dram_mb > 0}, ...]}."""
    rule = "the blind DRAM predictions are {cases: [{kernel: str, shape: str, predicted_dram_mb: number > 0}]}"
    fix = "restore lapis/data/blind/ncu/l2_reuse.json from git"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as exc:  # missing, unreadable, not UTF-8, not JSON
        raise CaptureError(rule, f"{path}: {type(exc).__name__}: {exc}", fix) from None
    cases = doc.get("cases") if isinstance(doc, dict) else None
    if not isinstance(cases, list) or not cases:
        got = f"cases is {json.dumps(cases)[:80]}" if isinstance(doc, dict) else f"a {type(doc).__name__}"
        raise CaptureError(rule, f"{path}: {got}", fix)
    for i, c in enumerate(cases):
        v = c.get("predicted_dram_mb") if isinstance(c, dict) else None
        if not (isinstance(c, dict) and isinstance(c.get("kernel"), str) and isinstance(c.get("shape"), str)
                and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0):
            raise CaptureError(rule, f"{path}: cases[{i}] = {json.dumps(c)[:160]}", fix)
    return cases


def _why(error_text: str) -> str:
    """What a failed profile's text (lapis.gpu.ncu_units keeps its tail, cut mid-word) says went wrong: Nsight
    Compute's warning, the sentence naming what was not supported, or an Error line; else its last line."""
    lines = [x.strip() for x in error_text.splitlines() if x.strip()] or ["?"]
    for x in lines:
        if "No kernels were profiled" in x:
            return "Nsight Compute profiled no kernel (its kernel-name filter matched none)"
        found = re.search(r"(Its type `[^`]*`|[^.]*) is not supported\.", x)
        if found:
            return "the launch failed under Nsight Compute: " + found.group(0).strip()
    return next((x for x in lines if "Error" in x), lines[-1])


def l2_reuse_rows(blind_file: Path, root: Path) -> list[dict]:
    """The DRAM bytes predicted before their capture (blind_file, L2_BLIND) against Nsight Compute's measurement
    in the captures root's diagnostic ncu captures (lapis.gpu.ncu_units runs stored under diagnostic/, so they do
    not replace the kernels' rows above) and against the current model (dram_mb): per case kernel, shape, capture,
    measured, blind and predicted 10^6 bytes and the errors in %; a case no capture measured gives its capture's
    error line instead (not_measured), or "no capture". CaptureError (_blind_cases) for a damaged blind file."""
    found = {}
    for f in manifests(root, "diagnostic") if (Path(root) / "diagnostic").is_dir() else []:
        man = read_manifest(f)
        if man.get("schema") == "lapis.ncu-units/1":
            for key, e in read_ncu(f).manifest["kernels"].items():
                found[(key, man["shape"])] = (f"diagnostic/{Path(f).name}", e)
    rows = []
    for c in _blind_cases(blind_file):
        row = dict(kernel=c["kernel"], shape=c["shape"], blind_dram_mb=c["predicted_dram_mb"])
        capture, e = found.get((c["kernel"], c["shape"]), (None, None))
        if e is None or "error" in e:
            rows.append(dict(row, capture=capture, not_measured=_why((e or {}).get("error", "no capture"))))
            continue
        meas = measured(e["metrics"])["dram_mb"]
        now = dram_mb(kernel_case(c["kernel"], c["shape"], 8192))
        rows.append(dict(row, capture=capture, measured_dram_mb=meas, blind_error_pct=error("dram_mb",
                         c["predicted_dram_mb"], meas), predicted_dram_mb=now, error_pct=error("dram_mb", now, meas)))
    return rows


def largest_misses(rows: list) -> dict:
    """{unit: {"kernel", "error"}}: the largest |error| of each predicted unit but the clock (one profile clock)."""
    out: dict = {}
    for r in (r for r in rows if "units" in r):
        for u, v in r["units"].items():
            if u != "clock_mhz" and v["error"] is not None and abs(v["error"]) > abs(out.get(u, {}).get("error", -1)):
                out[u] = dict(kernel=r["kernel"], error=v["error"])
    return out


def render(r: dict) -> str:
    """The table `lapis validate units` prints: one line per kernel and unit."""
    lines = [f"{'kernel':<11}{'unit':<19}{'measured':>12}{'predicted':>12}{'error':>10}  schedule"]
    for row in r["kernels"]:
        if "units" not in row:
            lines.append(f"{row['kernel']:<11}{row['not_compared']}")
            continue
        for u, v in row["units"].items():
            m, p, e = v["measured"], v["predicted"], v["error"]
            unit_err = "" if e is None else (f"{e:+.1f} pt" if u in PCT_UNITS else f"{e:+.1f}%")
            lines.append(f"{row['kernel']:<11}{u:<19}{_num(m):>12}{_num(p):>12}{unit_err:>10}  {row['schedule']}")
    for row in r["kernels"]:
        if "instruction_mix" in row:
            lines.append(f"instruction mix of {row['kernel']}: {row['instruction_mix']}")
    for u, w in r["largest_miss"].items():
        lines.append(f"largest {u} miss: {w['kernel']} ({w['error']:+.1f}{' points' if u in PCT_UNITS else '%'})")
    lines.append("units: " + "; ".join(f"{k} {v}" for k, v in UNITS.items()))
    if r.get("l2_reuse"):
        lines.append("DRAM bytes predicted before their capture (lapis/data/blind/ncu/l2_reuse.json), 10^6 B:")
        lines.append(f"  {'kernel':<14}{'shape':<16}{'measured':>10}{'blind':>10}{'blind err':>11}{'now':>10}"
                     f"{'now err':>10}")
        for w in r["l2_reuse"]:
            if "not_measured" in w:
                lines.append(f"  {w['kernel']:<14}{w['shape']:<16}{'-':>10}{_num(w['blind_dram_mb']):>10}  "
                             f"not measured: {w['not_measured']}")
                continue
            lines.append(f"  {w['kernel']:<14}{w['shape']:<16}{_num(w['measured_dram_mb']):>10}"
                         f"{_num(w['blind_dram_mb']):>10}{pct_text(w['blind_error_pct']):>11}"
                         f"{_num(w['predicted_dram_mb']):>10}{pct_text(w['error_pct']):>10}")
    return "\n".join(lines)


def pct_text(x) -> str:
    """A relative error for the tables: "-" where there is none (a measured 0)."""
    return "-" if x is None else f"{x:+.1f}%"


def _num(x) -> str:
    return "-" if x is None else f"{x:,.1f}" if abs(x) < 1e6 else f"{x:,.0f}"
