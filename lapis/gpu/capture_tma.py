"""Run the TMA campaigns on a GPU and write raw captures (`lapis capture tma`).

Runs on the bare H200 from the source tree (`PYTHONPATH=. python -m
lapis.gpu.capture_tma --out DIR ...`): it imports only the standard library,
numpy and cupy (the driver is called through ctypes, so that out-of-range enum
values reach `cuTensorMapEncodeTiled` unchanged). It never imports lapis's
model: captures are hardware data, never produced by the model.

Two campaigns:
- dumps (`tma_campaign.py`): each configuration is loaded by
  `kernels/tma_capture_v1.cu` into a sentinel-filled region; the raw region
  bytes and the shared-window addresses are saved. A configuration that faults
  is re-run alone in a subprocess and the fault is recorded as data.
- encode (`encode_campaign.py`): each parameter set goes to the real
  `cuTensorMapEncodeTiled`; the CUresult is recorded.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from lapis.gpu import encode_campaign, tma_campaign
from lapis.gpu.harness import libcuda
from lapis.gpu.isolate import run_isolated

KERNEL = Path(__file__).parent / "kernels" / "tma_capture_v1.cu"
SENTINELS = (0xA5, 0x5A, 0xC3, 0x3C)
TIMEOUT_NS = 200_000_000  # mbarrier watchdog
SETTLE_NS = 20_000  # wait after completion so that surplus bytes land before the dump


# ---------------------------------------------------------------- driver API --

def _error_name(lib, code: int) -> str:
    s = ctypes.c_char_p()
    lib.cuGetErrorName(code, ctypes.byref(s))
    return s.value.decode() if s.value else f"CUresult {code}"


def _u64(v):
    return (ctypes.c_uint64 * max(len(v), 1))(*[x & (2**64 - 1) for x in v])


def _u32(v):
    return (ctypes.c_uint32 * max(len(v), 1))(*[x & (2**32 - 1) for x in v])


def encode(lib, case, gptr: int):
    """Call cuTensorMapEncodeTiled; return (CUresult, name, 128 map bytes)."""
    buf = ctypes.create_string_buffer(128 + 256)
    aligned = (ctypes.addressof(buf) + 63) // 64 * 64 + case.get("map_offset", 0)
    gaddr = 0 if case.get("null_address") else gptr + case.get("addr_offset", 0)
    code = lib.cuTensorMapEncodeTiled(
        ctypes.c_void_p(aligned), case["dtype"], case["rank"], ctypes.c_void_p(gaddr),
        _u64(case["dims"]), _u64(case["strides"]), _u32(case["box"]), _u32(case["elem_strides"]),
        case["interleave"], case["swizzle"], case["l2"], case["oob"])
    return code, _error_name(lib, code), ctypes.string_at(aligned, 128)


# ------------------------------------------------------------------- dumps --

def fill_runs(n_slots: int, elem: int) -> int:
    """Fills needed so that (slot + 1) is recoverable from one elem-sized digit per run."""
    runs = 1
    while n_slots + 1 >= 2 ** (8 * elem * runs):
        runs += 1
    return runs


def source_bytes(cfg) -> int:
    e = tma_campaign.ELEM[cfg["dtype"]]
    return cfg["strides"][-1] * cfg["dims"][-1] if cfg["rank"] > 1 else cfg["dims"][0] * e


def fill_values(cfg, n_bytes: int) -> np.ndarray:
    """Global source of a configuration with explicit `values`: element slot s holds values[s % len]."""
    e = tma_campaign.ELEM[cfg["dtype"]]
    return np.resize(np.array(cfg["values"], dtype=f"<u{e}"), n_bytes // e).view(np.uint8)


def fill(n_bytes: int, elem: int, run: int) -> np.ndarray:
    """Global source: element slot s (byte offset // elem) holds digit `run` of s + 1."""
    slots = np.arange(n_bytes // elem, dtype=np.uint64) + 1
    digits = (slots >> np.uint64(8 * elem * run)) if 8 * elem * run < 64 else np.zeros_like(slots)
    return digits.astype(f"<u{elem}").view(np.uint8)


class DumpRunner:
    def __init__(self, cubin: str):
        import cupy as cp
        self.cp = cp
        self.lib = libcuda()
        self.fn = cp.RawModule(path=cubin).get_function("tma_capture")
        self.map_t = np.dtype([("opaque", np.uint64, (16,))], align=True)

    def run(self, cfg):
        cp, e = self.cp, tma_campaign.ELEM[cfg["dtype"]]
        n_bytes = source_bytes(cfg)
        runs = 1 if "values" in cfg else fill_runs(n_bytes // e, e)
        gbuf = cp.zeros(n_bytes + 256, dtype=cp.uint8)
        code, name, raw = encode(self.lib, cfg, gbuf.data.ptr)
        res = dict(encode=name, runs=[])
        if code != 0:
            res["status"] = "encode_rejected"
            return res, {}
        tmap = np.zeros((), self.map_t)
        tmap["opaque"] = np.frombuffer(raw, np.uint64)
        coords = np.zeros((4, 5), np.int32)
        for b, c in enumerate(cfg["coords"]):
            coords[b, : len(c)] = c
        coords_d, dst_d = cp.asarray(coords), cp.asarray(np.array(cfg["dst_offsets"] + [0] * 4, np.uint32)[:4])
        region = cfg["region_bytes"]
        tx = tma_campaign.box_bytes(cfg) * len(cfg["coords"])
        smem = region + 1024
        self.fn.max_dynamic_shared_size_bytes = smem
        dumps = {}
        for r in range(runs):
            gbuf[:n_bytes] = cp.asarray(fill_values(cfg, n_bytes) if "values" in cfg else fill(n_bytes, e, r))
            out = cp.zeros(region, cp.uint8)
            info = cp.zeros(8, cp.uint32)
            sent = SENTINELS[r]
            self.fn((1,), (128,), (tmap[()], np.int32(cfg["rank"]), np.int32(len(cfg["coords"])), coords_d, dst_d,
                               np.uint32(region), np.uint32(tx), np.uint32(sent * 0x01010101),
                               np.uint64(TIMEOUT_NS), np.uint32(SETTLE_NS), out, info), shared_mem=smem)
            cp.cuda.Device().synchronize()
            inf = info.get()
            key = f"c{cfg['id']}_r{r}"
            dumps[key] = out.get()
            res["runs"].append(dict(key=key, sentinel=sent, digit=r, wait_ns=int(inf[6])))
            if inf[0] != 0 or res.get("status") == "timeout":
                res["status"] = "timeout"
            else:
                res["status"] = "ok"
            res["region_addr"] = int(inf[1])
            res["dst_addrs"] = [int(x) for x in inf[2: 2 + len(cfg["coords"])]]
        res["tx_bytes"] = tx
        return res, dumps


def _worker(args):
    """Child process: run configs from --start (or only --only), one result file each."""
    cfgs = json.loads(Path(args.work, "configs.json").read_text())
    runner = DumpRunner(args.cubin)
    ids = [args.only] if args.only is not None else range(args.start, len(cfgs))  # positions in configs.json
    for i in ids:
        Path(args.work, "progress").write_text(str(i))
        try:
            res, dumps = runner.run(cfgs[i])
        except Exception as exc:  # a CUDA fault poisons the context: record it and leave
            Path(args.work, f"res_{i}.json").write_text(json.dumps(dict(status="fault", error=repr(exc))))
            sys.exit(3)
        np.savez(Path(args.work, f"res_{i}.npz"), **dumps)
        Path(args.work, f"res_{i}.json").write_text(json.dumps(res))


def run_dumps(cubin: str, out: Path, log, tags=None) -> list:
    cfgs = [c for c in tma_campaign.campaign() if not tags or c["tag"] in tags]
    work = Path(tempfile.mkdtemp(prefix="lapis-tma-"))
    (work / "configs.json").write_text(json.dumps(cfgs))
    child = [sys.executable, "-m", "lapis.gpu.capture_tma", "_worker", "--work", str(work), "--cubin", cubin]
    run_isolated(len(cfgs), child, work, log)
    dumps = {}
    for i, c in enumerate(cfgs):
        c["result"] = json.loads((work / f"res_{i}.json").read_text())
        npz = work / f"res_{i}.npz"
        if npz.exists():
            with np.load(npz) as z:
                dumps.update({k: z[k] for k in z.files})
    np.savez_compressed(out / "dumps.npz", **dumps)
    return cfgs


# ------------------------------------------------------------------ encode --

def run_encode() -> list:
    import cupy as cp
    lib = libcuda()
    g = cp.zeros(1 << 16, cp.uint8)
    base = (g.data.ptr + 255) // 256 * 256
    cases = encode_campaign.campaign()
    for c in cases:
        code, name, _ = encode(lib, c, base)
        c["result"] = dict(code=code, name=name, accepted=code == 0)
    return cases


# -------------------------------------------------------------- provenance --

def _sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception as exc:  # recorded, not fatal
        return f"unavailable: {exc!r}"


def command_line(program: str, argv: list[str]) -> str:
    """The command as run: `program` (e.g. "lapis capture wgmma", "python -m lapis.gpu.race") then argv, shell-
    quoted (shlex.join). Leading argv words that repeat program's own after its first (sys.argv[1:] of `lapis
    capture tma --out D` is ["capture", "tma", "--out", "D"]) are taken once, so the record never reads
    "lapis capture tma capture tma"."""
    words, argv = program.split(), list(argv)
    if len(words) > 1 and argv[:len(words) - 1] == words[1:]:
        argv = argv[len(words) - 1:]
    return shlex.join(words + argv)


def provenance(git_file: str | None, argv: list[str], program: str) -> dict:
    """GPU, driver, CUDA, date and the command as run (command_line(program, argv)), plus the git facts from
    git_file. program: how the campaign was started ("lapis capture tma" from the CLI, "python -m lapis.gpu.race")."""
    import cupy as cp
    lib = libcuda()
    v = ctypes.c_int()
    lib.cuDriverGetVersion(ctypes.byref(v))
    props = cp.cuda.runtime.getDeviceProperties(0)
    p = dict(
        gpu=props["name"].decode(), compute_capability=f"{props['major']}.{props['minor']}",
        sm_count=props["multiProcessorCount"],
        driver=_sh(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]),
        cuda_driver_api=v.value, cuda_runtime=cp.cuda.runtime.runtimeGetVersion(),
        nvcc=_sh(["nvcc", "--version"]).splitlines()[-1:], cupy=cp.__version__, numpy=np.__version__,
        python=platform.python_version(), host=platform.node(),
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        command=command_line(program, argv))
    if git_file:
        p.update(json.loads(Path(git_file).read_text()))
    return p


def build(out: Path) -> str:
    cubin = str(out / "tma_capture_v1.cubin")
    subprocess.run(["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-o", cubin, str(KERNEL)],
                   check=True)
    return cubin


def main(argv=None):
    """`lapis capture tma` (the CLI passes argv) or `python -m lapis.gpu.capture_tma` (argv None: sys.argv)."""
    program = "lapis capture tma" if argv is not None else "python -m lapis.gpu.capture_tma"
    ap = argparse.ArgumentParser(prog=program, description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output folder (gets tma/ and encode/); GPU only")
    ap.add_argument("--provenance", help="JSON with commit, dirty and source blob SHAs, made where git is")
    ap.add_argument("--what", choices=("all", "dumps", "encode"), default="all")
    ap.add_argument("--tags", help="comma-separated campaign tags to run (default: all)")
    argv = list(sys.argv[1:] if argv is None else argv)
    a = ap.parse_args(argv)
    out = Path(a.out)
    t0 = time.time()
    log = lambda m: print(f"[{time.time() - t0:6.1f}s] {m}", flush=True)  # noqa: E731
    prov = provenance(a.provenance, argv, program)
    log(f"provenance: {prov['gpu']} driver {prov['driver']}")
    if a.what in ("all", "encode"):
        (out / "encode").mkdir(parents=True, exist_ok=True)
        cases = run_encode()
        rej = sum(not c["result"]["accepted"] for c in cases)
        (out / "encode" / "manifest.json").write_text(json.dumps(
            dict(provenance=prov, campaign="lapis/gpu/encode_campaign.py", cases=cases)))
        log(f"encode: {len(cases)} cases, {rej} rejected")
    if a.what in ("all", "dumps"):
        (out / "tma").mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            cubin = build(Path(tmp))
            cfgs = run_dumps(cubin, out / "tma", log, a.tags.split(",") if a.tags else None)
        (out / "tma" / "manifest.json").write_text(json.dumps(
            dict(provenance=prov, kernel="lapis/gpu/kernels/tma_capture_v1.cu",
                 campaign="lapis/gpu/tma_campaign.py", guard_bytes=tma_campaign.GUARD,
                 fill="element slot s = byte offset // elem_bytes holds digit `digit` (elem_bytes*8 bits) of s+1, "
                      "little-endian", configs=cfgs)))
        import collections
        log("dumps: " + str(collections.Counter(c["result"]["status"] for c in cfgs)))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        ap = argparse.ArgumentParser()
        ap.add_argument("_worker")
        ap.add_argument("--work", required=True)
        ap.add_argument("--cubin", required=True)
        ap.add_argument("--start", type=int, default=0)
        ap.add_argument("--only", type=int)
        _worker(ap.parse_args())
    else:
        main()
