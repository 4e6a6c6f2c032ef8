"""Build, launch and guard lapis kernels; decode the timelines they record (host side of kernels/harness.cuh).

- `build(source, defines)`: nvcc for sm_90a into a cubin, cached by the hash of the source, the local headers it
  includes, the defines and the nvcc version; returns the cubin and ptxas's per-kernel register/spill report.
- `load(cubin)`: the cupy module. `Status`: the watchdog's record in mapped pinned host memory (cuMemHostAlloc
  with DEVICEMAP), readable after a trap has killed the CUDA context; `check_status` and
  `synchronize` raise KernelHang when it reports an expired barrier.
  `harness_args` packs the kernel's `HarnessArgs` parameter.
- `run_guarded(argv, timeout_s, what)`: runs a kernel's process with a timeout, so a blocking hang (bar.sync,
  wgmma.wait_group: no watchdog can see them) becomes `KernelHang` naming the kernel and its parameters.
- `timeline_slots(capacity)`: the row length (HarnessArgs.capacity) for `capacity` record slots plus the two
  clock anchors; `role_slots(per_role, roles)`: record slots for `per_role` records of each of `roles`
  interleaved roles; `anchored_to_ns(raw, counts)`: the rows read back from the device (roles interleaved,
  t_ns in %clock64 cycles) -> records in %globaltimer ns, holes and anchors dropped, the format that is saved
  and decoded; `written(records, counts)`: which saved slots hold records.
- `decode_timeline(...)`: per-CTA timeline records -> events in the simulator's schema
  (`lapis.pipeline_sim.recorder.Event` fields, as plain dicts; `Event(**d)` rebuilds them).

Imports only the standard library and numpy at module level (cupy inside the functions that launch), and
never lapis.pipeline_sim or simpy: the GPU machine has neither.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np

from lapis.captures.timeline import (  # noqa: F401 (the timeline wire format, re-exported for the benches)
    ANCHOR_OP,
    ANCHOR_ROLE,
    ANCHOR_SLOTS,
    KIND_COMPLETE,
    MAX_ROLES,
    RECORD_DTYPE,
    anchored_to_ns,
    decode_timeline,
    role_slots,
    timeline_slots,
    written,
)
from lapis.errors import CaptureError

NVCC_FLAGS = ("-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-Xptxas", "-v")
CACHE = Path(os.environ.get("LAPIS_KERNEL_CACHE", Path.home() / ".cache" / "lapis" / "kernels"))

# Wire formats of harness.cuh (Status, Record, HarnessArgs); little-endian, C layout.
STATUS_DTYPE = np.dtype([("code", "<u4"), ("barrier", "<u4"), ("parity", "<u4"), ("block", "<u4"),
                         ("thread", "<u4"), ("sm", "<u4"), ("t_ns", "<u8")], align=True)
HARNESS_DTYPE = np.dtype([("status", "<u8"), ("timeline", "<u8"), ("counts", "<u8"), ("capacity", "<u4"),
                          ("roles", "<u4"), ("timeout_ns", "<u8")], align=True)
STATUS_CODES = {0: "ok", 1: "mbarrier timeout"}


class KernelHang(RuntimeError):
    """A kernel process outlived its timeout (a blocking wait no watchdog sees), or a watchdog fired."""


# ------------------------------------------------------------------------------------------- build --

def _local_headers(source: Path, seen=None) -> list[Path]:
    """Every `#include "x"` reachable from source, resolved beside the including file."""
    seen = [] if seen is None else seen
    for name in re.findall(r'^\s*#include\s+"([^"]+)"', source.read_text(), re.M):
        p = (source.parent / name).resolve()
        if p.exists() and p not in seen:
            seen.append(p)
            _local_headers(p, seen)
    return seen


def _nvcc_version() -> str:
    return subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=True).stdout.strip()


def build_key(source: Path, defines: dict, nvcc_version: str) -> str:
    """sha256 over the source, its local headers (by name and text), the sorted defines and nvcc's version."""
    h = hashlib.sha256()
    for p in [Path(source).resolve()] + _local_headers(Path(source).resolve()):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    h.update(json.dumps(sorted((str(k), str(v)) for k, v in defines.items())).encode())
    h.update(nvcc_version.encode())
    return h.hexdigest()[:20]


