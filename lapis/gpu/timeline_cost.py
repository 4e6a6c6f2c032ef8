"""Cost of one timeline record on the GPU (kernels/timeline_cost.cu): ns and SM cycles per record, by mode.

`python -m lapis.gpu.timeline_cost --out DIR [--provenance FILE] [--iterations N] [--warps 1 3] [--repeats R]`
(GPU machine: numpy, cupy, nvcc) writes DIR/timeline_cost.json and prints it; `--sources` prints the files to
pass to `python -m lapis.captures.provenance` (where git is) for FILE. One CTA; lane 0 of each of `warps` warps records
once per iteration of a chain of dependent FMAs, warp w as role w (3 warps: the kernels' producer and two
consumer leaders). Per mode and warp count: the loop's median over repeats (the slowest warp's %globaltimer
ns and %clock64 cycles), and per record (loop - the no-record loop) / iterations. Modes (timeline_cost.cu):
none (baseline); cursor-ordered records (one shared atomicAdd cursor, fields stored one by one): globaltimer,
clock64_atomic, clock64_register (no atomic); harness.cuh's interleaved-row record: record (the default: a
shared per-role cursor, three 8-byte stores), record_pair (16 + 8-byte stores), record_register (a register
cursor), record_register_pair. Each record mode's rows also go through
harness.anchored_to_ns: `rows` gives the SM clock the anchors measured, how far the converted span of the
recorded loop lies from its %globaltimer span, and whether every role's records came back complete and in
order.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from lapis.gpu import capture_tma, harness

KERNEL = Path(__file__).parent / "kernels" / "timeline_cost.cu"
MODES = ("none", "globaltimer", "clock64_atomic", "clock64_register", "record", "record_pair", "record_register",
         "record_register_pair")
RECORD_MODES = tuple(m for m in MODES if m.startswith("record"))  # harness.cuh's record: interleaved rows
FMA_CHAIN = 16  # timeline_cost.cu FMA_CHAIN
SOURCES = ("lapis/gpu/kernels/timeline_cost.cu", "lapis/gpu/kernels/harness.cuh", "lapis/gpu/timeline_cost.py",
           "lapis/gpu/harness.py")


def run_mode(cp, fn, warps: int, iterations: int, repeats: int):
    """(median loop ns, median loop cycles, last launch's rows and counts) of one mode; slowest warp per launch."""
    slots = harness.timeline_slots(harness.role_slots(iterations, warps))
    rec = cp.zeros(slots * harness.RECORD_DTYPE.itemsize, cp.uint8)
    counts = cp.zeros(1, cp.uint32)
    out, elapsed = cp.zeros(32 * warps, cp.float32), cp.zeros(2 * warps, cp.uint64)
    hargs = harness.harness_args(None, rec.data.ptr, counts.data.ptr, slots, roles=warps)
    ns, cycles = [], []
    for _ in range(repeats + 1):  # the first launch warms up (module load, caches)
        fn((1,), (32 * warps,), (hargs[()], out, elapsed, np.int32(iterations), np.float32(0.999), np.float32(1e-3)))
        cp.cuda.Device().synchronize()
        e = elapsed.get().reshape(warps, 2)
        ns.append(int(e[:, 0].max()))
        cycles.append(int(e[:, 1].max()))
    raw = rec.get().view(harness.RECORD_DTYPE).reshape(1, slots)
    return float(np.median(ns[1:])), float(np.median(cycles[1:])), raw, counts.get()


def check_rows(raw, counts, loop_ns: float, warps: int, iterations: int) -> dict:
    """One launch's interleaved row through harness.anchored_to_ns: the anchors' SM clock, the converted span
    against the loop's %globaltimer span, and whether each role (warp) came back with records 0..iterations-1
    in order (k_index), none lost, and the count = warps * iterations."""
    records, mhz = harness.anchored_to_ns(raw, counts)
    mine = records[0][harness.written(records, counts)[0]]
    t = mine["t_ns"].astype(np.int64)
    in_order = all(mine["k_index"][mine["role"] == r].tolist() == list(range(iterations)) for r in range(warps))
    return dict(records=int(t.size), counts=int(counts[0]), expected=warps * iterations, roles_in_order=in_order,
                clock_mhz=float(mhz[0]), converted_span_ns=int(t.max() - t.min()) if t.size else 0, loop_ns=loop_ns)


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
            if mode in RECORD_MODES:
                rows[mode]["rows"] = check_rows(raw, counts, ns, warps, iterations)
        for mode in MODES[1:]:
            rows[mode]["ns_per_record"] = (rows[mode]["loop_ns"] - rows["none"]["loop_ns"]) / iterations
            rows[mode]["cycles_per_record"] = (rows[mode]["loop_cycles"] - rows["none"]["loop_cycles"]) / iterations
        result["warps"][str(warps)] = rows
    return result


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="python -m lapis.gpu.timeline_cost", description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="output folder: timeline_cost.json")
    ap.add_argument("--provenance", help="JSON from `python -m lapis.captures.provenance $(... --sources)`, made where git is")
    ap.add_argument("--sources", action="store_true", help="print the sources to pass to lapis.captures.provenance and exit")
    ap.add_argument("--iterations", type=int, default=20000, help="records per warp per launch")
    ap.add_argument("--warps", type=int, nargs="+", default=[1, 3],
                    help=f"recording warps (roles) in the CTA (1..{harness.MAX_ROLES})")
    ap.add_argument("--repeats", type=int, default=7, help="timed launches per mode (median)")
    a = ap.parse_args(argv)
    if a.sources:
        print(" ".join(SOURCES))
        return 0
    if not a.out:
        ap.error("--out is required")
    if not all(1 <= w <= harness.MAX_ROLES for w in a.warps) or a.iterations < 1 or a.repeats < 1:
        ap.error(f"--warps must be 1..{harness.MAX_ROLES} (one role per warp, harness.cuh MAX_ROLES); "
                 "--iterations and --repeats >= 1")
    if not harness.gpu_present():
        print("timeline_cost needs an sm_90a GPU with cupy and nvcc (run it on the GPU machine)", file=sys.stderr)
        return 2
    result = dict(provenance=capture_tma.provenance(a.provenance, argv, "python -m lapis.gpu.timeline_cost"),
                  **measure(a.iterations, a.warps, a.repeats))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "timeline_cost.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
