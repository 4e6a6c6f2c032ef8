"""Per-instruction-class throughput and latency on an SM sub-partition (SMSP): DIR/pipes/{manifest.json, results.json}.

Runs on the bare GPU machine from the source tree: `python3 -m lapis.gpu.capture_pipes --out DIR --provenance
FILE` (benchmarks/h200_pipes.sh). Imports the standard library, numpy and cupy only. Kernels:
lapis/gpu/kernels/micro_pipes.cu (one instruction class each: CLASSES).

Throughput (kind "tput"): one CTA per SM with 4 x w warps (w = 1, 2, 4, 8 warps per SMSP; 16 = two CTAs of 1024
threads per SM; shared_bytes keeps a second CTA off an SM that should hold one), value = warp-instructions of the
class per clock per SMSP = (SASS instructions per CTA) x (CTAs per SM) / (4 x clock64 cycles of the CTA), median
over the CTAs, then over the repeats. Latency (kind "lat"): one warp, one
dependent chain, value = clock64 cycles per dependent SASS instruction (LAT_LINKS_PER_STEP of them per PTX step).
SASS_PER_STEP converts PTX steps into SASS instructions of the class (ptxas merges two 32-bit adds into one IADD3);
tests/gpu/test_capture_pipes.py checks both tables against the compiled loop bodies. The ldsm latency is per step:
one LDSM and one integer add (subtract iadd3's).
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from lapis.gpu import capture_tma, harness

KERNEL = Path(__file__).parent / "kernels" / "micro_pipes.cu"
NVCC = ["nvcc", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-cubin"]
CLASSES = ("ffma", "fmul", "fadd", "fmnmx", "ex2", "f2fp", "shfl", "iadd3", "lop3", "lds128", "ldsm", "hmma")
SASS_OPCODE = {"ffma": "FFMA", "fmul": "FMUL", "fadd": "FADD", "fmnmx": "FMNMX", "ex2": "MUFU.EX2",
               "f2fp": "F2FP.BF16.F32.PACK_AB", "shfl": "SHFL.BFLY", "iadd3": "IADD3", "lop3": "LOP3.LUT",
               "lds128": "LDS.128", "ldsm": "LDSM.16.M88.4", "hmma": "HMMA.16816.F32.BF16"}
CHAINS = {"ex2": 4, "lds128": 4, "ldsm": 4, "hmma": 4}  # independent chains per thread (tput); others 8
UNROLL = 8  # PTX steps per chain per loop iteration (micro_pipes.cu UNROLL)
SASS_PER_STEP = {"iadd3": 0.5}  # SASS instructions of the class per PTX step; others 1
# dependent SASS instructions per PTX step of the lat kernels (others 1): iadd3's chain is 16 IADD3 and one
# IMAD.IADD per 32 steps (ptxas pairs the adds); ldsm's step is one LDSM and one add (both counted in its value)
LAT_LINKS_PER_STEP = {"iadd3": 17 / 32}
WARPS_PER_SMSP = (1, 2, 4, 8, 16)
SMEM_BYTES = 16384
ITERS = {"tput": 2048, "lat": 4096}
REPEATS = 5


def items() -> list[dict]:
    """Every measurement: tput for each class and warps per SMSP, lat for each class."""
    out = []
    for c in CLASSES:
        out += [dict(name=f"pipes.{c}.tput.w{w}", kind="tput", cls=c, warps_per_smsp=w) for w in WARPS_PER_SMSP]
        out.append(dict(name=f"pipes.{c}.lat", kind="lat", cls=c, warps_per_smsp=1))
    return out


def instructions_per_cta(cls: str, threads: int, iters: int) -> float:
    """SASS instructions of the class one CTA of `threads` issues in the tput kernel (warp-level)."""
    return threads / 32 * iters * UNROLL * CHAINS.get(cls, 8) * SASS_PER_STEP.get(cls, 1.0)


def shared_bytes(ctas_per_sm: int, smem_per_sm: int, smem_optin: int) -> int:
    """Dynamic shared memory per CTA: one CTA per SM takes over half the SM's shared memory, so that no second CTA
    lands on an SM that has one (the grid is one CTA per SM); two CTAs of 1024 threads fill the SM's 2048 threads."""
    if ctas_per_sm == 1:
        return min(max(SMEM_BYTES, smem_per_sm // 2 + 1024), smem_optin)
    return SMEM_BYTES


def measure(mod, item: dict, attrs: dict, repeats: int) -> dict:
    import cupy as cp
    cls, kind = item["cls"], item["kind"]
    f = mod.get_function(f"micro_pipes_{cls}_{kind}")
    iters = ITERS[kind]
    if kind == "lat":
        out, sink = cp.zeros(1, cp.uint64), cp.zeros(32, cp.float32)
        args, grid, block, smem = (np.uint32(iters), np.uint32(0), out, sink), 1, 32, SMEM_BYTES
    else:
        threads = 128 * item["warps_per_smsp"]
        ctas_per_sm = (threads + 1023) // 1024
        block, grid = threads // ctas_per_sm, attrs["multiProcessorCount"] * ctas_per_sm
        smem = shared_bytes(ctas_per_sm, attrs["sharedMemPerMultiprocessor"], attrs["sharedMemPerBlockOptin"])
        out, sink = cp.zeros(5 * grid, cp.uint64), cp.zeros(grid * block, cp.float32)
        args = (np.uint32(iters), np.uint32(0), out, sink)
    f.max_dynamic_shared_size_bytes = smem
    values = []
    for r in range(repeats + 1):  # the first launch warms up
        f((grid,), (block,), args, shared_mem=smem)
        cp.cuda.Device().synchronize()
        if not r:
            continue
        if kind == "lat":
            links = iters * UNROLL * LAT_LINKS_PER_STEP.get(cls, 1.0)
            values.append(float(out.get()[0]) / links)
        else:
            rec = out.get().reshape(-1, 5).astype(np.int64)
            cycles = rec[:, 1] - rec[:, 0]
            per_cta = instructions_per_cta(cls, block, iters)
            values.append(float(np.median(per_cta * ctas_per_sm / (4 * cycles))))
    v = np.array(values)
    q1, q3 = np.percentile(v, [25, 75])
    return dict(status="ok", raw=values, value=dict(
        median=float(np.median(v)), spread_pct=float(100 * (q3 - q1) / np.median(v)), n=len(values),
        unit="cycles per dependent instruction" if kind == "lat" else "warp-instructions per clk per SMSP"))


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="lapis capture pipes", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output folder; gets pipes/ (manifest.json, results.json)")
    ap.add_argument("--provenance", help="JSON from `python -m lapis.captures.provenance` (commit, dirty, blobs)")
    ap.add_argument("--only", help="comma-separated class names (default: all)")
    ap.add_argument("--repeats", type=int, default=REPEATS, help=f"timed launches each (default {REPEATS})")
    a = ap.parse_args(argv)
    if not harness.gpu_present():
        print("lapis capture pipes: needs an NVIDIA GPU with compute capability 9.0+ (sm_90a) and cupy",
              file=sys.stderr)
        return 2
    import cupy as cp
    t0 = time.time()
    prov = capture_tma.provenance(a.provenance, argv, "lapis capture pipes")
    props = cp.cuda.runtime.getDeviceProperties(0)
    attrs = {k: int(props[k]) for k in ("multiProcessorCount", "sharedMemPerMultiprocessor", "sharedMemPerBlockOptin")}
    sms = attrs["multiProcessorCount"]
    work = Path(tempfile.mkdtemp(prefix="lapis-pipes-"))
    cubin = work / "micro_pipes.cubin"
    subprocess.run(NVCC + ["-o", str(cubin), str(KERNEL)], check=True, timeout=300)
    mod = cp.RawModule(path=str(cubin))
    todo = [m for m in items() if not a.only or m["cls"] in a.only.split(",")]
    for m in todo:
        try:
            m.update(measure(mod, m, attrs, a.repeats))
        except Exception as e:  # a failed launch is recorded, the next measurement still runs
            m.update(status="fault", error=f"{type(e).__name__}: {e}"[:300])
        v = m.get("value")
        print(f"[{time.time() - t0:6.1f}s] {m['name']:<24} "
              + (f"{v['median']:10.4g} {v['unit']} spread {v['spread_pct']:.2f}%" if v else m["status"]), flush=True)
    dest = Path(a.out) / "pipes"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "results.json").write_text(json.dumps(dict(
        device_attributes=attrs, sm_count=sms, unroll=UNROLL, chains=CHAINS, sass_per_step=SASS_PER_STEP,
        lat_links_per_step=LAT_LINKS_PER_STEP, iters=ITERS, measurements=todo),
        indent=1))
    (dest / "manifest.json").write_text(json.dumps(dict(
        provenance=prov, kernels=["lapis/gpu/kernels/micro_pipes.cu"], files=["results.json"],
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
