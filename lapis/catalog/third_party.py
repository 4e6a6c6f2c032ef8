"""Kernels no one here wrote, as lapis times and simulates them: the name a timing run (lapis.gpu.race) or an
Nsight Compute capture (lapis.gpu.ncu_units) gives each, the schedule that models it, the tensor instruction it
issues and the module that says where each structural fact of the schedule came from.

- flash: torch SDPA's flash backend, FlashAttention-2 (pytorch_flash::flash_fwd_kernel, mma.sync).
- cudnn: torch SDPA's cuDNN backend (sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1 at head dim 128, wgmma).
- fa4: FA4's CuTe-DSL sm90 forward (flash-attn-4 4.0.0b36, wgmma); predicted blind, never timed here.
"""

KERNELS = {
    "flash": dict(schedule="h200-flash2", instruction="mma.sync", source="lapis/pipeline_sim/schedules/fa2_flash.py"),
    "cudnn": dict(schedule="h200-cudnn-fprop", instruction="wgmma",
                  source="lapis/pipeline_sim/schedules/cudnn_fprop.py"),
    "fa4": dict(schedule="h200-fa4-sm90", instruction="wgmma", source="lapis/pipeline_sim/schedules/fa4_sm90.py"),
}
TIMED = ("flash", "cudnn")  # fa4's configurations are held out: its predictions stay blind
