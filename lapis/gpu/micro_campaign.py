"""The microbenchmark campaign (`lapis capture micro`): what is measured, and how raw timings become values.

Standard library and numpy only: the GPU runner (capture_micro) and the fit (lapis.model.fit) both use it.

Every measurement is one dict: name, kind, kernel, params and, once run, `raw` (one entry per timed launch,
"repeat") and `status`. `derive(m)` turns raw into one value per repeat, in `UNITS[kind]`:

| kind     | raw per repeat                                   | value per repeat                 |
|----------|--------------------------------------------------|----------------------------------|
| rate     | cycles, ns: median over CTAs of clock64 cycles and of %globaltimer ns | work_per_cta / cycles (per clk per SM); `clock_ghz(m)`: cycles / ns |
| cycles   | cycles: clock64 cycles for `count` operations    | cycles / count                   |
| tma_lat  | cta_ns: %globaltimer ns of the one CTA for `loads` loads | cta_ns / loads (ns per load) |
| tma_bw   | span_ns: last CTA end - first CTA start (%globaltimer) | bytes / span_ns (B/ns)     |

Statistics: median and spread_pct = 100 * IQR / median (numpy's linear percentiles) over the repeats.
"""

from __future__ import annotations

import numpy as np

REPEATS = 11  # timed launches per measurement, after one untimed warm-up launch
FORCE_ONE_CTA_SMEM = 120 * 1024  # dynamic smem per CTA: two cannot share an SM (228 KiB per SM on sm_90)

UNITS = {"rate": "per clk per SM", "cycles": "cycles", "tma_lat": "ns", "tma_bw": "B/ns"}

# TMA tensors: bf16, rows of 4096 elements (8 KiB, like a GEMM operand with K = 4096); a box is 64 elements
# (128 B, the 128B swizzle span) by box_rows rows. L2: 4 MiB, re-read by every launch after a warm-up (H200 L2
# is 50 MB); HBM: 1 GiB (> 4 x L2), each launch continuing where the previous one stopped.
TMA_ROW_ELEMS = 4096
TMA_BOX_COLS = 64
TMA_TENSOR_BYTES = {"l2": 4 << 20, "hbm": 1 << 30}
TMA_BOX_BYTES = (4096, 8192, 16384, 32768)
TMA_DEPTHS = (1, 2, 4, 8)
TMA_MAX_RING = 192 * 1024
TMA_BYTES_PER_CTA = {"one": 1 << 20, "all": 2 << 20}

WGMMA_N = (64, 128, 256)
WGMMA_BATCH = 8  # wgmmas per commit group (gen_micro_wgmma.BATCH)


def wgmma_flop(n: int) -> int:
    """FLOP of one m64nNk16 wgmma: 2 * 64 * N * 16."""
    return 2 * 64 * n * 16


