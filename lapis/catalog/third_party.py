"""Attention kernels lapis did not write, which the simulator predicts blind: one entry per kernel, never built here.

lapis.gpu.race times them beside lapis's own (torch SDPA's flash and cuDNN backends, FA4's CuTe-DSL sm90 forward);
this table is apart from lapis.catalog.attention, which drives the builds of lapis's kernels. An entry names:
- kernel: the kernel as its launcher names it, and source: where its structure was read;
- timed: the name lapis.gpu.race and lapis.gpu.ncu_units give it (None: held out, never timed here; FA4 is timed
  by the race only);
- instruction: the tensor instruction it issues (wgmma or mma.sync), for the per-unit comparison;
- views (optional): the names under which the race and ncu_units also run it on inputs of another memory layout
  (fa4_bhsd: FA4 on B x H x L x D views where fa4 reads its own B x L x H x D copy); validate units costs them with
  the kernel's schedule, validate timelines takes no case from them;
- seen: the (shape, causal) configurations measured before its blind predictions were committed (torch's FA2
  and cuDNN at the FA4 shapes, head dim 128, non-causal: runs on the H200 on 2026-12-01), never counted blind;
- schedule: the simulator schedule that mirrors it (lapis/pipeline_sim/schedules/);
- blind: the blind-prediction set (lapis/data/blind/<blind>.json, written by lapis.validate.blind);
- cases: (shape BxHxLxD, causal, params) per prediction, params the tile geometry the kernel takes at that head
  dim (its launcher's choice, read from its source) and, causal, causal = 1.
"""

from __future__ import annotations

FA4_SHAPES = ("8x16x4096", "4x16x8192", "2x16x16384")  # B x H x L, D appended
SHORT_SHAPES = ("16x16x2048", "32x16x1024")
ALL_SHAPES = FA4_SHAPES + SHORT_SHAPES

# FlashAttention-2 (csrc/flash_attn/src/flash_fwd_launch_template.h run_mha_fwd_hdim64/128/256 on sm90):
# head dim -> Flash_fwd_kernel_traits<D, kBlockM, kBlockN, kNWarps>
_FA2 = {64: dict(block_m=128, block_n=128, warps=4), 128: dict(block_m=128, block_n=64, warps=4),
        256: dict(block_m=64, block_n=64, warps=4)}


def _fa2_cases() -> tuple:
    causal = [(f"{s}x128", True, dict(_FA2[128], causal=1)) for s in ALL_SHAPES]
    short = [(f"{s}x128", False, dict(_FA2[128])) for s in SHORT_SHAPES]
    dims = [(f"{s}x{d}", False, dict(_FA2[d])) for d in (64, 256) for s in FA4_SHAPES]
    return tuple(causal + short + dims)


# FA4's CuTe-DSL sm90 forward (flash_attn/cute/interface.py _tile_size_fwd_sm90; flash_fwd_sm90.py
# FlashAttentionForwardSm90: num_stages 2, tile_m / 64 consumer warpgroups, setmaxnreg {2: (240, 24), 3: (160, 32)})
_FA4 = {64: dict(block_m=192, block_n=128, stages=2, consumer_wgs=3, regs_producer=32, regs_consumer=160),
        128: dict(block_m=128, block_n=128, stages=2, consumer_wgs=2, regs_producer=24, regs_consumer=240),
        256: dict(block_m=128, block_n=80, stages=2, consumer_wgs=2, regs_producer=24, regs_consumer=240)}


def _fa4_cases() -> tuple:
    d128 = [(f"{s}x128", causal, dict(_FA4[128], **(dict(causal=1) if causal else {})))
            for causal in (False, True) for s in ALL_SHAPES]
    dims = [(f"{s}x{d}", False, dict(_FA4[d])) for d in (64, 256) for s in FA4_SHAPES]
    return tuple(d128 + dims)


