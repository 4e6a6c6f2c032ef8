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

NVCC_FLAGS = ("-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-Xptxas", "-v")
CACHE = Path(os.environ.get("LAPIS_KERNEL_CACHE", Path.home() / ".cache" / "lapis" / "kernels"))

# Wire formats of harness.cuh (Status, Record, HarnessArgs); little-endian, C layout.
STATUS_DTYPE = np.dtype([("code", "<u4"), ("barrier", "<u4"), ("parity", "<u4"), ("block", "<u4"),
                         ("thread", "<u4"), ("sm", "<u4"), ("t_ns", "<u8")], align=True)
RECORD_DTYPE = np.dtype([("t_ns", "<u8"), ("cta", "<u4"), ("work_item", "<u4"), ("k_index", "<i4"),
                         ("sm", "<u2"), ("role", "u1"), ("op", "u1")])
HARNESS_DTYPE = np.dtype([("status", "<u8"), ("timeline", "<u8"), ("counts", "<u8"), ("capacity", "<u4"),
                          ("roles", "<u4"), ("timeout_ns", "<u8")], align=True)
STATUS_CODES = {0: "ok", 1: "mbarrier timeout"}
KIND_COMPLETE = 0x80  # bit 7 of Record.op: the record is an observed completion (a wait returned)
# Clock anchors (harness.cuh ANCHOR): slot 0 and slot capacity-1 of each CTA's row pair %globaltimer ns
# (work_item low, k_index high 32 bits) with %clock64 cycles (t_ns). Kernels' op codes stay below ANCHOR_OP.
ANCHOR_OP, ANCHOR_ROLE, ANCHOR_SLOTS = 0x7F, 0xFF, 2
# Role codes a row interleaves (harness.cuh MAX_ROLES): record n of role r in slot 1 + r + roles * n.
MAX_ROLES = 8


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


def _libcuda():
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuMemHostAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]
    lib.cuMemHostGetDevicePointer_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p, ctypes.c_uint]
    lib.cuMemFreeHost.argtypes = [ctypes.c_void_p]
    return lib


