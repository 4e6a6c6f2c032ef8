"""Run CUTLASS's descriptor builders on the GPU (`python -m lapis.gpu.capture_cutlass_oracle`).

The cubin is built where the nvidia-cutlass headers are (see gen_cutlass_oracle.py) and carried; here only
numpy and cupy are needed. Writes OUT/cutlass_oracle/manifest.json: per layout and K-step, the sm90 and
sm100 descriptors CUTLASS computed, and the shared-memory base they describe.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lapis.gpu import capture_tma
from lapis.gpu.gen_cutlass_oracle import INDEX, INDEX_V2

VERSIONS = {"v1": (INDEX, "cutlass_desc_oracle", "lapis/gpu/kernels/cutlass_desc_oracle_v1.cu"),
            "v2": (INDEX_V2, "cutlass_desc_oracle_v2", "lapis/gpu/kernels/cutlass_desc_oracle_v2.cu")}

ELEM = {"bf16": 2, "tf32": 4, "e4m3": 1}


def run(cubin: str, out: Path, git_file: str | None, argv: list[str], build: dict, version: str = "v1") -> None:
    import cupy as cp
    index, fname, kernel = VERSIONS[version]
    layouts = json.loads(index.read_text())
    total = sum(lay["steps"] for lay in layouts)
    fn = cp.RawModule(path=cubin).get_function(fname)
    smem = max(lay["mn"] * lay["k"] * ELEM[lay["dtype"]] for lay in layouts) + 1024
    fn.max_dynamic_shared_size_bytes = smem
    d = cp.zeros(2 * total, cp.uint64)
    base = cp.zeros(1, cp.uint32)
    fn((1,), (32,), (d, base), shared_mem=smem)
    cp.cuda.Device().synchronize()
    values, b = d.get().tolist(), int(base.get()[0])
    i = 0
    for lay in layouts:
        lay["sm90"], lay["sm100"] = values[i:i + 2 * lay["steps"]:2], values[i + 1:i + 2 * lay["steps"]:2]
        i += 2 * lay["steps"]
    dest = out / ("cutlass_oracle" if version == "v1" else f"cutlass_oracle_{version}")
    dest.mkdir(parents=True, exist_ok=True)
    prov = dict(capture_tma.provenance(git_file, argv, "python -m lapis.gpu.capture_cutlass_oracle"), **build)
    (dest / "manifest.json").write_text(json.dumps(dict(
        provenance=prov, kernel=kernel, smem_base=b, layouts=layouts)))
    print(f"cutlass oracle: {len(layouts)} layouts, {total} K-steps, smem base {b:#x}")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m lapis.gpu.capture_cutlass_oracle")
    ap.add_argument("--cubin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--provenance")
    ap.add_argument("--build", help="JSON: how the cubin was built (nvcc, CUTLASS version, flags)")
    ap.add_argument("--version", choices=tuple(VERSIONS), default="v1")
    a = ap.parse_args(argv)
    run(a.cubin, Path(a.out), a.provenance, argv, json.loads(Path(a.build).read_text()) if a.build else {},
        a.version)
    return 0


if __name__ == "__main__":
    sys.exit(main())
