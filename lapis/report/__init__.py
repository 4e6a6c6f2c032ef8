"""`lapis report`: the main job, one module per section of report.md.

- build.py: runs every section and writes report.md, report.json and the figures; holds the layout sections
  (TMA placement, encode decisions, wgmma reads, bank conflicts).
- calibration.py, kernels.py, schedules.py, validation.py: the simulator's sections.
- refresh.py: re-simulates the committed prediction cache the simulator's sections read.
"""


def yes_no(flag: bool | None, none: str = "-") -> str:
    """A flag as the report prints it: "yes" or "no", and `none` where there is no value."""
    return none if flag is None else ("yes" if flag else "no")
