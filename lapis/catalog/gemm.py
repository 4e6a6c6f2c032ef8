"""The warp-specialized GEMM kernel variants built from lapis/gpu/kernels/gemm_ws.cu.

Each entry is the schedule h200-gemm-ws's parameters (lapis/pipeline_sim/schedules/gemm_ws.py): the
block_m x block_n x block_k tile in elements, the A/B ring stages and the consumer warpgroups.
"""

from __future__ import annotations

# name -> simulator params (lapis/pipeline_sim/schedules/gemm_ws.py, schedule h200-gemm-ws)
VARIANTS = {
    "ws_s4_c2_n128": dict(block_m=128, block_n=128, block_k=64, stages=4, consumer_wgs=2),
    "ws_s3_c2_n128": dict(block_m=128, block_n=128, block_k=64, stages=3, consumer_wgs=2),
    "ws_s4_c1_n128": dict(block_m=128, block_n=128, block_k=64, stages=4, consumer_wgs=1),
    "ws_s4_c2_n256": dict(block_m=128, block_n=256, block_k=64, stages=4, consumer_wgs=2),  # opt-in
}
DEFAULT_VARIANTS = ("ws_s4_c2_n128", "ws_s3_c2_n128", "ws_s4_c1_n128")
DEFAULT_SIZES = (2048, 4096, 8192)


def kernel_name(v: dict, out: str = "bf16") -> str:
    return f"gemm_ws_s{v['stages']}_c{v['consumer_wgs']}_n{v['block_n']}_{out}"
