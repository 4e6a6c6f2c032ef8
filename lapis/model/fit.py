"""Fit a hardware profile (lapis/data/profiles/<name>.json) from microbenchmark captures.

`python -m lapis.model.fit --captures DIR --out lapis/data/profiles/h200.json` reads ONLY the capture files
that lapis/data/fit_manifest.json lists for the profile (paths under DIR of the form micro/.../results.json,
written by `lapis capture micro`), never a kernel capture (GEMM, attention): the profile that predicts a kernel
must not be fitted on that kernel's timings. Each profile value gets value, unit, source (capture file and
measurement name) and spread_pct (100 * IQR / median over the timed repeats). A key with no usable measurement
keeps the manifest's datasheet entry. Output is deterministic: sorted keys, values rounded to 4 significant
digits, spreads to 0.01 %, and the SHA-256 of every capture file read.

Unit conversions: latencies measured in clock64 cycles become ns by dividing by the fitted clock_ghz (the
clock under tensor load, cycles per ns); TMA bandwidths are bytes per %globaltimer ns, and 1 B/ns = 1e9 B/s =
1e-3 TB/s.

Where the captures hold campaign version 2's measurements, clock_ghz is the SM clock under wgmma and TMA
together (mix.wgmma_tma, the load a warp-specialized GEMM puts on the SM), else under wgmma alone (always kept as
clock_ghz_tensor_only); l2_tb_s is the bandwidth of a 32 MiB L2-resident tensor that every SM streams through at
its own offsets (tma.l2spread), else of the re-read 4 MiB one, a hot spot (always kept as l2_hotspot_tb_s).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import stat
import sys
from pathlib import Path

import numpy as np

from lapis.data import CAPTURES, FIT_MANIFEST, PROFILES  # noqa: F401 (PROFILES: where --out usually points)
from lapis.errors import CaptureError, shown
from lapis.model import micro_campaign as mc

MANIFEST = FIT_MANIFEST

# key: (measurement, unit, how); how: "rate" (per-clk value), "clock" (cycles / ns), "ns" (cycles -> ns), "cycles"
# (the measurement's cycles per unit as they are)
DIRECT = {
    "clock_ghz": ("wgmma.sustained", "GHz", "clock"),
    "tensor_flop_per_clk_sm": ("wgmma.sustained", "FLOP/clk/SM (dense bf16 wgmma)", "rate"),
    "mufu_ex2_per_clk_sm": ("ex2.rate", "ex2/clk/SM", "rate"),
    "fma_per_clk_sm": ("fma.rate", "FP32 FMA/clk/SM", "rate"),
    "smem_bytes_per_clk_sm": ("smem.read", "B/clk/SM", "rate"),
    "mma_sync_flop_per_clk_sm": ("mma_sync.rate", "FLOP/clk/SM (dense bf16 mma.sync m16n8k16, fp32 accumulate)", "rate"),
    "mbarrier_wake_ns": ("mbarrier.pingpong", "ns", "ns"),
    "named_barrier_ns": ("named_barrier.t256", "ns", "ns"),
    "wgmma_latency_ns": ("wgmma.latency.n256.ss", "ns", "ns"),
    # campaign v5 (kernels/micro_bar_v1.cu): the ping-pong GEMM turn's hand-over per bar.sync form, a bar.sync whose
    # other arrivals are already there, an mbarrier try_wait on a complete phase (384 threads, as the kernels)
    **{f"bar_hop_cycles_{form}": (f"bar.hop.{form}.t384", "cycles", "cycles") for form in ("imm", "pred", "reg")},
    "bar_sync_present_cycles": ("bar.sync_present.t384", "cycles", "cycles"),
    "mbarrier_ready_wait_cycles": ("bar.try_wait.t384", "cycles", "cycles"),
    "globaltimer_read_ns": ("timer.globaltimer", "ns", "ns"),
    "clock64_read_ns": ("timer.clock64", "ns", "ns"),
    # campaign v3: the attention kernels' softmax per 64 x 128 score tile (softmax + O rescale + P pack), one CTA per
    # SM with 1 or 2 consumer warpgroups (micro_softmax_v1.cu)
    **{f"softmax_tiles_per_clk_sm_{f}_wg{w}": (f"softmax.{f}.wg{w}", "score tiles (64 x 128) per clk per SM", "rate")
       for f in mc.SOFTMAX_FLAVOURS for w in (1, 2)},
}
ATTRIBUTES = {  # key: (cudaDeviceProp field, unit)
    "sm_count": ("multiProcessorCount", "SMs"),
    "smem_bytes_per_block": ("sharedMemPerBlockOptin", "B"),
    "registers_per_sm": ("regsPerMultiprocessor", "32-bit registers"),
    "l2_bytes": ("l2CacheSize", "B"),
}
# best TMA bandwidth on every SM: key -> ((measurement prefix, what it reads), ...); the first prefix with a
# measurement in the captures wins
SPREAD = "a 32 MiB L2-resident tensor, every SM at its own offsets: the L2 a kernel streams through"
HOTSPOT = "every SM re-reading the same 4 MiB tensor: an L2 hot spot"
BANDWIDTH = {
    "hbm_tb_s": (("tma.hbm.all.", "a 1 GiB tensor streamed from HBM"),),
    "l2_tb_s": (("tma.l2spread.all.", SPREAD), ("tma.l2.all.", HOTSPOT + ", kept until a tma.l2spread capture")),
    "l2_hotspot_tb_s": (("tma.l2.all.", HOTSPOT),),
    "l2_shared_tb_s": (("tma.l2share.all.", "the 32 MiB tensor with groups of CTAs reading the same box at about "
                        "the same time"),),
}
# mix.wgmma_tma (micro_campaign.MIX_REFERENCE): key -> (unit, value per repeat, what)
MIX = {
    "tensor_flop_per_clk_sm_under_tma": ("FLOP/clk/SM (dense bf16 wgmma)", mc.derive,
                                         "wgmma FLOP per CTA / clock64 cycles while a producer warp streams TMA"),
    "tma_bytes_per_ns_sm_under_wgmma": ("B/ns per SM", mc.mix_tma_bytes_per_ns,
                                        "TMA bytes per %globaltimer ns of the producer warp while 2 warpgroups "
                                        "issue wgmma, median over SMs"),
    "tma_latency_under_wgmma_ns": ("ns", mc.mix_tma_round_trip_ns,
                                   "TMA box issue-to-complete time while 2 warpgroups issue wgmma: depth x box "
                                   "bytes / the producer's bytes per ns (Little's law)"),
}
LATENCY = {"tma_latency_ns": "tma.l2.one.", "tma_latency_hbm_ns": "tma.hbm.one."}  # depth-1 latency intercept


def _round(v: float) -> float:
    return float(f"{v:.4g}")


def _entry(value, unit: str, source: str, spread=None) -> dict:
    if not np.isfinite(value):
        raise CaptureError("a fitted profile value is a finite number", f"{value!r} from {source}",
                           "capture the measurement again")
    e = dict(value=value if isinstance(value, int) else _round(value), unit=unit, source=source)
    if spread is not None:
        e["spread_pct"] = round(float(spread), 2)
    return e


RESULTS_BYTES = 16 << 20  # lapis.captures.safe.LIMITS["json_bytes"] (lapis.model sits below lapis.captures)


def _read_results(path: Path) -> bytes:
    """A results.json's bytes: a regular file of at most RESULTS_BYTES, opened non-blocking (a FIFO never
    blocks the fit); CaptureError naming it otherwise."""
    fix = "fix the manifest's path or pass --captures, the folder its paths are under"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise CaptureError(f"a capture the manifest lists cannot be read ({exc.strerror})", str(path), fix) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > RESULTS_BYTES:
            raise CaptureError(f"a capture the fit reads is a regular file of at most {RESULTS_BYTES} bytes",
                               f"{path}: {'not a regular file' if not stat.S_ISREG(st.st_mode) else st.st_size}",
                               fix)
        return f.read(RESULTS_BYTES + 1)


def load_captures(captures: Path, files: list[str]) -> tuple[dict, dict, dict]:
    """(measurements by name with their file, device attributes with their file, {file: sha256}).

    Only files of the form micro/.../results.json are accepted (CaptureError otherwise); a later file's
    measurement of the same name replaces an earlier one's."""
    by_name, attrs, digests = {}, {}, {}
    for rel in files:
        parts = Path(rel).parts
        if parts[0] != "micro" or parts[-2:] != ("micro", "results.json") or ".." in parts:
            raise CaptureError("the fit reads microbenchmark captures only", repr(rel),
                               "list micro/<capture>/micro/results.json files (never GEMM or attention captures)")
        data = _read_results(captures / rel)
        digests[rel] = "sha256:" + hashlib.sha256(data).hexdigest()
        try:
            res = json.loads(data)
            for m in res["measurements"]:
                if m.get("status") == "ok":
                    by_name[m["name"]] = dict(m, file=rel)
            attrs.update({k: (v, rel) for k, v in res.get("device_attributes", {}).items()})
        except (ValueError, RecursionError, KeyError, TypeError, AttributeError) as exc:
            raise CaptureError("a microbenchmark results.json holds {\"measurements\": [{\"name\", \"status\", ...}], "
                               "\"device_attributes\": {...}}", f"{captures / rel}: {type(exc).__name__}: {exc}",
                               "restore the capture from git (captures are never edited by hand)") from None
    return by_name, attrs, digests


