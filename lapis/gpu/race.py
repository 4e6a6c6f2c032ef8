"""Time lapis's attention kernels beside torch SDPA's cuDNN and flash (FA2) backends and FA4's CuTe-DSL sm90
forward, in one process under the timing protocol (lapis.gpu.protocol), at given shapes, causal and not.

    python -m lapis.gpu.race --out DIR [--kernels s9,cudnn,flash,fa4] [--shapes BxHxLxD,...] [--causal both]
                             [--rounds 5] [--launches 30] [--provenance FILE] [--fa4-site DIR]

For each (shape, causal): every kernel is checked first (one launch on fresh normal inputs against a float64
reference of the first B x H slice, ||out - ref|| / ||ref||, bf16 tolerance 1e-2), then timed under the protocol
with cuDNN as the reference (ratios are cuDNN's time over the kernel's). FLOPs: 4 B H L^2 D, half of it causal
(the FA benchmarks' convention). lapis's kernels report the SM clock of their own probe, the others the clock
nvidia-smi sampled during their batches (clock.mhz_median, clock.source "probe" or "sampled"). Every kernel also
gets the post-batch probe, measured the same way for all: after its batch of each round, outside the timed events,
one launch on the same stream of micro_cta_turnover (lapis/gpu/kernels/micro_launch_v1.cu: one CTA per SM, thread 0
reads %clock64 and %globaltimer, spins POST_PROBE_SPIN_NS by %globaltimer, reads both again); its MHz is the median
over the CTAs of cycles / ns x 1000 (post_probe_mhz). The clock record keeps it per round (clock.post_mhz) and its
median over the rounds (clock.post_mhz_median), beside the kernel's own probe for lapis's kernels. A second launch of
the same probe, enqueued right before the batch's first timed launch, brackets the batch with the post-batch one
(lapis.gpu.protocol's bracket clock, bracket_mhz): per SM, the %clock64 cycles over the %globaltimer ns from the first
probe's end to the second's start (bracket_mhz), the mean clock over the batch for every kernel alike, which a
kernel's own probe checks for lapis's. The kernels SDPA launched are named (torch.profiler).
FA4 (flash_attn.cute.interface.flash_attn_func, inputs B x L x H x D) runs when importable, after adding
--fa4-site to the import path (site.addsitedir); else its rows say why. fa4 reads a B x L x H x D copy of the
inputs (FA4's own layout), fa4_bhsd B x L x H x D views of the B x H x L x D inputs the others read. Writes
DIR/manifest.json (provenance, units, the post-batch probe's launch, every summary) and prints a table. GPU only:
sm_90a, cupy and torch.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from lapis.catalog.attention import DEFAULT_SHAPES, VARIANTS, kernel_name
from lapis.errors import LapisError, ScheduleError
from lapis.gpu import bench_attention as ba
from lapis.gpu import capture_tma, harness, protocol
from lapis.gpu.capture_micro import RECORD_WORDS as POST_PROBE_WORDS
from lapis.gpu.bench_gemm import SmiSampler, smi_gpu_id
from lapis.model.micro_campaign import FORCE_ONE_CTA_SMEM

THIRD_PARTY = ("cudnn", "flash", "fa4", "fa4_bhsd")
TOLERANCE = 1e-2
CHECK_HEADS = 1  # the reference covers the first batch x head slice (float64 on the GPU)
POST_PROBE = Path(__file__).parent / "kernels" / "micro_launch_v1.cu"  # micro_cta_turnover(spin_ns, out)
POST_PROBE_THREADS = 384  # micro_cta_turnover's __launch_bounds__
# %globaltimer ticks every 32 ns on the H200: over 20 µs a CTA's ns span is off by < 0.2%
POST_PROBE_SPIN_NS = 20_000


def flops(shape: str, causal: bool) -> float:
    b, h, seq, d = ba.parse_shape(shape)
    return 4.0 * b * h * seq * seq * d / (2 if causal else 1)


def _records(records, what: str) -> np.ndarray:
    """micro_cta_turnover's records as a (CTAs, POST_PROBE_WORDS) int64 array; LapisError naming `what` when they
    are not integers from 0 to 2**63 - 1 (%clock64 and %globaltimer count up from 0; a float, a string or a bool is
    no counter, and a u64 past int64 would wrap), POST_PROBE_WORDS per CTA."""
    rule = f"the {what}'s records are integers from 0 to 2**63 - 1 (micro::Record words)"
    try:
        raw = np.asarray(records)
    except (TypeError, ValueError) as exc:
        raise LapisError(rule, f"{type(exc).__name__}: {exc}", "pass the probe's output buffer (u64)") from None
    if raw.dtype.kind not in "iu" or raw.size and (raw.min() < 0 or raw.max() > np.iinfo(np.int64).max):
        raise LapisError(rule, f"dtype {raw.dtype}" + (f", from {raw.min()} to {raw.max()}" if raw.dtype.kind in "iu"
                                                          and raw.size else ""),
                         "pass the probe's output buffer (u64)")
    rec = raw.astype(np.int64)
    if rec.size % POST_PROBE_WORDS:
        raise LapisError(f"the {what} writes {POST_PROBE_WORDS} words per CTA (micro::Record)",
                         f"{rec.size} words", f"size the output buffer {POST_PROBE_WORDS} x the CTA count")
    return rec.reshape(-1, POST_PROBE_WORDS)


def post_probe_mhz(records) -> float | None:
    """The post-batch probe's SM clock (MHz) from micro_cta_turnover's records (POST_PROBE_WORDS u64 per CTA:
    %clock64 and %globaltimer at the spin's start and end, then the SM): the median over the CTAs of cycles / ns x
    1000, as bench_attention.probe_clock takes it (a CTA without a positive interval is left out); None when no CTA
    recorded one. LapisError (_records) when `records` is not integers, POST_PROBE_WORDS per CTA."""
    return ba.probe_clock(_records(records, "post-batch probe")[:, :4].ravel()).get("mhz_median")


def bracket_mhz(before, after) -> tuple[float, float] | None:
    """(MHz, span ns) of the SM clock between two probe launches (micro_cta_turnover's records, POST_PROBE_WORDS u64
    per CTA: clk0, clk1, ns0, ns1, sm): per SM that ran a CTA of both, the cycles from the first probe's clk1 to the
    second's clk0 over the ns from its ns1 to ns0, x 1000; the median over those SMs of the MHz and of the span.
    None when no SM holds a positive interval in both. LapisError (_records) when either is not POST_PROBE_WORDS
    integers per CTA."""
    recs = []
    for which, records in (("first", before), ("second", after)):
        ran = [r for r in _records(records, f"{which} bracket probe") if r[3] > 0]  # ns1 > 0: the CTA ran
        sms = [int(r[4]) for r in ran]
        if len(set(sms)) != len(sms):
            raise LapisError(f"the {which} bracket probe runs one CTA per SM (FORCE_ONE_CTA_SMEM of shared memory)",
                             f"SMs {sorted(sm for sm in set(sms) if sms.count(sm) > 1)} ran more than one",
                             "launch micro_cta_turnover with shared_mem=FORCE_ONE_CTA_SMEM, one CTA per SM")
        recs.append(dict(zip(sms, ran)))
    first, second = recs
    mhz, span = [], []
    for sm in first.keys() & second.keys():
        cyc, ns = second[sm][0] - first[sm][1], second[sm][2] - first[sm][3]
        if cyc > 0 and ns > 0:
            mhz.append(1e3 * cyc / ns)
            span.append(ns)
    return (float(np.median(mhz)), float(np.median(span))) if mhz else None


class Bracket:
    """The two probe launches around a batch (module docstring): before() and after() enqueue micro_cta_turnover
    (one CTA per SM) into their own buffers on the current stream; post_mhz() reads the second as the post-batch
    probe, mhz() both as the bracket clock."""

    def __init__(self, cp, fn, sms: int):
        self.cp, self.fn, self.sms = cp, fn, sms
        self.out = [cp.zeros(POST_PROBE_WORDS * sms, cp.uint64) for _ in range(2)]

    def _launch(self, out) -> None:
        out.fill(0)
        self.fn((self.sms,), (POST_PROBE_THREADS,), (np.uint32(POST_PROBE_SPIN_NS), out),
                shared_mem=FORCE_ONE_CTA_SMEM)

    def before(self) -> None:
        self._launch(self.out[0])

    def after(self) -> None:
        self._launch(self.out[1])

    def post_mhz(self) -> float | None:
        return post_probe_mhz(self.out[1].get())

    def mhz(self) -> tuple[float, float] | None:
        return bracket_mhz(self.out[0].get(), self.out[1].get())


class Race:
    """The GPU side: built cubin, inputs per shape, one Timed per kernel."""

    def __init__(self, a):
        import cupy as cp
        import torch

        self.cp, self.torch, self.a = cp, torch, a
        torch.backends.cuda.matmul.allow_tf32 = False
        cp.zeros(1)
        cubin, self.ptxas = harness.build(ba.KERNEL, {})
        self.module, self.plan, self.lib = harness.load(cubin), ba.load(), harness.libcuda()
        self.status = harness.Status()
        self.smi = SmiSampler(smi_gpu_id())
        self.smi.start()
        self.fa4, self.fa4_error = self._fa4(a.fa4_site)
        self.probe_fn = harness.load(harness.build(POST_PROBE)[0]).get_function("micro_cta_turnover")
        self.probe_fn.max_dynamic_shared_size_bytes = FORCE_ONE_CTA_SMEM  # one CTA per SM
        self.sms = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
        self.bracket = Bracket(cp, self.probe_fn, self.sms)

    def _fa4(self, site: str | None):
        if site:
            import site as site_mod
            site_mod.addsitedir(site)
        try:
            from flash_attn.cute.interface import flash_attn_func
            return flash_attn_func, None
        except Exception as exc:  # an optional kernel: its rows say why it did not run
            return None, f"{type(exc).__name__}: {exc}"[:300]

    def inputs(self, shape: str, n: int, seed: int) -> list:
        return [ba.make_inputs(self.torch, shape, "normal", seed + i) for i in range(n)]

    def timed(self, name: str, shape: str, causal: bool, sets: list, o):
        """(Timed, launch-once for the check) of kernel `name` on the input sets, writing into o where it can."""
        torch = self.torch
        if name in VARIANTS:
            return self._lapis(name, shape, causal, sets, o)
        if name in ("cudnn", "flash"):
            f = torch.nn.functional.scaled_dot_product_attention

            def launch(i, copy=False, be=name):
                with ba.sdpa_backend(torch, be):
                    out = f(*sets[i], is_causal=causal)
                if copy:  # the check only: a timed launch is the kernel alone, not a copy of its output
                    o.copy_(out)
            return protocol.Timed(name, launch, len(sets))
        if self.fa4 is None:
            raise LapisError("FA4's sm90 forward is not importable here", self.fa4_error, "pass --fa4-site DIR")
        # fa4: B x L x H x D memory (FA4's own layout, a copy of the inputs); fa4_bhsd: the B x H x L x D inputs that
        # lapis's kernels and SDPA read, passed as B x L x H x D views (FA4 takes aligned strides without a copy)
        blhd = [tuple(x.transpose(1, 2) if name == "fa4_bhsd" else x.transpose(1, 2).contiguous() for x in s)
                for s in sets]

        def launch(i, copy=False):
            out = self.fa4(*blhd[i], causal=causal)
            if copy:  # the check only, as for SDPA's backends
                o.copy_((out[0] if isinstance(out, tuple) else out).transpose(1, 2))
        return protocol.Timed(name, launch, len(sets))

    def _lapis(self, name: str, shape: str, causal: bool, sets: list, o):
        v = VARIANTS[name]
        att = ba.Attention(self.module, v, self.plan, self.lib, causal)
        b, h, seq, d = ba.check_shape(v, shape, causal)
        maps = [att.maps(q.data_ptr(), k.data_ptr(), vv.data_ptr(), b * h * seq) for q, k, vv in sets]
        gx, gy = ba.grid(v, shape)
        probe = self.cp.zeros(4 * gx * gy, self.cp.uint64)
        hargs = harness.harness_args(self.status, 0, 0, 0, ba.WATCHDOG_NS, roles=len(ba.ROLES))

        def launch(i, copy=False):  # writes o itself: nothing to copy
            att.launch(maps[i], o.data_ptr(), shape, hargs, probe.data.ptr)
        return protocol.Timed(kernel_name(v, causal), launch, len(sets),
                              probe=lambda: ba.probe_clock(probe.get()).get("mhz"))

    def check(self, t: protocol.Timed, sets, o, ref, what: str) -> float:
        o.fill_(float("nan"))
        t.launch(0, copy=True)
        self.torch.cuda.synchronize()
        harness.check_status(self.status, what)
        return ba.rel_err(self.torch, o[:1, :CHECK_HEADS], ref)

    def shape(self, shape: str, causal: bool, names: list[str]) -> dict:
        torch = self.torch
        b, h, seq, d = ba.parse_shape(shape)
        n_sets = max(2, -(-3 * ba.L2_BYTES // (3 * b * h * seq * d * 2)))
        sets = self.inputs(shape, n_sets, 2000)
        o = torch.empty_like(sets[0][0])
        q, k, v = (x[:1, :CHECK_HEADS] for x in sets[0])
        ref = ba.reference(torch, q, k, v, causal=causal)
        entry = dict(shape=shape, causal=causal, flops=flops(shape, causal), input_sets=n_sets, rel_err={},
                     skipped={}, sdpa_kernels={})
        kernels = []
        for name in names:
            try:
                t = self.timed(name, shape, causal, sets, o)
            except (LapisError, ScheduleError) as exc:
                entry["skipped"][name] = str(exc)
                continue
            err = self.check(t, sets, o, ref, f"{name} at {shape}")
            entry["rel_err"][t.name] = err
            if not err < TOLERANCE:
                entry["skipped"][t.name] = f"relative error {err:.2e} >= {TOLERANCE}"
                continue
            if name in ("cudnn", "flash"):
                entry["sdpa_kernels"][name] = ba.kernels_launched(torch, lambda t=t: t.launch(0))
            kernels.append(t)
        names_ok = [t.name for t in kernels]
        ref_name = "cudnn" if "cudnn" in names_ok else names_ok[0] if names_ok else None
        if kernels:
            r = protocol.run(kernels, protocol.event_batch(self.cp, torch, self.bracket), ref_name, self.a.rounds,
                             self.a.launches, sample_clock=self.sampled_mhz, post_clock=self.bracket.post_mhz,
                             bracket_clock=self.bracket.mhz)
            for t in kernels:
                s = r["kernels"][t.name]
                s["tflops"] = entry["flops"] / s["median_us"] / 1e6
            entry.update(protocol=dict(rounds=r["rounds"], launches=r["launches"], reference=r["reference"],
                                       order=r["order"]), kernels=r["kernels"])
        del sets, o
        torch.cuda.empty_cache()
        return entry

    def sampled_mhz(self, t0: float, t1: float):
        w = self.smi.window(t0, t1)
        return (w.get("sm_clock_mhz") or {}).get("median")


def table(results: list) -> str:
    lines = [f"{'shape':<17}{'causal':<7}{'kernel':<28}{'median us':>11}{'spread %':>9}{'TFLOP/s':>9}{'/cuDNN':>8}"
             f"{'MHz':>6}{'post':>6}{'brkt':>6}{'busy':>6}"]
    # MHz: the kernel's probe, else the samples; post: the post-batch probe; brkt: the bracket clock; busy: its
    # lowest busy fraction over the rounds
    for e in results:
        for name, s in e.get("kernels", {}).items():
            c = s.get("clock", {})
            busy = min(c["busy"]) if c.get("busy") else None
            lines.append(f"{e['shape']:<17}{str(e['causal']):<7}{name:<28}{s['median_us']:>11.1f}"
                         f"{s['spread_pct']:>9.2f}{s['tflops']:>9.0f}{s['speedup_to_reference']['median']:>8.3f}"
                         + "".join(f"{'' if v is None else f'{v:.0f}':>6}" for v in
                                   (c.get("mhz_median"), c.get("post_mhz_median"), c.get("bracket_mhz_median")))
                         + f"{'' if busy is None else f'{busy:.3f}':>6}")
        lines += [f"{e['shape']:<17}{str(e['causal']):<7}{n:<28}skipped: {why}" for n, why in e["skipped"].items()]
    return "\n".join(lines)


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m lapis.gpu.race", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output folder (manifest.json)")
    ap.add_argument("--kernels", default="s9,cudnn,flash,fa4", type=lambda s: [x for x in s.split(",") if x],
                    help="lapis variants (lapis.catalog.attention) and cudnn, flash, fa4 (default s9,cudnn,flash,fa4)")
    ap.add_argument("--shapes", default=list(DEFAULT_SHAPES), type=lambda s: [x for x in s.split(",") if x],
                    help="BxHxLxD,... (default the five shapes)")
    ap.add_argument("--causal", choices=("no", "yes", "both"), default="both")
    ap.add_argument("--rounds", type=int, default=protocol.MIN_ROUNDS)
    ap.add_argument("--launches", type=int, default=protocol.MIN_LAUNCHES)
    ap.add_argument("--provenance", help="JSON from python -m lapis.captures.provenance (made where git is)")
    ap.add_argument("--fa4-site", help="a folder of FA4's unpacked wheels (added with site.addsitedir)")
    a = ap.parse_args(argv)
    unknown = [k for k in a.kernels if k not in VARIANTS and k not in THIRD_PARTY]
    if unknown:
        ap.error(f"unknown kernels {unknown}: use lapis variants ({', '.join(VARIANTS)}) or {', '.join(THIRD_PARTY)}")
    protocol.check_counts(a.rounds, a.launches)
    return a


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parse_args(argv)
    if not harness.gpu_present():
        print("python -m lapis.gpu.race: needs an NVIDIA GPU with compute capability 9.0+, cupy and torch",
              file=sys.stderr)
        return 2
    t0, dest = time.time(), Path(a.out)
    dest.mkdir(parents=True, exist_ok=True)
    prov = capture_tma.provenance(a.provenance, argv, "python -m lapis.gpu.race")
    race = Race(a)
    prov.update(torch=race.torch.__version__, cudnn=race.torch.backends.cudnn.version(),
                fa4=None if race.fa4 is None else "flash_attn.cute.interface.flash_attn_func")
    causal = {"no": [False], "yes": [True], "both": [False, True]}[a.causal]
    results = []
    for c in causal:
        for shape in a.shapes:
            print(f"[{time.time() - t0:6.1f}s] {shape} causal={c}", flush=True)
            results.append(race.shape(shape, c, a.kernels))
            (dest / "manifest.json").write_text(json.dumps(manifest(prov, race, results, time.time() - t0), indent=1))
    race.smi.stop.set()
    print(table(results))
    return 0


def manifest(prov: dict, race: Race, results: list, wall_s: float) -> dict:
    return dict(provenance=prov, kind="race", kernel="lapis/gpu/kernels/attention_h200.cu",
                ptxas=race.ptxas, fa4_error=race.fa4_error, wall_s=wall_s, protocol="lapis.gpu.protocol",
                post_probe=dict(kernel="lapis/gpu/kernels/micro_launch_v1.cu", function="micro_cta_turnover",
                                ctas=race.sms, threads=POST_PROBE_THREADS, spin_ns=POST_PROBE_SPIN_NS),
                units=dict(median_us="µs, CUDA events per launch", spread_pct="100 IQR / median over every launch",
                           tflops="flops / median_us", flops="4 B H L^2 D, halved when causal",
                           speedup_to_reference="per round: the reference's round median / the kernel's, "
                                                "then median and IQR over the rounds",
                           rel_err="||out - ref|| / ||ref||, float64 reference of the first B x H slice",
                           clock="SM MHz: the kernel's own probe, else nvidia-smi samples during its batches",
                           post_mhz="SM MHz per round: the post-batch probe after the kernel's batch (median over "
                                    "CTAs of %clock64 cycles / %globaltimer ns x 1000)",
                           post_mhz_median="SM MHz: median of post_mhz over the rounds",
                           bracket_mhz="SM MHz per round: the bracket clock over the kernel's batch (median over "
                                       "SMs of %clock64 cycles / %globaltimer ns x 1000 from the first probe's end "
                                       "to the second's start)",
                           bracket_mhz_median="SM MHz: median of bracket_mhz over the rounds",
                           busy="per round: the batch's timed µs over the bracket's span (1: no idle gaps)"),
                results=results)


if __name__ == "__main__":
    sys.exit(main())
