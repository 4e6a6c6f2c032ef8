"""compute-sanitizer (memcheck, racecheck, synccheck) on the attention kernels, and a planted async-proxy race.

`python -m lapis.gpu.sanitize_attention --out DIR [--shape 1x2x512x128] [--variants s3,s4]` (GPU machine: numpy,
cupy, nvcc, compute-sanitizer) runs each tool on each chosen variant's plain build (default: all), and on the
planted-race build of s2, or of the first chosen warp-specialized variant when s2 is not chosen
(-DLAPIS_PLANT_RACE=1: the consumer warps arrive on empty[s] before PV's wgmma.wait_group, so the producer's
next TMA may overwrite V_j while the tensor core reads it). Each run is a child process under the tool with a
timeout; the child launches once on fresh inputs (output poisoned with NaN) and prints rel_err against a float64
CPU reference. The planted race also runs without a tool, to see whether the output shows it.
Writes DIR/sanitizer.json (per run: tool, variant, build, the tool's error count, rel_err, return code, log text).
Whether a tool flags the planted race is recorded as data (`planted_race_flagged`), not assumed: racecheck
tracks shared-memory accesses of threads, and TMA writes and wgmma reads are async-proxy accesses.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from lapis.errors import ScheduleError
from lapis.gpu import capture_tma, harness
from lapis.gpu.attention_plan import load
from lapis.gpu.bench_attention import KERNEL, VARIANTS, Attention, check_shape, grid, parse_shape
from lapis.gpu.harness import libcuda

TOOLS = ("memcheck", "racecheck", "synccheck")
RACE_BUILD = {"LAPIS_PLANT_RACE": 1}
SMALL_SHAPE = "1x2x512x128"
RUN_TIMEOUT_S = 150


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns (uint16), round to nearest even (finite inputs)."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_float(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def reference_cpu(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = False) -> np.ndarray:
    """float64 softmax(q k^T / sqrt(D)) v over the last two axes (B x H x L x D); causal: key > query masked."""
    s = np.einsum("bhld,bhmd->bhlm", q, k) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.triu(np.ones(s.shape[-2:], bool), 1), -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhlm,bhmd->bhld", p / p.sum(-1, keepdims=True), v)


def split_variant(v: str) -> tuple[str, bool]:
    """'s9:causal' -> ('s9', True) (the variant's causal build); 's5' -> ('s5', False). ScheduleError for any
    other ':' suffix."""
    name, sep, mode = v.partition(":")
    if sep and mode != "causal":
        raise ScheduleError("a variant is NAME or NAME:causal", repr(v), f"write {name}:causal or {name}")
    return name, bool(sep)


def error_count(log: str) -> int | None:
    """The tool's 'ERROR SUMMARY: N error(s)' (racecheck: 'RACECHECK SUMMARY: N hazard(s)'), summed; None if
    the log has no summary (the tool or the child did not finish)."""
    found = [int(m) for m in re.findall(r"(?:ERROR|RACECHECK) SUMMARY: (\d+)", log)]
    return sum(found) if found else None


def _child(a) -> None:
    """Launch one variant once on fresh inputs and print {rel_err, status} as the last stdout line."""
    import cupy as cp

    cp.zeros(1)
    shape = parse_shape(a.shape)
    rng = np.random.default_rng(7)
    host = [bf16_bits(rng.standard_normal(shape, dtype=np.float32)) for _ in range(3)]
    q, k, v = (cp.asarray(x) for x in host)
    o = cp.full(shape, 0x7FC0, cp.uint16)  # bf16 NaN: an unwritten element fails the check
    name, causal = split_variant(a.variant)
    att = Attention(harness.load(a.cubin), VARIANTS[name], load(), libcuda(), causal)
    status = harness.Status()
    rows = shape[0] * shape[1] * shape[2]
    err = None
    gx, gy = grid(VARIANTS[name], a.shape)
    probe = cp.zeros(4 * gx * gy, cp.uint64)  # the plain build's clock probe writes here (timeline: s7's counter)
    try:
        att.launch(att.maps(q.data.ptr, k.data.ptr, v.data.ptr, rows), o.data.ptr, a.shape,
                   harness.harness_args(status, timeout_ns=2_000_000_000), probe.data.ptr)
        harness.synchronize(status, f"{a.variant} at {a.shape}")
    except Exception as exc:  # recorded: the parent decides what it means
        err = f"{type(exc).__name__}: {exc}"
    out = bf16_float(o.get()).astype(np.float64)
    ref = reference_cpu(*(bf16_float(x).astype(np.float64) for x in host), causal=causal)
    rel = float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
    print(json.dumps(dict(rel_err=rel, error=err, status=status.read())), flush=True)


def sanitizer() -> str | None:
    found = shutil.which("compute-sanitizer")
    for p in ("/usr/local/cuda/bin/compute-sanitizer", "/usr/local/cuda/compute-sanitizer/compute-sanitizer"):
        if found is None and Path(p).exists():
            found = p
    return found


def one(tool: str | None, variant: str, build: str, cubin: str, shape: str, logdir: Path) -> dict:
    tag = f"{tool or 'none'}_{variant}_{build}"
    child = [sys.executable, "-m", "lapis.gpu.sanitize_attention", "_run", "--cubin", cubin, "--variant", variant,
             "--shape", shape]
    argv = child if tool is None else [sanitizer(), "--tool", tool, "--log-file", str(logdir / f"{tag}.log"),
                                       *(["--racecheck-report", "all"] if tool == "racecheck" else []), *child]
    t0, r = time.time(), dict(tool=tool, variant=variant, build=build, shape=shape)
    try:
        p = harness.run_guarded(argv, RUN_TIMEOUT_S, f"{tag} at {shape}")
        last = (p.stdout.strip().splitlines() or ["{}"])[-1]
        r.update(returncode=p.returncode, child=json.loads(last) if last.startswith("{") else None,
                 stderr_tail=p.stderr[-600:])
    except harness.KernelHang as exc:
        r.update(kernel_hang=str(exc))
    log = (logdir / f"{tag}.log").read_text() if (logdir / f"{tag}.log").exists() else ""
    r.update(errors=error_count(log) if tool else None, log=log[-6000:], wall_s=round(time.time() - t0, 1))
    return r


def race_variant(chosen: list, variants: dict) -> str:
    """The variant whose planted-race build runs: s2 if chosen, else the first chosen warp-specialized one without
    GEMM turns, else s2 (the planted arrive needs a producer that refills the slot, and lives in the s1..s3 loop)."""
    ws = [v for v in chosen if variants[split_variant(v)[0]]["ws"] and not variants[split_variant(v)[0]]["pp"]]
    return "s2" if "s2" in chosen or not ws else ws[0]


def run(a) -> int:
    from concurrent.futures import ThreadPoolExecutor

    if sanitizer() is None:
        print("compute-sanitizer not found (PATH, /usr/local/cuda)", file=sys.stderr)
        return 2
    dest = Path(a.out)
    (dest / "logs").mkdir(parents=True, exist_ok=True)
    cubins = {"plain": str(harness.build(KERNEL, {})[0]), "planted_race": str(harness.build(KERNEL, RACE_BUILD)[0])}
    planted = race_variant(a.variants, VARIANTS)
    jobs = [(t, v, "plain") for t in TOOLS for v in a.variants] + [(t, planted, "planted_race") for t in TOOLS]
    jobs.append((None, planted, "planted_race"))
    with ThreadPoolExecutor(3) as ex:
        runs = list(ex.map(lambda j: one(j[0], j[1], j[2], cubins[j[2]], a.shape, dest / "logs"), jobs))
    clean = {f"{r['tool']}/{r['variant']}": r["errors"] == 0 and r.get("returncode") == 0 for r in runs
             if r["build"] == "plain"}
    race = [r for r in runs if r["build"] == "planted_race" and r["tool"]]
    summary = dict(shape=a.shape, variants=a.variants, planted_race_variant=planted, sanitizer=sanitizer(), version=_version(), clean=clean,
                   planted_race_flagged={r["tool"]: bool(r["errors"]) for r in race},
                   planted_race_rel_err={r["tool"] or "no tool": (r.get("child") or {}).get("rel_err")
                                         for r in runs if r["build"] == "planted_race"})
    prov = capture_tma.provenance(a.provenance, a.argv, "python -m lapis.gpu.sanitize_attention")
    (dest / "sanitizer.json").write_text(json.dumps(dict(provenance=prov, summary=summary, runs=runs), indent=1))
    shutil.rmtree(dest / "logs")  # their text is in sanitizer.json: the device returns few files
    for r in runs:
        err = (r.get("child") or {}).get("rel_err")
        print(f"{r['tool'] or '-':<10}{r['variant']:<4}{r['build']:<14}errors {r['errors']!s:<6}"
              f"rel_err {'-' if err is None else f'{err:.1e}':<9}rc {r.get('returncode', 'hang')}  {r['wall_s']} s")
    print(json.dumps(summary))
    return 0 if all(clean.values()) else 1


def _version() -> str:
    p = subprocess.run([sanitizer(), "--version"], capture_output=True, text=True)
    return p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_run"]:
        c = argparse.ArgumentParser()
        c.add_argument("_run")
        c.add_argument("--cubin", required=True)
        c.add_argument("--variant", required=True)
        c.add_argument("--shape", default=SMALL_SHAPE)
        _child(c.parse_args(argv))
        return 0
    ap = argparse.ArgumentParser(prog="python -m lapis.gpu.sanitize_attention", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output folder: sanitizer.json")
    ap.add_argument("--provenance", help="JSON from `python -m lapis.captures.provenance $(... --sources)`, made where git is")
    ap.add_argument("--shape", default=SMALL_SHAPE, help=f"BxHxLxD (default {SMALL_SHAPE})")
    ap.add_argument("--variants", type=lambda s: s.split(","),
                    default=[n for n, v in VARIANTS.items() if not v["diagnostic"]],
                    help=f"comma-separated, from {', '.join(VARIANTS)} (default: all)")
    a = ap.parse_args(argv)
    a.argv = argv
    causal_ok = [n for n, v in VARIANTS.items() if v["causal_build"]]
    for v in a.variants:
        try:
            name, causal = split_variant(v)
        except ScheduleError as exc:
            ap.error(str(exc))
        if name not in VARIANTS:
            ap.error(f"unknown variants ['{v}']; choose from {', '.join(VARIANTS)} (NAME:causal for a causal build)")
        if causal and name not in causal_ok:
            ap.error(f"{name} has no causal build: got '{v}'; fix: use {', '.join(n + ':causal' for n in causal_ok)}")
        try:
            check_shape(VARIANTS[name], a.shape, causal)
        except ScheduleError as exc:
            ap.error(str(exc))
    if not harness.gpu_present():
        print("python -m lapis.gpu.sanitize_attention: needs an NVIDIA GPU with compute capability 9.0+ (sm_90a) "
              "and cupy", file=sys.stderr)
        return 2
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
