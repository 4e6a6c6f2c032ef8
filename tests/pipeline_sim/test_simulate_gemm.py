"""The warp-specialized GEMM schedule: roofline, closed form, ring depth, trace export and the CLI."""

import json

import pytest
from hypothesis import given, settings, strategies as st

from lapis.cli import main
from lapis.errors import ScheduleError
from lapis.model.profile import load_profile
from lapis.pipeline_sim.simulate import simulate
from lapis.pipeline_sim.trace import check_chrome, to_chrome

H200 = load_profile("h200")


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(["512x512x512", "2048x1024x4096", "4096x4096x1024", "1024x8192x2048"]),
       st.integers(1, 6), st.sampled_from([1, 2]))
def test_never_beats_the_roofline(shape, stages, wgs):
    r = simulate("h200-gemm-ws", "h200", shape, dict(stages=stages, consumer_wgs=wgs, mma_in_flight=min(1, stages - 1)))
    assert r["tflops"] <= r["roofline_tflops"] * (1 + 1e-9)


def test_one_stage_one_consumer_is_the_closed_form_sum():
    # Nothing overlaps: per K block, load (bytes / L2 share) + TMA latency + MMA + wgmma tail; per tile one
    # epilogue storing C at the HBM share (written once, not waited for).
    r = simulate("h200-gemm-ws", "h200", "1024x1024x512", dict(stages=1, consumer_wgs=1, mma_in_flight=0))
    tiles, active, per_sm, kb = 64, 64, 1, 8
    rate = H200["tensor_flop_per_clk_sm"] * H200["clock_ghz"]  # FLOP/ns
    share = H200["l2_tb_s"] * 1e3 / active  # B/ns; K-block reuse 8 x HBM exceeds L2 here
    assert 8 * H200["hbm_tb_s"] > H200["l2_tb_s"]
    load = (128 + 128) * 64 * 2 / share
    mma = 2 * 128 * 128 * 64 / rate
    tail = H200["wgmma_latency_ns"] - 2 * 64 * 256 * 16 / rate
    epilogue = 128 * 128 * 2 / (H200["hbm_tb_s"] * 1e3 / active)
    expected = per_sm * (kb * (load + H200["tma_latency_ns"] + mma + tail) + epilogue)
    assert r["work"] == dict(tiles=tiles, active_sms=active, tiles_per_sm=per_sm, k_blocks=kb)
    assert r["predicted_us"] * 1e3 == pytest.approx(expected, rel=1e-9)


def test_deeper_ring_is_never_slower_with_one_consumer():
    for lag, depths in ((0, (1, 2, 3, 4, 6)), (1, (2, 3, 4, 6))):
        t = [simulate("h200-gemm-ws", "h200", "2048x2048x4096", dict(stages=s, consumer_wgs=1, mma_in_flight=lag))
             ["predicted_us"] for s in depths]
        assert t == sorted(t, reverse=True) and t[0] > t[-1]


def test_a_ring_too_shallow_for_the_wgmma_in_flight_is_refused_not_deadlocked():
    with pytest.raises(ScheduleError, match="mma_in_flight 1 with stages 1"):
        simulate("h200-gemm-ws", "h200", "1024x1024x512", dict(stages=1))


def test_keeping_one_k_block_in_flight_hides_the_wgmma_tail():
    kw = dict(stages=4, consumer_wgs=1)
    # 64 tiles: each SM gets 1/64 of L2, so loads outrun the tensor pipe and the wgmma tail is exposed
    t0 = simulate("h200-gemm-ws", "h200", "1024x1024x8192", dict(kw, mma_in_flight=0))["predicted_us"]
    t1 = simulate("h200-gemm-ws", "h200", "1024x1024x8192", kw)["predicted_us"]
    assert t1 < t0


def test_trace_passes_the_checker_and_broken_traces_do_not():
    r = simulate("h200-gemm-ws", "h200", "1024x1024x1024", {})
    trace = to_chrome(r["_events"])
    assert check_chrome(trace) == []
    assert any(e["ph"] == "s" for e in trace["traceEvents"])  # barrier hand-offs are drawn as flows
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    bad = dict(traceEvents=[dict(xs[0], ts=0.0, dur=2.0), dict(xs[0], ts=1.0, dur=2.0),
                            dict(name="f", ph="s", ts=0, pid=0, tid=1, id=7), dict(name="x", ph="X", ts=0)])
    problems = " ".join(check_chrome(bad))
    assert "overlaps" in problems and "flow 7" in problems and "missing" in problems


def test_cli_json_keys_and_errors(capsys, tmp_path):
    assert main(["simulate", "--schedule", "h200-gemm-ws", "--shape", "2048x2048x2048", "--json",
                 "--trace", str(tmp_path / "t.json")]) == 0
    r = json.loads(capsys.readouterr().out)
    for key in ("schedule", "gpu", "shape", "predicted_us", "tflops", "roofline_tflops", "bound_by", "utilization",
                "roles", "critical_path", "events", "wall_s"):
        assert key in r
    assert set(r["roles"]) == {"producer", "consumer0", "consumer1"}
    assert check_chrome(json.loads((tmp_path / "t.json").read_text())) == []
    assert main(["simulate", "--schedule", "h200-gemm-ws", "--shape", "1x2", "--json"]) == 2
    assert main(["simulate", "--schedule", "h200-gemm-ws", "--shape", "64x64x64", "--param", "stages=9"]) == 2
    assert "does not fit shared memory" in capsys.readouterr().err
