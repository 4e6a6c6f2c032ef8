"""The Hopper attention progression s1..s8 in the simulator: well-formed runs, roofline, determinism."""

import json
import os
import subprocess
import sys

import pytest

from lapis.cli import main
from lapis.pipeline_sim.simulate import SCHEDULES, simulate

HOPPER = [name for name in SCHEDULES if name.startswith("h200-s")]
SHAPE = "2x4x1024x128"


@pytest.mark.parametrize("name", HOPPER)
def test_every_variant_runs_without_deadlock_and_under_the_roofline(name):
    r = simulate(name, "h200", SHAPE)
    assert 0 < r["tflops"] <= r["roofline_tflops"]
    assert r["work"]["kv_tiles"] == 1024 // r["params"]["block_n"]


def test_s1_s2_s3_are_ordered_as_the_h200_ran_them():
    # 16x16x2048x128, h200-2026-11-30-probe: s3 1168 µs, s1 1306, s2 1410 (s1 keeps two CTAs per SM, so one CTA's
    # GEMMs run under the other's softmax; s2's one consumer warpgroup waits on its own)
    t = {n: simulate(n, "h200", "16x16x2048x128")["predicted_us"] for n in HOPPER[:3]}
    assert t["h200-s3-two-consumers"] < t["h200-s1-serial"] < t["h200-s2-ws-ring"]


def test_cond_rescale_lowers_fma_work_and_persistent_is_not_invented():
    s6, s7, s8 = (simulate(n, "h200", SHAPE) for n in ("h200-s6-exp2", "h200-s7-cond-rescale", "h200-s8-persistent"))
    busy = [r["utilization"]["softmax"] * r["predicted_us"] for r in (s6, s7)]  # µs with a softmax running
    assert busy[1] < busy[0]
    # launch overhead is not modelled: with s7's loop (the kernels' loops differ by their SASS) persistence alone
    # predicts no difference in one wave
    s8_on_s7 = simulate("h200-s8-persistent", "h200", SHAPE, {"kernel_loop": "s7"})
    assert s8_on_s7["predicted_us"] == s7["predicted_us"]


def test_bad_shapes_and_params_are_named(capsys):
    assert main(["simulate", "--schedule", "h200-s3-two-consumers", "--shape", "2x4x1000x128"]) == 2
    assert "multiple of the tiles" in capsys.readouterr().err
    assert main(["simulate", "--schedule", "h200-s3-two-consumers", "--shape", SHAPE, "--param", "stages=8"]) == 2
    assert "does not fit shared memory" in capsys.readouterr().err
    assert main(["simulate", "--schedule", "h200-s3-two-consumers", "--shape", SHAPE, "--param", "foo=1"]) == 2


def test_same_result_under_two_hash_seeds():
    code = ("import json; from lapis.pipeline_sim.simulate import simulate; r = simulate('h200-s5-intra-overlap', "
            "'h200', '2x4x1024x128'); print(json.dumps([r['predicted_us'], r['events']]))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env=dict(os.environ, PYTHONHASHSEED=seed)).stdout for seed in ("1", "12345")}
    assert len(outs) == 1 and json.loads(outs.pop())[1] > 0


def test_causal_items_visit_the_k_v_tiles_up_to_their_diagonal():
    from lapis.pipeline_sim.schedules.attention_h200 import kv_tiles_per_item, representative_sm
    assert [kv_tiles_per_item(q, 8, 128, 128, True) for q in (0, 1, 7)] == [1, 2, 8]
    assert kv_tiles_per_item(0, 16, 128, 64, True) == 2  # a 128-row Q tile spans two 64-column K/V tiles
    assert kv_tiles_per_item(0, 8, 128, 128, False) == 8
    # 4 Q tiles on 2 SMs by grid stride: SM0 takes q0, q2 (1 + 3 tiles), SM1 q1, q3 (2 + 4): SM1 decides
    assert representative_sm(1, 4, 4, 128, 128, True, 2) == [2, 4]


def test_causal_load_imbalance_at_the_fa_shape(capsys):
    # 4096 items on 132 SMs: SM s < 4 takes items s + 132k, k = 0..31, whose q tile (s + 4k) mod 32 takes the
    # 8 values s, s+4, ..., s+28 four times each; SM 3 visits 4 * (4 + 8 + ... + 32) = 576 K/V tiles, not the
    # balanced 128 * 528 / 132 = 512.
    causal = simulate("h200-s7-cond-rescale", "h200", "8x16x4096x128", {"causal": 1})
    full = simulate("h200-s7-cond-rescale", "h200", "8x16x4096x128")
    assert causal["work"]["kv_tiles_on_this_sm"] == 576 and full["work"]["kv_tiles_on_this_sm"] == 32 * 32
    assert causal["predicted_us"] < full["predicted_us"]
    assert causal["roofline_tflops"] == full["roofline_tflops"]  # half the FLOPs, counted as half
    assert main(["simulate", "--schedule", "h200-s7-cond-rescale", "--shape", "8x16x4096x128", "--causal",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["params"]["causal"] == 1
