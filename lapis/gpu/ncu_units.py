"""Per-unit hardware counters of attention and GEMM kernels, lapis's and third-party, from Nsight Compute.

    python -m lapis.gpu.ncu_units --out DIR [--kernels s3,s5,s9,s9:causal,gemm,flash,cudnn,fa4]
                                  [--shape 8x16x4096x128] [--gemm-size 8192] [--provenance FILE] [--flash-sass]
                                  [--source s2,s14,fa4]

Each kernel is profiled in its own child process under `ncu --clock-control none` (the board's own clock, as the
timed runs see it), one launch after three warm-up launches, bracketed by cudaProfilerStart/Stop
(`--profile-from-start off`) and filtered by kernel name. The metrics asked for are those of CANDIDATES that
`ncu --query-metrics` lists for the GPU; the rest are recorded as missing. Units are Nsight Compute's, recorded
per metric beside its value: cycles, instructions (warp-level, summed over the SMs), bytes, %, cycle/second.

--source writes, per kernel named, Nsight Compute's source page (SourceCounters: per SASS instruction its executed
count and its warp-stall samples by reason) as DIR/<kernel>_source.csv.gz (`--page source --print-source sass
--csv`), one launch after the warm-up; cuDNN is never asked for (see below).

fa4 (FA4's CuTe-DSL sm90 forward) needs LAPIS_FA4_SITE, a folder of its unpacked wheels; fa4_bhsd runs it on
views of the B x H x L x D inputs (lapis.gpu.race). Warp-stall reasons
(STALLS) are recorded per issue-active cycle where the GPU has them.

--flash-sass also writes the SASS of torch's flash kernel (FA2): `cuobjdump -sass -fun <mangled name>` on torch's
CUDA library, and Nsight Compute's per-instruction executed counts (SourceCounters, `--page source
--print-source sass`). No cuDNN instruction is disassembled (its license forbids it): cuDNN gets counters only.

Writes DIR/manifest.json (schema lapis.ncu-units/1: provenance, ncu version, metrics found and missing, one entry
per kernel with its demangled name, launch configuration and metric values). GPU only: sm_90a, cupy, torch, ncu.
The child mode (`--launch KERNEL`) is what ncu runs.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

# Why warps did not issue (ncu's warp-state sampling reasons), per issue-active cycle.
STALLS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle", "long_scoreboard",
          "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction", "not_selected", "selected",
          "short_scoreboard", "sleeping", "tex_throttle", "wait")
# What the per-unit comparison reads. Rollups: .sum over the SMs, .avg per SM, .pct_of_peak_sustained_*.
PIPES = ("fma", "fmaheavy", "fmalite", "alu", "xu", "lsu", "adu", "cbu", "uniform", "fp16", "fp64",
         "tensor_op_hmma", "tensor_op_gmma", "tensor", "shared")
CANDIDATES = (
    ["gpu__time_duration.sum", "sm__cycles_elapsed.avg", "sm__cycles_elapsed.max", "sm__cycles_elapsed.avg.per_second",
     "sm__cycles_active.avg", "smsp__cycles_active.avg", "gpc__cycles_elapsed.max",
     "sm__inst_executed.sum", "smsp__inst_executed.sum", "smsp__inst_issued.sum",
     "smsp__issue_active.avg.pct_of_peak_sustained_active", "smsp__issue_active.avg.pct_of_peak_sustained_elapsed",
     "sm__inst_issued.avg.pct_of_peak_sustained_active", "smsp__warps_active.avg.per_cycle_active",
     "sm__warps_active.avg.pct_of_peak_sustained_active",
     "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum",
     "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum", "smsp__inst_executed_op_shared_ld.sum",
     "launch__grid_size", "launch__block_size", "launch__registers_per_thread",
     "launch__shared_mem_per_block_dynamic", "launch__shared_mem_per_block_static", "launch__occupancy_limit_registers",
     "launch__occupancy_limit_shared_mem", "launch__waves_per_multiprocessor", "launch__thread_count"]
    + [f"sm__inst_executed_pipe_{p}.sum" for p in PIPES]
    + [f"sm__pipe_{p}_cycles_active.avg" for p in PIPES]
    + [f"sm__pipe_{p}_cycles_active.avg.pct_of_peak_sustained_elapsed" for p in PIPES]
    + [f"smsp__inst_executed_pipe_{p}.sum" for p in ("xu", "fma", "alu", "lsu")]
    + [f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio" for r in STALLS]
)
DEFAULT_KERNELS = ("s3", "s5", "s9", "s9:causal", "gemm", "flash", "cudnn")
# Kernel-name filters (ncu -k regex:), by what the launch runs.
THIRD_PARTY_FILTER = {"flash": "flash_fwd", "cudnn": "fprop|flash|fmha|attn", "fa4": "FlashAttentionForwardSm90|Sm90",
                      "fa4_bhsd": "FlashAttentionForwardSm90|Sm90"}
WARMUP = 3


def ncu_bin() -> str:
    return shutil.which("ncu") or "/usr/local/cuda/bin/ncu"


def available(metrics: list[str]) -> tuple[list[str], list[str], str]:
    """(present, missing, raw listing): a metric is present when its base name (before the first dot) is listed."""
    p = subprocess.run([ncu_bin(), "--query-metrics", "--csv"], capture_output=True, text=True, timeout=120)
    names = {row[0].strip('"') for row in csv.reader(io.StringIO(p.stdout)) if row}
    if len(names) < 50:  # no listing: ask for everything and let ncu say
        return list(metrics), [], p.stdout + p.stderr

    def base(m):
        return m.split(".")[0]
    return [m for m in metrics if base(m) in names], [m for m in metrics if base(m) not in names], p.stdout


def parse_raw_csv(text: str) -> list[dict]:
    """ncu --csv --page raw: a header row, a units row, one row per profiled kernel -> [{name: (value, unit)}]."""
    rows = [r for r in csv.reader(io.StringIO(text[text.find('"ID"'):])) if r]
    if len(rows) < 3:
        return []
    head, units = rows[0], rows[1]
    out = []
    for r in rows[2:]:
        d = {}
        for h, u, v in zip(head, units, r):
            try:
                d[h] = (float(v.replace(",", "")), u)
            except ValueError:
                d[h] = (v, u)
        out.append(d)
    return out


def profile(kernel: str, a, metrics: list[str], work: Path) -> dict:
    """One kernel under ncu: its metrics (value, unit), kernel name and launch, or an error."""
    filt = kernel_filter(kernel)
    cmd = [ncu_bin(), "--clock-control", "none", "--profile-from-start", "off", "--csv", "--page", "raw",
           "--print-kernel-base", "mangled", "--launch-count", "1", "-k", f"regex:{filt}",
           "--metrics", ",".join(metrics), sys.executable, "-m", "lapis.gpu.ncu_units", "--launch", kernel,
           "--shape", a.shape, "--gemm-size", str(a.gemm_size)]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    unknown = re.findall(r"Failed to find metric (\S+)", p.stdout + p.stderr)
    if unknown:  # the listing named a base this ncu cannot roll up: drop those and ask again
        metrics = [m for m in metrics if m.strip(".,") not in {u.strip(".,") for u in unknown}]
        cmd[cmd.index("--metrics") + 1] = ",".join(metrics)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    (work / f"{kernel.replace(':', '_')}.ncu.log").write_text(p.stdout + "\n--stderr--\n" + p.stderr)
    rows = parse_raw_csv(p.stdout)
    if p.returncode or not rows:
        return dict(error=f"ncu rc {p.returncode}: {(p.stderr or p.stdout)[-600:]}", wall_s=time.time() - t0)
    r = rows[0]
    name = r.get("Kernel Name", ("?", ""))[0]
    vals = {m: dict(value=r[m][0], unit=r[m][1]) for m in metrics if m in r}
    return dict(mangled=name, demangled=demangle(name), metrics=vals, wall_s=time.time() - t0,
                filter=filt, missing=[m for m in metrics if m not in r])


def demangle(name: str) -> str:
    cxx = shutil.which("cu++filt") or shutil.which("c++filt")
    if not cxx or not name.startswith("_Z"):
        return name
    return subprocess.run([cxx, name], capture_output=True, text=True).stdout.strip() or name


def kernel_filter(kernel: str) -> str:
    """ncu's kernel-name regex for a --kernels entry: its name without ":causal" (cuDNN's causal kernel is named as
    its non-causal one: diagnostic/h200-2026-12-03-l2-1024 lists cudnn_generated_fort_native_sdpa_sm90_flash_fprop_
    ...)."""
    name = kernel.partition(":")[0]
    if name in THIRD_PARTY_FILTER:
        return THIRD_PARTY_FILTER[name]
    if name == "gemm":
        return "gemm"
    return "attn_"


def flash_sass(a, work: Path, mangled: str, metrics_ok: bool) -> dict:
    """FA2's SASS from torch's library, and ncu's per-instruction executed counts of one launch."""
    import torch
    lib = Path(torch.__file__).parent / "lib" / "libtorch_cuda.so"
    out = {}
    p = subprocess.run(["cuobjdump", "-sass", "-fun", mangled, str(lib)], capture_output=True, text=True,
                       timeout=a.timeout)
    (work / "flash.sass").write_text(p.stdout)
    out["cuobjdump"] = dict(rc=p.returncode, lines=p.stdout.count("\n"), stderr=p.stderr[-400:], library=str(lib))
    rep = work / "flash_src"
    cmd = [ncu_bin(), "--clock-control", "none", "--profile-from-start", "off", "--launch-count", "1",
           "-k", f"regex:{THIRD_PARTY_FILTER['flash']}", "--section", "SourceCounters", "--import-source", "no",
           "-f", "-o", str(rep), sys.executable, "-m", "lapis.gpu.ncu_units", "--launch", "flash",
           "--shape", a.shape]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    out["source_counters"] = dict(rc=p.returncode, tail=(p.stderr or p.stdout)[-400:])
    if p.returncode == 0:
        p = subprocess.run([ncu_bin(), "-i", f"{rep}.ncu-rep", "--page", "source", "--print-source", "sass",
                            "--csv"], capture_output=True, text=True, timeout=a.timeout)
        (work / "flash_sass_counts.csv").write_text(p.stdout)
        out["source_page"] = dict(rc=p.returncode, lines=p.stdout.count("\n"), tail=p.stderr[-400:])
    return out


