"""Run the wgmma campaign on an sm_90a GPU (`lapis capture wgmma`).

Two steps, because the images are built by lapis's layout model and the GPU
machine has only numpy and cupy:
- `prepare --out DIR` (here, with lapis installed): writes DIR/inputs.npz (one
  shared-memory image per case) and DIR/cases.json (descriptors, kernel, metadata).
- `run --inputs DIR --out OUT` (on the GPU, numpy + cupy only): builds
  kernels/wgmma_capture_v1.cu, runs every case in fault-isolated child processes
  and writes OUT/wgmma/{manifest.json, d.npz, inputs.npz}: D of every K-step
  (float32, 64 x N), and whether the smem dump after the run still equals the image.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from lapis.gpu import capture_tma
from lapis.gpu.isolate import run_isolated

KERNEL = Path(__file__).parent / "kernels" / "wgmma_capture_v1.cu"
SMEM_SLACK = 1024  # the kernel aligns its region to 1024 B


def prepare(out: Path) -> int:
    # imported here: this module runs on the GPU host, which has no tensor-layouts or simpy
    from lapis.gpu import wgmma_campaign
    out.mkdir(parents=True, exist_ok=True)
    cases = wgmma_campaign.campaign()
    np.savez_compressed(out / "inputs.npz", **{f"img{m['id']}": img for m, img in cases})
    (out / "cases.json").write_text(json.dumps([m for m, _ in cases]))
    print(f"prepared {len(cases)} cases in {out}")
    return 0


def _worker(args) -> None:
    import cupy as cp
    cases = json.loads(Path(args.inputs, "cases.json").read_text())
    mod = cp.RawModule(path=args.cubin)
    work = Path(args.work)
    ids = [args.only] if args.only is not None else range(args.start, len(cases))
    with np.load(Path(args.inputs, "inputs.npz")) as images:
        for i in ids:
            (work / "progress").write_text(str(i))
            c = cases[i]
            try:
                res, d = _run_case(cp, mod, c, images[f"img{c['id']}"])
            except Exception as exc:  # a CUDA fault poisons the context: record it and leave
                (work / f"res_{i}.json").write_text(json.dumps(dict(status="fault", error=repr(exc))))
                sys.exit(3)
            np.save(work / f"d_{i}.npy", d)
            (work / f"res_{i}.json").write_text(json.dumps(res))


def _run_case(cp, mod, c: dict, image: np.ndarray):
    fn = mod.get_function(f"wgmma_{c['dtype']}_n{c['n']}_ta{c['ta']}_tb{c['tb']}")
    smem = image.size + SMEM_SLACK
    fn.max_dynamic_shared_size_bytes = smem
    steps, n = c["steps"], c["n"]
    img = cp.asarray(image)
    da = cp.asarray(np.array(c["desc_a"], np.uint64))
    db = cp.asarray(np.array(c["desc_b"], np.uint64))
    d = cp.full((steps, 64, n), np.nan, cp.float32)  # poisoned: an unwritten element stays NaN
    dump = cp.zeros(image.size, cp.uint8)
    info = cp.zeros(4, cp.uint32)
    fn((1,), (128,), (img, np.uint32(image.size), da, db, np.int32(steps), d, dump, info), shared_mem=smem)
    cp.cuda.Device().synchronize()
    changed = int((dump.get() != image).sum())
    return dict(status="ok", region_addr=int(info.get()[0]), smem_changed_bytes=changed), d.get()


def run(inputs: Path, out: Path, git_file: str | None, argv: list[str]) -> int:
    t0 = time.time()
    log = lambda m: print(f"[{time.time() - t0:6.1f}s] {m}", flush=True)  # noqa: E731
    prov = capture_tma.provenance(git_file, argv, "lapis capture wgmma")
    dest = out / "wgmma"
    dest.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="lapis-wgmma-"))
    cubin = str(work / "wgmma_capture_v1.cubin")
    subprocess.run(["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-o", cubin, str(KERNEL)],
                   check=True)
    log("built wgmma_capture_v1.cubin")
    cases = json.loads((inputs / "cases.json").read_text())
    child = [sys.executable, "-m", "lapis.gpu.capture_wgmma", "_worker", "--inputs", str(inputs), "--work",
             str(work), "--cubin", cubin]
    run_isolated(len(cases), child, work, log)
    d_all = {}
    for i, c in enumerate(cases):
        c["result"] = json.loads((work / f"res_{i}.json").read_text())
        if (work / f"d_{i}.npy").exists():
            d_all[f"d{c['id']}"] = np.load(work / f"d_{i}.npy")
    np.savez_compressed(dest / "d.npz", **d_all)
    shutil.copy(inputs / "inputs.npz", dest / "inputs.npz")
    (dest / "manifest.json").write_text(json.dumps(dict(
        provenance=prov, kernel="lapis/gpu/kernels/wgmma_capture_v1.cu", campaign="lapis/gpu/wgmma_campaign.py",
        d_layout="d<id>: float32 [steps, 64, N], D of each K-step alone (scale-d = 0), row-major",
        image_layout="inputs.npz img<id>: uint8 shared-memory region from its 1024 B-aligned start (region_addr)",
        cases=cases)))
    import collections
    log("wgmma: " + str(collections.Counter(c["result"]["status"] for c in cases)))
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = build_parser().parse_args(argv)
    if a.step == "prepare":
        return prepare(Path(a.out))
    if a.step == "_worker":
        _worker(a)
        return 0
    return run(Path(a.inputs), Path(a.out), a.provenance, argv)


def build_parser() -> argparse.ArgumentParser:
    """The options of `lapis capture wgmma` (prepare, run; _worker is internal)."""
    ap = argparse.ArgumentParser(prog="lapis capture wgmma", description=__doc__.splitlines()[0], allow_abbrev=False)
    sub = ap.add_subparsers(dest="step", required=True, metavar="STEP")
    p = sub.add_parser("prepare", help="build images and descriptors with lapis (CPU)")
    p.add_argument("--out", required=True, help="folder for inputs.npz and cases.json")
    r = sub.add_parser("run", help="run the prepared cases on the GPU (sm_90a)")
    r.add_argument("--inputs", required=True, help="the folder `prepare` wrote")
    r.add_argument("--out", required=True, help="output folder; gets wgmma/ (manifest.json, d.npz, inputs.npz)")
    r.add_argument("--provenance", help="JSON from `python -m lapis.captures.provenance` (commit, dirty, blobs)")
    w = sub.add_parser("_worker")
    w.add_argument("--inputs", required=True)
    w.add_argument("--work", required=True)
    w.add_argument("--cubin", required=True)
    w.add_argument("--start", type=int, default=0)
    w.add_argument("--only", type=int)
    return ap


if __name__ == "__main__":
    sys.exit(main())
