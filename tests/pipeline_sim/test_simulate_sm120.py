"""sm120 (RTX 5090) schedules: the Emmy FlashAttention-2 move stack on the rtx5090 profile."""


import pytest

from lapis.errors import ScheduleError
from lapis.model import roofline
from lapis.model.profile import load_profile
from lapis.pipeline_sim.schedules import attention_sm120 as m
from lapis.pipeline_sim.simulate import SCHEDULES, simulate

SHAPE = "1x8x4096x64"  # the write-up's SDPA_P


def test_every_move_is_registered():
    assert [n for n in SCHEDULES if n.startswith("sm120-")] == list(m.VARIANTS) + list(m.REFUSED_VARIANTS)


@pytest.mark.parametrize("name", list(m.VARIANTS) + list(m.REFUSED_VARIANTS))
def test_each_move_runs_under_the_roofline(name):
    r = simulate(name, "rtx5090", SHAPE)
    roof = roofline.attention(load_profile("rtx5090"), 1, 8, 4096, 64)
    assert 0 < r["tflops"] < roof.tflops()
    assert r["predicted_us"] > roof.ns / 1e3


def test_the_write_up_times_cover_every_move_and_quote_its_stated_ones():
    # stated in the write-up: 612 us (tensor cores), 271 (C->A repack), 233 (Q hoist), 204.7 (final kernel)
    assert set(m.MEASURED_US) == set(m.VARIANTS)
    stated = {"sm120-m01-tensor-cores": 612, "sm120-m03-c-to-a-repack": 271, "sm120-m04-q-hoist": 233,
              "sm120-m07-register-tiling": 204.7}
    assert all(m.MEASURED_US[k] == v for k, v in stated.items())


def test_unmodelled_moves_predict_their_predecessor():
    names = list(m.VARIANTS)
    for i, name in enumerate(names):
        step = m._STEPS[i]
        if step in m.UNMODELLED:
            assert simulate(name, "rtx5090", SHAPE)["predicted_us"] == \
                simulate(names[i - 1], "rtx5090", SHAPE)["predicted_us"]


def test_modelled_moves_change_the_prediction():
    t = [simulate(n, "rtx5090", SHAPE)["predicted_us"] for n in m.VARIANTS]
    assert t[0] > t[1] > t[4]  # staging and the cp.async ring pay off
    assert t[-1] < t[0] / 2


def test_shared_memory_overflow_names_the_numbers():
    with pytest.raises(ScheduleError) as e:
        simulate("sm120-m05-cp-async-ring", "rtx5090", "1x8x4096x256", {"block_n": 128})
    assert "262144 B > 101376 B" in str(e.value)


def test_register_overflow_names_the_numbers():
    with pytest.raises(ScheduleError) as e:
        simulate("sm120-m07-register-tiling", "rtx5090", SHAPE, {"warps": 16})
    assert "16 warps x 32 x 254 registers = 130048 > 65536" in str(e.value)


def test_the_profile_sources_every_value():
    p = load_profile("rtx5090")
    assert p.arch == "sm120"
    for key in ("sm_count", "clock_ghz", "tensor_flop_per_clk_sm", "mufu_ex2_per_clk_sm", "fma_per_clk_sm",
                "hbm_tb_s", "l2_tb_s", "smem_bytes_per_block", "registers_per_sm", "tma_latency_ns"):
        assert p.values[key]["source"].strip()
    assert p["smem_bytes_per_block"] == 99 * 1024
    # every value cites a public source: none is a placeholder
    assert not [k for k, v in p.values.items() if v["source"].startswith("assumed")]
    assert p["l2_latency_ns"] == 130 and "chipsandcheese.com" in p.values["l2_latency_ns"]["source"]
    assert p["l2_tb_s"] == 6.5 and "8.7 x 96 / 128" in p.values["l2_tb_s"]["source"]
    assert round(p.peak_tensor_tflops, 1) == 209.5


def test_tma_move_completes_through_the_mbarrier_ring():
    r = simulate("sm120-m06-tma", "rtx5090", "1x1x512x64")
    assert any(e["op"] == "TMA K+V" for e in [ev.as_dict() for ev in r["_events"]])