def source_page(kernel: str, a, work: Path) -> dict:
    """One kernel's source page with stall sampling (module docstring) into work/<kernel>_source.csv.gz."""
    import gzip
    name = kernel.replace(":", "_")
    rep = work / f"{name}_src"
    cmd = [ncu_bin(), "--clock-control", "none", "--profile-from-start", "off", "--launch-count", "1",
           "-k", f"regex:{kernel_filter(kernel)}", "--section", "SourceCounters", "--import-source", "no",
           "-f", "-o", str(rep), sys.executable, "-m", "lapis.gpu.ncu_units", "--launch", kernel,
           "--shape", a.shape, "--gemm-size", str(a.gemm_size)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    out = dict(profile=dict(rc=p.returncode, tail=(p.stderr or p.stdout)[-400:]))
    if p.returncode == 0:
        q = subprocess.run([ncu_bin(), "-i", f"{rep}.ncu-rep", "--page", "source", "--print-source", "sass",
                            "--csv"], capture_output=True, text=True, timeout=a.timeout)
        (work / f"{name}_source.csv.gz").write_bytes(gzip.compress(q.stdout.encode(), mtime=0))
        out["source_page"] = dict(rc=q.returncode, lines=q.stdout.count("\n"), file=f"{name}_source.csv.gz")
    (Path(f"{rep}.ncu-rep")).unlink(missing_ok=True)
    return out


# ------------------------------------------------------------------------------------ child (ncu) --

def launcher(kernel: str, shape: str, gemm_size: int):
    """A zero-argument launch of `kernel` on fresh normal inputs (GPU host)."""
    import cupy as cp
    import torch

    from lapis.gpu import bench_attention as ba  # GPU host
    from lapis.gpu import harness  # GPU host
    cp.zeros(1)
    if kernel == "gemm":
        return gemm_launcher(cp, torch, gemm_size)
    q, k, v = ba.make_inputs(torch, shape, "normal", 7)
    name, _, causal = kernel.partition(":")
    causal = causal == "causal"
    if name in ("fa4", "fa4_bhsd"):  # FA4's CuTe-DSL sm90 forward, from the unpacked wheels in LAPIS_FA4_SITE
        import os
        import site
        site.addsitedir(os.environ.get("LAPIS_FA4_SITE", ""))
        from flash_attn.cute.interface import flash_attn_func
        # fa4: B x L x H x D memory; fa4_bhsd: views of the B x H x L x D inputs lapis's kernels read (lapis.gpu.race)
        qb, kb, vb = (x.transpose(1, 2) if name == "fa4_bhsd" else x.transpose(1, 2).contiguous() for x in (q, k, v))
        return lambda: flash_attn_func(qb, kb, vb, causal=causal)
    if name in THIRD_PARTY_FILTER:
        f = torch.nn.functional.scaled_dot_product_attention

        def launch():
            with ba.sdpa_backend(torch, name):
                f(q, k, v, is_causal=causal)
        return launch
    from lapis.catalog.attention import VARIANTS  # GPU host
    var = VARIANTS[name]
    cubin, _ = harness.build(ba.KERNEL, {})
    module, plan, lib = harness.load(cubin), ba.load(), harness.libcuda()
    att = ba.Attention(module, var, plan, lib, causal)
    b, h, seq, d = ba.check_shape(var, shape, causal)
    maps = att.maps(q.data_ptr(), k.data_ptr(), v.data_ptr(), b * h * seq)
    o = torch.empty_like(q)
    status = harness.Status()
    hargs = harness.harness_args(status, 0, 0, 0, ba.WATCHDOG_NS, roles=len(ba.ROLES))
    return lambda: att.launch(maps, o.data_ptr(), shape, hargs, 0)


def gemm_launcher(cp, torch, n: int):
    from lapis.catalog.gemm import VARIANTS  # GPU host
    from lapis.gpu import bench_gemm as bg  # GPU host
    from lapis.gpu import harness  # GPU host
    name = next(iter(VARIANTS))
    cubin, _ = harness.build(bg.KERNEL, {})
    module, plan, lib = harness.load(cubin), bg.load(), harness.libcuda()
    g = bg.Gemm(cp, module, VARIANTS[name], plan)
    a = torch.randn(n, n, device="cuda").to(torch.bfloat16)
    b = torch.randn(n, n, device="cuda").to(torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    maps = g.tensor_maps(lib, a.data_ptr(), b.data_ptr(), n, n, n)
    status = harness.Status()
    hargs = harness.harness_args(status, 0, 0, 0)
    c_out = cp.from_dlpack(c)
    return lambda: g.launch(maps, c_out, n, n, n, hargs)


def child(kernel: str, shape: str, gemm_size: int) -> int:
    import torch
    launch = launcher(kernel, shape, gemm_size)
    for _ in range(WARMUP):
        launch()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    launch()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return 0


# ------------------------------------------------------------------------------------------ main --

def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m lapis.gpu.ncu_units", description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="output folder (manifest.json, ncu logs)")
    ap.add_argument("--kernels", default=",".join(DEFAULT_KERNELS), type=lambda s: [x for x in s.split(",") if x])
    ap.add_argument("--shape", default="8x16x4096x128", help="BxHxLxD of the attention kernels")
    ap.add_argument("--gemm-size", type=int, default=8192, help="M = N = K of the GEMM")
    ap.add_argument("--provenance", help="JSON from python -m lapis.captures.provenance (made where git is)")
    ap.add_argument("--flash-sass", action="store_true")
    ap.add_argument("--source", default="", type=lambda s: [x for x in s.split(",") if x],
                    help="kernels whose source page (per-instruction counts and stall samples) to write")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per ncu run")
    ap.add_argument("--launch", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parse_args(argv)
    if a.launch:
        return child(a.launch, a.shape, a.gemm_size)
    if not a.out:
        print("python -m lapis.gpu.ncu_units: --out DIR is required", file=sys.stderr)
        return 2
    from lapis.gpu import capture_tma  # GPU host
    dest = Path(a.out)
    dest.mkdir(parents=True, exist_ok=True)
    prov = capture_tma.provenance(a.provenance, argv, "python -m lapis.gpu.ncu_units")
    ver = subprocess.run([ncu_bin(), "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    present, missing, listing = available(CANDIDATES)
    (dest / "query_metrics.csv").write_text(listing)
    man = dict(schema="lapis.ncu-units/1", provenance=prov, ncu=ver[-1] if ver else None, shape=a.shape,
               gemm_size=a.gemm_size, clock_control="none", warmup_launches=WARMUP, metrics=present,
               missing_metrics=missing, kernels={})
    for k in a.kernels:
        print(f"ncu {k}", flush=True)
        man["kernels"][k] = profile(k, a, present, dest)
        (dest / "manifest.json").write_text(json.dumps(man, indent=1))
    fl = man["kernels"].get("flash", {})
    if a.flash_sass and fl.get("mangled"):
        man["flash_sass"] = flash_sass(a, dest, fl["mangled"], True)
        (dest / "manifest.json").write_text(json.dumps(man, indent=1))
    for k in a.source:
        if k == "cudnn":
            continue  # its license forbids disassembly: counters only
        print(f"ncu source {k}", flush=True)
        man.setdefault("source", {})[k] = source_page(k, a, dest)
        (dest / "manifest.json").write_text(json.dumps(man, indent=1))
    for k, e in man["kernels"].items():
        m = e.get("metrics", {})
        cyc = m.get("sm__cycles_elapsed.avg", {}).get("value")
        hz = m.get("sm__cycles_elapsed.avg.per_second", {}).get("value")
        print(f"{k:<12} {e.get('error', '')[:200]} cycles {cyc} clock {hz} {e.get('demangled', '')[:80]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