def _intercepts(ms: list[dict]) -> list[float]:
    """Per repeat r, the intercept (ns) of a least-squares line through (box bytes, latency of repeat r)."""
    ys = [mc.derive(m) for m in ms]
    n = min(len(y) for y in ys)
    x = np.array([m["params"]["box_bytes"] for m in ms], float)
    return [float(np.polyfit(x, np.array([y[r] for y in ys]), 1)[1]) for r in range(n)]


def _per_unit(m: dict) -> list[float]:
    """Per repeat, a cycle-count measurement's (micro_campaign kinds "cycles" and "bar") clock64 cycles per unit:
    raw.cycles / params.count. CaptureError naming the measurement unless raw.cycles is a non-empty list of
    positive finite numbers, params.count a positive integer and params.what its description."""
    raw = m.get("raw") if isinstance(m.get("raw"), dict) else {}
    params = m.get("params") if isinstance(m.get("params"), dict) else {}
    cycles, count = raw.get("cycles"), params.get("count")
    if not (isinstance(cycles, list) and cycles and all(_positive(c) for c in cycles)
            and isinstance(count, int) and not isinstance(count, bool) and count > 0
            and isinstance(params.get("what"), str)):
        raise CaptureError(f"{m.get('name')} needs raw.cycles (positive finite clock64 cycles per repeat), "
                           "params.count (units per repeat, a positive integer) and params.what",
                           f"{m.get('file')}: cycles {shown(cycles, 80)}, count {count!r}, what "
                           f"{shown(params.get('what'), 80)}", "restore the capture from git (captures are never "
                           "edited by hand) or capture the measurement again")
    return mc.derive(m)


