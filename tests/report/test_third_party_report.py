"""The report's "Kernels no one here wrote" section against the shipped captures: the race captures' FA2 and cuDNN
rows, the ncu per-unit table, and FA4's sm90 forward, predicted blind and measured in the races."""

import re

import pytest

from lapis.report.third_party import held_out_rows, kernel_summary, third_party_section, unit_cases

RACE = "race/h200-2026-12-03-bracket"  # the last race that timed FA2 (2026-12-03 15:37 UTC)
LAST = "race/h200-2026-12-03-s26"  # the last that timed FA4
LAST_CUDNN = "race/h200-2026-12-03-s26"  # the last that timed cuDNN too


@pytest.fixture(scope="module")
def section():
    """(markdown, numbers) of the section, validating its own cases (from the prediction cache)."""
    md, numbers = third_party_section()
    return md, numbers["third_party"]


def _table(md: str, heading_start: str) -> list[list[str]]:
    """The cells of the first table after the heading that starts with `heading_start`."""
    part = md[md.index(heading_start):]
    part = part[:part.index("\n### ", 1)] if "\n### " in part[1:] else part
    return [[c.strip() for c in line.strip("|").split("|")] for line in part.splitlines()
            if line.startswith("| ") and not line.startswith("| shape") and not line.startswith("| kernel")]


def test_kernel_summary_by_hand():
    rows = [dict(err_pct=-10.0, cycles_err_pct=-20.0, blind=False), dict(err_pct=30.0, cycles_err_pct=None, blind=True),
            dict(err_pct=None, blind=False)]
    s = kernel_summary(rows)
    assert s == dict(cases=3, scored=2, blind_cases=1, mape_pct=20.0, max_abs_err_pct=30.0, mape_cycles_pct=20.0,
                     max_abs_cycles_err_pct=20.0, mape_pct_blind=30.0)


def test_fa4_rows_are_the_blind_file_and_not_measured():
    rows = held_out_rows("fa4_sm90")
    assert len(rows) == 16 and {r["measured"] for r in rows} == {"not measured here"}
    assert rows[0] == dict(shape="8x16x4096x128", causal=False, predicted_us=1688.876, tflops=651.0,
                           bound_by="softmax", date="2026-12-01", measured="not measured here")
    assert sum(r["causal"] for r in rows) == 5


def test_unit_cases_are_the_ncu_kernels_schedules():
    cases = unit_cases()
    # ncu/h200-2026-12-01-steps (s12, s13, cuDNN, FA4), then ncu/h200-2026-12-01-units, then
    # ncu/h200-2026-12-02-layout (s21, FA4, FA4 on B x H x L x D views, cuDNN), -s14 (s13, s14), -s15 (s14, s15),
    # -s16 (s15, s16), -s17 (s16, s17), -s18 (s17, s18), -s19 (s18, s19), -s20 (s19, s20), -s21 (s20, s21),
    # ncu/h200-2026-12-02-source (s1, s2, s14, FA4), ncu/h200-2026-12-03-s23 (s22, s23), -s24 (s24), -s25 (s25),
    # -s26 (s25, s26, FA4)
    assert [c[0] for c in cases] == ["h200-s9-tuned", "h200-s9-tuned", "h200-cudnn-fprop", "h200-fa4-sm90",
                                     "h200-s3-two-consumers", "h200-s5-intra-overlap", "h200-s9-tuned",
                                     "h200-s9-tuned", "h200-gemm-ws", "h200-flash2", "h200-cudnn-fprop",
                                     "h200-s9-tuned", "h200-fa4-sm90", "h200-fa4-sm90", "h200-cudnn-fprop",
                                     *["h200-s9-tuned"] * 16,
                                     "h200-s1-serial", "h200-s2-ws-ring", "h200-s9-tuned", "h200-fa4-sm90",
                                     "h200-s9-tuned", "h200-s9-tuned", "h200-s9-tuned", "h200-s9-tuned",
                                     "h200-s9-tuned", "h200-s9-tuned", "h200-fa4-sm90"]
    # s23..s26 run their turns across items, each with its own compiled loop; s26 deals its split tail
    assert [(c[3]["kernel_loop"], c[3]["cross_item"]) for c in cases[-6:-1]] == [
        ("s23", 1), ("s24", 1), ("s25", 1), ("s25", 1), ("s26", 1)]
    assert [c[3]["persistent_order"] for c in cases[-3:-1]] == ["lpt_l2", "split_tail"]
    assert (cases[11][3]["kernel_loop"], cases[16][3]["kernel_loop"]) == ("s21", "s14")
    # s15 runs its kernel's turn order: the late V wait with its own compiled loop
    assert (cases[18][3]["kernel_loop"], cases[18][3]["late_v"]) == ("s15", 1)
    # s16..s18 with their own loops, their softmax sides costed with two softmax warps per SMSP (the default)
    assert [(c[3]["kernel_loop"], c[3].get("side_warps")) for c in cases[20:25:2]] == [("s16", None), ("s17", None),
                                                                                      ("s18", None)]
    assert cases[9] == ("h200-flash2", "h200", "8x16x4096x128", dict(block_m=128, block_n=64, warps=4))
    assert cases[7][3]["causal"] == 1


