"""One reader per capture kind: the manifest checked against the kind's schema, its arrays read within limits.

Every reader goes through lapis.captures.safe (regular files only, links kept inside the capture folder, the
byte and shape LIMITS, schemas), and raises CaptureError naming the file and the field or array for anything
it cannot read. Each returns a Capture; `not_compared` counts, by reason, the entries the capture itself marks
as not measured (a timed-out or faulted run, a pattern without a measurement), which its validator reports.
The schemas list the fields the validators read, with their types; other fields are allowed. A capture none of
whose entries can be compared (or that holds none) is a CaptureError, except attention and gemm runs: a run
that timed nothing is a check-only run, which the index does not list as timed.

    kind             file(s) read                              entries     not compared
    tma              manifest.json, dumps.npz                  configs     status "timeout"
    tma_encode       manifest.json                             cases       -
    wgmma            manifest.json, inputs.npz, d.npz          cases       status other than "ok"
    bank             manifest.json                             patterns    no "measured" wavefronts
    cutlass_oracle   manifest.json                             layouts     -
    micro            micro/results.json                        measurements  status other than "ok"
    attention        manifest.json                             variants    no plain-build time, in a timed run
    sanitizer        sanitizer.json (attention folders)        tool runs   -
    gemm             manifest.json                             variants    no plain-build time, in a timed run
    ncu              manifest.json                             kernels     profile failed ("error")
    race             manifest.json                             kernels     skipped at a shape (its reason)

The profile fit (lapis.model.fit) reads micro/results.json itself: lapis.model lies below lapis.captures in the
layers (.importlinter), so it cannot import read_micro.

Timelines (attention's timelines.packed, gemm's timelines/*.packed, or the .npz they stand for) are opened by
lapis.captures.store.open_timelines, which reads them as safe.Npz or codec.Packed.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from lapis.captures.safe import (
    ANY,
    BOOL,
    DICT,
    FIX,
    INT,
    LIMITS,
    NUM,
    POS,
    PROVENANCE,
    STR,
    Map,
    Npz,
    One,
    a_capture,
    check,
    comparable,
    read_json,
)
from lapis.errors import CaptureError
from lapis.layouts.bank_conflicts import KINDS as BANK_KINDS
from lapis.layouts.canonical import MAJORS, ORDERS, SMEM_SWIZZLES
from lapis.layouts.swizzle import SWIZZLES
from lapis.layouts.tma.types import INTERLEAVE_CODES, L2_CODES, OOB_CODES, SWIZZLE_CODES, TMA_TYPE_BY_CODE


@dataclass
class Capture:
    """What a reader gives: the capture folder, the manifest file it read and its checked JSON, its arrays (tma:
    name -> np.ndarray; wgmma: {"inputs", "d"} -> safe.Npz, each array decoded when asked for; {} for the other
    kinds), and the count of entries not compared, by reason."""

    kind: str
    folder: Path
    file: Path
    manifest: dict
    arrays: dict = field(default_factory=dict)
    not_compared: dict = field(default_factory=dict)


def _error(kind: str, file, where: str, rule: str, value) -> CaptureError:
    return CaptureError(f"{a_capture(kind)}'s {rule}", f"{file}: {where}: {value}", FIX)


def _manifest(kind: str, folder, schema, name: str = "manifest.json") -> tuple[Path, dict]:
    folder = Path(folder)
    path = folder / name
    return path, read_json(path, folder, schema, kind)


def _shown(allowed) -> str:
    if isinstance(allowed, range):
        return f"{allowed.start}..{allowed.stop - 1}"
    return ", ".join(map(repr, allowed))


def _enums(kind: str, file, where: str, entry: dict, allowed: dict) -> None:
    """CaptureError naming the field, its value and the allowed values or range when a field of `entry`
    (field -> allowed values or range; a list field's every item is checked) holds a value outside them: a
    capture holds only codes the hardware or driver took, so such a value is a damaged capture, not a model
    disagreement."""
    for name, ok in allowed.items():
        values = entry[name] if isinstance(entry[name], list) else [entry[name]]
        for j, v in enumerate(values):
            if isinstance(v, bool) or v not in ok:
                at = f"{where}.{name}" + (f"[{j}]" if isinstance(entry[name], list) else "")
                raise CaptureError(f"{a_capture(kind)}'s field {at} is one of the values the hardware takes",
                                   f"{file}: {at} = {v!r} (allowed: {_shown(ok)})", FIX)


def _count(entries, reason) -> dict:
    out: dict = {}
    for e in entries:
        why = reason(e)
        if why:
            out[why] = out.get(why, 0) + 1
    return out


# ---------------------------------------------------------------- tma

TMA_RUN = {"key": STR, "sentinel": INT, "digit": INT}
TMA_STATUSES = ("ok", "fault", "encode_rejected", "timeout")
TMA_CONFIG = {"id": INT, "dtype": INT, "rank": INT, "dims": [INT], "strides": [INT], "box": [INT],
              "elem_strides": [INT], "interleave": INT, "swizzle": INT, "l2": INT, "oob": INT, "coords": [[INT]],
              "dst_offsets": [INT], "region_bytes": INT, "values?": [INT],
              "result": {"status": One(*TMA_STATUSES), "runs?": [TMA_RUN], "region_addr?": INT,
                         "dst_addrs?": [INT]}}
TMA = {"provenance": PROVENANCE, "configs": [TMA_CONFIG]}
TMA_ELEMENT_BYTES = 16  # the widest element a tensor map holds (bytes), to bound a configuration's source image
# the codes and ranges cuTensorMapEncodeTiled accepts (cuda.h 13.0): a loaded configuration or accepted case holds
# only these
TMA_ENUMS = {"dtype": sorted(TMA_TYPE_BY_CODE), "swizzle": sorted(SWIZZLE_CODES.values()),
             "interleave": sorted(INTERLEAVE_CODES.values()), "l2": sorted(L2_CODES.values()),
             "oob": sorted(OOB_CODES.values()), "rank": range(1, 6), "dims": range(1, (1 << 32) + 1),
             "box": range(1, 257), "elem_strides": range(1, 9)}


def _tma_config(file, i: int, c: dict, dumps) -> None:
    """A loaded (not encode-rejected) configuration's sizes and dumps fit: rank 1-5 with as many dims, box,
    elem_strides and coordinates, region, source image (bytes) and its boxes (elements, all boxes together) at
    most LIMITS["array_bytes"], one destination per box, and each completed run's dump in dumps.npz."""
    where = f"configs[{i}] (id {c['id']})"
    rank, res = c["rank"], c["result"]
    if res["status"] == "encode_rejected":  # its arguments may be anything the driver refuses: the encode rules
        return                              # replay them as they are
    _enums("tma", file, where, c, TMA_ENUMS)
    if not (1 <= rank <= 5 and all(len(c[k]) == rank for k in ("dims", "box", "elem_strides"))
            and len(c["strides"]) == rank - 1 and all(len(x) == rank for x in c["coords"])
            and len(c["coords"]) == len(c["dst_offsets"])):
        raise _error("tma", file, where, "rank, dims, strides, box, elem_strides, coords and dst_offsets agree",
                     f"rank {rank!r}")
    limit = LIMITS["array_bytes"]
    image = (c["strides"][-1] * c["dims"][-1]) if rank > 1 else c["dims"][0] * TMA_ELEMENT_BYTES
    boxes = math.prod(max(b, 0) for b in c["box"]) * len(c["coords"])
    if not (0 < c["region_bytes"] <= limit and 0 <= image <= limit and 0 <= boxes <= limit) \
            or any(d < 0 for d in c["dims"]):
        raise _error("tma", file, where, f"region, source image and boxes hold at most {limit} bytes (elements)",
                     f"region_bytes {c['region_bytes']}, image {image} bytes, boxes {boxes} elements")
    if res["status"] in ("ok", "timeout"):
        missing = [k for k in ("runs", "region_addr", "dst_addrs") if k not in res]
        if missing or len(res["dst_addrs"]) != len(c["coords"]):
            raise _error("tma", file, f"{where}.result", "completed or timed-out load records runs, region_addr "
                         "and one dst_addr per box", f"missing {missing}" if missing else "dst_addrs")
    if res["status"] != "ok":
        return
    if not res["runs"]:
        raise _error("tma", file, f"{where}.result.runs", "completed load records at least one run", "[]")
    for run in res["runs"]:
        if run["key"] not in dumps:
            raise _error("tma", file, f"{where}.result.runs", "run's dump is in dumps.npz",
                         f"{run['key']!r} is not in {Path(file).parent / 'dumps.npz'}")


def read_tma(folder) -> Capture:
    """A TMA placement capture: manifest.json (schema TMA) and every array of dumps.npz, each completed run's
    dump a 1-D uint8 array of the configuration's region_bytes. Timed-out configurations (status "timeout") are
    counted in not_compared; CaptureError when every configuration timed out (or there is none)."""
    file, man = _manifest("tma", folder, TMA)
    with Npz(Path(folder) / "dumps.npz", folder) as z:
        for i, c in enumerate(man["configs"]):
            _tma_config(file, i, c, z)
        dumps = {k: z[k] for k in z.files}
    for i, c in enumerate(man["configs"]):
        for run in c["result"].get("runs", []) if c["result"]["status"] == "ok" else []:
            d = dumps[run["key"]]
            if d.dtype != "uint8" or d.shape != (c["region_bytes"],):
                raise _error("tma", Path(folder) / "dumps.npz", f"array {run['key']!r}",
                             f"dump is uint8 bytes of the region (configs[{i}].region_bytes = {c['region_bytes']})",
                             f"{d.dtype} {d.shape}")
    skipped = _count(man["configs"], lambda c: "timeout" if c["result"]["status"] == "timeout" else None)
    comparable(file, "tma", len(man["configs"]), skipped)
    return Capture("tma", Path(folder), file, man, dumps, skipped)


# ---------------------------------------------------------------- tma_encode

ENCODE_CASE = {"id": INT, "dtype": INT, "rank": INT, "addr_offset": INT, "dims": [INT], "strides": [INT],
               "box": [INT], "elem_strides": [INT], "interleave": INT, "swizzle": INT, "l2": INT, "oob": INT,
               "map_offset?": INT, "null_address?": BOOL, "result": {"accepted": BOOL}}
TMA_ENCODE = {"provenance": PROVENANCE, "cases": [ENCODE_CASE]}


def read_tma_encode(folder) -> Capture:
    """A cuTensorMapEncodeTiled decision capture: manifest.json (schema TMA_ENCODE), at least one case; an
    accepted case holds only codes and sizes the driver takes (TMA_ENUMS)."""
    file, man = _manifest("tma_encode", folder, TMA_ENCODE)
    for i, c in enumerate(man["cases"]):
        if c["result"]["accepted"]:  # a refused case may hold anything: the driver's refusal is what it measured
            _enums("tma_encode", file, f"cases[{i}] (id {c['id']})", c, TMA_ENUMS)
    comparable(file, "tma_encode", len(man["cases"]), {})
    return Capture("tma_encode", Path(folder), file, man)


# ---------------------------------------------------------------- wgmma

WGMMA_CASE = {"id": INT, "dtype": STR, "n": INT, "ta": INT, "tb": INT, "steps": INT, "test": STR, "major": STR,
              "swizzle": STR, "test_base": INT, "shift": INT, "corrupt": ANY, "tag": STR,
              "desc_a": [INT], "desc_b": [INT],
              "result": {"status": STR, "region_addr?": INT, "smem_changed_bytes?": INT}}
WGMMA = {"provenance": PROVENANCE, "cases": [WGMMA_CASE]}
WGMMA_ENUMS = {"dtype": ("bf16", "f16", "tf32", "e4m3"), "n": range(8, 257, 8), "ta": (0, 1), "tb": (0, 1),
               "test": ("A", "B"), "major": MAJORS, "swizzle": tuple(SWIZZLES)}  # PTX ISA 9.7.15.5 (wgmma)


def read_wgmma(folder) -> Capture:
    """A wgmma capture: manifest.json (schema WGMMA), and inputs.npz (img<id>) and d.npz (d<id>) as safe.Npz
    (arrays {"inputs", "d"}, each array decoded when asked for). Completed cases (status "ok"; the others are
    counted by status in not_compared) need the values of WGMMA_ENUMS, region_addr, one descriptor pair per
    K-step and both arrays;
    CaptureError when no case completed."""
    folder = Path(folder)
    file, man = _manifest("wgmma", folder, WGMMA)
    cases = man["cases"]
    skipped = _count(cases, lambda c: None if c["result"]["status"] == "ok" else c["result"]["status"])
    comparable(file, "wgmma", len(cases), skipped)
    imgs, ds = Npz(folder / "inputs.npz", folder), Npz(folder / "d.npz", folder)
    for i, c in enumerate(cases):
        if c["result"]["status"] != "ok":
            continue
        where = f"cases[{i}] (id {c['id']})"
        _enums("wgmma", file, where, c, WGMMA_ENUMS)
        if "region_addr" not in c["result"] or not (len(c["desc_a"]) == len(c["desc_b"]) == c["steps"] >= 1):
            raise _error("wgmma", file, where, "completed case records region_addr and one descriptor pair per "
                         "K-step", f"steps {c['steps']}, {len(c['desc_a'])} desc_a, {len(c['desc_b'])} desc_b")
        for z, key in ((imgs, f"img{c['id']}"), (ds, f"d{c['id']}")):
            if key not in z:
                raise _error("wgmma", file, where, "completed case has its arrays", f"{key!r} is not in {z.path}")
    return Capture("wgmma", folder, file, man, {"inputs": imgs, "d": ds}, skipped)


# ---------------------------------------------------------------- bank

BANK_PATTERN = {"id": INT, "kernel": STR, "name": STR, "offsets": [INT], "measured?": {"wavefronts": NUM}}
BANK = {"provenance": PROVENANCE, "patterns": [BANK_PATTERN]}


def read_bank(folder) -> Capture:
    """A bank-conflict capture (Nsight Compute): manifest.json (schema BANK), each pattern a known access kind
    (lapis.layouts.bank_conflicts.KINDS) with offsets >= 0; a pattern without measured
    wavefronts is counted in not_compared ("not measured"); CaptureError when none was measured."""
    file, man = _manifest("bank", folder, BANK)
    for i, p in enumerate(man["patterns"]):
        _enums("bank", file, f"patterns[{i}] (id {p['id']})", p, {"kernel": tuple(BANK_KINDS)})
        if any(o < 0 for o in p["offsets"]):
            raise _error("bank", file, f"patterns[{i}].offsets", "lane offsets are shared-memory byte offsets (>= 0)",
                         min(p["offsets"]))
    skipped = _count(man["patterns"], lambda p: None if "measured" in p else "not measured")
    comparable(file, "bank", len(man["patterns"]), skipped)
    return Capture("bank", Path(folder), file, man, not_compared=skipped)


# ---------------------------------------------------------------- cutlass_oracle

ORACLE_LAYOUT = {"major": STR, "swizzle": STR, "dtype": STR, "order": STR, "mn": INT, "k": INT, "steps": INT,
                 "sm90?": [INT], "sm100": [INT]}
CUTLASS_ORACLE = {"provenance": PROVENANCE, "smem_base": INT, "layouts": [ORACLE_LAYOUT]}
ORACLE_ENUMS = {"major": MAJORS, "swizzle": tuple(SMEM_SWIZZLES.values()), "dtype": ("bf16", "f16", "tf32", "e4m3"),
                "order": ORDERS, "mn": range(1, 1 << 16), "k": range(1, 1 << 16)}


def read_cutlass_oracle(folder) -> Capture:
    """A CUTLASS descriptor oracle capture: manifest.json (schema CUTLASS_ORACLE); every layout holds one sm100
    (and, where present, sm90) descriptor per K-step; CaptureError when it holds no layout."""
    file, man = _manifest("cutlass_oracle", folder, CUTLASS_ORACLE)
    for i, lay in enumerate(man["layouts"]):
        _enums("cutlass_oracle", file, f"layouts[{i}]", lay, ORACLE_ENUMS)
        if not (0 <= lay["steps"] <= len(lay["sm100"]) and len(lay.get("sm90", lay["sm100"])) >= lay["steps"]):
            raise _error("cutlass_oracle", file, f"layouts[{i}]", "layout holds a descriptor per K-step",
                         f"steps {lay['steps']}, {len(lay['sm100'])} sm100, {len(lay.get('sm90', []))} sm90")
    comparable(file, "cutlass_oracle", len(man["layouts"]), {})
    return Capture("cutlass_oracle", Path(folder), file, man)


# ---------------------------------------------------------------- micro (the profile fit)

MICRO_MEASUREMENT = {"name": STR, "status": STR, "kind?": STR, "params?": DICT, "raw?": Map([NUM])}
MICRO = {"measurements": [MICRO_MEASUREMENT], "device_attributes?": Map(NUM)}


def read_micro(root, rel: str) -> Capture:
    """A microbenchmark capture's results file, `rel` (micro/<capture>/micro/results.json) under the captures
    root: schema MICRO; a completed measurement (status "ok") needs kind, params and raw; the others are
    counted by status in not_compared; CaptureError when none completed."""
    folder = Path(root) / Path(rel).parts[0] / Path(rel).parts[1]
    file, man = _manifest("micro", folder, MICRO, str(Path(*Path(rel).parts[2:])))
    ms = man["measurements"]
    skipped = _count(ms, lambda m: None if m["status"] == "ok" else m["status"])
    for i, m in enumerate(ms):
        if m["status"] == "ok" and not all(k in m for k in ("kind", "params", "raw")):
            raise _error("micro", file, f"measurements[{i}] ({m['name']})", "completed measurement records kind, "
                         "params and raw", f"keys {sorted(m)}")
    comparable(file, "micro", len(ms), skipped)
    return Capture("micro", folder, file, man, not_compared=skipped)


# ---------------------------------------------------------------- attention

SHAPE = STR
CLOCKS = {"sm_clock_mhz?": {"median?": NUM}}
PLAIN = {"median_us": POS, "q1_us": POS, "q3_us": POS, "spread_pct": NUM, "clocks?": CLOCKS, "clock_probe?": ANY}
ATTENTION_VARIANT = {"schedule": STR, "params": DICT, "plain?": PLAIN, "ratio_to_cudnn?": NUM,
                     "instrumentation_overhead_pct?": NUM, "timeline_summary?": {"key": STR}}
ATTENTION_RESULT = {"shape": SHAPE, "causal": BOOL, "flops": POS, "sdpa": {"cudnn?": {"median_us?": POS}},
                    "rel_err?": Map(NUM), "variants": Map(ATTENTION_VARIANT)}
ATTENTION = {"provenance": PROVENANCE, "results": [ATTENTION_RESULT]}
SANITIZER = {"provenance": PROVENANCE, "summary": {"shape": SHAPE, "clean": Map(BOOL)}}


def read_attention(folder) -> Capture:
    """An attention bench run: manifest.json (schema ATTENTION), each result's shape BxHxLxD. A timed variant (one with a plain build) also
    records ratio_to_cudnn, instrumentation_overhead_pct and rel_err <variant>/plain/{normal,heavy}. In a run
    that timed some variant, the variants without a plain-build time are counted in not_compared ("no
    plain-build time"); a run that timed none is a check-only run (it holds no variants) or one that stopped,
    which the index does not list as timed."""
    file, man = _manifest("attention", folder, ATTENTION)
    for i, e in enumerate(man["results"]):
        if not _dims(e["shape"], 4):
            raise _error("attention", file, f"results[{i}].shape", "shape is BxHxLxD (positive integers)",
                         repr(e["shape"]))
        for name, v in e["variants"].items():
            if "plain" not in v:
                continue
            missing = [k for k in ("ratio_to_cudnn", "instrumentation_overhead_pct") if k not in v]
            missing += [f"rel_err.{name}/plain/{k}" for k in ("normal", "heavy")
                        if f"{name}/plain/{k}" not in e.get("rel_err", {})]
            if missing:
                raise _error("attention", file, f"results[{i}].variants.{name}", "timed variant records its "
                             "ratio to cuDNN, instrumentation overhead and errors", f"missing {missing}")
    variants = [v for e in man["results"] for v in e["variants"].values()]
    skipped = _untimed(variants, lambda v: "plain" in v)
    return Capture("attention", Path(folder), file, man, not_compared=skipped)


def _untimed(variants: list, timed) -> dict:
    """{"no plain-build time": n} for the variants of a run that timed some variant, {} otherwise."""
    n = sum(not timed(v) for v in variants)
    return {"no plain-build time": n} if n and n < len(variants) else {}


def read_sanitizer(folder) -> Capture:
    """An attention sanitizer run: sanitizer.json (schema SANITIZER), every summary.clean key "<tool>/<variant>"
    (variant optionally ":causal"); CaptureError when it holds none."""
    file, man = _manifest("sanitizer", folder, SANITIZER, "sanitizer.json")
    clean = man["summary"]["clean"]
    bad = [k for k in clean if len(k.split("/")) != 2 or not all(k.split("/"))]
    if bad:
        raise _error("sanitizer", file, "summary.clean", "sanitizer key is <tool>/<variant>", repr(bad[0]))
    comparable(file, "sanitizer", len(clean), {})
    return Capture("sanitizer", Path(folder), file, man)


# ---------------------------------------------------------------- gemm

GEMM_PLAIN = dict(PLAIN, runs=INT)
GEMM_VARIANT = {"plain?": {"median_us?": POS}, "timeline?": {"file?": STR}, "timeline_overhead_pct?": NUM}
GEMM_CUBLAS = {"median_us": POS, "clocks?": CLOCKS}
GEMM_RESULT = {"shape?": SHAPE, "variants?": Map(GEMM_VARIANT), "cublas?": DICT}
GEMM = {"provenance": PROVENANCE, "results": [GEMM_RESULT], "schedule?": STR, "kernel?": STR,
        "variants?": Map(DICT)}


def _dims(shape: str, n: int) -> bool:
    """Whether `shape` is n positive integers below 2^20 joined by x (MxNxK, BxHxLxD)."""
    parts = shape.split("x")
    return len(parts) == n and all(p.isdigit() and p.isascii() and 0 < int(p) < 1 << 20 for p in parts)


def _gemm_shape(shape: str) -> bool:
    return _dims(shape, 3)


def _gemm_timed(v: dict) -> bool:
    return "median_us" in v.get("plain", {})


def read_gemm(folder) -> Capture:
    """A GEMM bench run (a timed run, a check-only run or an ablation): manifest.json (schema GEMM). A results
    entry holding variants needs an MxNxK shape; a timed variant (a plain-build median) its plain-build
    statistics (GEMM_PLAIN), its entry cuBLAS's time (GEMM_CUBLAS), and the manifest the run's schedule, kernel and the
    variant's parameters. In a run that timed some variant, the variants without a plain-build time are counted
    in not_compared ("no plain-build time")."""
    file, man = _manifest("gemm", folder, GEMM)
    params = man.get("variants", {})
    for i, e in enumerate(man["results"]):
        if "variants" not in e:
            continue
        if "shape" not in e or not _gemm_shape(e["shape"]):
            raise _error("gemm", file, f"results[{i}].shape", "shape is MxNxK (positive integers)",
                         repr(e.get("shape")))
        timed = [n for n, v in e["variants"].items() if _gemm_timed(v)]
        for n in timed:
            check(e["variants"][n]["plain"], GEMM_PLAIN, file, "gemm", f"results[{i}].variants.{n}.plain")
        if timed and "cublas" in e:
            check(e["cublas"], GEMM_CUBLAS, file, "gemm", f"results[{i}].cublas")
        missing = (["cublas"] if timed and "cublas" not in e else []) + \
            [k for k in ("schedule", "kernel") if timed and k not in man] + \
            [f"variants.{n}" for n in timed if n not in params]
        if missing:
            raise _error("gemm", file, f"results[{i}]", "timed run records cuBLAS's time, its schedule, kernel "
                         "and variants' parameters", f"missing {missing}")
    variants = [v for e in man["results"] for v in e.get("variants", {}).values()]
    return Capture("gemm", Path(folder), file, man, not_compared=_untimed(variants, _gemm_timed))


# ---------------------------------------------------------------- ncu (per-unit counters)

NCU_METRIC = {"value": ANY, "unit": STR}
NCU_KERNEL = {"error?": STR, "demangled?": STR, "metrics?": Map(NCU_METRIC)}
NCU = {"provenance": PROVENANCE, "schema": STR, "shape": SHAPE, "gemm_size": INT, "kernels": Map(NCU_KERNEL)}


NCU_REQUIRED = ("sm__cycles_elapsed.avg", "sm__cycles_elapsed.avg.per_second", "dram__bytes_read.sum",
                "dram__bytes_write.sum")


def read_ncu(folder) -> Capture:
    """A per-unit Nsight Compute capture (lapis.gpu.ncu_units): manifest.json (schema NCU), its attention shape
    BxHxLxD and GEMM size positive; every profiled kernel holding NCU_REQUIRED; every metric value a
    finite number; a kernel whose profile failed ("error") is counted in not_compared; CaptureError when none
    was profiled."""
    file, man = _manifest("ncu", folder, NCU)
    if not _dims(man["shape"], 4) or not 0 < man["gemm_size"] < 1 << 20:
        raise _error("ncu", file, "shape, gemm_size", "attention shape is BxHxLxD and GEMM size M=N=K, positive "
                     "integers", f"{man['shape']!r}, {man['gemm_size']!r}")
    for k, e in man["kernels"].items():
        if "error" not in e:  # a profiled kernel carries the metrics lapis.validate.units reads
            have = e.get("metrics") if isinstance(e.get("metrics"), dict) else {}
            lacking = [m for m in NCU_REQUIRED if not isinstance(have.get(m), dict) or "value" not in have[m]]
            if lacking:
                raise _error("ncu", file, f"kernels.{k}.metrics", "a profiled kernel holds "
                             + ", ".join(NCU_REQUIRED), f"missing {', '.join(lacking)}")
        for m, v in e.get("metrics", {}).items():
            if not (isinstance(v["value"], (int, float)) and not isinstance(v["value"], bool)
                    and math.isfinite(v["value"])):
                raise _error("ncu", file, f"kernels.{k}.metrics.{m}.value", "metric value is a finite number",
                             repr(v["value"]))
            if m in NCU_REQUIRED and (v["value"] < 0 or v["value"] == 0 and m.startswith("sm__cycles")):
                raise _error("ncu", file, f"kernels.{k}.metrics.{m}.value", "byte counts are >= 0 and the "
                             "cycles and clock of a profiled kernel > 0", repr(v["value"]))
    skipped = _count(man["kernels"].values(), lambda e: "profile failed" if "error" in e else None)
    comparable(file, "ncu", len(man["kernels"]), skipped)
    return Capture("ncu", Path(folder), file, man, not_compared=skipped)


# ---------------------------------------------------------------- race (same-process timings, lapis.gpu.race)

# mhz_median and source are absent where a kernel had only the post-batch probe (no probe of its own, no sample);
# source is lapis.gpu.protocol's: the kernel's own probe, else nvidia-smi's samples
RACE_CLOCK = {"mhz_median?": POS, "source?": One("probe", "sampled"), "sampled_mhz_median?": POS,
              "post_mhz_median?": POS, "post_mhz?": [POS], "bracket_mhz_median?": POS, "bracket_mhz?": [POS],
              "busy?": [POS]}
RACE_KERNEL = {"median_us": POS, "spread_pct": NUM, "clock?": RACE_CLOCK, "speedup_to_reference?": DICT}
RACE_RESULT = {"shape": SHAPE, "causal": BOOL, "flops": POS, "kernels?": Map(RACE_KERNEL), "skipped?": Map(STR)}
RACE = {"provenance": PROVENANCE, "results": [RACE_RESULT]}


def _post_probe(file, where: str, k: dict) -> None:
    """A race kernel's post-batch probe (lapis.gpu.protocol.summary): post_mhz holds one reading per round at most
    (round_median_us's length) and at least one, and post_mhz_median, recorded with them, is their median;
    CaptureError naming the field otherwise."""
    c, rounds = k.get("clock") or {}, k.get("round_median_us")
    post = c.get("post_mhz")
    if ("post_mhz_median" in c) != (post is not None):
        raise _error("race", file, where, "post-batch probe records post_mhz and post_mhz_median together",
                     f"keys {sorted(c)}")
    if post is None:
        return
    if not post or (isinstance(rounds, list) and len(post) > len(rounds)):
        raise _error("race", file, f"{where}.post_mhz", "post-batch probe holds one reading per round that read one "
                     f"(1..{len(rounds) if isinstance(rounds, list) else 'rounds'})", f"{len(post)} readings")
    med = statistics.median(post)
    if not math.isclose(c["post_mhz_median"], med, rel_tol=1e-9):
        raise _error("race", file, f"{where}.post_mhz_median", "post_mhz_median is the median of post_mhz",
                     f"{c['post_mhz_median']!r}, the median of post_mhz {med!r}")


def _bracket(file, where: str, k: dict) -> None:
    """A race kernel's bracket clock (lapis.gpu.protocol.summary): bracket_mhz and busy hold one reading per round
    that read one, as many of each, and bracket_mhz_median is bracket_mhz's median; CaptureError naming the field
    otherwise."""
    c, rounds = k.get("clock") or {}, k.get("round_median_us")
    keys = [key for key in ("bracket_mhz", "bracket_mhz_median", "busy") if key in c]
    if not keys:
        return
    if len(keys) != 3:
        raise _error("race", file, where, "the bracket clock records bracket_mhz, bracket_mhz_median and busy "
                     "together", f"keys {sorted(c)}")
    n = len(c["bracket_mhz"])
    if not n or n != len(c["busy"]) or (isinstance(rounds, list) and n > len(rounds)):
        raise _error("race", file, f"{where}.bracket_mhz", "the bracket clock holds one reading and one busy "
                     "fraction per round that read one", f"{n} readings, {len(c['busy'])} busy fractions")
    if not math.isclose(c["bracket_mhz_median"], statistics.median(c["bracket_mhz"]), rel_tol=1e-9):
        raise _error("race", file, f"{where}.bracket_mhz_median", "bracket_mhz_median is the median of bracket_mhz",
                     repr(c["bracket_mhz_median"]))


def read_race(folder) -> Capture:
    """A same-process timing run (lapis.gpu.race, under lapis.gpu.protocol): manifest.json (schema RACE); each
    kernel a shape skipped (not importable, a failed check) is counted in not_compared by the first words of its
    reason; CaptureError when it timed nothing."""
    file, man = _manifest("race", folder, RACE)
    for i, e in enumerate(man["results"]):
        if not _dims(e["shape"], 4):
            raise _error("race", file, f"results[{i}].shape", "shape is BxHxLxD (positive integers)", repr(e["shape"]))
        for name, k in e.get("kernels", {}).items():
            _post_probe(file, f"results[{i}].kernels.{name}.clock", k)
            _bracket(file, f"results[{i}].kernels.{name}.clock", k)
    skipped = _count((why for e in man["results"] for why in e.get("skipped", {}).values()),
                     lambda why: " ".join(why.split()[:3]))
    timed = sum(len(e.get("kernels", {})) for e in man["results"])
    comparable(file, "race", timed + sum(skipped.values()), skipped)
    return Capture("race", Path(folder), file, man, not_compared=skipped)


def not_compared(kind: str, folders, read) -> dict:
    """"<kind>/<capture>" -> {reason: count} of the entries each capture of `folders` (read by `read`, a reader
    of this module) does not let its validator compare, for the captures that have any."""
    return {f"{kind}/{Path(f).name}": n for f in folders if (n := read(f).not_compared)}


READERS = {"tma": read_tma, "tma_encode": read_tma_encode, "wgmma": read_wgmma, "bank": read_bank,
           "cutlass_oracle": read_cutlass_oracle, "attention": read_attention, "gemm": read_gemm,
           "ncu": read_ncu, "race": read_race}
