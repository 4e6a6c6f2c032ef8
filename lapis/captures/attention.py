"""The committed attention captures (lapis.gpu.bench_attention, lapis.gpu.sanitize_attention): rows, timelines.

Folders under <captures>/attention/: a timed run (manifest.json with plain-build medians, timelines.npz), and a
sanitizer run (sanitizer.json). Times: the plain build's CUDA-event median per launch, µs; spread_pct = 100 *
IQR / median; ratio_to_cudnn = cuDNN median / ours in the same run (= our TFLOP/s over cuDNN's; above 1 means
faster than cuDNN). Timelines come from the instrumented build (-DLAPIS_TIMELINE=1, slower by
instrumentation_overhead_pct): offsets and fractions, never total times. timelines.npz keeps the whole record
sequence of the CTAs on SM 0 (and CTAs 0-3), and every CTA's SM and first/last record time (%globaltimer ns);
the shipped captures hold it packed (timelines.packed, lapis.captures.codec), read through lapis.captures.store.
Manifests and sanitizer runs are read by lapis.captures.readers (read_attention, read_sanitizer): schema-checked,
CaptureError naming the file and field.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from lapis.captures.readers import not_compared, read_attention, read_sanitizer
from lapis.captures.store import has_timelines, kind_index, open_timelines
from lapis.captures.timeline import decode_timeline
from lapis.errors import CaptureError
from lapis.pipeline_sim.recorder import Event

KIND = "attention"


def _folders(root: Path, role: str) -> list[Path]:
    """The capture folders of one role ("manifests": every bench run, "timed": those with plain-build medians,
    "sanitizer": sanitizer runs), in the index's order: oldest first by provenance date (folder names do not
    sort by time)."""
    return [Path(root) / KIND / name for name in kind_index(root, KIND)[role]]


def _timed(root: Path) -> list[Path]:
    return _folders(root, "timed")


def has_timed(root: Path) -> bool:
    return bool(_timed(root))


def timed(root: Path) -> Path:
    """The current attention capture (the index's last timed one); CaptureError when there is none."""
    current = kind_index(root, KIND)["current"]["timed"]
    if current is None:
        raise CaptureError("no timed attention capture", f"{root}/{KIND}/*/manifest.json",
                           "run `lapis bench attention --out DIR` on a GPU, or use the captures lapis ships")
    return Path(root) / KIND / current


def _manifest(folder: Path) -> dict:
    return read_attention(folder).manifest


def not_timed(root: Path) -> dict:
    """"attention/<capture>" -> {reason: count} of the variant entries of each timed capture that hold no
    plain-build time (lapis.captures.readers.read_attention), for the captures that have any."""
    return not_compared(KIND, _timed(root), read_attention)


def sanitizer_clean(root: Path) -> dict:
    """variant -> True when memcheck, racecheck and synccheck all reported 0 errors, and the shape it ran at,
    over every sanitizer capture (a later folder wins for a variant it covers); {} without one."""
    out = {}
    for folder in _folders(root, "sanitizer"):
        s = read_sanitizer(folder).manifest["summary"]
        by: dict = defaultdict(list)
        for key, ok in s["clean"].items():
            by[key.split("/")[1]].append(ok)
        out.update({v: dict(clean=all(oks), tools=len(oks), shape=s["shape"], capture=folder.name)
                    for v, oks in by.items()})
    return out


def rows(root: Path) -> list[dict]:
    """One row per timed (variant, shape, causal) over every timed capture (capture order, then run order; a
    variant timed again, causal or not, by a later capture is kept from the later one); TFLOP/s = flops / median."""
    clean, out, seen = sanitizer_clean(root), [], []
    for folder in _timed(root):
        later = {(n, e["causal"]) for e in _manifest(folder)["results"] for n, v in e["variants"].items()
                 if "plain" in v}
        new = _rows(folder, clean)
        seen += new
        out = [r for r in out if (r["variant"], r["causal"]) not in later] + new
    _inherit_timelines(seen)
    return out


def measurements(root: Path) -> list[dict]:
    """Every timed (variant, shape) row of every timed capture, repeats included (capture order, then run
    order): the run-to-run spread of a case measured in two captures comes from here."""
    clean = sanitizer_clean(root)
    return _inherit_timelines([r for folder in _timed(root) for r in _rows(folder, clean)])


def _probe_mhz(plain: dict, where: str) -> float | None:
    """The plain build's clock probe (bench_attention.probe_clock) in MHz, None where the build had none.
    CaptureError for a probe that is not a plausible SM clock (100-3000 MHz)."""
    probe = plain.get("clock_probe")
    if probe is None:
        return None
    mhz = probe.get("mhz") if isinstance(probe, dict) else probe
    if isinstance(mhz, bool) or not isinstance(mhz, (int, float)) or not 100 <= mhz <= 3000:
        raise CaptureError("a clock probe reads an SM clock between 100 and 3000 MHz", f"{where}: {probe!r}",
                           "restore the capture from git")
    return float(mhz)


def _inherit_timelines(rows: list[dict]) -> list[dict]:
    """A capture that kept no timelines.npz (too large to bring back; its instrumented build unchanged) takes
    each case's timeline from the latest earlier capture that has it at the same kernel parameters:
    timeline_capture names where it is."""
    last = {}
    for r in rows:  # capture order
        case = (r["variant"], r["shape"], r["causal"], json.dumps(r["params"], sort_keys=True))
        if r["timeline_capture"]:
            last[case] = (r["timeline_key"], r["timeline_capture"])
        elif case in last:
            r["timeline_key"], r["timeline_capture"] = last[case]
    return rows


def _rows(folder: Path, clean: dict) -> list[dict]:
    man, out, has_tl = _manifest(folder), [], has_timelines(folder / "timelines.npz")
    for e in man["results"]:
        for name, v in e["variants"].items():
            if "plain" not in v:  # counted by not_timed
                continue
            cudnn = e["sdpa"].get("cudnn", {}).get("median_us")
            out.append(dict(
                variant=name, schedule=v["schedule"], params=v["params"], shape=e["shape"], causal=e["causal"],
                median_us=v["plain"]["median_us"], tflops=e["flops"] / v["plain"]["median_us"] / 1e6,
                q1_tflops=e["flops"] / v["plain"]["q1_us"] / 1e6, q3_tflops=e["flops"] / v["plain"]["q3_us"] / 1e6,
                spread_pct=v["plain"]["spread_pct"], cudnn_tflops=None if cudnn is None else e["flops"] / cudnn / 1e6,
                ratio_to_cudnn=v["ratio_to_cudnn"],
                rel_err={k: e["rel_err"][f"{name}/plain/{k}"] for k in ("normal", "heavy")},
                sanitizer_clean=clean.get(f"{name}:causal" if e["causal"] else name, {}).get("clean"),
                instrumentation_overhead_pct=v["instrumentation_overhead_pct"],
                sm_clock_mhz=v["plain"].get("clocks", {}).get("sm_clock_mhz", {}).get("median"),
                clock_probe_mhz=_probe_mhz(v["plain"], f"{folder.name}: {name} at {e['shape']}"),
                timeline_key=v.get("timeline_summary", {}).get("key") if has_tl else None,
                timeline_capture=f"{KIND}/{folder.name}" if has_tl and "timeline_summary" in v else None,
                capture=f"{KIND}/{folder.name}"))
    return out


def timeline(root: Path, key: str, capture: str | None = None) -> dict:
    """The arrays of one timeline, without the '<key>/' prefix, from `capture` (a row's "attention/<name>"; by
    default the last timed capture): its timelines.npz, or the packed form of it (lapis.captures.store)."""
    folder = Path(root) / capture if capture else timed(root)
    with open_timelines(folder / "timelines.npz", folder) as z:
        got = {k.split("/", 1)[1]: z[k] for k in z.files if k.startswith(key + "/")}
    if not got:
        raise CaptureError("no such timeline in the attention capture", key, "use a row's timeline_key")
    return got


def concurrency(z: dict) -> dict:
    """CTAs resident at once on each SM, from every CTA's first and last record: {max_per_sm: {max: SMs},
    mean (time-averaged over each SM's busy span, median over SMs)}."""
    sm, t0, t1 = z["cta_sm"], z["cta_t_first_ns"].astype(np.int64), z["cta_t_last_ns"].astype(np.int64)
    peaks, means = [], []
    for s in np.unique(sm):
        a, b = t0[sm == s], t1[sm == s]
        edges = sorted([(t, 1) for t in a] + [(t, -1) for t in b], key=lambda x: (x[0], x[1]))
        live = np.cumsum([d for _, d in edges])
        peaks.append(int(live.max()))
        means.append(float((b - a).sum() / (b.max() - a.min())))
    values, counts = np.unique(peaks, return_counts=True)
    return dict(max_per_sm={int(v): int(c) for v, c in zip(values, counts)}, mean=float(np.median(means)))


def sm_events(z: dict, sm: int, roles, ops) -> list:
    """recorder.Event list of every saved CTA that ran on `sm`, ns from its first record. CaptureError when some
    CTA of that SM was not saved."""
    on_sm = np.flatnonzero(z["cta_sm"] == sm)
    if not set(on_sm.tolist()) <= set(z["ctas"].tolist()):
        raise CaptureError("the timeline did not save every CTA of this SM", f"SM {sm}", "use SM 0")
    mine = np.isin(z["ctas"], on_sm)
    d = decode_timeline(z["records"][mine], z["counts"][mine], list(roles), list(ops),
                        t0_ns=int(z["cta_t_first_ns"][on_sm].min()))
    return [Event(**{**e, "role": str(e["role"]), "op": str(e["op"])}) for e in d["events"]]


def role_breakdown(events, first_k: int = 0) -> dict:
    """role -> {op: fraction of the role's recorded time}, over events with k_index >= first_k (first_k = 0
    keeps Q and epilogue out too: they carry k_index -1)."""
    total, by = defaultdict(float), defaultdict(lambda: defaultdict(float))
    for e in events:
        if e.k_index >= first_k:
            total[e.role] += e.end_ns - e.start_ns
            by[e.role][e.op] += e.end_ns - e.start_ns
    return {r: {op: t / total[r] for op, t in sorted(ops.items(), key=lambda x: -x[1])} for r, ops in by.items()}


def iteration_ns(events, first_k: int = 2) -> dict:
    """Median ns per op per K/V tile of the consumer role(s), over tiles k >= first_k (past the ring's fill); a
    tile is one K/V index of one work item of one CTA (a simulated SM runs many work items in one CTA)."""
    per: dict = defaultdict(lambda: defaultdict(float))
    for e in events:
        if e.k_index >= first_k and not e.role.startswith("producer"):
            per[e.op][(e.cta, e.work_item, e.k_index)] += e.end_ns - e.start_ns  # s8: many items per CTA
    return {op: float(np.median(list(v.values()))) for op, v in per.items()}
