"""Blackwell (sm100) attention forward (bf16, fp32 accumulation): the B200 progression k01..k14 and its four
minor optimizations (the write-up b200-attention-kernel-progression, not in this repository), as simpy
processes.

One event per tile-level operation: a TMA box, one tcgen05.mma over a tile, a TMEM pass, a softmax chunk, an
O rescale. Per work item (one or two 128-row Q tiles of one (batch, head)) and K/V tile j:
  S_j = Q K_j^T (tensor pipe, into TMEM), P_j = softmax (TMEM reads of S, MUFU ex2, FMA pipe, P into TMEM),
  O += P_j V_j (tensor pipe, O in TMEM), and an O rescale (TMEM load + FMA + TMEM store) when the row max moved.
sm100 semantics: tcgen05.mma is issued by one thread of the MMA warp and does not block it; completion is
signalled by tcgen05.commit, modelled as an arrive (at the MMA's end plus the profile's issue-to-commit latency)
on an MBarrier the consumer waits on (S ready, PV done, K/V slot empty, Q free). The tensor pipe executes MMAs
in issue order. S and O live in TMEM (128 lanes x `tmem_columns` 32-bit columns); P overwrites S in place from
k02 on, so a Q tile needs block_n (S/P) + d (O) columns; more than the profile's columns is a ScheduleError.
Units shared per SM: the tensor pipe, MUFU, the FMA pipe, the TMEM load/store path, and the TMA load path (an
equal share of L2 across the SMs running). The representative SM is the one with the most work (below); `full`
simulates every SM (lapis.pipeline_sim.grid). One CTA is resident per SM (the write-up, ch. 14: each CTA's
resources leave room for one).

Work items and their order. A work item is one Q tile (k01-k04) or two consecutive Q tiles (k05 on) of one
(batch, head), numbered with the Q tile fastest, then head, then batch (the write-up, ch. 14: CTA 0 handles tiles
0-1, then 296-297). k14 deals them by its static grid stride, work_id += gridDim.x (ch. 14): CTA c takes items c,
c + 148, c + 296, ... in that order. Before k14 each item is a CTA, and the block scheduler hands CTAs, in blockIdx
order, to whichever SM frees first (lapis.pipeline_sim.causal.dispatch). With equal items both give SM s the items
s, s + 148, ...
Causal masking (`causal=1`, every chapter; lapis.pipeline_sim.causal). Each Q tile visits the K/V tiles up to and
including its own diagonal, in ascending order; with two Q tiles per CTA the loader brings every token up to the
second tile's diagonal, and the first tile's QK, softmax and PV skip the tokens past its own (for block_n 128: Q
tile 2w visits 2w + 1 tiles, Q tile 2w + 1 visits 2w + 2; the last token serves only the second tile). On a
diagonal tile the MMAs and exponentials run in full, and the row warps mask every score as it comes from TMEM:
MASK_OPS_PER_SCORE FMA-pipe ops per score in pass 1, and again for the columns pass 2 re-reads from TMEM (all of
them before k10, those not cached in registers from k10 on). Items then differ in length (weight: Q-tile x K/V-tile
MMA pairs), so SMs differ; the busiest SM is simulated. The write-up's stride lands the same few pair indices on a
CTA (148 % 16 = 4 at L = 4096), so causal k14 carries more work on its busiest SM than the block scheduler's deal of
k13; the write-up benchmarks only non-causal shapes and names no causal work order, so no longest-first (LPT)
order is modelled. FLOPs are counted as half the non-causal ones (the FA benchmarks' convention).

chapter                         modelled?  what the model changes
k01 baseline                    yes        one role ("cta") waits after every stage: TMA Q, TMA K+V, QK, softmax,
                                           O rescale, PV; P goes to SMEM (K's dead slot): the P store is not costed
k02 P in TMEM                   no         P's store moves SMEM -> TMEM; SMEM stores are not a modelled unit, so
                                           costing the TMEM store here alone would invent a slowdown: the P store is
                                           not costed in any chapter. TMEM fit: P aliases S (no extra columns)
k03 swizzle                     no         SMEM bank conflicts are not modelled
k04 warp specialization         yes        roles load / mma / softmax0 with mbarrier hand-offs; one K and one V slot
                                           freed after PV, so the stages stay serialized (the write-up expects no
                                           gain; the model agrees to within the hand-off latencies)
k05 two Q tiles                 yes        a CTA owns two Q tiles (softmax0/1); each K/V load serves both; TMEM
                                           2 x (S + O) columns
k06 load pipeline               yes        one ring of `kv_stages` slots holding K or V tokens; QK waits only for K;
                                           K is freed after the last QK, V after the last PV
k07 compute pipeline            yes        MMA order P0V(j), Q0K(j+1), P1V(j), Q1K(j+1) (prologue QK, drained PV)
k08 hardware approximation      partly     the log2 conversion is folded into the scale: one FMA-pipe op less per
                                           score (attention_h200.FMA_OPS_PER_SCORE); the __expf range compare and
                                           predicated fix-ups (ALU pipe) are not modelled
k09 software exp2               yes        sw_exp_per16 of every 16 exponentials leave MUFU for the FMA pipe as the
                                           cubic (attention_h200.CUBIC_FMA_OPS FMA-pipe ops each)
k10 register caching            yes        the second pass re-reads only the S columns not cached in registers
                                           (S_CACHED_COLUMNS of block_n) from TMEM; register pressure not modelled
k11 skip O rescale              yes        O is rescaled with the frequency lapis.model.numerics measures at
                                           `threshold` (attention_h200.rescale_frequency) instead of every tile
k12 split correction            yes        correction role rescales O (waits stats + PV done) in parallel with P
                                           production; PV waits both (count-2 barrier); correction does the epilogue
k13 early PV                    yes        PV starts on the first EARLY_PV_COLUMNS of P (and O safe); the rest of PV
                                           follows once all of P is ready
k14 persistent                  yes        one CTA per SM walks its work items (static grid stride, above) with no
                                           CTA-wide drain between them: Q is reloaded once the last QK freed it
                                           (q_free), the K/V ring and the MMA run into the next item while the
                                           epilogue finishes. Per-CTA launch, TMEM alloc and barrier-init costs are
                                           not modelled (no profile value)
m1 deferred score acquisition   no         TMEM load latency and rowmax dependency chains are not modelled (only
                                           TMEM throughput)
m2 split rowsum                 no         the rowsum dependency chain is not modelled (FMA throughput only)
m3 phase bitmasks               no         local-memory spills are not modelled
m4 TMA L2 promotion             no         L2 sector fetch granularity / hit rates are not modelled
Before k11 O is rescaled every K/V tile but the first of an item (the write-up: kernel 10 ran the O pass every
iteration). The skip frequency is per row; the warp-collective O pass (any of 32 rows) makes the real one higher.
FMA-pipe ops per score (4, 3 from k08: scale, max, subtract, row sum), the cubic's 6 ops, TMEM_BYTES_PER_CLK_SM and
CTAS_PER_SM are modelled assumptions stated here; rates come from the profile. Per-op costs are fixed by the
mechanism, never per chapter.
"""

