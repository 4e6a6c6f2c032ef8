"""The grid: representative vs full mode (every SM), and the exactness of grouping identical SMs."""

import pytest

from lapis.errors import ScheduleError
from lapis.model.profile import load_profile
from lapis.pipeline_sim import grid
from lapis.pipeline_sim import engine
from lapis.pipeline_sim.schedules.gemm_ws import GEMM_WS


def run_gemm(p, shape: str, full: bool = False) -> dict:
    """The GEMM schedule's raw run (engine.run), representative or full."""
    return engine.run(GEMM_WS, p, GEMM_WS.parse_shape(shape), {}, full=full)


def one_group_per_sm(per_sm):
    return [grid.SmGroup(tuple(w), [i]) for i, w in enumerate(per_sm) if w]


def test_group_sms_merges_identical_work_lists_in_sm_order():
    groups = grid.group_sms([[3, 3], [3], [3, 3], [], [3]])
    assert [(g.work, g.sms) for g in groups] == [((3, 3), [0, 2]), ((3,), [1, 4])]


def test_gemm_tiles_are_dealt_by_grid_stride_and_the_tail_wave_is_partial():
    # 2048^3 with 128x128 tiles: 256 tiles on 132 SMs -> 124 SMs run 2 tiles, 8 SMs run 1.
    r = run_gemm(load_profile("h200"), "2048x2048x2048", full=True)
    assert r["grid"]["sms_simulated"] == 132 and r["grid"]["work_lists"] == 2
    assert r["grid"]["finish_us_min"] < 0.6 * r["grid"]["finish_us_max"]
    assert r["work"]["tiles_per_sm"] == 2


@pytest.mark.parametrize("shape", ["2048x2048x2048", "1024x8192x512", "4096x1024x1024"])
def test_grouping_identical_sms_is_exact(shape, monkeypatch):
    p = load_profile("h200")
    grouped = run_gemm(p, shape, full=True)
    monkeypatch.setattr(grid, "group_sms", one_group_per_sm)
    every = run_gemm(p, shape, full=True)
    assert every["grid"]["work_lists"] == every["grid"]["sms_simulated"] > grouped["grid"]["work_lists"]
    assert every["env_ns"] == pytest.approx(grouped["env_ns"], rel=1e-12)
    for key in ("finish_us_min", "finish_us_median", "finish_us_max"):
        assert every["grid"][key] == pytest.approx(grouped["grid"][key], rel=1e-12)


def test_full_mode_gives_the_tail_wave_more_bandwidth_never_less():
    p = load_profile("h200")
    for shape in ("2048x2048x2048", "8192x8192x8192"):
        rep = run_gemm(p, shape)
        full = run_gemm(p, shape, full=True)
        assert rep["grid"]["sms_simulated"] == 1
        assert full["env_ns"] <= rep["env_ns"]
        # the fullest SM's work is the same in both modes: only the bandwidth share differs
        assert full["work"]["tiles_per_sm"] == rep["work"]["tiles_per_sm"]


def test_a_single_tile_runs_alone_on_the_chip_in_both_modes():
    p = load_profile("h200")
    rep = run_gemm(p, "128x128x4096")
    full = run_gemm(p, "128x128x4096", full=True)
    assert full["grid"]["sms_simulated"] == 1 and full["env_ns"] == pytest.approx(rep["env_ns"])


def test_a_burst_splits_the_chip_among_the_sms_loading_at_that_moment():
    p = load_profile("rtx5090")  # L2 6.5 TB/s (6500 B/ns), DRAM 1.792 TB/s, 128 B/clk of smem at 2.407 GHz
    g = grid.Grid(p, 170, static=True)
    assert g.burst(64, 1.0) == pytest.approx(6500 / 170) == pytest.approx(g.share(64))  # all loading: share
    assert g.burst(64, 0.5) == pytest.approx(6500 / (1 + 169 * 0.5))  # 84.5 others on average
    assert g.burst(1, 1.0) == pytest.approx(1792 / 170)  # compulsory traffic: DRAM's share
    assert g.burst(64, 0.0) == pytest.approx(128 * 2.407)  # alone: the SM's own shared-memory fill rate
    with pytest.raises(ScheduleError, match="duty"):
        g.burst(64, 1.5)
