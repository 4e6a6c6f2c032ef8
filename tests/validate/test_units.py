"""`lapis validate units` on the shipped Nsight Compute capture (ncu/h200-2026-12-01-units)."""

import json
import shutil

import pytest

from lapis.captures.readers import read_ncu
from lapis.cli.main import main
from lapis.data import CAPTURES
from lapis.errors import CaptureError
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


def test_lapis_kernels_are_predicted_and_instruction_counts_say_why_not(report):
    s9 = _row(report, "s9")["units"]
    assert s9["sm_cycles"]["predicted"] > 0 and s9["tensor_active_pct"]["predicted"] > 0
    assert s9["issue_active_pct"]["predicted"] is None
    assert "instruction mix" in s9["issue_active_pct"]["why_not_predicted"]
    # the causal s9 reads K/V from DRAM ~8x over: what the L2-reuse assumption misses
    assert _row(report, "s9:causal")["units"]["dram_mb"]["measured"] > 7 * 536.870912


def test_cli_json_and_table(capsys):
    assert main(["validate", "units", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {r["kernel"] for r in out["kernels"]} == {"s3", "s5", "s9", "s9:causal", "gemm", "flash", "cudnn"}
    assert main(["validate", "units"]) == 0
    assert "tensor_active_pct" in capsys.readouterr().out


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