from __future__ import annotations

from itertools import accumulate

import simpy

from lapis.errors import ScheduleError
from lapis.pipeline_sim.causal import MASK_OPS_PER_SCORE, dispatch, grid_stride, tile_span
from lapis.pipeline_sim.grid import grid_summary, run_sms
from lapis.pipeline_sim.mbarrier import MBarrier
from lapis.pipeline_sim.pipeline import PipelineState, TmaPipeline
from lapis.pipeline_sim.races import HappensBefore
from lapis.pipeline_sim.schedules.attention_h200 import CUBIC_FMA_OPS, FMA_OPS_PER_SCORE, parse_shape, rescale_frequency
from lapis.pipeline_sim.units import occupy

__all__ = ["DEFAULTS", "VARIANTS", "parse_shape", "simulate"]

BLOCK_M = 128  # rows of a Q tile: one TMEM lane per row (tcgen05 M = 128)
DEFAULTS = dict(block_n=128, kv_stages=3, sw_exp_per16=4, threshold=8, causal=0)
_STEPS = ["serial", "p_tmem", "swizzle", "ws", "two_q", "ring", "compute_pipe", "exp2", "sw_exp2", "reg_cache",
          "skip_rescale", "split_correction", "early_pv", "persistent", "deferred_ld", "split_rowsum",
          "phase_bitmask", "l2_promotion"]
