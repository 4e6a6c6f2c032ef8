"""`lapis sweep --validate-top K` (GPU only): the K best runnable configurations built and timed as real kernels
by lapis.gpu.bench_attention (correctness against a float64 reference first, then CUDA-event timing), their
measured time and TFLOP/s added to the table as `measured_us` and `measured_tflops` (validated.csv).

Without a GPU it raises LapisError before anything runs; the predicted table, already written, stays as it is.
Only runnable rows are validated (lapis.sweep.runnable names the kernel); the others keep empty measured cells.
"""

from __future__ import annotations

import json
from pathlib import Path

from lapis.errors import CaptureError, LapisError, ScheduleError
from lapis.gpu import bench_attention as bench
from lapis.gpu import harness
from lapis.sweep import table
from lapis.sweep.runnable import kernel_of


def require_gpu() -> None:
    if not harness.gpu_present():
        raise LapisError("--validate-top runs real kernels and needs an NVIDIA GPU with compute capability 9.0+",
                         "no GPU visible to cupy", "run it on the GPU machine with `pip install .[gpu]` and torch "
                         "(the predicted table is written and left as it is)")


def validate_top(result: dict, k: int, out: Path, provenance: str | None = None) -> Path:
    """Time the kernels of the k best runnable configurations at the sweep's shapes; write validated.csv."""
    require_gpu()
    picked = [c for c in result["ranked"] if c["runnable"]][:k]
    names = sorted({n for c in picked for n, v in bench.VARIANTS.items()
                    if bench.kernel_name(v) == kernel_of(c["kernel"])})
    if not names:
        raise ScheduleError("no runnable configuration to validate", f"top {k}", "sweep parameters a kernel takes "
                            "(lapis.sweep.runnable)")
    dest = Path(out) / "validate"
    prov = ["--provenance", str(provenance)] if provenance else []
    rc = bench.main(["--out", str(dest), "--variants", ",".join(names), "--shapes", ",".join(result["shapes"]), *prov])
    man = json.loads((dest / "manifest.json").read_text())
    measured = {(bench.kernel_name(bench.VARIANTS[n]), e["shape"]): ve["plain"]["median_us"]
                for e in man["results"] for n, ve in e.get("variants", {}).items() if "plain" in ve}
    wanted = {c["config"] for c in picked}
    rows = []
    for r in result["rows"]:
        us = measured.get((kernel_of(r["kernel"]), r["shape"])) if r["key"].split("|", 4)[4] in wanted else None
        flops = r["tflops"] * r["predicted_us"] * 1e6 if r["fits"] else None
        rows.append(dict(r, measured_us=us, measured_tflops=flops / (us * 1e6) if us and flops else None))
    text = table.to_csv(rows, list(result["axes"]), extra=("measured_us", "measured_tflops"))
    path = Path(out) / "validated.csv"
    path.write_text(text)
    if rc:
        raise CaptureError("the kernel benchmark failed", f"exit {rc}", f"see {dest / 'manifest.json'}")
    return path
