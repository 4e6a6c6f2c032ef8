"""Re-simulate every schedule prediction the report shows into the committed cache (lapis/data/predictions.json).

    python -m lapis.report.refresh
"""

from lapis.pipeline_sim.predictions import COMMITTED, refresh
from lapis.report.kernels import kernel_cases
from lapis.report.schedules import report_cases

if __name__ == "__main__":
    print(f"wrote {refresh(report_cases() + kernel_cases())} predictions to {COMMITTED}")
