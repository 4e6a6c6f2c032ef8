"""GPU oracles for property tests: what the real TMA, cuTensorMapEncodeTiled and wgmma do with a given input.

`Oracle` answers three questions, one request at a time, from ONE persistent child process that keeps the CUDA
context, the compiled kernels and the buffers between requests (so a test can draw hundreds of examples):

- `tma_load(tensor_map, coords, smem_offset)`: the shared-memory bytes one
  `cp.async.bulk.tensor` load writes (kernels/tma_capture_v1.cu, as `lapis capture tma` runs it), as a uint8
  array of `tensor_map.smem_footprint` bytes starting at the destination. Bytes the load does not write keep
  `SENTINEL`. The global tensor holds `global_image(tensor_map)` unless `global_image=` is given.
- `encode(tensor_map)`: the driver's decision: an `EncodeResult` with the CUresult name (`CUDA_SUCCESS`,
  `CUDA_ERROR_INVALID_VALUE`, ...) and the 128-byte CUtensorMap when accepted.
- `wgmma_read(image, desc_a, desc_b, dtype, n, trans_a, trans_b)`: D (float32, 64 x n) of one
  `wgmma.mma_async` m64nNk* reading a shared-memory image through two 64-bit descriptors
  (kernels/wgmma_capture_v1.cu; descriptor start addresses are relative to the image's first byte, which
  sits on a 1024 B boundary).

A fault (a CUDA error, a watchdog timeout, the child dying or exceeding `timeout_s`) comes back as an
`OracleFault` value naming the error, never as an exception; the next request starts a fresh child. Bad
arguments (not a tensor map, an image that is not uint8) raise LayoutError before anything is sent.

Backends (`backend=` or the environment variable LAPIS_ORACLE_BACKEND, default `gpu`):
- `gpu`: the child runs the capture kernels on the first CUDA device (sm_90a; numpy, cupy and nvcc or
  NVRTC needed there; lapis's model is never consulted).
- `model`: the child answers from lapis's own model (lapis.layouts.tma.load_box, rules.check,
  descriptors.mma_read.predict_d). It tests the protocol and the test suites on a machine without a GPU;
  it is no evidence about hardware.

Protocol (stdin/stdout of `python -m lapis.gpu.oracle _child BACKEND`): each message is an 8-byte little-endian
length, a JSON header, then the raw bytes of the arrays the header lists in `blobs` (each as its own
8-byte length and bytes). The child keeps its stdout for the protocol and sends everything it prints to stderr.
"""

from __future__ import annotations

import json
import os
import re
import select
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lapis.errors import LayoutError

BACKENDS = ("gpu", "model")
ENV = "LAPIS_ORACLE_BACKEND"
SENTINEL = 0xA5  # what shared memory holds where the load wrote nothing
MAX_GLOBAL_BYTES = 64 << 20  # the oracle's global tensor buffer
MAX_REGION_BYTES = 200 * 1024  # smem_offset + footprint: the capture kernel needs 1 KiB of slack in 227 KiB
WATCHDOG_NS = 200_000_000  # the kernel's mbarrier watchdog (tma_capture_v1.cu)
_ELEM = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4}
_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class OracleFault:
    """A request the device could not answer: `error` names it (a CUresult or cudaError name, `timeout`,
    `child exited`, or the model's error class); `detail` says more; `op` is the request."""

    op: str
    error: str
    detail: str = ""

    def __bool__(self) -> bool:  # `if result:` reads as "got an answer"
        return False


@dataclass(frozen=True)
class EncodeResult:
    """cuTensorMapEncodeTiled's answer: the CUresult name, and the 128 map bytes when accepted (None from the
    model backend, which predicts the decision only)."""

    name: str
    map_bytes: bytes | None = None

    @property
    def accepted(self) -> bool:
        return self.name == "CUDA_SUCCESS"


# ------------------------------------------------------------------ arguments --