def test_fa2_rows_from_the_race_capture(section):
    md, numbers = section
    assert "### `flash2`: flash_fwd_kernel<" in md and "schedule `h200-flash2`" in md
    rows = _table(md, "### `flash2`")
    assert len(rows) == 16
    row = next(r for r in rows if r[0] == "8x16x4096x128" and r[1] == "no")
    assert row[3] == "3292.1" and row[7] == "no" and row[8] == f"`{RACE}`"
    # the bracket clock: the SM's mean clock over its batch, between two probes on its stream
    assert row[6] == "1656 (bracket probe)"
    assert all(r[7] == "yes" for r in rows if r[1] == "yes") and sum(r[1] == "yes" for r in rows) == 5
    # the FA4 shapes, head dim 128, non-causal, were seen before the blind predictions: never blind
    assert [r[0] for r in rows if r[1] == "no" and r[7] == "no"] == ["8x16x4096x128", "4x16x8192x128",
                                                                      "2x16x16384x128"]
    fa2 = numbers["flash2"]
    assert fa2["schedule"] == "h200-flash2" and fa2["cases"] == 16 and fa2["blind_cases"] == 13
    assert fa2["source"].startswith("Dao-AILab/flash-attention csrc/flash_attn/src")


def test_headline_numbers_are_the_tables(section):
    md, numbers = section
    for variant in ("flash2", "cudnn_fprop"):
        rows = [r for r in _table(md, f"### `{variant}`") if r[4] != "-"]
        errs = [abs(float(r[4].rstrip("%"))) for r in rows]
        cyc = [abs(float(r[5].rstrip("%"))) for r in rows if r[5] != "-"]
        assert numbers[variant]["mape_pct"] == pytest.approx(sum(errs) / len(errs), abs=0.06)
        assert numbers[variant]["mape_cycles_pct"] == pytest.approx(sum(cyc) / len(cyc), abs=0.06)
        assert f"mean |error| {numbers[variant]['mape_pct']:.1f}% in time" in md


def test_cudnn_rows_and_the_cases_its_schedule_cannot_run(section):
    md, numbers = section
    assert "### `cudnn_fprop`: cudnn_generated_fort_native_sdpa_sm90_flash_fprop" in md
    rows = _table(md, "### `cudnn_fprop`")
    row = next(r for r in rows if r[0] == "8x16x4096x128" and r[1] == "no")
    assert row[3] == "1840.4" and row[7] == "no" and row[8] == f"`{LAST_CUDNN}`"
    # head dim 256: its three stages of K+V do not fit shared memory; listed, with the reason, never scored
    assert [r[2] for r in rows if r[0].endswith("x256")] == ["-", "-", "-"]
    assert "does not fit shared memory" in md[md.index("### `cudnn_fprop`"):]
    assert numbers["cudnn_fprop"]["cases"] == 16 and numbers["cudnn_fprop"]["scored"] == 13
    assert "16 cases (13 predicted, 7 blind)" in md
    assert "its name, launch configuration and Nsight Compute counters" in numbers["cudnn_fprop"]["source"]


