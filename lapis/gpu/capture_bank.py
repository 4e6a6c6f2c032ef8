"""Measure shared-memory wavefronts per pattern with Nsight Compute (`python -m lapis.gpu.capture_bank run`).

`launch` (numpy + cupy) runs every pattern of bank_campaign.py once, in order, each as its own one-warp
kernel launch; `run` starts `launch` under `ncu --clock-control none` (the clocks are left as found) and
records, per launch, the metrics below. Writes OUT/bank/manifest.json.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from lapis.gpu import bank_campaign, capture_tma
from lapis.gpu.capture_tma import _sh

KERNELS = {"v1": (Path(__file__).parent / "kernels" / "bank_capture_v1.cu", bank_campaign.patterns),
           "v2": (Path(__file__).parent / "kernels" / "bank_capture_v2.cu", bank_campaign.patterns_v2)}
METRICS = {  # the exact Nsight Compute counters, per instruction kind
    "ld": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"),
    "st": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
}


def direction(kernel: str) -> str:
    return "st" if kernel.startswith(("sts", "stsm")) else "ld"


def launch(cubin: str, version: str = "v1") -> None:
    import cupy as cp
    mod = cp.RawModule(path=cubin)
    out = cp.zeros(32, cp.uint32)
    for p in KERNELS[version][1]():
        fn = mod.get_function(p["kernel"])
        offs = cp.asarray(np.array(p["offsets"], np.uint32))
        fn((1,), (32,), (offs, out, np.int32(0)), shared_mem=8192)
        cp.cuda.Device().synchronize()


def run(out: Path, git_file: str | None, argv: list[str], version: str = "v1") -> None:
    kernel, patterns = KERNELS[version]
    work = out / ("bank" if version == "v1" else f"bank_{version}")
    work.mkdir(parents=True, exist_ok=True)
    cubin = str(work / f"bank_capture_{version}.cubin")
    subprocess.run(["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-o", cubin, str(kernel)], check=True)
    metrics = ",".join(m for pair in METRICS.values() for m in pair)
    cmd = ["ncu", "--clock-control", "none", "--csv", "--metrics", metrics, sys.executable, "-m",
           "lapis.gpu.capture_bank", "launch", "--cubin", cubin, "--version", version]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    (work / "ncu-stdout.txt").write_text(p.stdout[-200000:])
    rows = [r for r in csv.DictReader(io.StringIO(p.stdout[p.stdout.find('"ID"'):])) if r.get("Kernel Name")]
    by_id: dict = {}
    for r in rows:
        by_id.setdefault(int(r["ID"]), {"kernel": r["Kernel Name"]})[r["Metric Name"]] = float(
            r["Metric Value"].replace(",", ""))
    launches = [by_id[k] for k in sorted(by_id)]
    pats = patterns()
    for pat, meas in zip(pats, launches):
        wave, conf = METRICS[direction(pat["kernel"])]
        pat["measured"] = dict(kernel=meas["kernel"], wavefronts=meas.get(wave), bank_conflicts=meas.get(conf),
                               all=meas)
    prov = capture_tma.provenance(git_file, argv, "python -m lapis.gpu.capture_bank")
    prov["ncu"] = _sh(["ncu", "--version"]).splitlines()[-1:]
    (work / "manifest.json").write_text(json.dumps(dict(
        provenance=prov, kernel=f"lapis/gpu/kernels/bank_capture_{version}.cu", metrics=METRICS,
        command=" ".join(cmd), launches=len(launches), patterns=pats), indent=0))
    Path(cubin).unlink()
    print(f"bank: {len(launches)} profiled launches for {len(pats)} patterns; rc {p.returncode}")
    for pat in pats:
        print(pat["id"], pat["kernel"], pat["name"], pat.get("measured", {}).get("wavefronts"))


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m lapis.gpu.capture_bank")
    sub = ap.add_subparsers(dest="step", required=True)
    la = sub.add_parser("launch")
    la.add_argument("--cubin", required=True)
    la.add_argument("--version", choices=tuple(KERNELS), default="v1")
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--provenance")
    r.add_argument("--version", choices=tuple(KERNELS), default="v1")
    a = ap.parse_args(argv)
    if a.step == "launch":
        launch(a.cubin, a.version)
    else:
        run(Path(a.out), a.provenance, argv, a.version)
    return 0


if __name__ == "__main__":
    sys.exit(main())