def encode_case(tensor_map) -> dict:
    """The raw cuTensorMapEncodeTiled arguments of a lapis TensorMap, an EncodeArgs or a capture case dict,
    as the capture scripts pass them (enum codes, innermost first, `addr_offset` bytes past a 256 B boundary)."""
    from lapis.layouts.tma import EncodeArgs, TensorMap  # GPU host: numpy-only modules, imported where used
    from lapis.layouts.tma.types import INTERLEAVE_CODES, L2_CODES, OOB_CODES, SWIZZLE_CODES
    if isinstance(tensor_map, TensorMap):
        t = tensor_map
        return dict(dtype=t.dtype.code, rank=t.rank, addr_offset=0, dims=list(t.dims), strides=list(t.strides),
                    box=list(t.box), elem_strides=list(t.elem_strides), interleave=INTERLEAVE_CODES[t.interleave],
                    swizzle=SWIZZLE_CODES[t.swizzle], l2=L2_CODES[t.l2], oob=OOB_CODES[t.oob])
    if isinstance(tensor_map, EncodeArgs):
        a = tensor_map
        return dict(dtype=a.dtype, rank=a.rank, addr_offset=a.global_address % 256, dims=list(a.dims),
                    strides=list(a.strides), box=list(a.box), elem_strides=list(a.elem_strides),
                    interleave=a.interleave, swizzle=a.swizzle, l2=a.l2, oob=a.oob, map_offset=a.map_address % 64)
    if isinstance(tensor_map, dict):
        return _checked_case(dict(tensor_map))
    raise LayoutError("the oracle takes a TensorMap, EncodeArgs or a capture case dict", type(tensor_map).__name__,
                      "build lapis.layouts.tma.TensorMap(dtype, dims, strides, box, ...)")


CASE_INTS = ("dtype", "rank", "addr_offset", "interleave", "swizzle", "l2", "oob")
CASE_LISTS = ("dims", "strides", "box", "elem_strides")


