"""Ablations of the warp-specialized GEMM (GPU only): time the kernel with one stage left out, to place its time.

Builds gemm_ws.cu three ways (-DLAPIS_ABLATE=0|1|2): the kernel, "no_load" (the ring is filled once, then the
producer only arrives on full[s]), and "no_mma" (the consumers release each slot without wgmma). Each build is
timed like lapis.gpu.bench_gemm does (CUDA events, median of many launches, rotated inputs, nvidia-smi clocks),
in one child process with a timeout. These are diagnostics of the kernel, never fitted into the profile and never
reported as GEMM results.

    python -m lapis.gpu.ablate_gemm --out DIR --provenance FILE [--sizes 4096,8192] [--variants ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from lapis.gpu import capture_tma, harness
from lapis.gpu.bench_gemm import KERNEL, VARIANTS, Gemm, SmiSampler, _time, kernel_name, smi_gpu_id
from lapis.gpu.gemm_plan import load
from lapis.gpu.harness import libcuda

ABLATIONS = {"kernel": 0, "no_load": 1, "no_mma": 2}
SOURCES = ("lapis/gpu/ablate_gemm.py", "lapis/gpu/bench_gemm.py", "lapis/gpu/harness.py",
           "lapis/gpu/kernels/gemm_ws.cu", "lapis/gpu/kernels/gemm_ws_variants.inc", "lapis/gpu/kernels/gemm_ws_plan.h",
           "lapis/gpu/kernels/harness.cuh", "lapis/gpu/kernels/pipeline.cuh")


def _worker(work: Path) -> None:
    import cupy as cp
    import torch

    cfg = json.loads((work / "cfg.json").read_text())
    lib, status = libcuda(), None
    cp.zeros(1)
    mods = {a: harness.load(p) for a, p in cfg["cubins"].items()}
    status = harness.Status()
    smi = SmiSampler(cfg["smi_gpu"])
    smi.start()
    out = []
    for size in cfg["sizes"]:
        m = n = k = size
        n_sets = max(2, -(-150 * 2**20 // ((m + n) * k * 2)))
        gen = torch.Generator(device="cuda").manual_seed(size)
        sets = [(torch.randn(m, k, device="cuda", generator=gen).to(torch.bfloat16),
                 torch.randn(n, k, device="cuda", generator=gen).to(torch.bfloat16)) for _ in range(n_sets)]
        c = cp.empty((m, n), cp.uint16)
        for name in cfg["variants"]:
            v = VARIANTS[name]
            for abl, mod in mods.items():
                (work / "progress").write_text(f"{abl} {kernel_name(v)} at {size}^3")
                g = Gemm(cp, mod, v, cfg["plan"])
                maps = [g.tensor_maps(lib, a.data_ptr(), b.data_ptr(), m, n, k) for a, b in sets]
                hargs = harness.harness_args(status, 0, 0, 0, 1_000_000_000)
                r = _time(cp, torch, lambda i: g.launch(maps[i], c, m, n, k, hargs), n_sets, 10, 100, 0.2,
                          2.0 * m * n * k / 500e12 * 1e6, smi)
                harness.synchronize(status, f"{abl} {kernel_name(v)} at {size}^3")
                out.append(dict(size=size, variant=name, ablation=abl, **r))
                (work / "results.json").write_text(json.dumps(out))
    smi.stop.set()


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_worker"]:
        _worker(Path(argv[1]))
        return 0
    ap = argparse.ArgumentParser(prog="python -m lapis.gpu.ablate_gemm", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--provenance", required=True)
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[4096, 8192])
    ap.add_argument("--variants", type=lambda s: s.split(","), default=["ws_s4_c2_n128", "ws_s4_c1_n128"])
    ap.add_argument("--timeout", type=float, default=240)
    a = ap.parse_args(argv)
    t0 = time.time()
    prov = capture_tma.provenance(a.provenance, argv, "python -m lapis.gpu.ablate_gemm")
    cubins = {abl: str(harness.build(KERNEL, {"LAPIS_ABLATE": d})[0]) for abl, d in ABLATIONS.items()}
    work = Path(tempfile.mkdtemp(prefix="lapis-ablate-"))
    (work / "cfg.json").write_text(json.dumps(dict(plan=load(), sizes=a.sizes, variants=a.variants, cubins=cubins,
                                                   smi_gpu=smi_gpu_id())))
    error = None
    try:
        p = harness.run_guarded([sys.executable, "-m", "lapis.gpu.ablate_gemm", "_worker", str(work)], a.timeout,
                                "the GEMM ablation worker")
        if p.returncode:
            error = f"worker rc {p.returncode}: {p.stderr[-1500:]}"
    except harness.KernelHang as exc:
        error = f"hang: {exc}"
    res_path = work / "results.json"
    results = json.loads(res_path.read_text()) if res_path.exists() else []
    dest = Path(a.out)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "manifest.json").write_text(json.dumps(dict(
        provenance=prov, kind="gemm ablation (diagnostic; not fitted)", ablations=ABLATIONS, results=results,
        error=error, command=" ".join(["python -m lapis.gpu.ablate_gemm"] + argv), wall_s=round(time.time() - t0, 1),
        units=dict(median_us="us per launch (CUDA events)")), indent=1))
    for r in results:
        clk = r.get("clocks", {}).get("sm_clock_mhz", {}).get("median")
        print(f"{r['size']:>6} {r['variant']:<15} {r['ablation']:<8} {r['median_us']:>10.1f} us "
              f"{2 * r['size'] ** 3 / r['median_us'] / 1e6:>7.0f} TFLOP/s  spread {r['spread_pct']:.2f}%  SM {clk} MHz")
    print("ERROR " + error if error else "ok")
    return 1 if error else 0


if __name__ == "__main__":
    sys.exit(main())