def test_fa4_rows_are_blind_and_measured_in_the_race(section):
    md, numbers = section
    heading = "### `fa4_sm90`: FlashAttentionForwardSm90"
    assert heading in md and "schedule `h200-fa4-sm90`" in md and "not measured here" not in md
    rows = _table(md, heading)
    assert len(rows) == 16 and {r[7] for r in rows} == {"yes"}  # every case predicted before its first timing
    row = next(r for r in rows if r[0] == "8x16x4096x128" and r[1] == "no")
    # predicted (the prediction cache: FA4 costed from its own loop's SASS) and measured µs of the race
    assert row[2:4] == ["1718.8", "1687.4"] and row[8] == f"`{LAST}`"
    assert numbers["fa4_sm90"]["cases"] == numbers["fa4_sm90"]["blind_cases"] == 16


def test_units_table(section):
    md, numbers = section
    rows = _table(md, "### Per unit against Nsight Compute")
    assert [r[0] for r in rows] == ["`s12`", "`s13`", "`cudnn`", "`fa4`", "`s3`", "`s5`", "`s9`", "`s9:causal`",
                                    "`gemm`", "`flash`", "`s21`", "`fa4_bhsd`", "`s14`", "`s15`", "`s16`", "`s17`",
                                    "`s18`", "`s19`", "`s20`", "`s1`", "`s2`", "`s22`", "`s23`", "`s24`",
                                    "`s25`", "`s26`"]
    assert next(r for r in rows if r[0] == "`flash`")[1] == "`h200-flash2`"
    assert all(re.fullmatch(r"[+-]\d+\.\d pt", r[4]) for r in rows)
    u = numbers["units"]
    assert {k["kernel"] for k in u["kernels"]} == {"s3", "s5", "s9", "s9:causal", "gemm", "flash", "cudnn", "s12",
                                                   "s13", "fa4", "s14", "s15", "s16", "s17", "s18", "s19", "s20",
                                                   "s1", "s2", "s21", "fa4_bhsd", "s22", "s23", "s24", "s25",
                                                   "s26"}
    assert set(u["largest_miss"]) == {"time_us", "sm_cycles", "tensor_active_pct", "dram_mb"}
    dram = _table(md, "### DRAM bytes predicted before their capture")
    # diagnostic/h200-2026-12-03-l2-1024: s9's causal heavy_first, 1449.2 MB measured against 1433.1 predicted blind
    assert dram[0] == ["`s9:causal`", "32x16x1024x128", "1449.2", "1433.1", "-1.1%", dram[0][5], dram[0][6]]
    assert [r[2] for r in dram if r[0] == "`fa4:causal`"] == ["not measured", "not measured"]
    assert len(dram) == len(u["l2_reuse"]) == 9
    for unit, w in u["largest_miss"].items():
        assert f"{unit} `{w['kernel']}`" in md
        if unit in ("sm_cycles", "tensor_active_pct", "dram_mb"):
            assert abs(w["error"]) == max(abs(k["errors"][unit]) for k in u["kernels"])


def test_report_has_the_section_and_its_numbers(report_run):
    out, numbers = report_run
    md = (out / "report.md").read_text()
    assert "## Kernels no one here wrote" in md and "### `fa4_sm90`" in md
    tp = numbers["third_party"]
    assert tp["flash2"]["cases"] == 16 and tp["cudnn_fprop"]["cases"] == 16
    assert tp["flash2"]["mape_cycles_pct"] > 0 and tp["cudnn_fprop"]["mape_cycles_pct"] > 0
    assert tp["fa4_sm90"]["cases"] == tp["fa4_sm90"]["blind_cases"] == 16
