"""The committed GEMM captures (lapis.gpu.bench_gemm): measured times and one SM's decoded timeline.

A capture folder is gemm/<name>/ under a captures root (lapis/data/captures by default) with manifest.json and
timelines/<variant>_<size>.npz (shipped packed as timelines/<variant>_<size>.packed, read through
lapis.captures.store). Times: the plain (uninstrumented) build's CUDA-event median per launch, in µs,
with spread_pct = 100 * IQR / median over the timed runs; the SM clock is nvidia-smi's median during those runs.
Timelines come from the instrumented build (-DLAPIS_TIMELINE=1, slower by `timeline_overhead_pct`): use them
for event offsets, never for the total time. bench_gemm saves the whole record sequence of the CTAs that ran on
SMs 0 and 1 (and of CTAs 0-7), plus the first/last record time and SM of every CTA.
Manifests are read by lapis.captures.readers.read_gemm: schema-checked, CaptureError naming the file and field.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lapis.captures.readers import not_compared, read_gemm
from lapis.captures.store import has_timelines, kind_index, open_timelines
from lapis.captures.timeline import decode_timeline
from lapis.errors import CaptureError
from lapis.pipeline_sim.recorder import Event


def timed_captures(root: Path) -> list[Path]:
    """gemm/<name>/ folders whose manifest holds timed bench_gemm results (not --check-only runs, not the
    ablation diagnostics of lapis.gpu.ablate_gemm), in the index's order: by name."""
    return [Path(root) / "gemm" / name for name in kind_index(root, "gemm")["timed"]]


def latest(root: Path) -> Path:
    """The current GEMM capture (the index's last timed one); CaptureError when there is none."""
    current = kind_index(root, "gemm")["current"]["timed"]
    if current is None:
        raise CaptureError("no timed GEMM capture", f"{root}/gemm/*/manifest.json",
                           "run `lapis capture gemm --out DIR` on a GPU, or use the captures lapis ships")
    return Path(root) / "gemm" / current


def find(root: Path, shape: str, variant: str | None = None) -> Path:
    """The latest timed capture that measured `variant` (any variant if None) at `shape`. CaptureError listing the
    captured shapes for an unknown shape, or the variants captured at `shape` for an unknown variant."""
    current = kind_index(root, "gemm")["current"]["kernels"].get(variant, {}).get(shape)
    if current is not None:  # the index's current capture of this (variant, shape)
        return Path(root) / "gemm" / current
    shapes, variants = [], []
    for folder in reversed(timed_captures(root)):
        for e, timed in timed_entries(manifest(folder)):
            if e["shape"] == shape and (variant is None or variant in timed):
                return folder
            shapes.append(e["shape"])
            variants += list(timed) if e["shape"] == shape else []
    if shape not in shapes:
        raise CaptureError("shape not in the GEMM captures", shape,
                           "use one of " + ", ".join(sorted(set(shapes), key=lambda x: int(x.split("x")[0]))))
    raise CaptureError("variant not in the GEMM captures at this shape", variant,
                       "use one of " + ", ".join(sorted(set(variants))))


def cases(root: Path) -> list[tuple[Path, str, str]]:
    """(folder, shape, variant) of every timed (variant, shape) over all captures, in capture then run order;
    a case measured again by a later capture is listed once, from the later one."""
    seen: dict = {}
    for folder in timed_captures(root):
        for e, timed in timed_entries(manifest(folder)):
            for v in timed:
                seen.pop((e["shape"], v), None)
                seen[(e["shape"], v)] = folder
    return [(f, shape, v) for (shape, v), f in seen.items()]


def manifest(folder: Path) -> dict:
    """The capture's manifest.json, checked (lapis.captures.readers.read_gemm)."""
    return read_gemm(folder).manifest


def timed_entries(man: dict) -> list[tuple[dict, dict]]:
    """(results entry, {variant: its record}) of each entry holding variants, keeping the variants with a
    plain-build time (the others: not_timed), in run order."""
    return [(e, {n: v for n, v in e["variants"].items() if "median_us" in v.get("plain", {})})
            for e in man["results"] if "variants" in e]


def not_timed(root: Path) -> dict:
    """"gemm/<capture>" -> {reason: count} of the variant entries of each timed capture that hold no plain-build
    time (lapis.captures.readers.read_gemm), for the captures that have any."""
    return not_compared("gemm", timed_captures(root), read_gemm)


