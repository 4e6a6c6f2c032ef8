"""Check and time the Hopper attention kernels (kernels/attention_h200.cu) against torch SDPA, with timelines.

`python -m lapis.gpu.bench_attention --out DIR --provenance FILE [--variants s1,s2] [--shapes BxHxLxD,...]
[--check-only] [--causal]` (GPU machine: numpy, cupy, torch, nvcc) writes DIR/manifest.json and
DIR/timelines.npz (every timeline of the run in one file) and prints a table last. Per shape:
- correctness first, on fresh inputs, output poisoned with NaN before every launch: `normal` (q, k, v ~ N(0, 1))
  and `heavy` (q, k ~ 3 x Student-t(3): scores with large, moving row maxima), against a float64 reference
  computed on the GPU by torch; ||O - ref||_2 / ||ref||_2 < 1e-2, plain and timeline builds. The small shape
  1x2x512x128 is checked first. --check-only stops here: predictions are committed between check and time.
- time: CUDA events around each launch after warm-up; median and spread_pct = IQR / median; inputs rotate over
  sets that together exceed 3x the L2; nvidia-smi clocks and power during each timed block; torch SDPA with each
  backend forced (cuDNN, flash, efficient) in the same process, with the kernel names the profiler saw;
  ratio_to_cudnn = TFLOP/s / cuDNN TFLOP/s of the same run; the timeline build's overhead over the plain build.
FLOPs: 4 B H L^2 D, half with --causal (flops()). Kernels run in a child process with a timeout (harness.run_guarded).
`--sources` prints the source files to pass to `python -m lapis.captures.provenance` (CPU side, where git is).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

from lapis.catalog.attention import (  # noqa: F401 (re-exported: the benches' callers read them here)
    DEFAULT_SHAPES,
    SMALL_SHAPE,
    VARIANTS,
    block_m,
    check_split_tail,
    kernel_name,
    sim_params,
)
from lapis.catalog.hardware import SM_COUNT
from lapis.errors import ScheduleError
from lapis.gpu import capture_tma, harness
from lapis.gpu.attention_plan import ROLES, load
from lapis.gpu.bench_gemm import SmiSampler, _json_default, _read, _time, cta_table, select_ctas, smi_gpu_id
from lapis.gpu.capture_tma import encode
from lapis.gpu.harness import libcuda
from lapis.pipeline_sim.work_order import Piece, deal, kv_tiles_per_item, section_heads, work_units

HERE = Path(__file__).parent
KERNEL = HERE / "kernels" / "attention_h200.cu"
H200_SMS = SM_COUNT["h200"]
SOURCES = ("lapis/catalog/attention.py", "lapis/gpu/bench_attention.py", "lapis/gpu/sanitize_attention.py", "lapis/gpu/attention_plan.py",
           "lapis/gpu/harness.py", "lapis/gpu/bench_gemm.py", "lapis/gpu/gen_wgmma_rs.py",
           "lapis/gpu/kernels/attention_h200.cu", "lapis/gpu/kernels/attention_variants.inc",
           "lapis/gpu/kernels/attention_plan.h", "lapis/gpu/kernels/attention_plan.json",
           "lapis/gpu/kernels/attention_sm90.cuh", "lapis/gpu/kernels/harness.cuh", "lapis/gpu/kernels/pipeline.cuh",
           "lapis/gpu/kernels/sm90.cuh", "lapis/gpu/kernels/wgmma_bf16_ss.cuh",
           "lapis/gpu/kernels/wgmma_bf16_rs.cuh")
BUILDS = {"plain": {}, "timeline": {"LAPIS_TIMELINE": 1}}
SDPA_BACKENDS = ("cudnn", "flash", "efficient")
INPUTS = ("normal", "heavy")
TOLERANCE = 1e-2
L2_BYTES = 50 * 2**20
WATCHDOG_NS = 2_000_000_000
SAVED_SMS, SAVED_FIRST_CTAS = (0,), 4


def parse_shape(shape: str) -> tuple[int, int, int, int]:
    """'BxHxLxD' -> (B, H, L, D). Raises ScheduleError for anything else."""
    parts = shape.lower().split("x")
    if len(parts) != 4 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ScheduleError("an attention shape is BxHxLxD, four positive integers", repr(shape),
                            "write it like 8x16x4096x128")
    return tuple(int(p) for p in parts)


def check_shape(v: dict, shape: str, causal: bool = False) -> tuple[int, int, int, int]:
    """(B, H, L, D) if the kernel can run it, else ScheduleError naming the rule: D = 128 and L a multiple of
    block_m and block_n (the kernels have no masked tail); causal: the variant has a causal build."""
    if causal and v["causal_build"] is None:
        causal_ones = ", ".join(n for n, x in VARIANTS.items() if x["causal_build"])
        raise ScheduleError("--causal needs a variant with a causal build", v["entry"], f"use {causal_ones}")
    b, h, seq, d = parse_shape(shape)
    if d != 128:
        raise ScheduleError("attention_h200.cu is built for head dim 128", f"D = {d}", "use D = 128")
    for what, blk in (("block_m", block_m(v)), ("block_n", v["block_n"])):
        if seq % blk:
            raise ScheduleError(f"L must be a multiple of the kernel's {what} (no masked tail)", f"L = {seq}, "
                                f"{what} = {blk}", f"pad L to a multiple of {math.lcm(block_m(v), v['block_n'])}")
    return b, h, seq, d


def flops(shape: str, causal: bool = False) -> float:
    """4 B H L^2 D; causal: half of it (the convention FlashAttention and cuDNN benchmarks use)."""
    b, h, seq, d = parse_shape(shape)
    return 4.0 * b * h * seq * seq * d / (2 if causal else 1)


def q_operand(v: dict, plan: dict) -> dict:
    """The plan's Q tile for the variant's block_m: `q` (64 rows, one consumer WG) or `q128` (two m64 halves)."""
    return plan["q"] if block_m(v) == plan["block_m"] else plan["q128"]


def smem_bytes(v: dict, plan: dict) -> int:
    """Dynamic shared memory: Q + the ring of K/V slots + 1 KiB to align (attention_h200.cu Config::SMEM_BYTES)."""
    n = str(v["block_n"])
    q = q_operand(v, plan)["slot_bytes"] * v["q_slots"]  # s8: two Q slots
    return q + v["stages"] * (plan["k"][n]["slot_bytes"] + plan["v"][n]["slot_bytes"]) + 1024


def timeline_capacity(v: dict, seq: int) -> int:
    """Record slots per CTA and work item (s8: times items_per_cta): the row interleaves len(attention_plan.ROLES)
    roles (harness.role_slots), each with room for the most records one role writes: the producer start + Q +
    2 per tile (s4: 2 per K tile and 2 per V tile); a consumer warpgroup start, wait Q, 7 per tile (+ 2 when it
    loads itself: s1; + 1 GEMM-turn wait: s4; + 2 more, wait PV and O rescale: s5) and the epilogue, with 1
    more turn wait (s4's last PV); plus 4 of slack per role."""
    n = seq // v["block_n"]
    per_tile = 9 + 2 * v["overlap"]
    return harness.role_slots(max(2 + 2 * n * (2 if v["pp"] else 1), 3 + per_tile * n + 1) + 4, len(ROLES))


def rescale_stats(count: int, shape: str, block_n: int) -> dict:
    """s7's measured rescales: `count` row-tile moves of the max (tile 0 excluded) over B*H*L rows x (L / block_n - 1)
    tiles, as lapis.model.numerics.flash_forward counts them."""
    b, h, seq, _ = parse_shape(shape)
    pairs = b * h * seq * max(seq // block_n - 1, 1)
    return dict(rescales=count, row_tiles=pairs, frequency=count / pairs)


def grid(v: dict, shape: str, sm_count: int = H200_SMS) -> tuple[int, int]:
    """Launch grid: (L / block_m, B * H), or for the persistent s8 (min(SMs, work items), 1)."""
    b, h, seq, _ = parse_shape(shape)
    if v["persist"]:
        return min(sm_count, seq // block_m(v) * b * h), 1
    return seq // block_m(v), b * h


def items_per_cta(v: dict, shape: str, sm_count: int = H200_SMS) -> int:
    b, h, seq, _ = parse_shape(shape)
    x, y = grid(v, shape, sm_count)
    return -(-(seq // block_m(v) * b * h) // (x * y))


def worklist(v: dict, shape: str, causal: bool, sm_count: int = H200_SMS) -> np.ndarray:
    """s10's work list (attention_h200.cu WORKLIST), int32: grid + 1 offsets (CTA c walks entries offsets[c] ..
    offsets[c + 1] - 1), then the items, item = q tile + (L / block_m) x (b h), in the order
    lapis.pipeline_sim.work_order deals them (the variant's persistent_order, lpt_l2 or split_tail; K/V tiles per
    item: q tile + 1 causal, else L / block_n), so the simulator and the kernel walk the same lists; a piece of a
    split item (split_tail) is entry -1 - its index in the block split_workspace appends. ScheduleError for a
    variant without a work list, a shape the kernel does not take (check_shape), sm_count < 1, or a split_tail flag
    without persistent_order=split_tail or the other way round (lapis.catalog.attention.check_split_tail)."""
    if not v.get("worklist"):
        raise ScheduleError("a work list is made for a variant that walks one (worklist true: s10+)",
                            v.get("entry"), "pass lapis.catalog.attention.VARIANTS['s10'] or a later step")
    if isinstance(sm_count, bool) or not isinstance(sm_count, int) or sm_count < 1:
        raise ScheduleError("sm_count is a positive whole number of SMs", repr(sm_count), f"use {H200_SMS}")
    b, h, seq, d = check_shape(v, shape, causal)
    q_tiles, bm, bn = seq // block_m(v), block_m(v), v["block_n"]
    units = work_units(b * h, q_tiles, 1)
    lengths = [kv_tiles_per_item(q, seq // bn, bm, bn, causal) for ((_, q),) in units]
    per = section_heads(seq, d)
    check_split_tail(v)
    order = v["sim"]["persistent_order"]  # split_tail leaves a causal list whole: its items differ in length
    per_sm = deal(lengths, grid(v, shape, sm_count)[0], order, [u[0][0] // per for u in units])
    offsets = np.cumsum([0] + [len(s) for s in per_sm])
    pieces, entries = [], []  # a piece's entry is -1 - its row in split_workspace's block
    for e in (e for s in per_sm for e in s):
        if isinstance(e, Piece):
            pieces.append(e)
        entries.append(-len(pieces) if isinstance(e, Piece) else int(e))
    head = np.concatenate([offsets, entries]).astype(np.int32)
    if order != "split_tail":
        return head
    return np.concatenate([head, split_workspace(pieces, d)]).astype(np.int32)


def split_workspace(pieces: list, d: int) -> np.ndarray:
    """s26's split-tail block after a work list's entries (attention_h200.cu SplitTail), int32: the piece count P and
    split item count G, P rows (item, first K/V tile, K/V tiles, split item, rank, pieces), 8 G ticket counters at
    0, then room for the fp32 slots, P x 2 x (d / 2 + 4) x 128 of them, from the next multiple of 4 ints (zeros).
    The kernel finds each part from gridDim.x and the entry count (offsets[grid]); P = G = 0 where nothing is split
    (a causal list, or items that divide evenly over the CTAs)."""
    groups = len({p.group for p in pieces})
    rows = [[int(p), p.first, p.count, p.group, p.rank, p.pieces] for p in pieces]
    return np.concatenate([[len(pieces), groups], np.asarray(rows, dtype=np.int64).reshape(-1),
                           np.zeros(8 * groups + 4 + len(pieces) * 2 * (d // 2 + 4) * 128, np.int64)])


def threads(v: dict) -> int:
    """Block size: the consumer warpgroups, plus the producer warpgroup of a warp-specialized variant."""
    return 128 * (v["consumer_wgs"] + v["ws"])


# ----------------------------------------------------------------------------------------- kernel --

class Attention:
    """One variant in one build, launchable on (q, k, v, o) tensors of B x H x L x D bf16."""

    def __init__(self, module, v: dict, plan: dict, lib, causal: bool = False):
        self.v, self.plan, self.lib, self.causal = v, plan, lib, causal
        self.fn = module.get_function(kernel_name(v, causal))
        self.lists = {}  # shape -> s10's work list on the GPU
        self.smem = smem_bytes(v, plan)
        self.fn.max_dynamic_shared_size_bytes = self.smem

    def tensor_map(self, ptr: int, rows: int, box_rows: int):
        tm, d = self.plan["tensor_map"], self.plan["head_dim"]
        case = dict(dtype=tm["dtype_code"], rank=2, dims=[d, rows], strides=[d * 2], box=[64, box_rows],
                    elem_strides=[1, 1], interleave=tm["interleave_code"], swizzle=tm["swizzle_code"],
                    l2=tm["l2_code"], oob=tm["oob_code"])
        code, name, raw = encode(self.lib, case, ptr)
        if code:
            raise RuntimeError(f"cuTensorMapEncodeTiled rejected {case}: {name}")
        t = np.zeros((), np.dtype([("opaque", np.uint64, (16,))], align=True))
        t["opaque"] = np.frombuffer(raw, np.uint64)
        return t

    def maps(self, q: int, k: int, vv: int, rows: int) -> list:
        n = self.v["block_n"]
        return [self.tensor_map(q, rows, q_operand(self.v, self.plan)["box"][1]), self.tensor_map(k, rows, n),
                self.tensor_map(vv, rows, n)]

    def launch(self, maps, out_ptr: int, shape: str, hargs, stats_ptr: int = 0) -> None:
        """stats_ptr: 0, or one uint32 the instrumented s7 build adds its row-tile rescale count to."""
        b, h, seq, d = parse_shape(shape)
        scale_log2 = math.log2(math.e) / math.sqrt(d)
        self.fn(grid(self.v, shape), (threads(self.v),),
                (maps[0][()], maps[1][()], maps[2][()], np.uint64(out_ptr), np.int32(seq), np.int32(b * h),
                 np.float32(scale_log2), np.uint64(stats_ptr), np.uint64(self.worklist_ptr(shape)), hargs[()]),
                shared_mem=self.smem)

    def worklist_ptr(self, shape: str) -> int:
        """The device address of s10's work list at `shape` (made once per shape), or 0 for the other variants."""
        if not self.v["worklist"]:
            return 0
        if shape not in self.lists:
            import cupy as cp
            self.lists[shape] = cp.asarray(worklist(self.v, shape, self.causal))
        return self.lists[shape].data.ptr


def make_inputs(torch, shape: str, kind: str, seed: int):
    """(q, k, v) bf16 B x H x L x D: `normal` N(0, 1); `heavy`: q, k = 3 x Student-t(3), v N(0, 1)."""
    b, h, seq, d = parse_shape(shape)
    g = torch.Generator(device="cuda").manual_seed(seed)
    n = [torch.randn(b, h, seq, d, device="cuda", generator=g) for _ in range(3)]
    if kind == "heavy":  # t(3) = z / sqrt(chi2_3 / 3), chi2_3 from three more normals
        for i in (0, 1):
            chi2 = sum(torch.randn(b, h, seq, d, device="cuda", generator=g) ** 2 for _ in range(3))
            n[i] = 3 * n[i] / torch.sqrt(chi2 / 3)
    return tuple(x.to(torch.bfloat16) for x in n)


def reference(torch, q, k, v, chunk_bytes: int = 2 << 30, causal: bool = False):
    """float64 softmax(q k^T / sqrt(D)) v of the bf16 inputs on the GPU, in (b, h) chunks of <= chunk_bytes;
    causal: key > query masked."""
    b, h, seq, d = q.shape
    qf, kf, vf = (x.reshape(b * h, seq, d) for x in (q, k, v))
    out = torch.empty(b * h, seq, d, device=q.device, dtype=torch.float64)
    step = max(1, chunk_bytes // (seq * seq * 8))
    above = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1) if causal else None
    for i in range(0, b * h, step):
        s = qf[i:i + step].double() @ kf[i:i + step].double().transpose(1, 2) / math.sqrt(d)
        if causal:
            s.masked_fill_(above, float("-inf"))
        out[i:i + step] = torch.softmax(s, dim=-1) @ vf[i:i + step].double()
    return out.reshape(b, h, seq, d)


def rel_err(torch, out, ref) -> float:
    """||out - ref||_2 / ||ref||_2 (NaN anywhere, e.g. an unwritten poisoned element, gives NaN)."""
    return float(torch.linalg.vector_norm(out.double() - ref) / torch.linalg.vector_norm(ref))


def sdpa_backend(torch, name: str):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel({"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
                        "efficient": SDPBackend.EFFICIENT_ATTENTION}[name])


def kernels_launched(torch, fn) -> list[str]:
    """Names of the CUDA kernels one call of fn launches (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})


# ----------------------------------------------------------------------------------------- worker --

class Worker:
    """The GPU child: correctness at every shape, then (unless check-only) timing; results.json after each step."""

    def __init__(self, a):
        import cupy as cp
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        self.cp, self.torch, self.a, self.work = cp, torch, a, Path(a.work)
        self.cfg = json.loads((self.work / "worker.json").read_text())
        self.plan, self.lib = self.cfg["plan"], libcuda()
        cp.zeros(1)
        self.mods = {b: harness.load(p) for b, p in self.cfg["cubins"].items()}
        self.status = harness.Status()
        self.stats = cp.zeros(1, cp.uint32)  # s7's rescale counter (instrumented build)
        self.causal = bool(self.cfg.get("causal"))
        self.smi = SmiSampler(self.cfg["smi_gpu"])
        self.results, self.timelines = [], {}
        (self.work / "versions.json").write_text(json.dumps(dict(
            torch=torch.__version__, torch_cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())))

    def progress(self, what: str) -> None:
        (self.work / "progress").write_text(what)

    def save(self, partial=None) -> None:
        (self.work / "results.json").write_text(json.dumps(self.results + ([partial] if partial else []),
                                                           default=_json_default))

    def run(self) -> None:
        self.smi.start()
        for shape in [SMALL_SHAPE] + self.cfg["shapes"]:
            timed = shape != SMALL_SHAPE and not self.cfg["check_only"]
            self.results.append(self.shape(shape, timed))
            self.save()
            self.torch.cuda.empty_cache()
        if self.timelines:
            np.savez_compressed(self.work / "timelines.npz", **self.timelines)
        self.smi.stop.set()
        self.progress("done")

    def launcher(self, build: str, name: str, sets, o, shape: str, cap: int = 0):
        """(launch(i), records buffer, counts buffer) of a variant on input set i, writing into o."""
        cp, v = self.cp, VARIANTS[name]
        att = Attention(self.mods[build], v, self.plan, self.lib, self.causal)
        b, h, seq, d = parse_shape(shape)
        maps = [att.maps(q.data_ptr(), k.data_ptr(), vv.data_ptr(), b * h * seq) for q, k, vv in sets]
        gx, gy = grid(v, shape)
        ctas = gx * gy
        slots = harness.timeline_slots(cap) if cap else 0  # cap records + the two clock anchors
        rec = cp.zeros(ctas * slots * harness.RECORD_DTYPE.itemsize, cp.uint8) if cap else None
        counts = cp.zeros(ctas, cp.uint32) if cap else None
        hargs = harness.harness_args(self.status, rec.data.ptr if cap else 0, counts.data.ptr if cap else 0, slots,
                                     WATCHDOG_NS, roles=len(ROLES))
        stats = self.stats if cap and v["cond"] else None  # s7+ count their rescales
        if build == "plain":  # the clock probe: 4 uint64 per CTA (attention_h200.cu), overwritten by each launch
            stats = self.probe = cp.zeros(4 * ctas, cp.uint64)
        return (lambda i=0: att.launch(maps[i], o.data_ptr(), shape, hargs, stats.data.ptr if stats is not None
                                       else 0)), rec, counts

    def checked(self, launch, o, ref, what: str) -> float:
        o.fill_(float("nan"))
        launch(0)
        harness.synchronize(self.status, what)
        return rel_err(self.torch, o, ref)

    def shape(self, shape: str, timed: bool) -> dict:
        torch = self.torch
        b, h, seq, d = parse_shape(shape)
        entry = dict(shape=shape, flops=flops(shape, self.causal), causal=self.causal, variants={}, sdpa={},
                     rel_err={})
        for name in self.cfg["variants"]:
            check_shape(VARIANTS[name], shape)
        o = torch.empty(b, h, seq, d, device="cuda", dtype=torch.bfloat16)
        for kind in INPUTS:  # correctness on fresh inputs: plain and timeline builds of every variant
            self.progress(f"correctness {kind} at {shape}")
            sets = [make_inputs(torch, shape, kind, seed=zlib.crc32(f"{shape}/{kind}".encode()))]
            ref = reference(torch, *sets[0], causal=self.causal)
            for name in self.cfg["variants"]:
                for build in BUILDS:
                    v = VARIANTS[name]
                    cap = timeline_capacity(v, seq) * items_per_cta(v, shape) if build == "timeline" else 0
                    launch, _, _ = self.launcher(build, name, sets, o, shape, cap)
                    what = f"{kernel_name(VARIANTS[name])} ({build}) at {shape}, {kind} inputs"
                    self.stats.fill(0)
                    entry["rel_err"][f"{name}/{build}/{kind}"] = self.checked(launch, o, ref, what)
                    if build == "timeline" and VARIANTS[name]["cond"]:
                        entry.setdefault("rescales", {})[f"{name}/{kind}"] = rescale_stats(
                            int(self.stats.get()[0]), shape, VARIANTS[name]["block_n"])
            for be in SDPA_BACKENDS:
                entry["rel_err"][f"sdpa-{be}/{kind}"] = self.sdpa_err(be, sets[0], ref, o)
            del ref, sets
            torch.cuda.empty_cache()
        entry["correct"] = all(e < TOLERANCE for k, e in entry["rel_err"].items()
                               if not k.startswith("sdpa") and not VARIANTS[k.split("/")[0]]["diagnostic"])
        self.save(entry)
        if timed:
            self.time_shape(entry, shape, o)
        return entry

    def sdpa_err(self, be: str, qkv, ref, o) -> float | None:
        f = self.torch.nn.functional.scaled_dot_product_attention
        try:
            with sdpa_backend(self.torch, be):
                o.fill_(float("nan"))
                o.copy_(f(*qkv, is_causal=self.causal))
            return rel_err(self.torch, o, ref)
        except RuntimeError:  # the backend refuses the inputs: recorded as None, the timing says why
            return None

    def time_shape(self, entry: dict, shape: str, o) -> None:
        torch = self.torch
        b, h, seq, d = parse_shape(shape)
        set_bytes = 3 * b * h * seq * d * 2
        n_sets = max(2, -(-3 * L2_BYTES // set_bytes))
        sets = [make_inputs(torch, shape, "normal", seed=1000 + i) for i in range(n_sets)]
        entry["input_sets"], entry["input_set_bytes"] = n_sets, set_bytes
        est = flops(shape) / 300e12 * 1e6
        f = torch.nn.functional.scaled_dot_product_attention
        for be in SDPA_BACKENDS:
            self.progress(f"SDPA {be} at {shape}")
            try:
                with sdpa_backend(torch, be):
                    r = self.time(lambda i: f(*sets[i], is_causal=self.causal), n_sets, est)
                    r["kernels"] = kernels_launched(torch, lambda: f(*sets[0], is_causal=self.causal))
            except RuntimeError as exc:
                r = dict(error=str(exc)[:300])
            entry["sdpa"][be] = r
            self.save(entry)
        cudnn_us = entry["sdpa"]["cudnn"].get("median_us")
        for name in self.cfg["variants"]:
            v = VARIANTS[name]
            ve = entry["variants"][name] = dict(params=sim_params(v, self.causal), schedule=v["schedule"],
                                                kernel=kernel_name(v, self.causal))
            for build in BUILDS:
                self.progress(f"{kernel_name(v)} ({build}) timed at {shape}")
                cap = timeline_capacity(v, seq) * items_per_cta(v, shape) if build == "timeline" else 0
                launch, rec, counts = self.launcher(build, name, sets, o, shape, cap)
                ve[build] = self.time(launch, n_sets, est)
                harness.check_status(self.status, f"{kernel_name(v)} ({build}) at {shape}")
                if build == "plain":
                    ve[build]["clock_probe"] = probe_clock(self.probe.get())
                if cap:
                    counts.fill(0)
                    launch(0)
                    harness.synchronize(self.status, f"{kernel_name(v)} timeline launch at {shape}")
                    tag = f"{name}_{shape}" + ("_causal" if self.causal else "")
                    ve["timeline_summary"] = self.keep_timeline(rec, counts, tag, cap)
                self.save(entry)
            ve["tflops"] = entry["flops"] / ve["plain"]["median_us"] / 1e6
            ve["ratio_to_cudnn"] = cudnn_us / ve["plain"]["median_us"] if cudnn_us else None
            ve["instrumentation_overhead_pct"] = 100 * (ve["timeline"]["median_us"] / ve["plain"]["median_us"] - 1)
        sets.clear()  # free the input sets before the next shape

    def time(self, launch, n_sets: int, est_us: float) -> dict:
        return _time(self.cp, self.torch, launch, n_sets, self.a.warmup, self.a.runs, self.a.min_seconds, est_us,
                     self.smi)

    def keep_timeline(self, rec, counts, tag: str, cap: int) -> dict:
        """Keep the records of the CTAs on SAVED_SMS and the first CTAs, every CTA's span and mean SM clock, for
        timelines.npz (records in ns: the clock anchors are converted and dropped here, before saving)."""
        cnt = counts.get()
        raw = rec.get().view(harness.RECORD_DTYPE).reshape(cnt.size, harness.timeline_slots(cap))
        records, clock_mhz = harness.anchored_to_ns(raw, cnt)
        table = dict(cta_table(records, cnt), clock_mhz=clock_mhz)
        keep = select_ctas(table["sm"], SAVED_SMS, SAVED_FIRST_CTAS)
        self.timelines.update({f"{tag}/records": records[keep], f"{tag}/counts": cnt[keep], f"{tag}/ctas": keep,
                               **{f"{tag}/cta_{k}": val for k, val in table.items()}})
        return dict(key=tag, capacity=cap, ctas_saved=int(keep.size),
                    overflow=int(cnt.astype(np.int64).sum() - harness.written(records, cnt).sum()),
                    kernel_span_us=float((table["t_last_ns"].max() - table["t_first_ns"].min()) / 1e3),
                    cta_span_us_median=float(np.median(table["t_last_ns"] - table["t_first_ns"]) / 1e3))


# ----------------------------------------------------------------------------------------- driver --

def probe_clock(words) -> dict:
    """The SM clock of the last timed launch from the plain build's clock probe (4 uint64 per CTA: %clock64 and
    %globaltimer at the CTA's start and end): MHz over all CTAs (total cycles / total ns) and the CTAs' median."""
    w = np.asarray(words, dtype=np.int64)
    if w.size % 4:
        raise ValueError(f"the clock probe holds 4 words per CTA: got {w.size} words")
    w = w.reshape(-1, 4)
    cyc, ns = w[:, 1] - w[:, 0], w[:, 3] - w[:, 2]
    ok = (cyc > 0) & (ns > 0)
    if not ok.any():
        return dict(ctas=0)
    return dict(ctas=int(ok.sum()), mhz=float(1e3 * cyc[ok].sum() / ns[ok].sum()),
                mhz_median=float(np.median(1e3 * cyc[ok] / ns[ok])), cta_us_median=float(np.median(ns[ok]) / 1e3))


def build_all() -> dict:
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(len(BUILDS)) as ex:
        done = {b: ex.submit(harness.build, KERNEL, d) for b, d in BUILDS.items()}
    return {b: dict(cubin=str(f.result()[0]), ptxas=f.result()[1], defines=BUILDS[b]) for b, f in done.items()}


def table(results: list) -> str:
    lines = [f"{'shape':<17}{'kernel':<12}{'median us':>11}{'spread %':>10}{'TFLOP/s':>9}{'/cuDNN':>8}{'tl ovh %':>9}"
             f"{'rel err n/h':>17}{'SM MHz':>8}"]  # MHz: the clock probe, else nvidia-smi's samples
    for e in results:
        for be, r in e.get("sdpa", {}).items():
            if "median_us" in r:
                lines.append(f"{e['shape']:<17}{'sdpa-' + be:<12}{r['median_us']:>11.1f}{r['spread_pct']:>10.2f}"
                             f"{e['flops'] / r['median_us'] / 1e6:>9.0f}")
        names = sorted({k.split("/")[0] for k in e["rel_err"] if not k.startswith("sdpa")})
        for n in names:
            errs = f"{e['rel_err'][f'{n}/plain/normal']:.1e}/{e['rel_err'][f'{n}/plain/heavy']:.1e}"
            ve = e["variants"].get(n)
            if not ve:
                lines.append(f"{e['shape']:<17}{n:<12}{'-':>11}{'-':>10}{'-':>9}{'-':>8}{'':>9}{errs:>17}")
                continue
            r, ratio = ve["plain"], ve["ratio_to_cudnn"]
            clk = r.get("clock_probe", {}).get("mhz") or r.get("clocks", {}).get("sm_clock_mhz", {}).get("median")
            lines.append(f"{e['shape']:<17}{n:<12}{r['median_us']:>11.1f}{r['spread_pct']:>10.2f}{ve['tflops']:>9.0f}"
                         f"{'-' if ratio is None else f'{ratio:.3f}':>8}{ve['instrumentation_overhead_pct']:>9.1f}"
                         f"{errs:>17}{'' if clk is None else f'{clk:.0f}':>8}")
    return "\n".join(lines)


def write_manifest(dest: Path, prov: dict, builds: dict, results: list, error, argv, wall_s: float) -> dict:
    man = dict(
        provenance=prov, kernel="lapis/gpu/kernels/attention_h200.cu", plan="lapis/gpu/kernels/attention_plan.json",
        variants={n: VARIANTS[n] for n in {k for e in results for k in e["variants"]} | set(
            k.split("/")[0] for e in results for k in e["rel_err"] if not k.startswith("sdpa"))},
        units=dict(time="us (CUDA events per launch)", spread_pct="100 * IQR / median over the timed runs",
                   flops="4 B H L^2 D (non-causal)", tflops="flops / median", ratio_to_cudnn="cuDNN median / ours",
                   clock_probe="plain build, the last timed launch: mhz = total %clock64 cycles / total %globaltimer "
                               "ns over the CTAs (the SM clock the run had), mhz_median the CTAs' median",
                   rel_err="||O - ref||_2 / ||ref||_2, ref = float64 attention of the bf16 inputs (torch, GPU); "
                           "key variant/build/inputs",
                   timeline="timelines.npz keys '<variant>_<shape>/records' (harness.RECORD_DTYPE [ctas, capacity], "
                            "t_ns absolute %globaltimer ns, interpolated from %clock64 between each CTA's two "
                            "clock anchors: harness.anchored_to_ns), '/counts', '/ctas', '/cta_*' (every CTA's SM, "
                            "span and mean SM clock in MHz); "
                            "decode with harness.decode_timeline(records, counts, plan roles, plan ops)"),
        tolerance=TOLERANCE, builds=builds, results=results, error=error,
        command=" ".join(["python -m lapis.gpu.bench_attention"] + argv), wall_s=round(wall_s, 1))
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "manifest.json").write_text(json.dumps(man, indent=1, default=_json_default))
    return man


def run(a, argv: list[str]) -> int:
    import shutil

    if not harness.gpu_present():
        print("lapis bench attention: needs an NVIDIA GPU with compute capability 9.0+ (sm_90a), cupy and torch",
              file=sys.stderr)
        return 2
    t0, dest = time.time(), Path(a.out)
    dest.mkdir(parents=True, exist_ok=True)
    prov = capture_tma.provenance(a.provenance, argv, "python -m lapis.gpu.bench_attention")
    builds = build_all()
    print(f"[{time.time() - t0:5.1f}s] built: " + ", ".join(
        f"{b}/{k}: {r['registers']} regs, {r['spill_stores']}+{r['spill_loads']} B spill"
        for b in BUILDS for k, r in sorted(builds[b]["ptxas"].items())), flush=True)
    work = Path(tempfile.mkdtemp(prefix="lapis-attn-"))
    (work / "worker.json").write_text(json.dumps(dict(
        plan=load(), shapes=a.shapes, variants=a.variants, smi_gpu=smi_gpu_id(), check_only=a.check_only,
        causal=a.causal,
        cubins={b: builds[b]["cubin"] for b in BUILDS})))
    child = [sys.executable, "-m", "lapis.gpu.bench_attention", "_worker", "--work", str(work), "--runs",
             str(a.runs), "--warmup", str(a.warmup), "--min-seconds", str(a.min_seconds)]
    error = None
    try:
        p = harness.run_guarded(child, a.timeout, "the attention worker")
        if p.returncode:
            error = f"worker rc {p.returncode} while running {_read(work / 'progress')}: {p.stderr[-1500:]}"
    except harness.KernelHang as exc:
        error = f"hang while running {_read(work / 'progress')}: {exc}"
    print(f"[{time.time() - t0:5.1f}s] worker done" + (f"; ERROR {error}" if error else ""), flush=True)
    results = json.loads(_read(work / "results.json") or "[]")
    prov.update(json.loads(_read(work / "versions.json") or "{}"))
    if (work / "timelines.npz").exists():
        shutil.copy(work / "timelines.npz", dest / "timelines.npz")
    write_manifest(dest, prov, builds, results, error, argv, time.time() - t0)
    print(table(results))
    bad = [e["shape"] for e in results if not e.get("correct")]
    print(f"[{time.time() - t0:5.1f}s] wrote {dest / 'manifest.json'}" + (f"; INCORRECT at {bad}" if bad else ""))
    return 1 if error or bad else 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_worker"]:
        w = argparse.ArgumentParser()
        w.add_argument("_worker")
        w.add_argument("--work", required=True)
        w.add_argument("--runs", type=int, default=30)
        w.add_argument("--warmup", type=int, default=5)
        w.add_argument("--min-seconds", type=float, default=0.3)
        Worker(w.parse_args(argv)).run()
        return 0
    ap = build_parser()
    a = ap.parse_args(argv)
    if a.sources:
        print(" ".join(SOURCES))
        return 0
    if not a.out:
        ap.error("--out is required")
    bad = [v for v in a.variants if v not in VARIANTS]
    if bad:
        ap.error(f"unknown variants {bad}; choose from {', '.join(VARIANTS)}")
    try:
        for s in a.shapes:
            for v in a.variants:
                check_shape(VARIANTS[v], s, a.causal)  # before anything runs
    except ScheduleError as exc:
        print(f"lapis bench attention: error: {exc}", file=sys.stderr)
        return 2
    if a.runs < 1 or a.warmup < 0 or a.min_seconds < 0 or a.timeout <= 0:
        repeats, timeout = typed(argv, "--repeats", "--runs"), typed(argv, "--timeout-s", "--timeout")
        ap.error(f"{repeats} >= 1, --warmup >= 0, --min-seconds >= 0 and {timeout} > 0: got {a.runs}, {a.warmup}, "
                 f"{a.min_seconds}, {a.timeout}")
    return run(a, argv)



def typed(argv, name: str, old: str) -> str:
    """The spelling of an option the user typed: `old` (its deprecated name) where argv holds it, else `name`, so
    an error names the option as given."""
    return old if any(t == old or t.startswith(old + "=") for t in argv or sys.argv[1:]) else name


def build_parser() -> argparse.ArgumentParser:
    """The options of `lapis bench attention` (also `python -m lapis.gpu.bench_attention`). --runs and --timeout
    are the deprecated spellings of --repeats and --timeout-s (hidden; lapis.cli.parser.DEPRECATED_OPTIONS)."""
    ap = argparse.ArgumentParser(prog="lapis bench attention", description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--out", help="output folder: manifest.json and timelines.npz (GPU only)")
    ap.add_argument("--provenance", help="JSON from `python -m lapis.captures.provenance $(... --sources)`, made where git is")
    ap.add_argument("--shapes", type=lambda s: s.split(","), default=list(DEFAULT_SHAPES),
                    help="BxHxLxD, comma-separated (default: the five benchmark shapes)")
    ap.add_argument("--variants", type=lambda s: s.split(","),
                    default=[n for n, v in VARIANTS.items() if not v["diagnostic"]],
                    help=f"comma-separated, from {', '.join(VARIANTS)}")
    ap.add_argument("--repeats", dest="runs", metavar="N", type=int, default=30,
                    help="least timed launches per kernel (default 30)")
    ap.add_argument("--runs", dest="runs", type=int, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--min-seconds", type=float, default=0.3, help="least timed GPU seconds per kernel")
    ap.add_argument("--timeout-s", dest="timeout", metavar="SECONDS", type=float, default=230,
                    help="seconds before the worker counts as hung (default 230)")
    ap.add_argument("--timeout", dest="timeout", type=float, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    ap.add_argument("--check-only", action="store_true", help="correctness only, no timing")
    ap.add_argument("--causal", action="store_true", help="causal masking (variants with a causal build: s9); "
                    "FLOPs are counted as half, SDPA runs with is_causal=True")
    ap.add_argument("--sources", action="store_true", help="print the sources to pass to lapis.captures.provenance and exit")
    return ap


if __name__ == "__main__":
    sys.exit(main())