def parse_ptxas(text: str) -> dict:
    """{kernel: {registers, spill_stores, spill_loads, stack_bytes, smem_bytes}} from `-Xptxas -v` output (bytes)."""
    out, entry = {}, None
    for line in text.splitlines():
        if m := re.search(r"Compiling entry function '(\w+)'", line):
            entry = out.setdefault(m[1], {})
        elif entry is not None and (m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
                                                   r"(\d+) bytes spill loads", line)):
            entry.update(stack_bytes=int(m[1]), spill_stores=int(m[2]), spill_loads=int(m[3]))
        elif entry is not None and (m := re.search(r"Used (\d+) registers", line)):
            entry["registers"] = int(m[1])
            s = re.search(r"(\d+) bytes smem", line)
            entry["smem_bytes"] = int(s[1]) if s else 0
            entry = None  # the entry's own report ends here; callees' reports follow
    return out


def build(source, defines: dict | None = None, cache: Path | None = None) -> tuple[Path, dict]:
    """Compile `source` for sm_90a with -D defines; returns (cubin, parse_ptxas report). Cached."""
    source, defines = Path(source), dict(defines or {})
    cache = Path(cache or CACHE)
    cache.mkdir(parents=True, exist_ok=True)
    key = build_key(source, defines, _nvcc_version())
    cubin, log = cache / f"{source.stem}-{key}.cubin", cache / f"{source.stem}-{key}.ptxas.txt"
    if not (cubin.exists() and log.exists()):
        tmp = cubin.with_suffix(f".{os.getpid()}.tmp")
        cmd = ["nvcc", *NVCC_FLAGS, *[f"-D{k}={v}" for k, v in defines.items()], "-o", str(tmp), str(source)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(f"nvcc failed for {source.name} {defines}: {p.stderr[-2000:]}")
        log.write_text(p.stderr)
        tmp.replace(cubin)
    return cubin, parse_ptxas(log.read_text())


# ----------------------------------------------------------------------------------------- launch --

def gpu_present() -> bool:
    """An NVIDIA GPU of compute capability 9.0+ (sm_90a or later) that cupy can see; False without cupy,
    driver or device. cupy gives the capability as major and minor digits ("90", "100"): compared as a number,
    so sm_100 counts (its first character, "1", would not)."""
    try:
        import cupy
        n = cupy.cuda.runtime.getDeviceCount()
        cc = int(cupy.cuda.Device(0).compute_capability) if n else 0
    except Exception:  # no cupy, no driver or no device
        n, cc = 0, 0
    return bool(n) and cc >= 90


def libcuda():
    """The CUDA driver library (libcuda.so.1) with the argument types lapis calls it with: tensor-map encoding
    (cuTensorMapEncodeTiled), error names, and the mapped pinned memory of the watchdog status."""
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuTensorMapEncodeTiled.restype = ctypes.c_int
    lib.cuTensorMapEncodeTiled.argtypes = [
        ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
        ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
        ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    lib.cuMemHostAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]
    lib.cuMemHostGetDevicePointer_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p, ctypes.c_uint]
    lib.cuMemFreeHost.argtypes = [ctypes.c_void_p]
    return lib


