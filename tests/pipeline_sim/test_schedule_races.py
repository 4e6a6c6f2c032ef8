"""The built-in schedules under the happens-before race check: clean as written, caught when mutated."""

import pytest
from hypothesis import given, settings, strategies as st

from lapis.errors import ScheduleError
from lapis.pipeline_sim.deadlock import Deadlock
from lapis.pipeline_sim.pipeline import TmaPipeline
from lapis.pipeline_sim.simulate import SCHEDULES, default_gpu, simulate


# sm120-r3-ring-d4 holds four K/V slots: at head dim 128 (32 KiB each) they need 128 KiB, more than the 99 KiB a block
# gets on sm_120 (tested below), so its head-dim-128 shapes run at head dim 64
SMEM_BOUND_D64 = ("sm120-r3-ring-d4",)


def fitting(name, shape):
    return shape[:-4] + "x64" if name in SMEM_BOUND_D64 and shape.endswith("x128") else shape


def small_shape(name):
    return "512x512x1024" if "gemm" in name else fitting(name, "1x2x1024x128")


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_built_in_schedules_give_no_false_alarms(name):
    r = simulate(name, default_gpu(name), small_shape(name), check_races=True)
    assert r["races"] == []


def test_a_b200_schedule_on_a_gpu_without_tmem_is_refused():
    with pytest.raises(ScheduleError, match="written for sm100 hardware"):
        simulate("b200-k14-persistent", "h200", "1x2x1024x128")


def test_races_are_not_checked_unless_asked():
    assert simulate("h200-gemm-ws", "h200", "512x512x1024")["races"] is None


@pytest.mark.parametrize("name", ["h200-gemm-ws", "h200-s3-two-consumers", "h200-s5-intra-overlap"])
def test_a_producer_that_skips_the_empty_wait_hangs_by_name(name, monkeypatch):
    def no_wait(self, st):
        self._slot(st)
        ev = self.env.event()
        ev.succeed()
        return ev

    monkeypatch.setattr(TmaPipeline, "producer_acquire", no_wait)
    # the producer arrives on full barriers phases ahead of the consumers, whose parity then never comes round
    with pytest.raises(Deadlock, match=r"consumer0 waits on \w+\.full\[\d\] \(phase \d+\) for producer"):
        simulate(name, "h200", small_shape(name), check_races=True)


def release_at_the_wait(monkeypatch):
    """Mutation: consumers release a slot as soon as their wait returns (as if the MMA had completed)."""
    wait, release = TmaPipeline.consumer_wait, TmaPipeline.consumer_release

    def wait_then_release(self, st, role):
        ev = wait(self, st, role)
        ev.callbacks.append(lambda _: release(self, st, role))
        return ev

    monkeypatch.setattr(TmaPipeline, "consumer_wait", wait_then_release)
    monkeypatch.setattr(TmaPipeline, "consumer_release", lambda self, st, role: None)


@pytest.mark.parametrize("name, ring", [("h200-gemm-ws", "ring"), ("h200-s3-two-consumers", "K"),
                                        ("h200-s5-intra-overlap", "V")])
def test_consumer_releasing_before_its_mma_is_caught(name, ring, monkeypatch):
    """Release at the wait (as if the MMA had completed): the next TMA into the slot is unordered with the read."""
    release_at_the_wait(monkeypatch)
    races = simulate(name, "h200", small_shape(name), check_races=True)["races"]
    assert any(f"race on {ring}[" in r and "writes token" in r and "reads token" in r for r in races), races[:3]


def test_cli_races_flag_reports_and_sets_the_exit_status(monkeypatch, capsys):
    from lapis.cli import main
    assert main(["simulate", "--schedule", "h200-s4-pingpong", "--shape", "1x2x1024x128", "--races"]) == 0
    assert "races: 0 found" in capsys.readouterr().out
    release_at_the_wait(monkeypatch)
    assert main(["simulate", "--schedule", "h200-s4-pingpong", "--shape", "1x2x1024x128", "--races"]) == 4
    assert "lapis simulate: race on " in capsys.readouterr().err


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.sampled_from([1, 2]), st.sampled_from([64, 128]), st.integers(1, 12),
       st.integers(1, 3), st.sampled_from(["h200-gemm-ws", "h200-s3-two-consumers", "h200-s5-intra-overlap"]))
def test_well_formed_random_pipelines_never_hang_race_or_beat_the_roofline(stages, wgs, block_n, k, heads, name):
    if "gemm" in name:
        shape, params = f"256x{block_n * 2}x{64 * k}", dict(stages=stages, consumer_wgs=wgs, block_n=block_n,
                                                            mma_in_flight=min(1, stages - 1))
    else:
        shape, params = f"1x{heads}x{128 * k}x128", dict(stages=min(stages, 3), block_n=128)
    r = simulate(name, "h200", shape, params, check_races=True)
    assert r["races"] == [] and 0 < r["tflops"] <= r["roofline_tflops"]



# Three shapes per form: one CTA per SM, several CTAs per SM in turn (smem slots reused across CTAs), and
# extents that leave a partial wave.
THREE_SHAPES = {"gemm": ("512x512x1024", "2048x2048x2048", "1024x3072x512"),
                "attention": ("1x2x1024x128", "1x3x3072x64", "8x16x1024x128")}


@pytest.mark.parametrize("name, shape", [(n, sh) for n in sorted(SCHEDULES) for sh in THREE_SHAPES[SCHEDULES[n].shape]])
def test_every_built_in_schedule_is_race_free_at_three_shapes(name, shape):
    assert simulate(name, default_gpu(name), fitting(name, shape), check_races=True)["races"] == []


def test_four_slot_ring_at_head_dim_128_is_refused_for_shared_memory():
    with pytest.raises(ScheduleError, match="does not fit shared memory"):
        simulate("sm120-r3-ring-d4", "rtx5090", "1x2x1024x128")


@pytest.mark.parametrize("shape", THREE_SHAPES["gemm"])
def test_a_planted_race_is_still_caught_when_ctas_follow_each_other(shape, monkeypatch):
    """Positive control for the CTA-exit edge: releasing at the wait races within every CTA of the SM."""
    release_at_the_wait(monkeypatch)
    races = simulate("h200-gemm-ws", "h200", shape, check_races=True)["races"]
    tiles = {r.split("token (")[1].split(",")[0] for r in races}
    assert races and all("race on ring[" in r for r in races) and len(tiles) == (1 if shape == "512x512x1024" else 2)


def test_successive_ctas_on_an_sm_are_ordered_by_the_cta_exit():
    """h200-gemm-ws at 2048^3: 256 tiles on 132 SMs, two CTAs in turn on the representative SM, each with a fresh
    ring over the same smem; the second CTA's TMA writes come after the first CTA's reads through the exit."""
    from lapis.cli import main
    assert main(["simulate", "--schedule", "h200-gemm-ws", "--shape", "2048x2048x2048", "--races"]) == 0
