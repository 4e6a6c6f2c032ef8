"""`lapis report`: the main job, one module per section of report.md.

- build.py: runs every section and writes report.md, report.json and the figures.
- layouts.py: TMA placement, encode decisions and wgmma reads.
- calibration.py, kernels.py, schedules.py, validation.py: the simulator's sections.
"""