# cuDNN's sm90 flash fprop: block_n and D from its name, 3 warpgroups / persistent grid / 168 registers / 232448 B
# of shared memory from its launch (Nsight Compute); 2 consumer warpgroups of 64 rows and 3 stages derived from them
_CUDNN = dict(block_m=128, block_n=128, stages=3, consumer_wgs=2, regs_producer=24, regs_consumer=240)


def _cudnn_cases() -> tuple:
    return tuple((f"{s}x128", causal, dict(_CUDNN, **(dict(causal=1) if causal else {})))
                 for causal in (False, True) for s in ALL_SHAPES)


KERNELS = {
    "flash2": dict(kernel="flash_fwd_kernel<Flash_fwd_kernel_traits<D, kBlockM, kBlockN, 4>> (torch SDPA flash)",
                   source="Dao-AILab/flash-attention csrc/flash_attn/src (flash_fwd_kernel.h, kernel_traits.h, "
                          "softmax.h, flash_fwd_launch_template.h)",
                   schedule="h200-flash2", blind="flash2_h200", cases=_fa2_cases(), timed="flash",
                   instruction="mma.sync", seen=tuple((f"{s}x128", False) for s in FA4_SHAPES)),
    "fa4_sm90": dict(kernel="FlashAttentionForwardSm90 (flash-attn-4 CuTe DSL, flash_attn.cute.flash_attn_func)",
                     source="Dao-AILab/flash-attention flash_attn/cute (interface.py, flash_fwd_sm90.py, "
                            "tile_scheduler.py)",
                     schedule="h200-fa4-sm90", blind="fa4_sm90_h200", cases=_fa4_cases(), timed="fa4",
                     instruction="wgmma", seen=(), views=("fa4_bhsd",)),
    "cudnn_fprop": dict(kernel="cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_"
                               "cga1x1x1_kernel0_0 (torch SDPA cuDNN)",
                        source="its name, launch configuration and Nsight Compute counters (no code, no SASS)",
                        schedule="h200-cudnn-fprop", blind="cudnn_h200", cases=_cudnn_cases(), timed="cudnn",
                        instruction="wgmma", seen=tuple((f"{s}x128", False) for s in FA4_SHAPES)),
}


# Race captures whose third-party launches also copied the kernel's output into a shared buffer (about 67 µs at
# 8x16x4096x128, 3-7% of the kernel): lapis.gpu.race before it timed the kernels alone. Their third-party rows
# are no measurement of the kernel and are never read as one; lapis's own rows in them are kept.
OUTPUT_COPY_RACES = frozenset({"h200-2026-12-01-race", "h200-2026-12-01-race-hd"})


def timed_alone(race_capture: str) -> bool:
    """Whether race capture `race_capture` (its folder name) timed the third-party kernels alone."""
    return race_capture not in OUTPUT_COPY_RACES


def set_names() -> tuple[str, ...]:
    """The blind sets the table names, in table order."""
    return tuple(dict.fromkeys(k["blind"] for k in KERNELS.values()))


def cases(name: str) -> list[dict]:
    """The blind cases of set `name`, in the format of lapis.validate.blind.cases (variant, causal where true,
    schedule, gpu, shape, params)."""
    return [dict(variant=v, **(dict(causal=True) if causal else {}), schedule=k["schedule"], gpu="h200",
                 shape=shape, params=dict(params))
            for v, k in KERNELS.items() if k["blind"] == name for shape, causal, params in k["cases"]]


def by_timed_name(name: str) -> tuple[str, dict] | None:
    """(variant, entry) of the kernel lapis.gpu.race / ncu_units call `name` (flash, cudnn), or None."""
    return next(((v, k) for v, k in KERNELS.items() if k["timed"] == name), None)


def by_view_name(name: str) -> tuple[str, dict] | None:
    """(variant, entry) of the kernel that lapis.gpu.race / ncu_units run on inputs of another memory layout under
    `name` (an entry's views: fa4_bhsd, FA4's sm90 forward on B x H x L x D inputs), or None. Such rows measure the
    layout's effect; validate timelines does not take them as the kernel's cases."""
    return next(((v, k) for v, k in KERNELS.items() if name in k.get("views", ())), None)