def _whole(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _checked_case(case: dict) -> dict:
    """A capture case dict with every argument cuTensorMapEncodeTiled takes, as integers (CASE_INTS) and lists
    of integers (CASE_LISTS); the values themselves may be anything the driver is asked to judge. LayoutError
    naming the missing or mistyped key."""
    missing = [k for k in CASE_INTS + CASE_LISTS if k not in case]
    if missing:
        raise LayoutError("an encode case dict holds every cuTensorMapEncodeTiled argument", f"missing {missing}",
                          "pass a TensorMap or EncodeArgs, or a dict with " + ", ".join(CASE_INTS + CASE_LISTS))
    bad = [k for k in CASE_INTS if not _whole(case[k])] + \
        [k for k in CASE_LISTS if not (isinstance(case[k], (list, tuple)) and all(map(_whole, case[k])))] + \
        [k for k in ("map_offset",) if k in case and not _whole(case[k])]
    if bad:
        raise LayoutError("an encode case's arguments are integers (dims, strides, box, elem_strides: lists of "
                          "integers)", ", ".join(f"{k} = {case[k]!r}" for k in bad), "pass enum codes and sizes "
                          "as whole numbers (lapis.layouts.tma.types)")
    return case


def source_bytes(case: dict) -> int:
    """Bytes of the global tensor a case spans: strides[-1] x dims[-1], or dims[0] x element bytes for rank 1."""
    if case["rank"] > 1:
        return int(case["strides"][-1]) * int(case["dims"][-1])
    return int(case["dims"][0]) * _ELEM[case["dtype"]]


def global_image(tensor_map) -> np.ndarray:
    """The bytes the oracle puts in the global tensor unless told otherwise: seeded random uint8 over
    source_bytes (numpy default_rng(0)), so every element of every type differs with high probability and NaN
    bit patterns occur."""
    return _pattern(source_bytes(encode_case(tensor_map))).copy()


_PATTERN: dict = {}


def _pattern(n: int) -> np.ndarray:
    if _PATTERN.get("n") != n:  # one cached pattern: consecutive requests often share a tensor size
        _PATTERN["n"], _PATTERN["bytes"] = n, np.random.default_rng(0).integers(0, 256, n, dtype=np.uint8)
    return _PATTERN["bytes"]


def footprint(case: dict) -> int:
    """Shared-memory bytes one box spans (rows padded to the swizzle span); lapis.layouts.tma's smem_footprint."""
    e, span = _ELEM[case["dtype"]], {0: 0, 1: 32, 2: 64, 3: 128}.get(case["swizzle"], 128)
    box, es = case["box"], case["elem_strides"]
    rows = 1
    for b, s in zip(box[1:], es[1:]):
        rows *= -(-b // s)
    return rows * (span or box[0] * e)


# --------------------------------------------------------------------- parent --

class Oracle:
    """The persistent oracle child and the requests to it. Use as a context manager or call close().

    backend: 'gpu' or 'model' (default: $LAPIS_ORACLE_BACKEND, else 'gpu').
    timeout_s: the longest one request may take, in seconds (the first GPU request of a kind also compiles its
    kernel file with nvcc: tens of seconds for wgmma_capture_v1.cu).
    """

    def __init__(self, backend: str | None = None, timeout_s: float = 300.0):
        backend = backend or os.environ.get(ENV, "gpu")
        if backend not in BACKENDS:
            raise LayoutError("unknown oracle backend", repr(backend), f"use one of {', '.join(BACKENDS)} "
                              f"(argument backend= or ${ENV})")
        self.backend, self.timeout_s = backend, float(timeout_s)
        self._proc: subprocess.Popen | None = None
        self.starts = 0  # children started so far (a fault replaces the child)

    # -- lifetime --------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc and self._proc.poll() is None else None

    def _start(self) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(_ROOT)] + [p for p in [os.environ.get(
            "PYTHONPATH")] if p]))
        self._proc = subprocess.Popen([sys.executable, "-m", "lapis.gpu.oracle", "_child", self.backend],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=str(_ROOT))
        self.starts += 1

    def _stop(self) -> None:
        p, self._proc = self._proc, None
        if p is None:
            return
        if p.poll() is None:
            p.kill()  # our own child, by its handle
        p.wait()
        for f in (p.stdin, p.stdout):
            try:
                f.close()
            except OSError:
                pass

    def close(self) -> None:
        self._stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self._stop()
        except Exception:  # interpreter shutdown: nothing left to clean
            pass

    # -- one request -------------------------------------------------------------

    def request(self, header: dict, blobs: tuple = (), timeout_s: float | None = None):
        """Send one request, return (header, blobs) or an OracleFault. Starts the child when there is none;
        a fault that poisons the child's CUDA context (or a timeout) ends it, so the next request starts anew."""
        op = header.get("op", "?")
        if self._proc is None or self._proc.poll() is not None:
            self._stop()
            self._start()
        try:
            _write(self._proc.stdin, header, blobs)
            reply = _read(self._proc.stdout, time.monotonic() + (timeout_s or self.timeout_s))
        except TimeoutError:
            self._stop()
            return OracleFault(op, "timeout", f"no answer within {timeout_s or self.timeout_s} s; child replaced")
        except (EOFError, BrokenPipeError, OSError) as exc:
            try:
                rc = self._proc.wait(timeout=5)  # the pipe closes as the child dies; its status follows
            except subprocess.TimeoutExpired:
                rc = None
            self._stop()
            return OracleFault(op, "child exited", f"rc {rc}: {exc!r}")
        head, data = reply
        if "fault" in head:
            if head.get("fatal"):
                self._stop()
            return OracleFault(op, head["fault"], head.get("detail", ""))
        return head, data

    # -- the three oracles -------------------------------------------------------

    def ping(self) -> dict | OracleFault:
        """The child's device: {'backend', 'device', 'cc'}."""
        r = self.request({"op": "ping"})
        return r if isinstance(r, OracleFault) else r[0]

    def tma_load(self, tensor_map, coords, smem_offset: int, global_image: np.ndarray | None = None):
        """The bytes [dst, dst + footprint) of shared memory after one tiled TMA load of the box at `coords`
        (innermost first) to dst = a 1024 B-aligned region start + smem_offset. Returns a uint8 array, or an
        OracleFault (encode rejected, misaligned destination, illegal instruction, watchdog timeout, ...).
        LayoutError for arguments it cannot send (a NaN or non-integer offset or coordinate, a packed or unknown
        dtype code, no dims, an element stride of 0)."""
        case = encode_case(tensor_map)
        if case["dtype"] not in _ELEM or not case["dims"] or 0 in case["elem_strides"][1:]:
            raise LayoutError("a TMA load's tensor map has a non-packed dtype code, at least one dim and element "
                              "strides other than 0", f"dtype {case['dtype']!r}, dims {case['dims']!r}, "
                              f"elem_strides {case['elem_strides']!r}", "ask encode() about such arguments")
        if not _whole(smem_offset) or isinstance(coords, (str, bytes)) or not hasattr(coords, "__iter__") \
                or not all(map(_whole, coords)):
            raise LayoutError("a TMA load takes an integer smem_offset and integer coordinates",
                              f"smem_offset {smem_offset!r}, coords {coords!r}",
                              "pass whole numbers (innermost coordinate first)")
        n = source_bytes(case)
        if n > MAX_GLOBAL_BYTES:
            raise LayoutError("the oracle's global tensor holds 64 MiB", f"{n} B",
                              "use smaller dims or strides in the property test")
        smem_offset = int(smem_offset)
        if smem_offset < 0 or smem_offset + footprint(case) > MAX_REGION_BYTES:
            raise LayoutError("the box must land in the oracle's 200 KiB shared-memory region",
                              f"smem_offset {smem_offset} + footprint {footprint(case)} B",
                              "use a smaller box or smem_offset")
        g = global_image if global_image is not None else _pattern(n)
        if not isinstance(g, np.ndarray) or g.dtype != np.uint8 or g.ndim != 1 or g.size < n:
            raise LayoutError("global_image must be 1-D uint8 bytes covering the tensor", getattr(g, "shape", g),
                              f"pass at least {n} bytes (np.ascontiguousarray(x).view(np.uint8).ravel())")
        r = self.request({"op": "tma_load", "case": case, "coords": [int(c) for c in coords],
                          "smem_offset": smem_offset}, (np.ascontiguousarray(g[:n]),))
        return r if isinstance(r, OracleFault) else np.frombuffer(r[1][0], np.uint8).copy()

    def encode(self, tensor_map) -> EncodeResult | OracleFault:
        """What cuTensorMapEncodeTiled returns for these arguments (a TensorMap, EncodeArgs or case dict: every
        argument present, as integers, else LayoutError)."""
        r = self.request({"op": "encode", "case": encode_case(tensor_map)})
        if isinstance(r, OracleFault):
            return r
        return EncodeResult(r[0]["name"], r[1][0] if r[1] else None)

    def wgmma_read(self, image: np.ndarray, desc_a: int, desc_b: int, dtype: str, n: int,
                   trans_a: bool = False, trans_b: bool = False):
        """D = A x B^T (float32, 64 x n) of one wgmma m64nNk* whose descriptors' start addresses are offsets
        into `image` (uint8, the shared memory from a 1024 B boundary, a multiple of 16 B, at most 200 KiB).
        dtype: bf16, f16 (trans_a/trans_b allowed), tf32, e4m3 (K-major only); n: 8, 16, 64, 128 or 256.
        LayoutError for an image, shape or argument out of those (a descriptor that is not a 64-bit integer,
        a NaN)."""
        if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 1 \
                or image.size % 16 or image.size > MAX_REGION_BYTES:
            raise LayoutError("wgmma_read takes a 1-D uint8 image of a multiple of 16 B, at most 200 KiB",
                              getattr(image, "shape", image), "pad the image to a multiple of 16 B")
        for name, v in (("desc_a", desc_a), ("desc_b", desc_b), ("n", n)):
            if not _whole(v) or not 0 <= v < 1 << 64:
                raise LayoutError(f"{name} is an integer" + (" (a 64-bit wgmma descriptor)" if name != "n" else ""),
                                  repr(v), "pass the descriptor as built by lapis.layouts.descriptors (an int), "
                                  "n as 8, 16, 64, 128 or 256")
        for name, v in (("trans_a", trans_a), ("trans_b", trans_b)):
            if not isinstance(v, (bool, np.bool_)) and v not in (0, 1):
                raise LayoutError(f"{name} is True or False", repr(v), f"pass {name}=True or False")
        if not isinstance(dtype, str):
            raise LayoutError("dtype is a name", repr(dtype), "use bf16, f16, tf32 or e4m3")
        ta, tb = int(bool(trans_a)), int(bool(trans_b))
        if n not in (8, 16, 64, 128, 256) or dtype not in ("bf16", "f16", "tf32", "e4m3") or \
                ((ta or tb) and dtype not in ("bf16", "f16")):
            raise LayoutError("no wgmma_capture_v1 kernel for this shape", f"{dtype} n{n} ta{ta} tb{tb}",
                              "use n in 8, 16, 64, 128, 256; transpose only bf16/f16")
        r = self.request({"op": "wgmma", "dtype": dtype, "n": int(n), "ta": ta, "tb": tb,
                          "desc_a": int(desc_a), "desc_b": int(desc_b)}, (np.ascontiguousarray(image),))
        return r if isinstance(r, OracleFault) else np.frombuffer(r[1][0], np.float32).reshape(64, n).copy()


