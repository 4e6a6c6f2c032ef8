"""The report's "Kernels no one here wrote" section: the attention kernels of lapis.catalog.third_party, which the
simulator predicts from their source alone (torch SDPA's FlashAttention-2 and cuDNN backends, FA4's CuTe-DSL sm90
forward).

- Timed kernels (`timed` set in the catalog): the race captures' cases (lapis.validate.timelines, their rows
  variant == the catalog key), one table per kernel: predicted and measured µs, the error in time and in SM cycles
  (at the clock lapis.validate.timelines gives the race row: the bracket clock, the SM's mean clock between two
  probes around the kernel's batch, where the race has it, else the post-batch probe or nvidia-smi's sample during
  the kernel's batches, corrected where it can be; its source beside it), and whether a blind prediction preceded the
  capture. Headline per kernel: mean and largest |error|, in time and in cycles.
- The per-unit comparison (lapis.validate.units) of the last ncu capture: sm_cycles and dram_mb errors in % of
  the measured value, tensor_active_pct in points, and the largest miss per unit.
- Held-out kernels (no timed case in the captures): their blind predictions (lapis/data/blind/<blind>.json),
  marked "not measured here".

Predictions come from the committed cache (lapis.pipeline_sim.predictions): the timeline cases are in
lapis.validate.timelines' entries, the per-unit ones in unit_cases(); the blind rows are read, never simulated.
"""

from __future__ import annotations

import time

from lapis.captures.readers import read_ncu
from lapis.captures.store import captures_root, manifests
from lapis.catalog.third_party import KERNELS
from lapis.validate.blind import load as load_blind
from lapis.validate.timelines import validate_timelines
from lapis.validate.units import GPU, PCT_UNITS, kernel_case, pct_text, validate_units

UNIT_COLUMNS = ("sm_cycles", "tensor_active_pct", "dram_mb")  # the compact table's units
MISS_UNITS = ("time_us", "sm_cycles", "tensor_active_pct", "dram_mb")
NOT_MEASURED = "not measured here"


