"""`h200-cudnn-fprop`: cuDNN's Hopper flash-attention forward kernel (torch SDPA's cuDNN backend) on the H200, from
public facts only: its name, its launch configuration and Nsight Compute counters. cuDNN is closed; nothing here
comes from its code or its SASS (none was made or read).

Facts and where they come from:
- the kernel's name, cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_
  kernel0_0 (torch.profiler in the attention captures, lapis/data/captures/attention/*/manifest.json): sm90, wgmma,
  16-bit inputs, a 64 x 128 x 128 tile, cluster (cga) 1 x 1 x 1. Read here as wgmma M 64 per consumer warpgroup,
  block_n 128 keys per K/V tile, head dim 128 (assumed: the name does not say which number is which; these are the
  three a 64-row wgmma over 128 keys at D 128 has). "4x1x1" is not interpreted (assumed: it does not change the
  schedule).
- its launch (Nsight Compute 2025.3 on the H200, capture of 2026-12-01 at 8x16x4096x128: block 384, grid
  (132, 1, 1), launch__registers_per_thread 168, launch__shared_mem_per_block_dynamic 232448 B, one CTA per SM by
  registers and shared memory): a persistent grid of one CTA per SM, three warpgroups, taken as one producer and
  two consumer warpgroups (assumed; 168 is the mean of the setmaxnreg split 24 / 240 / 240,
  lapis.pipeline_sim.setmaxnreg's split for two consumers), so block_m = 128 rows per work item; 232448 B holds
  the 32 KiB Q tile and 3 K+V stages of 64 KiB (224 KiB; 4 stages would not fit): stages = 3 (derived).
- its counters (same capture): sm__inst_executed_pipe_xu 69.3M, equal to lapis's s9 (ex2.approx per score: the
  ex2 flavour, assumed); pipe_fma 288M, between s9's 170M (conditional rescale) and s5's 411M (exp2f): taken as an
  unconditional O rescale every tile (assumed).
Structure reused: with these facts (and assumptions) the kernel is lapis's s9 structure without the conditional
rescale: attention_h200.py's producer with K/V TMA rings, two consumer warpgroups taking GEMM turns (ping-pong),
intra-warpgroup overlap, ex2 softmax, a persistent grid walking work units in a static order. The roles, the cost
model (AttentionCosts: the ex2 flavour's microbenchmark loop from its SASS, lapis.model.contend; no SASS of cuDNN's
is costed, and its counters above are not read by the model) and the residency are attention_h200's, run with
CONFIG and FLAGS. Assumed also: FA3-style ping-pong and intra-warpgroup overlap (not visible in a name or a
counter), and that the kernel keeps 3 stages at every shape.
The causal work order is `dynamic` (work units in (head, Q tile) order, each to the SM that frees first;
work_order.py), identified from measurements, not blind. Nsight Compute's DRAM bytes of the causal kernel are the
compulsory traffic, 527.6 MB at 32x16x1024 and 529.8 MB at 8x16x4096 x 128 (diagnostic/h200-2026-12-03-l2-cudnn-1024
and -4096; Q, K, V and O once: 536.9 MB), which an order that walks the Q tiles of a few heads at a time gives in
the L2 model (lapis.pipeline_sim.l2_reuse: dynamic 536.9 MB at both) and the static grid stride does not (1053.0
and 1296.8 MB: its SMs drift apart across heads). The blind DRAM prediction under grid_stride (900.1 and 555.5 MB
then, lapis/data/blind/ncu/l2_reuse.json) was the one that told. The measured causal over non-causal time (race
captures, the same run) at 8x16x4096, 4x16x8192, 2x16x16384, 16x16x2048 and 32x16x1024 x 128 is 0.585, 0.545,
0.520, 0.634 and 0.685; dynamic's predicted ratio 0.536, 0.522, 0.511, 0.576 and 0.621, grid_stride's 0.582, 0.542,
0.523, 0.659 and 0.811: the causal kernel costs more per K/V tile than the model gives it (not identified).
"""

from __future__ import annotations

from functools import partial

from lapis.errors import ScheduleError
from lapis.pipeline_sim.schedule import Schedule
from lapis.pipeline_sim.schedules import attention_h200 as ah

__all__ = ["CONFIG", "CUDNN_FPROP", "FLAGS", "SCHEDULES"]

CONFIG = dict(block_m=128, block_n=128, stages=3, consumer_wgs=2, regs_producer=24, regs_consumer=240, q_slots=1)
FLAGS = dict(ws=True, pingpong=True, overlap=True, exp2=True, persistent=True)
_RESOLVE_AS = "h200-s8-persistent"  # the table's persistent variant: the same checks and residency (1 CTA per SM)
DEFAULTS = dict(ah.DEFAULTS, **CONFIG)


def resolve(p, dims: tuple, params: dict) -> tuple[dict, dict]:
    """CONFIG, then the caller's parameters; causal work in dynamic order unless the caller names one."""
    if params.get("cross_item", 0) != 0:
        raise ScheduleError("cuDNN's schedule keeps its kernel's structure: its GEMM turns do not cross work items "
                            "(nothing public says they do)", f"h200-cudnn-fprop: cross_item {params['cross_item']!r}",
                            "drop cross_item, or run h200-s9-tuned with it")
    order = dict(persistent_order="dynamic") if params.get("causal") else {}
    return ah.resolve_run(_RESOLVE_AS, p, dims, {**CONFIG, **order, **params})


CUDNN_FPROP = Schedule(
    name="h200-cudnn-fprop", description="cuDNN sm90 flash fprop (from its name, launch and counters): persistent, "
    "producer + 2 consumer WGs, 3 stages, ping-pong, intra-WG overlap, ex2", shape="attention", defaults=DEFAULTS,
    flags=FLAGS, resolve=resolve, work=partial(ah.deal, False), costs=ah.AttentionCosts.of, launch=ah.launch,
    flops=ah.flops, summary=ah.summary, busy=("tensor", "softmax", "tma"), work_cost=ah._kv_total, races="slot",
    tuple_units=True)
SCHEDULES = (CUDNN_FPROP,)
