"""No number changes unnoticed: every cached prediction, every `validate layouts/mma/timelines` number and the
report's JSON equal the snapshot (tests/data/behaviour_snapshot; run times, `wall_s`, are left out). The
predictions and layouts/mma files were computed by the tree of commit 03446f1, before the package was
restructured; validate_timelines.json and report.json were computed again once the race captures (torch's FA2 and
cuDNN as validation cases) and the report's third-party section were added, and predictions.json,
validate_timelines.json and report.json again once the persistent schedules counted their Q slots and the steps past
s9 (s10..s13) and FA4's race cases were added. A commit that changes a number regenerates the file that holds it and
says why."""

import copy
import lzma
import json
from pathlib import Path

from lapis.data import PREDICTIONS
from lapis.pipeline_sim.predictions import load
from lapis.validate.layouts import validate_layouts
from lapis.validate.mma import validate_mma

SNAPSHOT = Path(__file__).parent / "data" / "behaviour_snapshot"


def without_run_times(obj):
    """The JSON as a comparable value: `wall_s` (seconds the run took) dropped, floats kept exact."""
    if isinstance(obj, dict):
        return {k: without_run_times(v) for k, v in obj.items() if k != "wall_s"}
    if isinstance(obj, list):
        return [without_run_times(v) for v in obj]
    return obj


def snapshot(name: str):
    """The snapshot file `name`.json.xz (xz keeps the tree's bytes down; write_snapshot writes it)."""
    return json.loads(lzma.decompress((SNAPSHOT / f"{name}.json.xz").read_bytes()))


def write_snapshot(name: str, value) -> None:
    """Regenerate `name`.json.xz: sorted keys, one key per line, xz preset 9e (the bytes follow the value)."""
    text = json.dumps(value, indent=0, sort_keys=True) + "\n"
    (SNAPSHOT / f"{name}.json.xz").write_bytes(lzma.compress(text.encode(), preset=9 | lzma.PRESET_EXTREME))


def as_json(value):
    """What the CLI's --json prints, read back: tuples become lists, as in the snapshot."""
    return json.loads(json.dumps(value))


def test_cached_predictions_equal_the_snapshot():
    """Keyed by (schedule, gpu, shape, params): the hashes in the committed keys change with the sources."""
    cache = load(PREDICTIONS)
    # the schedule entries; the rescale frequencies and timeline metrics cached beside them (not in the snapshot's
    # tree) are compared through the report's JSON below
    values = {json.dumps(json.loads(k)[:4]): v for k, v in cache.items()
              if json.loads(k)[0] not in ("rescale_frequency_of", "timeline_metrics", "compare_gemm")}
    want = snapshot("predictions")  # the cache also holds cases the snapshot's cache lacked: not compared here
    assert {k: values.get(k) for k in want} == want


def test_validate_layouts_and_mma_equal_the_snapshot():
    assert without_run_times(as_json(validate_layouts())) == snapshot("validate_layouts")
    assert without_run_times(as_json(validate_mma())) == snapshot("validate_mma")


def test_validate_timelines_equals_the_snapshot(report_run):
    """validate_timelines' table as `lapis report` computes it (lapis.report.validation: the same call with the
    report's folder for figures and no per-case charts), so the suite computes the table once: the report adds
    only chart file names, the figures and the largest miss's Gantt chart, dropped here."""
    _, numbers = report_run
    table = copy.deepcopy(numbers["validation"])
    assert table.pop("figures") == {"scatter": "validation_scatter.png", "progression": "validation_progression.png"}
    assert [row.pop("gantt") for row in table["per_case"] if "gantt" in row] != []
    assert without_run_times(table) == snapshot("validate_timelines")


def test_the_report_json_equals_the_snapshot(report_run):
    _, numbers = report_run
    assert without_run_times(numbers) == snapshot("report")