class Status:
    """The watchdog's Status in mapped pinned host memory. Needs a current CUDA context (use cupy first).

    `device_ptr` goes into HarnessArgs.status; `read()` works even after the kernel trapped."""

    DEVICEMAP, PORTABLE = 0x02, 0x01  # CU_MEMHOSTALLOC_* (cuda.h)

    def __init__(self):
        self.lib = _libcuda()
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
    role code it records must be below it), which interleaves the row. Raises LayoutError when a timeline is
    given without 1 <= roles <= MAX_ROLES (records of a role code >= roles are counted, never written)."""
    from lapis.errors import LayoutError
    if timeline_ptr and not 1 <= roles <= MAX_ROLES:
        raise LayoutError(f"a timeline interleaves 1..{MAX_ROLES} roles (harness.cuh MAX_ROLES)", f"roles = {roles}",
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


# --------------------------------------------------------------------------------------- timeline --

def timeline_slots(capacity: int) -> int:
    """Slots per CTA row to allocate and pass as HarnessArgs.capacity: `capacity` record slots + ANCHOR_SLOTS."""
    return int(capacity) + ANCHOR_SLOTS


def role_slots(per_role: int, roles: int) -> int:
    """Record slots (timeline_slots' `capacity`) that hold `per_role` records of each of `roles` roles. Record n
    of role r goes to record slot r + roles * n (harness.cuh Timeline::record), so every role's share is
    `per_role` records only when the row has roles * per_role slots, whatever the other roles record."""
    return int(per_role) * int(roles)


def _holes(records: np.ndarray) -> np.ndarray:
    """bool, records' shape: all-zero records (slots no record reached: the host zeroed the rows)."""
    return ((records["t_ns"] == 0) & (records["cta"] == 0) & (records["work_item"] == 0) & (records["k_index"] == 0)
            & (records["sm"] == 0) & (records["role"] == 0) & (records["op"] == 0))


def written(records: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """bool [ctas, capacity]: the saved slots that hold records: within each CTA's count and not a hole.

    records: RECORD_DTYPE [ctas, capacity] as saved (anchored_to_ns: each row's records first); counts: uint32
    [ctas], records attempted. A CTA lost counts - written.sum(1) records to overflow. Rows saved before the
    roles were interleaved have no holes within their count, so this is the prefix min(counts, capacity)."""
    records, counts = np.asarray(records), np.asarray(counts)
    kept = np.minimum(counts, records.shape[1])
    return (np.arange(records.shape[1])[None, :] < kept[:, None]) & ~_holes(records)


def anchored_to_ns(raw: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Device rows -> saved records: each CTA's %clock64 cycles mapped to %globaltimer ns; anchors dropped.

    raw: RECORD_DTYPE [ctas, slots] as the kernel wrote it (slot 0 and slot slots-1: the CTA's opening and
    closing anchors; records in slots 1.., the roles interleaved, holes all-zero; t_ns in SM cycles). counts:
    uint32 [ctas], records attempted (anchors excluded), unchanged by the conversion. Each row is compacted:
    its records move to the front in slot order (which keeps each role's records in their order), the holes
    to the back. Each record within the CTA's count then gets
    t_ns = g0 + round((c - c0) * (g1 - g0) / (c1 - c0)) from its CTA's anchors (c: cycles, g: ns; integer
    arithmetic, halves rounded up). Linear in between: assumes the SM clock constant over the CTA's life;
    %clock64 is per SM, hence per-CTA anchors (PTX ISA special registers %clock64, %globaltimer).
    Returns (records RECORD_DTYPE [ctas, slots - 2], t_ns absolute ns, slots past a CTA's count untouched,
    holes all-zero at the back;
    clock_mhz float64 [ctas], the CTA's mean SM clock, NaN when its anchors share one globaltimer tick).
    Raises LayoutError when a row lacks its anchors, or its clock did not advance between them.
    """
    from lapis.errors import LayoutError
    raw, counts = np.asarray(raw), np.asarray(counts)
    if raw.ndim != 2 or raw.shape[1] < ANCHOR_SLOTS:
        raise LayoutError("timeline rows hold two anchor slots", f"shape {raw.shape}",
                          "allocate timeline_slots(capacity) records per CTA")
    a0, a1 = raw[:, 0], raw[:, -1]
    bad = np.flatnonzero((a0["op"] != ANCHOR_OP) | (a1["op"] != ANCHOR_OP))
    if bad.size:
        k = int(bad[0])
        raise LayoutError("each CTA row opens and closes with a clock anchor (op 0x7F)",
                          f"CTA {k}: first op {int(a0['op'][k]):#x}, last op {int(a1['op'][k]):#x}",
                          "pass timeline_slots(capacity) as HarnessArgs.capacity and read back after the kernel "
                          "ran Timeline::finish (a trapped launch writes no anchors)")

    def ns(a):
        return (a["work_item"].astype(np.int64) | (a["k_index"].astype(np.int64) << 32))

    c0, g0 = a0["t_ns"].astype(np.int64), ns(a0)
    dc, dg = a1["t_ns"].astype(np.int64) - c0, ns(a1) - g0
    # cycles x ns below 2^62 keeps the products in int64 (a CTA of ~2 s at 1.98 GHz reaches it)
    bad = np.flatnonzero((dc <= 0) | (dg < 0) | (dc.astype(np.float64) * dg >= 2.0 ** 62))
    if bad.size:
        k = int(bad[0])
        raise LayoutError("a CTA's closing anchor comes after its opening one (clock and globaltimer both "
                          "advance) and within ~1 s", f"CTA {k}: {int(dc[k])} cycles, {int(dg[k])} ns apart",
                          "call Timeline::init before the CTA's records and Timeline::finish after them")
    records = raw[:, 1:-1]
    records = np.take_along_axis(records, np.argsort(_holes(records), axis=1, kind="stable"), axis=1)
    valid = written(records, counts)
    c = records["t_ns"].astype(np.int64) - c0[:, None]
    t = g0[:, None] + (c * dg[:, None] + dc[:, None] // 2) // dc[:, None]
    records["t_ns"] = np.where(valid, t, records["t_ns"].astype(np.int64)).astype(np.uint64)
    with np.errstate(divide="ignore", invalid="ignore"):
        mhz = np.where(dg > 0, 1e3 * dc / np.maximum(dg, 1), np.nan)
    return records, mhz


def decode_timeline(records: np.ndarray, counts: np.ndarray, roles, ops, t0_ns: int | None = None) -> dict:
    """Records -> simulator-schema events.

    records: RECORD_DTYPE array [ctas, capacity] as saved (anchored_to_ns; only each (CTA, role)'s order
    matters); counts: uint32 [ctas], records each CTA attempted (those not written overflowed: counted, not
    written). Slots past a CTA's count and holes (all-zero records) are skipped. roles/ops: names by code.
    Each record ends an activity of its role that began at the role's previous record (the first record of
    each role, op "start", only opens it). Its kind bit decides the span's kind: an issue record closes an
    "issue" span (the role was issuing: TMA, wgmma, stores); a completion record closes a "wait" span, whose
    end is when the completion (TMA bytes landed, wgmma done, slot released) was observed.
    Times: ns from t0_ns (default: the earliest record). Returns {events: [dict], overflow: {cta: lost}},
    lost = counts - records written (> 0 only).
    """
    records, counts = np.asarray(records), np.asarray(counts)
    valid = written(records, counts)
    flat = records[valid]  # row-major: CTA by CTA, each in slot order
    if t0_ns is None:
        t0_ns = int(flat["t_ns"].min()) if flat.size else 0
    events, last = [], {}
    for r in flat:
        key = (int(r["cta"]), int(r["role"]))
        op_code, t = int(r["op"]) & 0x7F, int(r["t_ns"]) - t0_ns
        if key in last and op_code != 0:
            events.append(dict(role=roles[r["role"]], op=ops[op_code], start_ns=float(last[key]), end_ns=float(t),
                               sm=int(r["sm"]), cta=int(r["cta"]), work_item=int(r["work_item"]),
                               k_index=int(r["k_index"]), kind="wait" if int(r["op"]) & KIND_COMPLETE else "issue",
                               flow_from=None, id=len(events)))
        last[key] = t
    lost = counts.astype(np.int64) - valid.sum(axis=1)
    overflow = {int(c): int(n) for c, n in enumerate(lost) if n > 0}
    return dict(events=events, overflow=overflow, t0_ns=t0_ns)