_NAMES = ["b200-k01-baseline", "b200-k02-p-in-tmem", "b200-k03-swizzle", "b200-k04-warp-specialization",
          "b200-k05-two-q-tiles", "b200-k06-load-pipeline", "b200-k07-compute-pipeline", "b200-k08-hw-approx",
          "b200-k09-sw-exp2", "b200-k10-register-caching", "b200-k11-skip-rescale", "b200-k12-split-correction",
          "b200-k13-early-pv", "b200-k14-persistent", "b200-m1-deferred-score-load", "b200-m2-split-rowsum",
          "b200-m3-phase-bitmasks", "b200-m4-tma-l2-promotion"]
# Cumulative: each name adds its step to its predecessor's flags; k04 on replaces the serial baseline.
VARIANTS = {name: {s: True for s in _STEPS[:i + 1] if not (s == "serial" and i >= 3)}
            for i, name in enumerate(_NAMES)}
UNMODELLED = {"p_tmem", "swizzle", "deferred_ld", "split_rowsum", "phase_bitmask", "l2_promotion"}

TMEM_BYTES_PER_CLK_SM = 512  # assumed: tcgen05.ld/st move one 32-bit column on all 128 lanes per clock
CTAS_PER_SM = 1  # the write-up, ch. 14: one resident CTA per SM
S_CACHED_COLUMNS = 96  # k10: the last 96 S columns of the first pass stay in registers (write-up ch. 10)
EARLY_PV_COLUMNS = 96  # k13: PV starts on the high 96 columns of P (write-up ch. 13)


