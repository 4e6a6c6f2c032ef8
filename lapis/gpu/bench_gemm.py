"""Time the warp-specialized GEMM (kernels/gemm_ws.cu) against cuBLAS on an sm_90a GPU, with timelines.

`python -m lapis.gpu.bench_gemm --out DIR --provenance FILE` (GPU machine: numpy, cupy, torch, nvcc) writes
DIR/manifest.json, DIR/timelines/<variant>_<size>.npz and prints a table. For every variant and size:
- correctness: fresh normal bf16 A (M x K) and B (N x K), C poisoned with NaN, ||C - ref|| / ||ref|| < 1e-2
  against torch's fp32 matmul of the same bf16 inputs (plain and timeline builds);
- time: CUDA events around each launch, warm-up first, median and spread_pct = IQR / median; every run
  takes the next of several input sets (together over 3x the L2) so L2 never serves a repeat; the GPU
  queue is filled ahead (torch.cuda._sleep) so host launch gaps stay outside the events;
- cuBLAS (torch.mm bf16, same inputs, same way) in the same process;
- SM clock, memory clock and power sampled by nvidia-smi during each timed block (clocks never changed);
- the timeline build (-DLAPIS_TIMELINE=1) timed the same way: its overhead against the plain build;
- one timeline launch: records of the CTAs that ran on SMs 0 and 1 (their whole sequence) and of CTAs 0-7,
  raw (harness.RECORD_DTYPE) with counts, plus per-CTA start/end/SM for every CTA.
Then the watchdog demo: an mbarrier nobody arrives at must come back as a watchdog Status, and a bar.sync
deadlock as a subprocess timeout (`harness.KernelHang`). Kernels run in a child process with a timeout; a
hang names the kernel and parameters it was running.
`--sources` prints the source files to pass to `python -m lapis.captures.provenance` (CPU side, where git is).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from lapis.catalog.gemm import (  # noqa: F401 (re-exported: the bench's callers read them here)
    DEFAULT_SIZES,
    DEFAULT_VARIANTS,
    VARIANTS,
    kernel_name,
    sim_params,
)
from lapis.errors import ScheduleError
from lapis.gpu import capture_tma, harness
from lapis.gpu.capture_tma import encode
from lapis.gpu.gemm_plan import ROLES, load
from lapis.gpu.harness import libcuda

HERE = Path(__file__).parent
KERNEL, HANG_KERNEL = HERE / "kernels" / "gemm_ws.cu", HERE / "kernels" / "hang_test.cu"
SOURCES = ("lapis/catalog/gemm.py", "lapis/gpu/bench_gemm.py", "lapis/gpu/harness.py", "lapis/gpu/gemm_plan.py", "lapis/gpu/gen_wgmma_ss.py",
           "lapis/gpu/capture_tma.py", "lapis/gpu/kernels/gemm_ws.cu", "lapis/gpu/kernels/gemm_ws_variants.inc",
           "lapis/gpu/kernels/gemm_ws_plan.h", "lapis/gpu/kernels/gemm_ws_plan.json", "lapis/gpu/kernels/harness.cuh",
           "lapis/gpu/kernels/pipeline.cuh", "lapis/gpu/kernels/sm90.cuh", "lapis/gpu/kernels/wgmma_bf16_ss.cuh", "lapis/gpu/kernels/hang_test.cu", "lapis/gpu/ablate_gemm.py")
TOLERANCE = 1e-2
L2_BYTES = 50 * 2**20  # H200 L2; input sets cover 3x this
WATCHDOG_NS = 1_000_000_000  # per mbarrier wait in the GEMM; the demo uses 20 ms
SAVED_SMS = (0, 1)
SAVED_FIRST_CTAS = 8


def smem_bytes(v: dict, plan: dict) -> int:
    """Dynamic shared memory of a variant: the ring plus 1 KiB to align it (gemm_ws.cu Config::SMEM_BYTES)."""
    return v["stages"] * (plan["a"]["slot_bytes"] + plan["b"][str(v["block_n"])]["slot_bytes"]) + 1024


def timeline_capacity(v: dict, k: int) -> int:
    """Record slots per CTA: the row interleaves len(gemm_plan.ROLES) roles (harness.role_slots), each with room
    for the most records one role writes: producer 1 + 2 per K block; each consumer 1 + 3 per K block + 1;
    plus 4 of slack per role."""
    kb = k // sim_params(v)["block_k"]
    return harness.role_slots(max(1 + 2 * kb, 2 + 3 * kb) + 4, len(ROLES))


def check_shape(v: dict, m: int, n: int, k: int) -> None:
    t = sim_params(v)
    for what, ext, blk in (("M", m, t["block_m"]), ("N", n, t["block_n"]), ("K", k, t["block_k"])):
        if ext % blk:
            raise ScheduleError(f"gemm_ws needs {what} to be a multiple of its block", f"{what} = {ext}, block {blk}",
                                f"pad {what} to a multiple of {blk}")


def spread_pct(times) -> float:
    q1, med, q3 = np.percentile(np.asarray(times, float), [25, 50, 75])
    return float(100 * (q3 - q1) / med)


def stats(times_ms) -> dict:
    t = np.asarray(times_ms, float) * 1e3
    return dict(median_us=float(np.median(t)), spread_pct=spread_pct(t), runs=int(t.size), min_us=float(t.min()),
                q1_us=float(np.percentile(t, 25)), q3_us=float(np.percentile(t, 75)))


# ------------------------------------------------------------------------------ nvidia-smi sampler --

SMI_FIELDS = ("clocks.sm", "clocks.mem", "power.draw", "temperature.gpu", "clocks_event_reasons.active")


class SmiSampler(threading.Thread):
    """Polls nvidia-smi for the GPU's clocks and power in the background; `window(t0, t1)` summarises it."""

    def __init__(self, gpu: str):
        super().__init__(daemon=True)
        self.gpu, self.samples, self.stop = gpu, [], threading.Event()

    def run(self):
        fields = list(SMI_FIELDS)
        while not self.stop.is_set():
            t = time.time()
            cmd = ["nvidia-smi", "-i", self.gpu, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
                row = p.stdout.strip().split(", ")
                if p.returncode == 0 and len(row) == len(fields):
                    self.samples.append((t, *[_num(x) for x in row], *[None] * (len(SMI_FIELDS) - len(fields))))
                elif len(fields) == len(SMI_FIELDS):  # an older driver without clocks_event_reasons
                    fields.pop()
                elif self.gpu != "0":  # the PCI bus id was not understood: the first visible GPU
                    self.gpu = "0"
            except Exception:  # a missed sample is a gap, not an error
                pass
            self.stop.wait(0.02)

    def window(self, t0: float, t1: float) -> dict:
        inside = [s for s in self.samples if t0 <= s[0] <= t1]
        near = inside or sorted(self.samples, key=lambda s: min(abs(s[0] - t0), abs(s[0] - t1)))[:2]
        if not near:
            return dict(samples=0)
        cols = list(zip(*near))
        out = dict(samples=len(inside), nearest_only=not inside)
        for name, col in zip(("sm_clock_mhz", "mem_clock_mhz", "power_w", "temp_c"), cols[1:5]):
            vals = [c for c in col if isinstance(c, float)]
            if vals:
                out[name] = dict(median=float(np.median(vals)), min=min(vals), max=max(vals))
        out["clock_event_reasons"] = sorted({str(c) for c in cols[5]})
        return out


def _num(x: str):
    try:
        return float(x)
    except ValueError:
        return x


# ---------------------------------------------------------------------------------- GPU worker --

class Gemm:
    """One variant of gemm_ws in one build (plain or timeline), launchable on input sets."""

    def __init__(self, cp, module, v: dict, plan: dict, out: str = "bf16"):
        self.cp, self.v, self.plan = cp, v, plan
        self.fn = module.get_function(kernel_name(v, out))
        self.smem = smem_bytes(v, plan)
        self.fn.max_dynamic_shared_size_bytes = self.smem
        self.threads = 128 * (v["consumer_wgs"] + 1)

    def tensor_maps(self, lib, a_ptr: int, b_ptr: int, m: int, n: int, k: int):
        tm = self.plan["tensor_map"]
        maps = []
        for ptr, rows, op in ((a_ptr, m, self.plan["a"]), (b_ptr, n, self.plan["b"][str(self.v["block_n"])])):
            case = dict(dtype=tm["dtype_code"], rank=2, dims=[k, rows], strides=[k * 2], box=op["box"],
                        elem_strides=[1, 1], interleave=tm["interleave_code"], swizzle=tm["swizzle_code"],
                        l2=tm["l2_code"], oob=tm["oob_code"])
            code, name, raw = encode(lib, case, ptr)
            if code:
                raise RuntimeError(f"cuTensorMapEncodeTiled rejected {case}: {name}")
            t = np.zeros((), np.dtype([("opaque", np.uint64, (16,))], align=True))
            t["opaque"] = np.frombuffer(raw, np.uint64)
            maps.append(t)
        return maps

    def launch(self, maps, c_out, m: int, n: int, k: int, hargs) -> None:
        grid = (m // sim_params(self.v)["block_m"]) * (n // self.v["block_n"])
        self.fn((grid,), (self.threads,), (maps[0][()], maps[1][()], c_out, np.int32(m), np.int32(n), np.int32(k),
                                           hargs[()]), shared_mem=self.smem)


def _time(cp, torch, launch, n_sets: int, warmup: int, min_runs: int, min_s: float, est_us: float, smi) -> dict:
    """Per-launch CUDA event times (ms) of launch(set_index), the queue filled ahead by a GPU sleep."""
    for i in range(warmup):
        launch(i % n_sets)
    cp.cuda.Device().synchronize()
    runs = int(max(min_runs, min(4000, min_s * 1e6 / max(est_us, 1.0))))
    times, t0 = [], time.time()
    for start in range(0, runs, 200):
        block = min(200, runs - start)
        evs = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(block)]
        torch.cuda._sleep(int(block * 60e-6 * 2e9))  # ~60 us of host enqueue per run at ~2 GHz
        for i, (e0, e1) in enumerate(evs):
            e0.record()
            launch((start + i) % n_sets)
            e1.record()
        evs[-1][1].synchronize()
        times += [cp.cuda.get_elapsed_time(e0, e1) for e0, e1 in evs]
    r = stats(times)
    r["clocks"] = smi.window(t0, time.time()) if smi else {}
    return r


def _rel_err(torch, out, ref) -> float:
    d = torch.linalg.vector_norm(out.float() - ref) / torch.linalg.vector_norm(ref)
    return float(d)


def select_ctas(cta_sm: np.ndarray, sms=SAVED_SMS, first=SAVED_FIRST_CTAS) -> np.ndarray:
    """CTAs whose timelines are saved: every CTA that ran on one of `sms` and CTAs 0..first-1."""
    return np.flatnonzero(np.isin(cta_sm, sms) | (np.arange(cta_sm.size) < first))


def cta_table(records: np.ndarray, counts: np.ndarray) -> dict:
    """Per CTA: SM, first and last record time (ns, absolute %globaltimer), records attempted."""
    t = records["t_ns"].astype(np.int64)
    valid = harness.written(records, counts)
    big = np.iinfo(np.int64).max
    first = np.where(valid, t, big).min(axis=1)
    last = np.where(valid, t, -1).max(axis=1)
    return dict(sm=records["sm"][:, 0].astype(np.int32), t_first_ns=first, t_last_ns=last, counts=counts)


def interval_median_ns(records: np.ndarray, counts: np.ndarray, role: int, op: int) -> float | None:
    """Median gap between consecutive (role, op) records of the same CTA: the steady K-block period."""
    sel = harness.written(records, counts) & (records["role"] == role) & ((records["op"] & 0x7F) == op)
    gaps = []
    for row, mask in zip(records, sel):
        t = row["t_ns"][mask].astype(np.int64)
        if t.size > 2:
            gaps.append(np.diff(t)[1:])  # the first K block fills the ring: not steady
    return float(np.median(np.concatenate(gaps))) if gaps else None


class Worker:
    """The GPU child: every size, cuBLAS and each variant's plain and timeline builds; results.json after each."""

    def __init__(self, a):
        import cupy as cp
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False  # the reference is true fp32
        self.cp, self.torch, self.a, self.work = cp, torch, a, Path(a.work)
        self.cfg = json.loads((self.work / "worker.json").read_text())
        self.plan, self.lib = self.cfg["plan"], libcuda()
        cp.zeros(1)  # the primary context is current before the driver calls (Status, tensor maps)
        self.mods = {b: harness.load(p) for b, p in self.cfg["cubins"].items()}
        self.status = harness.Status()
        self.smi = SmiSampler(self.cfg["smi_gpu"])
        self.results = []
        (self.work / "versions.json").write_text(json.dumps(dict(
            torch=torch.__version__, torch_cuda=torch.version.cuda, cublas_via="torch.mm (bf16, out=)")))

    def progress(self, what: str) -> None:
        (self.work / "progress").write_text(what)

    def save(self, partial=None) -> None:
        (self.work / "results.json").write_text(json.dumps(self.results + ([partial] if partial else [])))

    def time(self, launch, n_sets: int, est_us: float) -> dict:
        return _time(self.cp, self.torch, launch, n_sets, self.a.warmup, self.a.runs, self.a.min_seconds, est_us,
                     self.smi)

    def run(self) -> None:
        self.smi.start()
        for size in self.cfg["sizes"]:
            self.results.append(self.size(size))
            self.save()
            self.torch.cuda.empty_cache()
        self.smi.stop.set()
        self.progress("done")

    def size(self, size: int) -> dict:
        torch, m, n, k = self.torch, size, size, size
        set_bytes = (m + n) * k * 2
        n_sets = max(2, -(-3 * L2_BYTES // set_bytes))
        gen = torch.Generator(device="cuda").manual_seed(size)
        sets = [(torch.randn(m, k, device="cuda", generator=gen).to(torch.bfloat16),
                 torch.randn(n, k, device="cuda", generator=gen).to(torch.bfloat16)) for _ in range(n_sets)]
        ref = sets[0][0].float() @ sets[0][1].float().T
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        est = 2.0 * m * n * k / 600e12 * 1e6  # us at 600 TFLOP/s: only sizes the timed block
        entry = dict(size=size, shape=f"{m}x{n}x{k}", input_sets=n_sets, input_set_bytes=set_bytes, variants={})
        self.progress(f"cuBLAS torch.mm bf16 at {size}^3")
        entry["cublas"] = ({} if self.cfg.get("check_only") else
                           self.time(lambda i: torch.mm(sets[i][0], sets[i][1].T, out=c), n_sets, est))
        c.fill_(float("nan"))
        torch.mm(sets[0][0], sets[0][1].T, out=c)
        entry["cublas"]["rel_err"] = _rel_err(torch, c, ref)
        for name in self.cfg["variants"]:
            v = VARIANTS[name]
            check_shape(v, m, n, k)
            ve = entry["variants"][name] = dict(params=sim_params(v), kernel=kernel_name(v))
            for build in ("plain",) if self.cfg.get("check_only") else ("plain", "timeline"):
                self.progress(f"{kernel_name(v)} ({build} build) at {size}^3, params {sim_params(v)}")
                ve[build] = self.variant(name, v, build, sets, ref, c, size, est)
                self.save(entry)
            if "timeline" in ve:
                ve["timeline_overhead_pct"] = 100 * (ve["timeline"]["median_us"] / ve["plain"]["median_us"] - 1)
        if size == self.cfg["sizes"][0]:  # fp32 output of the baseline variant, correctness only
            v = VARIANTS[DEFAULT_VARIANTS[0]]
            self.progress(f"{kernel_name(v, 'f32')} at {size}^3 (fp32 C, correctness)")
            g = Gemm(self.cp, self.mods["plain"], v, self.plan, "f32")
            c32 = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
            g.launch(g.tensor_maps(self.lib, sets[0][0].data_ptr(), sets[0][1].data_ptr(), m, n, k),
                     self.cp.from_dlpack(c32), m, n, k, harness.harness_args(self.status, timeout_ns=WATCHDOG_NS))
            harness.synchronize(self.status, f"{kernel_name(v, 'f32')} at {size}^3")
            err = _rel_err(torch, c32, ref)
            entry["fp32_out"] = dict(kernel=kernel_name(v, "f32"), rel_err=err, correct=bool(err < TOLERANCE))
        return entry

    def variant(self, name, v, build, sets, ref, c, size, est) -> dict:
        cp, m, n, k = self.cp, size, size, size
        g = Gemm(cp, self.mods[build], v, self.plan)
        maps = [g.tensor_maps(self.lib, s[0].data_ptr(), s[1].data_ptr(), m, n, k) for s in sets]
        cap = timeline_capacity(v, k) if build == "timeline" else 0
        tiles = (m // sim_params(v)["block_m"]) * (n // v["block_n"])
        slots = harness.timeline_slots(cap) if cap else 0  # cap records + the two clock anchors
        rec = cp.zeros(tiles * slots * harness.RECORD_DTYPE.itemsize, cp.uint8) if cap else None
        counts = cp.zeros(tiles, cp.uint32) if cap else None
        hargs = harness.harness_args(self.status, rec.data.ptr if cap else 0, counts.data.ptr if cap else 0, slots,
                                     WATCHDOG_NS, roles=len(ROLES))
        c_cp = cp.from_dlpack(c)

        def once(i: int = 0):
            g.launch(maps[i], c_cp, m, n, k, hargs)

        what = f"{kernel_name(v)} ({build} build) at {size}^3"
        c.fill_(float("nan"))
        once()
        harness.synchronize(self.status, what)
        # --check-only: correctness without timing, so a prediction can be committed before the first timed run
        r = {} if self.cfg.get("check_only") else self.time(once, len(sets), est)
        harness.check_status(self.status, what)
        c.fill_(float("nan"))  # the timed runs rotate sets: check one more launch on set 0
        once()
        harness.synchronize(self.status, what)
        r["rel_err_set0"] = _rel_err(self.torch, c, ref)
        r["correct"] = bool(r["rel_err_set0"] < TOLERANCE)
        if cap:
            counts.fill(0)
            once()
            harness.synchronize(self.status, what)
            cnt = counts.get()
            raw = rec.get().view(harness.RECORD_DTYPE).reshape(tiles, slots)
            records, clock_mhz = harness.anchored_to_ns(raw, cnt)  # ns, anchors dropped, before saving
            r.update(_timeline(records, cnt, self.plan, self.work, f"{name}_{size}", clock_mhz))
        return r


def _timeline(records: np.ndarray, cnt: np.ndarray, plan: dict, work: Path, tag: str, clock_mhz: np.ndarray) -> dict:
    """Save the selected CTAs' records (ns) and every CTA's span and mean SM clock (MHz); summarise the
    recorded launch."""
    table = dict(cta_table(records, cnt), clock_mhz=clock_mhz)
    keep = select_ctas(table["sm"])
    np.savez_compressed(work / "timelines" / f"{tag}.npz", records=records[keep], counts=cnt[keep], ctas=keep,
                        roles=np.array(plan["roles"]), ops=np.array(plan["ops"]),
                        **{f"cta_{key}": val for key, val in table.items()})
    ops = {o: i for i, o in enumerate(plan["ops"])}
    return dict(file=f"timelines/{tag}.npz", capacity=int(records.shape[1]), ctas_saved=int(keep.size),
                records=int(harness.written(records, cnt).sum()),
                overflow=int(cnt.astype(np.int64).sum() - harness.written(records, cnt).sum()),
                kernel_span_us=float((table["t_last_ns"].max() - table["t_first_ns"].min()) / 1e3),
                cta_span_us_median=float(np.median(table["t_last_ns"] - table["t_first_ns"]) / 1e3),
                kblock_period_ns_median=interval_median_ns(records, cnt, 1, ops["wait full"]))


# ------------------------------------------------------------------------------------- watchdog demo --

def _hang_worker(a) -> None:
    """Child: launch one hang_test kernel and print its Status as JSON (the last stdout line)."""
    import cupy as cp
    cp.zeros(1)
    fn = harness.load(a.cubin).get_function(a.kernel)
    status = harness.Status()
    args = () if a.kernel == "hang_bar_sync" else (harness.harness_args(status, timeout_ns=20_000_000)[()],)
    err = None
    try:
        fn((1,), (64 if a.kernel == "hang_bar_sync" else 128,), args)
        cp.cuda.Device().synchronize()
    except Exception as exc:  # the trap kills the context: the Status in host memory survives
        err = f"{type(exc).__name__}: {exc}"
    print(json.dumps(dict(kernel=a.kernel, launch_error=err, status=status.read())), flush=True)


def watchdog_demo(cubin: Path) -> dict:
    out = {}
    for kernel, timeout in (("mbarrier_ok", 60), ("hang_mbarrier", 60), ("hang_bar_sync", 12)):
        argv = [sys.executable, "-m", "lapis.gpu.bench_gemm", "_hang", "--cubin", str(cubin), "--kernel", kernel]
        t0 = time.time()
        try:
            p = harness.run_guarded(argv, timeout, f"{kernel} (hang_test.cu, 1 CTA)")
            last = (p.stdout.strip().splitlines() or ["{}"])[-1]
            out[kernel] = dict(returncode=p.returncode, result=json.loads(last), stderr_tail=p.stderr[-300:])
        except harness.KernelHang as exc:
            out[kernel] = dict(kernel_hang=str(exc))
        out[kernel]["wall_s"] = round(time.time() - t0, 2)
    ok = out["mbarrier_ok"].get("result", {}).get("status", {}).get("code") == 0
    st = out["hang_mbarrier"].get("result", {}).get("status", {})
    out["verdict"] = dict(control_ok=ok, mbarrier_watchdog=st.get("status") == "mbarrier timeout" and
                          st.get("barrier") == 7, bar_sync_timeout="kernel_hang" in out["hang_bar_sync"])
    return out


# ------------------------------------------------------------------------------------------ driver --

def smi_gpu_id() -> str:
    """nvidia-smi's id (PCI bus id) of CUDA device 0, which CUDA_VISIBLE_DEVICES may have renumbered."""
    import cupy as cp
    try:
        p = cp.cuda.runtime.getDeviceProperties(0)
        return f"{p['pciDomainID']:08X}:{p['pciBusID']:02X}:{p['pciDeviceID']:02X}.0"
    except (KeyError, TypeError):
        return "0"


def build_all() -> dict:
    """The plain and timeline builds of gemm_ws.cu and hang_test.cu, in parallel; ptxas reports per kernel."""
    from concurrent.futures import ThreadPoolExecutor
    jobs = {"plain": (KERNEL, {}), "timeline": (KERNEL, {"LAPIS_TIMELINE": 1}), "hang": (HANG_KERNEL, {})}
    with ThreadPoolExecutor(3) as ex:
        done = {b: ex.submit(harness.build, src, d) for b, (src, d) in jobs.items()}
    return {b: dict(cubin=str(f.result()[0]), ptxas=f.result()[1], defines=jobs[b][1]) for b, f in done.items()}


def table(results: list, demo: dict | None) -> str:
    lines = [f"{'shape':<16}{'kernel':<16}{'median us':>11}{'spread %':>10}{'TFLOP/s':>9}{'vs cuBLAS':>10}"
             f"{'tl ovh %':>9}{'rel err':>10}{'SM MHz':>8}"]
    for e in results:
        flop = 2.0 * e["size"] ** 3
        rows = [("cuBLAS", e["cublas"], None, e["cublas"]["rel_err"])]
        rows += [(n, ve["plain"], ve.get("timeline_overhead_pct"), ve["plain"]["rel_err_set0"])
                 for n, ve in e["variants"].items() if "plain" in ve]
        for name, r, ovh, err in rows:
            if "median_us" not in r:  # --check-only: correctness only
                lines.append(f"{e['shape']:<16}{name:<16}{'-':>11}{'-':>10}{'-':>9}{'-':>10}{'':>9}"
                             f"{'-' if err is None else f'{err:.1e}':>10}")
                continue
            clk = r.get("clocks", {}).get("sm_clock_mhz", {}).get("median")
            lines.append(f"{e['shape']:<16}{name:<16}{r['median_us']:>11.1f}{r['spread_pct']:>10.2f}"
                         f"{flop / r['median_us'] / 1e6:>9.0f}{r['median_us'] / e['cublas']['median_us']:>10.3f}"
                         f"{'' if ovh is None else f'{ovh:.1f}':>9}{err:>10.1e}{'' if clk is None else f'{clk:.0f}':>8}")
    if demo:
        lines.append("watchdog demo: " + ", ".join(f"{k}={v}" for k, v in demo["verdict"].items()))
    return "\n".join(lines)


def write_manifest(dest: Path, prov: dict, builds: dict, results: list, demo, error, argv, plan: dict,
                   wall_s: float) -> dict:
    man = dict(
        provenance=prov, kernel="lapis/gpu/kernels/gemm_ws.cu", plan="lapis/gpu/kernels/gemm_ws_plan.json",
        schedule="h200-gemm-ws", variants={n: sim_params(VARIANTS[n]) for e in results for n in e["variants"]},
        units=dict(time="us (CUDA events per launch)", spread_pct="100 * IQR / median over the timed runs",
                   rel_err="||C - ref||_2 / ||ref||_2, ref = fp32 matmul of the bf16 inputs",
                   timeline="records: harness.RECORD_DTYPE [ctas, capacity], t_ns absolute %globaltimer ns "
                            "(interpolated from %clock64 between each CTA's clock anchors: harness.anchored_to_ns); "
                            "cta_clock_mhz: each CTA's mean SM clock; "
                            "decode with lapis.gpu.harness.decode_timeline(records, counts, roles, ops)"),
        tolerance=TOLERANCE, builds=builds, results=results, watchdog_demo=demo, error=error,
        plan_summary=dict(block_m=plan["block_m"], block_k=plan["block_k"], group_m=plan["group_m"]),
        command=" ".join(["python -m lapis.gpu.bench_gemm"] + argv), wall_s=round(wall_s, 1))
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "manifest.json").write_text(json.dumps(man, indent=1, default=_json_default))
    return man


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(type(o))


def run(a, argv: list[str]) -> int:
    import shutil

    t0 = time.time()
    dest = Path(a.out)
    (dest / "timelines").mkdir(parents=True, exist_ok=True)
    prov = capture_tma.provenance(a.provenance, argv, "python -m lapis.gpu.bench_gemm")
    plan = load()
    builds = build_all()
    print(f"[{time.time() - t0:5.1f}s] built: " + ", ".join(
        f"{b}/{k}: {r['registers']} regs, {r['spill_stores']}+{r['spill_loads']} B spill"
        for b in ("plain", "timeline") for k, r in sorted(builds[b]["ptxas"].items())), flush=True)
    work = Path(tempfile.mkdtemp(prefix="lapis-gemm-"))
    (work / "timelines").mkdir()
    (work / "worker.json").write_text(json.dumps(dict(
        plan=plan, sizes=a.sizes, variants=a.variants, smi_gpu=smi_gpu_id(), check_only=a.check_only,
        cubins={b: builds[b]["cubin"] for b in ("plain", "timeline")})))
    child = [sys.executable, "-m", "lapis.gpu.bench_gemm", "_worker", "--work", str(work), "--runs", str(a.runs),
             "--warmup", str(a.warmup), "--min-seconds", str(a.min_seconds)]
    error = None
    try:
        p = harness.run_guarded(child, a.timeout, "the GEMM worker")
        if p.returncode:
            error = f"worker rc {p.returncode} while running {_read(work / 'progress')}: {p.stderr[-1500:]}"
    except harness.KernelHang as exc:
        error = f"hang while running {_read(work / 'progress')}: {exc}"
    print(f"[{time.time() - t0:5.1f}s] worker done" + (f"; ERROR {error}" if error else ""), flush=True)
    results = json.loads(_read(work / "results.json") or "[]")
    prov.update(json.loads(_read(work / "versions.json") or "{}"))
    for f in (work / "timelines").glob("*.npz"):
        shutil.copy(f, dest / "timelines" / f.name)
    demo = None if a.no_demo else watchdog_demo(Path(builds["hang"]["cubin"]))
    write_manifest(dest, prov, builds, results, demo, error, argv, plan, time.time() - t0)
    print(table(results, demo))
    print(f"[{time.time() - t0:5.1f}s] wrote {dest / 'manifest.json'}")
    return 1 if error else 0


def _read(p: Path) -> str:
    return p.read_text() if p.exists() else ""


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_worker"]:
        w = argparse.ArgumentParser()
        w.add_argument("_worker")
        w.add_argument("--work", required=True)
        w.add_argument("--runs", type=int, default=200)
        w.add_argument("--warmup", type=int, default=20)
        w.add_argument("--min-seconds", type=float, default=0.25)
        Worker(w.parse_args(argv)).run()
        return 0
    if argv[:1] == ["_hang"]:
        h = argparse.ArgumentParser()
        h.add_argument("_hang")
        h.add_argument("--cubin", required=True)
        h.add_argument("--kernel", required=True, choices=("mbarrier_ok", "hang_mbarrier", "hang_bar_sync"))
        _hang_worker(h.parse_args(argv))
        return 0
    ap = build_parser()
    a = ap.parse_args(argv)
    if a.sources:
        print(" ".join(SOURCES))
        return 0
    if not a.out:
        ap.error("--out is required")
    bad = [v for v in a.variants if v not in VARIANTS]
    if bad:
        ap.error(f"unknown variants {bad}; choose from {', '.join(VARIANTS)}")
    if not harness.gpu_present():
        print("lapis capture gemm: needs an NVIDIA GPU with compute capability 9.0+ (sm_90a), cupy and torch",
              file=sys.stderr)
        return 2
    return run(a, argv)


def build_parser() -> argparse.ArgumentParser:
    """The options of `lapis capture gemm` (also `python -m lapis.gpu.bench_gemm`). --runs and --timeout are
    the deprecated spellings of --repeats and --timeout-s (hidden; lapis.cli.parser.DEPRECATED_OPTIONS)."""
    ap = argparse.ArgumentParser(prog="lapis capture gemm", description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--out", help="output folder: manifest.json and timelines/ (GPU only)")
    ap.add_argument("--provenance", help="JSON from `python -m lapis.captures.provenance $(... --sources)`, made where git is")
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=list(DEFAULT_SIZES),
                    help="cube sizes M = N = K, comma-separated (default 2048,4096,8192)")
    ap.add_argument("--variants", type=lambda s: s.split(","), default=list(DEFAULT_VARIANTS),
                    help=f"comma-separated, from {', '.join(VARIANTS)} (default: the first three)")
    ap.add_argument("--repeats", dest="runs", metavar="N", type=int, default=200,
                    help="least timed launches per kernel (default 200)")
    ap.add_argument("--runs", dest="runs", type=int, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--min-seconds", type=float, default=0.25, help="least timed GPU seconds per kernel")
    ap.add_argument("--timeout-s", dest="timeout", metavar="SECONDS", type=float, default=200,
                    help="seconds before the worker counts as hung (default 200)")
    ap.add_argument("--timeout", dest="timeout", type=float, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    ap.add_argument("--no-demo", action="store_true", help="skip the watchdog demo")
    ap.add_argument("--check-only", action="store_true",
                    help="correctness and the watchdog demo only, no timing (run before predictions are committed)")
    ap.add_argument("--sources", action="store_true", help="print the sources to pass to lapis.captures.provenance and exit")
    return ap


if __name__ == "__main__":
    sys.exit(main())
