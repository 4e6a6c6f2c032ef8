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
| mix      | cycles, ns as rate (consumer warpgroups); tma_bytes_per_ns: median over CTAs of the producer's bytes / its ns | work_per_cta / cycles (FLOP per clk per SM); `clock_ghz(m)`, `mix_tma_bytes_per_ns(m)` |
| turnover | gap_ns: median over SMs' consecutive CTA pairs of next entry - previous exit (%globaltimer) | gap_ns (ns) |
| contend  | cycles, ns as rate (the leader warpgroup's window); follower_rate: median over CTAs of the follower's units / its cycles to the flag | leader units per clk (work_per_cta / cycles); `follower_rate(m)`: the follower's units per clk |
| bar      | cycles: median over CTAs of the timed clock64 cycles of consumer warpgroup 0's thread 0 (kernels/micro_bar_v1.cu) | cycles / count (cycles per hand-over, bar.sync or wait) |
| tma_tile | cta_ns, cycles: median over CTAs of %globaltimer ns and clock64 cycles for `tiles` tile pairs | cta_ns / tiles (ns per tile pair) |

`items` is campaign version 1 (the capture micro/h200-2026-11-29), `items_v2` version 2 (L2 spread bandwidth, wgmma
under concurrent TMA; micro/h200-2026-11-29-v2), the items_v3* functions version 3 (the attention kernels' softmax
alone and beside wgmma, the two warpgroups contending, the CTA turnover; micro/h200-2026-11-30-v3, -v3-mix,
-v3-mix2 and -contend-launch), items_v4_beside version 4 (one instruction class beside wgmma in flight), items_v5_bar
version 5 (the named-barrier GEMM-turn hand-over and the mbarrier wait on a complete phase), items_v6_contend3
version 6 (a softmax beside another softmax and wgmma, three warpgroups), items_v7_density version 7 (a class
stream at a controlled issue density beside wgmma), items_v8_chain version 8 (one warpgroup's chain of K wgmmas,
fence to wait_group 0), items_v9_sweep version 9 (version 7 at more chain counts), items_v10_tile version 10 (an
attention K/V tile pair as each layout's TMA box set); `all_items` runs them all;
`bar_cycles` reads version 5's values back from a results.json.

Statistics: median and spread_pct = 100 * IQR / median (numpy's linear percentiles) over the repeats.
"""

from __future__ import annotations

import numpy as np

from lapis.errors import CaptureError

REPEATS = 11  # timed launches per measurement, after one untimed warm-up launch
FORCE_ONE_CTA_SMEM = 120 * 1024  # dynamic smem per CTA: two cannot share an SM (228 KiB per SM on sm_90)

UNITS = {"rate": "per clk per SM", "cycles": "cycles", "tma_lat": "ns", "tma_bw": "B/ns", "mix": "per clk per SM",
         "contend": "per clk per SM", "turnover": "ns", "bar": "cycles", "tma_tile": "ns"}

# TMA tensors: bf16, rows of 4096 elements (8 KiB, like a GEMM operand with K = 4096); a box is 64 elements
# (128 B, the 128B swizzle span) by box_rows rows. L2: 4 MiB, re-read by every launch after a warm-up (H200 L2
# is 50 MB); HBM: 1 GiB (> 4 x L2), each launch continuing where the previous one stopped.
TMA_ROW_ELEMS = 4096
TMA_BOX_COLS = 64
TMA_TENSOR_BYTES = {"l2": 4 << 20, "hbm": 1 << 30, "l2spread": 32 << 20}
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


# --------------------------------------------------------------------------------------- version 2 --
# The v1 "l2" tensor (4 MiB) is a hot spot: every SM re-reads the same lines. A GEMM streams its operands
# through most of the 50 MB L2 (two partitions), so v2 reads a 32 MiB tensor ("l2spread", 2/3 of the L2;
# resident after the warm-up launch), CTA c starting 1/CTAs of the tensor after CTA c - 1
# (kernels/micro_tma_v2.cu). "l2share": groups of SHARE_GROUPS CTAs start on the same tile, so they read
# the same box at about the same time (the CTAs of one row of GEMM tiles share the A box).
SPREAD_BOXES = (8192, 16384, 32768)
SPREAD_DEPTHS = (2, 4)
SPREAD_BYTES_PER_CTA = 8 << 20  # 1 GiB per launch on 132 SMs: ~0.1 ms at 10 TB/s
SHARE_GROUPS = (2, 4)
# wgmma + TMA in one CTA (kernels/micro_mix_v1.cu): (N, box bytes, depth); n128 with 16 KiB boxes (128 rows x
# 64 bf16, one K block of a 128-row operand tile) is the GEMM-like one the fit reads
MIX_CASES = ((128, 16384, 4), (128, 32768, 4), (256, 16384, 4), (256, 32768, 4))
MIX_REFERENCE = "mix.wgmma_tma.n128.box16384.d4"
MIX_FLOP_PER_CTA = 2 * 40000 * WGMMA_BATCH * wgmma_flop(256)  # ~40 ms per launch at 4096 FLOP/clk, 1.6 GHz
MIX_MAX_LOADS = 1 << 30


def _spread_item(name: str, sm_count: int, box: int, depth: int, group: int) -> dict:
    tiles = TMA_TENSOR_BYTES["l2spread"] // box
    loads = SPREAD_BYTES_PER_CTA // box
    return dict(name=name, kind="tma_bw", kernel="micro_tma_spread",
                params=dict(source="l2spread", box_bytes=box, depth=depth, ctas=sm_count, loads=loads,
                            bytes=sm_count * loads * box, group=group,
                            cta_stride=tiles // max(sm_count // group, 1)))


def items_v2(sm_count: int) -> list[dict]:
    """Campaign version 2: tma.l2spread / tma.l2share bandwidth and mix.wgmma_tma, on every SM."""
    s = sm_count
    out = [_spread_item(f"tma.l2spread.all.box{box}.d{depth}", s, box, depth, 1)
           for box in SPREAD_BOXES for depth in SPREAD_DEPTHS]
    out += [_spread_item(f"tma.l2share.all.box16384.d4.g{g}", s, 16384, 4, g) for g in SHARE_GROUPS]
    for n, box, depth in MIX_CASES:
        iters = MIX_FLOP_PER_CTA // (2 * WGMMA_BATCH * wgmma_flop(n))
        out.append(dict(name=f"mix.wgmma_tma.n{n}.box{box}.d{depth}", kind="mix", kernel=f"micro_mix_wgmma_tma_n{n}",
                        params=dict(ctas=s, threads=288, iters=iters, n=n, src="ss", box_bytes=box, depth=depth,
                                    source="l2spread", max_loads=MIX_MAX_LOADS,
                                    cta_stride=TMA_TENSOR_BYTES["l2spread"] // box // s,
                                    work_per_cta=2 * iters * WGMMA_BATCH * wgmma_flop(n),
                                    work="FLOP (dense bf16 wgmma, 2 warpgroups, while a producer warp streams TMA)")))
    return out


# --------------------------------------------------------------------------------------- version 3 --
# The attention kernels' softmax per K/V tile (kernels/micro_softmax_v1.cu: the kernels' own code from
# attention_softmax.cuh on a 64 x 128 score tile per warpgroup, no wgmma), one CTA per SM with 1 or 2 consumer
# warpgroups: the work a consumer warpgroup does between its GEMMs, which the schedules cost.
SOFTMAX_FLAVOURS = ("exp2f", "ex2", "ex2_cond", "emu8", "emu4")  # s1..s5, s6, s7..s9, s6_emu8, s6_emu4
SOFTMAX_ITERS = 4096
SOFTMAX_SCALE_LOG2 = 0.12751743082459868  # log2(e) / sqrt(128), the kernels' scale_log2 at head dim 128


def items_v3(sm_count: int) -> list[dict]:
    """Campaign version 3: softmax.<flavour>.wg<1|2>, score tiles (64 x 128, one per warpgroup per iteration) per
    clk per SM through softmax_scores + O rescale + pack_p."""
    return [_rate(f"softmax.{f}.wg{w}", f"micro_softmax_{f}_wg{w}", sm_count, 128 * w, SOFTMAX_ITERS,
                  w * SOFTMAX_ITERS, "score tiles 64 x 128 (softmax, O rescale, P pack)", flavour=f, warpgroups=w)
            for f in SOFTMAX_FLAVOURS for w in (1, 2)]


# Overlap (kernels/micro_mix_softmax_v1.cu): warpgroup 0's wgmma batches against warpgroup 1's softmax tiles on one
# SM; counts picked so each alone takes ~1.2M cycles (a batch ~600 cycles waited, a softmax tile ~800-900 alone)
MIXSM_FLAVOURS = ("exp2f", "ex2_cond")
MIXSM_TENSOR_ITERS, MIXSM_SOFTMAX_ITERS = 2048, 1536
MIXSM_PARTS = {"tensor": (MIXSM_TENSOR_ITERS, 0), "softmax": (0, MIXSM_SOFTMAX_ITERS),
               "both": (MIXSM_TENSOR_ITERS, MIXSM_SOFTMAX_ITERS)}


def items_v3_mix(sm_count: int) -> list[dict]:
    """mixsm.<flavour>.<tensor|softmax|both>: one job per CTA (its wgmma batches and/or softmax tiles); value = jobs
    per clk, so 1 / value is the job's cycles."""
    return [_rate(f"mixsm.{f}.{part}", f"micro_mixsm_{f}", sm_count, 256, 1, 1,
                  "one job (wgmma batches on warpgroup 0, softmax tiles on warpgroup 1)", flavour=f,
                  tensor_iters=tn, softmax_iters=sn)
            for f in MIXSM_FLAVOURS for part, (tn, sn) in MIXSM_PARTS.items()]


# Version 2 (kernels/micro_mix_softmax_v2.cu): warpgroup 0 runs the kernels' GEMM pair per iteration (QK from shared
# memory, PV with P from registers), so half the tensor iterations of v1 for the same FLOP
MIXSM2_TENSOR_ITERS = MIXSM_TENSOR_ITERS // 2
MIXSM2_PARTS = {"tensor": (MIXSM2_TENSOR_ITERS, 0), "softmax": (0, MIXSM_SOFTMAX_ITERS),
                "both": (MIXSM2_TENSOR_ITERS, MIXSM_SOFTMAX_ITERS)}


def items_v3_mix2(sm_count: int) -> list[dict]:
    """mixsm2.<flavour>.<tensor|softmax|both>: as items_v3_mix with the QK + PV GEMM pair (PV's A in registers)."""
    return [_rate(f"mixsm2.{f}.{part}", f"micro_mixsm2_{f}", sm_count, 256, 1, 1,
                  "one job (QK + PV wgmma pairs on warpgroup 0, softmax tiles on warpgroup 1)", flavour=f,
                  tensor_iters=tn, softmax_iters=sn)
            for f in MIXSM_FLAVOURS for part, (tn, sn) in MIXSM2_PARTS.items()]


# Version 3 (kernels/micro_mix_softmax_v3.cu): each side's own rate while the other runs. Warpgroup 0 leads (`lead`
# units, then a flag); warpgroup 1 follows (its role until well past the flag, noting its units at the flag).
# Units: the GEMM pair (QK + PV, waited) or one softmax tile. Configurations (leader, follower): alone, and every
# pairing the attention kernels' two consumer warpgroups can be in. The GEMM-only ones do not depend on the flavour.
CONTEND_ROLES = {"gemm": 1, "softmax": 2}
CONTEND_LEAD = {"gemm": MIXSM2_TENSOR_ITERS, "softmax": MIXSM_SOFTMAX_ITERS}
CONTEND_FOLLOW = {"gemm": 2 * MIXSM2_TENSOR_ITERS, "softmax": 2 * MIXSM_SOFTMAX_ITERS}  # outlast the leader
CONTEND_PAIRS = {"t": ("gemm", None), "tt": ("gemm", "gemm"), "s": ("softmax", None),
                 "ss": ("softmax", "softmax"), "ts": ("gemm", "softmax"), "st": ("softmax", "gemm")}


def items_v3_contend(sm_count: int) -> list[dict]:
    """contend.<flavour>.<pair>: the leader's units per clk per SM (value) and the follower's (follower_rate)."""
    out = []
    for f in SOFTMAX_FLAVOURS:
        for pair, (lead, follow) in CONTEND_PAIRS.items():
            if "softmax" not in (lead, follow) and f != SOFTMAX_FLAVOURS[0]:
                continue  # GEMM only: measured once, with the first flavour's kernel
            roles = CONTEND_ROLES[lead] | (CONTEND_ROLES[follow] << 2 if follow else 0)
            m = _rate(f"contend.{f}.{pair}", f"micro_contend_{f}", sm_count, 256, CONTEND_LEAD[lead],
                      CONTEND_LEAD[lead], f"{lead} units of warpgroup 0 (the leader)", flavour=f, lead=lead,
                      follow=follow, roles=roles, follow_iters=CONTEND_FOLLOW[follow] if follow else 0)
            m["kind"] = "contend"
            out.append(m)
    return out


# Version 4 (kernels/micro_beside_v1.cu): one SASS instruction class beside wgmma in flight, one warp of each
# warpgroup per SMSP, with the contend protocol (warpgroup 0 leads, warpgroup 1 follows and notes its units at the
# flag). Class units: BESIDE_CLASS_STEPS independent instructions per thread; wgmma units: 8 x m64n128k16 in one
# commit group kept in flight (ss: both operands from shared memory; rs: A from registers) or the contend GEMM pair.
BESIDE_CLASSES = ("ffma", "ffma3", "fmnmx", "ex2", "f2fp", "shfl", "lop3")
BESIDE_MODES = {"ss": 0, "rs": 1, "pair": 2}
BESIDE_CLASS_STEPS = 64  # UNROLL x CHAINS in micro_beside_v1.cu: warp-instructions per warp and unit
BESIDE_MODE_FLOP = {"ss": 8 * wgmma_flop(128), "rs": 8 * wgmma_flop(128), "pair": 16 * wgmma_flop(128)}
# cycles per unit alone, for sizing only (pipes capture rates at 1 warp per SMSP; the tensor pipe at 4096 FLOP/clk)
BESIDE_UNIT_CYCLES = {"ffma": 70, "ffma3": 70, "fmnmx": 134, "ex2": 512, "f2fp": 139, "shfl": 266, "lop3": 134,
                      "ss": 512, "rs": 512, "pair": 1210}
BESIDE_WINDOW_CYCLES = 300_000  # the leader's window alone; the follower is sized for BESIDE_FOLLOW_WINDOWS of them
BESIDE_FOLLOW_WINDOWS = 6  # the leader may run at a third of its alone speed beside wgmma (SHFL does)


def _beside(name, cls, lead, follow, mode, sm_count) -> dict:
    lead_role, follow_role = (2 if lead == cls else 1), (0 if follow is None else 2 if follow == cls else 1)
    iters = max(1, BESIDE_WINDOW_CYCLES // BESIDE_UNIT_CYCLES[lead])
    follow_iters = BESIDE_FOLLOW_WINDOWS * BESIDE_WINDOW_CYCLES // BESIDE_UNIT_CYCLES[follow] if follow else 0
    m = _rate(name, f"micro_beside_{cls}", sm_count, 256, iters, iters, f"{lead} units of warpgroup 0 (the leader)",
              cls=cls, mode=mode, lead=lead, follow=follow, follow_iters=follow_iters,
              roles=lead_role | (follow_role << 2) | (BESIDE_MODES[mode] << 4))
    m["kind"] = "contend"
    return m


def items_v4_beside(sm_count: int) -> list[dict]:
    """beside.<class>.alone (the class stream, one warp per SMSP), beside.<class>.<mode> (the class stream leads,
    the wgmma warpgroup follows: value = class units per clk, follower_rate = wgmma units per clk, both contended),
    beside.wgmma.<mode> (wgmma alone, with the first class's kernel)."""
    out = [_beside(f"beside.wgmma.{mode}", BESIDE_CLASSES[0], mode, None, mode, sm_count) for mode in BESIDE_MODES]
    for c in BESIDE_CLASSES:
        out.append(_beside(f"beside.{c}.alone", c, c, None, "ss", sm_count))
        out += [_beside(f"beside.{c}.{mode}", c, c, mode, mode, sm_count) for mode in BESIDE_MODES]
    return out


# Version 7 (kernels/micro_beside_v2.cu): version 4's protocol with a class stream of CH dependent chains (UNROLL
# x CH instructions per thread and unit, each waiting for the one before it on its chain): the issue density a
# class keeps while the tensor pipe runs, at a fraction of the dense stream's.
DENSITY_CLASSES = {"ffma": (1, 2, 3), "fmnmx": (1, 2)}  # class -> chain counts
DENSITY_UNROLL = 8  # micro_beside_v1.cu UNROLL: instructions per chain and unit
DENSITY_UNIT_CYCLES = 48  # sizing only: 8 dependent instructions at up to 6 cycles each


def _density(name, kernel, lead_class, follow, sm_count, chains=None) -> dict:
    cycles = DENSITY_UNIT_CYCLES if lead_class else BESIDE_UNIT_CYCLES["ss"]
    iters = max(1, BESIDE_WINDOW_CYCLES // cycles)
    m = _rate(name, kernel, sm_count, 256, iters, iters,
              "class units of warpgroup 0 (the leader)" if lead_class else "ss units of warpgroup 0 (the leader)",
              mode="ss", chains=chains, lead="class" if lead_class else "ss", follow=follow,
              follow_iters=BESIDE_FOLLOW_WINDOWS * BESIDE_WINDOW_CYCLES // BESIDE_UNIT_CYCLES["ss"] if follow else 0,
              roles=(2 if lead_class else 1) | ((1 if follow else 0) << 2) | (BESIDE_MODES["ss"] << 4))
    m["kind"] = "contend"
    return m


def items_v7_density(sm_count: int) -> list[dict]:
    """density.wgmma.ss (wgmma groups from shared memory alone), density.<class>_c<CH>.alone (CH dependent chains
    of the class, one warp per SMSP) and density.<class>_c<CH>.ss (the same beside wgmma in flight: value = class
    units per clk, follower_rate = wgmma units per clk); a class unit is DENSITY_UNROLL x CH instructions per
    thread, a wgmma unit 8 x m64n128k16."""
    return _chain_items("density", DENSITY_CLASSES, sm_count)


def _chain_items(kind: str, classes: dict, sm_count: int) -> list[dict]:
    """<kind>.wgmma.ss (with the first class kernel), then <kind>.<class>_c<CH>.alone and .ss for each of classes'
    chain counts, kernels micro_<kind>_<class>_c<CH>."""
    first, counts = next(iter(classes.items()))
    out = [_density(f"{kind}.wgmma.ss", f"micro_{kind}_{first}_c{counts[0]}", False, None, sm_count)]
    for cls, counts in classes.items():
        for ch in counts:
            k = f"micro_{kind}_{cls}_c{ch}"
            out.append(_density(f"{kind}.{cls}_c{ch}.alone", k, True, None, sm_count, ch))
            out.append(_density(f"{kind}.{cls}_c{ch}.ss", k, True, "ss", sm_count, ch))
    return out


# Version 9 (kernels/micro_beside_v3.cu): version 7's protocol and units at the chain counts it does not run, so
# the density sweep runs from one chain to eight in one kernel family.
SWEEP_CLASSES = {"ffma": (4, 5, 6, 7, 8), "fmnmx": (3, 4)}  # class -> chain counts


def items_v9_sweep(sm_count: int) -> list[dict]:
    """sweep.wgmma.ss (wgmma groups from shared memory alone), sweep.<class>_c<CH>.alone and sweep.<class>_c<CH>.ss
    (version 7's states and values at SWEEP_CLASSES' chain counts, kernels micro_sweep_<class>_c<CH>)."""
    return _chain_items("sweep", SWEEP_CLASSES, sm_count)


# Version 10 (kernels/micro_tma_v3.cu): one attention K/V tile pair (two parts of 128 rows x 128 bf16, 64 KiB) as the
# box sets a shared-memory layout allows, timed per tile on one SM and on every SM: set -> ((A box cols, rows),
# (B box cols, rows), cuTensorMapEncodeTiled swizzle enum). noswz: no swizzle, K-major 16 B slices and MN-major 8 x 8
# atoms (the b200-attention progression's kernels 1-2); rows16: the same 16 B rows in 32 boxes of 128 rows, which
# tells a box's cost from a row's; sw128: the 128B swizzle's 128-row and 8-row boxes (its kernels 3 on); sw128big:
# four 128-row boxes of the 128B swizzle (the lapis H200 kernels' K and V).
TILE_SETS = {"noswz": ((8, 128), (8, 8), 0), "rows16": ((8, 128), (8, 128), 0), "sw128": ((64, 128), (64, 8), 3),
             "sw128big": ((64, 128), (64, 128), 3)}
TILE_ROWS, TILE_COLS = 128, 128  # one part: rows x bf16 columns (a K or V tile of block_n 128, head dim 128)
TILE_TENSOR = "l2spread"  # the L2-resident 32 MiB tensor, read as rows of TILE_COLS bf16
TILE_DEPTHS = (1, 2)
TILES_PER_CTA = 64


def tile_boxes(set_name: str) -> dict:
    """The boxes and 16 B-or-wider rows one tile pair of a TILE_SETS set issues: boxes, box_rows (rows of all its
    boxes), row_bytes (per part), from the set's box shapes."""
    (ac, ar), (bc, br), swizzle = TILE_SETS[set_name]
    boxes = TILE_ROWS // ar * (TILE_COLS // ac) + TILE_ROWS // br * (TILE_COLS // bc)
    box_rows = TILE_ROWS * (TILE_COLS // ac) + TILE_ROWS * (TILE_COLS // bc)
    return dict(boxes=boxes, box_rows=box_rows, row_bytes=[ac * 2, bc * 2], swizzle=swizzle)


def items_v10_tile(sm_count: int) -> list[dict]:
    """tmatile.<set>[.fixed].<one|all>.d<depth>: %globaltimer ns per K/V tile pair (TILE_SETS) of one CTA per SM,
    one thread issuing every box of a tile onto one mbarrier, `depth` tiles in flight; micro_tma_tile loops over
    the boxes at run time, .fixed's micro_tma_tile_<set> has them unrolled at compile time."""
    out = []
    tiles_total = TMA_TENSOR_BYTES[TILE_TENSOR] // (TILE_ROWS * TILE_COLS * 2)
    for name, ((ac, ar), (bc, br), _) in TILE_SETS.items():
        for fixed, kernel in (("", "micro_tma_tile"), (".fixed", f"micro_tma_tile_{name}")):
            for sms, ctas in (("one", 1), ("all", sm_count)):
                for depth in TILE_DEPTHS:
                    out.append(dict(name=f"tmatile.{name}{fixed}.{sms}.d{depth}", kind="tma_tile", kernel=kernel,
                                    params=dict(set=name, a_box=[ac, ar], b_box=[bc, br], ctas=ctas,
                                                depth=depth, tiles=TILES_PER_CTA, tiles_total=tiles_total,
                                                cta_stride=tiles_total // ctas, **tile_boxes(name),
                                                tile_bytes=2 * TILE_ROWS * TILE_COLS * 2,
                                                what="ns per K/V tile pair (median over CTAs)")))
    return out


# Launch (kernels/micro_launch_v1.cu): an SM's retire-and-launch gap between back-to-back CTAs when one fits
TURNOVER_WAVES, TURNOVER_SPIN_NS = 16, 20_000


def items_v3_launch(sm_count: int) -> list[dict]:
    """launch.turnover: ns from a CTA's exit record to the next CTA's entry record on the same SM (384 threads,
    one CTA per SM, 16 waves of 20 µs CTAs)."""
    return [dict(name="launch.turnover", kind="turnover", kernel="micro_cta_turnover",
                 params=dict(ctas=TURNOVER_WAVES * sm_count, threads=384, spin_ns=TURNOVER_SPIN_NS,
                             what="ns from one CTA's exit to the next CTA's entry on an SM"))]


# Version 5 (kernels/micro_bar_v1.cu): the ping-pong attention kernels' GEMM-turn hand-over (attention_h200.cu's
# turn: bar.sync on the warpgroup's own barrier, bar.arrive on the other's, 256 threads) with nothing else in a turn,
# in the three forms the kernels use (imm: immediate ids, each warpgroup its own loop; pred: s4..s16's predicated
# pair; reg: s17's one bar.sync on a register id), a bar.sync whose 8 warps arrive together (sync_all) or whose
# other 128 arrivals are already there (sync_present), and mbarrier.try_wait.parity on a complete phase (try_wait,
# consumer_wait's fast path). One CTA per SM on every SM, 256 threads (two consumer warpgroups) or 384 (a parked
# producer warpgroup first, as the kernels). count: the units the timed cycles hold.
BAR_FORMS = ("imm", "pred", "reg")
BAR_THREADS = (256, 384)
BAR_HOP_ROUNDS = 4096      # round trips: 2 hand-overs each
BAR_SYNC_ITERS = 8192      # bar.syncs (sync_all) and mbarrier waits (try_wait)
BAR_PRESENT_ROUNDS = 1024  # sync_present rounds, BAR_PRESENT_TIMED timed bar.syncs each
BAR_PRESENT_TIMED = 13     # micro_bar_v1.cu: barriers 2..14 (PRESENT_BARS = 14; barrier 1 aligns warpgroup 0's warps)


def _bar(name, kernel, sm_count, threads, iters, count, what) -> dict:
    return dict(name=name, kind="bar", kernel=kernel,
                params=dict(ctas=sm_count, threads=threads, iters=iters, count=count, what=what))


def items_v5_bar(sm_count: int) -> list[dict]:
    """Campaign version 5: bar.hop.<form>.t<threads> (cycles per GEMM-turn hand-over: from one warpgroup's bar.arrive
    to the other's bar.sync returning, its own bar.arrive issued), bar.sync_all.t<threads> (cycles per bar.sync of 8
    warps arriving together), bar.sync_present.t<threads> (cycles per bar.sync whose other 128 arrivals are there),
    bar.try_wait.t<threads> (cycles per mbarrier wait that finds its phase complete)."""
    s, out = sm_count, []
    for t in BAR_THREADS:
        out += [_bar(f"bar.hop.{form}.t{t}", f"micro_bar_hop_{form}", s, t, BAR_HOP_ROUNDS, 2 * BAR_HOP_ROUNDS,
                     "cycles per GEMM-turn hand-over (bar.arrive -> the other warpgroup's bar.sync returns)")
                for form in BAR_FORMS]
        out.append(_bar(f"bar.sync_all.t{t}", "micro_bar_sync_all", s, t, BAR_SYNC_ITERS, BAR_SYNC_ITERS,
                        "cycles per bar.sync, 256 threads arriving together"))
        out.append(_bar(f"bar.sync_present.t{t}", "micro_bar_sync_present", s, t, BAR_PRESENT_ROUNDS,
                        BAR_PRESENT_TIMED * BAR_PRESENT_ROUNDS,
                        "cycles per bar.sync whose other 128 arrivals are already there (+1 clock64 read per 13)"))
        out.append(_bar(f"bar.try_wait.t{t}", "micro_bar_try_wait", s, t, BAR_SYNC_ITERS, BAR_SYNC_ITERS,
                        "cycles per mbarrier.try_wait.parity on a completed phase (and its branch)"))
    return out


# Version 6 (kernels/micro_mix_softmax_v4.cu): v3's contend protocol on three warpgroups, warpgroup 0 leading and
# warpgroups 1 and 2 following (each noting its units at the flag), so that a softmax tile runs beside another
# warpgroup's softmax and a third's wgmma at once. The GEMM unit here is one QK group (8 x wgmma m64n128k16 from
# shared memory, waited); v3's pair does not fit beside two softmax warpgroups. States: the leader's role, then the
# followers' (t: GEMM, s: softmax); the GEMM-only state t does not depend on the flavour.
CONTEND3_STATES = {"s": ("softmax", None, None), "ss": ("softmax", "softmax", None),
                   "st": ("softmax", "gemm", None), "t": ("gemm", None, None), "ts": ("gemm", "softmax", None),
                   "sst": ("softmax", "softmax", "gemm"), "tss": ("gemm", "softmax", "softmax")}
CONTEND3_LEAD = {"gemm": MIXSM_TENSOR_ITERS, "softmax": MIXSM_SOFTMAX_ITERS}  # ~1.2M cycles each alone
CONTEND3_FOLLOW = {"gemm": 4 * MIXSM_TENSOR_ITERS, "softmax": 3 * MIXSM_SOFTMAX_ITERS}  # outlast a slowed leader


def items_v6_contend3(sm_count: int) -> list[dict]:
    """contend3.<flavour>.<state>: the leader's units per clk per SM (value), follower 1's (follower_rate) and
    follower 2's (follower2_rate), 384 threads."""
    out = []
    for f in SOFTMAX_FLAVOURS:
        for state, (lead, f1, f2) in CONTEND3_STATES.items():
            if state == "t" and f != SOFTMAX_FLAVOURS[0]:
                continue
            roles = sum(CONTEND_ROLES[r] << (2 * w) for w, r in enumerate((lead, f1, f2)) if r)
            follow = max((CONTEND3_FOLLOW[r] for r in (f1, f2) if r), default=0)
            m = _rate(f"contend3.{f}.{state}", f"micro_contend3_{f}", sm_count, 384, CONTEND3_LEAD[lead],
                      CONTEND3_LEAD[lead], f"{lead} units of warpgroup 0 (the leader)", flavour=f, lead=lead,
                      follow=f1, follow2=f2, roles=roles, follow_iters=follow)
            m["kind"] = "contend"
            out.append(m)
    return out


def bar_cycles(results: dict, source: str) -> dict[str, float]:
    """{measurement name: median cycles} of every campaign-version-5 measurement (name bar.*) in a results.json's
    parsed dict (`lapis capture micro --only bar`, benchmarks/h200_bar.sh). source names the file in errors.
    CaptureError when results holds no measurements list, holds no bar.* measurement, or one of them is not ok or has
    no finite positive value in cycles."""
    fix = "capture it again: bash benchmarks/h200_bar.sh (on the H200)"
    ms = results.get("measurements") if isinstance(results, dict) else None
    if not isinstance(ms, list):
        raise CaptureError("a micro results.json holds a 'measurements' list", f"{source}: {str(results)[:200]}", fix)
    out = {}
    for m in ms:
        name = m.get("name", "") if isinstance(m, dict) else ""
        if not isinstance(name, str) or not name.startswith("bar."):
            continue
        v = m.get("value") or {}
        med = v.get("median")
        if m.get("status") != "ok" or v.get("unit") != "cycles" or not isinstance(med, (int, float)) \
                or not np.isfinite(med) or med <= 0:
            raise CaptureError("a bar.* measurement is ok with a positive median in cycles",
                               f"{source}: {name} status {m.get('status')!r} value {v!r}", fix)
        out[name] = float(med)
    if not out:
        raise CaptureError("a version-5 capture holds bar.* measurements", f"{source}: none of {len(ms)}", fix)
    return out


def follower_rate(m: dict, which: int = 1) -> list[float]:
    """A contend measurement's follower units per clk per SM, per repeat ([] without that follower); which: 1, or
    2 for a version-6 measurement's second follower (warpgroup 2)."""
    return list((m.get("raw") or {}).get("follower_rate" if which == 1 else "follower2_rate", []))


def overlap(tensor: dict, softmax: dict, both: dict) -> list[float]:
    """Per repeat, how much of the shorter of the two runs the both-run hid: (T_tensor + T_softmax - T_both) /
    min(T_tensor, T_softmax); 1: they overlap fully, 0: they serialize (T_both = the sum)."""
    t, s, b = ([1.0 / v for v in derive(m)] for m in (tensor, softmax, both))
    return [(x + y - z) / min(x, y) for x, y, z in zip(t, s, b)]


# Chains (kernels/micro_wgmma_v2.cu): K wgmma m64n128k16 per group, from shared memory (ss), with A from registers
# (rs), or the attention kernels' GEMM pair (K ss into one accumulator, commit, K rs into another, commit)
CHAIN_KS = {"ss": (1, 2, 4, 8, 16), "rs": (1, 8), "pair": (8,)}
PAIR_WHAT = " from shared memory, then as many with A from registers"


def items_v8_chain(sm_count: int) -> list[dict]:
    """chain.n128.<src>.k<K>: cycles from wgmma.fence through wait_group 0 of one warpgroup's K wgmmas (2K for
    pair) into one accumulator each, one CTA (micro_wgmma.cu's latency protocol)."""
    return [dict(name=f"chain.n128.{src}.k{k}", kind="cycles", kernel=f"micro_chain_n128_{src}_k{k}",
                 params=dict(n=128, src=src, k=k, iters=1024, count=1024,
                             what=f"cycles from wgmma.fence to wait_group 0 returning, {k} wgmmas" + PAIR_WHAT * (src == "pair")))
            for src, ks in CHAIN_KS.items() for k in ks]


def all_items(sm_count: int) -> list[dict]:
    """Every measurement of campaign versions 1 to 10, in run order."""
    return (items(sm_count) + items_v2(sm_count) + items_v3(sm_count) + items_v3_mix(sm_count)
            + items_v3_mix2(sm_count) + items_v3_contend(sm_count) + items_v3_launch(sm_count)
            + items_v4_beside(sm_count) + items_v5_bar(sm_count) + items_v6_contend3(sm_count)
            + items_v7_density(sm_count) + items_v8_chain(sm_count) + items_v9_sweep(sm_count)
            + items_v10_tile(sm_count))


# ----------------------------------------------------------------------------------------- values --

def derive(m: dict) -> list[float]:
    """One value per repeat from m['raw'] (see the module table); [] if the measurement has no raw data."""
    raw, p = m.get("raw") or {}, m["params"]
    if not raw:
        return []
    kind = m["kind"]
    if kind in ("rate", "mix", "contend"):
        return [p["work_per_cta"] / c for c in raw["cycles"]]
    if kind in ("cycles", "bar"):
        return [c / p["count"] for c in raw["cycles"]]
    if kind == "turnover":
        return list(raw["gap_ns"])
    if kind == "tma_lat":
        return [ns / p["loads"] for ns in raw["cta_ns"]]
    if kind == "tma_bw":
        return [p["bytes"] / ns for ns in raw["span_ns"]]
    if kind == "tma_tile":
        return [ns / p["tiles"] for ns in raw["cta_ns"]]
    raise ValueError(f"unknown measurement kind {kind!r}")


def clock_ghz(m: dict) -> list[float]:
    """The SM clock during each repeat of a rate measurement: clock64 cycles / %globaltimer ns (GHz)."""
    raw = m.get("raw") or {}
    return [c / ns for c, ns in zip(raw.get("cycles", []), raw.get("ns", []))]


def mix_tma_bytes_per_ns(m: dict) -> list[float]:
    """The TMA bytes per %globaltimer ns per SM that a mix measurement's producer warp moved, per repeat."""
    return list((m.get("raw") or {}).get("tma_bytes_per_ns", []))


def mix_tma_round_trip_ns(m: dict) -> list[float]:
    """Per repeat, the mean time a TMA box of a mix measurement spends in flight, in ns, by Little's law:
    boxes kept in flight (depth) x box bytes / bytes per ns. The producer warp re-issues a box as soon as one
    lands, so this is the issue-to-complete latency the wgmma load leaves the TMA path."""
    depth, box = m["params"]["depth"], m["params"]["box_bytes"]
    return [depth * box / b for b in mix_tma_bytes_per_ns(m) if b > 0]


def stats(values) -> dict:
    """median and spread_pct = 100 * IQR / median of the per-repeat values."""
    v = np.asarray(values, dtype=float)
    med = float(np.median(v))
    q1, q3 = np.percentile(v, [25, 75])
    return dict(median=med, spread_pct=float(100.0 * (q3 - q1) / med) if med else float("nan"), n=int(v.size))
