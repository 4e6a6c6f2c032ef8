"""The SM clock under the power limit with the tensor and FMA pipes held at set duties: DIR/clock/{manifest.json,
results.json}.

Runs on the bare GPU machine from the source tree: `python3 -m lapis.gpu.capture_clock --out DIR --provenance
FILE` (benchmarks/h200_clock.sh). Imports the standard library, numpy and cupy only (and runs nvidia-smi). Kernel:
lapis/gpu/kernels/micro_clock.cu, one CTA per SM: two warpgroups issue wgmma at tensor duty d_t, two issue FFMA
at FMA duty d_f, in periods of PERIOD_NS (busy for d x PERIOD_NS, then nanosleep), for RUN_S seconds a point.

Per point (tensor_duty, fma_duty), over the time after SETTLE_S (the power limiter's transient):
- probe_mhz: median over the CTAs of clock64 cycles / %globaltimer ns x 1000;
- smi_mhz, smi_w: medians of nvidia-smi's clocks.sm and power.draw sampled in the same window (lapis.gpu
  .bench_gemm.SmiSampler); smi_samples counts them;
- tensor_flop_per_clk_sm: wgmma FLOPs (2 x 64 x 128 x 16 each) per clock64 cycle per SM, median over the CTAs;
- ffma_per_clk_smsp: FFMA warp-instructions per cycle per SM sub-partition, median over the CTAs;
- distinct_sms: how many SMs the CTAs ran on (the grid is one CTA per SM).
The points run twice, forward then backward, after a WARMUP_S full-duty warm-up (the GPU's temperature, and with
it the power at a clock, settles); each run of a point is one entry of `points`, `repeat` says which.
lapis.model.clock fits the clock against the achieved duties (each rate over the unit's largest rate).
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
from lapis.gpu.bench_gemm import SmiSampler, smi_gpu_id

KERNEL = Path(__file__).parent / "kernels" / "micro_clock.cu"
NVCC = ["nvcc", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-cubin"]
THREADS = 512  # micro_clock.cu THREADS: warpgroups 0-1 tensor, 2-3 FMA
RECORD_WORDS = 7  # micro_clock.cu RECORD_WORDS: clk0, clk1, ns0, ns1, sm, wgmmas, ffma warp-instructions
OPERAND_BYTES = 8192 + 128 * 128  # micro_clock.cu OPERAND_BYTES (A 64 x 64 and B 128 x 64 bf16)
WGMMA_FLOP = 2 * 64 * 128 * 16  # one m64n128k16
PERIOD_NS = 10_000
RUN_S, SETTLE_S, WARMUP_S = 0.5, 0.1, 1.0
DUTIES = (0.25, 0.5, 0.75, 1.0)
MIXED = ((0.5, 0.5), (1.0, 0.5), (0.5, 1.0), (1.0, 1.0))
REPEATS = 2


def points() -> list[tuple[float, float]]:
    """(tensor_duty, fma_duty) of every point: idle, each unit alone at DUTIES, then MIXED."""
    return [(0.0, 0.0)] + [(d, 0.0) for d in DUTIES] + [(0.0, d) for d in DUTIES] + list(MIXED)


def unit_name(tensor_duty: float, fma_duty: float) -> str:
    """"idle", "tensor", "fma" or "tensor+fma": the units a point keeps busy."""
    busy = [u for u, d in (("tensor", tensor_duty), ("fma", fma_duty)) if d > 0]
    return "+".join(busy) or "idle"


def schedule(repeats: int = REPEATS) -> list[tuple[int, tuple[float, float]]]:
    """(repeat, point) in run order: the points forward, then backward, alternating (a drift shows as a
    difference between the repeats instead of as a slope along the duties)."""
    out = []
    for r in range(repeats):
        out += [(r, p) for p in (points() if r % 2 == 0 else points()[::-1])]
    return out


def summarize(rec: np.ndarray, sms: int) -> dict:
    """One point's numbers from the kernel's records (CTAs x RECORD_WORDS u64): see the module docstring."""
    rec = np.asarray(rec, dtype=np.int64).reshape(-1, RECORD_WORDS)
    cycles, ns = rec[:, 1] - rec[:, 0], rec[:, 3] - rec[:, 2]
    if (cycles <= 0).any() or (ns <= 0).any():
        raise ValueError(f"a CTA recorded no settled window (cycles {cycles.min()}, ns {ns.min()})")
    return dict(probe_mhz=float(np.median(cycles / ns * 1e3)),
                probe_mhz_min=float((cycles / ns * 1e3).min()), probe_mhz_max=float((cycles / ns * 1e3).max()),
                tensor_flop_per_clk_sm=float(np.median(rec[:, 5] * WGMMA_FLOP / cycles)),
                ffma_per_clk_smsp=float(np.median(rec[:, 6] / (4 * cycles))),
                window_ns=float(np.median(ns)), distinct_sms=int(len(set(rec[:, 4].tolist()))), ctas=int(len(rec)),
                sms=sms)


def one_cta_smem(attrs: dict) -> int:
    """Dynamic shared memory (bytes) for a micro_clock CTA: the operands, 1 KiB-aligned, and over half the SM's shared
    memory, so no SM takes a second CTA and a grid of one CTA per SM covers every SM once."""
    return min(max(OPERAND_BYTES + 1024, attrs["sharedMemPerMultiprocessor"] // 2 + 1024),
               attrs["sharedMemPerBlockOptin"])


class Runner:
    """The built kernel, its buffers and the nvidia-smi sampler."""

    def __init__(self, cubin: Path, attrs: dict):
        import cupy as cp
        self.cp, self.grid = cp, attrs["multiProcessorCount"]
        self.fn = cp.RawModule(path=str(cubin)).get_function("micro_clock")
        self.smem = one_cta_smem(attrs)
        self.fn.max_dynamic_shared_size_bytes = self.smem
        self.out = cp.zeros(RECORD_WORDS * self.grid, cp.uint64)
        self.sink = cp.zeros(self.grid * THREADS, cp.float32)
        self.smi = SmiSampler(smi_gpu_id())
        self.smi.start()

    def launch(self, tensor_duty: float, fma_duty: float, run_s: float, settle_s: float) -> tuple[float, float]:
        """Run one point; (host time of the launch, host time it finished)."""
        t0 = time.time()
        self.fn((self.grid,), (THREADS,), (np.uint32(round(1000 * tensor_duty)), np.uint32(round(1000 * fma_duty)),
                                           np.uint32(PERIOD_NS), np.uint64(int(run_s * 1e9)),
                                           np.uint64(int(settle_s * 1e9)), np.uint32(0), self.out, self.sink),
                shared_mem=self.smem)
        self.cp.cuda.Device().synchronize()
        return t0, time.time()

    def point(self, tensor_duty: float, fma_duty: float, run_s: float, settle_s: float) -> dict:
        t0, t1 = self.launch(tensor_duty, fma_duty, run_s, settle_s)
        got = summarize(self.out.get(), self.grid)
        w = self.smi.window(t0 + settle_s, t1)
        got.update(smi_mhz=(w.get("sm_clock_mhz") or {}).get("median"), smi_w=(w.get("power_w") or {}).get("median"),
                   smi_samples=w.get("samples", 0), smi_nearest_only=w.get("nearest_only"),
                   clock_event_reasons=w.get("clock_event_reasons"), temp_c=(w.get("temp_c") or {}).get("median"),
                   host_s=t1 - t0)
        return got


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m lapis.gpu.capture_clock", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output folder; gets clock/ (manifest.json, results.json)")
    ap.add_argument("--provenance", help="JSON from `python -m lapis.captures.provenance` (commit, dirty, blobs)")
    ap.add_argument("--repeats", type=int, default=REPEATS, help=f"runs of every point (default {REPEATS})")
    ap.add_argument("--run-s", type=float, default=RUN_S, help=f"seconds per point (default {RUN_S})")
    a = ap.parse_args(argv)
    if not 0 < SETTLE_S < a.run_s <= 5 or not 1 <= a.repeats <= 4:
        ap.error(f"--run-s must be in ({SETTLE_S}, 5] and --repeats in [1, 4]")
    if not harness.gpu_present():
        print("python -m lapis.gpu.capture_clock: needs an NVIDIA GPU with compute capability 9.0+ (sm_90a) and cupy",
              file=sys.stderr)
        return 2
    import cupy as cp
    t_start = time.time()
    prov = capture_tma.provenance(a.provenance, argv, "python -m lapis.gpu.capture_clock")
    props = cp.cuda.runtime.getDeviceProperties(0)
    attrs = {k: int(props[k]) for k in ("multiProcessorCount", "sharedMemPerMultiprocessor", "sharedMemPerBlockOptin")}
    cubin = Path(tempfile.mkdtemp(prefix="lapis-clock-")) / "micro_clock.cubin"
    subprocess.run(NVCC + ["-o", str(cubin), str(KERNEL)], check=True, timeout=300)
    run = Runner(cubin, attrs)
    time.sleep(0.3)  # a first nvidia-smi sample before the first point
    run.launch(1.0, 1.0, WARMUP_S, SETTLE_S)
    todo = []
    for rep, (td, fd) in schedule(a.repeats):
        m = dict(unit=unit_name(td, fd), tensor_duty=td, fma_duty=fd, repeat=rep)
        try:
            m.update(status="ok", **run.point(td, fd, a.run_s, SETTLE_S))
        except Exception as e:  # a failed launch is recorded; after a sticky CUDA error the next ones fail too
            m.update(status="fault", error=f"{type(e).__name__}: {e}"[:300])
        todo.append(m)
        print(f"[{time.time() - t_start:5.1f}s] {m['unit']:<11} t{td:.2f} f{fd:.2f} r{rep} "
              + (f"probe {m['probe_mhz']:6.0f} MHz  smi {m['smi_mhz'] or 0:6.0f} MHz {m['smi_w'] or 0:5.0f} W "
                 f"({m['smi_samples']} samples)  tensor {m['tensor_flop_per_clk_sm']:6.0f} FLOP/clk/SM  "
                 f"ffma {m['ffma_per_clk_smsp']:.3f}/clk/SMSP  SMs {m['distinct_sms']}"
                 if m["status"] == "ok" else m["error"]), flush=True)
    run.smi.stop.set()
    write(Path(a.out), dict(device_attributes=attrs, sm_count=attrs["multiProcessorCount"], threads=THREADS,
                            period_ns=PERIOD_NS, run_s=a.run_s, settle_s=SETTLE_S, warmup_s=WARMUP_S,
                            wgmma_flop=WGMMA_FLOP, units=UNITS, points=todo),
          "lapis/gpu/kernels/micro_clock.cu", prov, t_start)
    return 0 if all(m["status"] == "ok" for m in todo) else 1


UNITS = dict(probe_mhz="MHz, clock64 cycles / %globaltimer ns, median over CTAs",
             smi_mhz="MHz, nvidia-smi clocks.sm, median of the samples", smi_w="W, nvidia-smi power.draw",
             tensor_flop_per_clk_sm="dense bf16 FLOP per SM cycle",
             ffma_per_clk_smsp="FFMA warp-instructions per SMSP cycle")


def write(out: Path, results: dict, kernel: str, prov: dict, t_start: float) -> None:
    """out/clock/results.json (`results`) and out/clock/manifest.json (provenance, the kernel, wall time, date)."""
    dest = out / "clock"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "results.json").write_text(json.dumps(results, indent=1))
    (dest / "manifest.json").write_text(json.dumps(dict(
        provenance=prov, kind="clock", kernels=[kernel], files=["results.json"], wall_s=time.time() - t_start,
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")), indent=1))


if __name__ == "__main__":
    sys.exit(main())