def _f(x, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _mean_abs(xs: list) -> float | None:
    xs = [abs(x) for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _max_abs(xs: list) -> float | None:
    xs = [abs(x) for x in xs if x is not None]
    return max(xs) if xs else None


def third_party_rows(per_case: list[dict]) -> dict[str, list[dict]]:
    """{catalog variant: its per_case rows (lapis.validate.timelines)} for the catalog's kernels, in case order."""
    return {v: [c for c in per_case if c["variant"] == v] for v in KERNELS}


def kernel_summary(rows: list[dict]) -> dict:
    """Headline numbers of one kernel's rows: cases, scored (predicted) cases, blind cases, mean and largest |err_pct| and |cycles_err_pct|
    (in %), and the mean |error| of the blind rows."""
    return dict(cases=len(rows), scored=sum(c["err_pct"] is not None for c in rows),
                blind_cases=sum(bool(c["blind"]) for c in rows),
                mape_pct=_mean_abs([c["err_pct"] for c in rows]),
                max_abs_err_pct=_max_abs([c["err_pct"] for c in rows]),
                mape_cycles_pct=_mean_abs([c.get("cycles_err_pct") for c in rows]),
                max_abs_cycles_err_pct=_max_abs([c.get("cycles_err_pct") for c in rows]),
                mape_pct_blind=_mean_abs([c["err_pct"] for c in rows if c["blind"]]))


def _timed_table(variant: str, rows: list[dict], s: dict) -> list[str]:
    k = KERNELS[variant]
    md = [f"### `{variant}`: {k['kernel']}, schedule `{k['schedule']}`", "",
          f"Source: {k['source']}.", "",
          f"{s['cases']} cases ({s['scored']} predicted, {s['blind_cases']} blind): mean |error| {_f(s['mape_pct'], '.1f')}% in time "
          f"(largest {_f(s['max_abs_err_pct'], '.1f')}%), {_f(s['mape_cycles_pct'], '.1f')}% in SM cycles (largest "
          f"{_f(s['max_abs_cycles_err_pct'], '.1f')}%); blind cases {_f(s['mape_pct_blind'], '.1f')}% in time.", "",
          "| shape | causal | predicted µs | measured µs | error (time) | error (cycles) | clock MHz | blind "
          "| capture |", "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for c in rows:
        md.append(f"| {c['shape']} | {'yes' if c['causal'] else 'no'} | {_f(c['predicted_us'], '.1f')} | "
                  f"{c['measured_us']:.1f} | {pct_text(c['err_pct'])} | {pct_text(c.get('cycles_err_pct'))} | "
                  f"{_clock(c)} | {'yes' if c['blind'] else 'no'} | `{c['capture']}` |")
    unpredicted = [c for c in rows if c["predicted_us"] is None]
    if unpredicted:
        md += ["", "Not predicted (the schedule cannot run the case): " + "; ".join(
            f"{c['shape']}{' causal' if c['causal'] else ''}: {c.get('error')}" for c in unpredicted) + "."]
    return md + [""]


def _clock(c: dict) -> str:
    """The run's SM clock and how it was measured ("bracket probe", "post-batch probe", "sampled x probe ratio" or
    "sampled": lapis.validate.timelines._third_party_clock)."""
    if c.get("clock_mhz") is None:
        return "-"
    return f"{c['clock_mhz']:.0f} ({(c.get('clock') or {}).get('source', '-')})"


def held_out_rows(variant: str) -> list[dict]:
    """The blind predictions of a catalog kernel (lapis/data/blind/<blind>.json), in file order."""
    d = load_blind(KERNELS[variant]["blind"])  # one set's file, checked, not every set's
    return [dict(shape=e["shape"], causal=bool(e["params"].get("causal", 0)), predicted_us=e["predicted_us"],
                 tflops=e["tflops"], bound_by=e["bound_by"], date=d["date"], measured=NOT_MEASURED)
            for e in d["entries"] if e["variant"] == variant]


def _held_out_table(variant: str, rows: list[dict]) -> list[str]:
    k = KERNELS[variant]
    why = "held out: never timed here" if k["timed"] is None else "no capture here timed it"
    md = [f"### `{variant}`: {k['kernel']}, schedule `{k['schedule']}` ({NOT_MEASURED})", "",
          f"Source: {k['source']}.", "",
          f"{len(rows)} blind predictions (lapis/data/blind/{k['blind']}.json, {why}):", "",
          "| shape | causal | predicted µs | predicted TFLOP/s | busiest unit | predicted on | measured |",
          "|---|---|---:|---:|---|---|---|"]
    md += [f"| {r['shape']} | {'yes' if r['causal'] else 'no'} | {r['predicted_us']:.1f} | {r['tflops']:.0f} | "
           f"{r['bound_by']} | {r['date']} | {r['measured']} |" for r in rows]
    return md + [""]


def unit_summary(v: dict) -> dict:
    """The compact per-unit numbers of lapis.validate.units' result: per kernel the errors of UNIT_COLUMNS, and
    the largest miss of each MISS_UNITS unit."""
    kernels = [dict(kernel=r["kernel"], schedule=r.get("schedule"), shape=r.get("shape"),
                    errors={u: r["units"][u]["error"] for u in UNIT_COLUMNS} if "units" in r else None,
                    not_compared=r.get("not_compared")) for r in v["kernels"]]
    return dict(kernels=kernels, largest_miss={u: v["largest_miss"][u] for u in MISS_UNITS if u in v["largest_miss"]},
                l2_reuse=v.get("l2_reuse", []))


def _units_table(u: dict, captures: str) -> list[str]:
    md = ["### Per unit against Nsight Compute (`lapis validate units`)", "",
          f"The kernels of {captures} (`ncu --clock-control none`, one launch each) on the {GPU} profile, "
          "third-party and lapis's own. Errors: sm_cycles and dram_mb in % of the measured value, tensor_active_pct "
          "in points; dram_mb is predicted as Q and O once and the K/V loads over the reuse the work order leaves in "
          "one L2 partition (lapis.pipeline_sim.l2_reuse).", "",
          "| kernel | schedule | shape | sm_cycles | tensor_active_pct | dram_mb |", "|---|---|---|---:|---:|---:|"]
    for k in u["kernels"]:
        if k["errors"] is None:
            md.append(f"| `{k['kernel']}` | - | - | {k['not_compared']} | | |")
            continue
        cells = [_f(k["errors"][c], "+.1f") + (" pt" if c in PCT_UNITS else "%") if k["errors"][c] is not None
                 else "-" for c in UNIT_COLUMNS]
        md.append(f"| `{k['kernel']}` | `{k['schedule']}` | {k['shape']} | " + " | ".join(cells) + " |")
    md += ["", "Largest miss per unit: " + "; ".join(
        f"{unit} `{w['kernel']}` {w['error']:+.1f}{' pt' if unit in PCT_UNITS else '%'}"
        for unit, w in u["largest_miss"].items()) + ".", ""]
    return md + _l2_table(u.get("l2_reuse", []))


def _l2_table(rows: list) -> list[str]:
    """The DRAM bytes predicted before their capture (lapis.validate.units.l2_reuse_rows), 10^6 bytes."""
    if not rows:
        return []
    md = ["### DRAM bytes predicted before their capture (`lapis validate units`)", "",
          "Nsight Compute's DRAM bytes (10^6 B) of the diagnostic captures against the prediction committed before "
          "them (`lapis/data/blind/ncu/l2_reuse.json`) and the current model's (`lapis.pipeline_sim.l2_reuse`).", "",
          "| kernel | shape | measured | blind | blind error | now | now error |", "|---|---|---:|---:|---:|---:|---:|"]
    for w in rows:
        if "not_measured" in w:
            md.append(f"| `{w['kernel']}` | {w['shape']} | not measured | {w['blind_dram_mb']:.1f} | | | |")
            continue
        md.append(f"| `{w['kernel']}` | {w['shape']} | {w['measured_dram_mb']:.1f} | {w['blind_dram_mb']:.1f} | "
                  f"{pct_text(w['blind_error_pct'])} | {w['predicted_dram_mb']:.1f} | {pct_text(w['error_pct'])} |")
    return md + [""]


def unit_cases(captures: str | None = None) -> list[tuple]:
    """(schedule, gpu, shape, params) of every kernel the ncu captures measured (lapis.validate.units.kernel_case),
    for the prediction cache; [] without ncu captures."""
    root = captures_root(captures, kinds=())
    out = []
    for folder in manifests(root, "ncu") if (root / "ncu").is_dir() else []:
        man = read_ncu(folder).manifest
        for key, entry in man["kernels"].items():
            if "error" not in entry:
                c = kernel_case(key, man["shape"], man["gemm_size"])
                out.append((c["schedule"], GPU, c["shape"], c["params"]))
    return out


def third_party_section(captures: str | None = None, validation: dict | None = None) -> tuple[str, dict]:
    """(markdown, {"third_party": numbers}). validation: lapis.validate.timelines' result when the report already
    has it (its per_case rows are reused); else the third-party cases alone are validated from the cache.
    numbers: per catalog kernel its summary (kernel_summary) and rows, or its blind rows when no capture timed it;
    "units": unit_summary (absent without an ncu capture); wall_s."""
    t0 = time.time()
    root = captures_root(captures, kinds=())
    per_case = validation["per_case"] if validation else _timed_cases(captures, root)
    by_kernel = third_party_rows(per_case)
    md = ["## Kernels no one here wrote", "",
          "Attention kernels lapis did not write (lapis.catalog.third_party), each simulated by a schedule built "
          "from its source: predicted against measured where a race capture timed them (torch SDPA, bf16, same "
          "process as lapis's kernels); error = (predicted - measured) / measured; in cycles, the prediction at the "
          "profile clock against the measurement at the run's SM clock (the bracket clock where the race has it: "
          "the SM's mean clock between two probe launches around the kernel's batch; else the post-batch probe, "
          "else nvidia-smi's sample during the kernel's batches, scaled by the row's probe / sample ratio where "
          "lapis's kernels ran in it; the clock column names the source); "
          "blind = a prediction committed before the capture (lapis/data/blind/).", ""]
    numbers: dict = {}
    for variant, rows in by_kernel.items():
        k_md, numbers[variant] = _kernel_part(variant, rows)
        md += k_md
    u_md, units = _units_part(root, captures)
    md += u_md
    if units is not None:
        numbers["units"] = units
    numbers["wall_s"] = round(time.time() - t0, 2)
    return "\n".join(md), {"third_party": numbers}


def _kernel_part(variant: str, rows: list[dict]) -> tuple[list[str], dict]:
    """One catalog kernel: its predicted-against-measured table when a capture timed it, else its blind rows."""
    k = KERNELS[variant]
    if rows:
        s = kernel_summary(rows)
        return _timed_table(variant, rows, s), dict(s, schedule=k["schedule"], source=k["source"],
                                                     rows=[_row_numbers(c) for c in rows])
    held = held_out_rows(variant)
    return _held_out_table(variant, held), dict(schedule=k["schedule"], source=k["source"], measured=NOT_MEASURED,
                                                blind=held)


def _units_part(root, captures: str | None) -> tuple[list[str], dict | None]:
    """The per-unit table and unit_summary, or a skip line and None without an ncu capture."""
    if not ((root / "ncu").is_dir() and manifests(root, "ncu")):
        return ["### Per unit against Nsight Compute", "", "Skipped: this captures folder has no ncu/ capture.",
                ""], None
    v = validate_units(captures)
    u = unit_summary(v)
    folders = ", ".join(f"`{c}`" for c in sorted({r["capture"] for r in v["kernels"]}))
    return _units_table(u, folders), u


def _row_numbers(c: dict) -> dict:
    return {k: c.get(k) for k in ("shape", "causal", "predicted_us", "measured_us", "err_pct", "cycles_err_pct",
                                  "clock", "blind", "capture", "error")}


def _timed_cases(captures: str | None, root) -> list[dict]:
    """The third-party kernels' per_case rows alone (the committed cache; what it lacks is simulated); [] without a
    race capture (every kernel is then listed as held out)."""
    if not ((root / "race").is_dir() and manifests(root, "race")):
        return []
    return validate_timelines(captures, gantts=False, select=lambda c: c["variant"] in KERNELS)["per_case"]