def tma_geometry(source: str, box_bytes: int) -> dict:
    """Tensor-map and tiling numbers of one TMA measurement (elements unless named bytes)."""
    rows = TMA_TENSOR_BYTES[source] // (TMA_ROW_ELEMS * 2)
    box_rows = box_bytes // (TMA_BOX_COLS * 2)
    return dict(dims=[TMA_ROW_ELEMS, rows], row_stride_bytes=TMA_ROW_ELEMS * 2, box=[TMA_BOX_COLS, box_rows],
                col_boxes=TMA_ROW_ELEMS // TMA_BOX_COLS, row_boxes=rows // box_rows)


def _tma_items(sm_count: int) -> list[dict]:
    out = []
    for source in ("l2", "hbm"):
        for sms in ("one", "all"):
            for box in TMA_BOX_BYTES:
                for depth in TMA_DEPTHS:
                    if depth * box > TMA_MAX_RING:
                        continue
                    ctas = 1 if sms == "one" else sm_count
                    loads = max(64, TMA_BYTES_PER_CTA[sms] // box)
                    kind = "tma_lat" if (sms, depth) == ("one", 1) else "tma_bw"
                    out.append(dict(name=f"tma.{source}.{sms}.box{box}.d{depth}", kind=kind, kernel="micro_tma_load",
                                    params=dict(source=source, box_bytes=box, depth=depth, ctas=ctas, loads=loads,
                                                bytes=ctas * loads * box)))
    return out


def _rate(name, kernel, ctas, threads, iters, work_per_cta, what, **extra) -> dict:
    return dict(name=name, kind="rate", kernel=kernel,
                params=dict(ctas=ctas, threads=threads, iters=iters, work_per_cta=work_per_cta, work=what, **extra))


def _wgmma_rate(name, n, src, ctas, warpgroups, iters, kind="rate") -> dict:
    m = _rate(name, f"micro_wgmma_rate_n{n}_{src}", ctas, 128 * warpgroups, iters,
              warpgroups * iters * WGMMA_BATCH * wgmma_flop(n), "FLOP (dense bf16 wgmma)", n=n, src=src)
    m["kind"] = kind
    return m


def items(sm_count: int) -> list[dict]:
    """Every measurement, in run order (cheap core ones first, the long clock run, then the TMA sweep)."""
    s = sm_count
    out = [
        dict(name="timer.globaltimer", kind="cycles", kernel="micro_timer_read",
             params=dict(which=0, iters=256, count=256 * 32, what="cycles per %globaltimer read")),
        dict(name="timer.clock64", kind="cycles", kernel="micro_timer_read",
             params=dict(which=1, iters=256, count=256 * 32, what="cycles per %clock64 read")),
        _rate("fma.rate", "micro_fma_rate", s, 1024, 1024, 1024 * 8 * 8 * 1024, "fma.rn.f32"),
        _rate("ex2.rate", "micro_ex2_rate", s, 1024, 256, 1024 * 4 * 8 * 256, "ex2.approx.ftz.f32"),
        _rate("mma_sync.rate", "micro_mma_sync_rate", s, 512, 256, 16 * 4 * 8 * 256 * 4096,
              "FLOP (mma.sync m16n8k16 bf16)"),
        _rate("smem.read", "micro_smem_read", s, 1024, 1024, 1024 * 4 * 16 * 1024, "bytes (ld.shared.v4)"),
        dict(name="mbarrier.pingpong", kind="cycles", kernel="micro_mbarrier_pingpong",
             params=dict(iters=4096, count=2 * 4096, what="cycles per arrive-to-wake hop")),
    ]
    for threads in (64, 256):
        out.append(dict(name=f"named_barrier.t{threads}", kind="cycles", kernel="micro_named_barrier",
                        params=dict(threads=threads, iters=4096, count=4096, what="cycles per bar.sync")))
    for n in WGMMA_N:
        for src in ("ss", "rs"):
            out.append(dict(name=f"wgmma.latency.n{n}.{src}", kind="cycles", kernel=f"micro_wgmma_latency_n{n}_{src}",
                            params=dict(n=n, src=src, iters=1024, count=1024,
                                        what="cycles from wgmma.fence to wait_group 0 returning, one wgmma")))
    for n in WGMMA_N:
        for src in ("ss", "rs"):
            out.append(_wgmma_rate(f"wgmma.rate.n{n}.{src}.all.wg2", n, src, s, 2, 128 * 256 // n))
    out.append(_wgmma_rate("wgmma.rate.n256.ss.all.wg1", 256, "ss", s, 1, 128))
    out.append(_wgmma_rate("wgmma.rate.n256.ss.one.wg2", 256, "ss", 1, 2, 128))
    # ~100 ms launches on every SM (2 x 85000 x 8 wgmmas of 128 cycles at 4096 FLOP/clk), ~1.2 s in all: the
    # clock and rate a long GEMM run sees, with ~24 nvidia-smi samples (every 50 ms) of clock and power
    out.append(_wgmma_rate("wgmma.sustained", 256, "ss", s, 2, 85000))
    return out + _tma_items(s)


# ----------------------------------------------------------------------------------------- values --

def derive(m: dict) -> list[float]:
    """One value per repeat from m['raw'] (see the module table); [] if the measurement has no raw data."""
    raw, p = m.get("raw") or {}, m["params"]
    if not raw:
        return []
    kind = m["kind"]
    if kind == "rate":
        return [p["work_per_cta"] / c for c in raw["cycles"]]
    if kind == "cycles":
        return [c / p["count"] for c in raw["cycles"]]
    if kind == "tma_lat":
        return [ns / p["loads"] for ns in raw["cta_ns"]]
    if kind == "tma_bw":
        return [p["bytes"] / ns for ns in raw["span_ns"]]
    raise ValueError(f"unknown measurement kind {kind!r}")


def clock_ghz(m: dict) -> list[float]:
    """The SM clock during each repeat of a rate measurement: clock64 cycles / %globaltimer ns (GHz)."""
    raw = m.get("raw") or {}
    return [c / ns for c, ns in zip(raw.get("cycles", []), raw.get("ns", []))]


def stats(values) -> dict:
    """median and spread_pct = 100 * IQR / median of the per-repeat values."""
    v = np.asarray(values, dtype=float)
    med = float(np.median(v))
    q1, q3 = np.percentile(v, [25, 75])
    return dict(median=med, spread_pct=float(100.0 * (q3 - q1) / med) if med else float("nan"), n=int(v.size))
