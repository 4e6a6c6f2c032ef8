"""The report's Schedules text and the Kernels headings against the report's own data: the schedules said to be
measured are the ones a shipped capture timed (listed here from the capture manifests), every Measured heading
names its build."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CAP = ROOT / "lapis" / "data" / "captures"
# every h200 schedule of lapis's own kernels a shipped capture timed: the manifests' "schedule" fields (attention, gemm)
TIMED = {"h200-s1-serial", "h200-s2-ws-ring", "h200-s3-two-consumers", "h200-s4-pingpong", "h200-s5-intra-overlap",
         "h200-s6-exp2", "h200-s7-cond-rescale", "h200-s8-persistent", "h200-s9-tuned", "h200-gemm-ws"}
# the third-party kernels the race captures timed (their "kernels" names) and the schedules that mirror them
RACE_TIMED = {"flash": "h200-flash2", "cudnn": "h200-cudnn-fprop", "fa4": "h200-fa4-sm90"}


def _manifest_schedules() -> set:
    out = set()
    for kind in ("attention", "gemm"):
        for man in (CAP / kind).glob("*/manifest.json"):
            text = man.read_text()
            out |= set(re.findall(r'"schedule": "(h200-[\w-]+)"', text))
    return out


def _race_kernels() -> set:
    return {name for man in (CAP / "race").glob("*/manifest.json")
            for e in json.loads(man.read_text())["results"] for name in e.get("kernels", {})}


def test_the_timed_list_is_the_manifests():
    assert _manifest_schedules() == TIMED
    assert set(RACE_TIMED) <= _race_kernels()


def test_measured_schedules_include_the_race_captures_third_party_kernels():
    from lapis.report.schedules import measured_schedules
    assert measured_schedules() == TIMED | set(RACE_TIMED.values())


def test_schedules_text_names_the_measured_and_the_unmeasured_rows(report_run):
    out, numbers = report_run
    md = (out / "report.md").read_text()
    section = md[md.index("## Schedules"):md.index("## Calibration")]
    h200 = section[section.index("### h200"):section.index("### b200")]
    rows = re.findall(r"^\| `(h200-[\w-]+)` \|", h200, re.M) + re.findall(r"^`(h200-[\w-]+)` at ", h200, re.M)
    assert "h200-gemm-ws" in rows and "h200-s9-tuned" in rows
    assert set(numbers["schedules"]["measured"]) == TIMED | set(RACE_TIMED.values())
    assert "only s1-s3" not in section and "rows past s3" not in section
    sentence = next(line for line in section.splitlines() if "timed on the H200 by a capture" in line)
    timed = TIMED | set(RACE_TIMED.values())
    done, rest = [n for n in rows if n in timed], [n for n in rows if n not in timed]
    assert "h200-flash2" in done and "h200-cudnn-fprop" in done
    assert f"{len(done)} of these {len(rows)} schedules have been timed" in sentence
    timed_part, _, rest_part = sentence.partition("; not validated on hardware: ")
    assert set(re.findall(r"`(h200-[\w-]+)`", timed_part)) == set(done)
    assert set(re.findall(r"`(h200-[\w-]+)`", rest_part)) == set(rest)
    assert ("h200-fa2-sync" in rest) == ("`h200-fa2-sync`" in rest_part)


def test_every_measured_heading_names_its_build(report_run):
    out, numbers = report_run
    md = (out / "report.md").read_text()
    headings = [line for line in md.splitlines() if line.startswith("### Measured:")]
    builds = [re.search(r"the `(\w+)` build", h)[1] for h in headings]
    assert len(builds) == len(set(builds)) == len(headings)
    assert {"s6", "s6_emu8", "s6_emu4"} <= set(builds)
    assert "### Measured: the `s6_emu4` build (schedule `h200-s6-exp2`) at 8x16x4096x128, SM 0" in headings
    assert set(builds) == {r["variant"] for r in numbers["kernels"]}
    assert json.loads((out / "report.json").read_text())["schedules"]["measured"] == sorted(
        TIMED | set(RACE_TIMED.values()))


def test_cudnn_s_bar_is_the_newest_race_capture_that_timed_it_alone():
    """race/h200-2026-12-03-s26 (21:44 UTC) is the newest; its cuDNN medians at the FA4 shapes are 1840.4,
    3771.4 and 7476.7 µs for 1.0995e12, 2.199e12 and 4.398e12 FLOPs. The race and race-hd captures (output copy) are
    never read."""
    from lapis.report.schedules import FA4_SHAPES, _h200_measured, cudnn_measured
    got = cudnn_measured(CAP)
    assert got["capture"] == "race/h200-2026-12-03-s26" and got["date"].startswith("2026-12-03T21:44")
    assert {s: round(t) for s, t in got["tflops"].items()} == {
        "8x16x4096x128": 597, "4x16x8192x128": 583, "2x16x16384x128": 588}
    rows = {("h200", "h200-s9-tuned"): {s: dict(tflops=500.0) for s in FA4_SHAPES}}
    text = _h200_measured(rows, set(), got)[0]
    assert "cuDNN 583-597 TFLOP/s" in text and "race/h200-2026-12-03-s26" in text and "608" not in text
    assert "0.84x cuDNN's best" in text  # 500 / 596.8


def test_without_a_race_capture_timed_alone_there_is_no_cudnn_bar(tmp_path):
    import shutil
    from lapis.report.schedules import cudnn_measured
    (tmp_path / "race").mkdir()
    shutil.copytree(CAP / "race" / "h200-2026-12-01-race", tmp_path / "race" / "h200-2026-12-01-race")
    assert cudnn_measured(tmp_path) is None