def simulate(p, shape: str, params: dict, variant: str, check_races: bool = False, full: bool = False) -> dict:
    """check_races: log Q and K/V slot accesses and barrier edges (races.HappensBefore), return the races found.
    A tcgen05.commit is a node in the MMA warp's program order whose arrive completes the barrier phase.
    full: simulate every SM (lapis.pipeline_sim.grid), not only the busiest."""
    b, h, seq, d = parse_shape(shape)
    f = VARIANTS[variant]
    prm = {**DEFAULTS, **params}
    bn, nq = prm["block_n"], 2 if f.get("two_q") else 1
    serial = f.get("serial", False)
    if bn < 16 or bn % 16 or seq % bn or seq % (BLOCK_M * nq):
        raise ScheduleError("L must be a multiple of the tiles", f"L = {seq}, {nq} x {BLOCK_M}-row Q tiles per "
                            f"CTA, block_n {bn}", "pad L or pick block_n (a multiple of 16) that divides it")
    if "tmem_columns" not in p.values:
        raise ScheduleError("B200 schedules need tensor memory (tcgen05, sm100)", f"profile {p.name} ({p.arch})",
                            "use --gpu b200")
    tmem = p["tmem_columns"]
    cols = nq * (bn + d)
    if cols > tmem:
        raise ScheduleError("the schedule does not fit tensor memory (TMEM)",
                            f"{nq} Q tile(s) x (S/P {bn} + O {d} fp32 columns) = {cols} columns > {tmem} columns",
                            "lower block_n, or keep one Q tile per CTA")
    slots = prm["kv_stages"] if f.get("ring") else 2  # before k06: one K and one V slot
    if slots < 2:
        raise ScheduleError("the K/V ring needs a slot for K and one for V", f"kv_stages {slots}", "use kv_stages >= 2")
    tile_bytes, q_bytes = bn * d * 2, BLOCK_M * d * 2
    smem = nq * q_bytes + slots * tile_bytes
    if smem > p["smem_bytes_per_block"]:
        raise ScheduleError("the schedule does not fit shared memory", f"{nq} Q x {q_bytes} B + {slots} K/V slots x "
                            f"{tile_bytes} B = {smem} B > {p['smem_bytes_per_block']} B", "lower kv_stages or block_n")
    if not 0 <= prm["sw_exp_per16"] <= 16:
        raise ScheduleError("sw_exp_per16 counts exponentials of 16", prm["sw_exp_per16"], "use 0..16")
    kv = seq // bn
    spans, per_sm = work_items(b * h, seq, bn, nq, bool(prm["causal"]), p["sm_count"] * CTAS_PER_SM,
                               f.get("persistent"))
    items = b * h * len(spans)
    kv_reuse = seq // (BLOCK_M * nq)  # K/V serve each Q tile of a head
    env = simpy.Environment()
    t_rate, m_rate, f_rate = (p.per_ns(k) for k in ("tensor_flop_per_clk_sm", "mufu_ex2_per_clk_sm",
                                                    "fma_per_clk_sm"))
    tm_rate = TMEM_BYTES_PER_CLK_SM * p["clock_ghz"]  # B/ns
    lat_mma, lat_tma = p["wgmma_latency_ns"], p["tma_latency_ns"]

    exp2 = f.get("exp2", False)
    emulate = prm["sw_exp_per16"] / 16 if f.get("sw_exp2") else 0.0
    scores = BLOCK_M * bn
    gemm_ns = 2 * BLOCK_M * bn * d / t_rate
    s_read_ns = scores * 4 / tm_rate
    reread = max(bn - S_CACHED_COLUMNS, 0) / bn if f.get("reg_cache") else 1.0
    pass1 = dict(tmem=s_read_ns, fma=scores * 1 / f_rate)  # read S, row max
    pass2 = dict(tmem=s_read_ns * reread, mufu=scores * (1 - emulate) / m_rate,
                 fma=scores * (FMA_OPS_PER_SCORE[exp2] - 1 + CUBIC_FMA_OPS * emulate) / f_rate)
    mask_ns = scores * MASK_OPS_PER_SCORE / f_rate  # a diagonal tile: mask every score read from TMEM again
    passes = {False: (pass1, pass2), True: ({**pass1, "fma": pass1["fma"] + mask_ns},
                                            {**pass2, "fma": pass2["fma"] + mask_ns * reread})}
    freq = rescale_frequency(bn, prm["threshold"]) if f.get("skip_rescale") else 1.0
    rescale = dict(tmem=2 * BLOCK_M * d * 4 * freq / tm_rate, fma=BLOCK_M * d * freq / f_rate)
    early = min(EARLY_PV_COLUMNS, bn) / bn if f.get("early_pv") else 1.0
    checked = []  # (HappensBefore or None, barriers) of each SM simulated

    def build(rec, grid, group):
        """One SM's units, barriers and roles, running the work items of `group.work` (their spans)."""
        my = group.work
        my_items = len(my)
        n_kv = [s[-1][0] for s in my]  # K/V tokens an item loads: up to its last Q tile's diagonal
        base = [list(accumulate((s[q][0] for s in my[:-1]), initial=0)) for q in range(nq)]  # Q tile q's earlier
        hb = HappensBefore(env) if check_races else None
        busy = dict(tensor=0.0, mufu=0.0, fma=0.0, tmem=0.0, tma=0.0)
        units = {name: simpy.Resource(env, 1) for name in busy}

        def use(name, ns, role, op, **kw):
            if ns <= 0:
                return
            yield from occupy(env, rec, units[name], ns, busy, name, role, op, **kw)

        def work(costs, frac, role, op, **kw):
            """A row-warp pass: TMEM traffic, then MUFU, then FMA-pipe work (in program order), `frac` of it."""
            for name in ("tmem", "mufu", "fma"):
                if name in costs:
                    yield from use(name, costs[name] * frac, role, f"{op} ({name})", **kw)

        def bar(name, arrivers, count=None):
            return MBarrier(env, name, count or len(arrivers), tuple(arrivers))

        def wait(barrier, phase, role, what, **kw):
            """try_wait.parity for the `phase`-th completion (0-based) of `barrier`."""
            t0 = env.now
            yield barrier.wait(phase % 2, role)
            if env.now > t0:
                rec.add(role, f"wait {what}", t0, kind="wait", **kw)

        def mma(role, op, ns, commits, reads=(), **kw):
            """Issue one tcgen05.mma (and a tcgen05.commit arriving on `commits`) without blocking the issuer."""
            for buf, slot, token in reads:
                if hb:
                    hb.access(role, buf, slot, token, "read")
            node = hb.op(role, f"commit {op}") if hb and commits else None
            env.process(mma_run(role, op, ns, commits, node, kw))

        def mma_run(role, op, ns, commits, node, kw):
            yield from use("tensor", ns, "tensor", op, **kw)
            yield env.timeout(lat_mma)
            for c in commits:
                c.arrive(role, node=node)

        def load(nbytes, role, op, reuse=kv_reuse, **kw):
            """At the SM's bandwidth share when the load path takes it (Q read and O written once: reuse 1)."""
            yield from occupy(env, rec, units["tma"], lambda: nbytes / grid.share(reuse), busy, "tma", role, op,
                              **kw)
            yield env.timeout(lat_tma)

        def epilogue(role, item, q):
            kw = dict(work_item=item)
            yield from use("tmem", BLOCK_M * d * 4 / tm_rate, role, f"O{q} TMEM -> registers", **kw)
            yield from use("fma", BLOCK_M * d / f_rate, role, f"O{q} / rowsum", **kw)
            yield from load(BLOCK_M * d * 2, role, f"store O{q}", reuse=1, **kw)

        barriers = []

        if serial:
            role = "cta"
            done = bar("mma_done", (role,))
            barriers.append(done)
            n_done = [0]

            def mma_wait(op, item, j):
                mma(role, op, gemm_ns, (done,), work_item=item, k_index=j)
                yield from wait(done, n_done[0], role, f"{op} commit", work_item=item, k_index=j)
                n_done[0] += 1

            def cta():
                for item in range(my_items):
                    yield from load(q_bytes, role, "TMA Q (waited)", reuse=1, work_item=item)
                    for j in range(n_kv[item]):
                        kw = dict(work_item=item, k_index=j)
                        masked = j >= my[item][0][1]
                        p1, p2 = passes[masked]
                        yield from load(2 * tile_bytes, role, "TMA K+V (waited)", **kw)
                        yield from mma_wait("QK", item, j)
                        yield from work(p1, 1, role, f"S pass 1: {'mask + ' * masked}row max", **kw)
                        if j:
                            yield from work(rescale, 1, role, "O rescale", **kw)
                        yield from work(p2, 1, role, "S pass 2: P", **kw)
                        yield from mma_wait("PV", item, j)
                    yield from epilogue(role, item, 0)

            procs = {role: env.process(cta())}
        else:
            split, persistent, pipe = f.get("split_correction"), f.get("persistent"), f.get("compute_pipe")
            softmax = tuple(f"softmax{q}" for q in range(nq))
            roles = ("load", "mma") + softmax + (("correction",) if split else ())
            ring = TmaPipeline(env, "KV", slots, "load", ("mma",), tile_bytes)
            ring.attach(hb)
            q_full, q_free = bar("q_full", ("load",)), bar("q_free", ("mma",))
            s_ready = [bar(f"s_ready[{q}]", ("mma",)) for q in range(nq)]
            pv_done = [bar(f"pv_done[{q}]", ("mma",)) for q in range(nq)]
            o_safe_by = ("correction",) if split else ()
            # PV waits on p_ready (P ready, and O safe unless a separate correction role arrives there or on p_high)
            p_ready = [bar(f"p_ready[{q}]", (f"softmax{q}",) + (() if f.get("early_pv") else o_safe_by))
                       for q in range(nq)]
            p_high = [bar(f"p_high[{q}]", (f"softmax{q}",) + o_safe_by) for q in range(nq)] if f.get("early_pv") else []
            stats = [bar(f"stats[{q}]", (f"softmax{q}",)) for q in range(nq)] if split else []
            cta_end = bar("cta_end", roles)
            for x in [q_full, q_free, cta_end] + s_ready + pv_done + p_ready + p_high + stats:
                x.hb = hb
            barriers += ring.barriers + [q_full, q_free, cta_end] + s_ready + pv_done + p_ready + p_high + stats

            def end_of_cta(role, item):
                """Non-persistent: every role drains before the SM's next CTA starts (modelled as one barrier)."""
                if not persistent:
                    cta_end.arrive(role)
                    yield from wait(cta_end, item, role, "CTA end", work_item=item)

            def tokens(item):
                for j in range(n_kv[item]):
                    yield j, "K"
                    yield j, "V"

            def loader():
                st = PipelineState.producer_start(slots)
                for item in range(my_items):
                    if item and persistent:
                        yield from wait(q_free, item - 1, "load", "Q free", work_item=item)
                    q_full.arrive_expect_tx(nq * q_bytes, "load")
                    issue = hb and hb.op("load", f"issue TMA Q {item}")
                    env.process(q_load(item, issue))
                    for j, x in tokens(item):
                        t0 = env.now
                        yield ring.producer_acquire(st)
                        if env.now > t0:
                            rec.add("load", f"wait {x} slot", t0, kind="wait", work_item=item, k_index=j)
                        ring.producer_expect(st)
                        issue = hb and hb.op("load", f"issue TMA {x} {item}.{j}")
                        env.process(tile_load(PipelineState(slots, st.index, st.phase), x, item, j, issue))
                        st.advance()
                    yield from end_of_cta("load", item)
                yield ring.producer_tail(st)

            def q_load(item, issue):
                yield from load(nq * q_bytes, "tma", f"TMA Q x{nq}", reuse=1, work_item=item)
                w = hb and hb.access(f"tma Q {item}", "Q", 0, item, "write", after=issue)
                q_full.complete_tx(nq * q_bytes, node=w)

            def tile_load(st, x, item, j, issue):
                yield from load(tile_bytes, "tma", f"TMA {x}", work_item=item, k_index=j)
                w = hb and hb.access(f"tma {x} {item}.{j}", "KV", st.index, (item, j, x), "write", after=issue)
                ring.tma_complete(st, node=w)

            def mma_warp():
                st = PipelineState(slots)
                role = "mma"

                def take():
                    s = PipelineState(slots, st.index, st.phase)
                    st.advance()
                    return s

                def wait_tile(s, x, item, j):
                    t0 = env.now
                    yield ring.consumer_wait(s, role)
                    if env.now > t0:
                        rec.add(role, f"wait {x}", t0, kind="wait", work_item=item, k_index=j)

                def qk(item, j, q, ks):
                    last = q == nq - 1  # the last Q tile visits every token its item loads (it has the last diagonal)
                    commits = [s_ready[q]] + ([ring.empty[ks.index]] if last and f.get("ring") else []) + \
                              ([q_free] if last and j == n_kv[item] - 1 else [])
                    mma(role, f"Q{q}K", gemm_ns, commits, reads=(("Q", 0, item), ("KV", ks.index, (item, j, "K"))),
                        work_item=item, k_index=j)

                def pv(item, j, q, ks, vs):
                    g = base[q][item] + j
                    kw = dict(work_item=item, k_index=j)
                    reads = (("KV", vs.index, (item, j, "V")),)
                    last = q == nq - 1
                    frees = ([ring.empty[vs.index]] + ([] if f.get("ring") else [ring.empty[ks.index]])) if last else []
                    if p_high:
                        yield from wait(p_high[q], g, role, f"P{q} high + O safe", **kw)
                        mma(role, f"P{q}V (early part)", gemm_ns * early, (), reads=reads, **kw)
                        yield from wait(p_ready[q], g, role, f"P{q} ready", **kw)
                        mma(role, f"P{q}V (rest)", gemm_ns * (1 - early), [pv_done[q]] + frees, reads=reads, **kw)
                    else:
                        yield from wait(p_ready[q], g, role, f"P{q} ready + O safe", **kw)
                        mma(role, f"P{q}V", gemm_ns, [pv_done[q]] + frees, reads=reads, **kw)

                for item in range(my_items):
                    yield from wait(q_full, item, role, "Q", work_item=item)
                    toks = [(take(), take()) for _ in range(n_kv[item])]  # (K, V) slot states in token order
                    on = [[q for q in range(nq) if j < my[item][q][0]] for j in range(n_kv[item])]  # Q tiles per token
                    if pipe:  # prologue QK(0); steady state P_qV(j), Q_qK(j+1); the last PVs drain
                        yield from wait_tile(toks[0][0], "K", item, 0)
                        for q in on[0]:
                            qk(item, 0, q, toks[0][0])
                        for j in range(n_kv[item]):
                            ks, vs = toks[j]
                            yield from wait_tile(vs, "V", item, j)
                            for q in on[j]:
                                yield from pv(item, j, q, ks, vs)
                                if j + 1 < n_kv[item] and q in on[j + 1]:
                                    if q == on[j + 1][0]:
                                        yield from wait_tile(toks[j + 1][0], "K", item, j + 1)
                                    qk(item, j + 1, q, toks[j + 1][0])
                    else:
                        for j in range(n_kv[item]):
                            ks, vs = toks[j]
                            yield from wait_tile(ks, "K", item, j)
                            if not f.get("ring"):
                                yield from wait_tile(vs, "V", item, j)
                            for q in on[j]:
                                qk(item, j, q, ks)
                            if f.get("ring"):
                                yield from wait_tile(vs, "V", item, j)
                            for q in on[j]:
                                yield from pv(item, j, q, ks, vs)
                    yield from end_of_cta(role, item)

            def p_production(role, q, item, j, g, p2):
                kw = dict(work_item=item, k_index=j)
                if p_high:
                    yield from work(p2, early, role, f"S{q} pass 2: P high", **kw)
                    p_high[q].arrive(role)
                    yield from work(p2, 1 - early, role, f"S{q} pass 2: P rest", **kw)
                else:
                    yield from work(p2, 1, role, f"S{q} pass 2: P", **kw)
                p_ready[q].arrive(role)

            def o_rescale(role, q, item, j, g):
                kw = dict(work_item=item, k_index=j)
                if j:
                    yield from wait(pv_done[q], g - 1, role, f"P{q}V done", **kw)
                    yield from work(rescale, 1, role, f"O{q} rescale", **kw)

            def row_warps(q):
                role = f"softmax{q}"
                for item in range(my_items):
                    visits, first_masked = my[item][q]
                    for j in range(visits):
                        g = base[q][item] + j
                        kw = dict(work_item=item, k_index=j)
                        masked = j >= first_masked
                        p1, p2 = passes[masked]
                        yield from wait(s_ready[q], g, role, f"S{q}", **kw)
                        yield from work(p1, 1, role, f"S{q} pass 1: {'mask + ' * masked}row max", **kw)
                        if split:
                            stats[q].arrive(role)
                        else:
                            yield from o_rescale(role, q, item, j, g)
                        yield from p_production(role, q, item, j, g, p2)
                    if not split:
                        yield from wait(pv_done[q], base[q][item] + visits - 1, role, f"P{q}V done", work_item=item)
                        yield from epilogue(role, item, q)
                    yield from end_of_cta(role, item)

            def correction():
                role = "correction"
                for item in range(my_items):
                    for j in range(n_kv[item]):
                        for q in range(nq):
                            if j < my[item][q][0]:
                                g = base[q][item] + j
                                yield from wait(stats[q], g, role, f"stats{q}", work_item=item, k_index=j)
                                yield from o_rescale(role, q, item, j, g)
                                (p_high or p_ready)[q].arrive(role)
                    for q in range(nq):
                        yield from wait(pv_done[q], base[q][item] + my[item][q][0] - 1, role, f"P{q}V done",
                                        work_item=item)
                        yield from epilogue(role, item, q)
                    yield from end_of_cta(role, item)

            procs = {"load": env.process(loader()), "mma": env.process(mma_warp())}
            procs.update({f"softmax{q}": env.process(row_warps(q)) for q in range(nq)})
            if split:
                procs["correction"] = env.process(correction())
        checked.append((hb, barriers))
        return procs, barriers, busy

    run = run_sms(env, p, per_sm, full, build, cost=lambda w: sum(v for s in w for v, _ in s))
    rep = run.slowest
    my = rep.work
    flops = 4.0 * b * h * seq * seq * d / (2 if prm["causal"] else 1)  # the FA benchmarks' convention
    return dict(env_ns=env.now, flops=flops, events=run.recorders[rep.sm].events, params=prm,
                races=None if not check_races else [r for hb, bars in checked
                                                    for r in hb.races() + [y for x in bars for y in x.races]],
                fit=dict(smem_bytes=smem, tmem_columns=cols), units=run.busy[rep.sm],
                work=dict(work_items=items, active_sms=len(per_sm), items_per_sm=len(my), kv_tiles=kv, q_tiles=nq,
                          kv_tiles_on_this_sm=sum(s[-1][0] for s in my),
                          qk_tiles_on_this_sm=sum(v for s in my for v, _ in s),
                          masked_tiles_on_this_sm=sum(v - m for s in my for v, m in s),
                          rescale_frequency=freq, modelled=sorted(set(f) - UNMODELLED)),
                grid=grid_summary(run, env.now))



def work_items(heads: int, seq: int, bn: int, nq: int, causal: bool, ctas: int, persistent: bool):
    """(spans, per_sm): spans[w] = per Q tile of a head's w-th work item (Q tiles nq*w .. nq*w+nq-1), the
    (K/V tiles it visits, first masked tile) of causal.tile_span; per_sm = the same for each work item of every
    SM, in the order it runs them. Persistent (k14): the write-up's static grid stride; else the block
    scheduler's dispatch (lapis.pipeline_sim.causal). An item's weight is its Q-tile x K/V-tile MMA pairs."""
    kv = seq // bn
    spans = [tuple(tile_span(w * nq + t, kv, BLOCK_M, bn, causal) for t in range(nq))
             for w in range(seq // (BLOCK_M * nq))]
    weights = [sum(v for v, _ in spans[i % len(spans)]) for i in range(heads * len(spans))]
    per_sm = grid_stride(len(weights), ctas) if persistent else dispatch(weights, ctas)
    return spans, [[spans[i % len(spans)] for i in sm] for sm in per_sm]