# ------------------------------------------------------------------- framing --

def _write(f, header: dict, blobs=()) -> None:
    head = dict(header, blobs=len(blobs))
    raw = json.dumps(head).encode()
    parts = [struct.pack("<Q", len(raw)), raw]
    for b in blobs:
        mv = memoryview(np.ascontiguousarray(b)).cast("B") if isinstance(b, np.ndarray) else memoryview(b)
        parts += [struct.pack("<Q", mv.nbytes), mv]
    for p in parts:
        f.write(p)
    f.flush()


def _read_exact(f, n: int, deadline: float | None) -> bytes:
    out = bytearray()
    fd = f.fileno()
    while len(out) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(n - len(out), 1 << 20))
        if not chunk:
            raise EOFError("pipe closed")
        out += chunk
    return bytes(out)


def _read(f, deadline: float | None = None):
    n = struct.unpack("<Q", _read_exact(f, 8, deadline))[0]
    head = json.loads(_read_exact(f, n, deadline))
    blobs = [_read_exact(f, struct.unpack("<Q", _read_exact(f, 8, deadline))[0], deadline)
             for _ in range(head.pop("blobs", 0))]
    return head, blobs


# ---------------------------------------------------------------------- child --

class _ModelBackend:
    """Answers from lapis's model (CPU). Faults are the model's errors, named by class."""

    name = "model"

    def ping(self) -> dict:
        return dict(backend="model", device="lapis model (no GPU)", cc="9.0")

    def tma_load(self, case, coords, smem_offset, g):
        from lapis.layouts.tma import EncodeRejected, TensorMap, load_box  # GPU host: numpy-only modules
        try:
            t = TensorMap.from_driver_args(case["dtype"], case["dims"], case["strides"], case["box"],
                                           case["elem_strides"], case["interleave"], case["swizzle"], case["l2"],
                                           case["oob"])
        except EncodeRejected as exc:  # named as the driver names it
            return _Fault("CUDA_ERROR_INVALID_VALUE", str(exc), fatal=False)
        dst = 1024 + smem_offset  # any 1024 B-aligned region start gives the same bytes
        smem = np.full(t.smem_footprint, SENTINEL, np.uint8)
        load_box(t, np.frombuffer(g, np.uint8), coords, dst, smem, dst)
        return smem

    def encode(self, case):
        from lapis.layouts.tma.rules import EncodeArgs, check  # GPU host: numpy-only modules
        ok = not check(EncodeArgs.from_case(case, 256))
        return "CUDA_SUCCESS" if ok else "CUDA_ERROR_INVALID_VALUE", None

    def wgmma(self, h, image):
        from lapis.layouts.descriptors.mma_read import predict_d  # GPU host: the model backend only
        from lapis.layouts.descriptors.sm90 import WgmmaDescriptor
        d = predict_d(image, 0, h["dtype"], h["n"], WgmmaDescriptor.decode(h["desc_a"]),
                      WgmmaDescriptor.decode(h["desc_b"]), bool(h["ta"]), bool(h["tb"]))
        return d.astype(np.float32)