def entry(man: dict, shape: str) -> dict:
    """The manifest's results entry for `shape` (MxNxK); CaptureError listing the captured shapes."""
    entries = [e for e, _ in timed_entries(man)]
    for e in entries:
        if e["shape"] == shape:
            return e
    raise CaptureError("shape not in the GEMM capture", shape, "use one of " + ", ".join(e["shape"] for e in entries))


def measured(man: dict, variant: str, shape: str) -> dict:
    """Plain-build time of one variant at one shape, cuBLAS's in the same run, and the SM clocks (MHz)."""
    e = entry(man, shape)
    timed = [n for n, v in e["variants"].items() if "median_us" in v.get("plain", {})]
    if variant not in timed:
        raise CaptureError("variant not timed in the GEMM capture at this shape", variant,
                           "use one of " + ", ".join(timed))
    v = e["variants"][variant]
    m, n, k = (int(x) for x in shape.split("x"))
    plain, cublas = v["plain"], e["cublas"]
    return dict(measured_us=plain["median_us"], spread_pct=plain["spread_pct"], runs=plain["runs"],
                q1_us=plain["q1_us"], q3_us=plain["q3_us"],
                tflops=2.0 * m * n * k / plain["median_us"] / 1e6, sm_clock_mhz=_clock(plain),
                cublas_us=cublas["median_us"], cublas_tflops=2.0 * m * n * k / cublas["median_us"] / 1e6,
                cublas_sm_clock_mhz=_clock(cublas), timeline_overhead_pct=v.get("timeline_overhead_pct"),
                timeline_file=v.get("timeline", {}).get("file"))


def _clock(stats: dict) -> float | None:
    return stats.get("clocks", {}).get("sm_clock_mhz", {}).get("median")


def sm_spans(z) -> dict:
    """SM -> (first record, last record) over its CTAs, ns of %globaltimer, from the every-CTA table."""
    sm, first, last = z["cta_sm"], z["cta_t_first_ns"].astype(np.int64), z["cta_t_last_ns"].astype(np.int64)
    return {int(s): (int(first[sm == s].min()), int(last[sm == s].max())) for s in np.unique(sm)}


def pick_sm(z) -> tuple[int, str]:
    """The SM whose timeline is compared, and why: of the SMs whose every CTA was saved, the one whose CTAs ran
    longest (first record to last). Says which SM ran longest of all, when its records were not saved."""
    spans = sm_spans(z)
    saved_ctas = set(z["ctas"].tolist())
    complete = [s for s in spans if set(np.flatnonzero(z["cta_sm"] == s).tolist()) <= saved_ctas]
    if not complete:
        raise CaptureError("the timeline holds no SM with every CTA saved", "none", "re-capture with bench_gemm")
    length = {s: (hi - lo) / 1e3 for s, (lo, hi) in spans.items()}
    pick = max(complete, key=lambda s: (length[s], -s))
    slowest = max(spans, key=lambda s: (length[s], -s))
    why = (f"SM {pick}: its CTAs ran longest ({length[pick]:.1f} µs) of the SMs saved in full "
           f"({', '.join(map(str, sorted(complete)))})")
    if slowest != pick:
        why += f"; SM {slowest} ran longest of all ({length[slowest]:.1f} µs) but its records were not saved"
    return pick, why


def measured_events(folder: Path, timeline_file: str | None):
    """(events, sm, why) of one SM, times in ns from its first record; None when the file (nor its packed form,
    lapis.captures.store) is not in the capture (bench_gemm names a timeline even when the capture could not
    bring it back)."""
    path = Path(folder) / (timeline_file or "")
    if not timeline_file or not has_timelines(path):
        return None
    with open_timelines(path, folder) as z:
        sm, why = pick_sm(z)
        mine = np.isin(z["ctas"], np.flatnonzero(z["cta_sm"] == sm))
        t0 = sm_spans(z)[sm][0]
        d = decode_timeline(z["records"][mine], z["counts"][mine], [str(r) for r in z["roles"]],
                            [str(o) for o in z["ops"]], t0_ns=t0)
    if d["overflow"]:
        why += f"; {sum(d['overflow'].values())} records overflowed"
    events = [Event(**{**e, "role": str(e["role"]), "op": str(e["op"])}) for e in d["events"]]
    return events, sm, why
