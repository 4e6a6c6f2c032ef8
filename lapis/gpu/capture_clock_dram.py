"""The SM clock under the power limit with the HBM streamed at set duties, alone and beside the tensor and FMA pipes:
DIR/clock/{manifest.json,results.json}.

Runs on the bare GPU machine from the source tree: `python3 -m lapis.gpu.capture_clock_dram --out DIR --provenance
FILE` (benchmarks/h200_clock_dram.sh). Kernel: lapis/gpu/kernels/micro_clock_dram_v1.cu, micro_clock.cu's duty
scheme (lapis.gpu.capture_clock) with a fifth warpgroup that streams 16-byte ld.global.cg loads over a buffer of
STREAM_BYTES, far larger than L2, at HBM duty d_m.

Per point (tensor_duty, fma_duty, dram_duty), over the time after capture_clock.SETTLE_S: capture_clock.summarize's
numbers (probe_mhz, tensor_flop_per_clk_sm, ffma_per_clk_smsp, ...) plus dram_gb_s, the bytes the SMs loaded per
second (the sum over the CTAs of bytes / ns), and nvidia-smi's clock and power in the same window. The points run
twice, forward then backward, after a full-duty warm-up, as capture_clock's do. Nothing in lapis reads this capture
yet: it measures how HBM traffic lowers the SM clock under the 700 W limit, which lapis.model.clock (tensor and FMA
duties only) does not model.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from lapis.gpu import capture_clock as cc
from lapis.gpu import capture_tma, harness
from lapis.gpu.bench_gemm import SmiSampler, smi_gpu_id

KERNEL = Path(__file__).parent / "kernels" / "micro_clock_dram_v1.cu"
THREADS = 640  # micro_clock_dram_v1.cu THREADS: warpgroups 0-1 tensor, 2-3 FMA, 4 HBM
RECORD_WORDS = 8  # micro_clock_dram_v1.cu: micro_clock.cu's 7 words, then the bytes warpgroup 4 loaded
STREAM_BYTES = 4 << 30  # the streamed buffer: 64 x the H200's 60 MiB L2
DRAM_DUTIES = (0.25, 0.5, 0.75, 1.0)
# (tensor, fma, dram): idle, the HBM alone at DRAM_DUTIES, the tensor pipe alone and with the HBM, all three units
POINTS = ((0.0, 0.0, 0.0), *((0.0, 0.0, d) for d in DRAM_DUTIES), (1.0, 0.0, 0.0), (1.0, 0.0, 0.5),
          (1.0, 0.0, 1.0), (1.0, 1.0, 0.0), (1.0, 1.0, 1.0), (0.5, 0.5, 0.0), (0.5, 0.5, 1.0))


def schedule(repeats: int) -> list[tuple[int, tuple[float, float, float]]]:
    """(repeat, point) in run order: POINTS forward, then backward, alternating."""
    return [(r, p) for r in range(repeats) for p in (POINTS if r % 2 == 0 else POINTS[::-1])]


def summarize(rec: np.ndarray, sms: int) -> dict:
    """capture_clock.summarize's numbers from the first 7 words per CTA, and dram_gb_s: the sum over the CTAs of
    the bytes each loaded after the settle mark over its window (bytes / ns = GB/s)."""
    rec = np.asarray(rec, dtype=np.int64).reshape(-1, RECORD_WORDS)
    out = cc.summarize(rec[:, :cc.RECORD_WORDS], sms)
    out["dram_gb_s"] = float((rec[:, 7] / (rec[:, 3] - rec[:, 2])).sum())
    return out


class Runner:
    """The built kernel, its buffers (the records, the sink, the streamed buffer) and the nvidia-smi sampler."""

    def __init__(self, cubin: Path, attrs: dict):
        import cupy as cp
        self.cp, self.grid = cp, attrs["multiProcessorCount"]
        self.fn = cp.RawModule(path=str(cubin)).get_function("micro_clock_dram")
        self.smem = cc.one_cta_smem(attrs)
        self.fn.max_dynamic_shared_size_bytes = self.smem
        self.out = cp.zeros(RECORD_WORDS * self.grid, cp.uint64)
        self.sink = cp.zeros(self.grid * THREADS, cp.float32)
        self.stream = cp.ones(STREAM_BYTES // 4, cp.uint32)  # written once, so every page is backed
        self.smi = SmiSampler(smi_gpu_id())
        self.smi.start()

    def launch(self, tensor_duty: float, fma_duty: float, run_s: float, settle_s: float,
               dram_duty: float = 0.0) -> tuple[float, float]:
        """Run one point; (host time of the launch, host time it finished)."""
        t0 = time.time()
        self.fn((self.grid,), (THREADS,), (np.uint32(round(1000 * tensor_duty)), np.uint32(round(1000 * fma_duty)),
                                           np.uint32(round(1000 * dram_duty)), np.uint32(cc.PERIOD_NS),
                                           np.uint64(int(run_s * 1e9)), np.uint64(int(settle_s * 1e9)),
                                           np.uint32(0), self.stream, np.uint64(STREAM_BYTES // 16), self.out,
                                           self.sink), shared_mem=self.smem)
        self.cp.cuda.Device().synchronize()
        return t0, time.time()

    def point(self, tensor_duty: float, fma_duty: float, dram_duty: float, run_s: float, settle_s: float) -> dict:
        t0, t1 = self.launch(tensor_duty, fma_duty, run_s, settle_s, dram_duty)
        got = summarize(self.out.get(), self.grid)
        w = self.smi.window(t0 + settle_s, t1)
        got.update(smi_mhz=(w.get("sm_clock_mhz") or {}).get("median"), smi_w=(w.get("power_w") or {}).get("median"),
                   smi_samples=w.get("samples", 0), clock_event_reasons=w.get("clock_event_reasons"),
                   temp_c=(w.get("temp_c") or {}).get("median"), host_s=t1 - t0)
        return got


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m lapis.gpu.capture_clock_dram", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output folder; gets clock/ (manifest.json, results.json)")
    ap.add_argument("--provenance", help="JSON from `python -m lapis.captures.provenance` (commit, dirty, blobs)")
    ap.add_argument("--repeats", type=int, default=cc.REPEATS, help=f"runs of every point (default {cc.REPEATS})")
    ap.add_argument("--run-s", type=float, default=cc.RUN_S, help=f"seconds per point (default {cc.RUN_S})")
    a = ap.parse_args(argv)
    if not 0 < cc.SETTLE_S < a.run_s <= 5 or not 1 <= a.repeats <= 4:
        ap.error(f"--run-s must be in ({cc.SETTLE_S}, 5] and --repeats in [1, 4]")
    if not harness.gpu_present():
        print("python -m lapis.gpu.capture_clock_dram: needs an NVIDIA GPU with compute capability 9.0+ (sm_90a) and "
              "cupy", file=sys.stderr)
        return 2
    import cupy as cp
    t_start = time.time()
    prov = capture_tma.provenance(a.provenance, argv, "python -m lapis.gpu.capture_clock_dram")
    props = cp.cuda.runtime.getDeviceProperties(0)
    attrs = {k: int(props[k]) for k in ("multiProcessorCount", "sharedMemPerMultiprocessor", "sharedMemPerBlockOptin")}
    cubin = Path(tempfile.mkdtemp(prefix="lapis-clock-dram-")) / "micro_clock_dram.cubin"
    subprocess.run(cc.NVCC + ["-o", str(cubin), str(KERNEL)], check=True, timeout=300)
    run = Runner(cubin, attrs)
    time.sleep(0.3)  # a first nvidia-smi sample before the first point
    run.launch(1.0, 1.0, cc.WARMUP_S, cc.SETTLE_S, 1.0)
    done = []
    for rep, (td, fd, md) in schedule(a.repeats):
        m = dict(tensor_duty=td, fma_duty=fd, dram_duty=md, repeat=rep)
        try:
            m.update(status="ok", **run.point(td, fd, md, a.run_s, cc.SETTLE_S))
        except Exception as e:  # a failed launch is recorded; after a sticky CUDA error the next ones fail too
            m.update(status="fault", error=f"{type(e).__name__}: {e}"[:300])
        done.append(m)
        print(f"[{time.time() - t_start:5.1f}s] t{td:.2f} f{fd:.2f} m{md:.2f} r{rep} "
              + (f"probe {m['probe_mhz']:6.0f} MHz  smi {m['smi_mhz'] or 0:6.0f} MHz {m['smi_w'] or 0:5.0f} W  "
                 f"tensor {m['tensor_flop_per_clk_sm']:6.0f} FLOP/clk/SM  ffma {m['ffma_per_clk_smsp']:.3f}  "
                 f"HBM {m['dram_gb_s']:6.0f} GB/s  SMs {m['distinct_sms']}"
                 if m["status"] == "ok" else m["error"]), flush=True)
    run.smi.stop.set()
    cc.write(Path(a.out), dict(device_attributes=attrs, sm_count=attrs["multiProcessorCount"], threads=THREADS,
                               period_ns=cc.PERIOD_NS, run_s=a.run_s, settle_s=cc.SETTLE_S, warmup_s=cc.WARMUP_S,
                               stream_bytes=STREAM_BYTES, points=done,
                               units=dict(cc.UNITS, dram_gb_s="GB/s the SMs loaded from the streamed buffer (sum "
                                          "over CTAs of bytes / ns)")),
             "lapis/gpu/kernels/micro_clock_dram_v1.cu", prov, t_start)
    return 0 if all(m["status"] == "ok" for m in done) else 1


if __name__ == "__main__":
    sys.exit(main())
