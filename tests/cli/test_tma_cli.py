"""`lapis tma check|place`, `lapis validate layouts` and `lapis report` from the command line."""

import json

import numpy as np

from lapis.cli import main
from lapis.layouts.canonical import CanonicalLayout
from lapis.layouts.tma import TensorMap, load_box, wide_tile_boxes

BAD = ["--dtype", "bf16", "--dims", "128,64", "--strides", "250", "--box", "72,8", "--swizzle", "128B"]
GOOD = ["--dtype", "bf16", "--dims", "128,64", "--strides", "256", "--box", "64,8", "--swizzle", "128B"]


def test_check_lists_every_broken_rule_and_exits_1(capsys):
    """A map the driver would reject is a check that found a problem (exit 1), not malformed input (exit 2)."""
    assert main(["tma", "check", *BAD, "--json"]) == 1
    rules = {v["rule"] for v in json.loads(capsys.readouterr().out)["violations"]}
    assert rules == {"stride-multiple-16", "inner-box-within-swizzle-span"}


def test_check_accepts_a_valid_map(capsys):
    assert main(["tma", "check", *GOOD]) == 0
    assert capsys.readouterr().out.startswith("ok")


def test_place_gives_offsets_and_untouched_bytes(capsys):
    # 32-wide bf16 rows under SW128 are padded to 128 B; the box sits at phase 1 (0x480 = 1024 + 128).
    args = ["tma", "place", "--dtype", "bf16", "--dims", "128,64", "--strides", "256", "--box", "32,2",
            "--swizzle", "128B", "--smem-base", "0x480", "--coords", "0,63", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    first = {tuple(e["box_index"]): e for e in out["elements"]}
    assert first[(0, 0)]["smem_offset"] == 16 and not first[(0, 0)]["filled"]
    assert first[(0, 1)]["filled"] and out["filled_elements"] == 32
    assert out["footprint_bytes"] == 256 and out["untouched_ranges"] == [[64, 128], [192, 256]]


def test_place_refuses_a_map_the_driver_rejects(capsys):
    assert main(["tma", "place", *BAD, "--smem-base", "0", "--coords", "0,0"]) == 2
    assert "stride-multiple-16" in capsys.readouterr().out


def test_two_sw128_boxes_build_the_canonical_128_wide_k_major_tile():
    # A 64-row x 128-col bf16 K-major tile loaded as two 64-wide SW128 boxes is the canonical
    # K-major SW128 layout with atoms stacked MN first (each box is one K column of atoms).
    tmap = TensorMap("bf16", (128, 64), (256,), (64, 64), swizzle="128B")
    image = np.arange(128 * 64, dtype="<u2").view(np.uint8)  # value = k + 128 * mn
    smem = np.zeros(2 * 8192, np.uint8)
    for coords, dst in wide_tile_boxes(tmap, 128, (0, 0), 0):
        load_box(tmap, image, coords, dst, smem, 0)
    canon = CanonicalLayout("K", "128B", "bf16", 64, 128, order="mn-first")
    mn, k = np.meshgrid(np.arange(64), np.arange(128), indexing="ij")
    addr = canon.address(mn, k, base=0)
    assert np.array_equal(smem.view("<u2")[addr // 2], k + 128 * mn)


def test_validate_and_report(report_run, capsys):
    assert main(["validate", "layouts", "--json"]) == 0
    v = json.loads(capsys.readouterr().out)
    assert v["tma"]["mismatched_bytes"] == 0 and v["encode"]["disagreements"] == 0
    assert v["provenance"]["gpu"] == "NVIDIA H200" and len(v["provenance"]["captures"]) >= 2
    tmp_path, numbers = report_run  # `lapis report --out DIR --json`, run once for the suite
    assert numbers["layouts"]["tma"]["configs"] >= 300
    for name in ("report.md", "kmajor_sw128_bf16_128x64.png", "tma_sw128_off_boundary.png",
                 "gantt-h200-s5-intra-overlap.png"):
        assert (tmp_path / name).stat().st_size > 1000
    # the committed prediction cache is current, so the Schedules section re-simulates nothing
    assert numbers["schedules"]["resimulated"] == 0 and numbers["schedules"]["predictions"] >= 25
    md = (tmp_path / "report.md").read_text()
    assert "| `h200-s3-two-consumers` |" in md and "`h200-gemm-ws` at 8192x8192x8192" in md
    # the Calibration section: the fitted profile and one row per captured GEMM (variant, shape)
    cal = numbers["calibration"]
    assert set(cal["profile"]["values"]) >= {"clock_ghz", "tensor_flop_per_clk_sm", "tma_latency_ns"}
    assert len(cal["gemm"]) == 11 and all({"variant", "shape", "predicted_us", "measured_us", "err_pct", "spread_pct",
                                          "blind_predicted_us"} <= set(r) for r in cal["gemm"])
    assert "## Calibration" in md and (tmp_path / "calibration_compare_gantt.png").stat().st_size > 1000


def test_bad_inputs_get_named_errors_not_tracebacks(capsys, tmp_path):
    # a negative stride is a rule the driver checks (it reads cuuint64_t): a rejected map, exit 1
    assert main(["tma", "check", "--dtype", "bf16", "--dims", "64,8", "--strides=-128", "--box", "64,8"]) == 1
    assert "is negative" in capsys.readouterr().out
    cases = [
        (["tma", "check", "--dtype", "bf16", "--dims", "4096", "--box", "64,64"], "--box needs 1 value"),
        (["tma", "check", "--dtype", "bf16", "--dims", "64,,8", "--box", "64,8"], "comma-separated integers"),
        (["tma", "place", *GOOD, "--smem-base", "0x38e00", "--coords", "0,0"], "228 KiB"),
        (["tma", "place", *GOOD, "--smem-base", "0", "--coords", "2147483648,0"], "signed 32-bit"),
        (["layout", "show", "--major", "K", "--swizzle", "128B", "--dtype", "bf16", "--rows", "8", "--cols",
          "640000000"], "228 KiB"),
        (["layout", "show", "--major", "K", "--swizzle", "128B", "--dtype", "bf16", "--rows", "8", "--cols", "64",
          "--figure", str(tmp_path / "no" / "x.png")],
         "--figure must name a .png/.svg/.pdf file in an existing folder"),
        (["layout", "desc", "--arch", "sm90", "--major", "K", "--swizzle", "none", "--dtype", "bf16", "--rows", "8",
          "--cols", "8"], "one MMA K-step"),
        (["report", "--out", str(tmp_path / "f.txt"), "--captures", str(tmp_path)], "lacks tma/"),
    ]
    for argv, words in cases:
        assert main(argv) == 2, argv
        captured = capsys.readouterr()
        assert words in captured.out + captured.err, (argv, captured)


def test_negative_list_values_need_no_equals_sign(capsys):
    assert main(["tma", "place", *GOOD, "--smem-base", "0", "--coords", "-64,-3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["filled_elements"] == 64 * 8