class _GpuBackend:
    """Runs kernels/tma_capture_v1.cu and wgmma_capture_v1.cu with cupy, the driver through ctypes (as
    lapis.gpu.capture_tma does). Buffers are allocated once and grown when a request needs more."""

    name = "gpu"

    def __init__(self):
        import cupy as cp

        from lapis.gpu.capture_tma import encode  # GPU host: numpy + cupy only
        from lapis.gpu.harness import libcuda
        self.cp, self.lib, self._encode = cp, libcuda(), encode
        self.g = cp.zeros(MAX_GLOBAL_BYTES + 256, cp.uint8)
        self.base = (self.g.data.ptr + 255) // 256 * 256
        self.out = cp.zeros(MAX_REGION_BYTES + 1024, cp.uint8)
        self.info = cp.zeros(8, cp.uint32)
        self.coords = cp.zeros(20, cp.int32)
        self.dst = cp.zeros(4, cp.uint32)
        self.mods: dict = {}
        self.map_t = np.dtype([("opaque", np.uint64, (16,))], align=True)

    def _module(self, kernel: str):
        if kernel not in self.mods:
            src = Path(__file__).parent / "kernels" / f"{kernel}.cu"
            self.mods[kernel] = _compile(self.cp, src)
        return self.mods[kernel]

    def ping(self) -> dict:
        props = self.cp.cuda.runtime.getDeviceProperties(0)
        return dict(backend="gpu", device=props["name"].decode(), cc=f"{props['major']}.{props['minor']}")

    def encode(self, case):
        code, name, raw = self._encode(self.lib, case, self.base)
        return name, (raw if code == 0 else None)

    def tma_load(self, case, coords, smem_offset, g):
        cp = self.cp
        self.g[:len(g)] = cp.asarray(np.frombuffer(g, np.uint8))
        code, name, raw = self._encode(self.lib, case, self.base)
        if code != 0:
            return _Fault(name, "cuTensorMapEncodeTiled rejected the tensor map", fatal=False)
        tmap = np.zeros((), self.map_t)
        tmap["opaque"] = np.frombuffer(raw, np.uint64)
        c = np.zeros(20, np.int32)
        c[:len(coords)] = coords
        self.coords.set(c)
        self.dst.set(np.array([smem_offset, 0, 0, 0], np.uint32))
        fp = footprint(case)
        region = -(-(smem_offset + fp) // 1024) * 1024
        fn = self._module("tma_capture_v1").get_function("tma_capture")
        fn.max_dynamic_shared_size_bytes = region + 1024
        tx = _box_bytes(case)
        fn((1,), (128,), (tmap[()], np.int32(case["rank"]), np.int32(1), self.coords, self.dst, np.uint32(region),
                          np.uint32(tx), np.uint32(SENTINEL * 0x01010101), np.uint64(WATCHDOG_NS), np.uint32(20_000),
                          self.out, self.info), shared_mem=region + 1024)
        cp.cuda.Device().synchronize()
        if int(self.info.get()[0]) != 0:
            return _Fault("timeout", "the load did not complete within the 200 ms mbarrier watchdog", fatal=False)
        return self.out[smem_offset:smem_offset + fp].get()

    def wgmma(self, h, image):
        cp = self.cp
        fn = self._module("wgmma_capture_v1").get_function(f"wgmma_{h['dtype']}_n{h['n']}_ta{h['ta']}_tb{h['tb']}")
        fn.max_dynamic_shared_size_bytes = image.size + 1024
        img = cp.asarray(image)
        da, db = cp.asarray(np.array([h["desc_a"]], np.uint64)), cp.asarray(np.array([h["desc_b"]], np.uint64))
        d = cp.full((1, 64, h["n"]), np.nan, cp.float32)
        dump = cp.zeros(image.size, cp.uint8)
        fn((1,), (128,), (img, np.uint32(image.size), da, db, np.int32(1), d, dump, self.info),
           shared_mem=image.size + 1024)
        cp.cuda.Device().synchronize()
        return d.get()[0]


def _box_bytes(case: dict) -> int:
    """The mbarrier transaction bytes of one box: the loaded elements, no padding (tma_campaign.box_bytes)."""
    n = 1
    for i, (b, s) in enumerate(zip(case["box"], case["elem_strides"])):
        n *= b if (i == 0 and case["interleave"] == 0) else -(-b // s)
    return n * _ELEM[case["dtype"]]


def _compile(cp, src: Path):
    """A cupy module of `src` for sm_90a: nvcc's cubin when nvcc is on PATH (as the captures build it), else NVRTC.
    The cubin is kept in the temp folder under the source's hash, so a child started after a fault loads it."""
    import hashlib
    import shutil
    import tempfile
    if shutil.which("nvcc"):
        tag = hashlib.sha256(src.read_bytes()).hexdigest()[:16]
        out = Path(tempfile.gettempdir()) / f"lapis-oracle-{src.stem}-{tag}.cubin"
        if not out.exists():
            part = out.with_suffix(f".{os.getpid()}.part")
            subprocess.run(["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-o", str(part), str(src)],
                           check=True, stdout=sys.stderr, stderr=sys.stderr)
            part.replace(out)  # atomic: a concurrent child never loads half a file
        return cp.RawModule(path=str(out))
    return cp.RawModule(code=src.read_text(), options=("-arch=sm_90a", "-std=c++17"))


@dataclass
class _Fault:
    error: str
    detail: str
    fatal: bool = True


def _error_name(exc: BaseException) -> str:
    """The CUDA error name in a cupy exception ('cudaErrorIllegalAddress: ...'), else the exception class."""
    m = re.search(r"\b(cudaError\w+|CUDA_ERROR_\w+)", str(exc))
    return m.group(1) if m else type(exc).__name__


def _serve(backend_name: str) -> int:
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed (nvcc, cupy) goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    proto_in = sys.stdin.buffer
    backend = None
    while True:
        try:
            h, blobs = _read(proto_in)
        except EOFError:
            return 0
        op = h.get("op")
        try:
            if backend is None:
                backend = _ModelBackend() if backend_name == "model" else _GpuBackend()
            res, out = _answer(backend, op, h, blobs)
        except Exception as exc:  # a CUDA fault poisons the context: report it, then leave
            fatal = backend_name == "gpu" and not isinstance(exc, LayoutError)
            _write(proto_out, {"fault": _error_name(exc), "detail": str(exc)[-2000:], "fatal": fatal})
            if fatal:
                return 3
            continue
        if isinstance(res, _Fault):
            _write(proto_out, {"fault": res.error, "detail": res.detail, "fatal": res.fatal})
            if res.fatal:
                return 3
            continue
        _write(proto_out, res, out)


def _answer(backend, op, h, blobs):
    if op == "ping":
        return backend.ping(), ()
    if op == "encode":
        name, raw = backend.encode(h["case"])
        return {"name": name}, ((raw,) if raw is not None else ())
    if op == "tma_load":
        r = backend.tma_load(h["case"], h["coords"], h["smem_offset"], blobs[0])
        return (r, ()) if isinstance(r, _Fault) else ({}, (r,))
    if op == "wgmma":
        r = backend.wgmma(h, np.frombuffer(blobs[0], np.uint8))
        return {}, (np.ascontiguousarray(r, np.float32),)
    if op == "_sleep":  # diagnostic: a request that takes `seconds` (tests of the timeout and of kills)
        time.sleep(float(h["seconds"]))
        return {}, ()
    return _Fault("unknown op", repr(op), fatal=False), ()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "_child":
        sys.exit(_serve(sys.argv[2]))
    print("usage: python -m lapis.gpu.oracle _child {gpu,model}  (started by lapis.gpu.oracle.Oracle)",
          file=sys.stderr)
    sys.exit(2)
