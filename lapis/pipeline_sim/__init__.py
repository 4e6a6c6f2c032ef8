"""The pipeline simulator: warp-specialized kernels as simpy processes, their barriers, costs and timelines.

The public API, what a user's schedule file imports (examples/ uses nothing else):
- Schedule (lapis.pipeline_sim.schedule): a kernel's roles, parameters, work order and cost model;
- Context (context): what a role sees on its SM (time, units, recorder, profile, costs, barriers);
- PipelineState, TmaPipeline / PipelineTmaAsync (pipeline): CUTLASS's TMA pipeline words;
- TmaEngine (tma): the SM's TMA copies; MBarrier (mbarrier); NamedBarrier (named_barrier);
- WgmmaGroups, CpAsyncGroups (commit_groups): wgmma / cp.async commit and wait groups;
Run one with `from lapis.pipeline_sim.simulate import simulate` (by name, `path/to/file.py:NAME` or as a Schedule).
Names load on first use, so importing one module of the package (recorder, on the GPU host) pulls in no simpy.
"""

import importlib

_WHERE = {"Schedule": "schedule", "register": "schedule", "lookup": "schedule", "Context": "context",
          "PipelineState": "pipeline", "TmaPipeline": "pipeline", "PipelineTmaAsync": "pipeline",
          "TmaEngine": "tma", "MBarrier": "mbarrier", "NamedBarrier": "named_barrier",
          "WgmmaGroups": "commit_groups", "CpAsyncGroups": "commit_groups"}
__all__ = sorted(_WHERE)


def __getattr__(name):
    if name in _WHERE:
        return getattr(importlib.import_module(f"lapis.pipeline_sim.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'lapis.pipeline_sim' has no attribute {name!r}")