class Status:
    """The watchdog's Status in mapped pinned host memory. Needs a current CUDA context (use cupy first).

    `device_ptr` goes into HarnessArgs.status; `read()` works even after the kernel trapped."""

    DEVICEMAP, PORTABLE = 0x02, 0x01  # CU_MEMHOSTALLOC_* (cuda.h)

    def __init__(self):
        self.lib = libcuda()
        host = ctypes.c_void_p()
        rc = self.lib.cuMemHostAlloc(ctypes.byref(host), STATUS_DTYPE.itemsize, self.DEVICEMAP | self.PORTABLE)
        if rc:
            raise RuntimeError(f"cuMemHostAlloc failed (CUresult {rc})")
        dev = ctypes.c_uint64()
        rc = self.lib.cuMemHostGetDevicePointer_v2(ctypes.byref(dev), host, 0)
        if rc:
            raise RuntimeError(f"cuMemHostGetDevicePointer failed (CUresult {rc})")
        self.host_ptr, self.device_ptr = host.value, dev.value
        self.view = np.frombuffer((ctypes.c_uint8 * STATUS_DTYPE.itemsize).from_address(self.host_ptr),
                                  STATUS_DTYPE, count=1)
        self.reset()

    def reset(self) -> None:
        self.view[0] = np.zeros((), STATUS_DTYPE)

    def read(self) -> dict:
        r = {k: int(self.view[0][k]) for k in STATUS_DTYPE.names}
        r["status"] = STATUS_CODES.get(r["code"], f"code {r['code']}")
        return r


def load(cubin):
    """A built cubin as a cupy RawModule (kernels by extern "C" name: module.get_function(name))."""
    import cupy as cp
    return cp.RawModule(path=str(cubin))


def check_status(status: Status, what: str) -> None:
    """Raise KernelHang naming `what` (kernel and parameters) and the expired barrier if the watchdog fired."""
    r = status.read()
    if r["code"]:
        raise KernelHang(f"{what}: {r['status']} on barrier {r['barrier']} (parity {r['parity']}) in CTA {r['block']}, "
                         f"thread {r['thread']}, SM {r['sm']}")


def synchronize(status: Status, what: str) -> None:
    """Wait for the device; a failed launch whose watchdog fired raises KernelHang with the barrier, else the
    CUDA error is re-raised naming `what`."""
    import cupy as cp
    try:
        cp.cuda.Device().synchronize()
    except Exception as exc:  # a trap kills the context; the Status in host memory survives it
        check_status(status, what)
        raise RuntimeError(f"{what}: {exc}") from exc
    check_status(status, what)


def harness_args(status: Status | None, timeline_ptr: int = 0, counts_ptr: int = 0, capacity: int = 0,
                 timeout_ns: int = 1_000_000_000, roles: int = 0) -> np.ndarray:
    """The kernel's HarnessArgs, as a numpy scalar the CUDA driver copies by value (cupy passes its bytes).

    capacity: slots per CTA row (timeline_slots); roles: the kernel's role count (its plan's ROLES; every
    role code it records must be below it), which interleaves the row. Raises CaptureError when a timeline is
    given without 1 <= roles <= MAX_ROLES (records of a role code >= roles are counted, never written)."""
    if timeline_ptr and not 1 <= roles <= MAX_ROLES:
        raise CaptureError(f"a timeline interleaves 1..{MAX_ROLES} roles (harness.cuh MAX_ROLES)", f"roles = {roles}",
                           "pass roles=len(plan['roles']) to harness_args")
    a = np.zeros((), HARNESS_DTYPE)
    a["status"], a["timeline"], a["counts"] = status.device_ptr if status else 0, timeline_ptr, counts_ptr
    a["capacity"], a["timeout_ns"], a["roles"] = capacity, timeout_ns, roles
    return a


def run_guarded(argv: list[str], timeout_s: float, what: str, env=None) -> subprocess.CompletedProcess:
    """Run a kernel's process; raise KernelHang naming `what` (kernel and parameters) if it outlives timeout_s."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired as exc:
        raise KernelHang(f"{what} did not finish within {timeout_s:g} s (a blocking wait: bar.sync or "
                         f"wgmma.wait_group, which the mbarrier watchdog cannot see); the process was killed; "
                         f"stderr: {(exc.stderr or b'')[-400:]!r}") from None
