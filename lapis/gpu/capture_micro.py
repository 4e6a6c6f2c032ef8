"""Run the microbenchmarks on an sm_90a GPU and write DIR/micro/{manifest.json, results.json} (`lapis capture micro`).

Runs on the bare GPU machine from the source tree: `python3 -m lapis.gpu.capture_micro --out DIR --provenance
FILE`. It imports the standard library, numpy and cupy only (never lapis's model or simpy); the campaign and
the raw-to-value rules are lapis/model/micro_campaign.py, the kernels lapis/gpu/kernels/micro_*.cu.

Nothing hangs: every kernel wait loop has a %globaltimer deadline (the kernel writes an error record to
mapped pinned memory and traps), and the measurements run in a child process that the parent kills when one
measurement takes longer than --item-timeout-s (a blocking bar.sync or wgmma.wait_group has no deadline of its
own); the measurement is recorded with status "timeout" or "fault" and a new child goes on with the next one.
The whole run stops at --budget-s: what is left is recorded as "skipped".

While the measurements run, nvidia-smi samples the SM clock and power every 50 ms; each measurement gets the
samples of its own time window (never changes clock or power settings).
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from lapis.gpu import capture_tma, harness
from lapis.model import micro_campaign as mc

KERNEL_DIR = Path(__file__).parent / "kernels"
SOURCES = ("micro_core", "micro_tma", "micro_wgmma", "micro_tma_v2", "micro_mix_v1", "micro_softmax_v1",
           "micro_mix_softmax_v1", "micro_mix_softmax_v2", "micro_mix_softmax_v3", "micro_mix_softmax_v4",
           "micro_launch_v1", "micro_beside_v1", "micro_beside_v2", "micro_beside_v3", "micro_bar_v1",
           "micro_wgmma_v2", "micro_tma_v3")
# kernel name prefix -> source (first match wins: micro_tma_spread is v2, micro_tma_tile v3, micro_tma_load v1)
KERNEL_SOURCE = (("micro_tma_spread", "micro_tma_v2"), ("micro_tma_tile", "micro_tma_v3"),
                 ("micro_mix_", "micro_mix_v1"),
                 ("micro_softmax_", "micro_softmax_v1"), ("micro_mixsm_", "micro_mix_softmax_v1"),
                 ("micro_mixsm2_", "micro_mix_softmax_v2"), ("micro_contend_", "micro_mix_softmax_v3"),
                 ("micro_contend3_", "micro_mix_softmax_v4"),
                 ("micro_cta_turnover", "micro_launch_v1"), ("micro_beside_", "micro_beside_v1"),
                 ("micro_density_", "micro_beside_v2"), ("micro_sweep_", "micro_beside_v3"),
                 ("micro_bar_", "micro_bar_v1"), ("micro_chain_", "micro_wgmma_v2"),
                 ("micro_tma", "micro_tma"),
                 ("micro_wgmma", "micro_wgmma"), ("micro_", "micro_core"))


def source_of(kernel: str) -> str:
    """The kernels/<source>.cu that defines `kernel`."""
    return next(src for prefix, src in KERNEL_SOURCE if kernel.startswith(prefix))
NVCC = ["nvcc", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-cubin"]
WATCHDOG_NS = 2_000_000_000  # in-kernel mbarrier deadline
BF16_PAIR_ONE = 0x3F803F80  # two bf16 1.0 values: register operands of mma.sync and wgmma (A from registers)

# wgmma operand descriptors with the start address relative to the kernel's 1024 B-aligned region (the kernel
# adds region >> 4): A is a K-major 128B-swizzled 64 x 64 bf16 tile at offset 0, B an N x 64 one at 8192.
# Equal to lapis.layouts.descriptor_for(canonical_layout("K", "128B", "bf16", rows, 64), base).encode()
# (tests/test_micro_capture.py checks it; the GPU machine has no tensor_layouts to compute them there).
DESC_A = 0x4000004000010000
DESC_B = {64: 0x4000004000010200, 128: 0x4000004000010200, 256: 0x4000004000010200}
WGMMA_B_OFFSET = 8192
MIX_OPERAND_BYTES = WGMMA_B_OFFSET + 256 * 128  # kernels/micro_mix_v1.cu OPERAND_BYTES: the TMA ring starts here

# cuTensorMapEncodeTiled enums (cuda.h): BFLOAT16, INTERLEAVE_NONE, SWIZZLE_128B, L2_PROMOTION_L2_256B, FILL_NONE
TMA_ENCODE = dict(dtype=9, rank=2, elem_strides=[1, 1], interleave=0, swizzle=3, l2=3, oob=0)


def tensor_map_case(source: str, box_bytes: int) -> dict:
    """The cuTensorMapEncodeTiled arguments of one TMA measurement (capture_tma.encode's case form)."""
    g = mc.tma_geometry(source, box_bytes)
    return dict(TMA_ENCODE, dims=g["dims"], strides=[g["row_stride_bytes"]], box=g["box"])


# ------------------------------------------------------------------------------------------ child --

class Bench:
    """The child's GPU state: modules, the watchdog's mapped error record, TMA tensors and maps."""

    def __init__(self, cubins: dict):
        import cupy as cp

        self.cp, self.capture_tma = cp, capture_tma
        self.mods = {name: cp.RawModule(path=path) for name, path in cubins.items()}
        try:  # cudaHostAllocMapped: under UVA the device uses the host address, and a trap leaves it readable
            self.err_ptr = cp.cuda.runtime.hostAlloc(16, 2)
            self.err = (ctypes.c_uint32 * 4).from_address(self.err_ptr)
            ctypes.memset(self.err_ptr, 0, 16)
        except Exception:  # no mapped memory: a watchdog trap is then recorded as a plain fault
            self._err_dev = cp.zeros(4, cp.uint32)
            self.err_ptr, self.err = self._err_dev.data.ptr, [0, 0, 0, 0]
        self.lib = harness.libcuda()
        self.map_t = np.dtype([("opaque", np.uint64, (16,))], align=True)
        self.tensors, self.maps, self.cursor = {}, {}, {"l2": 0, "hbm": 0}

    def fn(self, kernel: str, smem: int):
        f = self.mods[source_of(kernel)].get_function(kernel)
        f.max_dynamic_shared_size_bytes = smem
        return f

    def run(self, f, grid, block, args, smem, repeats, read):
        """One warm-up launch, then `repeats` timed launches; read() turns each launch's output into a dict."""
        rows = []
        for r in range(repeats + 1):
            f((grid,), (block,), args(r), shared_mem=smem)
            self.cp.cuda.Device().synchronize()
            if r:
                rows.append(read())
        return {k: [row[k] for row in rows] for k in rows[0]}

    def tensor_map(self, source: str, box_bytes: int, case: dict | None = None):
        """The map of one TMA measurement: tensor_map_case(source, box_bytes), or `case` over the source's tensor
        (keyed by its box and swizzle)."""
        cp = self.cp
        if source not in self.tensors:
            buf = cp.empty(mc.TMA_TENSOR_BYTES[source], cp.uint8)
            buf.fill(0x3C)  # touch every page
            self.tensors[source] = buf
        key = (source, box_bytes) if case is None else (source, tuple(case["box"]), case["swizzle"])
        if key not in self.maps:
            code, name, raw = self.capture_tma.encode(self.lib, case or tensor_map_case(source, box_bytes),
                                                      self.tensors[source].data.ptr)
            if code:
                raise RuntimeError(f"cuTensorMapEncodeTiled: {name}")
            tmap = np.zeros((), self.map_t)
            tmap["opaque"] = np.frombuffer(raw, np.uint64)
            self.maps[key] = tmap
        return self.maps[key][()]


RECORD_WORDS = 5  # micro_common.cuh micro::Record: clk0, clk1, ns0, ns1, smid per CTA


def _records(out) -> np.ndarray:
    return out.get().reshape(-1, RECORD_WORDS).astype(np.int64)


def measure_rate(b: Bench, m: dict, repeats: int) -> dict:
    cp, p, k = b.cp, m["params"], m["kernel"]
    out = cp.zeros(5 * p["ctas"], cp.uint64)
    sink = cp.zeros(p["ctas"] * p["threads"], cp.uint32 if k == "micro_smem_read" else cp.float32)
    it, z = np.uint32(p["iters"]), np.uint32(0)
    args = {
        "micro_fma_rate": (it, np.float32(0.999), np.float32(1e-3), z, out, sink),
        "micro_ex2_rate": (it, np.float32(-0.5), z, out, sink),
        "micro_mma_sync_rate": (it, np.uint32(BF16_PAIR_ONE), np.uint32(BF16_PAIR_ONE), z, out, sink),
        "micro_smem_read": (it, z, out, sink),
    }.get(k) or ((it, np.float32(mc.SOFTMAX_SCALE_LOG2), z, out, sink) if k.startswith("micro_softmax_") else None) \
        or ((np.uint32(p["tensor_iters"]), np.uint32(p["softmax_iters"]), np.float32(mc.SOFTMAX_SCALE_LOG2), z, out,
             sink) if k.startswith("micro_mixsm") else None) \
        or (it, np.uint64(DESC_A), np.uint64(DESC_B.get(p.get("n"), 0)), np.uint32(BF16_PAIR_ONE),
                 np.uint32(1), z, out, sink)

    def read():
        rec = _records(out)
        return dict(cycles=float(np.median(rec[:, 1] - rec[:, 0])), ns=float(np.median(rec[:, 3] - rec[:, 2])),
                    distinct_sms=int(len(np.unique(rec[:, 4]))))
    return b.run(b.fn(k, mc.FORCE_ONE_CTA_SMEM), p["ctas"], p["threads"], lambda r: args, mc.FORCE_ONE_CTA_SMEM,
                 repeats, read)


def measure_cycles(b: Bench, m: dict, repeats: int) -> dict:
    cp, p, k = b.cp, m["params"], m["kernel"]
    out = cp.zeros(64, cp.uint64)
    it = np.uint32(p["iters"])
    smem, block = 0, 32
    if k == "micro_timer_read":
        args = (it, np.uint32(p["which"]), np.uint32(0), out)
    elif k == "micro_mbarrier_pingpong":
        args, block = (it, np.uint64(WATCHDOG_NS), np.uint64(b.err_ptr), out), 64
    elif k == "micro_named_barrier":
        args, block = (it, out), p["threads"]
    else:  # wgmma latency and chains (micro_wgmma.cu, micro_wgmma_v2.cu)
        sink = cp.zeros(128, cp.float32)
        smem, block = WGMMA_B_OFFSET + p["n"] * 128 + 1024, 128
        args = (it, np.uint64(DESC_A), np.uint64(DESC_B[p["n"]]), np.uint32(BF16_PAIR_ONE), np.uint32(1),
                np.uint32(0), out, sink)

    def read():
        o = out.get()
        wgmma = k.startswith(("micro_wgmma", "micro_chain"))
        return dict(cycles=int(o[0]), least=int(o[1])) if wgmma else dict(cycles=int(o[0]))
    return b.run(b.fn(k, smem), 1, block, lambda r: args, smem, repeats, read)


def measure_tma(b: Bench, m: dict, repeats: int) -> dict:
    cp, p = b.cp, m["params"]
    g = mc.tma_geometry(p["source"], p["box_bytes"])
    tiles = g["col_boxes"] * g["row_boxes"]
    tmap = b.tensor_map(p["source"], p["box_bytes"])
    out = cp.zeros(5 * p["ctas"], cp.uint64)
    smem = max(p["depth"] * p["box_bytes"] + 1024, mc.FORCE_ONE_CTA_SMEM)
    per_launch = p["ctas"] * p["loads"]

    def args(r):
        if p["source"] == "hbm":  # continue past the previous launch: those tiles may still be in L2
            b.cursor["hbm"] = (b.cursor["hbm"] + per_launch) % tiles
        first = b.cursor["hbm"] if p["source"] == "hbm" else 0
        return (tmap, np.uint32(p["box_bytes"]), np.uint32(g["box"][0]), np.uint32(g["box"][1]),
                np.uint32(g["col_boxes"]), np.uint32(g["row_boxes"]), np.uint32(p["loads"]), np.uint32(p["depth"]),
                np.uint32(first), np.uint64(WATCHDOG_NS), np.uint64(b.err_ptr), out)

    def read():
        rec = _records(out)
        return dict(cta_ns=float(np.median(rec[:, 3] - rec[:, 2])), span_ns=int(rec[:, 3].max() - rec[:, 2].min()),
                    distinct_sms=int(len(np.unique(rec[:, 4]))))
    return b.run(b.fn("micro_tma_load", smem), p["ctas"], 32, args, smem, repeats, read)


def _map_args(b: Bench, p: dict) -> tuple:
    """The tensor map and its geometry arguments (box_bytes, box_cols, box_rows, col_boxes, row_boxes)."""
    g = mc.tma_geometry(p["source"], p["box_bytes"])
    return (b.tensor_map(p["source"], p["box_bytes"]), np.uint32(p["box_bytes"]), np.uint32(g["box"][0]),
            np.uint32(g["box"][1]), np.uint32(g["col_boxes"]), np.uint32(g["row_boxes"]))


def measure_spread(b: Bench, m: dict, repeats: int) -> dict:
    """tma.l2spread / tma.l2share: micro_tma_spread, CTA c starting at tile (c / group) * cta_stride."""
    cp, p = b.cp, m["params"]
    out = cp.zeros(5 * p["ctas"], cp.uint64)
    smem = max(p["depth"] * p["box_bytes"] + 1024, mc.FORCE_ONE_CTA_SMEM)
    args = _map_args(b, p) + (np.uint32(p["loads"]), np.uint32(p["depth"]), np.uint32(0), np.uint32(p["cta_stride"]),
                              np.uint32(p["group"]), np.uint64(WATCHDOG_NS), np.uint64(b.err_ptr), out)

    def read():
        rec = _records(out)
        return dict(cta_ns=float(np.median(rec[:, 3] - rec[:, 2])), span_ns=int(rec[:, 3].max() - rec[:, 2].min()),
                    distinct_sms=int(len(np.unique(rec[:, 4]))))
    return b.run(b.fn(m["kernel"], smem), p["ctas"], 32, lambda r: args, smem, repeats, read)


MAX_TILE_DEPTH = 4  # kernels/micro_tma_v3.cu MAX_DEPTH


def tile_map_case(box: list, swizzle: int) -> dict:
    """cuTensorMapEncodeTiled arguments of a version-10 part: the L2-resident tensor as rows of mc.TILE_COLS bf16,
    box [cols, rows], the set's swizzle, no L2 promotion (the b200-attention kernels' init_tmap_2d_simple)."""
    rows = mc.TMA_TENSOR_BYTES[mc.TILE_TENSOR] // (mc.TILE_COLS * 2)
    return dict(TMA_ENCODE, swizzle=swizzle, l2=0, dims=[mc.TILE_COLS, rows], strides=[mc.TILE_COLS * 2], box=box)


def measure_tile(b: Bench, m: dict, repeats: int) -> dict:
    """tmatile.*: micro_tma_tile or micro_tma_tile_<set> (kernels/micro_tma_v3.cu), one CTA per SM, each tile
    pair's boxes onto one mbarrier."""
    cp, p = b.cp, m["params"]
    if not 1 <= p["depth"] <= MAX_TILE_DEPTH:  # the kernel's mbarrier array holds MAX_DEPTH stages
        raise ValueError(f"tmatile depth {p['depth']} is not in 1..{MAX_TILE_DEPTH} (kernels/micro_tma_v3.cu)")
    out = cp.zeros(5 * p["ctas"], cp.uint64)
    smem = max(p["depth"] * p["tile_bytes"] + 1024, mc.FORCE_ONE_CTA_SMEM)
    maps = [b.tensor_map(mc.TILE_TENSOR, 0, tile_map_case(box, p["swizzle"])) for box in (p["a_box"], p["b_box"])]
    u = np.uint32
    shapes = () if m["kernel"] != "micro_tma_tile" else (  # the run-time loop kernel takes the box shapes
        u(p["a_box"][0]), u(p["a_box"][1]), u(p["b_box"][0]), u(p["b_box"][1]), u(mc.TILE_COLS))
    args = tuple(maps) + shapes + (u(mc.TILE_ROWS), u(p["tiles_total"]), u(p["tiles"]), u(p["depth"]),
                                   u(p["cta_stride"]), np.uint64(WATCHDOG_NS), np.uint64(b.err_ptr), out)

    def read():
        rec = _records(out)
        return dict(cta_ns=float(np.median(rec[:, 3] - rec[:, 2])), cycles=float(np.median(rec[:, 1] - rec[:, 0])),
                    distinct_sms=int(len(np.unique(rec[:, 4]))))
    return b.run(b.fn(m["kernel"], smem), p["ctas"], 32, lambda r: args, smem, repeats, read)


def measure_mix(b: Bench, m: dict, repeats: int) -> dict:
    """mix.wgmma_tma: wgmma on 2 warpgroups while warp 8 streams TMA boxes (8 output words per CTA)."""
    cp, p = b.cp, m["params"]
    out = cp.zeros(8 * p["ctas"], cp.uint64)
    sink = cp.zeros(p["ctas"] * 256, cp.float32)
    smem = max(MIX_OPERAND_BYTES + p["depth"] * p["box_bytes"] + 1024, mc.FORCE_ONE_CTA_SMEM)  # one CTA per SM
    args = _map_args(b, p) + (np.uint32(p["depth"]), np.uint32(0), np.uint32(p["cta_stride"]),
                              np.uint32(p["max_loads"]), np.uint32(p["iters"]), np.uint64(DESC_A),
                              np.uint64(DESC_B[p["n"]]), np.uint64(WATCHDOG_NS), np.uint64(b.err_ptr), out, sink)

    def read():
        rec = out.get().reshape(-1, 8).astype(np.int64)
        bpn = rec[:, 5] * p["box_bytes"] / np.maximum(rec[:, 7] - rec[:, 6], 1)
        return dict(cycles=float(np.median(rec[:, 1] - rec[:, 0])), ns=float(np.median(rec[:, 3] - rec[:, 2])),
                    tma_bytes_per_ns=float(np.median(bpn)), tma_loads=float(np.median(rec[:, 5])),
                    distinct_sms=int(len(np.unique(rec[:, 4]))))
    return b.run(b.fn(m["kernel"], smem), p["ctas"], p["threads"], lambda r: args, smem, repeats, read)


CONTEND_WORDS = 7  # kernels/micro_mix_softmax_v3.cu RECORD_WORDS_V3
CONTEND3_WORDS = 9  # kernels/micro_mix_softmax_v4.cu RECORD_WORDS_V4: a second follower's units and clock


def contend_words(p: dict) -> int:
    """Words per CTA record of a contend measurement: CONTEND3_WORDS for version 6 (params with follow2)."""
    return CONTEND3_WORDS if "follow2" in p else CONTEND_WORDS


def contend_values(rec: np.ndarray, p: dict) -> dict:
    """One launch's contend values from its records (one row per CTA: clk0, clk1, ns0, ns1, smid, then per follower
    its units at the flag and its clock there; contend_words(p) words): the leader's window (cycles, ns) and each
    follower's units per clk (follower_rate, follower2_rate), medians over CTAs. RuntimeError (the measurement
    fails) where a CTA's leader window or ns window is not after its start (an unwritten record is zeros), or a
    follower never saw the flag (it finished first: follow_iters too small), its units at the flag are below zero
    (a word past 2**63: corrupt) or its clock at the flag is not after the start; and where `rec` is not one row
    of contend_words(p) words per CTA for at least one CTA (a record read at the wrong width)."""
    words = contend_words(p)
    if rec.ndim != 2 or rec.shape[0] < 1 or rec.shape[1] != words:
        raise RuntimeError(f"a contend record is one row of {words} words per CTA "
                           f"({'with' if words == CONTEND3_WORDS else 'without'} params follow2): got shape "
                           f"{rec.shape}")
    if (rec[:, 1] <= rec[:, 0]).any() or (rec[:, 3] <= rec[:, 2]).any():
        raise RuntimeError("a leader's window is not after its start: a CTA's record is unwritten or corrupt")
    res = dict(cycles=float(np.median(rec[:, 1] - rec[:, 0])), ns=float(np.median(rec[:, 3] - rec[:, 2])),
               distinct_sms=int(len(np.unique(rec[:, 4]))))
    for key, col, role in (("follower_rate", 5, p["follow"]), ("follower2_rate", 7, p.get("follow2"))):
        if not role:
            continue
        if (rec[:, col] == 0).any():
            raise RuntimeError(f"a follower never saw the leader's flag: raise follow_iters ({p['follow_iters']})")
        if (rec[:, col] < 0).any():
            raise RuntimeError("a follower's units at the flag are below zero: the record is corrupt")
        if (rec[:, col + 1] <= rec[:, 0]).any():
            raise RuntimeError("a follower's clock at the flag is not after the start: the record is corrupt")
        res[key] = float(np.median(rec[:, col] / (rec[:, col + 1] - rec[:, 0])))
    return res


def measure_contend(b: Bench, m: dict, repeats: int) -> dict:
    """contend.*, contend3.*: the leader's window (cycles, ns) and each follower's units per clk to the flag,
    medians over CTAs. A follower that never saw the flag (it finished first: follow_iters too small) fails the
    measurement."""
    cp, p = b.cp, m["params"]
    words = contend_words(p)
    out = cp.zeros(words * p["ctas"], cp.uint64)
    sink = cp.zeros(p["ctas"] * p["threads"], cp.float32)
    args = (np.uint32(p["roles"]), np.uint32(p["iters"]), np.uint32(p["follow_iters"]),
            np.float32(mc.SOFTMAX_SCALE_LOG2), np.uint32(0), out, sink)

    def read():
        return contend_values(out.get().reshape(-1, words).astype(np.int64), p)
    return b.run(b.fn(m["kernel"], mc.FORCE_ONE_CTA_SMEM), p["ctas"], p["threads"], lambda r: args,
                 mc.FORCE_ONE_CTA_SMEM, repeats, read)


BAR_WORDS = 6  # kernels/micro_bar_v1.cu RECORD_WORDS


def bar_values(rec: np.ndarray) -> dict:
    """One launch's bar values from its records (one row of BAR_WORDS per CTA: clk0, clk1, ns0, ns1, smid, timed
    cycles): medians over CTAs of the timed cycles (cycles), of the whole clock64 window (window_cycles) and of its
    %globaltimer ns, the largest timed cycles (cycles_max) and the SMs seen. RuntimeError (the measurement fails)
    where the records are not rows of BAR_WORDS, or a CTA's window, ns window or timed cycles is not positive or its
    timed cycles exceed its window (an unwritten record is zeros)."""
    rec = np.asarray(rec, dtype=np.int64)
    if rec.ndim != 2 or rec.shape[1] != BAR_WORDS or not len(rec):
        raise RuntimeError(f"bar records are rows of {BAR_WORDS} words, got shape {rec.shape}")
    window = rec[:, 1] - rec[:, 0]
    if (window <= 0).any() or (rec[:, 3] <= rec[:, 2]).any() or (rec[:, 5] <= 0).any() or (rec[:, 5] > window).any():
        raise RuntimeError("a CTA's window or timed cycles are not positive or not within its window: "
                           "its record is unwritten or corrupt")
    return dict(cycles=float(np.median(rec[:, 5])), cycles_max=int(rec[:, 5].max()),
                window_cycles=float(np.median(window)), ns=float(np.median(rec[:, 3] - rec[:, 2])),
                distinct_sms=int(len(np.unique(rec[:, 4]))))


def measure_bar(b: Bench, m: dict, repeats: int) -> dict:
    """bar.*: kernels/micro_bar_v1.cu, one CTA per SM (FORCE_ONE_CTA_SMEM), the records zeroed before every launch
    so a CTA that never wrote fails the measurement."""
    cp, p = b.cp, m["params"]
    out = cp.zeros(BAR_WORDS * p["ctas"], cp.uint64)
    args = (np.uint32(p["iters"]), np.uint64(WATCHDOG_NS), np.uint64(b.err_ptr), out)

    def launch_args(r):
        out.fill(0)
        return args
    return b.run(b.fn(m["kernel"], mc.FORCE_ONE_CTA_SMEM), p["ctas"], p["threads"], launch_args,
                 mc.FORCE_ONE_CTA_SMEM, repeats, lambda: bar_values(out.get().reshape(-1, BAR_WORDS)))


def turnover_gaps(rec) -> dict:
    """From per-CTA records (clk0, clk1, ns0, ns1, smid): the median over SMs' consecutive CTAs of the next one's
    entry minus the previous one's exit (ns), and the median CTA span."""
    rec = np.asarray(rec, dtype=np.int64).reshape(-1, RECORD_WORDS)
    rec = rec[rec[:, 3] > rec[:, 2]]  # a CTA that never wrote its record (zeros) is not a CTA that ran
    gaps = []
    for sm in np.unique(rec[:, 4]):
        r = rec[rec[:, 4] == sm]
        r = r[np.argsort(r[:, 2])]
        gaps += list(r[1:, 2] - r[:-1, 3])
    return dict(gap_ns=float(np.median(gaps)) if gaps else float("nan"), pairs=len(gaps),
                cta_ns=float(np.median(rec[:, 3] - rec[:, 2])) if len(rec) else float("nan"),
                distinct_sms=int(len(np.unique(rec[:, 4]))))


def measure_turnover(b: Bench, m: dict, repeats: int) -> dict:
    """launch.turnover: kernels/micro_launch_v1.cu, one CTA per SM (FORCE_ONE_CTA_SMEM)."""
    cp, p = b.cp, m["params"]
    out = cp.zeros(5 * p["ctas"], cp.uint64)
    args = (np.uint32(p["spin_ns"]), out)
    return b.run(b.fn(m["kernel"], mc.FORCE_ONE_CTA_SMEM), p["ctas"], p["threads"], lambda r: args,
                 mc.FORCE_ONE_CTA_SMEM, repeats, lambda: turnover_gaps(_records(out)))


MEASURE = {"rate": measure_rate, "cycles": measure_cycles, "tma_lat": measure_tma, "tma_bw": measure_tma,
           "mix": measure_mix, "contend": measure_contend, "turnover": measure_turnover, "bar": measure_bar,
           "tma_tile": measure_tile}


def measure(b: Bench, m: dict, repeats: int) -> dict:
    f = measure_spread if m["kernel"] == "micro_tma_spread" else MEASURE[m["kind"]]
    return f(b, m, repeats)


def _worker(a) -> None:
    """Child: run measurements from --start, one res_<i>.json each; progress names the one running."""
    work = Path(a.work)
    items = json.loads((work / "items.json").read_text())
    b = Bench(json.loads((work / "cubins.json").read_text()))
    for i in range(a.start, len(items)):
        (work / "progress").write_text(str(i))
        t0 = time.time()
        try:
            raw = measure(b, items[i], a.repeats)
            res = dict(status="ok", raw=raw)
        except Exception as exc:  # a CUDA fault poisons the context: record it and leave
            code, where = b.err[0], b.err[1]
            status = "timeout" if code == 1 else "fault"
            _write_result(work / f"res_{i}.json", dict(
                status=status, error=repr(exc)[-600:], watchdog=dict(code=code, where=where, cta=b.err[2]),
                t0=t0, t1=time.time()))
            sys.exit(3)
        res.update(t0=t0, t1=time.time())
        _write_result(work / f"res_{i}.json", res)


def _write_result(path: Path, res: dict) -> None:
    """res as JSON at path, whole or not at all (written beside it, then renamed): the parent kills a child that
    passes its item's time, possibly mid-write."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(res))
    tmp.replace(path)


def read_result(path: Path) -> dict:
    """One item's result file: its dict, or a skipped status where there is none (time budget spent), or a fault
    naming the file where it is not a JSON object with a status."""
    if not path.exists():
        return dict(status="skipped", error="time budget spent")
    try:
        res = json.loads(path.read_text())
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError: a write cut short
        return dict(status="fault", error=f"{path.name} unreadable: {exc}"[:600])
    if not isinstance(res, dict) or not isinstance(res.get("status"), str):
        return dict(status="fault", error=f"{path.name} is no object with a status: {str(res)[:200]}")
    return res


def finish(m: dict) -> None:
    """m (updated with its result) given, where ok, its value (median and spread of mc.derive's per-repeat values);
    a result whose values cannot be derived (a zero window, missing raw data) becomes a fault naming why."""
    if m["status"] != "ok":
        return
    try:
        values = mc.derive(m)
        if not values or not all(np.isfinite(values)):
            raise ValueError(f"per-repeat values {values}")
        if m["kind"] == "tma_tile" and min(values) <= 0:  # ns per tile: a zero or negative window is no timing
            raise ValueError(f"per-repeat ns per tile {values}")
        stats = mc.stats(values)
        if not np.isfinite(stats["spread_pct"]):  # a zero median: results.json would hold a bare NaN
            raise ValueError(f"median {stats['median']}")
        m["value"] = dict(stats, unit=mc.UNITS[m["kind"]])
    except (ArithmeticError, KeyError, TypeError, ValueError) as exc:
        m["status"], m["error"] = "fault", f"no value from the raw data: {type(exc).__name__}: {exc}"[:600]


# ----------------------------------------------------------------------------------------- parent --

def run_watched(n_items: int, child: list[str], work: Path, log, item_timeout_s: float, deadline: float) -> None:
    """Run the child from item 0; kill it when one item passes item_timeout_s, record that item, go on."""
    start = 0
    while start < n_items:
        if time.time() > deadline:
            break
        (work / "progress").unlink(missing_ok=True)
        with open(work / f"child_{start}.log", "w") as lf:
            p = subprocess.Popen(child + ["--start", str(start)], stdout=lf, stderr=subprocess.STDOUT)
            last, since = None, time.time()
            while p.poll() is None:
                time.sleep(0.05)
                prog = (work / "progress").read_text() if (work / "progress").exists() else None
                if prog != last:
                    last, since = prog, time.time()
                if time.time() - since > item_timeout_s or time.time() > deadline:
                    p.kill()
                    p.wait()
        if p.returncode == 0:
            return
        tail = (work / f"child_{start}.log").read_text()[-600:]
        if not last:
            log(f"child died before its first item (rc {p.returncode}): {tail}")
            for i in range(start, n_items):
                (work / f"res_{i}.json").write_text(json.dumps(dict(status="fault", error=f"child: {tail}")))
            return
        k = int(last)
        if not (work / f"res_{k}.json").exists():
            status = "timeout" if p.returncode in (-9, 137) else "fault"
            (work / f"res_{k}.json").write_text(json.dumps(dict(
                status=status, error=f"rc {p.returncode} after {time.time() - since:.1f} s: {tail}")))
        log(f"item {k} ended with rc {p.returncode}; going on from {k + 1}")
        start = k + 1


class Sampler:
    """nvidia-smi samples (SM clock MHz, power W, ...) every 50 ms with their host times, in a thread."""

    FIELDS = ("clocks.sm", "clocks.max.sm", "power.draw", "temperature.gpu", "clocks_event_reasons.active")
    # nvidia-smi block-buffers a pipe: line buffering (stdbuf) where available, and each sample carries its own
    # nvidia-smi timestamp (local time, like time.time()), so a late read does not move it
    LINE_BUFFERED = ["stdbuf", "-oL"] if shutil.which("stdbuf") else []

    def __init__(self):
        self.samples, self.fields, self.proc = [], (), None
        for fields in (self.FIELDS, self.FIELDS[:4]):
            try:
                p = subprocess.Popen(self.LINE_BUFFERED + ["nvidia-smi", "-i", "0",
                                      "--query-gpu=timestamp," + ",".join(fields),
                                      "--format=csv,noheader,nounits", "-lms", "50"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
            except OSError:
                return
            time.sleep(0.3)
            if p.poll() is None:
                self.proc, self.fields = p, fields
                threading.Thread(target=self._read, daemon=True).start()
                return

    def _read(self):
        for line in self.proc.stdout:
            vals = [v.strip() for v in line.split(",")]
            if len(vals) == len(self.fields) + 1:
                try:
                    t = datetime.datetime.strptime(vals[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                except ValueError:
                    t = time.time()
                self.samples.append((t, vals[1:]))

    def window(self, t0: float, t1: float) -> dict:
        """Samples in [t0 - 0.06, t1 + 0.06] s (at least the nearest one on each side), summarised."""
        s = [x for x in self.samples if t0 - 0.06 <= x[0] <= t1 + 0.06]
        if not s:
            before = [x for x in self.samples if x[0] < t0][-1:]
            after = [x for x in self.samples if x[0] > t1][:1]
            s = before + after
        out = dict(n_samples=len(s))
        for name, idx in (("sm_clock_mhz", 0), ("power_w", 2), ("temperature_c", 3)):
            v = [float(x[1][idx]) for x in s if _is_number(x[1][idx])]
            if v:
                out[name] = dict(min=min(v), median=float(np.median(v)), max=max(v))
        if len(self.fields) > 4:
            out["clock_event_reasons"] = sorted({x[1][4] for x in s})
        return out

    def stop(self):
        if self.proc:
            time.sleep(0.2)  # the last samples
            self.proc.terminate()
            self.proc.wait(timeout=10)


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def build(dest: Path, sources=SOURCES) -> dict:
    """nvcc the given micro_*.cu sources in parallel; {source name: cubin path}."""
    def one(name):
        cubin = dest / f"{name}.cubin"
        subprocess.run(NVCC + ["-o", str(cubin), str(KERNEL_DIR / f"{name}.cu")], check=True, timeout=300)
        return name, str(cubin)
    with ThreadPoolExecutor(max(len(sources), 1)) as pool:
        return dict(pool.map(one, sources))


def device_attributes() -> dict:
    import cupy as cp
    props = cp.cuda.runtime.getDeviceProperties(0)
    keys = ("multiProcessorCount", "sharedMemPerBlockOptin", "sharedMemPerMultiprocessor", "regsPerMultiprocessor",
            "maxThreadsPerMultiProcessor", "l2CacheSize", "totalGlobalMem", "clockRate", "memoryClockRate",
            "memoryBusWidth")
    return {k: int(props[k]) for k in keys if k in props}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = build_parser()
    a = ap.parse_args(argv)
    if not harness.gpu_present():
        print("lapis capture micro: needs an NVIDIA GPU with compute capability 9.0+ (sm_90a) and cupy",
              file=sys.stderr)
        return 2
    t_start = time.time()
    log = lambda msg: print(f"[{time.time() - t_start:6.1f}s] {msg}", flush=True)  # noqa: E731
    prov = capture_tma.provenance(a.provenance, argv, "lapis capture micro")
    attrs = device_attributes()
    log(f"{prov['gpu']}, driver {prov['driver']}, {attrs.get('multiProcessorCount')} SMs")
    items = mc.all_items(attrs["multiProcessorCount"])
    if a.only:
        items = [m for m in items if m["name"].startswith(tuple(a.only.split(",")))]
    dest = Path(a.out) / "micro"
    dest.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="lapis-micro-"))
    sources = tuple(s for s in SOURCES if any(source_of(m["kernel"]) == s for m in items))
    cubins = build(work, sources)
    log(f"built {', '.join(cubins)}")
    (work / "items.json").write_text(json.dumps(items))
    (work / "cubins.json").write_text(json.dumps(cubins))
    sampler = Sampler()
    child = [sys.executable, "-m", "lapis.gpu.capture_micro", "_worker", "--work", str(work),
             "--repeats", str(a.repeats)]
    try:
        run_watched(len(items), child, work, log, a.item_timeout_s, t_start + a.budget_s)
    finally:
        sampler.stop()
    for i, m in enumerate(items):
        res = read_result(work / f"res_{i}.json")
        m.update(res)
        if "t0" in res and "t1" in res:
            m["gpu_state"] = sampler.window(res["t0"], res["t1"])
        finish(m)
    results = dict(device_attributes=attrs, repeats=a.repeats, sampler_fields=list(sampler.fields),
                   units=mc.UNITS, measurements=items)
    # no indentation and no space after a key's colon (lapis.captures.manifest.dumps's form): the tree's byte budget
    (dest / "results.json").write_text(json.dumps(results, indent=0, separators=(",", ":")) + "\n")
    (dest / "manifest.json").write_text(json.dumps(dict(
        provenance=prov, kernels=[f"lapis/gpu/kernels/{s}.cu" for s in sources],
        campaign="lapis/model/micro_campaign.py", files=["results.json"],
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")), indent=1))
    import collections
    log("micro: " + str(dict(collections.Counter(m["status"] for m in items))))
    for m in items:
        v = m.get("value")
        log(f"  {m['name']:<34} " + (f"{v['median']:12.4g} {v['unit']:<16} spread {v['spread_pct']:.2f}%"
                                      if v else m["status"] + ": " + m.get("error", "")[:80]))
    return 0



def build_parser() -> argparse.ArgumentParser:
    """The options of `lapis capture micro`. --item-timeout-s is the deprecated spelling of --timeout-s (hidden;
    lapis.cli.parser.DEPRECATED_OPTIONS)."""
    ap = argparse.ArgumentParser(prog="lapis capture micro", description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--out", required=True, help="output folder; gets micro/ (manifest.json, results.json)")
    ap.add_argument("--provenance", help="JSON from `python -m lapis.captures.provenance` (commit, dirty, blobs)")
    ap.add_argument("--only", help="comma-separated name prefixes to run (default: all)")
    ap.add_argument("--repeats", type=int, default=mc.REPEATS, help=f"timed launches each (default {mc.REPEATS})")
    ap.add_argument("--timeout-s", dest="item_timeout_s", metavar="SECONDS", type=float, default=30.0,
                    help="seconds before a measurement is killed (default 30)")
    ap.add_argument("--item-timeout-s", dest="item_timeout_s", type=float, default=argparse.SUPPRESS,
                    help=argparse.SUPPRESS)
    ap.add_argument("--budget-s", type=float, default=170.0, help="stop starting measurements after this")
    return ap


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        wp = argparse.ArgumentParser()
        wp.add_argument("_worker")
        wp.add_argument("--work", required=True)
        wp.add_argument("--start", type=int, default=0)
        wp.add_argument("--repeats", type=int, default=mc.REPEATS)
        _worker(wp.parse_args())
    else:
        sys.exit(main())
