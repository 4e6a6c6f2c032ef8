"""Cost of one timeline record on the GPU (kernels/timeline_cost.cu): ns and SM cycles per record, by mode.

`python -m lapis.gpu.timeline_cost --out DIR [--iterations N] [--warps 1 3] [--repeats R]` (GPU machine: numpy,
cupy, nvcc) writes DIR/timeline_cost.json and prints it. One CTA; lane 0 of each of `warps` warps records once
per iteration of a chain of dependent FMAs (3 warps: the kernels' producer and two consumer leaders sharing
the cursor). Per mode and warp count: the loop's median over repeats (the slowest warp's %globaltimer ns and
%clock64 cycles), and per record (loop - the no-record loop) / iterations. Modes: none (baseline),
globaltimer (the record before clock anchors), clock64 (harness.cuh's record), clock64_register (no
atomicAdd: what the shared cursor costs). The clock64 run's records also go through
harness.anchored_to_ns: `anchors` gives the SM clock the anchors measured and how far the converted span of
the recorded loop lies from its %globaltimer span.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from lapis.gpu import harness

KERNEL = Path(__file__).parent / "kernels" / "timeline_cost.cu"
MODES = ("none", "globaltimer", "clock64", "clock64_register")
FMA_CHAIN = 16  # timeline_cost.cu FMA_CHAIN


def run_mode(cp, fn, warps: int, iterations: int, repeats: int):
    """(median loop ns, median loop cycles, last launch's rows and counts) of one mode; slowest warp per launch."""
    slots = harness.timeline_slots(warps * iterations)
    rec = cp.zeros(slots * harness.RECORD_DTYPE.itemsize, cp.uint8)
    counts = cp.zeros(1, cp.uint32)
    out, elapsed = cp.zeros(32 * warps, cp.float32), cp.zeros(2 * warps, cp.uint64)
    hargs = harness.harness_args(None, rec.data.ptr, counts.data.ptr, slots)
    ns, cycles = [], []
    for _ in range(repeats + 1):  # the first launch warms up (module load, caches)
        fn((1,), (32 * warps,), (hargs[()], out, elapsed, np.int32(iterations), np.float32(0.999), np.float32(1e-3)))
        cp.cuda.Device().synchronize()
        e = elapsed.get().reshape(warps, 2)
        ns.append(int(e[:, 0].max()))
        cycles.append(int(e[:, 1].max()))
    raw = rec.get().view(harness.RECORD_DTYPE).reshape(1, slots)
    return float(np.median(ns[1:])), float(np.median(cycles[1:])), raw, counts.get()


def anchors(raw, counts, loop_ns: float) -> dict:
    """The clock64 run through harness.anchored_to_ns: the anchors' SM clock and the converted loop span."""
    records, mhz = harness.anchored_to_ns(raw, counts)
    t = records["t_ns"][0, :int(min(counts[0], records.shape[1]))].astype(np.int64)
    return dict(records=int(t.size), clock_mhz=float(mhz[0]), converted_span_ns=int(t.max() - t.min()),
                loop_ns=loop_ns)


def measure(iterations: int, warps_list, repeats: int) -> dict:
    import cupy as cp
    cubin, ptxas = harness.build(KERNEL)
    mod = harness.load(cubin)
    dev = cp.cuda.runtime.getDeviceProperties(0)
    result = dict(device=dev["name"].decode(), kernel=str(KERNEL.name), ptxas=ptxas, iterations=iterations,
                  fma_chain=FMA_CHAIN, repeats=repeats, units="ns: %globaltimer; cycles: %clock64", warps={})
    for warps in warps_list:
        rows = {}
        for mode in MODES:
            ns, cyc, raw, counts = run_mode(cp, mod.get_function(f"timeline_cost_{mode}"), warps, iterations, repeats)
            rows[mode] = dict(loop_ns=ns, loop_cycles=cyc)
            if mode == "clock64":
                rows[mode]["anchors"] = anchors(raw, counts, ns)
        for mode in MODES[1:]:
            rows[mode]["ns_per_record"] = (rows[mode]["loop_ns"] - rows["none"]["loop_ns"]) / iterations
            rows[mode]["cycles_per_record"] = (rows[mode]["loop_cycles"] - rows["none"]["loop_cycles"]) / iterations
        result["warps"][str(warps)] = rows
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lapis.gpu.timeline_cost", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output folder: timeline_cost.json")
    ap.add_argument("--iterations", type=int, default=20000, help="records per warp per launch")
    ap.add_argument("--warps", type=int, nargs="+", default=[1, 3], help="recording warps in the CTA (1..32)")
    ap.add_argument("--repeats", type=int, default=7, help="timed launches per mode (median)")
    a = ap.parse_args(argv)
    if not all(1 <= w <= 32 for w in a.warps) or a.iterations < 1 or a.repeats < 1:
        ap.error("--warps must be 1..32 (one CTA of at most 1024 threads); --iterations and --repeats >= 1")
    if not harness.gpu_present():
        print("timeline_cost needs an sm_90a GPU with cupy and nvcc (run it on the GPU machine)", file=sys.stderr)
        return 2
    result = measure(a.iterations, a.warps, a.repeats)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "timeline_cost.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
