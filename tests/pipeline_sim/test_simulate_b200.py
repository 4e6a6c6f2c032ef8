"""The B200 attention progression (k01..k14 and the minor optimizations) in the simulator."""


import pytest

from lapis.errors import ScheduleError
from lapis.model import roofline
from lapis.model.profile import load_profile
from lapis.pipeline_sim.schedules.attention_b200 import UNMODELLED, VARIANTS
from lapis.pipeline_sim.simulate import SCHEDULES, simulate

B200 = [name for name in SCHEDULES if name.startswith("b200-")]
SHAPE = "1x16x2048x128"


def test_every_step_of_the_write_up_is_registered():
    assert B200 == list(VARIANTS)
    assert len([n for n in B200 if n.startswith("b200-k")]) == 14
    assert len([n for n in B200 if n.startswith("b200-m")]) == 4
    assert all(SCHEDULES[n].shape == "attention" and SCHEDULES[n].arch == "sm100" for n in B200)


@pytest.mark.parametrize("name", B200)
def test_every_schedule_runs_without_deadlock_and_under_the_roofline(name):
    r = simulate(name, "b200", SHAPE)
    roof = roofline.attention(load_profile("b200"), 1, 16, 2048, 128).tflops()
    assert 0 < r["tflops"] <= roof
    assert r["work"]["kv_tiles"] == 2048 // 128
    assert r["fit"]["tmem_columns"] == (512 if "two_q" in VARIANTS[name] else 256)


def _unmodelled_steps():
    """Indices i whose step from B200[i-1] adds only unmodelled mechanisms."""
    return [i for i in range(1, len(B200))
            if (set(VARIANTS[B200[i]]) - set(VARIANTS[B200[i - 1]])) - {"serial"} <= UNMODELLED]


@pytest.mark.parametrize("i", _unmodelled_steps())
def test_an_unmodelled_step_predicts_exactly_its_predecessors_time(i):
    """With the mechanism costs (mix=0); with mix=1 each chapter's own compiled loop may cost it differently
    (tests/pipeline_sim/test_b200_mix.py)."""
    name, prev = B200[i], B200[i - 1]
    mech = {"mix": 0}
    assert simulate(name, "b200", SHAPE, mech)["predicted_us"] == simulate(prev, "b200", SHAPE, mech)["predicted_us"]


def test_persistent_helps_only_when_an_sm_has_several_items():
    pair, mech = ("b200-k13-early-pv", "b200-k14-persistent"), {"mix": 0}
    one = {n: simulate(n, "b200", SHAPE, mech)["predicted_us"] for n in pair}
    assert one["b200-k13-early-pv"] == one["b200-k14-persistent"]  # 128 work items: one per SM, nothing to overlap
    # with their compiled loops (mix=1) only those differ: k14's softmax loop takes one warp 1375 cycles a tile
    # where k13's takes 1356 (manifest warp_cycles), a 0.45% difference here
    compiled = [simulate(n, "b200", SHAPE)["predicted_us"] for n in pair]
    assert compiled[1] / compiled[0] - 1 == pytest.approx(0.0045, abs=0.0005)
    many = {n: simulate(n, "b200", "4x16x2048x128")["predicted_us"] for n in one}
    assert many["b200-k14-persistent"] < many["b200-k13-early-pv"]


def test_tmem_overflow_is_named_with_the_numbers():
    with pytest.raises(ScheduleError, match=r"TMEM.*2 Q tile\(s\) x \(S/P 256 \+ O 128 fp32 columns\) = 768 columns "
                                          r"> 512 columns"):
        simulate("b200-k05-two-q-tiles", "b200", SHAPE, {"block_n": 256})
    with pytest.raises(ScheduleError, match=r"TMEM.*= 640 columns > 512"):
        simulate("b200-k04-warp-specialization", "b200", SHAPE, {"block_n": 512})
    assert simulate("b200-k04-warp-specialization", "b200", SHAPE, {"block_n": 256})["fit"]["tmem_columns"] == 384


def test_smem_and_shape_errors_are_named():
    with pytest.raises(ScheduleError, match="does not fit shared memory"):
        simulate("b200-k06-load-pipeline", "b200", SHAPE, {"kv_stages": 6})
    with pytest.raises(ScheduleError, match="multiple of the tiles"):
        simulate("b200-k05-two-q-tiles", "b200", "1x16x2176x128")  # 17 tiles of 128: not two Q tiles per CTA


def test_warp_specialized_progression_beats_the_baseline_in_the_model():
    t = {n: simulate(n, "b200", "4x16x2048x128")["predicted_us"] for n in B200}
    assert t["b200-k05-two-q-tiles"] < t["b200-k01-baseline"]
    assert t["b200-k14-persistent"] < t["b200-k07-compute-pipeline"] < t["b200-k06-load-pipeline"]
    assert t["b200-k14-persistent"] < 0.5 * t["b200-k01-baseline"]


def test_skip_rescale_lowers_tmem_and_fma_work():
    k10, k11 = (simulate(n, "b200", SHAPE) for n in ("b200-k10-register-caching", "b200-k11-skip-rescale"))
    assert k11["work"]["rescale_frequency"] < 0.5 and k10["work"]["rescale_frequency"] == 1.0
    assert k11["utilization"]["tmem"] * k11["predicted_us"] < k10["utilization"]["tmem"] * k10["predicted_us"]


def test_a_long_shape_deals_its_items_over_the_persistent_grid():
    """Its speed is a benchmark (benchmarks/simulate_speed.py), not a test: the machine's load decides it."""
    r = simulate("b200-k14-persistent", "b200", "2x16x16384x128")
    assert r["work"]["items_per_sm"] == 14


def test_the_unmodelled_chapters_are_the_ones_the_table_names():
    assert {B200[i] for i in _unmodelled_steps()} == {
        "b200-k02-p-in-tmem", "b200-k03-swizzle", "b200-m1-deferred-score-load", "b200-m2-split-rowsum",
        "b200-m3-phase-bitmasks", "b200-m4-tma-l2-promotion"}


def test_a_schedule_runs_on_its_own_gpu_unless_told(capsys):
    from lapis.cli import main
    assert main(["simulate", "--schedule", "b200-k06-load-pipeline", "--shape", "1x2x1024x128", "--json"]) == 0
    assert '"gpu": "b200"' in capsys.readouterr().out
    assert main(["simulate", "--schedule", "b200-k06-load-pipeline", "--shape", "1x2x1024x128", "--gpu",
                 "h200"]) == 2
    assert "written for sm100 hardware" in capsys.readouterr().err


def test_the_profile_cites_a_public_source_for_every_value():
    p = load_profile("b200")
    assert p.values and not [k for k, v in p.values.items() if not v["source"].strip()
                             or v["source"].startswith("assumed")]
    # the four that were placeholders: L2 across both dies, TMA latency, tcgen05 commit, mbarrier wake
    assert (p["l2_tb_s"], p["tma_latency_ns"], p["wgmma_latency_ns"], p["mbarrier_wake_ns"]) == (16.8, 231, 73.3, 50)
    assert "150 + 81 = 231 ns" in p.values["tma_latency_ns"]["source"]
    assert "136 / clock_ghz = 73.3 ns" in p.values["wgmma_latency_ns"]["source"]
