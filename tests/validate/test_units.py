"""`lapis validate units` on the shipped Nsight Compute capture (ncu/h200-2026-12-01-units)."""

import json
import shutil

import pytest

from lapis.captures.readers import read_ncu
from lapis.cli.main import main
from lapis.data import CAPTURES
from lapis.errors import CaptureError, LapisError
from lapis.validate import units

CAPTURE = CAPTURES / "ncu" / "h200-2026-12-01-units"
FLOPS_4K = 4.0 * 8 * 16 * 4096 * 4096 * 128  # 8x16x4096x128, non-causal


@pytest.fixture(scope="module")
def report():
    return units.validate_units()


def _row(r, key):
    return next(x for x in r["kernels"] if x["kernel"] == key)


def test_measured_units_are_the_counters(report):
    s9 = _row(report, "s9")["units"]
    assert s9["sm_cycles"]["measured"] == pytest.approx(2907814.18)
    assert s9["clock_mhz"]["measured"] == pytest.approx(1737.195, abs=1e-3)
    assert s9["time_us"]["measured"] == pytest.approx(2907814.18 / 1737.194945, rel=1e-6)
    assert s9["tensor_active_pct"]["measured"] == pytest.approx(69.94)
    assert s9["dram_mb"]["measured"] == pytest.approx((403154688 + 126083072) / 1e6)
    assert s9["inst_xu_m"]["measured"] == pytest.approx(69.328896)
    assert _row(report, "flash")["units"]["inst_tensor_m"]["measured"] == pytest.approx(268.435456)


def test_tensor_pct_formula_reproduces_ncu_from_measured_cycles():
    # wgmma at 4096 FLOP/clk/SM (s9) and mma.sync at 2714 (FA2): Nsight Compute's % within a point
    assert 100 * FLOPS_4K / 132 / (4096 * 2907814.18) == pytest.approx(69.94, abs=1.0)
    assert 100 * FLOPS_4K / 132 / (2714 * 5521141.45) == pytest.approx(55.25, abs=1.0)


def test_causal_case_halves_the_flops_and_takes_the_causal_build():
    c = units.kernel_case("s9:causal", "8x16x4096x128", 8192)
    assert c["flops"] == FLOPS_4K / 2
    assert c["params"]["causal"] == 1 and c["params"]["persistent_order"] == "heavy_first"
    assert c["compulsory_bytes"] == 4 * 8 * 16 * 4096 * 128 * 2
    g = units.kernel_case("gemm", "8x16x4096x128", 8192)
    assert g["shape"] == "8192x8192x8192" and g["flops"] == 2.0 * 8192 ** 3


def test_errors_are_points_for_percentages_and_percent_otherwise():
    assert units.error("tensor_active_pct", 77.5, 69.9) == pytest.approx(7.6)
    assert units.error("sm_cycles", 110.0, 100.0) == pytest.approx(10.0)
    assert units.error("issue_active_pct", None, 38.0) is None


