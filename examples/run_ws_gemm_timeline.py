"""Build, check and time examples/ws_gemm_timeline.cu on the GPU, and dump its timeline for `lapis compare`.

    python examples/run_ws_gemm_timeline.py --shape 4096x4096x4096 --out ws_gemm_timeline.npz \
        [--cta-every 1] [--iter-every 1] [--cta-mask 0xffffffffffffffff] [--runs 20]
    lapis compare --measured ws_gemm_timeline.npz --schedule examples/ws_gemm.py:WS_GEMM --shape 4096x4096x4096

What it does, as a user's own runner would (CUDA driver through ctypes for the tensor maps, cupy for memory and
launches, nvcc for the build):
1. nvcc -gencode=arch=compute_90a,code=sm_90a -cubin, twice: -DTL_ON=0 (plain) and -DTL_ON=1 (instrumented);
2. C = A . B^T on random bf16 inputs, each build checked against torch (or numpy when torch is missing):
   max |C - ref| / max |ref| below 1e-2;
3. each build timed (cupy events, `--runs` launches after 3 warm-up ones, median µs), the instrumented one with
   the sampling asked for;
4. one instrumented launch into a zeroed buffer (lapis_timeline.cuh buffer_bytes), written as an .npz:
   `buffer` (uint8, the whole buffer: header block, counts, rows) and `meta` (uint8, UTF-8 JSON: roles and
   ops by code, the shape, the times of both builds, the sampling and provenance: GPU, date, git commit,
   nvcc version, sha256 of the sources).
Exit 0 when both builds are correct, 1 otherwise. Needs an sm_90a GPU, nvcc, cupy and numpy.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "ws_gemm_timeline.cu"
HEADER_DIR = HERE.parent / "lapis" / "gpu" / "kernels"  # lapis_timeline.cuh
BM, BN, BK, STAGES, THREADS = 128, 128, 64, 4, 384
SMEM = STAGES * (BM + BN) * BK * 2 + 1024
# Names by code, as examples/ws_gemm.py's schedule records its events (op 0: lapis_tl::BEGIN).
ROLES = ["producer", "consumer0", "consumer1"]
OPS = ["begin", "wait empty", "issue TMA", "wait full", "wgmma", "wait wgmma", "store C"]
ARGS_DTYPE = np.dtype([("buffer", "<u8"), ("capacity", "<u4"), ("rows", "<u4"), ("roles", "<u4"),
                       ("cta_first", "<u4"), ("cta_every", "<u4"), ("iter_every", "<u4"), ("cta_mask", "<u8")],
                      align=True)
HEADER_BYTES, RECORD_BYTES = 64, 24


def build(on: int, work: Path) -> Path:
    cubin = work / f"ws_gemm_tl{on}.cubin"
    cmd = ["nvcc", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-Xptxas", "-v",
           f"-I{HEADER_DIR}", f"-DTL_ON={on}", "-o", str(cubin), str(SOURCE)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"nvcc failed (TL_ON={on}):\n{p.stderr[-3000:]}")
    print(f"built TL_ON={on}: " + " ".join(ln.strip() for ln in p.stderr.splitlines() if "registers" in ln
                                            or "spill" in ln or "serialized" in ln))
    return cubin


def tensor_map(lib, ptr: int, rows: int, k: int) -> np.ndarray:
    """cuTensorMapEncodeTiled (CUDA driver API): bf16 [rows, k] K-major, box 64 x 128, 128-byte swizzle."""
    buf = ctypes.create_string_buffer(128 + 64)
    aligned = (ctypes.addressof(buf) + 63) // 64 * 64
    u64, u32 = ctypes.c_uint64 * 2, ctypes.c_uint32 * 2
    rc = lib.cuTensorMapEncodeTiled(ctypes.c_void_p(aligned), 9, 2, ctypes.c_void_p(ptr), u64(k, rows),
                                    u64(k * 2, 0), u32(BK, 128), u32(1, 1), 0, 3, 2, 0)
    if rc:
        sys.exit(f"cuTensorMapEncodeTiled failed (CUresult {rc})")
    t = np.zeros((), np.dtype([("opaque", np.uint64, (16,))], align=True))
    t["opaque"] = np.frombuffer(ctypes.string_at(aligned, 128), np.uint64)
    return t


def tl_args(ptr: int, ctas: int, per_role: int, a) -> tuple[np.ndarray, int]:
    """lapis_tl::Args (make_args) and the buffer's size in bytes (buffer_bytes)."""
    rows = max(0, -(-(ctas - a.cta_first) // a.cta_every))
    capacity = per_role * len(ROLES) + 2
    args = np.zeros((), ARGS_DTYPE)
    args["buffer"], args["capacity"], args["rows"], args["roles"] = ptr, capacity, rows, len(ROLES)
    args["cta_first"], args["cta_every"], args["iter_every"], args["cta_mask"] = (a.cta_first, a.cta_every,
                                                                                   a.iter_every, a.cta_mask)
    return args, HEADER_BYTES + (4 * rows + 7) // 8 * 8 + rows * capacity * RECORD_BYTES


def provenance(argv) -> dict:
    def git(*cmd):
        p = subprocess.run(["git", "-C", str(HERE), *cmd], capture_output=True, text=True)
        return p.stdout.strip() if p.returncode == 0 else None
    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    return dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                commit=git("rev-parse", "HEAD") or "unknown", dirty=bool(git("status", "--porcelain")),
                command="python examples/run_ws_gemm_timeline.py " + " ".join(argv),
                nvcc=nvcc[-1] if nvcc else "unknown",
                sources={p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                         for p in (SOURCE, HEADER_DIR / "lapis_timeline.cuh")})


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="4096x4096x4096", help="MxNxK (M, N multiples of 128, K of 64)")
    ap.add_argument("--out", required=True, help="the timeline file to write (.npz)")
    ap.add_argument("--cta-every", type=int, default=1, help="record every Nth CTA (default 1: all)")
    ap.add_argument("--cta-first", type=int, default=0, help="first recorded CTA (default 0)")
    ap.add_argument("--cta-mask", type=lambda s: int(s, 0), default=(1 << 64) - 1,
                    help="of the selected CTAs, row j records when bit j %% 64 is set (default: all)")
    ap.add_argument("--iter-every", type=int, default=1, help="record every Nth K block (default 1: all)")
    ap.add_argument("--runs", type=int, default=20, help="timed launches per build (default 20)")
    a = ap.parse_args(argv)
    m, n, k = (int(x) for x in a.shape.lower().split("x"))
    if m % BM or n % BN or k % BK or min(m, n, k) < 1 or a.cta_every < 1 or a.iter_every < 1:
        ap.error(f"M, N multiples of {BM}, K of {BK}, --cta-every and --iter-every >= 1: got {a.shape}, "
                 f"{a.cta_every}, {a.iter_every}")
    import cupy as cp

    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuTensorMapEncodeTiled.restype = ctypes.c_int
    dev = cp.cuda.Device()
    sms = dev.attributes["MultiProcessorCount"]
    tiles, k_blocks = (m // BM) * (n // BN), k // BK
    ctas = min(tiles, sms)
    with tempfile.TemporaryDirectory() as tmp:
        fns = {}
        for on in (0, 1):
            fns[on] = cp.RawModule(path=str(build(on, Path(tmp)))).get_function("ws_gemm")
            fns[on].max_dynamic_shared_size_bytes = SMEM
    rng = np.random.default_rng(0)
    a_h = (rng.standard_normal((m, k)) * 0.5).astype(np.float32)
    b_h = (rng.standard_normal((n, k)) * 0.5).astype(np.float32)
    try:
        import torch
        ta = torch.from_numpy(a_h).cuda().to(torch.bfloat16)
        tb = torch.from_numpy(b_h).cuda().to(torch.bfloat16)
        ref = (ta.float() @ tb.float().T)
        A, B = cp.asarray(ta.view(torch.int16)), cp.asarray(tb.view(torch.int16))
        ref = cp.asarray(ref)
    except ImportError:  # numpy's bf16 rounding: keep the top 16 bits of each fp32 (round to nearest even)
        def bf16(x):
            u = x.view(np.uint32).astype(np.uint64)
            return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        A, B = cp.asarray(bf16(a_h)), cp.asarray(bf16(b_h))
        fa = (A.astype(cp.uint32) << 16).view(cp.float32)
        fb = (B.astype(cp.uint32) << 16).view(cp.float32)
        ref = fa @ fb.T
    maps = [tensor_map(lib, A.data.ptr, m, k), tensor_map(lib, B.data.ptr, n, k)]
    C = cp.zeros((m, n), cp.float32)
    per_role = -(-tiles // ctas) * (4 * -(-k_blocks // a.iter_every) + 3) + 1
    _, nbytes = tl_args(0, ctas, per_role, a)
    buf = cp.zeros(nbytes, cp.uint8)
    args = {0: tl_args(0, ctas, per_role, a)[0], 1: tl_args(buf.data.ptr, ctas, per_role, a)[0]}

    def launch(on):
        fns[on]((ctas,), (THREADS,), (maps[0][()], maps[1][()], C, np.int32(m), np.int32(n), np.int32(k),
                                      args[on][()]), shared_mem=SMEM)

    result, ok = {}, True
    for on in (0, 1):
        C.fill(float("nan"))
        buf.fill(0)
        launch(on)
        cp.cuda.Device().synchronize()
        err = float(cp.nan_to_num(cp.abs(C - ref), nan=cp.inf).max() / cp.abs(ref).max())
        good = err < 1e-2
        ok &= good
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        times = []
        for i in range(3 + a.runs):
            start.record()
            launch(on)
            stop.record()
            stop.synchronize()
            if i >= 3:
                times.append(cp.cuda.get_elapsed_time(start, stop) * 1e3)
        result[on] = dict(rel_err=err, correct=good, median_us=float(np.median(times)),
                          tflops=2.0 * m * n * k / np.median(times) / 1e6)
        print(f"TL_ON={on}: rel err {err:.2e} ({'ok' if good else 'WRONG'}), median {result[on]['median_us']:.1f} "
              f"µs, {result[on]['tflops']:.0f} TFLOP/s")
    buf.fill(0)
    launch(1)
    cp.cuda.Device().synchronize()
    overhead = 100.0 * (result[1]["median_us"] / result[0]["median_us"] - 1.0)
    print(f"timeline overhead {overhead:+.1f}% (cta_every {a.cta_every}, iter_every {a.iter_every})")
    meta = dict(roles=ROLES, ops=OPS, kernel="examples/ws_gemm_timeline.cu:ws_gemm", shape=a.shape,
                schedule="examples/ws_gemm.py:WS_GEMM", gpu=cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
                sms=sms, ctas=ctas, plain_us=result[0]["median_us"], timeline_us=result[1]["median_us"],
                overhead_pct=overhead, plain=result[0], timeline=result[1],
                sampling=dict(cta_first=a.cta_first, cta_every=a.cta_every, cta_mask=a.cta_mask,
                              iter_every=a.iter_every),
                provenance=provenance(argv))
    np.savez_compressed(a.out, buffer=buf.get(), meta=np.frombuffer(json.dumps(meta).encode(), np.uint8))
    print(f"wrote {a.out} ({nbytes} bytes of buffer)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
