"""The Hopper attention kernel variants: one entry per kernel built from lapis/gpu/kernels/attention_h200.cu.

Each entry names the kernel's template parameters (entry point, block_m x block_n tile in elements, K/V ring
stages, consumer warpgroups, setmaxnreg budgets in registers per thread, softmax flavour) and the schedule that
mirrors it (lapis/pipeline_sim/schedules/attention_h200.py). lapis.gpu.bench_attention builds and times them,
lapis.validate.blind predicts them, lapis.sweep.runnable maps sweep rows onto them.
"""

from __future__ import annotations

# name -> the kernel's template parameters and its schedule (lapis/pipeline_sim/schedules/attention_h200.py)
VARIANTS = {
    "s1": dict(schedule="h200-s1-serial", entry="s1_serial", ws=False, block_m=64, block_n=128, stages=1,
               consumer_wgs=1),
    "s2": dict(schedule="h200-s2-ws-ring", entry="s2_ws_ring", ws=True, block_m=64, block_n=128, stages=2,
               consumer_wgs=1),
    "s3": dict(schedule="h200-s3-two-consumers", entry="s3_two_consumers", ws=True, block_m=128, block_n=128,
               stages=2, consumer_wgs=2, regs_producer=24, regs_consumer=240),
    "s4": dict(schedule="h200-s4-pingpong", entry="s4_pingpong", ws=True, pp=True, block_m=128, block_n=128,
               stages=2, consumer_wgs=2, regs_producer=24, regs_consumer=240),
    "s5": dict(schedule="h200-s5-intra-overlap", entry="s5_intra_overlap", ws=True, pp=True, overlap=True,
               block_m=128, block_n=128, stages=2, consumer_wgs=2, regs_producer=24, regs_consumer=240),
}
_S6 = dict(schedule="h200-s6-exp2", entry="s6_exp2", ws=True, pp=True, overlap=True, block_m=128, block_n=128,
           stages=2, consumer_wgs=2, regs_producer=24, regs_consumer=240, emulate_frac=0.0)
VARIANTS.update({
    "s6": _S6,  # emulate_frac: the kernel's EMU registers (1/8: i % 2 == 0 and (i / 4) % 4 == 0; 1/4: ... % 2)
    "s6_emu8": dict(_S6, entry="s6_exp2_emu8", emulate_frac=0.125),
    "s6_emu4": dict(_S6, entry="s6_exp2_emu4", emulate_frac=0.25),
    "s7": dict(_S6, schedule="h200-s7-cond-rescale", entry="s7_cond_rescale", threshold=8.0, counts_rescales=True),
})
# s8: s7 on a persistent grid (one CTA per SM, grid-stride work items, two Q slots)
# (setmaxnreg 40/232, s2's split: at 24 the producer's item loop spills; 40 x 128 + 232 x 256 = the 168 x 384 launch)
VARIANTS["s8"] = dict(VARIANTS["s7"], schedule="h200-s8-persistent", entry="s8_persistent", persistent=True,
                      regs_producer=40, regs_consumer=232)
# s9: s8 with the simulator's tuned defaults (schedule h200-s9-tuned: block_n 128, 3 stages, 2 consumer WGs); 3 stages
# leave room for one Q slot (the next item's Q loads once both warpgroups' last QK of this one completed)
VARIANTS["s9"] = dict(VARIANTS["s8"], schedule="h200-s9-tuned", entry="s9_tuned", stages=3, q_slots=1,
                      causal_entry="s9_tuned_causal")  # --causal: Q tile t visits K/V tiles 0..t, heaviest first
# Diagnostic builds (never a table row; their captures go under lapis/data/captures/diagnostic): s5 with the loads
# dropped past the ring's first fill (the producer still takes and frees every slot), so its output is not
# attention and its correctness is not counted; its time is s5's compute structure alone.
VARIANTS["s5_noload"] = dict(VARIANTS["s5"], entry="s5_noload", diagnostic="no K/V loads past the first fill")
SIM_PARAMS = ("block_m", "block_n", "stages", "consumer_wgs", "regs_producer", "regs_consumer", "emulate_frac",
              "threshold")
DEFAULT_SHAPES = ("8x16x4096x128", "4x16x8192x128", "2x16x16384x128", "16x16x2048x128", "32x16x1024x128")
SMALL_SHAPE = "1x2x512x128"


def kernel_name(v: dict, causal: bool = False) -> str:
    return f"attn_{v['causal_entry'] if causal else v['entry']}_s{v['stages']}_n{v['block_n']}_c{v['consumer_wgs']}"


def sim_params(v: dict, causal: bool = False) -> dict:
    """The simulator parameters the kernel fixes (setmaxnreg budgets only where the kernel sets them: s3+); the
    causal build adds causal = 1 and its work order (heaviest Q tiles first, dealt grid-stride)."""
    out = {k: v[k] for k in SIM_PARAMS if k in v}
    return dict(out, causal=1, persistent_order="heavy_first") if causal else out
