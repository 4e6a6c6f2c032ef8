"""Checks of the models against captures: `lapis validate layouts|mma|timelines` and `lapis compare`.

- layouts.py: TMA placement and cuTensorMapEncodeTiled decisions.
- mma.py: wgmma reads through descriptors, the CUTLASS descriptor oracle and bank-conflict wavefronts.
- timelines.py: every timed kernel against the simulator (time, cycles, rank agreement, divergence).
- timeline_align.py, timeline_compare.py: matching predicted and measured timelines op by op.
- compare.py: one GEMM schedule against its capture.
- blind.py: predictions committed before the run that measures them.
"""