def test_lapis_kernels_are_predicted_with_their_instruction_mix(report):
    s9 = _row(report, "s9")
    u = s9["units"]
    assert u["sm_cycles"]["predicted"] > 0 and u["tensor_active_pct"]["predicted"] > 0
    assert s9["instruction_mix"].startswith("SASS compiled here")
    # 4096 Q tiles x 32 K/V blocks x 16 wgmma x 8 consumer warps
    assert u["inst_tensor_m"]["predicted"] == pytest.approx(4096 * 32 * 16 * 8 / 1e6)
    # 66 MUFU per block and warp (64 exponentials, 2 corrections) against the measured 69.33 M
    assert u["inst_xu_m"]["predicted"] == pytest.approx(69.3, abs=0.1)
    for key in ("s3", "s5", "s9", "s9:causal", "gemm", "flash"):
        for unit in ("issue_active_pct", "inst_fma_m", "inst_alu_m", "inst_xu_m", "inst_lsu_m"):
            assert _row(report, key)["units"][unit]["predicted"] is not None, (key, unit)
        assert abs(_row(report, key)["units"]["issue_active_pct"]["error"]) < 15  # points: the floor
    cudnn = _row(report, "cudnn")
    assert cudnn["instruction_mix"].startswith("measured-derived")
    assert cudnn["units"]["inst_fma_m"]["predicted"] == pytest.approx(cudnn["units"]["inst_fma_m"]["measured"])
    # the causal s9 (heavy_first: Q tile q of all 128 heads, then q - 1) reads K/V from DRAM ~8x over; the L2
    # model predicts it: Q and O once (268.4 MB) and the 128 x 528 K+V tile pairs (4429.2 MB) over a reuse of
    # 1.0-1.05 (a 30 MiB L2 partition against 256 MiB of K/V passing between two Q tiles of a head)
    dram = _row(report, "s9:causal")["units"]["dram_mb"]
    assert dram["measured"] > 7 * 536.870912
    assert 268.4 + 4429.2 / 1.05 < dram["predicted"] < 268.4 + 4429.2
    assert abs(dram["error"]) < 11


