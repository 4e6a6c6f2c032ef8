"""Recompute every prediction the report shows into the committed cache (lapis/data/predictions.json.gz): the
schedule rows, the kernels' rows, the numerics' rescale frequencies, the GEMM comparisons, every timed case's predicted
time and timeline metrics (lapis.validate.timelines; the race captures' third-party kernels among them), and the
kernels of the ncu captures (lapis.report.third_party.unit_cases). About a minute or two.

    python -m lapis.report.refresh
"""

from lapis.pipeline_sim.predictions import COMMITTED, predict, save
from lapis.report.calibration import gemm_rows
from lapis.report.kernels import kernel_cases, rescale_rows
from lapis.report.schedules import report_cases
from lapis.report.third_party import unit_cases
from lapis.validate.timelines import validate_timelines


def refresh() -> int:
    """Rewrite the committed cache from scratch; returns how many entries it holds."""
    cache: dict = {}
    for case in report_cases() + kernel_cases() + unit_cases():
        predict(*case, cache=cache, resimulate=True)
    rescale_rows(cache=cache, resimulate=True)
    gemm_rows(cache=cache, resimulate=True)
    validate_timelines(cache=cache, resimulate=True, progress=True)
    return save(cache, COMMITTED)


if __name__ == "__main__":
    print(f"wrote {refresh()} predictions to {COMMITTED}")
