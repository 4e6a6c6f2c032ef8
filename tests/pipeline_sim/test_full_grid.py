"""`--full` on the attention schedules: every SM simulated, identical SMs grouped exactly, default mode unchanged."""

import json

import pytest

from lapis.cli import main
from lapis.pipeline_sim import grid
from lapis.pipeline_sim.simulate import default_gpu, simulate

# The pre-refactor predictions (default mode, commit 56d4f41, before the attention schedules ran on grid.run_sms):
# (schedule, shape, params, predicted µs, timeline events). Default mode must reproduce them exactly, on the
# profiles of that commit (the h200 profile was re-fitted since: tests/data/h200_profile_56d4f41.json).
# FA2 (mma.sync) is still costed per unit (MUFU, FMA pipe) as then; the b200 rows with the mechanism costs of then
# (mix=0: attention_b200 costs its row warps from the compiled instruction mix by default).
PRE_REFACTOR = [
    # the h200-s* rows left when the Hopper schedules began costing softmax and GEMMs by the contention measured on
    # the H200 (issue 10, lapis.pipeline_sim.contention): a new cost model, not the grid refactor this pins
    ("h200-fa2-sync", "2x8x2048x128", {"causal": 1}, 67.00240978643046, 2485),
    ("b200-m4-tma-l2-promotion", "2x16x2048x128", {"mix": 0}, 57.597265655172336, 1388),
    ("b200-k13-early-pv", "2x16x2048x128", {"causal": 1, "mix": 0}, 49.58277958620685, 1094),
    ("b200-k01-baseline", "2x16x2048x128", {"causal": 1, "mix": 0}, 134.67177489655157, 486),
    # the sm120 rows as the schedules cost them now (the P hand-off's __syncthreads in m01/m02, libm expf's FMA-pipe
    # instructions, a register-tiled warp's two chains apart, a load burst's share of the chip's bandwidth and the
    # causal K/V reuse: attention_sm120.load_ns, kv_reuse): a new cost model, not the grid refactor this pins
    ("sm120-m07-register-tiling", "2x16x2048x64", {}, 222.050053491562, 7416),
    ("sm120-m06-tma", "1x16x1024x64", {"causal": 1}, 32.15497612422159, 696),
    ("sm120-m01-tensor-cores", "1x16x1024x64", {"causal": 1}, 77.24125258594131, 1088),
]

# One schedule per family at small shapes with a partial last wave (non-causal) and per-SM work lists that
# differ (causal): h200 132 SMs, b200 148, rtx5090 170.
FAMILIES = [
    ("h200-s8-persistent", "2x8x2048x128"),  # 256 Q tiles: 124 SMs run 2, 8 run 1
    ("b200-m4-tma-l2-promotion", "2x16x2048x128"),  # 256 Q-tile pairs: 108 SMs run 2, 40 run 1
    ("sm120-m06-tma", "1x16x1024x64"),  # 256 CTAs: 86 SMs run 2, 84 run 1
]


def run(schedule, shape, params, full):
    return simulate(schedule, default_gpu(schedule), shape, dict(params), full=full)


@pytest.mark.parametrize("schedule,shape,params,us,events", PRE_REFACTOR)
def test_default_mode_reproduces_the_pre_refactor_predictions(schedule, shape, params, us, events, profiles_of_56d4f41):
    r = run(schedule, shape, params, False)
    assert r["predicted_us"] == pytest.approx(us, rel=1e-9) and r["events"] == events
    assert r["grid"]["sms_simulated"] == 1 and r["grid"]["work_lists"] == 1


def one_group_per_sm(per_sm):
    return [grid.SmGroup(tuple(w), [i]) for i, w in enumerate(per_sm) if w]


@pytest.mark.parametrize("schedule,shape", FAMILIES)
@pytest.mark.parametrize("causal", [0, 1])
def test_grouping_identical_sms_equals_simulating_each_sm(schedule, shape, causal, monkeypatch):
    grouped = run(schedule, shape, {"causal": causal}, True)
    monkeypatch.setattr(grid, "group_sms", one_group_per_sm)
    every = run(schedule, shape, {"causal": causal}, True)
    sms = {"h200": 132, "b200": 148, "rtx5090": 170}[default_gpu(schedule)]
    assert every["grid"]["sms_simulated"] == every["grid"]["work_lists"] == grouped["grid"]["sms_simulated"] == sms
    assert grouped["grid"]["work_lists"] < sms
    assert every["predicted_us"] == pytest.approx(grouped["predicted_us"], rel=1e-12)
    for key in ("finish_us_min", "finish_us_median", "finish_us_max"):
        assert every["grid"][key] == pytest.approx(grouped["grid"][key], rel=1e-12)


@pytest.mark.parametrize("schedule,shape", FAMILIES)
def test_full_mode_gives_the_partial_wave_more_bandwidth_never_a_longer_run(schedule, shape):
    default, full = run(schedule, shape, {}, False), run(schedule, shape, {}, True)
    assert full["predicted_us"] <= default["predicted_us"]
    # two work lists: the fuller wave's and the partial one's, which finishes first
    assert full["grid"]["work_lists"] == 2
    assert full["grid"]["finish_us_min"] < full["grid"]["finish_us_max"] == pytest.approx(full["predicted_us"])
    assert full["work"]["items_per_sm"] == default["work"]["items_per_sm"]


def test_causal_full_mode_runs_many_distinct_work_lists():
    # 2x8x2048x128, 16 Q tiles per head, grid stride over 132 SMs: SM s < 124 runs Q tiles s % 16 and
    # (s + 132) % 16 = (s + 4) % 16, so 16 distinct pairs; the 8 SMs s >= 124 run one tile each (s % 16 = 12..15
    # and 0..3): 8 more lists. 24 in all.
    r = run("h200-s8-persistent", "2x8x2048x128", {"causal": 1}, True)
    assert r["grid"]["work_lists"] == 24 and r["grid"]["sms_simulated"] == 132


def test_the_grid_line_says_one_sm_and_one_work_list_in_the_singular(capsys):
    assert main(["simulate", "--schedule", "h200-gemm-ws", "--shape", "256x256x256"]) == 0
    assert "\ngrid: 1 SM simulated as 1 distinct work list; SM finish" in capsys.readouterr().out


def test_cli_full_prints_the_grid_line_and_json_has_grid(capsys):
    args = ["simulate", "--schedule", "h200-s8-persistent", "--shape", "2x8x2048x128", "--causal", "--full"]
    assert main(args) == 0
    assert "grid: 132 SMs simulated as 24 distinct work lists; SM finish" in capsys.readouterr().out
    assert main(args + ["--json"]) == 0
    g = json.loads(capsys.readouterr().out)["grid"]
    assert (g["sms_simulated"], g["work_lists"]) == (132, 24)
    assert g["finish_us_min"] <= g["finish_us_median"] <= g["finish_us_max"]
