"""The warp-specialized GEMM kernel variants: one entry per variant of lapis/gpu/kernels/gemm_ws.cu, the one place
a variant is defined.

An entry names:
- entry: the kernels' entry-point stem; a variant has one entry point per output type,
  <entry>_s<stages>_c<consumer_wgs>_n<block_n>_<out> (kernel_name);
- every template parameter of gemm_ws<STAGES, CONSUMERS, BN, OutT>, in lower case (TEMPLATE): stages (A/B ring
  slots), consumer_wgs (consumer warpgroups), block_n (the tile's N in elements), and outputs: the output types it is
  built for (OUTPUTS names each one's C type);
- schedule: the simulator schedule that mirrors it (lapis/pipeline_sim/schedules/gemm_ws.py), and sim: the simulator
  parameters beyond the template (block_m x block_k, the plan's tile: gemm_ws_plan.h); sim_params adds block_n,
  stages and consumer_wgs;
- blind: the blind-prediction set that predicts it (lapis/data/blind/<blind>.json, at the sizes BLIND_SIZES gives
  the set, else DEFAULT_SIZES; None: none);
- sweep: the schedules whose sweep rows may run on it (empty: none; lapis.sweep.runnable maps attention rows only);
- diagnostic: None, or why it is never a table row nor a default of the bench.

`python -m lapis.catalog.generate` writes the kernel's instantiation list from this table
(lapis/gpu/kernels/gemm_ws_variants.inc: every variant's bf16 entry point in table order, then the f32 ones);
lapis.gpu.bench_gemm builds and times the variants, lapis.validate.blind predicts them.
"""

from __future__ import annotations

TEMPLATE = ("stages", "consumer_wgs", "block_n")  # gemm_ws<STAGES, CONSUMERS, BN, OutT>
OUTPUTS = {"bf16": "__nv_bfloat16", "f32": "float"}  # output type -> OutT, in instantiation order

_PLAN_TILE = dict(block_m=128, block_k=64)  # gemm_ws_plan.h BLOCK_M, BLOCK_K

VARIANTS = {
    "ws_s4_c2_n128": dict(entry="gemm_ws", stages=4, consumer_wgs=2, block_n=128, outputs=("bf16", "f32"),
                          schedule="h200-gemm-ws", sim=dict(_PLAN_TILE), blind="gemm_ws", sweep=(), diagnostic=None),
    "ws_s3_c2_n128": dict(entry="gemm_ws", stages=3, consumer_wgs=2, block_n=128, outputs=("bf16",),
                          schedule="h200-gemm-ws", sim=dict(_PLAN_TILE), blind="gemm_ws", sweep=(), diagnostic=None),
    "ws_s4_c1_n128": dict(entry="gemm_ws", stages=4, consumer_wgs=1, block_n=128, outputs=("bf16",),
                          schedule="h200-gemm-ws", sim=dict(_PLAN_TILE), blind="gemm_ws", sweep=(), diagnostic=None),
    "ws_s4_c2_n256": dict(entry="gemm_ws", stages=4, consumer_wgs=2, block_n=256, outputs=("bf16",),  # opt-in
                          schedule="h200-gemm-ws", sim=dict(_PLAN_TILE), blind="gemm_ws_n256", sweep=(),
                          diagnostic=None),
}
DEFAULT_VARIANTS = ("ws_s4_c2_n128", "ws_s3_c2_n128", "ws_s4_c1_n128")
DEFAULT_SIZES = (2048, 4096, 8192)
BLIND_SIZES = {"gemm_ws_n256": (4096, 8192)}  # sets predicted at other cube sizes than DEFAULT_SIZES


def kernel_name(v: dict, out: str = "bf16") -> str:
    """The entry point of the variant's `out` build."""
    return f"{v['entry']}_s{v['stages']}_c{v['consumer_wgs']}_n{v['block_n']}_{out}"


def sim_params(v: dict) -> dict:
    """The parameters of the variant's schedule (h200-gemm-ws): block_m, block_k, block_n, stages, consumer_wgs."""
    return dict(v["sim"], block_n=v["block_n"], stages=v["stages"], consumer_wgs=v["consumer_wgs"])