def _positive(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and bool(np.isfinite(v)) and v > 0


def fit_values(by_name: dict, attrs: dict) -> dict:
    """The measured profile values (key -> entry); keys without a usable measurement are absent."""
    out = {}
    for key, (field, unit) in ATTRIBUTES.items():
        if field in attrs:
            v, rel = attrs[field]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise CaptureError("a device attribute is a whole number > 0 (cudaGetDeviceProperties)",
                                   f"{rel}: device_attributes.{field} = {v!r}",
                                   "restore the capture from git (captures are never edited by hand)")
            out[key] = _entry(v, unit, f"{rel}: device_attributes.{field} (cudaGetDeviceProperties)")
    mix = by_name.get(mc.MIX_REFERENCE)
    clock = mix or by_name.get(DIRECT["clock_ghz"][0])
    clock_ghz = mc.stats(mc.clock_ghz(clock))["median"] if clock else None
    direct = dict(DIRECT, clock_ghz_tensor_only=DIRECT["clock_ghz"])
    if mix:
        direct["clock_ghz"] = (mc.MIX_REFERENCE, "GHz", "clock")
    for key, (name, unit, how) in direct.items():
        m = by_name.get(name)
        if m is None or (how == "ns" and clock_ghz is None):
            continue
        if how == "clock":
            s, note = mc.stats(mc.clock_ghz(m)), "clock64 cycles / %globaltimer ns under dense wgmma on every SM"
            if m["kind"] == "mix":
                note += " while a producer warp per SM streams TMA loads from L2 (the load of a GEMM)"
        elif how == "rate":
            s, note = mc.stats(mc.derive(m)), m["params"]["work"] + " per CTA / clock64 cycles, one CTA per SM"
        elif how == "cycles":
            s, note = mc.stats(_per_unit(m)), m["params"]["what"]
        else:
            s = mc.stats([c / clock_ghz for c in _per_unit(m)])
            note = f"{m['params']['what']} / clock_ghz"
        out[key] = _entry(s["median"], unit, f"{m['file']}: {name} ({note}; median of {s['n']})", s["spread_pct"])
    for key, choices in BANDWIDTH.items():
        cands, what = next(([[m for n, m in by_name.items() if n.startswith(p)], w] for p, w in choices
                            if any(n.startswith(p) for n in by_name)), ([], ""))
        if cands:
            best = max(cands, key=lambda m: mc.stats(mc.derive(m))["median"])
            s = mc.stats([v / 1e3 for v in mc.derive(best)])  # B/ns -> TB/s
            out[key] = _entry(s["median"], "TB/s", f"{best['file']}: {best['name']} (the best of {len(cands)} TMA "
                              f"box/depth settings on every SM; {what}; bytes / %globaltimer ns; median of {s['n']})",
                              s["spread_pct"])
    if mix:
        for key, (unit, values, what) in MIX.items():
            s = mc.stats(values(mix))
            out[key] = _entry(s["median"], unit, f"{mix['file']}: {mix['name']} ({what}; median of {s['n']})",
                              s["spread_pct"])
    # campaign v3: does one warpgroup's softmax overlap another's wgmma on the SM? (mixsm: QK-like wgmma from shared
    # memory; mixsm2: the kernels' QK + PV pair, PV's A from registers)
    for prefix, key, what in (("mixsm", "softmax_wgmma_overlap", "wgmma batches (shared-memory operands)"),
                              ("mixsm2", "softmax_wgmma_pair_overlap", "QK + PV wgmma pairs (PV's A in registers)")):
        for f in mc.MIXSM_FLAVOURS:
            ms = [by_name.get(f"{prefix}.{f}.{part}") for part in mc.MIXSM_PARTS]
            if all(ms):
                s = mc.stats(mc.overlap(*ms))
                out[f"{key}_{f}"] = _entry(
                    s["median"], "fraction (1: full overlap, 0: serialized)",
                    f"{ms[0]['file']}: {prefix}.{f}.tensor/softmax/both ((T_tensor + T_softmax - T_both) / min of the "
                    f"two; {what} on warpgroup 0, softmax tiles on warpgroup 1 of one CTA per SM; median of {s['n']})",
                    s["spread_pct"])
    out.update(contend_values(by_name))
    m = by_name.get("launch.turnover")
    if m:
        gaps = mc.derive(m)
        if not gaps or not all(0 <= g < float("inf") for g in gaps):
            raise CaptureError("launch.turnover needs a gap >= 0 ns in every repeat (an SM that ran two CTAs)",
                               f"{m['file']}: gap_ns {gaps[:4]}", "capture it again with more waves")
        s = mc.stats(gaps)
        out["cta_turnover_ns"] = _entry(s["median"], "ns", f"{m['file']}: launch.turnover ({m['params']['what']}; "
                                        f"kernels/micro_launch_v1.cu, 384 threads, one CTA per SM; median of "
                                        f"{s['n']})", s["spread_pct"])
    for key, prefix in LATENCY.items():
        ms = sorted((m for n, m in by_name.items() if n.startswith(prefix) and n.endswith(".d1")),
                    key=lambda m: m["params"]["box_bytes"])
        if len(ms) >= 2:
            s = mc.stats(_intercepts(ms))
            names = ", ".join(m["name"] for m in ms)
            out[key] = _entry(s["median"], "ns", f"{ms[0]['file']}: {names} (intercept at 0 bytes of the one-box "
                              f"TMA latency on one SM against box bytes; median of {s['n']} repeats)", s["spread_pct"])
    return out


def _cycles(m: dict, side: str) -> list[float]:
    """Cycles per unit of a contend measurement's leader or follower, per repeat. CaptureError for a side with no
    repeats or a rate that is not a positive finite number."""
    try:
        rates = [float(r) for r in (mc.derive(m) if side == "lead" else mc.follower_rate(m))]
    except (TypeError, ValueError, KeyError) as exc:
        rates, why = [], f"{type(exc).__name__}: {exc}"
    else:
        why = f"rates {rates[:4]}"
    if not rates or not all(0 < r < float("inf") for r in rates):
        raise CaptureError("a contend measurement needs positive finite rates on both sides, every repeat",
                           f"{m['name']} ({side}er): {why}", "capture it again (lapis capture micro --only contend)")
    return [1.0 / r for r in rates]


CONTEND_NOTE = ("kernels/micro_mix_softmax_v3.cu: warpgroup 0 leads for a fixed count, warpgroup 1 runs until its "
                "flag, each side's clock64 cycles per unit, one CTA per SM")


def contend_values(by_name: dict) -> dict:
    """Campaign v3 contend (kernels/micro_mix_softmax_v3.cu): cycles per unit of the GEMM pair (QK + PV, waited),
    alone and beside the other warpgroup's pair: wgmma-only states. The softmax states are not profile values:
    `lapis validate micro` predicts them (lapis.model.contend), and the schedules cost softmax from SASS. A state
    measured from both sides takes the mean of the two per repeat."""
    out = {}

    def put(key, what, parts):
        ms = [by_name.get(n) for n, _ in parts]
        if not all(ms):
            return
        per_part = [_cycles(m, side) for m, (_, side) in zip(ms, parts)]
        if len({len(v) for v in per_part}) > 1:
            raise CaptureError("both sides of a contend state need the same repeats", f"{key}: "
                               f"{[len(v) for v in per_part]} repeats", "capture it again")
        s = mc.stats([float(np.mean(v)) for v in zip(*per_part)])
        names = " and ".join(f"{n} ({side}er)" for n, side in parts)
        out[key] = _entry(s["median"], "cycles", f"{ms[0]['file']}: {names} ({what}; {CONTEND_NOTE}; median of "
                          f"{s['n']})", s["spread_pct"])
    f0 = mc.SOFTMAX_FLAVOURS[0]
    put("gemm_pair_cycles", "one warpgroup's QK + PV wgmma pair, waited, alone", [(f"contend.{f0}.t", "lead")])
    put("gemm_pair_cycles_two_wgs", "each of two warpgroups' QK + PV pairs on one tensor pipe",
        [(f"contend.{f0}.tt", "lead"), (f"contend.{f0}.tt", "follow")])
    return out


def fit_profile(name: str, captures: Path, manifest: Path = MANIFEST) -> dict:
    """The profile `name` from the captures its manifest entry lists, datasheet values for the rest."""
    try:
        spec = json.loads(manifest.read_text())
    except (OSError, ValueError) as exc:
        raise CaptureError("the fit manifest cannot be read as JSON", f"{manifest} ({exc})",
                           "pass --manifest lapis/data/fit_manifest.json or a copy of it") from None
    if name not in spec:
        raise CaptureError("no fit recipe for this profile", repr(name), "use one of " + ", ".join(sorted(spec)))
    spec = spec[name]
    missing = [k for k in ("arch", "note", "captures", "datasheet") if k not in spec]
    if missing:
        raise CaptureError("a manifest entry needs arch, note, datasheet and captures", f"{name}: missing {missing}",
                           "copy the entry's form from lapis/data/fit_manifest.json")
    by_name, attrs, digests = load_captures(captures, spec["captures"])
    values = dict(spec["datasheet"])
    values.update(fit_values(by_name, attrs))
    return dict(name=name, arch=spec["arch"], note=spec["note"], fitted_from=digests,
                fit="python -m lapis.model.fit (lapis/model/fit.py, lapis/data/fit_manifest.json)", values=values)


def dumps(profile: dict) -> str:
    return json.dumps(profile, sort_keys=True, indent=1) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lapis.model.fit", description=__doc__.splitlines()[0])
    ap.add_argument("--captures", default=str(CAPTURES), help="captures root the manifest's paths are under")
    ap.add_argument("--out", required=True, help="profile JSON to write, e.g. lapis/data/profiles/h200.json")
    ap.add_argument("--profile", default="h200", help="manifest entry to fit (default h200)")
    ap.add_argument("--manifest", default=str(MANIFEST), help="fit manifest (default lapis/data/fit_manifest.json)")
    a = ap.parse_args(argv)
    try:
        text = dumps(fit_profile(a.profile, Path(a.captures), Path(a.manifest)))
    except CaptureError as exc:
        print(f"lapis fit: {exc}", file=sys.stderr)
        return 2
    try:
        Path(a.out).write_text(text)
    except OSError as exc:
        print(f"lapis fit: --out could not be written ({exc.strerror}): got {a.out}; fix: pass a writable path, "
              "e.g. lapis/data/profiles/h200.json", file=sys.stderr)
        return 2
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