def test_cli_json_and_table(capsys):
    assert main(["validate", "units", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {r["kernel"] for r in out["kernels"]} == {"s3", "s5", "s9", "s9:causal", "gemm", "flash", "cudnn",
                                                      "s12", "s13", "fa4", "s14", "s15", "s16", "s17", "s18",
                                                      "s19", "s20", "s1", "s2", "s21", "fa4_bhsd", "s22", "s23", "s24",
                                                      "s25", "s26"}
    # ncu/h200-2026-12-01-steps adds s12, s13 and FA4; ncu/h200-2026-12-02-s14 adds s14, -s15 s15, -s16 s16, -s17
    # s17, -s18 s18, -s19 s19, -s20 s20, -source s1, s2, -s21 s21, -layout fa4_bhsd (FA4 on B x H x L x D views),
    # ncu/h200-2026-12-03-s23 s22, s23, -s24 s24, -s25 s25, -s26 s26 (and s25, FA4 again)
    assert main(["validate", "units"]) == 0
    assert "tensor_active_pct" in capsys.readouterr().out


def test_work_order_trip_counts():
    s9 = units.work("s9", units.kernel_case("s9", "8x16x4096x128", 8192), 132)
    assert s9 == dict(tiles=4096, blocks=4096 * 32, ctas=132, consumer_warps=8, warps_per_cta=12,
                      tensor_per_block=16, rescale_per_block=0.0)  # persistent; threshold 8: no rescale past tile 0
    causal = units.work("s9:causal", units.kernel_case("s9:causal", "8x16x4096x128", 8192), 132)
    assert causal["blocks"] == 128 * sum(range(1, 33))  # Q tile i sees i K/V tiles of 128
    s3 = units.work("s3", units.kernel_case("s3", "8x16x4096x128", 8192), 132)
    assert (s3["ctas"], s3["rescale_per_block"]) == (4096, 1.0)
    fa2 = units.work("flash", units.kernel_case("flash", "8x16x4096x128", 8192), 132)
    assert fa2["tensor_per_block"] == 256 and fa2["blocks"] == 4096 * 64  # 2 x (8 x 8 + 16 x 4) mma per warp
    gemm = units.work("gemm", units.kernel_case("gemm", "8x16x4096x128", 8192), 132)
    assert (gemm["tiles"], gemm["blocks"], gemm["tensor_per_block"]) == (4096, 4096 * 128, 4)


def test_reader_refuses_a_non_number_metric(tmp_path):
    dest = tmp_path / "bad"
    shutil.copytree(CAPTURE, dest, ignore=shutil.ignore_patterns("capture.json"))  # a fresh capture, not yet indexed
    man = json.loads((dest / "manifest.json").read_text())
    man["kernels"]["s9"]["metrics"]["sm__cycles_elapsed.avg"]["value"] = "NaN"
    (dest / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(CaptureError, match="finite number"):
        read_ncu(dest)
    assert read_ncu(CAPTURE).not_compared == {}


def test_third_party_cases_take_the_kernels_tile_and_causal_flag():
    f = units.kernel_case("flash", "8x16x4096x128", 8192)
    assert f["schedule"] == "h200-flash2" and "causal" not in f["params"]
    assert (f["params"]["block_m"], f["params"]["block_n"]) == (128, 64) and f["instruction"] == "mma.sync"
    c = units.kernel_case("cudnn:causal", "8x16x4096x128", 8192)
    assert c["params"]["causal"] == 1 and c["instruction"] == "wgmma"


def test_the_blind_dram_predictions_stand_beside_the_diagnostic_captures():
    rows = {(r["kernel"], r["shape"]): r for r in units.validate_units()["l2_reuse"]}
    s9 = rows[("s9:causal", "32x16x1024x128")]
    # diagnostic/h200-2026-12-03-l2-1024: dram__bytes_read.sum + dram__bytes_write.sum of s9's causal heavy_first
    assert s9["capture"] == "diagnostic/h200-2026-12-03-l2-1024"
    assert s9["measured_dram_mb"] == pytest.approx(1449.241088)
    assert s9["blind_dram_mb"] == 1433.1 and s9["blind_error_pct"] == pytest.approx(-1.11, abs=0.01)
    # lpt_l2 (s24) re-fetches beyond the compulsory 536.9 MB the blind file gave it
    s24 = rows[("s24:causal", "8x16x4096x128")]
    assert s24["measured_dram_mb"] == pytest.approx(759.872512) and s24["blind_dram_mb"] == 536.9
    assert abs(s24["error_pct"]) < abs(s24["blind_error_pct"])
    # cuDNN's causal kernel reads the compulsory bytes (diagnostic/h200-2026-12-03-l2-cudnn-1024): the blind
    # grid-stride order's 900.1 MB was wrong; the dynamic order it is modelled with now fetches each pair once
    cudnn = rows[("cudnn:causal", "32x16x1024x128")]
    assert cudnn["capture"] == "diagnostic/h200-2026-12-03-l2-cudnn-1024"
    assert cudnn["measured_dram_mb"] == pytest.approx(527.611648) and cudnn["blind_dram_mb"] == 900.1
    assert cudnn["predicted_dram_mb"] == pytest.approx(536.870912) and cudnn["error_pct"] < 2
    assert "not supported" in rows[("fa4:causal", "32x16x1024x128")]["not_measured"]
    assert len(rows) == 9


def test_a_damaged_blind_dram_file_is_a_named_error(tmp_path):
    bad = tmp_path / "l2_reuse.json"
    for text in ("{", '{"cases": [{"kernel": "s9", "shape": "1x1x128x64", "predicted_dram_mb": -1}]}', "[]"):
        bad.write_text(text)
        with pytest.raises(CaptureError, match="the blind DRAM predictions are"):
            units.l2_reuse_rows(bad, units.captures_root(None, kinds=("ncu",)))


def test_a_relative_error_of_a_measured_zero_is_none_and_an_uncatalogued_head_dim_is_named():
    assert units.error("dram_mb", 5.0, 0.0) is None and units.error("issue_active_pct", 5.0, 0.0) == 5.0
    with pytest.raises(LapisError, match="at the head dims its catalog entry gives a tile for"):
        units.kernel_case("cudnn", "32x16x1024x96", 8192)


def test_the_dram_table_shows_a_dash_where_a_measured_zero_leaves_no_error():
    row = dict(kernel="s24", shape="1x1x128x128", blind_dram_mb=0.1, measured_dram_mb=0.0, blind_error_pct=None,
               predicted_dram_mb=0.1, error_pct=None)
    text = units.render(dict(kernels=[], largest_miss={}, l2_reuse=[row]))
    assert text.splitlines()[-1].split() == ["s24", "1x1x128x128", "0.0", "0.1", "-", "0.1", "-"]
